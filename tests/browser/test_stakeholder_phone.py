"""A live session as a room lives it: a stakeholder on a phone (390 x 844) joins through the facilitator's
link, answers every card with the card's header, both people and the answer buttons on screen at once (no
scrolling, each new card opened at its own header), reloads half-way, closes the tab and opens the bare join
link again (her browser's device token brings her back to her card) and finishes; every answer is stored
once, under one name. The facilitator's view offers that link (as the browser reached the server), its QR
code, the code once, and the QR code full screen for a projector. Both views pass the accessibility check."""
from __future__ import annotations

import re

from tests.browser.accessibility import axe_violations, describe
from tests.browser.dashboard_server import (ARTIFACTS, BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, open_page,
                                            wait_until_idle)

TOOL_PATH = "fairness-elicitation"
PHONE = {"width": 390, "height": 844}

pytestmark = BROWSER_MARKS


def _in_viewport(page, locator) -> bool:
    """True when the element lies wholly inside the visible viewport as it is scrolled now."""
    box = locator.bounding_box()
    size = page.viewport_size
    return (box is not None and box["x"] >= 0 and box["y"] >= 0
            and box["x"] + box["width"] <= size["width"] + 0.5 and box["y"] + box["height"] <= size["height"] + 0.5)


ANSWERS = ("Treat them the same", "They may be treated differently")


def _fits_without_scrolling(page, k: int, n: int) -> None:
    """Card k of n as it opens, before anything is scrolled: its header, the pair and the answer buttons all
    inside the phone's 844 px, and the resume code in full view at its foot."""
    for what, locator in [("header", page.get_by_text(f"Card {k} of {n}")),
                          ("pair", page.locator("[data-testid='stTable'] table").first),
                          *[(name, page.get_by_role("button", name=name, exact=True)) for name in ANSWERS]]:
        box = locator.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], \
            f"card {k}: the {what} is outside the phone's view as the card opens ({box})"
    code = page.locator(".resume-code")
    assert code.count() == 1 and code.is_visible()
    assert re.fullmatch(r"(?:[A-Z2-9]{4}-){3}[A-Z2-9]{4}", code.inner_text())


def _check_card(page, k: int, n: int) -> None:
    """Card k of n: fits the phone as it opens; both people's columns (header and every row) in the phone's
    viewport together."""
    page.get_by_text(f"Card {k} of {n}").wait_for(timeout=120_000)
    wait_until_idle(page)
    page.screenshot(path=str(ARTIFACTS / f"stakeholder_phone_open{k}.png"))
    _fits_without_scrolling(page, k, n)
    table = page.locator("[data-testid='stTable'] table").first
    table.evaluate("t => t.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"stakeholder_phone_card{k}.png"))
    for person in ("Person A", "Person B"):
        header = table.locator("th", has_text=person).first
        assert _in_viewport(page, header), f"card {k}: {person}'s column is outside the phone's view"
    assert _in_viewport(page, table), f"card {k}: the pair table does not fit the phone's view"
    # Nothing is wider than the phone: no sideways scrolling to reach Person B.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]


def test_phone_stakeholder_joins_by_link_answers_reloads_and_finishes(session_server):
    from playwright.sync_api import sync_playwright

    from core.fairness.elicitation import SessionConfig
    from core.fairness.store import ElicitationStore, format_code

    url, db_url = session_server
    store = ElicitationStore(db_url)
    created = store.create_session(SessionConfig(n_core=2, n_random=2, n_repeat=1), "Phone check")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        # The facilitator's view: the link the room opens, read from this browser's own address.
        desk, outside = open_page(browser, height=1100, curator_of=url)
        desk.goto(f"{url}/{TOOL_PATH}")
        wait_until_idle(desk)
        # the code and the key sit in one form: typing sends nothing, so no rerun can drop what was typed
        desk.get_by_label("Join code").fill(created.join_code)
        desk.get_by_label("Facilitator key").fill(created.facilitator_key)
        assert desk.get_by_label("Join code").input_value() == created.join_code
        desk.locator(".st-key-fe_open button").click()
        wait_until_idle(desk)
        desk.get_by_text("Join link").first.wait_for(timeout=120_000)
        wait_until_idle(desk)
        desk.locator("h1").first.scroll_into_view_if_needed()
        desk.screenshot(path=str(ARTIFACTS / "facilitator_join.png"))
        shown = format_code(created.join_code)
        link = f"{url}/{TOOL_PATH}?join={shown}"
        assert desk.locator("[data-testid='stCode']").filter(has_text=link).count() == 1
        qr = desk.locator(".join-qr img[alt^='QR code of the join link']")
        assert qr.count() == 1 and qr.first.get_attribute("src").startswith("data:image/svg+xml")
        assert qr.first.evaluate("img => img.complete && img.naturalWidth > 0")   # drawn, from the page itself
        assert desk.frame_locator("iframe").get_by_role("button", name="Copy link").count() == 1
        main = desk.locator("[data-testid='stMain']").inner_text()
        assert main.count(created.join_code) == 0 and main.count(shown) == 2   # the code, and inside the link
        if found := axe_violations(desk):
            failures.append("facilitator view:\n" + describe(found))
        # The projector's QR code: dark on white over the whole window, the link in text under it.
        desk.get_by_role("button", name="Show the QR code full screen").click()
        wait_until_idle(desk)
        big = desk.locator(".projector-qr img")
        box, view = big.bounding_box(), desk.viewport_size
        assert box["width"] >= 0.6 * view["height"] and box["y"] >= 0 and box["y"] + box["height"] <= view["height"]
        assert big.get_attribute("alt") == f"QR code of the join link {link}"
        assert desk.locator(".projector-qr").bounding_box() == {"x": 0, "y": 0, **view}
        assert desk.locator(".projector-link").inner_text() == link and desk.locator(".projector-link").is_visible()
        desk.screenshot(path=str(ARTIFACTS / "facilitator_qr_full_screen.png"))
        desk.get_by_role("button", name="Close the full-screen QR code").click()
        wait_until_idle(desk)
        assert desk.locator(".projector-qr").count() == 0

        # The stakeholder's phone opens that link: the join form, with no facilitator/stakeholder/demo switch.
        phone, outside_phone = open_page(browser, height=PHONE["height"], width=PHONE["width"],
                                         is_mobile=True, has_touch=True, device_scale_factor=2)
        phone.goto(link)
        wait_until_idle(phone)
        assert phone.get_by_text("Open as").count() == 0 and phone.get_by_text("Facilitator", exact=True).count() == 0
        if found := axe_violations(phone):
            failures.append("join form:\n" + describe(found))
        phone.get_by_label("Your name or nickname").fill("Pocket")
        phone.get_by_label("Your name or nickname").press("Enter")
        wait_until_idle(phone)
        phone.get_by_text("I understand that my answers").click()
        wait_until_idle(phone)
        phone.get_by_role("button", name="Join").click()
        phone.get_by_text("Welcome, Pocket").wait_for(timeout=120_000)
        n = 5
        answers = ["same", "differ", "same", "differ", "same"]
        labels = {"same": "Treat them the same", "differ": "They may be treated differently"}
        for k, response in enumerate(answers, start=1):
            _check_card(phone, k, n)
            if k == 1:    # the optional notes sit above the answer and go with it
                phone.get_by_text("Add how sure you are or why").click()
                phone.get_by_role("textbox", name="Why? (optional").fill("Same record")
                phone.get_by_role("textbox", name="Why? (optional").press("Control+Enter")
                wait_until_idle(phone)
                phone.screenshot(path=str(ARTIFACTS / "stakeholder_phone_card.png"))
                if found := axe_violations(phone):
                    failures.append("stakeholder card:\n" + describe(found))
            if k == 3:    # half-way: the tab is reloaded and comes back to the open card
                assert re.search(r"[?&]me=", phone.url)
                phone.reload()
                wait_until_idle(phone)
                _check_card(phone, k, n)
                assert phone.get_by_text("Open as").count() == 0
            if k == 2:    # read further down (a longer page): the next card must still open at its header
                phone.locator("[data-testid='stMainBlockContainer']").evaluate("e => e.style.paddingBottom = '1500px'")
                phone.mouse.wheel(0, 450)
                phone.wait_for_timeout(500)
                assert phone.get_by_text(f"Card {k} of {n}").bounding_box()["y"] < 0
            if k == 4:    # the tab is closed and the join link (no resume code in it) opened again
                phone.goto(link)
                wait_until_idle(phone)
                phone.get_by_text("Welcome, Pocket").wait_for(timeout=120_000)
                _check_card(phone, k, n)
                assert phone.get_by_text("3 of 5 cards answered").count() == 1
            phone.get_by_role("button", name=labels[response], exact=True).click()
            wait_until_idle(phone)
        phone.get_by_text("All cards answered").wait_for(timeout=120_000)
        wait_until_idle(phone)
        phone.screenshot(path=str(ARTIFACTS / "stakeholder_phone_done.png"), full_page=True)
        assert phone.locator("[data-testid='stException']").count() == 0
        desk.locator(".st-key-fe_refresh button").click()      # the facilitator sees the finished cards
        wait_until_idle(desk)
        desk.locator(".st-key-fe_progress_fig").first.scroll_into_view_if_needed()
        desk.screenshot(path=str(ARTIFACTS / "facilitator_progress.png"))
        assert desk.locator("[data-testid='stException']").count() == 0
        browser.close()
    # Through the store: one event per card, each the answer given, the reason with the first only.
    log = store.event_log(created.session_id, created.facilitator_key)
    assert sorted(log["position"]) == list(range(n)) and set(log["pseudonym"]) == {"Pocket"}
    live = store.judgments(created.session_id, created.facilitator_key).sort_values("position")
    assert list(live["response"]) == answers
    assert list(live["reason"]) == ["Same record"] + [None] * (n - 1)
    store.dispose()
    assert not failures, "\n".join(failures)
    assert not outside and not outside_phone, f"requests left the machine: {sorted(set(outside + outside_phone))[:5]}"
