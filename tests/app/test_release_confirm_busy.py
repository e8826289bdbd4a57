"""A release confirmed while another writer holds the ledger's database locked: the page says so in words
after its short wait (nothing reserved), and offers to keep waiting in the background; once the lock is
released that background job reserves, computes and commits, and the page shows the result. The lock is a
second connection holding the SQLite file's write lock."""
from __future__ import annotations

import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from core.privacy.project_ledger import Cap, ProjectLedger
from dashboard.components import release_confirm
from tests.release_steps import has_button

KEY = "dataset:people"


def page():
    import streamlit as st

    from core.privacy.ledger import Spend
    from core.privacy.project_ledger import LedgerRelease
    from core.releases import Release
    from dashboard.components.release_confirm import release_button

    def compute(x, progress=None):
        return f"counts {x}"

    entry = LedgerRelease("dataset:people", "busy-release", "release", "Test page", "test action",
                          "test counts, epsilon 0.25", "d" * 64, (Spend("planned", 0.25, "epsilon"),), "people")
    made = release_button("Release the counts", key="rel", release=Release("test", entry, compute, (7,)))
    if made is not None:
        st.success(f"Released: {made}")


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    book = ProjectLedger()
    book.set_cap(KEY, Cap(1.0, "epsilon", 1e-6))
    return book


def test_a_locked_ledger_is_said_in_words_and_the_release_can_wait_in_the_background(ledger, thread_queue,
                                                                                      monkeypatch):
    monkeypatch.setattr(release_confirm, "INTERACTIVE_WAIT", 0.0)    # one try (the busy timeout), then say so
    at = AppTest.from_function(page, default_timeout=120)
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
    assert made.release_key == "busy-release" and ledger.reservations(KEY) == ()
    at.run()                                           # shown once; the offer is gone
    assert not at.success and not has_button(at, "rel_wait_background")


def test_a_release_dropped_while_the_ledger_is_locked_spends_nothing(ledger, thread_queue, monkeypatch):
    monkeypatch.setattr(release_confirm, "INTERACTIVE_WAIT", 0.0)
    at = AppTest.from_function(page, default_timeout=120)
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
