"""The stakeholder's browser in the room: its device token (an HttpOnly cookie the server sets, see
``dashboard/server.py``), the small scripts that ask the server to bind or forget it, and the phone
layout of a card (compact CSS, and each new card brought to its own header)."""
from __future__ import annotations

import json

import streamlit as st

from core.fairness.store.devices import DEVICE_COOKIE, check_device_token

DEVICE_PATH = "/room/device"
"""The server's route that sets the device cookie and binds it to a stakeholder (``dashboard/server.py``)."""

# A card, its pair and its answer buttons on a 390 x 844 phone without scrolling: Streamlit's top bar
# and padding go, gaps shrink, the table is set small, answer and navigation buttons stay side by side
# (Streamlit stacks columns below 640 px).
CARD_CSS = """<style>
[data-testid="stHeader"]{display:none}
[data-testid="stMainBlockContainer"]{padding-top:.6rem;padding-bottom:1rem}
[data-testid="stMainBlockContainer"] h1{font-size:1rem;padding:0;margin:0;color:#444}
.st-key-fe_card [data-testid="stVerticalBlock"]{gap:.45rem}
.st-key-fe_card h3{font-size:1.15rem;padding:.1rem 0 1rem}
.st-key-fe_card h4{font-size:1.05rem;padding:.2rem 0 1rem}
.st-key-fe_card [data-testid="stTable"] table{font-size:.82rem;line-height:1.2}
.st-key-fe_card [data-testid="stTable"] th,.st-key-fe_card [data-testid="stTable"] td{padding:.2rem .4rem}
.st-key-fe_card [data-testid="stExpander"] summary{padding-top:.3rem;padding-bottom:.3rem}
.st-key-fe_card [data-testid="stText"]{font-size:.85rem;line-height:1.3}
.st-key-fe_answers [data-testid="stHorizontalBlock"],.st-key-fe_nav [data-testid="stHorizontalBlock"]
  {flex-wrap:nowrap;gap:.4rem}
.st-key-fe_answers [data-testid="stColumn"],.st-key-fe_nav [data-testid="stColumn"]
  {min-width:0;flex:1 1 0;width:auto}
.st-key-fe_answers button{min-height:3.2rem;line-height:1.15}
.st-key-fe_answers button [data-testid="stMarkdownContainer"],.st-key-fe_answers button p
  {white-space:normal;overflow:visible;text-overflow:clip}
.st-key-fe_nav button{padding-left:.2rem;padding-right:.2rem;font-size:.85rem}
.resume-code{font:600 1rem monospace;letter-spacing:.06em}
</style>"""


def device_token() -> str | None:
    """This browser's device token, from the cookie its connection was opened with (None if it has none)."""
    cookies = st.context.cookies
    return check_device_token(cookies.get(DEVICE_COOKIE)) if cookies is not None else None


def _post_script(fields: dict) -> str:
    """A script that posts ``fields`` to the device route from this page (same origin: the cookie is sent
    and may be set). JSON-encoded with ``<`` escaped, so no value can close the script."""
    body = json.dumps(fields).replace("<", "\\u003c")
    return (f"<script>fetch({json.dumps(DEVICE_PATH)}, {{method: 'POST', credentials: 'same-origin', "
            f"body: new URLSearchParams({body})}});</script>")


def keep_device(code: str) -> None:
    """Ask the server to give this browser a device token (when it has none) bound to the stakeholder
    whose resume code this is: reopening the join link then brings her back to her cards."""
    st.html(_post_script({"code": code}), unsafe_allow_javascript=True)


def forget_device(code: str) -> None:
    """Ask the server to unbind this browser's device token from the stakeholder (sign-out)."""
    st.html(_post_script({"code": code, "forget": "1"}), unsafe_allow_javascript=True)


def card_layout() -> None:
    """The phone layout of the stakeholder's card (CSS only)."""
    st.html(CARD_CSS)


def scroll_to_card(position: int) -> None:
    """Bring the card's header to the top of the view; drawn once per newly opened card (a click at the
    bottom of one card would otherwise open the next scrolled past its header)."""
    st.html(f"<script data-card='{int(position)}'>"
            "document.querySelector('.st-key-fe_card_head')?.scrollIntoView({block: 'start'});</script>",
            unsafe_allow_javascript=True)
