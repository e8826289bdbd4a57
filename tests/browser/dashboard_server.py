"""What every browser test shares: a dashboard on a free loopback port, tabs that record requests
leaving the machine, and waiting until a page has finished running and drawing."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the dashboard did not start within {timeout:.0f} s")


@contextmanager
def dashboard(folder: Path, **env: str) -> Iterator[str]:
    """Run the dashboard with its cache (and any other settings in `env`) under `folder`; yields
    its URL. The server's output goes to folder/server.log, never to an unread pipe."""
    port = free_port()
    settings = dict(os.environ, DASHBOARD_CACHE_DIR=str(folder / "cache"), **env)
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "dashboard/app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1",
             # no file watcher: an edit elsewhere in the tree would show a 'File change' notice
             # in the status widget, which the idle check reads as a page still running
             "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
            cwd=REPO_ROOT, env=settings, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def open_page(browser, height: int = 1000, width: int = 1400, **context):
    """A new tab that records every request and web socket leaving the machine: (page, URLs).
    ``context`` goes to Playwright's new_page (a phone: is_mobile, has_touch, device_scale_factor)."""
    page = browser.new_page(viewport={"width": width, "height": height}, **context)
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
