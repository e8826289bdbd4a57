"""Background jobs on a Dask cluster report progress while they run and stop when cancelled.

The cluster is a LocalCluster in this process (``processes=False``) listening on 127.0.0.1 only: its
tasks run in worker threads here, so the job functions (``cluster_jobs_support``) and the test share
threading events, and every assertion is about the order of events, not elapsed time."""
from __future__ import annotations

import threading

import pytest
from distributed import LocalCluster

from core.cluster import ChannelReporter, ClusterChannel, client_for, close_clients, use_scheduler
from core.contracts import Cancelled
from core.jobs import CANCELLED, DONE, RUNNING, DaskExecutor, JobQueue
from core.privacy.project_ledger import ProjectLedger
from core.releases import Release, run_release
from tests.unit import cluster_jobs_support as support
from tests.unit.ledger_support import release
from tests.unit.sweep_support import small_aim_sweep

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick

GUARD = 120.0
"""Seconds after which a wait gives up (a hang fails the test instead of stalling the suite)."""


@pytest.fixture(scope="module")
def cluster():
    """A cluster in this process, not the session's shared one (worker processes): its jobs wait on this test's
    threading events (``cluster_jobs_support``), which only a worker thread of this process can see."""
    local = LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://", host="127.0.0.1",
                         dashboard_address="127.0.0.1:0", silence_logs=50)
    yield local
    close_clients()
    local.close()


@pytest.fixture
def queue(cluster):
    support.reset()
    address = cluster.scheduler_address
    yield JobQueue(DaskExecutor(address, client_for(address)), slots=1, cores=1)
    support.GO.set()
    support.SEEN.set()


def _until(condition, job=None) -> bool:
    """Wait for ``condition`` (looking again whenever the job changes state, or every 20 ms)."""
    guard = threading.Event()
    timer = threading.Timer(GUARD, guard.set)
    timer.start()
    try:
        while not condition() and not guard.is_set():
            (job.wait if job is not None else guard.wait)(0.02)
        return condition()
    finally:
        timer.cancel()


def test_a_cluster_job_reports_progress_before_it_finishes(queue):
    seen: list[tuple[int, int, str]] = []
    job = queue.submit(support.report_then_wait, 3, owner="A", key="progress", label="Rounds")
    assert _until(lambda: job.message == "round 1", job)
    seen.append((job.done, job.total, job.message))
    assert job.state == RUNNING                        # the job cannot end before the test has seen round 1
    support.SEEN.set()
    assert job.wait(GUARD) and job.state == DONE and job.outcome() == 3
    assert seen == [(1, 3, "round 1")]
    assert (job.done, job.total, job.message) == (3, 3, "round 3")   # the last round came before the outcome
    assert job.where.startswith("Dask cluster tcp://127.0.0.1:")


def test_cancel_stops_a_running_cluster_task_before_its_end_and_nothing_is_spent(queue, tmp_path):
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.set_no_cap("cps")
    job = queue.submit(support.held_rounds, 50, owner="A", key="release", label="Release")
    outcome: list = []

    def waited(progress=None):
        """A release's computation that waits for the job: the release commits only on its result."""
        job.wait()
        return job.outcome()

    page_release = Release("test", release(1.0, data="cps"), waited)
    page = threading.Thread(target=lambda: outcome.append(run_release(page_release, ledger)))
    page.start()
    assert _until(lambda: job.message == "round 1" and ledger.reservations("cps"), job)
    assert job.state == RUNNING and support.RECORD["round"] == 1       # the task holds in round 1 on a worker
    assert job.cancel()
    page.join(GUARD)
    support.GO.set()                                                    # round 1 ends; round 2 asks for the flag
    assert support.ENDED.wait(GUARD)
    assert support.RECORD == {"round": 2, "cancelled": True}             # stopped at its next report, not at 50
    [made] = outcome
    assert isinstance(made.error, Cancelled) and job.state == CANCELLED and job.result is None
    assert ledger.releases("cps") == () and ledger.reservations("cps") == ()
    assert ("done", "Release") not in queue.events
    ledger.db.dispose()


def test_a_task_whose_stop_flag_is_up_stops_at_its_first_report_and_sends_nothing(cluster):
    """As a job's task that was cancelled before it began: its first look at the flag ends it."""
    channel = ClusterChannel(client=client_for(cluster.scheduler_address))
    channel.stop()
    reporter = ChannelReporter(channel)
    with pytest.raises(Cancelled):
        reporter(0, 1, "first")
    assert channel.take() == []                                          # nothing was reported
    channel.close()


def test_a_sweep_on_the_cluster_relays_its_fits_rounds(cluster, monkeypatch):
    """A fan-out on the cluster reports rounds from inside its fits (the bar moves within a fit)."""
    from core.synthesis.sweep import run_sweep

    plan, frame = small_aim_sweep()
    relayed: list[str] = []
    real_take = ClusterChannel.take

    def recorded(self):
        reports = real_take(self)
        relayed.extend(r[-1] for r in reports)
        return reports

    monkeypatch.setattr(ClusterChannel, "take", recorded)
    heard: list[tuple[int, int, str]] = []
    before = cluster.scheduler.transition_counter
    with use_scheduler(cluster.scheduler_address):
        result = run_sweep(plan, frame, lambda *a: heard.append(a), n_jobs=2)
    assert cluster.scheduler.transition_counter > before                # the fits ran on the cluster
    assert set(result.overall_metrics["method"]) == {"stratified", "pooled"}
    assert any(" - AIM round" in m for m in relayed)                    # rounds from inside the workers' fits
    assert heard and heard[-1][0] == heard[-1][1]


class _Recording(JobQueue):
    """The queue, remembering every progress message a job delivered (a poll shows only the latest)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.heard: list[tuple[int, int, str]] = []

    def _progress_of(self, job):
        report = super()._progress_of(job)

        def record(done, total, message=""):
            self.heard.append((done, total, message))
            report(done, total, message)
        return record


def test_a_sweep_job_on_the_cluster_moves_the_bar_round_by_round(cluster, monkeypatch):
    """The whole way: the job's task, its fan-out to the cluster, the fits' rounds, back to the server."""
    import core.cluster
    from core.synthesis.sweep import run_sweep

    plan, frame = small_aim_sweep()
    monkeypatch.setattr(core.cluster, "REPORT_EVERY", 0.0)              # the job passes on every report it gets
    address = cluster.scheduler_address
    queue = _Recording(DaskExecutor(address, client_for(address)), slots=1, cores=1)
    job = queue.submit(run_sweep, plan, frame, owner="A", key="sweep", label="Computing")
    assert job.wait(GUARD) and job.state == DONE
    assert set(job.outcome().overall_metrics["method"]) == {"stratified", "pooled"}
    messages = [m for _, _, m in queue.heard]
    assert messages[0] == "sent to the cluster"
    assert any("AIM round" in m for m in messages)                       # rounds, not only finished fits
    fractions = [d / t for d, t, _ in queue.heard[1:] if t]
    assert any(0 < f < 1 for f in fractions)                             # the bar moved before the end
