"""A finished background job tells the run-time estimates how long it took, once, and only runs long
enough to say something about the machine's speed move the correction."""
from __future__ import annotations

import pytest

from core import estimates
from core.jobs import JobQueue, ThreadExecutor
from tests.unit.test_estimates import frame, plan as sweep_plan
from dashboard.components.progress import observe_run
from dashboard.components.run_estimate import plan_estimate


def _finished_job(seconds: float):
    q = JobQueue(ThreadExecutor(), slots=1, cores=2)
    job = q.submit(lambda progress=None: "done", owner="A", key="k", label="sweep")
    assert job.wait(60) and job.seconds is not None and job.seconds >= 0
    job.seconds = seconds          # as if the run had taken this long
    return job


@pytest.fixture(autouse=True)
def fresh_observations(monkeypatch):
    monkeypatch.setenv("DASHBOARD_OBSERVE_RUNS", "1")        # the test suite otherwise turns them off
    estimates.OBSERVED.reset()
    yield
    estimates.OBSERVED.reset()


def test_a_finished_job_corrects_later_estimates_once():
    plan, data = sweep_plan(), frame()
    est = plan_estimate(plan, data)
    assert est is not None and est.seconds >= 5
    job = _finished_job(3 * est.seconds)            # the machine ran three times slower than predicted
    observe_run(plan, data, job)
    assert estimates.observed_factor() == pytest.approx(3.0, rel=1e-6)
    observe_run(plan, data, job)                    # re-attaching to the same job observes nothing more
    assert estimates.observed_factor() == pytest.approx(3.0, rel=1e-6)
    assert plan_estimate(plan, data).seconds == pytest.approx(3 * est.seconds, rel=1e-6)


def test_the_suite_can_turn_observations_off(monkeypatch):
    plan, data = sweep_plan(), frame()
    monkeypatch.setenv("DASHBOARD_OBSERVE_RUNS", "0")
    observe_run(plan, data, _finished_job(1000.0))
    assert estimates.observed_factor() == 1.0


def test_short_runs_and_plans_without_an_estimate_leave_the_correction_alone():
    observe_run(object(), None, _finished_job(100.0))
    assert estimates.observed_factor() == 1.0
    observe_run(sweep_plan(), frame(), None)
    assert estimates.observed_factor() == 1.0
