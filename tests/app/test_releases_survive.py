"""A confirmed release is paid for: it runs on as a background job when the curator goes to another page,
changes a setting or reloads the tab, and its completion hook commits it (or drops its reservation) in the
server, whoever watches. The page opened again follows it while it runs, or shows its result once, exactly
as if it had waited; a cancel from the sidebar while away spends nothing; a commit the ledger refuses shows
nothing and spends nothing. While the page waits in its own run, the sidebar lists the job.

Jobs run on server threads (``DASHBOARD_JOB_WORKER=thread``); leaving is the stop the waiting page meets
when the user goes elsewhere (raised in the page's run once the job is running); everything is ordered by
events (the job waits for a gate the test opens), never by time."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, DONE, RUNNING
from core.privacy.project_ledger import ProjectLedger, spends_of
from dashboard.components.job_lines import OWNER_KEY, OWNER_PARAM
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


@pytest.fixture
def leave_once(monkeypatch):
    """The first page run that follows a release stops once the job runs (the curator goes elsewhere);
    later runs follow as usual. Records the job's state each time a page attaches."""
    import dashboard.components.release_confirm as rc

    real, seen = rc.follow, []

    def follow(job, bar):
        seen.append(job.state)
        if len(seen) == 1:
            assert job.queue is not None
            while job.state != RUNNING or not job.message:      # the job reported its start
                job.wait(0.01)
            raise StopException()
        return real(job, bar)

    monkeypatch.setattr(rc, "follow", follow)
    return seen


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


def test_a_page_opened_while_the_release_runs_follows_it_and_a_widget_change_does_not_stop_it(
        queue, monkeypatch, leave_once):
    import dashboard.components.progress as progress
    import dashboard.components.release_confirm as rc

    gated = Gated(monkeypatch)
    at, job = _confirm_and_leave(queue, gated)
    visits = []

    def attach(job, bar):
        visits.append(job.state)
        if len(visits) == 1:             # back on the page, then a widget change stops this run's wait
            raise StopException()
        gated.gate.set()                 # the next run follows it to its end
        return progress.follow(job, bar)

    monkeypatch.setattr(rc, "follow", attach)
    at.switch_page(PAGE).run()
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    assert visits == [RUNNING] and job.state == RUNNING                 # attached to the running job ...
    assert any("A release confirmed earlier is running" in i.value and "does not stop it" in i.value
               for i in at.info)                                       # ... and the page says so
    assert len(ProjectLedger().reservations(DATA)) == 1                # no second reservation
    at.run()
    assert not at.exception and not at.error
    assert visits == [RUNNING, RUNNING] and job.state == DONE
    assert at.session_state["ba_release_result"].counts.equals(job.result.counts)
    _one_commit_with_the_jobs_spends(job)                               # no second reservation or commit
    assert _release_jobs(queue) == [job]


def test_a_reloaded_tab_with_its_token_gets_the_finished_release(queue, monkeypatch, leave_once):
    gated = Gated(monkeypatch)
    first, job = _confirm_and_leave(queue, gated)
    token = first.query_params[OWNER_PARAM]
    gated.gate.set()
    assert job.wait(60) and job.state == DONE
    stranger = _budget(AppTest.from_file(APP, default_timeout=240).run())   # another tab: not its release
    assert "ba_release_result" not in stranger.session_state
    reloaded = AppTest.from_file(APP, default_timeout=240)
    reloaded.query_params[OWNER_PARAM] = token
    _budget(reloaded.run())
    assert reloaded.session_state[OWNER_KEY] == token
    assert not reloaded.exception and not reloaded.error
    assert reloaded.session_state["ba_release_result"].counts.equals(job.result.counts)
    _one_commit_with_the_jobs_spends(job)
    _budget(first.switch_page(HOME).run())                              # the old session: already shown there
    assert "ba_release_result" not in first.session_state


def test_cancel_from_the_sidebar_while_away_spends_nothing(queue, monkeypatch, leave_once):
    gated = Gated(monkeypatch)
    at, job = _confirm_and_leave(queue, gated)
    at.button(key=f"job_cancel_{job.id}").click().run()
    assert not at.exception and job.state == CANCELLED
    ledger = ProjectLedger()
    assert not ledger.reservations(DATA) and not ledger.releases(DATA, "release")   # dropped by the hook
    gated.gate.set()                                                    # the job notices at its next report
    _budget(at)
    assert not at.exception and "ba_release_result" not in at.session_state
    assert any("cancelled before anything was published" in i.value and "nothing was spent" in i.value
               for i in at.info)
    assert not ledger.reservations(DATA) and not ledger.releases(DATA, "release")


def test_a_commit_the_ledger_refuses_shows_nothing_and_spends_nothing(queue, monkeypatch, leave_once):
    def refuse(self, reservation, spends=None):
        raise ValueError("The ledger could not be written (a test's refusal).")

    gated = Gated(monkeypatch)
    at, job = _confirm_and_leave(queue, gated)
    monkeypatch.setattr(ProjectLedger, "commit", refuse)
    gated.gate.set()
    assert job.wait(60) and job.state == DONE                           # drawn, but never committed ...
    ledger = ProjectLedger()
    assert not ledger.releases(DATA, "release") and not ledger.reservations(DATA)
    _budget(at)
    assert not at.exception and "ba_release_result" not in at.session_state    # ... nor shown
    assert any("a test's refusal" in e.value for e in at.error)
    assert any("nothing was spent" in i.value for i in at.info)


def test_the_sidebar_lists_the_release_while_the_page_waits_for_it(queue, monkeypatch):
    import dashboard.components.job_lines as jobs

    gated = Gated(monkeypatch)
    real, drawn = jobs.draw_line, []

    def spy(job):                                        # the sidebar line, drawn during the page's wait
        drawn.append((job.label, job.state))
        real(job)
        if job.state == RUNNING:
            gated.gate.set()                             # the job finishes only once it was listed running

    monkeypatch.setattr(jobs, "draw_line", spy)
    at = _budget(AppTest.from_file(APP, default_timeout=240).run())
    assert not at.sidebar.markdown or not any(LABEL in m.value for m in at.sidebar.markdown)
    confirm_release(at, "ba_release")
    assert not at.exception and at.session_state["ba_release_result"] is not None
    assert (LABEL, RUNNING) in drawn and drawn[-1] == (LABEL, DONE)
    assert any(f"{LABEL}: done" in m.value for m in at.sidebar.markdown)   # its last state stays listed
    assert len([b for b in at.button if b.key == "ba_release_cancel"]) <= 1


@pytest.mark.parametrize("refusal, says", [
    ("over", "Nothing was released or spent."),
    ("undecided", "Decide the data set's cap (or record 'no cap') and press the release button again.")])
def test_a_reservation_the_ledger_refuses_says_what_to_change_and_starts_no_job(queue, monkeypatch, refusal, says):
    """The cap changed between the confirmation and the press (another page, another person): the reservation
    is refused, the page says what to change, and no job is started."""
    from core.privacy.project_ledger import CapExceeded, CapUndecided

    def refuse(self, rel, **kwargs):
        raise (CapExceeded("The release would take the data set past its cap (a test's refusal).") if refusal == "over"
               else CapUndecided("No cap decision for the data set yet (a test's refusal)."))

    at = _budget(AppTest.from_file(APP, default_timeout=240).run())
    monkeypatch.setattr(ProjectLedger, "reserve", refuse)
    confirm_release(at, "ba_release")
    assert not at.exception and "ba_release_result" not in at.session_state
    assert any("a test's refusal" in e.value and says in e.value for e in at.error)
    assert _release_jobs(queue) == []
    ledger = ProjectLedger()
    assert not ledger.reservations(DATA) and not ledger.releases(DATA, "release")
