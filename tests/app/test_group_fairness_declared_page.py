"""Group fairness with AppTest on a declared data set: every tab (lexicographic fairness, ranking, calibration)
takes its label, groups and score from the declared columns, and counts people as persons."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import DataRef, bytes_fingerprint
from core.datasets import load_microdata
from core.fairness import run_group_fairness
from core.fairness.declared_learning import LearningColumns
from core.report import build_report, report_json
from core.sharing import CONFIDENTIAL_MARK
from dashboard.components.report_panel import confidential_key
from dashboard.components.stakeholder_buttons import builder_key
from tests.unit.test_group_fairness_declared import RAW, export_schema

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "dashboard" / "tools" / "group_fairness.py")
NAME = "County export"
CHOICE = f"declared:{NAME}"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "gfd_cache"))


def _open() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=300)
    schema = export_schema().replace(name=NAME)
    at.session_state["declared_data"] = {NAME: {"schema": schema, "raw": RAW, "file_name": "county_export.csv"}}
    return at.run()


def _declare(at: AppTest) -> AppTest:
    at.selectbox(key="gf_learning").select("declared").run()
    at.select_slider(key="gf_lx_rounds").set_value(100)
    at.slider(key="gf_lx_levels").set_value(2)
    at.selectbox(key="gf_lc_label").select("reoffended").run()
    at.selectbox(key="gf_lc_positive").select("Yes")
    at.multiselect(key="gf_lc_groups").set_value(["sex", "region"])
    at.selectbox(key="gf_lc_score").select("risk_score").run()
    p = f"gf_rk_{CHOICE}"
    at.multiselect(key=f"{p}_attributes").set_value(["sex"]).run()
    at.multiselect(key=f"{p}_mediators").set_value(["income"]).run()
    at.selectbox(key=f"{p}_outcome").select("risk_score")
    at.multiselect(key=f"{p}_ks").set_value([20, 50]).run()
    return at


def test_every_tab_runs_on_the_declared_data_set():
    at = _declare(_open())
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    plan = at.session_state["gf_plan"]
    assert plan.learning == "declared" and plan.data.schema.name == NAME
    assert plan.learning_columns == LearningColumns("reoffended", "Yes", ("sex", "region"), score="risk_score")
    assert plan.lexifair.columns == ("sex", "region")
    assert plan.companion.attribute in ("sex", "region")
    # the lexicographic tab's groups are the declared columns' groups
    table = next(d.value for d in at.dataframe if "Held-out error (share)" in d.value.columns)
    assert {"sex = Female", "sex = Male"} <= set(table["Group"])
    assert any(g.startswith("region = ") for g in table["Group"])
    # the ranking counts persons on rows, as core's result says
    result = run_group_fairness(plan, RAW)
    words = result.ranking.ranked_words()
    frame = load_microdata(DataRef("upload", bytes_fingerprint(RAW), schema=plan.data.schema), RAW)
    assert words == f"{frame['person_id'].nunique():,} people on {len(frame):,} rows"
    assert any(words in m.value for m in at.markdown)
    # the calibration tab compares two groups of the declared data
    rates = next(d.value for d in at.dataframe if "false positive rate" in d.value.columns)
    assert set(rates["group"]) == set(plan.companion.groups)


def test_a_saved_report_on_the_declared_data_set_restores_the_widgets():
    at = _declare(_open())
    plan = at.session_state["gf_plan"]
    report = build_report(run_group_fairness(plan, RAW), page="Group fairness and ranking")
    again = _open()
    again.file_uploader(key="gf__report_file").set_value(("saved.json", report_json(report).encode(),
                                                          "application/json"))
    again.run()
    assert not again.exception and not again.error, [e.value for e in again.error]
    assert again.session_state["gf_plan"] == plan


def test_the_downloads_are_the_shared_report_and_the_confidential_one_waits_for_the_curators_word():
    """A declared data set is private: the page's default downloads are the shared report (what it withholds
    said, no confidential mark); the confidential report appears only after the curator's confirmation."""
    at = _declare(_open())
    labels = [str(b.proto.label) for b in at.get("download_button")]
    assert "Download report (JSON)" in labels and not any(x.startswith("Confidential") for x in labels)
    shared_html = at.session_state[builder_key("gf_report")]()
    assert CONFIDENTIAL_MARK not in shared_html and "What this shared report withholds" in shared_html
    at.checkbox(key=f"{confidential_key('gf_report')}_confirm").check().run()
    labels = [str(b.proto.label) for b in at.get("download_button")]
    assert "Confidential: Download report (JSON)" in labels and "Download report (JSON)" in labels
    full_html = at.session_state[builder_key(confidential_key("gf_report"))]()
    assert full_html.count(CONFIDENTIAL_MARK) >= 3 and "What this shared report withholds" not in full_html
