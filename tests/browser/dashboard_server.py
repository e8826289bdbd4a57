"""What every browser test shares: a dashboard on a free loopback port, tabs that record requests
leaving the machine, and waiting until a page has finished running and drawing."""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests import dashboard_process

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO_ROOT / "tests" / "browser" / "artifacts"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
LOCAL_PREFIXES = ("http://127.0.0.1", "https://127.0.0.1", "ws://127.0.0.1", "http://localhost",
                  "https://localhost", "ws://localhost", "data:", "blob:")
# Anything that shows the script is still running or the page is still being replaced.
RUNNING = ("[data-testid='stStatusWidget'], [data-testid='stSpinner'], [data-stale='true'], "
           "[data-testid='stSkeleton']")

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


CURATOR_TOKENS: dict[str, str] = {}
"""Server URL -> a signed-in curator's cookie value on that server (made by :func:`dashboard`)."""


@contextmanager
def dashboard(folder: Path, **env: str) -> Iterator[str]:
    """Run the dashboard with its cache (and any other settings in `env`) under `folder`; yields
    its URL (tests/dashboard_process.py). A curator is made in its database, whose sign-in
    :func:`open_page` puts in a tab when asked (``curator_of=url``)."""
    with dashboard_process.dashboard(folder, **{"DASHBOARD_CACHE_DIR": str(folder / "cache"), **env}) as url:
        CURATOR_TOKENS[url] = dashboard_process.curator_token(env.get("DASHBOARD_DB_URL"), "browser test")
        try:
            yield url
        finally:
            CURATOR_TOKENS.pop(url, None)


def open_page(browser, height: int = 1000, width: int = 1400, curator_of: str | None = None, **context):
    """A new tab that records every request and web socket leaving the machine: (page, URLs).
    ``curator_of`` (a server's URL) signs the tab in as that server's curator, as the sign-in link's
    cookie would; without it the tab is a guest (a stakeholder's phone). ``context`` goes to Playwright's
    new_page (a phone: is_mobile, has_touch, device_scale_factor)."""
    page = browser.new_page(viewport={"width": width, "height": height}, **context)
    if curator_of is not None:
        page.context.add_cookies([{"name": "dashboard_curator", "value": CURATOR_TOKENS[curator_of],
                                   "url": curator_of, "httpOnly": True, "sameSite": "Strict"}])
    outside: list[str] = []

    def record(url: str) -> None:
        if not url.startswith(LOCAL_PREFIXES):
            outside.append(url)
    page.on("request", lambda request: record(request.url))
    page.on("websocket", lambda socket_: record(socket_.url))
    return page, outside


def wait_until_idle(page, timeout_ms: int = 120_000, settle_ms: int = 1000) -> None:
    """Wait until the page's script has run to the end: the main block is drawn and no running
    indicator, spinner, skeleton or stale element is left, twice in a row `settle_ms` apart (a
    script that reruns itself shows the indicator again in between)."""
    page.wait_for_selector("[data-testid='stMainBlockContainer']", timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    quiet = 0
    while quiet < 2:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page was still running after {timeout_ms / 1000:.0f} s")
        page.wait_for_timeout(settle_ms // 2 if quiet == 0 else settle_ms)
        quiet = quiet + 1 if page.locator(RUNNING).count() == 0 else 0


def wait_for_figure(page, selector: str, timeout_ms: int = 60_000) -> None:
    """Wait until the page's main figure exists, bring it into view and let it draw."""
    figure = page.locator(selector).first
    figure.wait_for(state="attached", timeout=timeout_ms)
    figure.scroll_into_view_if_needed(timeout=timeout_ms)
    figure.wait_for(state="visible", timeout=timeout_ms)
