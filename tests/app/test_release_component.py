"""The release component (``dashboard/components/release_confirm.py``) on a small page whose release is made
in the page's run: a computation that fails drops its reservation and says nothing was spent; a commit and a
drop the ledger cannot write say the reservation counts until it expires; a release confirmed while another
writer holds the ledger's database locked says so in words after its short wait (nothing reserved) and
offers to keep waiting in the background, where it reserves, computes and commits once the lock is
released (the lock: a second connection holding the SQLite file's write lock). The protocol under them is
checked in tests/unit/test_releases.py and test_release_busy_ledger.py; each page's wiring of the
component in test_release_confirm.py."""
from __future__ import annotations

import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from core.privacy.project_ledger import Cap, ProjectLedger
from core.privacy.project_ledger import NOT_RECORDED
from dashboard.components import release_confirm
from tests import release_steps
from tests.release_steps import GATED_KEY as KEY
from tests.release_steps import confirm_release, has_button, inline_page


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    book = ProjectLedger()
    book.set_cap(KEY, Cap(1.0, "epsilon", 1e-6))
    release_steps.FAIL.clear()
    yield book
    release_steps.FAIL.clear()


def _page() -> AppTest:
    at = AppTest.from_function(inline_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_failed_release_drops_its_reservation_and_says_nothing_was_spent(ledger):
    release_steps.FAIL["message"] = "The counts could not be computed."
    at = confirm_release(_page(), "rel")
    assert not at.exception and not at.success
    assert any("The counts could not be computed." in e.value for e in at.error)
    assert any("nothing was spent" in i.value and "the reservation in the ledger was dropped" in i.value
               for i in at.info)
    assert ledger.releases(KEY, "release") == () and ledger.reservations(KEY) == ()


def test_a_failed_commit_says_the_reservation_counts_until_it_expires(ledger, monkeypatch):
    """The run succeeded but the ledger could not be written (database read-only or gone): neither the
    commit nor the cancel got through, so the reservation is still there; the page must not claim it was
    dropped."""
    def broken(self, *args, **kwargs):
        raise ValueError(f"{NOT_RECORDED}: the release was not committed; do not publish until it is "
                         "(attempt to write a readonly database).")

    at = _page()
    at.button(key="rel").click().run()
    monkeypatch.setattr(ProjectLedger, "commit", broken)
    monkeypatch.setattr(ProjectLedger, "cancel", broken)
    at.button(key="rel_confirm").click().run()
    assert not at.exception and not at.success
    [(res, _)] = ledger.reservations(KEY)
    assert ledger.releases(KEY, "release") == ()
    said = " ".join(i.value for i in at.info)
    assert "was dropped" not in said
    assert "counts toward this data set's total until it expires" in said and res.expires_utc in said


def test_a_locked_ledger_is_said_in_words_and_the_release_can_wait_in_the_background(short_busy_timeout, ledger,
                                                                                      thread_queue, monkeypatch):
    monkeypatch.setattr(release_confirm, "INTERACTIVE_WAIT", 0.0)    # one try (the busy timeout), then say so
    at = AppTest.from_function(inline_page, default_timeout=120)
    at.run()
    at.button(key="rel").click().run()
    assert has_button(at, "rel_confirm")
    other = sqlite3.connect(str(ledger.db.watch.path), isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")               # another writer holds the ledger's write lock
        at.button(key="rel_confirm").click().run()
        assert not at.exception
        [said] = [w.value for w in at.warning]
        assert "locked by another writer" in said and "Nothing was reserved and nothing was spent" in said
        assert "The release waiting is: test counts, epsilon 0" in said
        assert has_button(at, "rel_wait_background") and has_button(at, "rel_wait_drop")
        assert not at.success and ledger.reservations(KEY) == () and ledger.releases(KEY, "release") == ()
        at.run()                                       # a rerun keeps the offer
        assert has_button(at, "rel_wait_background")
    finally:
        other.execute("ROLLBACK")
        other.close()
    at.button(key="rel_wait_background").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == ["Released: counts 7"]
    [made] = ledger.releases(KEY, "release")
    assert made.release_key == "inline-release" and ledger.reservations(KEY) == ()
    at.run()                                           # shown once; the offer is gone
    assert not at.success and not has_button(at, "rel_wait_background")


def test_a_release_dropped_while_the_ledger_is_locked_spends_nothing(short_busy_timeout, ledger, thread_queue,
                                                                     monkeypatch):
    monkeypatch.setattr(release_confirm, "INTERACTIVE_WAIT", 0.0)
    at = AppTest.from_function(inline_page, default_timeout=120)
    at.run()
    at.button(key="rel").click().run()
    other = sqlite3.connect(str(ledger.db.watch.path), isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        at.button(key="rel_confirm").click().run()
        at.button(key="rel_wait_drop").click().run()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert not at.exception and not has_button(at, "rel_wait_background")
    assert any("nothing was spent" in i.value for i in at.info)
    assert ledger.reservations(KEY) == () and ledger.releases(KEY, "release") == ()
