"""Fixtures the browser tests share."""
from __future__ import annotations

import pytest

from tests.browser.dashboard_server import dashboard


@pytest.fixture(scope="session")
def session_server(tmp_path_factory):
    """One dashboard with a session database of its own for the live-session tests: (URL, database
    URL). Each test creates its own elicitation session in it."""
    folder = tmp_path_factory.mktemp("live_sessions")
    db_url = f"sqlite:///{folder / 'sessions.sqlite'}"
    with dashboard(folder, DASHBOARD_DB_URL=db_url) as url:
        yield url, db_url
