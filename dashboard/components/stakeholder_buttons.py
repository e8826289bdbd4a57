"""One-click stakeholder report: a self-contained HTML file and its PDF, built only when clicked."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import streamlit as st

from core.contracts import Result
from core.stakeholder_report import PDF_NEEDS_CHROMIUM, chromium_path, report_html, report_pdf
from dashboard.components.stakeholder_figures import default_figures
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


def stakeholder_buttons(result: Result, report: Mapping[str, Any], *, page: str, key: str,
                        figures: Sequence[Any] = (), extra: Mapping[str, Any] | None = None,
                        tables=None, ledger=None, label: str = "") -> None:
    """"Report (HTML)" and "Report (PDF)" download buttons; each file is made when its button is clicked.
    Without ``figures`` the report draws the page's main figures from the result (default_figures); ``label``
    prefixes the buttons' text."""
    from dashboard.components.pin_compare import pinned_for_report   # A/B report when a scenario is pinned
    ab_parts = pinned_for_report(dict(report), key, result)

    def html_text() -> str:
        shown = list(figures) or default_figures(result)
        return report_html(result, page=page, question=page_question(page), figures=shown, report=report,
                           extra=extra, tables=tables, ledger=ledger, file_name=f"{key}.json", **ab_parts())

    st.session_state[builder_key(key)] = html_text     # what the HTML button offers, for reuse and checks

    def pdf_bytes() -> bytes:
        return report_pdf(html_text())

    left, right = st.columns(2)
    left.download_button(f"{label}Report for stakeholders (HTML)", html_text, file_name=f"{key}.html",
                         mime="text/html", key=f"{key}_html", icon=":material/article:", on_click="ignore",
                         help="One file that opens offline: the question, the plan in plain words, headline "
                              "numbers, figures, ledger, data provenance, versions and the command that "
                              "reproduces it.")
    has_chromium = chromium_path() is not None
    right.download_button(f"{label}Report for stakeholders (PDF)", pdf_bytes if has_chromium else b"",
                          file_name=f"{key}.pdf", mime="application/pdf", key=f"{key}_pdf",
                          icon=":material/picture_as_pdf:", on_click="ignore", disabled=not has_chromium,
                          help="The HTML report printed by headless Chromium." if has_chromium
                          else PDF_NEEDS_CHROMIUM)
