"""'Download script' and 'Download notebook': a page's report as code an analyst can keep and rerun.

The text comes from :mod:`core.script_export` (the same as ``python -m core script REPORT.json``): the
plan written out as Python, the data loaded the way the page did, the run, the tables as CSV and the
page's main figure as HTML.
"""
from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from core.script_export import notebook_json, script_text


def code_key(key: str) -> str:
    """Session key of the script text the "Download script" button offers (for reuse and checks)."""
    return f"{key}__script_text"


def code_export_buttons(report: Mapping[str, Any], *, key: str) -> None:
    """Two download buttons for ``report``: a Python script and a Jupyter notebook that recompute it."""
    try:
        script = script_text(report)
    except ValueError as exc:
        st.caption(f"This result cannot be written out as code: {exc}")
        return
    st.session_state[code_key(key)] = script
    left, right = st.columns(2)
    left.download_button("Download script (Python)", script, file_name=f"{key}_reproduce.py",
                         mime="text/x-python", key=f"{key}_script", icon=":material/code:",
                         help="A Python script that recomputes this result with the project's core API "
                              "(run it from the project's folder): the plan as Python, the data, the run, "
                              "every table as CSV and the main figure as HTML.")
    right.download_button("Download notebook (Jupyter)", lambda: notebook_json(report),
                          file_name=f"{key}_reproduce.ipynb", on_click="ignore",
                          mime="application/x-ipynb+json", key=f"{key}_notebook", icon=":material/menu_book:",
                          help="The same steps as a Jupyter notebook, each explained in plain words "
                               "before its code.")
