"""Who may see what, tried in Chromium against a real server on loopback.

A browser with no key tries every page's address and gets the room's page only; a wrong key is refused;
the curator's link signs in with an HttpOnly cookie and leaves the key nowhere (address bar, page, server
log); a stakeholder's link opens the card and a session's facilitator key opens that session's console,
both without any curator key.
"""
from __future__ import annotations

from pathlib import Path

from core.access import CuratorKeys
from core.fairness.elicitation import SessionConfig
from core.fairness.store import ElicitationStore
from dashboard.page_registry import PAGES, ROOM
from tests.browser.dashboard_server import BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, open_page, wait_until_idle

pytestmark = BROWSER_MARKS
CURATOR_WORDS = ("Create a session", "Open as", "Upload", "Privacy ledger", "Data step", "Budget allocation")


def _main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def test_each_role_sees_only_what_it_may(session_server):
    from playwright.sync_api import sync_playwright

    url, db_url = session_server
    keys = CuratorKeys(db_url)
    key = keys.add("Room curator")
    keys.dispose()
    created = ElicitationStore(db_url).create_session(SessionConfig(n_core=2, n_random=2, n_repeat=1), "Roles")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)

        # No key: every address is the room's join page; no page list, job list or ledger anywhere.
        guest, outside = open_page(browser)
        for path in ("", *(p.url_path for p in PAGES), "no-such-page"):
            guest.goto(f"{url}/{path}")
            wait_until_idle(guest)
            text = _main_text(guest)
            assert "Join a session" in text, path
            assert not any(word in text for word in CURATOR_WORDS), (path, text[:400])
            assert guest.locator("[data-testid='stSidebarNav']").count() == 0, path
            assert guest.locator("[data-testid='stFileUploader']").count() == 0, path

        # A wrong key: refused, and still nothing of the curator's.
        guest.goto(f"{url}/signin#key=not-a-key")
        guest.wait_for_selector("text=That key does not open the curator's pages")
        guest.goto(f"{url}/data-step")
        wait_until_idle(guest)
        assert "Join a session" in _main_text(guest)

        # The stakeholder's link opens the card's join form with the code filled in, and nothing else.
        phone, outside_phone = open_page(browser, height=844, width=390)
        phone.goto(f"{url}/{ROOM.url_path}?join={created.join_code}")
        wait_until_idle(phone)
        assert phone.get_by_label("Join code").input_value() == created.join_code
        assert phone.locator("[role='dialog']").count() == 0          # no "page not found" over the card
        phone.get_by_label("Your name or nickname").fill("Pat")        # the card takes input (nothing covers it)
        assert not any(word in _main_text(phone) for word in CURATOR_WORDS)

        # The facilitator's key opens that session's console, without a curator's key.
        desk, outside_desk = open_page(browser, height=1100)
        desk.goto(f"{url}/")
        wait_until_idle(desk)
        desk.get_by_text("Facilitators: open your session").click()
        form = desk.locator("[data-testid='stExpander']").filter(has_text="Facilitators: open your session")
        form.get_by_label("Join code").fill(created.join_code)
        form.get_by_label("Facilitator key").fill(created.facilitator_key)
        desk.locator(".st-key-fe_open button").click()
        wait_until_idle(desk)
        desk.get_by_text("Join link").first.wait_for(timeout=120_000)
        assert desk.locator("[data-testid='stSidebarNav']").count() == 0

        # The curator's link: signed in by an HttpOnly, SameSite cookie; the key is gone from the address.
        curator, outside_curator = open_page(browser)
        curator.goto(f"{url}/signin#key={key}")
        curator.wait_for_url(f"{url}/", timeout=60_000)
        wait_until_idle(curator)
        assert curator.locator("[data-testid='stSidebarNav']").count() == 1
        [cookie] = [c for c in curator.context.cookies() if c["name"] == "dashboard_curator"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert "dashboard_curator" not in curator.evaluate("document.cookie")
        curator.goto(f"{url}/data-step")
        wait_until_idle(curator)
        assert "Join a session" not in _main_text(curator)
        for tab in (guest, phone, desk, curator):
            assert key not in tab.url and key not in tab.content()
        assert not (outside or outside_phone or outside_desk or outside_curator)

        # Signing out ends it.
        curator.goto(f"{url}/signout")
        wait_until_idle(curator)
        assert "Join a session" in _main_text(curator)
        browser.close()
    log = Path(db_url.removeprefix("sqlite:///")).parent / "server.log"
    assert key not in log.read_text(errors="replace")
