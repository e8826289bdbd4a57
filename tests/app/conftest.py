"""Page tests run as a signed-in curator unless they ask for a guest: AppTest has no browser cookie,
so the role the sign-in cookie would prove is set here, for the whole run (module-scoped page fixtures
included); ``guest_browser`` puts the real check back for one test."""
from __future__ import annotations

import pytest

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
