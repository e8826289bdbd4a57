"""One queue of background jobs for the whole server process, shared fairly between sessions.

Work has a class. *Interactive* work (an answer, a refresh, a display change) runs at once in the
caller's thread through :meth:`JobQueue.interactive` and never waits for a slot. *Batch* work (sweeps,
the learner's frontier, audits, ensembles) is submitted with :meth:`JobQueue.submit` and runs in the
background, outside the server process, at most ``slots`` jobs at a time:

- a job is named by its key (run name, plan digest, data fingerprint); submitting a key that is queued,
  running or done returns the job already there, so a page left and opened again re-attaches to it;
- the next job to start is taken from the owner (browser session) with the fewest running jobs, ties
  going to the owner served least recently, so one session's six sweep points cannot hold every slot
  while another session's learner waits;
- a session alone may use every slot, but when another session's job waits, a session holding more than
  its share (the slots divided by the sessions that want one) gives back its most recently started job:
  that job is stopped and put back at the front of its session's queue, to start again on its next turn
  (a job with a completion hook, a release, is never taken off its slot);
- every job has a time limit (:data:`DEFAULT_LIMIT`, or ``limit=`` at submit), counted from its start;
  a job still running then is cancelled, and its outcome says why;
- a job's fan-outs get its fair share of the cores as their ``n_jobs``: the cores divided by the jobs
  that want a slot when it starts (running and queued, at most ``slots``);
- cancel of a queued job drops it; of a running job kills its process group (its joblib workers too),
  or on a Dask cluster raises its stop flag, which the task answers at its next progress call, and frees
  its slot; a cancelled job never delivers a result, so a release waiting on it never commits.

Where a job runs is the executor's business. :class:`ProcessExecutor` starts one process per job, forked
by a :class:`JobHost` that already imported ``core`` (a fork, not a fresh interpreter), lowers its
priority and puts it in a session of its own; progress and the pickled result come back over a socket
drained by a thread. :class:`DaskExecutor` sends the job to the cluster named by
``DASHBOARD_DASK_SCHEDULER`` as one task (falling back to this machine when the scheduler is away), its
progress and Cancel carried by the cluster's own queue and event.
:class:`ThreadExecutor` runs the job on a thread of this process: for work that cannot be named by
module and attribute (a closure), and for tests. The executor is an argument, so tests drive the queue
with fake jobs and check the order of events, not the clock.
"""
from __future__ import annotations

import atexit
import importlib
import itertools
import logging
import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Protocol

from core.areas import AREAS
from core.contracts import Cancelled
from core.cache import adopt_code_digests, fingerprint_of, known_code_digests, memory
from core.cluster import (ChannelReporter, ClusterChannel, client_for, default_n_jobs, scheduler_address,
                          use_scheduler)

__all__ = ["BATCH", "CANCELLED", "DONE", "FAILED", "INTERACTIVE", "QUEUED", "RUNNING", "AutoExecutor",
           "DaskExecutor", "Job", "JobQueue", "ProcessExecutor", "ThreadExecutor", "job_queue", "run_key",
           "set_job_queue", "shippable"]

log = logging.getLogger(__name__)

BATCH, INTERACTIVE = "batch", "interactive"
EVENTS_KEPT = 10_000
"""The queue's event log keeps this many latest events (a server runs for weeks)."""
QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
LIVE = (QUEUED, RUNNING)
REUSABLE = (QUEUED, RUNNING, DONE)

LOCAL_WHERE = "this machine, background worker"
THREAD_WHERE = "this machine, server process"
NICE = 5
"""Niceness added to a background job's process, so the web server's own threads come first."""
WORKER_ENV = "DASHBOARD_JOB_WORKER"
""""process" (default) or "thread": see :func:`worker_kind`."""
TRACE_ENV = "DASHBOARD_JOB_TRACE"
"""When set, each job process appends ``<key>`` as a line to this file as it starts (tests count runs)."""
DEFAULT_LIMIT = 2 * 3600.0
"""Seconds a batch job may run before it is cancelled (``DASHBOARD_JOB_LIMIT`` overrides it)."""
LIMIT_ENV = "DASHBOARD_JOB_LIMIT"
PRELOAD = ("core.jobs", "core.cache", "core.parallel")
"""Infrastructure the job host always imports once (see :func:`preload_modules` for the areas)."""


def preload_modules() -> tuple[str, ...]:
    """What the job host imports before it forks its first job: :data:`PRELOAD` and the package of every
    plan type an area has registered in this process (``core.areas``: the server has imported its pages
    by then), so a job of any page starts without importing its area again. Infrastructure names no area."""
    areas = sorted({".".join(plan.__module__.split(".")[:2]) for plan in AREAS.plan_types()})
    return tuple(dict.fromkeys([*PRELOAD, *areas]))


def worker_kind() -> str:
    """Where batch jobs run on this machine, from ``DASHBOARD_JOB_WORKER``: "process" (default, one
    process per job) or "thread" (a thread of the server: for a debugger, or a test that watches
    functions of this process)."""
    kind = os.environ.get(WORKER_ENV, "").strip().lower() or "process"
    if kind not in ("process", "thread"):
        raise ValueError(f"{WORKER_ENV} must be 'process' or 'thread'; got {kind!r}.")
    return kind


def run_key(run: Callable, plan, data=None) -> str:
    """A job's key: the run's name, the plan's digest and the data's fingerprint, in the result cache
    where its result goes (whose folder names the code version): the same key is the same result."""
    name = f"{getattr(run, '__module__', '?')}.{getattr(run, '__qualname__', repr(run))}"
    return f"{name}:{plan.digest()}:{fingerprint_of(data)}@{memory().location}"


def shippable(func: Callable) -> bool:
    """Whether ``func`` can be named by module and attribute (pickled by reference), so a fresh process
    running ``core`` finds the same function; a closure, a replaced attribute or anything defined in
    ``__main__`` (a page script) cannot."""
    if getattr(func, "__module__", None) in ("__main__", "__mp_main__", None):
        return False
    try:
        return pickle.loads(pickle.dumps(func)) is func
    except Exception:  # local functions, lambdas, objects holding locks: not shippable
        return False


@dataclass(eq=False)
class Job:
    """One piece of batch work: what to call, whose it is, its state and its progress."""

    id: int
    key: str
    owner: str
    label: str
    kind: str
    func: Callable = field(repr=False)
    args: tuple = field(repr=False)
    state: str = QUEUED
    done: int = 0
    total: int = 0
    message: str = ""
    where: str = ""
    n_jobs: int = 0
    result: Any = field(default=None, repr=False)
    error: BaseException | None = field(default=None, repr=False)
    handle: Any = field(default=None, repr=False)
    finished: threading.Event = field(default_factory=threading.Event, repr=False)
    queue: "JobQueue | None" = field(default=None, repr=False)
    started_at: float | None = None
    seconds: float | None = None
    """Wall seconds from start to a successful finish (what run-time estimates are checked against)."""
    observed: bool = False
    limit: float = DEFAULT_LIMIT
    """Seconds the job may run once started; then it is cancelled with :attr:`reason` saying so."""
    reason: str = ""
    """Why a cancelled job was cancelled, when it was not the user (its time limit)."""
    run: int = 0
    """How many times the job was started; a stopped run's late progress or result is dropped."""
    timer: threading.Timer | None = field(default=None, repr=False)
    on_done: Callable[[bool, Any], None] | None = field(default=None, repr=False)
    """Called once when the job ends (see :meth:`JobQueue.submit`); None once called."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is done, failed or cancelled (True), or ``timeout`` seconds pass (False)."""
        return self.finished.wait(timeout)

    def outcome(self):
        """The result; the job's own exception when it failed; :class:`Cancelled` when it was cancelled."""
        if self.state == DONE:
            return self.result
        if self.state == FAILED:
            raise self.error
        if self.state == CANCELLED:
            raise Cancelled(self.reason or f"{self.label} was cancelled.")
        raise RuntimeError(f"{self.label} has not finished ({self.state}).")

    def position(self) -> int:
        """How many jobs this one waits behind: running jobs plus queued jobs that start before it
        (0 once it runs)."""
        return self.queue.position(self) if self.queue is not None and self.state == QUEUED else 0

    def status(self) -> str:
        """"Queued behind 2 jobs", "Running on this machine, background worker (stopped after 2 h)", "Done", ..."""
        if self.state == QUEUED:
            n = self.position()
            return f"Queued behind {n} job{'' if n == 1 else 's'}"
        if self.state == RUNNING:
            where = f"Running on {self.where}" if self.where else "Running"
            return f"{where} (stopped after {describe_limit(self.limit)})"
        return self.state.capitalize()

    def status_inline(self) -> str:
        """:meth:`status` as it reads inside a sentence: "queued behind 2 jobs", "running on ..."."""
        status = self.status()
        return status[:1].lower() + status[1:]

    def cancel(self) -> bool:
        return self.queue.cancel(self) if self.queue is not None else False


class Handle(Protocol):
    def cancel(self) -> None: ...


class Executor(Protocol):
    """Starts a job somewhere; reports ``on_progress(done, total, message)`` and once ``on_finish(ok,
    value)`` (``value`` the result, or the exception); the returned handle's ``cancel`` stops it."""

    def start(self, job: Job, on_progress: Callable[[int, int, str], None],
              on_finish: Callable[[bool, Any], None]) -> Handle: ...


class JobQueue:
    """The process-wide registry and scheduler of jobs (see the module docstring)."""

    def __init__(self, executor: Executor | None = None, *, slots: int | None = None, cores: int | None = None,
                 keep: int = 32, limit: float | None = None) -> None:
        self.executor = executor if executor is not None else AutoExecutor()
        self.limit = check_limit(limit if limit is not None else float(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT)))
        """Seconds a job may run unless it was submitted with a limit of its own."""
        self._cores = cores
        self.slots = max(1, int(slots if slots is not None else default_n_jobs()))
        self.keep = keep
        self.events: deque[tuple[str, str]] = deque(maxlen=EVENTS_KEPT)
        """``(event, label)`` in the order things happened: queued, started, done, failed, cancelled,
        interactive-start, interactive-done."""
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._jobs: dict[int, Job] = {}
        self._by_key: dict[str, Job] = {}
        self._waiting: dict[str, deque[Job]] = {}
        self._served: dict[str, int] = {}
        self._turn = itertools.count()

    @property
    def cores(self) -> int:
        """Cores the running jobs share: as given, else ``DASHBOARD_N_JOBS`` or all cores (read now)."""
        return max(1, int(self._cores if self._cores is not None else default_n_jobs()))

    # ------------------------------------------------------------------ batch lane

    def submit(self, func: Callable, *args, owner: str, key: str, label: str, kind: str = BATCH,
               on_done: Callable[[bool, Any], None] | None = None, limit: float | None = None) -> Job:
        """Queue ``func(*args, progress=...)`` as a batch job, or return the job already holding ``key``
        (queued, running or done; its own ``on_done`` stays). ``kind="interactive"`` runs at once instead
        (see :meth:`interactive`).

        ``on_done(ok, value)`` is called once, in this server process, when the job ends: ``(True, result)``
        on success, ``(False, exception)`` on failure, ``(False, Cancelled)`` on a cancel (of a queued job
        too). It runs on whichever thread learned the outcome (the job's pipe reader, the cluster follower,
        the thread that cancelled), after the job's state is set and its process is told to stop, and
        before :meth:`Job.wait` returns, so whoever waits for the job finds the hook's work done. An
        exception of the hook is logged, never raised. A server that dies first never calls it.

        ``limit`` (seconds, default the queue's :attr:`limit`) is how long the job may run once started."""
        if kind not in (BATCH, INTERACTIVE):
            raise ValueError(f"A job's kind is 'batch' or 'interactive'; got {kind!r}.")
        limit = self.limit if limit is None else check_limit(limit)
        with self._lock:
            have = self._by_key.get(key)
            if have is not None and have.state in REUSABLE:
                return have
            job = Job(next(self._ids), key, owner, label, kind, func, args, queue=self, on_done=on_done,
                      limit=limit)
            self._jobs[job.id] = job
            self._by_key[key] = job
            if kind == INTERACTIVE:
                job.state, job.where = RUNNING, THREAD_WHERE
            else:
                self._waiting.setdefault(owner, deque()).append(job)
                self._log("queued", job)
        if kind == INTERACTIVE:
            self._run_inline(job)
            return job
        self._dispatch()
        return job

    def cancel(self, job: Job) -> bool:
        """Drop a queued job or stop a running one (its slot goes to the next job); False when it had
        already finished."""
        with self._lock:
            if job.state not in LIVE:
                return False
            was = job.state
            job.state = CANCELLED
            if was == QUEUED:
                self._waiting[job.owner].remove(job)
                if not self._waiting[job.owner]:
                    del self._waiting[job.owner]
            handle = job.handle
            job.func, job.args, job.handle = None, (), None
            _stop_timer(job)
            self._log("cancelled", job)
            hook = self._take_hook(job)
            self._prune()
        if was == RUNNING and handle is not None:
            handle.cancel()
        if hook is not None:
            self._call_hook(job, hook, False, Cancelled(f"{job.label} was cancelled."))
        self._dispatch()
        return True

    def cancel_key(self, key: str) -> bool:
        """Cancel the live job holding ``key``, if there is one."""
        with self._lock:
            job = self._by_key.get(key)
        return job is not None and self.cancel(job)

    def find(self, key: str) -> Job | None:
        with self._lock:
            return self._by_key.get(key)

    def jobs(self) -> list[Job]:
        """Every job still listed, oldest first."""
        with self._lock:
            return list(self._jobs.values())

    def jobs_of(self, owner: str) -> list[Job]:
        """``owner``'s jobs, oldest first."""
        with self._lock:
            return [j for j in self._jobs.values() if j.owner == owner]

    def running(self) -> list[Job]:
        with self._lock:
            return [j for j in self._jobs.values() if j.state == RUNNING and j.kind == BATCH]

    def position(self, job: Job) -> int:
        """Running batch jobs plus the queued jobs that would start before ``job``."""
        with self._lock:
            if job.state != QUEUED:
                return 0
            ahead = len(self.running())
            for nxt in self._order():
                if nxt is job:
                    return ahead
                ahead += 1
            return ahead

    # ------------------------------------------------------------------ interactive lane

    def interactive(self, func: Callable, *args, owner: str, label: str, **kwargs):
        """``func(*args, **kwargs)`` now, in the caller's thread: interactive work takes no batch slot and
        waits behind no batch job."""
        job = Job(0, "", owner, label, INTERACTIVE, func, args, queue=None)
        with self._lock:
            self._log("interactive-start", job)
        try:
            return func(*args, **kwargs)
        finally:
            with self._lock:
                self._log("interactive-done", job)

    # ------------------------------------------------------------------ scheduling

    def _log(self, event: str, job: Job) -> None:
        self.events.append((event, job.label))

    def _order(self) -> list[Job]:
        """The queued jobs in the order they would start: repeatedly the owner with the fewest running
        jobs (then the one served least recently), oldest job of that owner first."""
        running: dict[str, int] = {}
        for j in self.running():
            running[j.owner] = running.get(j.owner, 0) + 1
        served = dict(self._served)
        waiting = {o: list(q) for o, q in self._waiting.items() if q}
        order = []
        turn = max(served.values(), default=0)
        while waiting:
            owner = min(waiting, key=lambda o: (running.get(o, 0), served.get(o, -1)))
            order.append(waiting[owner].pop(0))
            if not waiting[owner]:
                del waiting[owner]
            running[owner] = running.get(owner, 0) + 1
            turn += 1
            served[owner] = turn
        return order

    def _dispatch(self) -> None:
        """Start queued jobs while slots are free, first taking a slot back for a waiting session (see
        :meth:`_preempt`)."""
        self._preempt()
        while True:
            with self._lock:
                if len(self.running()) >= self.slots:
                    return
                order = self._order()
                if not order:
                    return
                job = order[0]
                self._waiting[job.owner].popleft()
                if not self._waiting[job.owner]:
                    del self._waiting[job.owner]
                self._served[job.owner] = next(self._turn)
                job.state = RUNNING
                job.run += 1
                job.started_at = time.monotonic()
                waiting = sum(len(q) for q in self._waiting.values())
                job.n_jobs = max(1, self.cores // min(self.slots, len(self.running()) + waiting))
                self._log("started", job)
            try:
                handle = self.executor.start(job, self._progress_of(job), self._finisher(job))
            except BaseException as exc:  # the executor could not even start it
                self._finisher(job)(False, exc)
                continue
            self._start_timer(job)
            with self._lock:
                if job.state == RUNNING:
                    job.handle = handle
                    handle = None
            if handle is not None and job.state == CANCELLED:    # cancelled while it was starting
                handle.cancel()

    def _preempt(self) -> None:
        """While a session waits with fewer running jobs than its share (the slots divided by the sessions
        that run or wait, at least one), stop the most recently started job of the session furthest
        over its share and queue it again at the front of its session's queue. Jobs with a completion
        hook (releases) keep their slot."""
        stopped = []
        with self._lock:
            while True:
                running = self.running()
                held: dict[str, list[Job]] = {}
                for j in running:
                    held.setdefault(j.owner, []).append(j)
                waiting = [o for o, q in self._waiting.items() if q]
                if len(running) < self.slots or not waiting:
                    break
                share = max(1, self.slots // len(set(held) | set(waiting)))
                if not any(len(held.get(o, ())) < share for o in waiting):
                    break
                over = [o for o in held if len(held[o]) > share
                        and any(j.on_done is None for j in held[o])]
                if not over:
                    break
                owner = max(over, key=lambda o: len(held[o]))
                job = max((j for j in held[owner] if j.on_done is None), key=lambda j: j.started_at or 0.0)
                handle, job.handle = job.handle, None
                _stop_timer(job)
                job.state, job.done, job.total, job.message, job.where = QUEUED, 0, 0, "", ""
                self._waiting.setdefault(owner, deque()).appendleft(job)
                self._log("preempted", job)
                stopped.append(handle)
        for handle in stopped:
            if handle is not None:
                handle.cancel()

    def _start_timer(self, job: Job) -> None:
        """Cancel ``job`` with a message once it has run for its limit (this run only)."""
        run = job.run

        def expire() -> None:
            with self._lock:
                if job.state != RUNNING or job.run != run:
                    return
                job.reason = (f"{job.label} was stopped: it ran past its time limit of {describe_limit(job.limit)}. "
                              "Make the run smaller (fewer runs, rows or settings), or ask for a longer limit.")
            self.cancel(job)

        with self._lock:
            if job.state != RUNNING or job.run != run:
                return
            job.timer = threading.Timer(job.limit, expire)
            job.timer.daemon = True
            job.timer.start()

    def _progress_of(self, job: Job) -> Callable[[int, int, str], None]:
        run = job.run

        def report(done: int, total: int, message: str = "") -> None:
            if job.state == RUNNING and job.run == run:
                job.done, job.total, job.message = int(done), int(total), str(message or "")
        return report

    def _finisher(self, job: Job) -> Callable[[bool, Any], None]:
        run = job.run

        def finish(ok: bool, value: Any) -> None:
            with self._lock:
                if job.state != RUNNING or job.run != run:   # cancelled or stopped meanwhile: dropped
                    return
                _stop_timer(job)
                if ok:
                    job.state, job.result = DONE, value
                    job.done = max(job.done, job.total)
                    if job.started_at is not None:
                        job.seconds = time.monotonic() - job.started_at
                else:
                    job.state, job.error = FAILED, value
                self._log(job.state, job)
                job.func, job.args, job.handle = None, (), None
                hook = self._take_hook(job)
                self._prune()
            if hook is not None:
                self._call_hook(job, hook, ok, value)
            self._dispatch()
        return finish

    @staticmethod
    def _take_hook(job: Job) -> Callable[[bool, Any], None] | None:
        """(Under the lock, once the job's end is decided.) Its completion hook, taken so it runs once; a job
        without one counts as finished now, one with it only after the hook ran."""
        hook, job.on_done = job.on_done, None
        if hook is None:
            job.finished.set()
        return hook

    @staticmethod
    def _call_hook(job: Job, hook: Callable[[bool, Any], None], ok: bool, value: Any) -> None:
        try:
            hook(ok, value)
        except Exception:  # noqa: BLE001 - a hook's failure must not take the queue's thread down
            log.exception("The completion hook of %s failed", job.label)
        finally:
            job.finished.set()

    def _run_inline(self, job: Job) -> None:
        try:
            value = job.func(*job.args, progress=self._progress_of(job))
        except BaseException as exc:
            self._finisher(job)(False, exc)
        else:
            self._finisher(job)(True, value)

    def _prune(self) -> None:
        finished = [j for j in self._jobs.values() if j.state not in LIVE]
        for old in finished[:max(0, len(finished) - self.keep)]:
            del self._jobs[old.id]
            if self._by_key.get(old.key) is old:
                del self._by_key[old.key]


def check_limit(seconds) -> float:
    """A job's time limit in seconds: a positive finite number, or a ValueError."""
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        raise ValueError(f"A job's time limit must be a number of seconds; got {seconds!r}.") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"A job's time limit must be a positive number of seconds; got {seconds:g}.")
    return seconds


def describe_limit(seconds: float) -> str:
    """A time limit as a page states it: "2 h", "45 min", "30 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.3g} s"


def _stop_timer(job: Job) -> None:
    timer, job.timer = job.timer, None
    if timer is not None:
        timer.cancel()


# ---------------------------------------------------------------------- executors


class ThreadExecutor:
    """A job on a daemon thread of this process. Cancel is cooperative: the job's next progress call
    raises :class:`Cancelled` (and its result, should it still arrive, is dropped by the queue)."""

    where = THREAD_WHERE

    def start(self, job: Job, on_progress, on_finish) -> Handle:
        stop = threading.Event()
        func, args = job.func, job.args

        def progress(done: int, total: int, message: str = "") -> None:
            if stop.is_set():
                raise Cancelled(f"{job.label} was cancelled.")
            on_progress(done, total, message)

        def body() -> None:
            try:
                value = func(*args, progress=progress)
            except BaseException as exc:
                on_finish(False, exc)
            else:
                on_finish(True, value)

        job.where = self.where
        threading.Thread(target=body, name=f"job {job.id} {job.label}", daemon=True).start()
        return _ThreadHandle(stop)


@dataclass
class _ThreadHandle:
    stop: threading.Event

    def cancel(self) -> None:
        self.stop.set()


_live_groups: set[int] = set()


def _kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (a job and the workers it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@atexit.register
def _kill_live_jobs() -> None:
    for pid in list(_live_groups):
        _kill_group(pid)


def _sendable_error(exc: BaseException):
    """The exception itself when it survives pickling, else a RuntimeError naming it."""
    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:  # noqa: BLE001 - any failure means: send a plain copy
        pass
    return RuntimeError(f"{type(exc).__name__}: {exc}")


def _job_main(conn, host: int, key: str, func, args, env: dict, digests: dict, n_jobs: int) -> None:
    """The body of a job's process: own session (so Cancel can kill the group), lower priority, the
    server's environment, fair-share ``DASHBOARD_N_JOBS``; progress and outcome go back over ``conn``."""
    try:
        os.setsid()
    except OSError:
        pass
    try:
        os.nice(NICE)
    except OSError:
        pass
    os.environ.clear()
    os.environ.update(env)
    os.environ["DASHBOARD_N_JOBS"] = str(n_jobs)
    _end_with_the_server(host)

    adopt_code_digests(digests)
    trace = env.get(TRACE_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as out:
            out.write(f"{key}\n")

    def progress(done: int, total: int, message: str = "") -> None:
        conn.send(("progress", int(done), int(total), str(message or "")))

    try:
        value = func(*args, progress=progress)
    except BaseException as exc:  # sent to the server, which raises it for the page
        conn.send(("failed", _sendable_error(exc), traceback.format_exc()))
    else:
        try:
            conn.send(("done", value))
        except Exception as exc:  # an unpicklable result
            conn.send(("failed", _sendable_error(exc), traceback.format_exc()))
    conn.close()


ORPHAN_POLL = 2.0
"""Seconds between a job's looks at whether the server that started it is still there."""


def _end_with_the_server(parent: int) -> None:
    """In a job's process: a thread that kills the job's process group (the job and its workers) once
    its parent ``parent`` (the server's job host, which ends with the server) is gone, after which the job
    is re-parented; a killed server would otherwise leave a quiet job computing on. ``parent`` is the id
    the host had before it forked: read in the job, the host may already be gone and the id a stranger's."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="server watch", daemon=True).start()


def _repo_on_path() -> None:
    """Put the repository on ``PYTHONPATH``: the job host is a fresh interpreter that imports ``core``
    before anything else, so ``core`` must be importable from the environment (whatever folder the server
    was started in)."""
    root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, root])


class JobHost:
    """The process that starts job processes: a fresh interpreter that imported its preload once and
    forks one child per job, so a job starts without importing ``core`` again and without running the
    server's ``__main__`` (under Streamlit, the page script) a second time.

    The server talks to it over a Unix socket: "start" carries one end of the job's own socket and is
    answered with the job's process id; "reap" asks whether that process has ended, answered with its exit
    code once it has. When the server goes, the socket closes and the host ends; its jobs then end too
    (see :func:`_end_with_the_server`)."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = "import sys; from core.jobs import host_main; host_main(int(sys.argv[1]), sys.argv[2:])"
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno()), *preload],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _ask(self, message: bytes, fds: tuple[int, ...] = ()) -> tuple[int, ...]:
        with self.lock:
            socket.send_fds(self.control, [message], list(fds))
            answer = self.control.recv(16)
        if len(answer) != 16:
            raise OSError("The job host ended; the job was not started.")
        return struct.unpack("qq", answer)

    def start(self, channel: socket.socket) -> int:
        """Fork a job process that talks over ``channel`` (its end is closed here once it is sent)."""
        try:
            return self._ask(b"start", (channel.fileno(),))[1]
        finally:
            channel.close()

    def exit_code(self, pid: int) -> int | None:
        """``pid``'s exit code once it has ended (reaped then), else None; a host that has gone says 0."""
        try:
            ended, code = self._ask(b"reap" + struct.pack("q", pid))
        except OSError:
            return 0
        return code if ended else None

    def close(self) -> None:
        self.control.close()


def host_main(control_fd: int, preload: list[str]) -> None:
    """The job host's loop (:class:`JobHost`): import ``preload``, then answer the server until it goes."""
    for name in preload:
        importlib.import_module(name)
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 64, 1)
        except OSError:
            return
        if not message:
            return
        if message == b"start":
            host = os.getpid()
            pid = os.fork()
            if pid == 0:
                control.close()
                _job_child(fds[0], host)
            os.close(fds[0])
            control.send(struct.pack("qq", 1, pid))
        elif message.startswith(b"reap"):
            (pid,) = struct.unpack("q", message[4:12])
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            control.send(struct.pack("qq", int(done == pid), os.waitstatus_to_exitcode(status) if done else 0))


def _job_child(fd: int, host: int) -> None:
    """A forked job process of the job host ``host``: take the job from the server over ``fd``, run it
    (:func:`_job_main`), exit."""
    code = 1
    try:
        conn = Connection(fd)
        try:
            path, folder, job = pickle.loads(conn.recv_bytes())
            sys.path[:] = path               # the server's import path and folder, as a job finds its code
            os.chdir(folder)
            key, func, args, env, digests, n_jobs = pickle.loads(job)
        except BaseException as exc:      # a function or argument this process cannot import back
            conn.send(("failed", _sendable_error(exc), traceback.format_exc()))
        else:
            _job_main(conn, host, key, func, args, env, digests, n_jobs)
            code = 0
    finally:
        for stream in (sys.stdout, sys.stderr):     # os._exit skips the interpreter's own flushing
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code)


class ProcessExecutor:
    """A job in a process of its own, forked by the :class:`JobHost` (which imported its preload once)."""

    where = LOCAL_WHERE

    def __init__(self, preload: tuple[str, ...] | None = None) -> None:
        self.preload = None if preload is None else tuple(preload)   # None: preload_modules() as the host starts
        self._host: JobHost | None = None
        self._host_lock = threading.Lock()
        _repo_on_path()

    def host(self) -> JobHost:
        """The running job host, started (again) when there is none."""
        with self._host_lock:
            if self._host is None or not self._host.alive():
                if self._host is not None:
                    self._host.close()
                self._host = JobHost(preload_modules() if self.preload is None else self.preload)
                atexit.register(self._host.close)
            return self._host

    def warm(self) -> None:
        """Start the job host now (in a thread), so the first job does not wait for its imports."""
        threading.Thread(target=self.host, name="job host warm-up", daemon=True).start()

    def start(self, job: Job, on_progress, on_finish) -> Handle:
        # the job's joblib workers share memory through files in a folder of the job's own, removed when
        # the job ends: a killed job cannot clean up after itself
        scratch = tempfile.mkdtemp(prefix=f"job{job.id}_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        env = {**os.environ, "JOBLIB_TEMP_FOLDER": scratch}
        try:
            payload = pickle.dumps((list(sys.path), os.getcwd(), pickle.dumps(
                (job.key, job.func, job.args, env, known_code_digests(), job.n_jobs))))
            host = self.host()
            ours, theirs = socket.socketpair()
            try:
                pid = host.start(theirs)
            except BaseException:
                ours.close()
                raise
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        _live_groups.add(pid)
        conn = Connection(ours.detach())
        job.where = self.where
        handle = _ProcessHandle(pid, host, scratch)
        threading.Thread(target=self._drain, args=(conn, payload, handle, on_progress, on_finish),
                         name=f"job {job.id} pipe", daemon=True).start()
        return handle

    @staticmethod
    def _drain(conn, payload: bytes, handle: "_ProcessHandle", on_progress, on_finish) -> None:
        outcome = None
        try:
            conn.send_bytes(payload)
            while outcome is None:
                message = conn.recv()
                if message[0] == "progress":
                    on_progress(*message[1:])
                elif message[0] == "done":
                    outcome = (True, message[1])
                else:
                    outcome = (False, message[1])
        except (EOFError, OSError):      # the process ended (or was killed) without an answer
            pass
        except Exception as exc:         # an answer this process cannot read back
            outcome = (False, RuntimeError(f"The background job's answer could not be read: "
                                           f"{type(exc).__name__}: {exc}"))
        finally:
            conn.close()
        if outcome is not None:
            on_finish(*outcome)          # the waiting page goes on while the process winds down
        code = handle.wind_down()
        if handle.scratch:
            shutil.rmtree(handle.scratch, ignore_errors=True)
        if outcome is None:
            on_finish(False, RuntimeError(
                "The background job stopped before it finished" + ("" if handle.killed else
                                                                   f" (exit code {code})") + "."))


WIND_DOWN = 5.0
"""Seconds a job process that has answered gets to end by itself before its group is killed."""


@dataclass
class _ProcessHandle:
    pid: int
    host: JobHost
    scratch: str = ""
    killed: bool = False

    def cancel(self) -> None:
        self.killed = True
        _kill_group(self.pid)

    def wind_down(self) -> int:
        """Let the process end (up to :data:`WIND_DOWN` seconds), kill the workers it left behind, reap it;
        its exit code."""
        deadline = time.monotonic() + WIND_DOWN
        code = self.host.exit_code(self.pid)
        while code is None and time.monotonic() < deadline:
            time.sleep(0.05)
            code = self.host.exit_code(self.pid)
        _kill_group(self.pid)            # workers the job left behind
        while code is None:
            time.sleep(0.02)
            code = self.host.exit_code(self.pid)
        _live_groups.discard(self.pid)
        return code


def _cluster_job(func, args, address: str, channel):
    """A job as one task on a Dask worker: it leaves the worker's thread pool (so its own fan-outs, sent
    to the same cluster, cannot wait on the slot it holds) and runs ``func`` there, its progress sent to
    the server over ``channel`` (a :class:`core.cluster.ClusterChannel`), whose stop flag ends it at its
    next progress call; it says when it has ended, so the server knows the flag is no longer needed."""
    from distributed import rejoin, secede


    report = ChannelReporter(channel, prefix=("progress",))
    secede()
    try:
        report.check()                   # cancelled before it started
        with use_scheduler(address):
            return func(*args, progress=report)
    finally:
        try:
            channel.send(("ended",))
        finally:
            rejoin()


CLUSTER_POLL = 0.1
"""Seconds between the server's looks at a cluster job's progress reports."""
WIND_DOWN = 600.0
"""Longest a cancelled cluster job's stop flag is kept up waiting for the task to say it ended."""


class DaskExecutor:
    """A job as one task on the Dask cluster at ``address``. Its progress comes back over a
    :class:`core.cluster.ClusterChannel` (a ``distributed.Queue``), so the page's bar moves while the task
    runs; Cancel sets the channel's stop flag (a ``distributed.Event``), which the task's next progress
    call answers by raising :class:`Cancelled`, and cancels the future (a task not yet started never
    starts). The queue drops whatever a cancelled job still returns, so nothing waiting on it commits."""

    def __init__(self, address: str, client) -> None:
        self.address, self.client = address, client

    @property
    def where(self) -> str:
        return f"Dask cluster {self.address}"

    def start(self, job: Job, on_progress, on_finish) -> Handle:
        name = f"job-{job.id}-{os.getpid()}-{os.urandom(6).hex()}"
        channel = ClusterChannel(name, client=self.client)
        future = self.client.submit(_cluster_job, job.func, job.args, self.address, channel, pure=False, key=name)
        job.where = self.where
        on_progress(0, 1, "sent to the cluster")
        handle = _FutureHandle(future, channel)
        threading.Thread(target=self._follow, args=(future, channel, handle, on_progress, on_finish),
                         name=f"job {job.id} cluster", daemon=True).start()
        return handle

    @staticmethod
    def _follow(future, channel, handle: "_FutureHandle", on_progress, on_finish) -> None:
        """Relay the task's reports while it runs (every one before the outcome), then its outcome; a
        cancelled task's stop flag stays up until it has ended (or :data:`WIND_DOWN` passed)."""
        ended = False

        def drain() -> None:
            nonlocal ended
            try:
                reports = channel.take()
            except Exception:  # the cluster is gone: the outcome says so
                return
            for report in reports:
                if report[0] == "progress":
                    on_progress(*report[1:])
                elif report[0] == "ended":
                    ended = True

        while not future.done():
            drain()
            time.sleep(CLUSTER_POLL)
        drain()
        try:
            value = future.result()
        except BaseException as exc:
            on_finish(False, exc)
        else:
            on_finish(True, value)
        if handle.cancelled:
            until = time.monotonic() + WIND_DOWN
            while not ended and time.monotonic() < until:
                time.sleep(10 * CLUSTER_POLL)
                drain()
        channel.close()


@dataclass
class _FutureHandle:
    future: Any
    channel: Any
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True
        try:
            self.channel.stop()          # a running task stops at its next progress call
            self.future.cancel()         # a task still waiting for a worker never starts
        except Exception:  # the cluster is gone; nothing left to cancel there
            pass


class AutoExecutor:
    """Where a job goes by default: the Dask cluster when one is configured and reachable, else a process
    of its own on this machine; a function that cannot be shipped by name runs on a thread here."""

    def __init__(self) -> None:
        self._process: ProcessExecutor | None = None
        self.thread = ThreadExecutor()

    @property
    def process(self) -> ProcessExecutor:
        if self._process is None:
            self._process = ProcessExecutor()
        return self._process

    def start(self, job: Job, on_progress, on_finish) -> Handle:
        if worker_kind() == "thread" or not shippable(job.func):
            return self.thread.start(job, on_progress, on_finish)
        address = scheduler_address()
        client = client_for(address) if address else None
        if client is not None:
            return DaskExecutor(address, client).start(job, on_progress, on_finish)
        try:
            return self.process.start(job, on_progress, on_finish)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:   # arguments that cannot travel
            log.warning("%s runs in the server process: its arguments cannot be sent to a job process (%s)",
                        job.label, exc)
            return self.thread.start(job, on_progress, on_finish)


_queue: JobQueue | None = None
_queue_lock = threading.Lock()


def job_queue() -> JobQueue:
    """The process-wide queue (created on first use)."""
    global _queue
    with _queue_lock:
        if _queue is None:
            _queue = JobQueue()
        return _queue


def set_job_queue(queue: JobQueue | None) -> JobQueue | None:
    """Replace the process-wide queue (tests inject one with a fake executor); returns the old one."""
    global _queue
    with _queue_lock:
        old, _queue = _queue, queue
        return old
