"""A page's long run is a background job: leaving the page while it waits (here: while it is queued
behind another session's job) and coming back finds the same job, and its result is drawn without a
second computation; the sidebar lists the session's jobs.

The job runs for real in a job process; that process writes one line per computation to a trace file,
which is how the test counts computations."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import DONE, QUEUED

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
PAGE = "tools/group_fairness.py"
HOME = "home.py"
LABEL = "Training and ranking"
SEED = 7
"""A setting changed after the first render: its plan is a batch job."""


@pytest.fixture
def queue(traced_queue):
    """The shared fresh queue (``tests/conftest.py``) under this module's name for it."""
    return traced_queue


def _computations(tmp_path) -> list[str]:
    trace = tmp_path / "trace"
    return trace.read_text().splitlines() if trace.exists() else []


def _page_job(queue):
    return next((j for j in queue.jobs() if j.label == LABEL), None)


def _leave_while_queued(at, queue, monkeypatch) -> None:
    """Open the page (its first render is interactive: drawn at once, no job), change a setting to a plan
    that runs as a job (every run from here on, whatever its estimate: the page's plans are all quick), and
    stop the script while that job waits (as navigating away does); the stop comes from AppTest's timeout,
    retried longer until the page had reached its run."""
    at.switch_page(PAGE).run()
    assert not at.exception and _page_job(queue) is None
    monkeypatch.setenv("DASHBOARD_INTERACTIVE_SECONDS", "0")
    for seconds in (10, 20, 40, 80, 160):
        with pytest.raises(RuntimeError, match="timed out"):
            at.number_input(key="gf_seed").set_value(SEED).run(timeout=seconds)
        if _page_job(queue) is not None:
            return
    pytest.fail("the page never submitted its run")


def test_leaving_and_coming_back_reattaches_to_the_job_without_computing_again(queue, tmp_path, monkeypatch):
    gate = threading.Event()
    other = queue.submit(lambda progress=None: gate.wait(), owner="another session", key="other",
                         label="Another session's sweep")     # holds the only slot
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception
    _leave_while_queued(at, queue, monkeypatch)
    job = _page_job(queue)
    assert job.state == QUEUED and job.position() == 1 and job.status() == "Queued behind 1 job"
    at.switch_page(HOME).run()                                 # elsewhere in the app meanwhile
    assert not at.exception
    assert any(LABEL in m.value and "queued behind 1 job" in m.value for m in at.sidebar.markdown)
    gate.set()
    assert other.wait(60)
    at.switch_page(PAGE).run()                                 # back: attaches to the same job
    assert not at.exception and not at.error
    assert job.state == DONE and _page_job(queue) is job
    assert len(_computations(tmp_path)) == 1                   # computed once, in the job process
    assert at.session_state["gf_plan"].seed == SEED and len(at.metric) > 0
    at.switch_page(HOME).run()
    at.switch_page(PAGE).run()                                 # and again: answered from the cache
    assert not at.exception and not at.error
    assert len(_computations(tmp_path)) == 1
    assert [j.label for j in queue.jobs_of(job.owner)] == [LABEL]
    assert any(f"{LABEL}: done" in m.value for m in at.sidebar.markdown)


def test_the_sidebar_lists_the_sessions_jobs_and_cancels_a_queued_one(queue):
    gate = threading.Event()
    running = queue.submit(lambda progress=None: gate.wait(), owner="me", key="mine 1", label="My sweep")
    queued = queue.submit(lambda progress=None: "never", owner="me", key="mine 2", label="My audit")
    theirs = queue.submit(lambda progress=None: "theirs", owner="someone else", key="theirs", label="Their run")
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["_jobs_owner"] = "me"
    at.run()
    assert not at.exception
    lines = [m.value for m in at.sidebar.markdown if "My " in m.value or "Their" in m.value]
    assert any("My sweep: running on this machine" in line for line in lines)
    assert any("My audit: queued behind 2 jobs" in line for line in lines)      # the sweep and theirs
    assert not any("Their run" in line for line in lines)                      # another session's job
    at.button(key=f"job_cancel_{queued.id}").click().run()
    assert queued.state == "cancelled" and theirs.state == QUEUED
    gate.set()
    assert running.wait(60) and theirs.wait(60)
    assert theirs.outcome() == "theirs" and queued.result is None
    assert ("started", "My audit") not in queue.events
