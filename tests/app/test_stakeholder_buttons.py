"""The stakeholder report buttons on a page: both are offered, and the HTML the page offers holds the
page's headline numbers, its plan and the data set's project ledger."""
from __future__ import annotations

import html
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.census import BudgetPlan, run
from core.stakeholder_report import embedded_report, format_number
from dashboard.components.stakeholder_buttons import builder_key

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "budget_allocation.py")
KEY = "budget_allocation"


def test_budget_page_offers_html_and_pdf_reports_holding_its_headline_numbers():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    assert not at.exception, at.exception
    buttons = {b.proto.label for b in at.get("download_button")}
    assert {"Report for stakeholders (HTML)", "Report for stakeholders (PDF)"} <= buttons
    text = at.session_state[builder_key(KEY)]()          # the bytes the HTML button would download
    visible = re.sub(r"<script.*?</script>", "", text, flags=re.S)
    headline = run(BudgetPlan()).headline()             # the default plan, run in plain Python
    assert headline
    for name, value in headline.items():
        assert f"<td>{html.escape(name)}</td><td class='value'>{format_number(value)}</td>" in visible, name
    report = embedded_report(text)
    assert report["plan_digest"] == at.session_state["ba_plan"].digest()
    assert report["headline"] == {k: float(v) for k, v in headline.items()}
    assert "<h2>Project privacy ledger of this data set</h2>" in visible
