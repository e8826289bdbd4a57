"""A release whose ledger database is locked by another writer: run in the page's thread it gives up within
its short wait and says so in words, with nothing reserved or spent; handed to the background it keeps
waiting as a batch job (cancellable, nothing reserved meanwhile) and completes the whole protocol once the
lock is released. The lock is a second connection holding the SQLite file's write lock, as another process
writing a long transaction would; the tests follow events (the job's messages), never time."""
from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest

from core.contracts import Cancelled
from core.privacy.ledger import Spend
from core.privacy.project_ledger import Cap, LedgerBusy, LedgerRelease, ProjectLedger
from core.releases import (CANCELLED, COMMITTED, NOTHING_RESERVED, REFUSED, WAITING, Release, release_when_free,
                           run_release)

# each busy try waits out SQLite's busy timeout (cut to 1 s here): left out of make test-quick
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("short_busy_timeout")]

KEY = "dataset:people"


@pytest.fixture
def ledger(tmp_path):
    book = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    book.set_cap(KEY, Cap(1.0, "epsilon", 1e-6))
    return book


@contextmanager
def write_locked(ledger: ProjectLedger):
    """Another connection holding the ledger file's write lock until the block ends (or ``unlock()``)."""
    other = sqlite3.connect(str(ledger.db.watch.path), isolation_level=None, timeout=0, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    state = {"held": True}

    def unlock() -> None:
        if state["held"]:
            other.execute("ROLLBACK")
            state["held"] = False
    try:
        yield unlock
    finally:
        unlock()
        other.close()


def computed(x, progress=None):
    if progress is not None:
        progress(1, 1, "computed")
    return ("result", x)


def a_release(epsilon: float = 0.25) -> Release:
    entry = LedgerRelease(KEY, f"busy-{epsilon}", "release", "Test page", "test action",
                          f"test release, epsilon {epsilon:g}", "d" * 64, (Spend("planned", epsilon, "epsilon"),),
                          "people")
    return Release("test", entry, computed, (7,))


def wait_for(condition, what: str, seconds: float = 120.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds`` (a deadline, not a timing)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for {what} after {seconds:g} s")
        time.sleep(0.05)


def test_an_interactive_release_on_a_locked_ledger_gives_up_in_words_and_reserves_nothing(ledger):
    with write_locked(ledger):
        outcome = run_release(a_release(), ledger, wait=0.0)
    assert outcome.state == REFUSED and isinstance(outcome.error, LedgerBusy)
    assert isinstance(outcome.error, ValueError)                     # a page shows it as any ledger refusal
    message = str(outcome.error)
    assert "locked" in message and "another" in message and "background" in message
    assert outcome.left == NOTHING_RESERVED
    assert ledger.reservations(KEY) == () and ledger.releases(KEY, "release") == ()


def test_without_a_wait_a_reservation_keeps_waiting_its_turn_behind_a_lock(ledger):
    """The default (a batch job, the command line) keeps trying after a busy try: here the holder lets go
    as soon as the ledger says it waits, and the reservation then goes through."""
    with write_locked(ledger) as unlock:
        reservation = ledger.reserve(a_release().entry, waiting=unlock)
    assert [r.id for r, _ in ledger.reservations(KEY)] == [reservation.id]


def test_kept_waiting_in_the_background_the_release_completes_once_the_lock_is_released(ledger, thread_queue):
    with write_locked(ledger) as unlock:
        outcome, job = release_when_free(a_release(), ledger, thread_queue, owner="tab", key="busy job",
                                         label="Test release")
        wait_for(lambda: job.message == WAITING, "the job to say it waits for the ledger")
        assert job.state == "running" and outcome.state == "running"
        assert ledger.reservations(KEY) == ()                        # nothing reserved while it waits
        unlock()
        assert job.wait(timeout=120)
    assert outcome.state == COMMITTED and outcome.result == ("result", 7)
    [made] = ledger.releases(KEY, "release")
    assert made.release_key == "busy-0.25" and ledger.reservations(KEY) == ()
    assert ledger.totals(KEY).epsilon == pytest.approx(0.25)


def test_a_background_wait_cancelled_before_the_lock_goes_reserves_and_spends_nothing(ledger, thread_queue):
    with write_locked(ledger):
        outcome, job = release_when_free(a_release(), ledger, thread_queue, owner="tab", key="busy cancel",
                                         label="Test release")
        wait_for(lambda: job.message == WAITING, "the job to say it waits for the ledger")
        job.cancel()
        assert job.wait(timeout=120)
        assert outcome.state == CANCELLED and isinstance(outcome.error, Cancelled)
        assert outcome.left == NOTHING_RESERVED
    wait_for(lambda: not any(t.name.startswith(f"job {job.id} ") for t in threading.enumerate()),
             "the job's thread to stop waiting")
    assert ledger.reservations(KEY) == () and ledger.releases(KEY, "release") == ()


def test_a_background_release_over_the_cap_is_refused_with_nothing_reserved(ledger, thread_queue):
    outcome, job = release_when_free(a_release(2.0), ledger, thread_queue, owner="tab", key="busy over",
                                     label="Test release")
    assert job.wait(timeout=120)
    assert outcome.state == REFUSED and outcome.left == NOTHING_RESERVED
    assert "cap" in str(outcome.error)
    assert ledger.reservations(KEY) == () and ledger.releases(KEY, "release") == ()
