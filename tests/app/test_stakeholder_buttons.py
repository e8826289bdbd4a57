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
    paper = at.radio(key=f"{KEY}_paper")                 # the PDF prints on A4 or Letter, as on the command line
    assert list(paper.options) == ["A4", "Letter"] and paper.value == "A4"
    paper.set_value("Letter").run()
    assert not at.exception, at.exception
    assert "Report for stakeholders (PDF)" in {b.proto.label for b in at.get("download_button")}
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


def test_the_pages_report_is_the_command_lines_for_the_same_saved_report(tmp_path):
    """The page's HTML is made from the JSON report its JSON button offers, by the command line's function: the
    same document (plotly's random div ids aside) and so the same size; it is made once and kept across reruns."""
    from core.__main__ import main
    from dashboard.components.stakeholder_buttons import saved_key
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    assert not at.exception, at.exception
    page_html = at.session_state[builder_key(KEY)]()
    saved = tmp_path / f"{KEY}.json"
    saved.write_text(at.session_state[saved_key(KEY)]())
    out = tmp_path / "cli.html"
    assert main(["report", str(saved), "--html", str(out)]) == 0
    cli_html = out.read_text()
    assert abs(len(page_html) - len(cli_html)) <= 0.02 * len(cli_html)
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.sub(uuid, "id", page_html) == re.sub(uuid, "id", cli_html)
    assert page_html.count("Plotly.newPlot") == cli_html.count("Plotly.newPlot") >= 1    # the page's figures
    at.run()                                                    # a rerun with the same result
    assert at.session_state[builder_key(KEY)]() is page_html    # kept, not built again
