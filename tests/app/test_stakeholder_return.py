"""A stakeholder comes back to her own cards: the join link on the device she joined on, her resume code
(in full view at the foot of every card) on another; a browser with neither cannot take her name.

AppTest sends no cookies, so the device token each "browser" holds is set where the page reads it."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.fairness import ElicitationPlan
from core.fairness.store import format_code, get_store
from core.fairness.store.devices import new_device_token
from dashboard.components import room_device

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "fairness_elicitation.py")


@pytest.fixture
def room():
    created = get_store().create_session(ElicitationPlan(n_core=2, n_random=3, n_repeat=0).session_config(),
                                         "Return")
    return created


@pytest.fixture
def browser(monkeypatch):
    """``browser(device)`` opens the page as a browser holding that device token (None: no cookie)."""
    def open_as(device: str | None, **query) -> AppTest:
        monkeypatch.setattr(room_device, "device_token", lambda: device)
        at = AppTest.from_file(PAGE, default_timeout=120)
        for k, v in query.items():
            at.query_params[k] = v
        at.run()
        assert not at.exception
        return at
    return open_as


def _join(at: AppTest, name: str, resume_code: str = "") -> None:
    at.text_input(key="fe_join_name").input(name).run()
    if resume_code:
        at.text_input(key="fe_resume_code").input(resume_code).run()
    at.checkbox(key="fe_consent").check().run()
    at.button(key="fe_join").click().run()
    assert not at.exception


def _login(at: AppTest) -> dict | None:
    return at.session_state["fe_login"] if "fe_login" in at.session_state else None


def _card(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("#### Card"))


def _answers(room) -> int:
    return len(get_store().event_log(room.session_id, room.facilitator_key))


def test_a_browser_without_her_device_or_code_cannot_take_her_name(browser, room):
    phone = browser(new_device_token(), join=room.join_code)
    _join(phone, "Ann")
    phone.button(key="fe_ans_same").click().run()
    # the attacker: the same link and name, its own cookie, no resume code
    other = browser(new_device_token(), join=room.join_code)
    assert not _login(other)
    _join(other, "Ann")
    assert any("already taken" in e.value and "resume code" in e.value for e in other.error)
    assert not _login(other) and other.text_input(key="fe_join_name").value == "Ann"
    _join(other, "Ann", resume_code="ABCD-EFGH-JKLM-NPQR")          # a guess
    assert any("resume code is not valid" in e.value for e in other.error)
    assert not _login(other)
    progress = get_store().progress(room.session_id, room.facilitator_key)
    assert list(progress["stakeholder"]) == ["Ann"] and _answers(room) == 1


def test_her_resume_code_is_in_full_view_and_opens_her_cards_on_another_device(browser, room):
    phone = browser(None, join=room.join_code)
    _join(phone, "Ann")
    code = format_code(phone.session_state["fe_login"]["token"])
    footer = [m for m in phone.markdown if code in m.value]
    assert len(footer) == 1 and "resume code" in footer[0].value
    assert all(code not in m.value for e in phone.expander for m in e.markdown)   # never tucked away
    phone.button(key="fe_ans_same").click().run()
    assert _card(phone) == "#### Card 2 of 5"
    assert any(code in m.value for m in phone.markdown)                        # on every card's foot

    laptop = browser(new_device_token(), join=room.join_code)
    _join(laptop, "Ann", resume_code=code.lower().replace("-", " "))
    assert not laptop.error and _card(laptop) == "#### Card 2 of 5"
    laptop.button(key="fe_ans_differ").click().run()
    phone.run()
    assert _card(phone) == "#### Card 3 of 5" and _answers(room) == 2
    progress = get_store().progress(room.session_id, room.facilitator_key)
    assert list(progress["stakeholder"]) == ["Ann"] and int(progress["answered"].iloc[0]) == 2


def test_the_join_link_on_her_device_reopens_her_card_until_she_signs_out(browser, room):
    device = new_device_token()
    phone = browser(device, join=room.join_code)
    _join(phone, "Ann")
    phone.button(key="fe_ans_same").click().run()
    # the tab is closed; the join link (no resume code in it) is opened again on the same phone
    again = browser(device, join=room.join_code)
    assert _login(again)["name"] == "Ann"
    assert _card(again) == "#### Card 2 of 5" and again.query_params["me"]
    again.button(key="fe_ans_same").click().run()
    assert _card(again) == "#### Card 3 of 5" and _answers(room) == 2
    again.button(key="fe_signout").click().run()
    assert not _login(again) and again.button(key="fe_join") is not None
    after = browser(device, join=room.join_code)                      # signed out: the join form again
    assert not _login(after)


def test_a_browser_without_a_device_cookie_asks_the_server_for_one_bound_to_her(browser, room):
    phone = browser(None, join=room.join_code)
    _join(phone, "Ann")
    token = phone.session_state["fe_login"]["token"]
    scripts = [h.proto.body for h in phone.get("html") if "/room/device" in h.proto.body]
    assert len(scripts) == 1 and token in scripts[0] and "forget" not in scripts[0]
    with_cookie = browser(new_device_token(), join=room.join_code)   # a cookie already: bound on the server side
    _join(with_cookie, "Bea")
    assert not [h for h in with_cookie.get("html") if "/room/device" in h.proto.body]
