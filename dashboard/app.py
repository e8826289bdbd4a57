"""Entry point: ``streamlit run dashboard/app.py``."""
from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from dashboard.components.jobs import jobs_sidebar  # noqa: E402
from dashboard.components.ledger_badge import sidebar_badge  # noqa: E402
from dashboard.page_registry import HOME, PAGES  # noqa: E402

st.set_page_config(page_title="Private & fair release workbench", page_icon="🛡️",
                   layout="wide")

home = st.Page(HOME.file, title=HOME.title, url_path=HOME.url_path, icon=HOME.icon, default=True)
tools = [st.Page(p.file, title=p.title, url_path=p.url_path, icon=p.icon) for p in PAGES]
page = st.navigation({"Overview": [home], "Tools": tools})
sidebar_badge()
jobs_sidebar()
page.run()
