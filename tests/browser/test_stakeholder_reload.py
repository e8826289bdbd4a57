"""A stakeholder who joins from a link, then reloads the tab or leaves and opens her own link again, is still a
stakeholder, and never sees the curator's pages."""
from __future__ import annotations

from tests.browser.dashboard_server import (ARTIFACTS, BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, open_page,
                                            wait_until_idle)

TOOL_PATH = "fairness-elicitation"

pytestmark = BROWSER_MARKS


def test_stakeholder_reloads_and_goes_home_and_stays_a_stakeholder(session_server):
    from playwright.sync_api import sync_playwright

    from core.fairness.elicitation import SessionConfig
    from core.fairness.store import ElicitationStore

    url, db_url = session_server
    store = ElicitationStore(db_url)
    created = store.create_session(SessionConfig(n_core=2, n_random=3, n_repeat=0), "Reload check")
    store.dispose()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page, outside = open_page(browser)
        page.goto(f"{url}/{TOOL_PATH}?join={created.join_code}")
        wait_until_idle(page)
        page.get_by_label("Your name or nickname").fill("Reloader")
        page.get_by_label("Your name or nickname").press("Enter")
        wait_until_idle(page)
        page.get_by_text("I understand that my answers").click()
        wait_until_idle(page)
        page.get_by_role("button", name="Join").click()
        page.get_by_text("Welcome, Reloader").wait_for(timeout=120_000)
        wait_until_idle(page)  # a click while the script still runs could land on a stale button
        page.get_by_role("button", name="Treat them the same").click()
        page.get_by_text("Card 2 of 5").wait_for(timeout=120_000)
        wait_until_idle(page)
        assert "me=" in page.url  # the stakeholder's own link is in the address bar

        page.reload()
        wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "stakeholder_after_reload.png"), full_page=True)
        page.get_by_text("Welcome, Reloader").wait_for(timeout=120_000)
        assert page.get_by_text("Card 2 of 5").count() == 1
        assert page.get_by_text("Create a session").count() == 0
        page.screenshot(path=str(ARTIFACTS / "stakeholder_after_reload.png"), full_page=True)

        # A stakeholder has no page list to wander off through; the bare address is the room's join page,
        # and her own link (the address bar's) brings her card back.
        own = page.url
        assert page.locator("[data-testid='stSidebarNav']").count() == 0
        page.goto(f"{url}/")
        wait_until_idle(page)
        assert page.get_by_text("Welcome, Reloader").count() == 0 and page.get_by_text("Join a session").count() >= 1
        page.goto(own)
        wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "stakeholder_after_home.png"), full_page=True)
        page.get_by_text("Welcome, Reloader").wait_for(timeout=120_000)
        assert page.get_by_text("Create a session").count() == 0
        assert page.locator("[data-testid='stException']").count() == 0
        # Back to the answered card: the current choice is the highlighted button.
        wait_until_idle(page)
        page.get_by_role("button", name="← Back").click()
        page.get_by_text("Card 1 of 5").wait_for(timeout=120_000)
        wait_until_idle(page)
        chosen = page.get_by_role("button", name="✓ Treat them the same")
        assert chosen.count() == 1 and chosen.get_attribute("kind") == "primary"
        assert page.get_by_role("button", name="They may be treated differently").get_attribute("kind") == "secondary"
        page.screenshot(path=str(ARTIFACTS / "stakeholder_chosen_answer.png"), full_page=True)
        browser.close()
    assert not outside, f"the page requested outside addresses: {outside[:5]}"
