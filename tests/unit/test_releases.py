"""The release protocol of ``core.releases``, with fake computations: reserve (cap checked in the same
transaction) -> compute -> commit the actual spends or drop the reservation -> publish or discard; in this
thread and as a background job whose completion hook is core's. Ordered by events and the fake executor's
calls, never by time."""
from __future__ import annotations

import threading

import pytest

from core.contracts import Cancelled
from core.jobs import JobQueue
from core.privacy.ledger import BudgetLedger, Spend
from core.privacy.project_ledger import Cap, CapExceeded, CapUndecided, LedgerRelease, ProjectLedger
from core.releases import (CANCELLED, COMMITTED, FAILED, NOTHING_RESERVED, NOTHING_SPENT, REFUSED, RUNNING,
                           Release, run_release, submit_release)
from tests.unit.jobs_support import Manual

KEY = "dataset:people"


@pytest.fixture
def ledger(tmp_path):
    book = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    book.set_cap(KEY, Cap(1.0, "epsilon", 1e-6))
    return book


def book_of(*amounts: float) -> BudgetLedger:
    """A computation's detailed ledger: one pure-epsilon spend per amount, in sequence."""
    out = BudgetLedger()
    for i, a in enumerate(amounts):
        out.spend(f"step {i}", a, "epsilon", measured=f"count {i}")
    return out


def entry(epsilon: float, key: str = "") -> LedgerRelease:
    return LedgerRelease(KEY, key or f"r{epsilon}", "release", "Test page", "test action",
                         f"test release, epsilon {epsilon:g}", "d" * 64, (Spend("planned", epsilon, "epsilon"),),
                         "people")


class Trace:
    """Fake computation, publication and discard that write down what happened and what the ledger held."""

    def __init__(self, ledger: ProjectLedger, result=None, error: BaseException | None = None):
        self.ledger, self.result, self.error, self.calls = ledger, result, error, []

    def compute(self, x, progress=None):
        self.calls.append(("compute", x, len(self.ledger.reservations(KEY))))
        if self.error is not None:
            raise self.error
        return self.result

    def publish(self, value):
        self.calls.append(("publish", len(self.ledger.releases(KEY, "release")), len(self.ledger.reservations(KEY))))
        return ("published", value)

    def discard(self):
        self.calls.append(("discard",))

    def release(self, epsilon: float, key: str = "") -> Release:
        return Release("test", entry(epsilon, key), self.compute, (3,), spent=lambda r: r,
                       publish=self.publish, discard=self.discard)


def test_a_release_reserves_computes_commits_its_detailed_spends_then_publishes(ledger):
    trace = Trace(ledger, result=book_of(0.25, 0.25))
    outcome = run_release(trace.release(0.5), ledger)
    assert outcome.state == COMMITTED and outcome.result == ("published", trace.result)
    # computed under its reservation; published only once committed (one release, no reservation left)
    assert trace.calls == [("compute", 3, 1), ("publish", 1, 0)]
    [made] = ledger.releases(KEY, "release")
    assert [s.amount for s in made.spends] == [0.25, 0.25] == [s.amount for s in outcome.spends]
    assert ledger.totals(KEY).epsilon == pytest.approx(0.5)


def test_a_computation_that_spent_more_than_was_reserved_is_not_committed_nor_published(ledger):
    trace = Trace(ledger, result=book_of(0.5, 0.25))
    outcome = run_release(trace.release(0.5), ledger)
    assert outcome.state == REFUSED and "spent more than was reserved" in str(outcome.error)
    assert trace.calls == [("compute", 3, 1), ("discard",)]
    assert not ledger.releases(KEY, "release") and not ledger.reservations(KEY)
    assert outcome.left == NOTHING_SPENT
    with pytest.raises(ValueError, match="spent more than was reserved"):
        outcome.value()


@pytest.mark.parametrize("error, state", [(ValueError("no strata"), FAILED), (RuntimeError("boom"), FAILED),
                                          (Cancelled(), CANCELLED)])
def test_a_failed_or_cancelled_computation_drops_its_reservation_and_discards(ledger, error, state):
    trace = Trace(ledger, error=error)
    outcome = run_release(trace.release(0.5), ledger)
    assert outcome.state == state and outcome.error is error and outcome.result is None
    assert trace.calls == [("compute", 3, 1), ("discard",)]
    assert not ledger.releases(KEY, "release") and not ledger.reservations(KEY)
    assert outcome.left == NOTHING_SPENT


def test_an_interrupted_run_drops_its_reservation_and_raises_again(ledger):
    trace = Trace(ledger, error=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_release(trace.release(0.5), ledger)
    assert not ledger.reservations(KEY) and not ledger.releases(KEY, "release")


def test_over_the_cap_or_without_a_cap_decision_nothing_is_reserved_or_computed(ledger, tmp_path):
    run_release(Trace(ledger, result=book_of(0.75)).release(0.75, "first"), ledger)
    trace = Trace(ledger, result=book_of(0.5))
    outcome = run_release(trace.release(0.5, "second"), ledger)          # 0.75 + 0.5 > the cap of 1
    assert outcome.state == REFUSED and isinstance(outcome.error, CapExceeded)
    assert outcome.reservation is None and outcome.left == NOTHING_RESERVED and trace.calls == []
    assert len(ledger.releases(KEY, "release")) == 1 and not ledger.reservations(KEY)
    fresh = ProjectLedger(f"sqlite:///{tmp_path / 'undecided.sqlite'}")
    undecided = run_release(Trace(fresh).release(0.1), fresh)
    assert undecided.state == REFUSED and isinstance(undecided.error, CapUndecided)


def test_a_drop_the_ledger_cannot_write_says_the_reservation_counts_until_it_expires(ledger, monkeypatch):
    def unwritable(res):
        raise ValueError("the database file was deleted")

    monkeypatch.setattr(ledger, "cancel", unwritable)
    outcome = run_release(Trace(ledger, error=ValueError("no strata")).release(0.5), ledger)
    assert outcome.state == FAILED and "still counts toward this data set's total until it expires" in outcome.left
    assert outcome.reservation.expires_utc in outcome.left
    assert len(ledger.reservations(KEY)) == 1                  # over-stated until it expires, never missed


def test_a_publication_that_fails_keeps_the_commit_and_says_so(ledger):
    def refuse(value):
        raise ValueError("the output folder got files meanwhile")

    release = Release("test", entry(0.5), lambda progress=None: book_of(0.5), spent=lambda r: r, publish=refuse)
    outcome = run_release(release, ledger)
    assert outcome.state == COMMITTED and "could not be put in place" in outcome.notice
    assert len(ledger.releases(KEY, "release")) == 1
    with pytest.raises(ValueError, match="could not be put in place"):
        outcome.value()


def test_two_releases_reserved_at_once_never_pass_the_cap_together(ledger):
    """Two threads release 0.6 each against a cap of 1 on one SQLite file: the first computation is held
    until the other release has been answered, so both reservations are checked while one is live."""
    gate, started, outcomes = threading.Event(), threading.Event(), {}

    def held(progress=None):
        started.set()
        assert gate.wait(60), "the test never opened the gate"
        return book_of(0.6)

    def one(name):
        outcomes[name] = run_release(Release("test", entry(0.6, name), held, spent=lambda r: r), ledger)

    threads = [threading.Thread(target=one, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    assert started.wait(60)
    for _ in range(6000):              # until the release that is not computing has been answered (bounded)
        if outcomes:
            break
        threads[0].join(0.01)
    gate.set()
    for t in threads:
        t.join(60)
    states = sorted(o.state for o in outcomes.values())
    assert states == [COMMITTED, REFUSED]
    refused = next(o for o in outcomes.values() if o.state == REFUSED)
    assert isinstance(refused.error, CapExceeded)
    assert ledger.totals(KEY).epsilon == pytest.approx(0.6) and not ledger.reservations(KEY)


def test_as_a_job_the_completion_hook_commits_then_publishes_whoever_watches(ledger):
    ex = Manual()
    queue = JobQueue(ex, slots=1, cores=1)
    trace = Trace(ledger)
    outcome, job = submit_release(trace.release(0.5), ledger, queue, owner="A", label="J",
                                  key=lambda res: f"J{res.id}")
    assert job.key == f"J{outcome.reservation.id}" and outcome.state == RUNNING
    assert len(ledger.reservations(KEY)) == 1 and job.args == (3,)
    ex.finish["J"](True, book_of(0.5))                         # the job's process answered: the hook settles it
    assert outcome.state == COMMITTED and outcome.result == ("published", outcome.result[1])
    assert trace.calls == [("publish", 1, 0)] and len(ledger.releases(KEY, "release")) == 1


def test_as_a_job_a_cancel_drops_the_reservation_and_discards(ledger):
    ex = Manual()
    queue = JobQueue(ex, slots=1, cores=1)
    trace = Trace(ledger)
    outcome, job = submit_release(trace.release(0.5), ledger, queue, owner="A", label="J", key="J")
    assert job.cancel()
    assert outcome.state == CANCELLED and isinstance(outcome.error, Cancelled) and outcome.left == NOTHING_SPENT
    assert trace.calls == [("discard",)] and not ledger.reservations(KEY) and not ledger.releases(KEY, "release")


def test_as_a_job_a_release_over_the_cap_is_never_submitted(ledger):
    ex = Manual()
    queue = JobQueue(ex, slots=1, cores=1)
    outcome, job = submit_release(Trace(ledger).release(1.5), ledger, queue, owner="A", label="J", key="J")
    assert job is None and outcome.state == REFUSED and isinstance(outcome.error, CapExceeded)
    assert ex.started == [] and not ledger.reservations(KEY)


def test_a_seeded_simulation_is_not_a_release():
    sim = LedgerRelease(KEY, "s", "simulation", "Test page", "a", "b", "d" * 64, (Spend("x", 1.0, "epsilon"),))
    with pytest.raises(ValueError, match="simulations are recorded apart"):
        Release("test", sim, lambda progress=None: None)


# ------------------------------------------------------------------------------------------- pending entries

def test_two_copies_of_the_same_people_and_budget_record_the_same_digest():
    from core.fairness.private_pairs import PrivatePairsPlan
    from core.releases import pairs_copy_release
    plan = PrivatePairsPlan(epsilon=0.75)
    a, b = (pairs_copy_release(plan, c).entry for c in ("c" * 16, "d" * 16))
    assert a.release_key != b.release_key and a.plan_digest == b.plan_digest
    assert a.release_key.endswith("c" * 16)                        # the stored copy's id closes its key
    assert pairs_copy_release(plan.replace(epsilon=0.5), "c" * 16).entry.plan_digest != a.plan_digest


def test_a_release_part_digest_leaves_out_what_the_release_does_not_depend_on():
    from core.contracts import DataRef
    from core.releases import release_entry
    from core.synthesis import ReleasePlan
    from core.synthesis.mean_release import MeanReleasePlan
    plan = MeanReleasePlan(data=DataRef("cps"), column="income", strata=("sex",), category="50K+")
    spent = BudgetLedger()
    spent.spend("mean", 1.0, "epsilon")

    def entry(p, part):
        return release_entry(p, "Page", "act", "label", spent, fresh=True, part=part)

    same = [entry(plan.replace(seed=s), ReleasePlan(epsilon=1.0, seed=0)) for s in (0, 9)]
    assert same[0].plan_digest == same[1].plan_digest and same[0].release_key != same[1].release_key
    assert entry(plan, ReleasePlan(epsilon=2.0)).plan_digest != same[0].plan_digest
    other_data = entry(plan.replace(data=DataRef("adult")), ReleasePlan(epsilon=1.0))
    assert other_data.plan_digest != same[0].plan_digest                  # the data reference is in it
    assert entry(plan, None).plan_digest == plan.digest()                 # no part: the whole plan, as before


@pytest.mark.parametrize("kw", [{}, {"noise": "gaussian", "size_policy": "public", "sizes_declared_public": True},
                                {"pooled_share": 0.0}])
def test_the_reserved_mean_release_spends_exactly_what_the_release_spends(kw):
    """The pending entry holds the reservation's spends: measurement by measurement the release's own."""
    from core.contracts import DataRef
    from core.releases import stratified_mean_release
    from core.synthesis.mean_release import MeanReleasePlan, release_stratified_mean
    plan = MeanReleasePlan(data=DataRef("cps"), column="income", strata=("sex", "race"), epsilon=1.5,
                           category="50K+", **kw)
    made = release_stratified_mean(plan).budget
    reserved = stratified_mean_release(plan, None, page="Page", label="mean").entry
    keep = ("label", "amount", "unit", "composition", "group", "part")
    assert [tuple(getattr(s, k) for k in keep) for s in reserved.spends] == \
        [tuple(getattr(s, k) for k in keep) for s in made.spends]
