"""The release component's background release (``dashboard/components/release_confirm.py``) on a small page
whose release job waits for the test's gate: a confirmed release runs on as a job when the page's run stops
(the curator goes elsewhere, changes a setting, reloads the tab), its completion hook commits it (or drops
its reservation) in the server whoever watches, and the page run again follows it while it runs or shows
its result once; a cancel from the sidebar spends nothing; a commit or a reservation the ledger refuses
shows nothing, says what to change and spends nothing; the sidebar lists the job while the page waits.

The budget allocation page's own wiring of the same component is checked once, with its real release, in
test_releases_survive.py. Jobs run on threads of this process (``thread_queue``); leaving is the stop the
waiting page meets (raised in the page's run once the job is running); everything is ordered by events,
never by time."""
from __future__ import annotations


import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, DONE, RUNNING
from core.privacy.project_ledger import ProjectLedger
from dashboard.components.job_lines import OWNER_KEY, OWNER_PARAM
from tests import release_steps
from tests.release_steps import GATED_KEY as KEY
from tests.release_steps import confirm_release, gated_page

LABEL = "Releasing test counts"


@pytest.fixture
def queue(thread_queue, tmp_path, monkeypatch):
    """A fresh queue whose jobs run on threads here, a ledger of its own with 'no cap' decided, a closed gate."""
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ProjectLedger().set_no_cap(KEY)
    release_steps.STARTED.clear()
    release_steps.GATE.clear()
    yield thread_queue
    release_steps.GATE.set()          # a job still waiting ends


def _page() -> AppTest:
    at = AppTest.from_function(gated_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def _release_jobs(queue):
    return [j for j in queue.jobs() if j.label == LABEL]


def _confirm_and_leave(queue) -> tuple[AppTest, object]:
    at = confirm_release(_page(), "rel")
    assert not at.exception and "rel_result" not in at.session_state
    (job,) = _release_jobs(queue)
    assert job.state == RUNNING and release_steps.STARTED.is_set()
    assert len(ProjectLedger().reservations(KEY)) == 1 and not ProjectLedger().releases(KEY, "release")
    at.session_state["away"] = True                                     # elsewhere in the app meanwhile
    at.run()
    assert not at.exception
    assert any(f"{LABEL}: running" in m.value for m in at.sidebar.markdown)
    return at, job


def _back(at) -> AppTest:
    """Back on the page."""
    at.session_state["away"] = False
    return at.run()


def _one_commit() -> None:
    ledger = ProjectLedger()
    [made] = ledger.releases(KEY, "release")
    assert not ledger.reservations(KEY)
    assert [s.amount for s in made.spends] == [0.25]                     # committed once


def test_a_release_finished_while_away_is_shown_once_when_the_page_runs_again(queue, leave_once):
    at, job = _confirm_and_leave(queue)
    release_steps.GATE.set()
    assert job.wait(60) and job.state == DONE
    _one_commit()                                                       # by the hook, nobody watching
    _back(at)
    assert not at.exception and not at.error
    assert at.session_state["rel_result"] == job.result == {"counts": 7}
    assert [s.value for s in at.success] == ["Released: 7"]
    assert leave_once == [RUNNING]                                      # found finished: no second follow
    at.session_state["rel_result"] = None
    at.run()                                                            # shown once: a later run adds nothing
    assert not at.success and at.session_state["rel_result"] is None
    _one_commit()
    assert _release_jobs(queue) == [job]


def test_a_page_run_while_the_release_runs_follows_it_and_a_widget_change_does_not_stop_it(
        queue, monkeypatch, leave_once):
    import dashboard.components.progress as progress
    import dashboard.components.release_confirm as rc

    at, job = _confirm_and_leave(queue)
    visits = []

    def attach(job, bar):
        visits.append(job.state)
        if len(visits) == 1:             # back on the page, then a widget change stops this run's wait
            raise StopException()
        release_steps.GATE.set()         # the next run follows it to its end
        return progress.follow(job, bar)

    monkeypatch.setattr(rc, "follow", attach)
    _back(at)
    assert visits == [RUNNING] and job.state == RUNNING                 # attached to the running job ...
    assert any("A release confirmed earlier is running" in i.value and "does not stop it" in i.value
               for i in at.info)                                       # ... and the page says so
    assert len(ProjectLedger().reservations(KEY)) == 1                 # no second reservation
    at.run()
    assert not at.exception and not at.error
    assert visits == [RUNNING, RUNNING] and job.state == DONE
    assert at.session_state["rel_result"] == job.result
    _one_commit()                                                       # no second reservation or commit
    assert _release_jobs(queue) == [job]


def test_a_reloaded_tab_with_its_token_gets_the_finished_release(queue, leave_once):
    first, job = _confirm_and_leave(queue)
    token = first.query_params[OWNER_PARAM]
    release_steps.GATE.set()
    assert job.wait(60) and job.state == DONE
    stranger = _page()                                                  # another tab: not its release
    assert "rel_result" not in stranger.session_state
    reloaded = AppTest.from_function(gated_page, default_timeout=120)
    reloaded.query_params[OWNER_PARAM] = token
    reloaded.run()
    assert reloaded.session_state[OWNER_KEY] == token
    assert not reloaded.exception and not reloaded.error
    assert reloaded.session_state["rel_result"] == job.result
    _one_commit()
    _back(first)                                                        # the old session: already shown there
    assert "rel_result" not in first.session_state


def test_cancel_from_the_sidebar_while_away_spends_nothing(queue, leave_once):
    at, job = _confirm_and_leave(queue)
    at.button(key=f"job_cancel_{job.id}").click().run()
    assert not at.exception and job.state == CANCELLED
    ledger = ProjectLedger()
    assert not ledger.reservations(KEY) and not ledger.releases(KEY, "release")   # dropped by the hook
    release_steps.GATE.set()                                            # the job notices at its next report
    _back(at)
    assert not at.exception and "rel_result" not in at.session_state
    assert any("cancelled before anything was published" in i.value and "nothing was spent" in i.value
               for i in at.info)
    assert not ledger.reservations(KEY) and not ledger.releases(KEY, "release")


def test_a_commit_the_ledger_refuses_shows_nothing_and_spends_nothing(queue, monkeypatch, leave_once):
    def refuse(self, reservation, spends=None):
        raise ValueError("The ledger could not be written (a test's refusal).")

    at, job = _confirm_and_leave(queue)
    monkeypatch.setattr(ProjectLedger, "commit", refuse)
    release_steps.GATE.set()
    assert job.wait(60) and job.state == DONE                           # drawn, but never committed ...
    ledger = ProjectLedger()
    assert not ledger.releases(KEY, "release") and not ledger.reservations(KEY)
    _back(at)
    assert not at.exception and "rel_result" not in at.session_state    # ... nor shown
    assert any("a test's refusal" in e.value for e in at.error)
    assert any("nothing was spent" in i.value for i in at.info)


def test_the_sidebar_lists_the_release_while_the_page_waits_for_it(queue, monkeypatch):
    import dashboard.components.job_lines as jobs

    real, drawn = jobs.draw_line, []

    def spy(job):                                        # the sidebar line, drawn during the page's wait
        drawn.append((job.label, job.state))
        real(job)
        if job.state == RUNNING:
            release_steps.GATE.set()                     # the job finishes only once it was listed running

    monkeypatch.setattr(jobs, "draw_line", spy)
    at = _page()
    assert not at.sidebar.markdown or not any(LABEL in m.value for m in at.sidebar.markdown)
    confirm_release(at, "rel")
    assert not at.exception and at.session_state["rel_result"] == {"counts": 7}
    assert (LABEL, RUNNING) in drawn and drawn[-1] == (LABEL, DONE)
    assert any(f"{LABEL}: done" in m.value for m in at.sidebar.markdown)   # its last state stays listed
    assert len([b for b in at.button if b.key == "rel_bar_cancel"]) <= 1


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

    at = _page()
    monkeypatch.setattr(ProjectLedger, "reserve", refuse)
    confirm_release(at, "rel")
    assert not at.exception and "rel_result" not in at.session_state
    assert any("a test's refusal" in e.value and says in e.value for e in at.error)
    assert _release_jobs(queue) == []
    ledger = ProjectLedger()
    assert not ledger.reservations(KEY) and not ledger.releases(KEY, "release")


def test_a_job_release_that_finds_the_ledger_locked_can_wait_in_the_background(short_busy_timeout, queue, monkeypatch):
    """The job path of the locked-ledger offer: nothing reserved or started while locked; the background job
    then reserves, computes and commits, and the page shows the result once."""
    import sqlite3

    from dashboard.components import release_confirm

    monkeypatch.setattr(release_confirm, "INTERACTIVE_WAIT", 0.0)    # one try (the busy timeout), then say so
    release_steps.GATE.set()                                         # the computation runs straight through
    at = _page()
    at.button(key="rel").click().run()
    other = sqlite3.connect(str(ProjectLedger().db.watch.path), isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")               # another writer holds the ledger's write lock
        at.button(key="rel_confirm").click().run()
        assert not at.exception
        assert any("locked by another writer" in w.value for w in at.warning)
        assert [b.key for b in at.button if b.key.startswith("rel_wait")] == ["rel_wait_background", "rel_wait_drop"]
        assert _release_jobs(queue) == [] and ProjectLedger().reservations(KEY) == ()
    finally:
        other.execute("ROLLBACK")
        other.close()
    at.button(key="rel_wait_background").click().run()
    assert not at.exception and not at.error
    assert at.session_state["rel_result"] == {"counts": 7}
    (job,) = _release_jobs(queue)
    assert job.state == DONE
    _one_commit()
