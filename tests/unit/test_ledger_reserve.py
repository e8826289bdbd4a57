"""The project ledger's reserve -> run -> commit: the cap is checked in the transaction that stores the
reservation, so concurrent releases (threads and processes, SQLite and PostgreSQL) never together pass it,
and writers wait their turn instead of being refused."""
from __future__ import annotations

import math
import multiprocessing
import threading

import pytest
from sqlalchemy import text

from core.privacy.ledger import Spend
from core.privacy.project_ledger import (Cap, CapExceeded, CapUndecided, LedgerRelease, ProjectLedger,
                                         ReservationLost, check_cap, compose)
from tests.unit.ledger_support import (database_url, race_worker, record_simulations, release,
                                        reserve_and_commit)

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    yield from database_url(request.param, tmp_path)


@pytest.fixture
def ledger(url):
    book = ProjectLedger(url)
    yield book
    book.db.dispose()


class Clock:
    """A clock the test moves by hand (seconds since the epoch)."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- the cap decision


def test_a_release_needs_a_cap_decision_and_no_cap_is_a_recorded_choice(ledger):
    assert ledger.cap_decision("cps") is None
    with pytest.raises(CapUndecided, match="no cap"):
        ledger.reserve(release(0.5))
    sim = ledger.reserve(release(0.5, kind="simulation"))       # a simulation needs no decision
    assert ledger.commit(sim).kind == "simulation"

    ledger.set_no_cap("cps")
    assert ledger.cap_decision("cps") == "none" and ledger.cap("cps") is None
    assert "cps" in set(ledger.data_sets()["data_key"])
    ledger.commit(ledger.reserve(release(50.0)))                 # no cap: nothing to exceed
    assert ledger.totals("cps").epsilon == pytest.approx(50.0)
    assert ledger.export("cps")["no_cap"] is True

    ledger.set_cap("cps", Cap(60.0))
    assert ledger.cap_decision("cps") == Cap(60.0)
    ledger.set_cap("cps", None)                                   # back to undecided
    assert ledger.cap_decision("cps") is None
    with pytest.raises(CapUndecided):
        ledger.reserve(release(0.5))


# ---------------------------------------------------------------- one process


def test_two_releases_checked_before_either_is_recorded_cannot_both_pass(ledger):
    ledger.set_cap("cps", Cap(1.0))
    first, second = release(0.6), release(0.6)
    assert ledger.preview(first).within and ledger.preview(second).within   # each fits on its own
    res = ledger.reserve(first)
    with pytest.raises(CapExceeded) as over:
        ledger.reserve(second)
    message = str(over.value)
    assert "1.2" in message and "cap of epsilon 1" in message and "room left: epsilon 0.4" in message
    ledger.commit(res)
    assert [r.release_key for r in ledger.releases("cps")] == [first.release_key]
    assert ledger.totals("cps").epsilon == pytest.approx(0.6)


def test_commit_stores_the_detailed_spends_and_refuses_more_than_was_reserved(ledger):
    """A synthesizer's release is reserved at its planned total, then committed with every round's
    spend; spends that compose to more than the reservation are refused and nothing is committed."""
    ledger.set_cap("cps", Cap(2.0))
    res = ledger.reserve(release(1.0, key="fit"))
    rounds = tuple(Spend(f"round {i}", 0.25, "epsilon") for i in range(4))        # 4 x 0.25 = the 1.0 reserved
    done = ledger.commit(res, rounds)
    assert [s.label for s in done.spends] == [f"round {i}" for i in range(4)]
    assert ledger.totals("cps").epsilon == pytest.approx(1.0)

    greedy = ledger.reserve(release(0.5, key="greedy"))
    with pytest.raises(ValueError, match="spent more than was reserved"):
        ledger.commit(greedy, (Spend("round 0", 0.5, "epsilon"), Spend("round 1", 0.1, "epsilon")))
    assert [r.release_key for _, r in ledger.reservations("cps")] == ["greedy"]     # still only reserved
    assert ledger.totals("cps").epsilon == pytest.approx(1.0)
    ledger.cancel(greedy)
    assert ledger.reservations("cps") == ()


def test_commit_cancel_and_retries_count_once(ledger):
    ledger.set_cap("cps", Cap(1.0))
    rel = release(0.5, key="press-1")
    res = ledger.reserve(rel)
    assert ledger.reserve(rel) == res                  # the same press again: the same reservation
    assert ledger.releases("cps") == ()                # reserved, not yet released
    assert [r.release_key for _, r in ledger.reservations("cps")] == ["press-1"]
    done = ledger.commit(res)
    assert ledger.commit(res) == done                  # a retried commit returns the same release
    assert ledger.reserve(rel).id == res.id            # and reserving it again changes nothing
    assert len(ledger.releases("cps")) == 1 and ledger.reservations("cps") == ()
    assert ledger.totals("cps").epsilon == pytest.approx(0.5)

    other = ledger.reserve(release(0.5, key="press-2"))
    ledger.cancel(other)
    ledger.cancel(other)                               # idempotent
    with pytest.raises(ReservationLost):
        ledger.commit(other)
    assert ledger.totals("cps").epsilon == pytest.approx(0.5)
    ledger.commit(ledger.reserve(release(0.5, key="press-3")))   # the cancelled share is free again
    assert ledger.totals("cps").epsilon == pytest.approx(1.0)


def test_a_reservation_counts_until_committed_and_a_cancelled_one_holds_nothing(ledger):
    ledger.set_cap("cps", Cap(1.0))
    res = ledger.reserve(release(0.25, key="ok"))
    assert res.release_key == "ok"
    assert ledger.preview(release(0.75)).before.epsilon == pytest.approx(0.25)      # it counts while running
    ledger.commit(res)
    ledger.cancel(ledger.reserve(release(0.5, key="fails")))
    assert [r.release_key for r in ledger.releases("cps")] == ["ok"]
    assert ledger.reservations("cps") == ()
    assert ledger.preview(release(0.75)).within        # the cancelled one holds no budget


def test_a_reservation_counts_until_it_expires_then_cannot_be_committed(url):
    clock = Clock()
    ledger = ProjectLedger(url, clock=clock)
    try:
        ledger.set_cap("cps", Cap(1.0))
        stale = ledger.reserve(release(0.75, key="stale"), ttl_seconds=60)
        clock.now += 59
        with pytest.raises(CapExceeded):
            ledger.reserve(release(0.5))
        assert ledger.preview(release(0.5)).before.epsilon == pytest.approx(0.75)
        clock.now += 2                                    # past its expiry
        assert ledger.reservations("cps") == ()
        assert ledger.preview(release(0.5)).before.epsilon == 0.0
        fresh = ledger.reserve(release(0.5, key="fresh"))  # cleans the expired one up on the way
        with pytest.raises(ReservationLost, match="expired"):
            ledger.commit(stale)
        ledger.commit(fresh)
        with ledger.db.read_tx() as conn:
            keys = conn.execute(text("SELECT release_key FROM ledger_releases")).scalars().all()
        assert keys == ["fresh"]
        assert ledger.totals("cps").epsilon == pytest.approx(0.5)
    finally:
        ledger.db.dispose()


def test_preview_states_before_after_cap_and_repeat(ledger):
    ledger.set_cap("cps", Cap(2.0, "epsilon", 1e-6))
    made = ledger.commit(ledger.reserve(release(0.5, key="first", digest="a" * 64)))
    ledger.reserve(release(0.25, key="running"))         # another page's live reservation
    pending = release(1.0, key="new", digest="a" * 64)
    p = ledger.preview(pending)
    assert p.before.epsilon == pytest.approx(0.75) and p.after.epsilon == pytest.approx(1.75)
    assert p.cap == Cap(2.0) and not p.no_cap and p.within
    assert p.repeat_of == made
    assert p.message == ("Releasing spend 1.0 from cps spends epsilon 1: total epsilon 0.75 -> 1.75 "
                         "(cap epsilon 2 at delta 1e-06).")
    assert not ledger.preview(release(1.5)).within
    ledger.set_cap("rho-capped", Cap(0.5, "rho"))
    rho_p = ledger.preview(release(0.125, unit="rho", data="rho-capped"))
    assert rho_p.after.rho == pytest.approx(0.125) and "rho 0 -> 0.125" in rho_p.message
    undecided = ledger.preview(release(0.1, data="new-data"))
    assert not undecided.within and undecided.cap is None and not undecided.no_cap


def test_a_live_reservation_counts_in_projected_and_export_lists_it_apart(ledger):
    ledger.set_cap("cps", Cap(1.0))
    ledger.commit(ledger.reserve(release(0.25, key="made")))
    ledger.reserve(release(0.5, key="running"))
    assert ledger.projected(release(0.5)).spent == pytest.approx(1.25)   # over: the running one counts
    exported = ledger.export("cps")
    assert [r["amount"] for r in exported["releases"]] == [0.25]
    assert [r["amount"] for r in exported["reserved"]] == [0.5]
    assert exported["totals"]["epsilon"] == pytest.approx(0.25)


# ---------------------------------------------------------------- numbers from users and files


@pytest.mark.parametrize("amount", [1e308, 1e7])
def test_absurd_spends_are_refused_with_what_to_change(ledger, amount):
    ledger.set_no_cap("cps")
    for call in (ledger.reserve, ledger.preview, ledger.record):
        with pytest.raises(ValueError, match="above the largest the ledger accepts"):
            call(release(amount))
    ledger.set_cap("capped", Cap(1.0))
    with pytest.raises(ValueError, match="above the largest"):
        ledger.projected(release(amount, data="capped"))
    assert ledger.releases("cps") == () and ledger.reservations("cps") == ()


@pytest.mark.parametrize("kwargs, match", [
    ({"amount": 1e308}, "above the largest"), ({"amount": "lots"}, "must be a number"),
    ({"amount": math.nan}, "positive finite"), ({"amount": 1.0, "delta": 1.5}, "strictly between 0 and 1"),
    ({"amount": 1.0, "delta": "tiny"}, "must be a number")])
def test_absurd_caps_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Cap(**kwargs)


def test_stored_spends_too_large_to_add_report_an_unbounded_total_instead_of_crashing():
    from core.privacy.ledger import Spend
    huge = LedgerRelease("cps", "k", "release", "p", "a", "l", "d", (Spend("c", 1e308, "epsilon"),))
    assert compose([huge, huge]).epsilon == math.inf      # math.fsum would overflow
    assert not check_cap([huge, huge], Cap(1.0)).within
    assert not check_cap([huge, huge], Cap(1.0, "rho")).within


# ---------------------------------------------------------------- a ledger written before reservations


def test_an_existing_ledger_is_migrated_and_its_rows_count_as_committed(url):
    from core.database import make_engine
    engine = make_engine(url)
    ddl = ("CREATE TABLE ledger_releases (id {pk}, data_key VARCHAR(200) NOT NULL, data_label VARCHAR(200) "
           "NOT NULL, release_key VARCHAR(200) NOT NULL, kind VARCHAR(16) NOT NULL, page VARCHAR(80) NOT NULL, "
           "action VARCHAR(80) NOT NULL, label VARCHAR(200) NOT NULL, plan_digest VARCHAR(64) NOT NULL, "
           "created_utc VARCHAR(32) NOT NULL, CONSTRAINT uq_ledger_release UNIQUE (data_key, release_key))")
    pk = "INTEGER PRIMARY KEY AUTOINCREMENT" if url.startswith("sqlite") else "SERIAL PRIMARY KEY"
    with engine.begin() as conn:
        conn.execute(text(ddl.format(pk=pk)))
        conn.execute(text("CREATE TABLE ledger_spends (id {pk}, release_id INTEGER NOT NULL REFERENCES "
                          "ledger_releases(id), position INTEGER NOT NULL, label VARCHAR(200) NOT NULL, measured "
                          "VARCHAR(300) NOT NULL, amount FLOAT NOT NULL, unit VARCHAR(8) NOT NULL, delta FLOAT NOT "
                          "NULL, composition VARCHAR(12) NOT NULL, grp VARCHAR(200), part VARCHAR(200))".format(pk=pk)))
        for i, (kind, amount) in enumerate([("release", 0.5), ("simulation", 4.0), ("release", 0.25)], start=1):
            conn.execute(text("INSERT INTO ledger_releases (data_key, data_label, release_key, kind, page, action, "
                              "label, plan_digest, created_utc) VALUES ('cps', 'CPS', :k, :kind, 'p', 'a', 'l', 'd', "
                              "'2026-01-01T00:00:00+00:00')"), {"k": f"old-{i}", "kind": kind})
            conn.execute(text("INSERT INTO ledger_spends (release_id, position, label, measured, amount, unit, delta, "
                              "composition) VALUES (:i, 0, 'c', '', :a, 'epsilon', 0, 'sequential')"),
                         {"i": i, "a": amount})
    engine.dispose()
    ledger = ProjectLedger(url)
    try:
        assert [r.release_key for r in ledger.releases("cps")] == ["old-1", "old-2", "old-3"]
        assert ledger.totals("cps").epsilon == pytest.approx(0.75)
        ledger.set_cap("cps", Cap(1.0))
        with pytest.raises(CapExceeded):                  # the old releases count against the cap
            ledger.reserve(release(0.5))
        ledger.commit(ledger.reserve(release(0.25)))
        assert ledger.totals("cps").epsilon == pytest.approx(1.0)
    finally:
        ledger.db.dispose()
    again = ProjectLedger(url)                            # opening a migrated ledger changes nothing
    try:
        assert ledger.totals("cps") == again.totals("cps")
    finally:
        again.db.dispose()


# ---------------------------------------------------------------- races

N_WRITERS, PER_WRITER, AMOUNT, CAP = 8, 10, 0.125, 3.0
N_PROCESSES = 4     # spawned processes each import the project: fewer of them, each writing twice as much
FITS = 24   # 24 x 0.125 = 3.0 exactly (binary fractions add without rounding)


def _check_race(url: str, outcomes: list[dict], attempts: int = N_WRITERS * PER_WRITER) -> None:
    committed = [k for o in outcomes for k in o["committed"]]
    assert [e for o in outcomes for e in o["errors"]] == []        # nobody refused for a busy database
    assert sum(o["over_cap"] for o in outcomes) + len(committed) == attempts
    ledger = ProjectLedger(url)
    try:
        stored = [r.release_key for r in ledger.releases("cps")]
        assert sorted(stored) == sorted(committed)                  # every acknowledged release is stored
        assert len(committed) == FITS                                # and the cap was filled, never passed
        assert ledger.totals("cps").epsilon == pytest.approx(CAP)
        assert ledger.reservations("cps") == ()
    finally:
        ledger.db.dispose()


def test_threads_reserving_at_once_never_pass_the_cap(ledger, url):
    ledger.set_cap("cps", Cap(CAP))
    outcomes: list[dict] = [None] * N_WRITERS
    start = threading.Barrier(N_WRITERS)

    def writer(i: int) -> None:
        start.wait(timeout=60)
        outcomes[i] = reserve_and_commit(url, "cps", AMOUNT, PER_WRITER, f"t{i}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(N_WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads)
    _check_race(url, outcomes)


def test_processes_reserving_at_once_never_pass_the_cap(ledger, url):
    ledger.set_cap("cps", Cap(CAP))
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(N_PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=race_worker, args=(url, "cps", AMOUNT, 2 * PER_WRITER, f"p{i}", start, results))
             for i in range(N_PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * N_PROCESSES
    _check_race(url, outcomes, N_PROCESSES * 2 * PER_WRITER)


def test_concurrent_writers_wait_their_turn_instead_of_being_refused(ledger, url):
    outcomes: list[dict] = [None] * N_WRITERS
    threads = [threading.Thread(target=lambda i=i: outcomes.__setitem__(
        i, record_simulations(url, "cps", PER_WRITER, f"w{i}"))) for i in range(N_WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads)
    assert [e for o in outcomes for e in o["errors"]] == []
    assert len(ledger.releases("cps", "simulation")) == N_WRITERS * PER_WRITER


def test_a_reused_key_with_another_release_is_refused_and_the_same_release_stays_idempotent(ledger):
    """A release key names one release: reserving it again with a larger spend or another plan must not
    hand back the old reservation (the block would run uncounted); the same release again still does."""
    ledger.set_cap("cps", Cap(100.0))
    small = release(0.1, key="K")
    done = ledger.commit(ledger.reserve(small))
    with pytest.raises(ValueError, match="already used by another release"):
        ledger.reserve(release(50.0, key="K"))
    with pytest.raises(ValueError, match="already used by another release"):
        ledger.reserve(release(0.1, key="K", digest="e" * 64))
    assert ledger.releases("cps") == (done,) and ledger.reservations("cps") == ()
    assert ledger.totals("cps").epsilon == pytest.approx(0.1)
    assert ledger.commit(ledger.reserve(small)) == done            # the same release again: idempotent

    live = ledger.reserve(release(1.0, key="L"))                   # the same holds for a live reservation
    with pytest.raises(ValueError, match="already used by another release"):
        ledger.reserve(release(2.0, key="L"))
    assert ledger.reserve(release(1.0, key="L")) == live
    assert ledger.preview(release(0.5)).before.epsilon == pytest.approx(1.1)
