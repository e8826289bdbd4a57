"""The dashboard as a web application: ``streamlit run dashboard/server.py`` (what ``make run`` starts).

Streamlit serves the pages of ``app.py``; this module adds the curator's sign-in:

- ``/signin#key=...`` is the link a curator is given. The key sits after ``#``, so the browser never sends
  it in a request line (no server or proxy log, no Referer). The page's own script reads it, wipes it from
  the address bar and posts it; the answer is a session cookie (HttpOnly, SameSite=Strict, Secure behind
  TLS) and a redirect to the home page. A wrong key gets a plain refusal after a wait that grows with
  each failure from the same address (:class:`core.access.GuessLimiter`).
- ``/signout`` ends the session and clears the cookie.
- ``/room/device`` (POST from the room's page, same origin) gives a stakeholder's browser a device token in an
  HttpOnly, SameSite=Strict cookie, when it has none, and binds it to her (her resume code in the body, checked
  under the guessing limit): reopening the join link on that browser brings her back to her cards.
  ``forget=1`` unbinds it (sign-out on a shared device).

The pages read the cookie on the server (``dashboard/components/access.py``) and build the navigation
for the role it proves; a browser without one gets the room's join page and nothing else.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import streamlit as st
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from core.access import GuessLimiter  # noqa: E402
from core.fairness.store import get_store  # noqa: E402
from core.fairness.store.devices import (DEVICE_COOKIE, DEVICE_SECONDS, check_device_token,  # noqa: E402
                                         new_device_token)
from dashboard.components.access import COOKIE, curator_keys  # noqa: E402
from dashboard.components.room_device import DEVICE_PATH  # noqa: E402

SIGNIN_PATH = "/signin"
SIGNOUT_PATH = "/signout"
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                       "form-action 'self'; frame-ancestors 'none'"}

SIGNIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Curator sign-in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1f2328}
input{width:100%;padding:.5rem;font-size:1rem}button{margin-top:.8rem;padding:.5rem 1.2rem;font-size:1rem}</style>
</head><body><h1>Curator sign-in</h1>
<p id="msg">Signing you in&hellip;</p>
<form id="f" method="post" action="/signin"><label for="k">Curator key</label>
<input id="k" name="key" type="password" autocomplete="off" required><button type="submit">Sign in</button></form>
<script>
(function () {
  var m = /(?:^#|&)key=([^&]*)/.exec(window.location.hash || "");
  history.replaceState(null, "", window.location.pathname);
  if (m) { document.getElementById("k").value = decodeURIComponent(m[1]); document.getElementById("f").submit(); }
  else { document.getElementById("msg").textContent = "Paste the curator key you were given."; }
})();
</script></body></html>"""

REFUSED_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Not signed in</title></head>
<body style="font-family:sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem">
<h1>That key does not open the curator's pages</h1>
<p>Check that the whole link was copied, or ask for a new key (<code>python -m core curator add NAME</code>
on the server). Stakeholders join a session with the link or code their facilitator gives them.</p>
<p><a href="/signin">Try again</a> &middot; <a href="/">Join a session</a></p></body></html>"""

limiter = GuessLimiter()


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "") == "https"


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    return origin is None or origin.split("://", 1)[-1] == request.headers.get("host", "")


async def signin(request: Request) -> Response:
    if request.method == "GET":
        # same-origin, not no-referrer: under no-referrer Chromium posts the form with "Origin: null", which
        # the origin check must refuse (a Referer never carries the fragment that holds the key)
        return HTMLResponse(SIGNIN_PAGE, headers={**NO_STORE, "Referrer-Policy": "same-origin"})
    if not _same_origin(request):
        return HTMLResponse(REFUSED_PAGE, status_code=403, headers=NO_STORE)
    client = request.client.host if request.client else "?"
    wait = limiter.wait_for(client)
    if wait:
        await asyncio.sleep(wait)
    form = await request.form()
    key = form.get("key")
    store = curator_keys()
    name = await asyncio.to_thread(store.verify, key if isinstance(key, str) else None)
    if name is None:
        limiter.failed(client)
        return HTMLResponse(REFUSED_PAGE, status_code=403, headers=NO_STORE)
    token = await asyncio.to_thread(store.open_session, name)
    response = RedirectResponse("/", status_code=303, headers=NO_STORE)
    response.set_cookie(COOKIE, token, max_age=int(store.SESSION_SECONDS), path="/", httponly=True,
                        samesite="strict", secure=_secure(request))
    return response


async def signout(request: Request) -> Response:
    response = RedirectResponse("/", status_code=303, headers=NO_STORE)
    response.delete_cookie(COOKIE, path="/")
    token = request.cookies.get(COOKIE)
    if token:
        await asyncio.to_thread(curator_keys().close_session, token)
    return response


async def room_device(request: Request) -> Response:
    """Bind this browser's device token (made here when the request carries none) to the stakeholder whose
    resume code is posted, or unbind it (``forget=1``). A wrong code counts against the guessing limit."""
    if not _same_origin(request):
        return Response(status_code=403, headers=NO_STORE)
    form = await request.form()
    code, forget = form.get("code"), form.get("forget") == "1"
    store = get_store()
    client = f"{request.client.host if request.client else '?'}/device"
    device = check_device_token(request.cookies.get(DEVICE_COOKIE))
    try:
        await asyncio.to_thread(store.resume, code if isinstance(code, str) else "", client=client)
        if forget:
            await asyncio.to_thread(store.forget_device, code, device)
            return Response(status_code=204, headers=NO_STORE)
        device = device or new_device_token()
        await asyncio.to_thread(store.bind_device, code, device)
    except (ValueError, PermissionError):
        return Response(status_code=403, headers=NO_STORE)
    response = Response(status_code=204, headers=NO_STORE)
    response.set_cookie(DEVICE_COOKIE, device, max_age=DEVICE_SECONDS, path="/", httponly=True,
                        samesite="strict", secure=_secure(request))
    return response


app = st.App("app.py", routes=[Route(SIGNIN_PATH, signin, methods=["GET", "POST"]),
                               Route(SIGNOUT_PATH, signout, methods=["GET"]),
                               Route(DEVICE_PATH, room_device, methods=["POST"])])
