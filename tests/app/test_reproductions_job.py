"""The Reproductions page recomputes its rows in a background job of the session (``core.jobs``), and a
cancelled recompute keeps nothing, shows no error and does not start again by itself."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, DONE, LOCAL_WHERE, JobQueue, job_queue, set_job_queue
from core.reproductions import REPRODUCTIONS

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "reproductions.py")
LABEL = "Recomputing the papers' numbers"
PAPER = REPRODUCTIONS[0].paper


@pytest.fixture(autouse=True)
def queue():
    old = set_job_queue(JobQueue(slots=1))
    yield job_queue()
    set_job_queue(old)


def _page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["rp_papers"] = [PAPER]           # one paper's rows: a short job
    return at.run()


def _jobs(queue):
    return [j for j in queue.jobs() if j.label == LABEL]


def test_the_rows_are_computed_in_a_job_of_this_session(queue):
    at = _page()
    assert not at.exception and not at.error
    (job,) = _jobs(queue)
    assert job.state == DONE and job.where == LOCAL_WHERE and job.owner == at.session_state["_jobs_owner"]
    table = at.session_state["rp_table"]
    assert table["key"].tolist() == [r.key for r in REPRODUCTIONS if r.paper == PAPER]
    assert table["ours"].tolist() == job.result["ours"].tolist()     # the page shows the job's numbers


def test_a_cancelled_recompute_keeps_nothing_and_waits_for_the_button(queue, monkeypatch):
    import core.reproductions as module

    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")   # the fake below runs in this process

    def cancelled_midway(keys, progress=None, **kwargs):
        (job,) = _jobs(queue)
        job.cancel()                                        # the sidebar's Cancel, while it runs
        progress(0, len(keys), "rows")                      # the job notices here and stops
        raise AssertionError("the job was not stopped")

    monkeypatch.setattr(module, "reproductions_table", cancelled_midway)
    at = _page()
    assert not at.exception and not at.error
    (job,) = _jobs(queue)
    assert job.state == CANCELLED and "rp_table" not in at.session_state
    assert any("Recomputing was stopped" in i.value for i in at.info)
    at.run()                                                # a rerun does not start it again
    assert not at.exception and not at.error and _jobs(queue) == [job]
