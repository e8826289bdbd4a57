"""A browser without a curator's sign-in is built the room's page and nothing else: no page list, no
Data step, no ledger, no job list, no session creation; any address it opens lands on the room."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.page_registry import PAGES, ROOM

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
CURATOR_ONLY = ("Create a session", "Import an exported session", "Open as", "Privacy ledger", "Data step")


def _texts(at: AppTest) -> str:
    parts = [e.value for e in at.markdown] + [e.value for e in at.caption] + [e.label for e in at.button] \
        + [e.value for e in at.subheader] + [e.value for e in at.title] + [e.label for e in at.radio] \
        + [e.label for e in at.expander]
    return "\n".join(str(p) for p in parts)


def test_a_guest_gets_the_room_page_and_its_session_knows_no_other(guest_browser):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    assert at.title[0].value == "Pairwise fairness elicitation"
    text = _texts(at)
    assert "Join a session" in text and "Facilitators: open your session" in text
    for word in CURATOR_ONLY:
        assert word not in text, word
    assert not at.sidebar.button and not at.sidebar.markdown     # no job list, no ledger badge
    for page in PAGES:
        if page is ROOM:
            continue
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page(page.file)                              # the server never registered it


def test_a_curator_gets_every_page_and_the_room_with_its_session_tools():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    at.switch_page(ROOM.file)
    at.run()
    assert "Open as" in _texts(at)


def test_an_identity_provider_login_is_a_curator_only_when_its_e_mail_is_named(monkeypatch, guest_browser):
    """With Streamlit's OIDC login configured, a provider's user is a curator only when the e-mail is listed
    (``curators`` under ``[auth]``, else the key store) and verified: a public provider lets anyone in."""
    from dashboard.components import access

    class User(dict):
        is_logged_in = True

    class Secrets(dict):
        pass

    def signed_in(email, verified=True, curators=None):
        monkeypatch.setattr(access.st, "user", User(email=email, email_verified=verified))
        auth = {} if curators is None else {"curators": curators}
        monkeypatch.setattr(access.st, "secrets", Secrets(auth=auth))
        return access._oidc_curator()

    assert signed_in("ada@example.org", curators=["ada@example.org"]) == "ada@example.org"
    assert signed_in("eve@example.org", curators=["ada@example.org"]) is None
    assert signed_in("ada@example.org", verified=False, curators=["ada@example.org"]) is None
    monkeypatch.setattr(access, "curator_keys", lambda: type("Keys", (), {"names": lambda self: ["bob@example.org"]})())
    assert signed_in("bob@example.org") == "bob@example.org" and signed_in("eve@example.org") is None
