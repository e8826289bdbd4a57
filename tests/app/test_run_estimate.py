"""The estimate by the Run button: a long predicted run needs "Start anyway", a short one runs directly.

The predictions are steered by coefficient files written for the test (``DASHBOARD_ESTIMATE_COSTS``),
never by the clock."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core import estimates

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")
ZERO = {"fixed": 0.0, "data": 0.0, "units": 0.0}


def _costs(tmp_path, monkeypatch, score_seconds: float) -> None:
    """Coefficients where every fit is free and each scoring of a sweep point takes ``score_seconds``."""
    path = tmp_path / f"costs_{score_seconds:g}.json"
    synth = {k: dict(ZERO) for k in ("independent", "mst", "aim", "gem")}
    synth.update(score={"fixed": score_seconds, "data": 0.0}, pool_start=0.0, parallel_efficiency=1.0)
    path.write_text(json.dumps({"probe_seconds": None, "band": 2.0, "synthesis": synth}))
    monkeypatch.setenv("DASHBOARD_ESTIMATE_COSTS", str(path))
    estimates.OBSERVED.reset()


def _checkboxes(at, label):
    return [c for c in at.checkbox if c.label == label]


def test_a_long_predicted_sweep_asks_before_the_run_button_works(tmp_path, monkeypatch):
    _costs(tmp_path, monkeypatch, score_seconds=600.0)
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    assert not at.exception
    assert at.button(key="ss_run").disabled
    warning = " ".join(w.value for w in at.warning)
    assert "minutes here: 10 strata x 6 fits = 60 MST fits" in warning
    assert any("Fewer seeds" in m.value for m in at.markdown)
    start = _checkboxes(at, "Start anyway")
    assert len(start) == 1
    start[0].check().run()
    assert not at.exception
    assert not at.button(key="ss_run").disabled
    # another plan asks again: one seed is another sweep
    at.number_input(key="ss_seeds").set_value(1).run()
    assert at.button(key="ss_run").disabled
    assert not _checkboxes(at, "Start anyway")[0].value


def test_a_short_predicted_sweep_runs_directly(tmp_path, monkeypatch):
    _costs(tmp_path, monkeypatch, score_seconds=0.5)
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    assert not at.exception
    assert not at.button(key="ss_run").disabled
    assert not _checkboxes(at, "Start anyway")
    said = at.session_state["ss_estimate_estimate"]          # the model's estimate, from fixed coefficients
    assert said.work.startswith("10 strata x 6 fits = 60 MST fits")
    assert any(said.sentence() in c.value for c in at.caption)


SCRIPT = """
import streamlit as st
from core.districts import DistrictPlan
from dashboard.components.run_estimate import run_estimate_notice

class Run:
    def is_cached(self, plan, data):
        return {cached}

st.session_state["allowed"] = run_estimate_notice(DistrictPlan(grid_fanouts=(16, 4, 16)), key="t", run=Run())
"""


@pytest.mark.parametrize("cached, allowed", [(True, True), (False, False)])
def test_a_cached_plan_starts_without_asking(tmp_path, monkeypatch, cached, allowed):
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"probe_seconds": None, "districts": {"fixed": 1000.0}}))
    monkeypatch.setenv("DASHBOARD_ESTIMATE_COSTS", str(path))
    at = AppTest.from_string(SCRIPT.format(cached=cached), default_timeout=60)
    at.run()
    assert not at.exception
    assert at.session_state["allowed"] is allowed
    assert bool(_checkboxes(at, "Start anyway")) is not cached


@pytest.mark.parametrize("fixed, limit, says", [
    (1.0, None, None),                                  # interactive: runs at once, nothing about a limit
    (60.0, None, "stopped if it runs past 2 h"),        # batch: the background limit, before it starts
    (1000.0, "600", "passes the background limit of 10 min"),   # longer than the limit: said so
])
def test_the_notice_states_the_background_limit_of_batch_work(tmp_path, monkeypatch, fixed, limit, says):
    from core.jobs import JobQueue, set_job_queue

    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"probe_seconds": None, "districts": {"fixed": fixed}}))
    monkeypatch.setenv("DASHBOARD_ESTIMATE_COSTS", str(path))
    if limit is not None:
        monkeypatch.setenv("DASHBOARD_JOB_LIMIT", limit)
    old = set_job_queue(JobQueue())
    try:
        at = AppTest.from_string(SCRIPT.format(cached=False), default_timeout=60)
        at.run()
    finally:
        set_job_queue(old)
    assert not at.exception
    shown = " ".join(e.value for e in [*at.caption, *at.warning])
    if says is None:
        assert "limit" not in shown and "stopped" not in shown
    else:
        assert says in shown
