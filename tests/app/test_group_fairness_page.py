"""Group fairness and ranking page with AppTest: widgets -> plan -> run -> draw, per tab; the plan
rerun in plain Python, exported, reloaded and reproduced from the command line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.__main__ import main as core_main
from core.contracts import DataRef
from core.fairness import GroupFairnessPlan, LexifairPlan, MediatorRole, RankingPlan, run_group_fairness
from core.fairness.companion import CompanionPlan
from core.report import build_report, load_plan, report_json, tables_match

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "dashboard" / "tools" / "group_fairness.py")
APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "gf_cache"))


def _quick(at):
    """Small learner settings so each run takes a second or two."""
    at.select_slider(key="gf_lx_rounds").set_value(100)
    at.slider(key="gf_lx_levels").set_value(2)
    return at.run()


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def _expected_plan():
    return GroupFairnessPlan(
        lexifair=LexifairPlan(rounds=100, levels=2),
        ranking=RankingPlan(),
        companion=CompanionPlan(cutoff=0.5, bins=10, attribute="race", groups=("African-American", "Caucasian"),
                                seed=0, at=None, mode="exact", penalty_fpr=1.0, penalty_tpr=1.0))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    import os
    os.environ["DASHBOARD_CACHE_DIR"] = str(tmp_path_factory.getbasetemp() / "gf_cache")
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    assert not at.exception and not at.error
    _quick(at)
    assert not at.exception and not at.error
    return at


def test_page_plan_matches_a_plain_python_run(page):
    plan = _expected_plan()
    assert page.session_state["gf_plan"] == plan
    result = run_group_fairness(plan)
    cf = result.ranking.measures.query("ranking == 'counterfactual' and k == 1000")
    metrics = _metrics(page)
    assert metrics["Utility loss at k = 1000"] == f"{100 * cf['utility_loss'].iloc[0]:.1f}%"
    assert metrics["AP@1000 against the original top k"] == f"{cf['ap_at_k'].iloc[0]:.3f}"
    levels = next(d.value for d in page.dataframe if "Level" in d.value.columns)
    np.testing.assert_allclose(levels["eta-hat (sum of the worst j errors)"], result.lexifair.levels["eta_hat"].round(4))
    # the worst-off group of each model is named on the page
    worst = result.lexifair.worst.query("rank_in_model == 1")
    text = " ".join(m.value for m in page.markdown)
    assert all(g in text for g in worst["group"])
    assert result.ranking.rows == 4440 and len(result.lexifair.groups["group"].unique()) == 8


def test_export_reload_rerun_and_cli(tmp_path):
    plan = _expected_plan().replace(lexifair=LexifairPlan(rounds=60, levels=2, bootstrap=50))
    result = run_group_fairness(plan)
    report = build_report(result, page="Group fairness and ranking")
    again = load_plan(report_json(report))
    assert again == plan
    assert tables_match(report, run_group_fairness.uncached(again).tables()) == []
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    assert core_main(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0


def test_lexifair_tab_reacts_to_its_widgets(page):
    at = page
    at.slider(key="gf_lx_levels").set_value(1).run()
    assert not at.exception and not at.error
    levels = next(d.value for d in at.dataframe if "Level" in d.value.columns)
    assert list(levels["Level"]) == [1]
    at.multiselect(key="gf_lx_columns").set_value(["sex"]).run()
    groups = at.session_state["gf_plan"].lexifair.columns
    assert groups == ("sex",)
    table = next(d.value for d in at.dataframe if "Held-out error (share)" in d.value.columns)
    assert set(table["Group"]) == {"sex = Male", "sex = Female"}
    at.multiselect(key="gf_lx_columns").set_value(["sex", "race"])
    at.slider(key="gf_lx_levels").set_value(2).run()


def test_ranking_tab_switches_to_the_moving_company_and_toggles_resolving(page):
    at = page
    at.selectbox(key="gf_rk_source").select("moving-company").run()
    assert not at.exception and not at.error
    plan = at.session_state["gf_plan"]
    assert plan.data == DataRef("moving-company") and plan.ranking.outcome == "score"
    resolving = _metrics(at)["Utility loss at k = 500"]
    assert float(resolving.rstrip("%")) <= 1.0
    at.multiselect(key="gf_rk_moving-company_resolve_lifting").set_value([]).run()
    assert at.session_state["gf_plan"].ranking.mediators == (MediatorRole("lifting", ()),)
    non_resolving = _metrics(at)["Utility loss at k = 500"]
    assert non_resolving != resolving
    at.selectbox(key="gf_rk_source").select("compas").run()


def test_companion_tab_reuses_the_panel(page):
    at = page
    before = next(d.value for d in at.dataframe if "false positive rate" in d.value.columns)
    at.slider(key="gf_rv_cutoff").set_value(0.3).run()
    assert not at.exception and not at.error
    assert at.session_state["gf_plan"].companion.cutoff == pytest.approx(0.3)
    after = next(d.value for d in at.dataframe if "false positive rate" in d.value.columns)
    assert not before.equals(after)
    at.slider(key="gf_rv_cutoff").set_value(0.5).run()


def test_leaving_and_returning_keeps_plan_and_results():
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("tools/group_fairness.py").run()
    assert not at.exception
    _quick(at)
    at.selectbox(key="gf_rk_source").select("moving-company").run()
    plan, metrics = at.session_state["gf_plan"], _metrics(at)
    at.switch_page("home.py").run()
    at.switch_page("tools/group_fairness.py").run()
    assert not at.exception and not at.error
    assert at.select_slider(key="gf_lx_rounds").value == 100
    assert at.session_state["gf_plan"] == plan and _metrics(at) == metrics


def test_saved_report_restores_the_widgets():
    plan = _expected_plan().replace(
        data=DataRef("moving-company"), seed=3, companion=_expected_plan().companion.replace(seed=3),
        lexifair=LexifairPlan(rounds=200, levels=1, alpha=0.1, columns=("sex", "age band")),
        ranking=RankingPlan(attributes=("gender", "race"), mediators=(MediatorRole("lifting", ("gender",)),),
                            outcome="score", baseline=("female", "Black"), ascending=False, ks=(50, 100)))
    report = build_report(run_group_fairness(plan), page="Group fairness and ranking")
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    at.file_uploader(key="gf__report_file").set_value(("saved.json", report_json(report).encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["gf_plan"] == plan


def test_plan_rejects_bad_settings():
    with pytest.raises(ValueError):
        LexifairPlan(levels=4)
    with pytest.raises(ValueError):
        LexifairPlan(alpha=float("nan"))
    with pytest.raises(ValueError):
        RankingPlan(attributes=("sex",), mediators=(MediatorRole("sex", ()),))
    with pytest.raises(ValueError):
        RankingPlan(mediators=(MediatorRole("priors_count", ("age",)),))
    with pytest.raises(ValueError):
        GroupFairnessPlan(data=DataRef("cps"))
    with pytest.raises(ValueError):
        run_group_fairness.uncached(GroupFairnessPlan(lexifair=None, companion=None,
                                                      ranking=RankingPlan(ks=(100_000,))))


def test_a_saved_companion_the_panel_cannot_show_is_refused_with_a_reason():
    """The companion settings are restored by the panel's own inverse, with its checks: a saved plan
    with more score bins than the panel offers is named, not written into a slider it cannot hold."""
    plan = GroupFairnessPlan(lexifair=None, ranking=None, companion=_expected_plan().companion.replace(bins=40))
    report = build_report(run_group_fairness(plan), page="Group fairness and ranking")
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    at.file_uploader(key="gf__report_file").set_value(("saved.json", report_json(report).encode(), "application/json"))
    at.run()
    assert not at.exception
    assert any("score bins from 2 to 20" in e.value for e in at.error)
    assert at.session_state["gf_rv_bins"] == 10
