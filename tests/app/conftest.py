"""Page tests run as a signed-in curator unless they ask for a guest: AppTest has no browser cookie,
so the role the sign-in cookie would prove is set here, for the whole run (module-scoped page fixtures
included); ``guest_browser`` puts the real check back for one test. ``leave_once`` is the curator who
leaves a page while its release runs, for the release pages' tests."""
from __future__ import annotations

import time

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from core.jobs import RUNNING
from dashboard.components import access

REAL_ROLE = access.current_role


@pytest.fixture(scope="session", autouse=True)
def signed_in_curator():
    access.current_role = lambda: access.Role("test curator")
    yield
    access.current_role = REAL_ROLE


@pytest.fixture
def guest_browser(monkeypatch):
    """The real role check, with no cookie: what a browser that holds no key gets."""
    monkeypatch.setattr(access, "current_role", REAL_ROLE)
    return REAL_ROLE


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
            deadline = time.monotonic() + 120
            while job.state != RUNNING or not job.message:      # the job reported its start
                assert time.monotonic() < deadline, "the release job never reported its start"
                job.wait(0.01)
            raise StopException()
        return real(job, bar)

    monkeypatch.setattr(rc, "follow", follow)
    return seen
