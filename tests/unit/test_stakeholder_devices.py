"""Coming back to one's cards: the device token the browser keeps, and the resume code typed elsewhere.

The attacker is a second browser that knows the join link and a stakeholder's name (both are shown in
the room), but holds neither her device token nor her resume code.
"""
from __future__ import annotations

import re
import uuid

import pytest
from sqlalchemy import select

from core.fairness.elicitation import SessionConfig
from core.fairness.store import ElicitationStore, format_code
from core.fairness.store.devices import (RESUME_CODE_LENGTH, check_device_token, new_device_token,
                                         new_resume_code, normalise_resume_code, seal, shown_resume_code, unseal)
from core.fairness.store.schema import failed_attempts, stakeholder_devices, stakeholders

CARDS = SessionConfig(n_core=1, n_random=2, n_repeat=0, seed=2)


@pytest.fixture
def store(tmp_path):
    s = ElicitationStore(f"sqlite:///{tmp_path / 'sessions.sqlite'}")
    s.pause = lambda seconds: None
    yield s
    s.dispose()


@pytest.fixture
def room(store):
    return store.create_session(CARDS, "room")


def _failures(store) -> int:
    with store.read_tx() as conn:
        return len(conn.execute(select(failed_attempts)).all())


def test_a_second_browser_without_token_or_code_cannot_take_a_name(store, room):
    ann = store.join(room.join_code, "Ann", device=new_device_token(), client="10.0.0.1/phone")
    store.record_answer(ann.token, 0, "same", uuid.uuid4().hex)
    with pytest.raises(ValueError, match="already taken.*resume code"):
        store.join(room.join_code, "Ann", client="10.0.0.2/attacker")
    with pytest.raises(ValueError, match="already taken"):      # a device token of its own opens nothing
        store.join(room.join_code, "Ann", device=new_device_token(), client="10.0.0.2/attacker")
    with pytest.raises(PermissionError, match="resume code"):   # a guessed code is refused, and counted
        store.join(room.join_code, "Ann", resume_code="ABCD-EFGH-JKLM-NPQR", client="10.0.0.2/attacker")
    assert _failures(store) == 1
    with store.read_tx() as conn:   # still one Ann, with her answer
        assert conn.execute(select(stakeholders.c.pseudonym)).scalars().all() == ["Ann"]
    assert list(store.my_answers(ann.token)["response"]) == ["same"]


def test_the_device_she_joined_on_reopens_her_cards_and_nobody_elses(store, room):
    phone, other = new_device_token(), new_device_token()
    ann = store.join(room.join_code, "Ann")
    store.bind_device(ann.token, phone)
    back = store.device_login(room.join_code, phone)
    assert (back.stakeholder_id, back.token, back.resumed) == (ann.stakeholder_id, ann.token, True)
    again = store.join(room.join_code, "Ann", device=phone)    # her name typed again on her phone
    assert (again.stakeholder_id, again.token, again.resumed) == (ann.stakeholder_id, ann.token, True)
    assert store.device_login(room.join_code, other) is None
    assert store.device_login(room.join_code, None) is None
    assert store.device_login(room.join_code, "not a device token") is None
    # scoped to the session: the same phone in another room is a stranger there
    elsewhere = store.create_session(CARDS, "other room")
    assert store.device_login(elsewhere.join_code, phone) is None


def test_the_resume_code_reopens_her_cards_on_another_device_which_then_keeps_them(store, room):
    ann = store.join(room.join_code, "Ann")
    assert re.fullmatch(rf"[A-Z2-9]{{{RESUME_CODE_LENGTH}}}", ann.token)
    laptop = new_device_token()
    typed = format_code(ann.token).lower()                    # read off the phone, typed in any case
    back = store.join(room.join_code, "Ann", resume_code=typed, device=laptop)
    assert (back.stakeholder_id, back.token, back.resumed) == (ann.stakeholder_id, ann.token, True)
    assert store.device_login(room.join_code, laptop).stakeholder_id == ann.stakeholder_id
    # the code alone is enough (a misspelt name does not split her answers)
    assert store.join(room.join_code, "Anne", resume_code=ann.token).stakeholder_id == ann.stakeholder_id
    # but it is hers in this session only
    elsewhere = store.create_session(CARDS, "other room")
    with pytest.raises(PermissionError, match="not valid in this session"):
        store.join(elsewhere.join_code, "Ann", resume_code=ann.token)


def test_only_digests_and_sealed_codes_are_stored(store, room):
    device = new_device_token()
    ann = store.join(room.join_code, "Ann")
    store.bind_device(ann.token, device)
    with store.read_tx() as conn:
        rows = [dict(r) for r in conn.execute(select(stakeholder_devices)).mappings()]
        people = [dict(r) for r in conn.execute(select(stakeholders)).mappings()]
    stored = repr(rows) + repr(people)
    assert ann.token not in stored and device not in stored
    assert unseal(rows[0]["sealed_code"], device, ann.session_id, ann.stakeholder_id) == ann.token
    assert unseal(rows[0]["sealed_code"], new_device_token(), ann.session_id, ann.stakeholder_id) != ann.token
    # the pad depends on the stakeholder: the same device and code seal differently for someone else
    assert seal(ann.token, device, ann.session_id, "x" * 32) != rows[0]["sealed_code"]


def test_a_shared_device_opens_whoever_signed_in_last_and_nobody_after_a_sign_out(store, room):
    tablet = new_device_token()
    ann = store.join(room.join_code, "Ann")
    bob = store.join(room.join_code, "Bob")
    store.bind_device(ann.token, tablet)
    store.bind_device(bob.token, tablet)
    assert store.device_login(room.join_code, tablet).pseudonym == "Bob"
    with pytest.raises(ValueError, match="already taken"):    # the tablet no longer proves Ann
        store.join(room.join_code, "Ann", device=tablet)
    store.forget_device(bob.token, tablet)
    assert store.device_login(room.join_code, tablet) is None


def test_withdrawing_a_stakeholder_forgets_her_devices(store, room):
    phone = new_device_token()
    ann = store.join(room.join_code, "Ann")
    store.bind_device(ann.token, phone)
    store.delete_stakeholder(room.session_id, room.facilitator_key, "Ann")
    assert store.device_login(room.join_code, phone) is None
    fresh = store.join(room.join_code, "Ann", device=phone)    # the name is free again: a new stakeholder
    assert not fresh.resumed and fresh.stakeholder_id != ann.stakeholder_id


def test_codes_and_device_tokens_are_checked():
    assert normalise_resume_code(" abcd efgh-jkmn PQRS ") == "ABCDEFGHJKMNPQRS"
    legacy = "Kx8_f-Qz0aBcDeFgHiJkLmNo"                       # codes handed out before: kept as they are
    assert normalise_resume_code(legacy) == legacy and shown_resume_code(legacy) == legacy
    code = new_resume_code()
    shown = shown_resume_code(code)
    assert re.fullmatch(r"(?:[A-Z2-9]{4}-){3}[A-Z2-9]{4}", shown) and normalise_resume_code(shown) == code
    with pytest.raises(ValueError, match="resume code"):
        normalise_resume_code("   ")
    token = new_device_token()
    assert check_device_token(token) == token and token != new_device_token()
    for bad in (None, 42, "", "short", token + "x", token[:-1] + "!"):
        assert check_device_token(bad) is None
