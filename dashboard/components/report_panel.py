"""Export a result as a report (JSON + zipped guarded CSVs) and open a saved report to restore a page."""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Mapping

import pandas as pd
import streamlit as st

from core.contracts import Plan, Result
from core.report import build_report, load_plan, parse_report, tables_zip
from core.sharing import CONFIDENTIAL, CONFIDENTIAL_MARK, is_private, shared_copy, withholds
from dashboard.components.code_export import code_export_buttons
from dashboard.components.ledger_badge import ledger_for_report
from dashboard.components.pin_compare import pin_compare_panel
from dashboard.components.stakeholder_buttons import page_question, saved_report_text, stakeholder_buttons


def report_panel(result: Result, *, page: str, key: str, ledger=None,
                 extra: Mapping[str, Any] | None = None,
                 tables: Mapping[str, pd.DataFrame] | None = None, figures=()) -> dict:
    """Download buttons for a result's report (plan, data fingerprint, ledger, versions, tables) and
    the stakeholder report (HTML + PDF, with the page's plotly ``figures`` embedded). Every default download
    is the shared report (:mod:`core.sharing`); on private data the confidential one, with what was computed on
    the private rows, is offered apart, as an explicit choice. Returns the shared report."""
    tables = tables if tables is not None else result.tables()
    full = build_report(result, page=page, ledger=ledger, extra=extra, tables=tables, audience=CONFIDENTIAL)
    full["project_ledger"] = ledger_for_report(result.plan)   # every release of this data set so far
    full["question"] = page_question(page)                    # the stakeholder report's first line
    report = shared_copy(full)
    if withholds(report):
        st.caption(SHARED_CAPTION)
    export_buttons(result, report, page=page, key=key, tables=tables, figures=figures)
    if is_private(result.plan):
        confidential_panel(result, full, page=page, key=key, tables=tables, figures=figures)
    else:
        full = report
    pin_compare_panel(result, full, page=page, key=key)   # pin as A, compare B, saved scenarios (curator's screen)
    return report


#: What the page says above the default downloads when the data is private.
SHARED_CAPTION = ("These downloads are the shared report: the plan, the declared categories and bounds, the "
                  "ledger and what was released through it. Numbers computed on the private rows are withheld "
                  "(even as bands or rates they can give counts back); they are in the confidential report below.")
CONFIDENTIAL_CONFIRM = "I will keep it with the curator and not share it"


def export_buttons(result: Result, report: dict, *, page: str, key: str, tables, figures=(),
                   label: str = "") -> None:
    """The JSON report, the zipped CSVs, the script and notebook, and the stakeholder HTML/PDF of ``report``;
    ``label`` prefixes the buttons (the confidential ones say so)."""
    left, right = st.columns(2)
    left.download_button(f"{label}Download report (JSON)", lambda: saved_report_text(result, report, figures),
                         file_name=f"{key}.json", on_click="ignore",
                         mime="application/json", key=f"{key}_json", icon=":material/download:",
                         help="The plan, data fingerprint, ledger, versions and every table. Open it "
                              "again here, or rerun it with: python -m core reproduce FILE --out DIR")
    right.download_button(f"{label}Download tables (CSV, zipped)", tables_zip(tables, report),
                          file_name=f"{key}.zip", mime="application/zip", key=f"{key}_zip",
                          icon=":material/table_view:")
    code_export_buttons(report, key=key)      # the same result as a Python script and a Jupyter notebook
    stakeholder_buttons(result, report, page=page, key=key, figures=figures, label=label)


def confidential_key(key: str) -> str:
    """The widget key prefix of a panel's confidential downloads."""
    return f"{key}_confidential"


def confidential_panel(result: Result, report: dict, *, page: str, key: str, tables, figures=()) -> None:
    """The confidential report of private data, offered only after the curator says it stays with them."""
    ck = confidential_key(key)
    with st.expander("Confidential report (computed on private rows)", icon=":material/lock:"):
        st.caption(f"{CONFIDENTIAL_MARK}. Every table, headline number and figure the page computed on the "
                   "private rows, for the curator's own records; each file says so on every page.")
        if not st.checkbox(CONFIDENTIAL_CONFIRM, key=f"{ck}_confirm"):
            return
        export_buttons(result, report, page=page, key=ck, tables=tables, figures=figures,
                       label="Confidential: ")


def saved_report_loader(key: str, accepts: tuple[type, ...],
                        to_widgets: Callable[[Plan], Mapping[str, Any]]) -> Plan | None:
    """An "Open a saved report" uploader. A new report's plan is turned into widget values
    (``to_widgets``), written to the session and the page reruns with them; the loaded plan is
    returned on that rerun. Call it before the page's widgets are created."""
    applied = f"{key}__report_applied"
    with st.expander("Open a saved report", icon=":material/folder_open:"):
        upload = st.file_uploader("Report (JSON) exported from this page", type=["json"],
                                  key=f"{key}__report_file")
        if upload is None:
            return st.session_state.get(f"{key}__report_plan")
        raw = upload.getvalue()
        digest = hashlib.sha256(raw).hexdigest()
        if st.session_state.get(applied) == digest:
            st.caption("Settings restored from the report; change any of them to explore from there.")
            return st.session_state.get(f"{key}__report_plan")
        try:
            plan = load_plan(parse_report(raw))
            if not isinstance(plan, accepts):
                raise ValueError(f"This report was saved by another page ({type(plan).__name__}).")
            values = dict(to_widgets(plan))
        except ValueError as exc:
            st.error(f"Could not open the report: {exc}")
            return None
    st.session_state.update(values)
    st.session_state[applied] = digest
    st.session_state[f"{key}__report_plan"] = plan
    st.rerun()
