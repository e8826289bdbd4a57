"""The learner of the fairness results runs as a background job of the browser session (``core.jobs``):
the queue lists it under the session's owner, the page draws the job's result, and a cancelled job
leaves neither a result nor an error."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, DONE, LOCAL_WHERE
from dashboard.components.fairness_results import LEARNING

ROOT = str(Path(__file__).resolve().parents[2])

SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import numpy as np, pandas as pd, streamlit as st
from dashboard.components.fairness_results import render_fairness_results
rng = np.random.default_rng(5)
i, j = rng.integers(0, 7214, 150), rng.integers(0, 7214, 150)
keep = i != j
cons = pd.DataFrame({{"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                     "n_judges": 3, "agreement": 2 / 3}})
tables = render_fairness_results("fx", cons, "simulated panel")
st.session_state["tables"] = {{k: v.shape for k, v in tables.items()}}
"""


@pytest.fixture
def queue(traced_queue, batch_runs):
    """The shared fresh queue (``tests/conftest.py``) under this module's name for it."""
    return traced_queue


def _app() -> AppTest:
    at = AppTest.from_string(SCRIPT.format(root=ROOT), default_timeout=240).run()
    assert not at.exception
    at.select_slider(key="fx_T").set_value(100)
    at.selectbox(key="fx_oracle").select("ols").run()       # a small sweep: the button needs no second look
    assert not at.exception
    return at


def _learner_jobs(queue):
    return [j for j in queue.jobs() if j.label == LEARNING]


def test_the_learner_runs_as_a_job_of_this_session_and_its_result_is_drawn(queue, tmp_path):
    at = _app()
    assert _learner_jobs(queue) == []                        # nothing starts before the button
    at.button(key="fx_run").click().run()
    assert not at.exception and not at.error
    (job,) = _learner_jobs(queue)
    assert job.owner == at.session_state["_jobs_owner"]      # this browser session's job
    assert job.state == DONE and job.where == LOCAL_WHERE    # computed in a job process, not the server
    assert len((tmp_path / "trace").read_text().splitlines()) == 1
    (learned,) = at.session_state["fx_results"].values()
    assert learned.frontier.points.equals(job.result.frontier.points)   # the page draws the job's result
    assert len(at.metric) == 4 and at.session_state["tables"]["frontier_points"][0] == 10
    at.run()                                                 # a rerun reuses the kept result: no new job
    assert not at.exception and _learner_jobs(queue) == [job]


def test_cancel_of_a_running_learner_leaves_no_result_and_no_error(queue, monkeypatch):
    import core.fairness.learning_plan as learning_plan

    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")     # the job runs here, where the fake is
    started = threading.Event()

    def endless(*args, progress=None, **kwargs):
        """A sweep that reports progress until it is cancelled (there, ``progress`` raises)."""
        started.set()
        for _ in range(2400):
            progress(0, 10, "fitting")
            time.sleep(0.05)
        raise AssertionError("the job was never cancelled")

    monkeypatch.setattr(learning_plan, "trade_off_frontier", endless)
    at = _app()
    with pytest.raises(RuntimeError, match="timed out"):     # the page waits on the job: stop it there
        at.button(key="fx_run").click().run(timeout=20)
    assert started.wait(60)
    (job,) = _learner_jobs(queue)
    assert job.state == "running" and job.owner == at.session_state["_jobs_owner"]
    assert job.cancel()                                      # what the sidebar's Cancel does
    assert job.wait(60) and job.state == CANCELLED
    at.button(key="fx_run").set_value(False)                 # a click counts once (the stopped run kept it)
    at.run()                                                 # back on the page
    assert not at.exception and not at.error
    assert any("Press **Run the learner**" in i.value for i in at.info)       # waits for the button again
    assert "fx_results" not in at.session_state or not at.session_state["fx_results"]  # nothing kept
    assert at.session_state["tables"] == {} and len(at.metric) == 0
    assert _learner_jobs(queue) == [job]                     # nothing started again by itself
