"""In Chromium: the messy county file uploaded once on the Data step, saved, then used on a microdata page of the
same browser session without being asked for again; no exception, no request leaving the machine."""
from __future__ import annotations

import pytest

from tests.browser.dashboard_server import (ARTIFACTS, BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, REPO_ROOT, open_page,
                                            wait_until_idle)

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "messy_county.csv"

pytestmark = BROWSER_MARKS


@pytest.fixture
def served(session_server):
    return session_server[0]


def _no_exception(page, where: str) -> None:
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, f"{where}: {exceptions.first.inner_text()[:500]}"


def test_upload_once_then_use_it_on_the_coherence_audit(served):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page, outside = open_page(browser, height=1400, curator_of=served)
        page.goto(f"{served}/data-step")
        wait_until_idle(page, timeout_ms=180_000)
        page.locator(".st-key-ds_file input[type='file']").set_input_files(str(FIXTURE))
        page.get_by_text("Problems (every one, at once)").wait_for(timeout=120_000)
        wait_until_idle(page, timeout_ms=180_000)
        _no_exception(page, "Data step after the upload")
        assert page.get_by_text("never exported", exact=False).count() >= 1
        page.screenshot(path=str(ARTIFACTS / "data_step_uploaded.png"), full_page=True)

        page.get_by_role("button", name="Save the declaration").click()
        page.get_by_text("It is offered on every microdata page", exact=False).wait_for(timeout=120_000)
        wait_until_idle(page, timeout_ms=120_000)
        _no_exception(page, "Data step after saving")

        page.locator("[data-testid='stSidebarNav'] a", has_text="Coherence audit").first.click()
        page.get_by_text("after the declared cleaning", exact=False).wait_for(timeout=180_000)
        wait_until_idle(page, timeout_ms=300_000)
        page.screenshot(path=str(ARTIFACTS / "data_step_coherence.png"), full_page=True)
        _no_exception(page, "Coherence audit on the declared data set")
        assert page.get_by_text("after the declared cleaning of messy_county.csv", exact=False).count() == 1
        assert page.locator(".st-key-coh_upload").count() == 0          # the file is not asked for again
        browser.close()
    assert outside == [], f"requests left the machine: {outside[:5]}"
