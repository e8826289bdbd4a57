"""axe-core on every tab of every page: no critical or serious finding (the HTML reports are checked where
they are opened offline, in test_report_offline).

A page's first tab is what the render test checks; a board member clicks the others too. Each tab is
opened in turn, the page is left to finish, and axe-core runs on what is drawn."""
from __future__ import annotations

import pytest

from dashboard.page_registry import HOME, PAGES
from tests.browser.accessibility import axe_violations, describe
from tests.browser.dashboard_server import BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, open_page, wait_until_idle

pytestmark = BROWSER_MARKS
TAB = "[role='tab']"


@pytest.fixture
def server(session_server):
    return session_server[0]


def tab_findings(page, where: str) -> list[str]:
    """axe-core's serious findings on every tab of the page as it is now, one entry per tab that has any."""
    failures = []
    tabs = page.locator(TAB)
    names = [tabs.nth(i).inner_text().strip() for i in range(tabs.count())]
    for i, name in enumerate(names):
        tab = page.locator(TAB).nth(i)
        if not tab.is_visible():            # a tab list inside a tab not open now is checked with its parent
            continue
        tab.click()
        wait_until_idle(page, timeout_ms=120_000, settle_ms=500)
        if found := axe_violations(page):
            failures.append(f"{where}, tab {name!r}:\n{describe(found)}")
    return failures


def test_every_tab_of_every_page_has_no_serious_accessibility_finding(server):
    from playwright.sync_api import sync_playwright

    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page, outside = open_page(browser, curator_of=server)
        for entry in (*PAGES, HOME):
            page.goto(f"{server}/{'' if entry.url_path == 'home' else entry.url_path}")
            wait_until_idle(page, timeout_ms=300_000)
            if found := axe_violations(page):
                failures.append(f"{entry.title}, as opened:\n{describe(found)}")
            failures.extend(tab_findings(page, entry.title))
        browser.close()
    assert not failures, "\n".join(failures)
    assert not outside, f"pages requested outside addresses: {sorted(set(outside))[:5]}"

