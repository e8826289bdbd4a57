"""Curator keys and sign-in sessions: stored hashed, checked on the server, guessing slowed down.

The attacker here is anyone on the room's network: they may read the database file's rows (so no key
or session token is stored in the clear), try keys one after another (each failure from their address
costs them more waiting, while a holder elsewhere is never slowed), or replay a removed curator's cookie.
"""
from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select

from core.access import (CURATOR_NAME_MAX, CuratorKeys, GuessLimiter, check_curator_name, curator_keys,
                         sessions)


@pytest.fixture
def keys(tmp_path):
    store = CuratorKeys(f"sqlite:///{tmp_path / 'project.sqlite'}")
    yield store
    store.dispose()


def test_a_key_is_shown_once_and_stored_only_as_its_hash(keys):
    key = keys.add("Ada")
    assert len(key) >= 40 and keys.verify(key) == "Ada"
    with keys._read() as conn:
        stored = [tuple(r) for r in conn.execute(select(curator_keys))]
    text = repr(stored)
    assert key not in text and hashlib.sha256(key.encode()).hexdigest() in text
    assert keys.verify(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert keys.verify("") is None and keys.verify(None) is None


def test_curators_are_added_listed_and_removed_and_a_removed_key_or_cookie_opens_nothing(keys):
    ada, grace = keys.add("Ada"), keys.add("Grace")
    assert keys.names() == ["Ada", "Grace"]
    token = keys.open_session("Grace")
    assert keys.curator_of(token) == "Grace"
    with pytest.raises(ValueError, match="already"):
        keys.add("Grace")
    keys.remove("Grace")
    assert keys.names() == ["Ada"] and keys.verify(grace) is None and keys.curator_of(token) is None
    assert keys.verify(ada) == "Ada"
    with pytest.raises(ValueError, match="No curator"):
        keys.remove("Grace")


def test_a_sign_in_token_is_stored_hashed_and_expires(keys):
    keys.add("Ada")
    token = keys.open_session("Ada")
    with keys._read() as conn:
        assert token not in repr([tuple(r) for r in conn.execute(select(sessions))])
    assert keys.curator_of(token) == "Ada" and keys.curator_of("forged") is None
    assert keys.curator_of(token, now=keys.SESSION_SECONDS * 2 + 1e10) is None


def test_the_first_curator_is_made_once(keys):
    first = keys.ensure_first_curator()
    assert first is not None and keys.verify(first[1]) == first[0]
    assert keys.ensure_first_curator() is None        # a second start prints nothing


@pytest.mark.parametrize("name", ["", " ", "x" * (CURATOR_NAME_MAX + 1), "a\nb", "a\u202eb", "<b>x</b>"])
def test_a_curator_name_must_be_plain_short_text(name):
    with pytest.raises(ValueError):
        check_curator_name(name)


def test_guessing_from_one_address_waits_longer_each_time_but_other_addresses_do_not():
    limiter = GuessLimiter(free=3, window=600.0, cap=30.0)
    now = 1000.0
    waits = []
    for i in range(6):
        waits.append(limiter.wait_for("10.1.1.1", now))
        limiter.failed("10.1.1.1", now)
    assert waits[:3] == [0.0, 0.0, 0.0] and waits[3] > 0 and waits[4] > waits[3] and waits[5] > waits[4]
    assert limiter.wait_for("10.1.1.1", now) <= 30.0
    assert limiter.wait_for("10.2.2.2", now) == 0.0              # a holder elsewhere is not slowed
    assert limiter.wait_for("10.1.1.1", now + 601.0) == 0.0      # the window passes


def test_the_command_line_adds_lists_and_removes_curators_and_shows_a_key_once(tmp_path, monkeypatch, capsys):
    from core.__main__ import main

    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'cli.sqlite'}")
    assert main(["curator", "first", "--port", "8600"]) == 0
    first = capsys.readouterr().out
    assert "http://127.0.0.1:8600/signin#key=" in first
    key = first.split("#key=")[1].split()[0]
    assert main(["curator", "first"]) == 0 and capsys.readouterr().out == ""      # never shown twice
    assert main(["curator", "add", "Ada"]) == 0 and "#key=" in capsys.readouterr().out
    assert main(["curator", "list"]) == 0 and capsys.readouterr().out.split() == ["Ada", "curator"]
    assert main(["curator", "remove", "curator"]) == 0
    store = CuratorKeys(f"sqlite:///{tmp_path / 'cli.sqlite'}")
    assert store.verify(key) is None and store.names() == ["Ada"]
    store.dispose()
    assert main(["curator", "remove", "nobody"]) == 2 and "No curator" in capsys.readouterr().err
