"""The report panel's "Download script" and "Download notebook" buttons offer the report as code."""
from __future__ import annotations

import ast
import json

from streamlit.testing.v1 import AppTest

from core.census import BudgetPlan, run
from core.report import build_report, report_json
from dashboard.components.code_export import code_key


def _panel(report: dict) -> None:
    from dashboard.components.code_export import code_export_buttons
    code_export_buttons(report, key="ba")


def _broken(report: dict) -> None:
    from dashboard.components.code_export import code_export_buttons
    code_export_buttons({**report, "plan": {"__type__": "Nothing", "__module__": "core.census"}}, key="bad")


def _report() -> dict:
    plan = BudgetPlan(runs=2, total=2.5)
    return json.loads(report_json(build_report(run(plan), page="Budget allocation")))


def test_panel_offers_the_script_and_the_notebook_of_the_report():
    report = _report()
    at = AppTest.from_function(_panel, kwargs={"report": report}, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download script (Python)", "Download notebook (Jupyter)"]
    script = at.session_state[code_key("ba")]
    ast.parse(script)
    assert "    total=2.5,  # " in script and "    runs=2,  # " in script
    assert report["plan_digest"] in script


def test_a_report_that_cannot_be_written_as_code_says_why_instead_of_failing():
    at = AppTest.from_function(_broken, kwargs={"report": _report()}, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert not at.get("download_button")
    assert "cannot be written out as code" in at.caption[0].value
