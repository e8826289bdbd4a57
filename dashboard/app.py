"""The pages, for the role the browser proves (served by ``dashboard/server.py``, which adds sign-in)."""
from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from dashboard.components.access import current_role  # noqa: E402
from dashboard.components.jobs import jobs_sidebar  # noqa: E402
from dashboard.components.ledger_badge import sidebar_badge  # noqa: E402
from dashboard.page_registry import HOME, PAGES, ROOM  # noqa: E402

st.set_page_config(page_title="Private & fair release workbench", page_icon="🛡️",
                   layout="wide")

if current_role().is_curator:
    home = st.Page(HOME.file, title=HOME.title, url_path=HOME.url_path, icon=HOME.icon, default=True)
    tools = [st.Page(p.file, title=p.title, url_path=p.url_path, icon=p.icon) for p in PAGES]
    page = st.navigation({"Overview": [home], "Tools": tools})
    sidebar_badge()
    jobs_sidebar()
else:
    # A guest's session knows the room only (join a session as a stakeholder, or open one's console with its
    # facilitator key), at its own address, where join links point; the bare address (the default page, served
    # at "/") goes there too. No list of pages is sent.
    room = st.Page(ROOM.file, title=ROOM.title, url_path=ROOM.url_path, icon=ROOM.icon)
    page = st.navigation([st.Page(lambda: st.switch_page(room), title="Join a session", url_path="join",
                                  default=True), room], position="hidden")
page.run()
