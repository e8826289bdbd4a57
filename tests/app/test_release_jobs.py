"""A real release computes in a background job: the noise is drawn outside the server process, the ledger
still reserves before (in the page run) and commits after (in the job's completion hook), and a release whose
job is cancelled is never committed. (That it outlives the page run: test_releases_survive.py.)"""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, DONE, LOCAL_WHERE, JobQueue, job_queue, set_job_queue
from core.privacy.project_ledger import ProjectLedger
from tests.release_steps import confirm_release

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "budget_allocation.py")
LABEL = "Releasing noisy counts"


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    """A ledger and a job queue of their own."""
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    old = set_job_queue(JobQueue(slots=1))
    yield ProjectLedger()
    set_job_queue(old)


def _budget() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    assert not at.exception
    return at


def _release_jobs():
    return [j for j in job_queue().jobs() if j.label == LABEL]


def test_a_release_is_drawn_in_a_job_process_and_committed_once(ledger):
    at = confirm_release(_budget(), "ba_release")
    assert not at.exception and not at.error
    (job,) = _release_jobs()
    assert job.state == DONE and job.where == LOCAL_WHERE and job.owner == at.session_state["_jobs_owner"]
    [made] = ledger.releases("stylised", "release")
    assert not ledger.reservations("stylised")
    released = at.session_state["ba_release_result"]
    assert released.counts.equals(job.result.counts)          # what was committed is the job's draw


def test_a_cancelled_release_job_commits_nothing(ledger, monkeypatch):
    import core.census.release as release

    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")     # the fake below runs in this process
    real = release.release_noisy_counts

    def cancelled_midway(allocation, geo, progress=None):
        (job,) = _release_jobs()
        job.cancel()                                          # the sidebar's Cancel, while it runs
        progress(0, 1, "drawing")                             # the job notices here and stops
        return real(allocation, geo, progress=progress)

    monkeypatch.setattr(release, "release_noisy_counts", cancelled_midway)
    at = confirm_release(_budget(), "ba_release")
    assert not at.exception and not at.error
    (job,) = _release_jobs()
    assert job.state == CANCELLED
    assert not ledger.releases("stylised", "release") and not ledger.reservations("stylised")
    assert "ba_release_result" not in at.session_state
    assert any("cancelled before anything was published" in i.value for i in at.info)
