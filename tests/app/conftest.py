"""Page tests run as a signed-in curator unless they ask for a guest: AppTest has no browser cookie,
so the role the sign-in cookie would prove is set here (``guest_browser`` undoes it)."""
from __future__ import annotations

import pytest

from dashboard.components import access


@pytest.fixture(autouse=True)
def signed_in_curator(monkeypatch, request):
    if "guest_browser" not in request.fixturenames:
        monkeypatch.setattr(access, "current_role", lambda: access.Role("test curator"))


@pytest.fixture
def guest_browser():
    """The real role check, with no cookie: what a browser that holds no key gets."""
    return access.current_role
