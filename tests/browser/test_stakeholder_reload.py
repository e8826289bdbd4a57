"""A stakeholder who joins from a link, then reloads the tab or goes Home and back, is still a stakeholder."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO_ROOT / "tests" / "browser" / "artifacts"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
TOOL_PATH = "fairness-elicitation"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the dashboard did not start within a minute")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The dashboard on a free loopback port with a session database of its own."""
    folder = tmp_path_factory.mktemp("stakeholder_reload")
    db_url = f"sqlite:///{folder / 'sessions.sqlite'}"
    port = _free_port()
    env = dict(os.environ, DASHBOARD_CACHE_DIR=str(folder / "cache"), DASHBOARD_DB_URL=db_url)
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "dashboard/app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url)
        yield url, db_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_until_idle(page, timeout_ms: int = 120_000) -> None:
    page.wait_for_selector("[data-testid='stMain']", timeout=timeout_ms)
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=\"stMainBlockContainer\"] *').length > 5",
        timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)
    page.wait_for_timeout(500)


def test_stakeholder_reloads_and_goes_home_and_stays_a_stakeholder(served):
    from playwright.sync_api import sync_playwright

    from core.fairness.elicitation import SessionConfig
    from core.fairness.store import ElicitationStore

    url, db_url = served
    store = ElicitationStore(db_url)
    created = store.create_session(SessionConfig(n_core=2, n_random=3, n_repeat=0), "Reload check")
    store.dispose()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"{url}/{TOOL_PATH}?join={created.join_code}")
        _wait_until_idle(page)
        page.get_by_label("Your name or nickname").fill("Reloader")
        page.get_by_label("Your name or nickname").press("Enter")
        _wait_until_idle(page)
        page.get_by_text("I understand that my answers").click()
        _wait_until_idle(page)
        page.get_by_role("button", name="Join").click()
        page.get_by_text("Welcome, Reloader").wait_for(timeout=60_000)
        page.get_by_role("button", name="Treat them the same").click()
        page.get_by_text("Card 2 of 5").wait_for(timeout=60_000)
        _wait_until_idle(page)
        assert "me=" in page.url  # the stakeholder's own link is in the address bar

        page.reload()
        _wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "stakeholder_after_reload.png"), full_page=True)
        page.get_by_text("Welcome, Reloader").wait_for(timeout=60_000)
        assert page.get_by_text("Card 2 of 5").count() == 1
        assert page.get_by_text("Create a session").count() == 0
        page.screenshot(path=str(ARTIFACTS / "stakeholder_after_reload.png"), full_page=True)

        # Home, then back to the tool through the navigation: the stakeholder view again.
        nav = page.locator("[data-testid='stSidebarNav'] a")
        nav.first.click()  # Home
        _wait_until_idle(page)
        assert page.get_by_text("Welcome, Reloader").count() == 0
        page.locator("[data-testid='stSidebarNav'] a", has_text="Fairness elicitation").first.click()
        _wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "stakeholder_after_home.png"), full_page=True)
        page.get_by_text("Welcome, Reloader").wait_for(timeout=60_000)
        assert page.get_by_text("Create a session").count() == 0
        assert page.locator("[data-testid='stException']").count() == 0
        # Back to the answered card: the current choice is the highlighted button.
        page.get_by_role("button", name="← Back").click()
        page.get_by_text("Card 1 of 5").wait_for(timeout=60_000)
        _wait_until_idle(page)
        chosen = page.get_by_role("button", name="✓ Treat them the same")
        assert chosen.count() == 1 and chosen.get_attribute("kind") == "primary"
        assert page.get_by_role("button", name="They may be treated differently").get_attribute("kind") == "secondary"
        page.screenshot(path=str(ARTIFACTS / "stakeholder_chosen_answer.png"), full_page=True)
        browser.close()
