"""The server's ``/room/device`` route: it binds a browser's device cookie to a stakeholder only from the
room's own page and only with her resume code, and the cookie it sets is out of reach of scripts and of
other sites."""
from __future__ import annotations

import asyncio
from http.cookies import SimpleCookie
from urllib.parse import urlencode

import pytest
from sqlalchemy import select
from starlette.requests import Request

from core.fairness.elicitation import SessionConfig
from core.fairness.store import ElicitationStore
from core.fairness.store.devices import DEVICE_COOKIE, new_device_token
from core.fairness.store.schema import failed_attempts

HOST = "room.example:8501"


@pytest.fixture
def route(tmp_path, monkeypatch):
    """(the route, the store it uses, a session)."""
    url = f"sqlite:///{tmp_path / 'sessions.sqlite'}"
    monkeypatch.setenv("DASHBOARD_DB_URL", url)
    from dashboard import server
    store = ElicitationStore(url)
    store.pause = lambda seconds: None
    monkeypatch.setattr(server, "get_store", lambda: store)
    yield server.room_device, store, store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "r")
    store.dispose()


def _post(route, fields: dict, *, origin: str | None = f"http://{HOST}", cookie: str | None = None):
    headers = [(b"host", HOST.encode()), (b"content-type", b"application/x-www-form-urlencoded")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if cookie is not None:
        headers.append((b"cookie", f"{DEVICE_COOKIE}={cookie}".encode()))
    body = urlencode(fields).encode()

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    scope = {"type": "http", "method": "POST", "path": "/room/device", "scheme": "http", "headers": headers,
             "query_string": b"", "server": ("room.example", 8501), "client": ("10.0.0.5", 40000)}
    return asyncio.run(route(Request(scope, receive)))


def _set_cookie(response) -> SimpleCookie:
    jar = SimpleCookie()
    for name, value in response.raw_headers:
        if name == b"set-cookie":
            jar.load(value.decode())
    return jar


def test_another_site_or_a_wrong_code_binds_nothing(route):
    room_device, store, room = route
    ann = store.join(room.join_code, "Ann")
    refused = _post(room_device, {"code": ann.token}, origin="https://evil.example")
    assert refused.status_code == 403 and not _set_cookie(refused)
    wrong = _post(room_device, {"code": "ABCD-EFGH-JKLM-NPQR"})
    assert wrong.status_code == 403 and not _set_cookie(wrong)
    with store.read_tx() as conn:                                      # counted as a guess from that address
        assert conn.execute(select(failed_attempts.c.address)).scalars().all() == ["10.0.0.5"]


def test_her_code_gets_the_browser_an_httponly_strict_cookie_that_reopens_her_cards(route):
    room_device, store, room = route
    ann = store.join(room.join_code, "Ann")
    response = _post(room_device, {"code": ann.token})
    assert response.status_code == 204
    cookie = _set_cookie(response)[DEVICE_COOKIE]
    assert cookie["httponly"] and cookie["samesite"].lower() == "strict" and cookie["path"] == "/"
    assert store.device_login(room.join_code, cookie.value).stakeholder_id == ann.stakeholder_id
    # a browser that already holds a device token keeps it: the route binds that one
    held = new_device_token()
    again = _post(room_device, {"code": ann.token}, cookie=held)
    assert _set_cookie(again)[DEVICE_COOKIE].value == held
    assert store.device_login(room.join_code, held).pseudonym == "Ann"
    # sign-out: forgotten, and the cookie opens nothing any more
    assert _post(room_device, {"code": ann.token, "forget": "1"}, cookie=held).status_code == 204
    assert store.device_login(room.join_code, held) is None
