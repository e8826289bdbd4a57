"""The budget allocation page's wiring of a confirmed release that outlives the page run: it runs on as a
background job when the curator goes to another page, its completion hook commits it in the server, nobody
watching, and the page opened again shows the job's draw once, exactly as if it had waited.

The release component's other cases (a page run that follows the running job, a widget change, a reloaded
tab, a cancel from the sidebar, a commit or a reservation the ledger refuses, the sidebar's list while the
page waits) are checked on a small page in test_release_job_follow.py, and the protocol under them
(reserve, the hook's commit or drop) in tests/unit/test_releases.py.

Jobs run on server threads (``DASHBOARD_JOB_WORKER=thread``); leaving is the stop the waiting page meets
when the user goes elsewhere (raised in the page's run once the job is running); everything is ordered by
events (the job waits for a gate the test opens), never by time."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import DONE, RUNNING
from core.privacy.project_ledger import ProjectLedger, spends_of
from tests.release_steps import confirm_release

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
PAGE = "tools/budget_allocation.py"
HOME = "home.py"
LABEL = "Releasing noisy counts"
DATA = "stylised"


@pytest.fixture
def queue(traced_queue, tmp_path, monkeypatch):
    """A fresh queue whose jobs run on server threads, and a ledger of its own with 'no cap' decided."""
    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ProjectLedger().set_no_cap(DATA)
    return traced_queue


class Gated:
    """The real release, held at its start until the test opens the gate; ``started`` once it runs."""

    def __init__(self, monkeypatch):
        import core.census.release as release

        self.real, self.started, self.gate = release.release_noisy_counts, threading.Event(), threading.Event()
        monkeypatch.setattr(release, "release_noisy_counts", self)

    def __call__(self, allocation, geo, progress=None):
        progress(0, 1, "drawing")
        self.started.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return self.real(allocation, geo, progress=progress)


def _budget(at) -> AppTest:
    at.switch_page(PAGE).run()
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    assert not at.exception, at.exception
    return at


def _release_jobs(queue):
    return [j for j in queue.jobs() if j.label == LABEL]


def _confirm_and_leave(queue, gated) -> tuple[AppTest, object]:
    at = _budget(AppTest.from_file(APP, default_timeout=240).run())
    confirm_release(at, "ba_release")
    assert not at.exception and "ba_release_result" not in at.session_state
    (job,) = _release_jobs(queue)
    assert job.state == RUNNING and gated.started.is_set()
    assert len(ProjectLedger().reservations(DATA)) == 1 and not ProjectLedger().releases(DATA, "release")
    at.switch_page(HOME).run()                                          # elsewhere in the app meanwhile
    assert not at.exception
    assert any(f"{LABEL}: running" in m.value for m in at.sidebar.markdown)
    return at, job


def _one_commit_with_the_jobs_spends(job) -> None:
    ledger = ProjectLedger()
    [made] = ledger.releases(DATA, "release")
    assert not ledger.reservations(DATA)
    assert made.spends == spends_of(job.result.ledger())                 # the detailed spends, committed once


def test_a_release_finished_while_away_is_shown_on_return_and_committed_once(queue, monkeypatch, leave_once):
    gated = Gated(monkeypatch)
    at, job = _confirm_and_leave(queue, gated)
    gated.gate.set()
    assert job.wait(60) and job.state == DONE
    _one_commit_with_the_jobs_spends(job)                               # committed by the hook, nobody watching
    _budget(at)
    assert not at.exception and not at.error
    shown = at.session_state["ba_release_result"]
    assert shown.counts.equals(job.result.counts)                       # the job's draw, as if the page had waited
    assert any("Released at" in s.value for s in at.success)
    assert leave_once == [RUNNING]                                      # found finished: no second follow
    at.run()
    _budget(at.switch_page(HOME).run())                                 # shown once: a later visit adds nothing
    assert at.session_state["ba_releases_made"] == 1
    _one_commit_with_the_jobs_spends(job)
    assert _release_jobs(queue) == [job]
