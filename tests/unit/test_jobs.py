"""The background job queue: interactive work never waits behind batch work, sessions share the slots
in turn, a key re-attaches to its job, cancel frees the slot and spends nothing, errors reach the caller.

Scheduling is checked with a fake executor that starts nothing until the test says so, and with the
queue's own event log, so every assertion is about order, never about elapsed time. A few tests run
real job processes (forked by the job host) to check what only they can show: progress from the worker process,
an error's message, the fair-share width, and that Cancel kills the job and the workers it started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.contracts import Cancelled
from core.jobs import (CANCELLED, DONE, FAILED, QUEUED, RUNNING, JobQueue, ProcessExecutor, ThreadExecutor,
                       shippable)
from core.privacy.project_ledger import ProjectLedger
from core.releases import Release, run_release
from tests.unit import jobs_support
from tests.unit.jobs_support import Manual, noop
from tests.unit.ledger_support import release


def _submit(q, owner, label):
    return q.submit(noop, owner=owner, key=label, label=label)


def test_a_batch_job_does_not_delay_another_sessions_interactive_call():
    q = JobQueue(ThreadExecutor(), slots=1, cores=2)
    started, gate = threading.Event(), threading.Event()

    def sweep(progress=None):
        started.set()
        gate.wait()
        return "swept"

    a1 = q.submit(sweep, owner="A", key="a1", label="A sweep 1")
    a2 = q.submit(sweep, owner="A", key="a2", label="A sweep 2")
    assert started.wait(60)
    answer = q.interactive(lambda x: x + 1, 41, owner="B", label="B answer")
    assert answer == 42
    assert a1.state == RUNNING and a2.state == QUEUED           # B did not wait for either
    gate.set()
    assert a2.wait(60) and a1.outcome() == "swept"
    events = q.events
    assert events.index(("interactive-done", "B answer")) < events.index(("done", "A sweep 1"))
    assert events.index(("started", "A sweep 1")) < events.index(("interactive-start", "B answer"))


def test_sessions_take_turns_for_the_slots():
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=2)
    a = [_submit(q, "A", f"A{i}") for i in range(1, 4)]
    b1 = _submit(q, "B", "B1")
    assert ex.started == ["A1"]
    assert [j.position() for j in (b1, a[1], a[2])] == [1, 2, 3]          # B1 goes next, then A2, A3
    assert b1.status() == "Queued behind 1 job"
    for label in ("A1", "B1", "A2", "A3"):
        ex.finish[label](True, label)
    assert ex.started == ["A1", "B1", "A2", "A3"]
    assert all(j.state == DONE for j in (*a, b1))


def test_a_job_gets_its_fair_share_of_the_cores():
    ex = Manual()
    q = JobQueue(ex, slots=2, cores=4)
    _submit(q, "A", "alone")
    ex.finish["alone"](True, None)
    _submit(q, "A", "first of two")                 # alone when it starts: all four cores
    _submit(q, "B", "second of two")                # two jobs want the two slots: two cores each
    assert ex.widths == {"alone": 4, "first of two": 4, "second of two": 2}


def test_the_same_key_returns_the_same_job_until_it_fails_or_is_cancelled():
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=1)
    first = q.submit(noop, owner="A", key="k", label="L")
    assert q.submit(noop, owner="B", key="k", label="L") is first          # running: re-attached
    ex.finish["L"](True, 7)
    assert q.submit(noop, owner="A", key="k", label="L") is first and first.outcome() == 7
    assert ex.started == ["L"]                                              # done: not computed again
    failing = q.submit(noop, owner="A", key="f", label="F")
    ex.finish["F"](False, ValueError("no"))
    assert q.submit(noop, owner="A", key="f", label="F") is not failing    # a failure is tried again


def test_cancelling_a_queued_job_removes_it_and_it_never_starts():
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=1)
    _submit(q, "A", "A1")
    queued = _submit(q, "A", "A2")
    b1 = _submit(q, "B", "B1")
    assert b1.position() == 1 and queued.position() == 2
    assert queued.cancel()
    assert queued.state == CANCELLED and b1.position() == 1
    ex.finish["A1"](True, None)
    ex.finish["B1"](True, None)
    assert ex.started == ["A1", "B1"]                                       # A2 never ran
    with pytest.raises(Cancelled, match="A2 was cancelled"):
        queued.outcome()


def test_cancelling_a_running_job_frees_its_slot_drops_its_result_and_commits_nothing(tmp_path):
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=1)
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.set_no_cap("cps")
    running = _submit(q, "A", "release run")
    waiting = _submit(q, "B", "B1")
    outcome = []

    def waited(progress=None):
        running.wait()
        return running.outcome()                       # raises Cancelled: the release never commits

    page_release = Release("test", release(1.0, data="cps"), waited)
    page = threading.Thread(target=lambda: outcome.append(run_release(page_release, ledger)))
    page.start()
    deadline = time.monotonic() + 120                  # a bound on waiting, not an assertion on speed
    while not ledger.reservations("cps"):              # the page holds its reservation
        assert time.monotonic() < deadline, "the page never reserved its spend"
        page.join(0.01)
    assert running.cancel()
    page.join()
    [made] = outcome                                   # the page saw Cancelled, not a result
    assert isinstance(made.error, Cancelled) and "release run was cancelled" in str(made.error)
    assert ex.cancelled == ["release run"] and ex.started == ["release run", "B1"]   # the slot went to B1
    ex.finish["release run"](True, "late result")      # the killed run's result, should it still arrive
    assert running.state == CANCELLED and running.result is None
    assert waiting.state == RUNNING
    assert ledger.releases("cps") == () and ledger.reservations("cps") == ()
    assert ("done", "release run") not in q.events
    ledger.db.dispose()


def test_a_function_the_job_process_cannot_import_runs_on_a_thread_here():
    assert shippable(jobs_support.double)
    assert not shippable(lambda progress=None: 1)
    assert not shippable(noop.__get__(1))


# ---------------------------------------------------------------- real job processes


@pytest.fixture(scope="module")
def processes():
    q = JobQueue(ProcessExecutor(), slots=2, cores=2)
    yield q
    for job in q.running():
        job.cancel()


@pytest.mark.slow
def test_a_job_process_reports_progress_and_returns_its_result(processes):
    job = processes.submit(jobs_support.double, 21, owner="A", key="double 21", label="Doubling")
    assert job.wait(300)
    assert job.state == DONE and job.outcome() == 42
    assert (job.done, job.total, job.message) == (2, 2, "second round")     # reported from the worker process
    assert job.where == "this machine, background worker"


def test_a_failing_jobs_value_error_reaches_the_caller_with_its_message(processes):
    job = processes.submit(jobs_support.refuse, "Choose at least two strata.", owner="A", key="refuse",
                           label="Refusing")
    assert job.wait(300) and job.state == FAILED
    with pytest.raises(ValueError, match="^Choose at least two strata.$"):
        job.outcome()


def test_a_job_process_runs_at_lower_priority_with_its_share_of_cores(processes):
    job = processes.submit(jobs_support.worker_setting, owner="A", key="setting", label="Setting")
    assert job.wait(300)
    width, niceness = job.outcome()
    assert width == "2" and niceness >= os.nice(0) + 1


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:                                               # a zombie awaiting its parent counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_cancel_kills_a_running_job_and_the_workers_it_started(processes, tmp_path):
    job = processes.submit(jobs_support.hang, str(tmp_path), owner="A", key=f"hang {tmp_path}",
                           label="Hanging")
    pids = tmp_path / "pids"
    deadline = time.monotonic() + 120                    # a bound on waiting, not an assertion on speed
    while not pids.exists() or len(pids.read_text().split()) < 2:
        assert time.monotonic() < deadline, "the job never started its helper process"
        assert not job.wait(0.05), job.error             # still running; waits for the helper to start
    job_pid, helper_pid = map(int, pids.read_text().split())
    assert job.cancel()
    assert job.state == CANCELLED
    deadline = time.monotonic() + 60                     # a bound on waiting, not an assertion on speed
    while not (_gone(job_pid) and _gone(helper_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(job_pid) and _gone(helper_pid)
    with pytest.raises(Cancelled):
        job.outcome()


def test_with_a_cluster_configured_a_job_runs_there_as_one_task(monkeypatch, dask_cluster):
    local = dask_cluster
    try:
        monkeypatch.setenv("DASHBOARD_DASK_SCHEDULER", local.scheduler_address)
        q = JobQueue(slots=1, cores=1)
        before = local.scheduler.transition_counter
        job = q.submit(jobs_support.double, 4, owner="A", key="on the cluster", label="Doubling")
        assert job.wait(300) and job.outcome() == 8
        assert job.where == f"Dask cluster {local.scheduler_address}"
        assert local.scheduler.transition_counter > before            # the work reached the cluster
    finally:
        from core.cluster import close_clients

        close_clients()


def test_a_jobs_scratch_folder_is_removed_when_it_ends(processes, tmp_path):
    """joblib's shared-memory files go to a folder of the job's own, removed with the job, also when
    the job was killed (a killed process cannot remove them itself)."""
    job = processes.submit(jobs_support.scratch_folder, owner="A", key="scratch", label="Scratch")
    assert job.wait(300) and job.state == DONE
    folder = Path(job.outcome())
    assert folder.name.startswith(f"job{job.id}_")
    for _ in range(600):                      # the server removes it once the process has been reaped
        if not folder.exists():
            break
        time.sleep(0.1)
    assert not folder.exists()


def _orphan_after(child_delay: float) -> int:
    """A 'server' that forks a job and leaves at once, as a killed one does; the job starts its watch on
    the server ``child_delay`` seconds later. Returns the job's process id."""
    script = (
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from core import jobs\n"
        "jobs.ORPHAN_POLL = 0.05\n"
        "server = os.getpid()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.setsid()\n"
        "    os.close(1)\n"                   # the test reads the server's output to its end
        f"    time.sleep({child_delay})\n"
        "    jobs._end_with_the_server(server)\n"
        "    time.sleep(600)\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    return int(out.stdout.split()[0])


@pytest.mark.slow
@pytest.mark.parametrize("child_delay", [0.0, 1.0], ids=["watching before the server goes", "server gone first"])
def test_a_job_ends_with_the_server_that_started_it(child_delay):
    """A job whose server died (and with it the job host, its parent) kills its own process group, also when
    the server was gone before the job began to watch it (the job is then already re-parented)."""
    orphan = _orphan_after(child_delay)
    for _ in range(600):
        if not _alive(orphan):
            break
        time.sleep(0.1)
    else:
        os.kill(orphan, signal.SIGKILL)
        pytest.fail("the orphaned job kept running after its server was gone")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed process not yet reaped by whoever adopted it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_session_holding_every_slot_gives_one_back_when_another_session_waits():
    """Fair share: A's two sweeps took both slots before B came; B's job must not wait for them. A's
    most recently started job goes back to the front of A's queue (its late result is dropped) and
    starts again as soon as a slot is A's to take."""
    ex = Manual()
    q = JobQueue(ex, slots=2, cores=2)
    a1, a2, a3 = (_submit(q, "A", f"A{i}") for i in (1, 2, 3))
    assert ex.started == ["A1", "A2"]
    stale_a2 = ex.finish["A2"]
    b1 = _submit(q, "B", "B1")
    assert ex.cancelled == ["A2"] and a2.state == QUEUED and b1.state == RUNNING
    assert ex.started == ["A1", "A2", "B1"]
    assert ("preempted", "A2") in q.events
    stale_a2(True, "late")                          # the stopped run's result arrives after all
    assert a2.state == QUEUED and a2.result is None
    ex.finish["A1"](True, "a1")
    assert ex.started == ["A1", "A2", "B1", "A2"]   # A2 before A3: it was taken off a slot, not new
    ex.finish["A2"](True, "a2")
    assert a2.outcome() == "a2" and a3.state == RUNNING


def test_a_session_alone_keeps_every_slot_and_a_release_is_never_taken_off_its_slot():
    ex = Manual()
    q = JobQueue(ex, slots=2, cores=2)
    hooked = q.submit(noop, owner="A", key="rel", label="release", on_done=lambda ok, value: None)
    _submit(q, "A", "A2")
    assert ex.started == ["release", "A2"]          # nobody else waits: A uses both slots
    _submit(q, "B", "B1")
    assert ex.cancelled == ["A2"]                   # the job with a completion hook (a release) stays
    assert hooked.state == RUNNING


def test_a_job_past_its_time_limit_is_cancelled_with_a_message_and_frees_its_slot():
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=2)
    slow = q.submit(noop, owner="A", key="slow", label="slow sweep", limit=0.01)
    nxt = _submit(q, "B", "next")
    assert slow.wait(60)
    assert slow.state == CANCELLED and ex.cancelled == ["slow sweep"]
    with pytest.raises(Cancelled, match="time limit of 0.01 s"):
        slow.outcome()
    assert nxt.state == RUNNING


def test_a_time_limit_must_be_positive():
    q = JobQueue(Manual(), slots=1, cores=2)
    with pytest.raises(ValueError, match="time limit"):
        q.submit(noop, owner="A", key="k", label="x", limit=0)


def test_a_running_job_states_its_time_limit():
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=2, limit=45 * 60)
    job = _submit(q, "A", "sweep")
    assert job.status() == "Running on nowhere (stopped after 45 min)"
    ex.finish["sweep"](True, None)


def test_the_job_host_preloads_the_areas_registered_here_and_infrastructure_names_none():
    """The job host imports the areas the server has registered (``core.areas``), so core.jobs need not name
    them: a string naming an area in it would be an import the layer test cannot see."""
    import core.census  # noqa: F401 - registers its area, as the server's pages do
    import core.synthesis  # noqa: F401
    from core.jobs import PRELOAD, preload_modules

    loaded = preload_modules()
    assert loaded[:len(PRELOAD)] == PRELOAD and {"core.census", "core.synthesis"} <= set(loaded)
    assert len(loaded) == len(set(loaded))
    source = Path(preload_modules.__code__.co_filename).read_text()
    assert [a for a in ("census", "districts", "synthesis", "coherence", "fairness") if f'"core.{a}"' in source] == []
