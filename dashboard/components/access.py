"""The role of the browser a page is built for, decided on the server from the sign-in cookie.

A curator (a valid cookie from ``/signin``, see ``dashboard/server.py``; or, where the installation has an
identity provider configured for Streamlit's ``st.login``, a signed-in user whose e-mail is a curator's
name) sees every page. Anyone else is a guest: the room's page only, where a join link opens a
stakeholder's card and a session's join code and facilitator key open that session's console. Nothing
here hides a link in the browser: the navigation of a guest's session holds no other page at all.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import streamlit as st

from core.access import CuratorKeys
from core.database import LOCAL_CURATOR

COOKIE = "dashboard_curator"
"""The sign-in cookie's name (HttpOnly: the page's scripts never see it)."""

_store: CuratorKeys | None = None
_lock = threading.Lock()


def curator_keys() -> CuratorKeys:
    """The process's one curator-key store (in the project database)."""
    global _store
    with _lock:
        if _store is None:
            _store = CuratorKeys()
        return _store


@dataclass(frozen=True)
class Role:
    curator: str | None = None
    """The signed-in curator's name; None for a guest."""

    @property
    def is_curator(self) -> bool:
        return self.curator is not None


def _oidc_curator() -> str | None:
    """The user Streamlit's identity-provider login signed in, when ``[auth]`` is configured in
    ``.streamlit/secrets.toml`` and the provider vouches for their e-mail: a curator only when that e-mail is
    named, either in ``curators = [...]`` under ``[auth]`` or as a curator in the key store
    (``python -m core curator add ada@example.org``, so ``curator remove`` ends it too). Signing in with the
    provider alone opens nothing: a public provider lets anyone sign in."""
    try:
        user = st.user
        if not user.is_logged_in:
            return None
        email = str(user.get("email") or "").strip()
        verified = user.get("email_verified", True)
        allowed = st.secrets["auth"].get("curators")
    except Exception:  # noqa: BLE001 - no [auth] section configured: st.user has nothing to say
        return None
    if not email or verified is False:
        return None
    named = list(allowed) if allowed is not None else curator_keys().names()
    return email if email in named else None


def identity_provider_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def current_role() -> Role:
    """The role this browser proves now: read from its cookie (or identity-provider login) every run,
    so a removed curator or an expired sign-in loses the pages at the next click."""
    token = st.context.cookies.get(COOKIE) if st.context.cookies is not None else None
    name = curator_keys().curator_of(token) if token else None
    if name is None and identity_provider_configured():
        name = _oidc_curator()
    return Role(name)


def curator_name() -> str:
    """Who is acting, as the ledger, the data-set store and the population answers record it: the signed-in
    curator, else ``LOCAL_CURATOR`` (a page built without a sign-in, as in a script)."""
    return current_role().curator or LOCAL_CURATOR
