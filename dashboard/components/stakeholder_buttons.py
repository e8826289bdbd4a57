"""One-click stakeholder report: a self-contained HTML file and its PDF, built only when clicked.

The page makes them the way ``python -m core report`` does, from the same saved JSON report the page's JSON
button offers (``core.stakeholder_report.report_html_from_json``), so the page's files and the command line's
are the same for the same report. Each is built once per result and pin, off the page's script (a download
button's callable runs when it is clicked), and kept for the next click.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import streamlit as st

from core.contracts import Result
from core.report import report_json
from core.stakeholder_report import PAPERS, PDF_NEEDS_CHROMIUM, chromium_path, report_html_from_json, report_pdf
from dashboard.components.stakeholder_figures import with_figures
from dashboard.page_registry import ALL_PAGES


def page_question(page: str) -> str:
    """The question the page answers (from the page registry), by its title."""
    for entry in ALL_PAGES:
        if entry.title == page:
            return entry.question
    return ""


def builder_key(key: str) -> str:
    """Session key holding the function that builds the HTML report the page currently offers."""
    return f"{key}__html_builder"


def saved_key(key: str) -> str:
    """Session key holding the function that gives the JSON report the page currently offers (with its figures)."""
    return f"{key}__json_builder"


def _built_key(key: str) -> str:
    return f"{key}__built_reports"


def saved_report_text(result: Result, report: Mapping[str, Any], figures: Sequence[Any] = ()) -> str:
    """The JSON report a page offers: ``report`` with the page's main figures (plotly JSON), as the command line
    reads it back."""
    return report_json(with_figures(dict(report), result, figures))


def stakeholder_buttons(result: Result, report: Mapping[str, Any], *, page: str, key: str,
                        figures: Sequence[Any] = (), label: str = "") -> None:
    """"Report (HTML)" and "Report (PDF)" download buttons; each file is made when its button is clicked, from
    the saved JSON report the page offers (with the page's ``figures``, else its main figures drawn from the
    result), exactly as ``python -m core report`` makes it; ``label`` prefixes the buttons' text."""
    from core.report import parse_report
    from dashboard.components.pin_compare import pin_key, pinned_for_report   # A/B report when a scenario is pinned
    ab_parts = pinned_for_report(dict(report), key, result)
    built: dict = st.session_state.setdefault(_built_key(key), {})   # the files made so far, for the next click
    pin = st.session_state.get(pin_key(key))
    made_for = (report.get("plan_digest"), report.get("audience"), report.get("question"), page,
                json.dumps(report.get("project_ledger"), sort_keys=True, default=str),
                getattr(pin, "plan_digest", None))

    def json_text() -> str:
        if built.get("json", (None,))[0] != made_for:
            built["json"] = (made_for, saved_report_text(result, report, figures))
        return built["json"][1]

    def html_text() -> str:
        if built.get("html", (None,))[0] != made_for:
            parts = ab_parts()
            text = report_html_from_json(parse_report(json_text()), compare=parts.get("compare"),
                                         overlays=parts.get("overlays", ()), file_name=f"{key}.json")
            built["html"] = (made_for, text)
            built.pop("pdf", None)
        return built["html"][1]

    st.session_state[builder_key(key)] = html_text     # what the HTML button offers, for reuse and checks
    st.session_state[saved_key(key)] = json_text

    paper = st.radio("Paper for the PDF", PAPERS, horizontal=True, key=f"{key}_paper",
                     help="The PDF prints on this paper size; figures and labels are sized to fit both.")

    def pdf_bytes() -> bytes:
        text = html_text()
        if built.get("pdf", (None,))[0] != (made_for, paper):
            built["pdf"] = ((made_for, paper), report_pdf(text, paper=paper))
        return built["pdf"][1]

    left, right = st.columns(2)
    left.download_button(f"{label}Report for stakeholders (HTML)", html_text, file_name=f"{key}.html",
                         mime="text/html", key=f"{key}_html", icon=":material/article:", on_click="ignore",
                         help="One file that opens offline: the question, the plan in plain words, headline "
                              "numbers, figures, ledger, data provenance, versions and the command that "
                              "reproduces it.")
    has_chromium = chromium_path() is not None
    right.download_button(f"{label}Report for stakeholders (PDF)", pdf_bytes if has_chromium else b"",
                          file_name=f"{key}-{paper.lower()}.pdf", mime="application/pdf", key=f"{key}_pdf",
                          icon=":material/picture_as_pdf:", on_click="ignore", disabled=not has_chromium,
                          help="The HTML report printed by headless Chromium." if has_chromium
                          else PDF_NEEDS_CHROMIUM)
