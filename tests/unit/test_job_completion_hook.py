"""A job's completion hook (``JobQueue.submit(..., on_done=...)``) runs once in the server process when the job
ends, whatever ends it: its result, its exception, a cancel while queued or running. Whoever waits for the job
finds the hook's work done; a result arriving after a cancel never reaches the hook. Ordered by the fake
executor's calls, never by time."""
from __future__ import annotations

import threading

from core.contracts import Cancelled
from core.jobs import CANCELLED, DONE, FAILED, JobQueue, ThreadExecutor
from tests.unit import jobs_support
from tests.unit.jobs_support import Manual, noop


def _hooked(q, label, calls):
    return q.submit(noop, owner="A", key=label, label=label,
                    on_done=lambda ok, value: calls.append((label, ok, value)))


def test_the_hook_gets_the_result_once_and_a_late_finish_changes_nothing():
    ex, calls = Manual(), []
    q = JobQueue(ex, slots=1, cores=1)
    job = _hooked(q, "J", calls)
    ex.finish["J"](True, 7)
    ex.finish["J"](True, 8)                                   # a second answer (should one arrive) is ignored
    assert calls == [("J", True, 7)] and job.state == DONE and job.wait(0)


def test_the_hook_gets_the_jobs_exception():
    ex, calls = Manual(), []
    q = JobQueue(ex, slots=1, cores=1)
    _hooked(q, "J", calls)
    error = ValueError("no strata")
    ex.finish["J"](False, error)
    assert calls == [("J", False, error)]


def test_cancel_of_a_running_job_stops_it_before_the_hook_and_drops_its_late_result():
    ex, calls = Manual(), []
    q = JobQueue(ex, slots=1, cores=1)
    job = q.submit(noop, owner="A", key="J", label="J",
                   on_done=lambda ok, value: calls.append((list(ex.cancelled), ok, value)))
    assert job.cancel()
    [(stopped, ok, value)] = calls
    assert stopped == ["J"] and ok is False and isinstance(value, Cancelled)   # the process was told first
    ex.finish["J"](True, "late result")
    assert len(calls) == 1 and job.state == CANCELLED


def test_cancel_of_a_queued_job_calls_its_hook_and_it_never_starts():
    ex, calls = Manual(), []
    q = JobQueue(ex, slots=1, cores=1)
    _submit_plain = q.submit(noop, owner="A", key="first", label="first")
    queued = _hooked(q, "Q", calls)
    assert queued.cancel()
    assert [(label, ok, type(value)) for label, ok, value in calls] == [("Q", False, Cancelled)]
    ex.finish["first"](True, None)
    assert ex.started == ["first"] and _submit_plain.state == DONE


def test_a_waiter_wakes_only_after_the_hook_has_run():
    q = JobQueue(ThreadExecutor(), slots=1, cores=1)
    in_hook, release_hook, seen = threading.Event(), threading.Event(), []

    def hook(ok, value):
        in_hook.set()
        release_hook.wait(30)
        seen.append(value)

    job = q.submit(jobs_support.double, 21, owner="A", key="d", label="Doubling", on_done=hook)
    assert in_hook.wait(30)
    assert job.state == DONE and not job.wait(0)              # done, but the hook has not finished its work
    release_hook.set()
    assert job.wait(30) and seen == [42]


def test_a_failing_hook_is_logged_and_the_job_still_finishes(caplog):
    ex = Manual()
    q = JobQueue(ex, slots=1, cores=1)

    def broken(ok, value):
        raise RuntimeError("hook broke")

    job = q.submit(noop, owner="A", key="J", label="J", on_done=broken)
    ex.finish["J"](True, 1)
    assert job.wait(0) and job.outcome() == 1
    assert "completion hook of J failed" in caplog.text


def test_a_key_already_held_keeps_its_first_hook():
    ex, calls = Manual(), []
    q = JobQueue(ex, slots=1, cores=1)
    first = _hooked(q, "J", calls)
    again = q.submit(noop, owner="A", key="J", label="J", on_done=lambda ok, value: calls.append("second"))
    assert again is first
    ex.finish["J"](False, FAILED)
    assert calls == [("J", False, FAILED)]
