"""Guessing limits on join codes, resume codes and facilitator keys never refuse a right code.

Wrong codes from many addresses, or from one address behind a reverse proxy, must not lock the
other stakeholders out; only the browser session that guessed is refused, and past the address
or overall limit wrong codes are answered slowly.
"""
from __future__ import annotations

import time

import pytest

from core.fairness.elicitation import SessionConfig
from core.fairness.store import (MAX_FAILURES_PER_ADDRESS, MAX_FAILURES_PER_CLIENT, MAX_FAILURES_TOTAL,
                                 ElicitationStore, TooManyAttempts)
from core.fairness.store.schema import failed_attempts

WRONG = "ZZZZZZZZZZZZ"


@pytest.fixture
def store(tmp_path):
    s = ElicitationStore(f"sqlite:///{tmp_path / 'sessions.sqlite'}")
    s.pauses = []
    s.pause = s.pauses.append           # record the slow-down instead of sleeping
    yield s
    s.dispose()


def _created(store):
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "room")
    assert created.join_code != WRONG
    return created


def _log_wrong(store, clients: list[str]) -> None:
    """Recent wrong codes, one per entry of `clients` ("address/session"), written in one go."""
    now = time.time()
    rows = [{"client": c, "address": c.split("/", 1)[0], "at": now} for c in clients]
    with store.write_tx() as conn:
        conn.execute(failed_attempts.insert(), rows)


def test_wrong_codes_from_many_addresses_lock_nobody_out(store):
    created = _created(store)
    ann = store.join(created.join_code, "Ann", client="10.9.9.9/ann")
    per_address = MAX_FAILURES_TOTAL // 20
    _log_wrong(store, [f"10.0.{a}.1/s{k % 10}" for a in range(20) for k in range(per_address)])
    fresh = "192.168.1.5/new-tab"
    assert store.join(created.join_code, "Bea", client=fresh).pseudonym == "Bea"
    assert store.session_info(created.join_code, client=fresh)["name"] == "room"
    assert store.open_session(created.join_code, created.facilitator_key, client=fresh)["name"] == "room"
    assert store.resume(ann.token, client=fresh).pseudonym == "Ann"       # the ?me= link
    assert store.pauses == []
    # A wrong code is still answered as too many, after a pause.
    with pytest.raises(TooManyAttempts, match="this dashboard"):
        store.join(WRONG, "Cy", client=fresh)
    assert store.pauses == [store.failure_pause_s]


def test_one_proxy_address_does_not_lock_the_room_out(store):
    created = _created(store)
    ann = store.join(created.join_code, "Ann", client="10.0.0.1/ann")
    # Behind a reverse proxy every browser shares the proxy's address.
    _log_wrong(store, [f"10.0.0.1/guess-{k}" for k in range(MAX_FAILURES_PER_ADDRESS)])
    neighbour = "10.0.0.1/neighbour"
    assert store.session_info(created.join_code, client=neighbour)["name"] == "room"
    assert store.join(created.join_code, "Bea", client=neighbour).pseudonym == "Bea"
    assert store.resume(ann.token, client=neighbour).pseudonym == "Ann"
    assert store.pauses == []
    with pytest.raises(TooManyAttempts, match="your network"):
        store.session_info(WRONG, client="10.0.0.1/guess-new")
    with pytest.raises(TooManyAttempts, match="your network"):
        store.resume("not-a-real-resume-code", client="10.0.0.1/guess-new")
    assert store.pauses == [store.failure_pause_s] * 2


def test_a_personal_link_opens_even_in_a_browser_that_guessed_wrong(store):
    created = _created(store)
    ann = store.join(created.join_code, "Ann", client="10.0.0.7/ann")
    for _ in range(MAX_FAILURES_PER_CLIENT):
        with pytest.raises(ValueError, match="No session"):
            store.session_info(WRONG, client="10.0.0.7/typist")
    # The typist's own browser session is refused before its code is looked at ...
    with pytest.raises(TooManyAttempts, match="this browser"):
        store.join(created.join_code, "Typist", client="10.0.0.7/typist")
    # ... but a valid personal link opened there is not, and a wrong one still counts as wrong.
    assert store.resume(ann.token, client="10.0.0.7/typist").pseudonym == "Ann"
    with pytest.raises(TooManyAttempts, match="this browser"):
        store.resume("not-a-real-resume-code", client="10.0.0.7/typist")
    assert store.pauses == []


def test_wrong_codes_below_the_limits_are_answered_plainly(store):
    created = _created(store)
    with pytest.raises(ValueError, match="No session has the join code") as err:
        store.join(WRONG, "Cy", client="10.0.0.3/x")
    assert not isinstance(err.value, TooManyAttempts)
    with pytest.raises(PermissionError):
        store.open_session(created.join_code, "wrong key", client="10.0.0.3/x")
    assert store.pauses == []
