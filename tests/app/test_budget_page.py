"""Budget allocation page end to end with Streamlit's AppTest, and its plan -> run -> report contract."""
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.census import BudgetPlan, run
from core.report import build_report, load_plan, report_json, tables_match
from tests.release_steps import decide_cap, has_button

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "budget_allocation.py")
SCALE = "Noise scale (b or sigma, people)"
WHOLE_UNIT = "Error sd of a whole unit (people)"
SIM_SD = "Error sd, ToyDown runs (people)"
GAIN = "Gain over the equal split (%)"


def _table(at, column):
    """The first rendered table having this column (tables carry no key in AppTest)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _levels(at):
    return _table(at, SCALE)


def _page():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at


def _open(at, tab):
    """Open a tab (the page runs only the open tab)."""
    at.session_state["ba_tab"] = tab
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def app():
    return _page()


@pytest.fixture(scope="module")
def algo_app():
    return _open(_page(), "ToyDown vs TopDown-lite")


def test_first_render_shows_outputs(app):
    assert not app.error
    assert len(app.get("plotly_chart")) == 2                  # only the open tab is drawn
    levels = _levels(app)
    assert list(levels["Level"]) == ["state", "county", "tract", "block group", "block"]
    assert levels[SCALE].round(6).tolist() == [10.0] * 5      # Laplace, sensitivity 2, eps 0.2 each
    assert _table(app, SIM_SD)[SIM_SD].notna().all()
    assert any("Simulation, not a release" in c.value for c in app.caption)
    assert any(m.value == "1-DP" for m in app.metric)


def test_page_numbers_are_the_default_plan_run_in_plain_python(app):
    """Plan-only: the page's default plan, built in Python, gives the numbers the page shows."""
    result = run(BudgetPlan())
    levels = _levels(app)
    np.testing.assert_allclose(levels[WHOLE_UNIT], result.levels["whole-unit error sd"])
    np.testing.assert_allclose(_table(app, SIM_SD)[SIM_SD], result.targets["simulated sd"])
    assert result.algorithms is None and result.sweep is None and not result.public   # tabs not yet opened
    at = _open(_page(), "Best split")
    np.testing.assert_allclose(_table(at, GAIN)[GAIN], result.recommendation["gain over equal (%)"])
    _open(at, "ToyDown vs TopDown-lite")
    from core.census import AlgorithmPlan
    with_algo = run(BudgetPlan(algorithms=AlgorithmPlan()))
    shown = _table(at, "Mean |error| of a unit's total (people)")
    np.testing.assert_allclose(shown["Mean |error| of a unit's total (people)"],
                               with_algo.algorithm_summary["MAE of unit totals"])


def test_export_load_rerun_and_cli_reproduce(tmp_path):
    """Export/load/rerun bit for bit, and python -m core reproduce on the exported report."""
    from core.__main__ import main
    plan = BudgetPlan(fanouts=(6, 5, 4), runs=12, seed=11, split="optimise", targets=("leaf", "greedy:3"),
                      target_weights=(2.0, 1.0))
    result = run(plan)
    report = build_report(result, page="Budget allocation")
    loaded = load_plan(json.loads(report_json(report)))
    assert loaded == plan
    assert tables_match(report, run.uncached(loaded).tables()) == []
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    assert main(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "levels.csv").exists()


def test_page_export_is_a_reproducible_report(tmp_path):
    from core.__main__ import main
    at = _open(_page(), "Export & release")
    assert any("report" in str(b.proto.label).lower() for b in at.get("download_button"))
    result = run(BudgetPlan())
    path = tmp_path / "page.json"
    path.write_text(report_json(build_report(result, page="Budget allocation")))
    assert main(["reproduce", str(path), "--out", str(tmp_path / "o")]) == 0


def test_split_and_mechanism_change_table_and_charts():
    at = _page()
    before = _levels(at)
    fig_before = [c.proto.spec for c in at.get("plotly_chart")]
    at.selectbox(key="ba_preset").set_value("block-heavy").run()
    assert not at.exception
    after = _levels(at)
    assert after["Share of the budget"].iloc[-1] == pytest.approx(0.5)
    assert after[WHOLE_UNIT].iloc[-1] < before[WHOLE_UNIT].iloc[-1]
    fig_after = [c.proto.spec for c in at.get("plotly_chart")]
    assert fig_after[0] != fig_before[0] and fig_after[1] != fig_before[1]
    at.selectbox(key="ba_epsilon_mechanism").set_value("geometric").run()
    assert not at.exception
    geo = _levels(at)
    assert (geo["Noise variance per unit (people²)"] != after["Noise variance per unit (people²)"]).all()


def test_every_registry_mechanism_can_be_budgeted_including_the_generalized_gaussian():
    at = _page()
    at.selectbox(key="ba_epsilon_mechanism").set_value("generalized_gaussian").run()
    assert not at.exception and not at.error
    levels = _levels(at)
    from core.privacy.calibration import calibrate_generalized_gaussian
    # 5 levels, delta 1e-6 in all: each level is calibrated at delta 2e-7 for the 2 counts a person changes
    assert levels[SCALE].iloc[0] == pytest.approx(calibrate_generalized_gaussian(2, 3.0, 0.2, 2e-7))
    assert any("(1, 1e-06)-DP" in m.value for m in at.metric)
    assert any("delta" in c.value and "added up" in c.value for c in at.caption)
    assert "generalized_gaussian" in at.session_state["census_allocation_json"]
    at.selectbox(key="ba_epsilon_mechanism").set_value("analytic_gaussian").run()
    assert not at.exception and not at.error


def test_custom_sliders_optimise_and_rho():
    at = _page()
    at.radio(key="ba_split").set_value("custom").run()
    at.slider(key="ba_w4_5").set_value(1.0).run()
    lv = _levels(at)
    assert lv["Share of the budget"].sum() == pytest.approx(1.0)
    assert lv["Share of the budget"].iloc[-1] > 0.5
    at.radio(key="ba_split").set_value("optimise").run()
    assert not at.exception
    _open(at, "Best split")
    rec = _table(at, GAIN)
    # the optimum minimises the sum of each target's variance relative to its equal-split variance
    ratio = rec["Error sd, recommended split (people)"] / rec["Error sd, equal split (people)"]
    assert (ratio ** 2).sum() < len(rec) and rec[GAIN].mean() > 0
    at.radio(key="ba_unit").set_value("rho").run()
    assert not at.exception
    assert any("e-06" in m.value for m in at.metric)


def test_target_importance_moves_the_optimised_split():
    at = _page()
    at.radio(key="ba_split").set_value("optimise").run()
    before = _levels(at)["Share of the budget"].to_numpy()
    at.number_input(key="ba_leaf_weight").set_value(20.0).run()      # one block matters most
    assert not at.exception and not at.error
    after = _levels(at)["Share of the budget"].to_numpy()
    assert after[-1] > before[-1]                                    # the block level gets more budget


@pytest.mark.parametrize("text, message", [("4, a", "whole numbers"),
                                           ("4294967296, 4294967296", "from 1 to 100,000"),
                                           ("65536, 65536", "keep the product under"),
                                           ("1, 1, 1, 1, 1, 1, 1", "between 1 and 6")])
def test_bad_fanouts_show_error_and_keep_input(text, message):
    at = _page()
    at.text_input(key="ba_fanouts").input(text).run()
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert at.text_input(key="ba_fanouts").value == text


def test_export_offers_allocation_json(app):
    assert app.session_state["census_allocation_json"].startswith("{")
    assert '"format": "census-budget-allocation"' in app.session_state["census_allocation_json"]


def test_opened_tabs_join_the_plan_and_keep_their_settings_when_closed():
    at = _open(_page(), "Mechanisms")
    at.select_slider(key="ba_mech_k").set_value(300).run()
    _open(at, "Export & release")
    plan = at.session_state["ba_subplans"]["mechanisms"]
    assert plan.k == 300 and at.session_state["ba_subplans"].get("algorithms") is None


def test_topdown_lite_tab_and_ledger(app, algo_app):
    algo = _table(algo_app, "Leaf L1 error (share of people)")
    assert set(algo["Algorithm"]) == {"ToyDown (negatives allowed)", "ToyDown non-negative integer", "TopDown-lite"}
    assert (algo[algo.Algorithm == "TopDown-lite"]["Error of the total (people)"] == 0).all()
    ledger = _table(app, "As rho (zCDP)")
    assert ledger["Amount"].sum() == pytest.approx(1.0)


def test_tiny_tree_caps_k_instead_of_stopping_the_page():
    at = _page()
    at.text_input(key="ba_fanouts").input("2").run()
    assert not at.exception and not at.error
    assert any("k = 2 instead of 4" in w.value for w in at.warning)
    assert set(_table(at, SIM_SD)["Districts or units"]) == {2}


def test_exact_levels_are_labelled_on_the_log_chart(algo_app):
    spec = next(json.loads(c.proto.spec) for c in algo_app.get("plotly_chart")
                if "TopDown-lite (" in json.dumps(json.loads(c.proto.spec)["layout"].get("title", "")))
    ticks = spec["layout"]["xaxis"]["ticktext"]
    assert ticks[0] == "state<br><sub>exact: TopDown-lite</sub>" and ticks[1] == "county"


def test_topdown_comparison_reruns_only_for_its_own_inputs(monkeypatch):
    import core.census.budget_plan as bp
    calls = []
    real = bp.compare_algorithms
    monkeypatch.setattr(bp, "compare_algorithms", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")       # the spy lives in this process
    at = _open(_page(), "ToyDown vs TopDown-lite")
    calls.clear()
    at.number_input(key="ba_seed").set_value(int(np.random.default_rng().integers(10**6, 2**31 - 1))).run()
    assert len(calls) == 1                                     # a fresh seed: computed once
    at.slider(key="ba_runs").set_value(10).run()
    at.number_input(key="ba_k").set_value(7).run()
    assert not at.exception and len(calls) == 1                # ToyDown runs and k do not feed it
    at.selectbox(key="ba_preset").set_value("BG-heavy").run()
    assert len(calls) == 2                                     # the budgets do


def test_large_tree_runs_the_comparison_on_request():
    at = _open(_page(), "ToyDown vs TopDown-lite")
    at.slider(key="ba_runs").set_value(0)
    at.text_input(key="ba_fanouts").input("1000, 201").run()
    assert not at.exception and not at.error
    assert any("only on request" in i.value for i in at.info)
    assert not any("Leaf L1 error (share of people)" in d.value.columns for d in at.dataframe)
    at.number_input(key="ba_algo_n_types").set_value(1)
    at.slider(key="ba_algo_runs").set_value(1)
    at.toggle(key="ba_algo_large").set_value(True).run()
    assert not at.exception
    assert any("Leaf L1 error (share of people)" in d.value.columns for d in at.dataframe)


def test_mechanism_tab_compares_like_with_like():
    at = _open(_page(), "Mechanisms")
    at.select_slider(key="ba_mech_k").set_value(1000).run()
    at.toggle(key="ba_mech_gg").set_value(True).run()          # shipped grid: no calibration to wait for
    assert not at.exception and not at.error
    wide = _table(at, "Expected largest error (counts)")
    labels = set(wide["Mechanism"])
    assert "Gaussian (analytic, tight)" in labels and "Generalized Gaussian p=3" in labels
    assert any("like-for-like" in i.value for i in at.info)


def test_public_information_tab_explains_its_terms():
    at = _open(_page(), "Public information")
    assert not at.error
    glossary = " ".join(m.value for m in at.markdown)
    for term in ("Delta_z", "kappa", "Congenial WEM", "Lemma 5", "E max error"):
        assert term in glossary


def test_release_action_uses_the_secure_sampler_and_records_spends():
    at = _open(_page(), "Export & release")
    at.button(key="ba_release").click().run()
    assert "ba_release_result" not in at.session_state          # nothing is released without the confirmation
    if has_button(at, "ba_release_cap_save"):                   # the data set's first release: decide its cap
        decide_cap(at, "ba_release")
    at.button(key="ba_release_confirm").click().run()
    assert not at.exception and not at.error
    released = at.session_state["ba_release_result"]
    assert set(released.counts["level"]) == {"state", "county", "tract", "block group", "block"}
    assert "count" in released.counts.columns and "true" not in " ".join(released.counts.columns)
    assert "noisy measurement (raw)" in released.measurements.columns     # the raw numbers, labelled, beside
    assert (released.counts["count"] >= 0).all()                          # published counts: whole, non-negative
    assert any("costs no privacy budget" in c.value for c in at.caption)
    assert len(released.ledger()) == 5
    assert any("Released at" in s.value for s in at.success)
    assert not has_button(at, "ba_release_confirm")           # a further release asks again from the start
    assert any("1 release(s) already made" in w.value for w in at.warning)


def test_navigating_away_and_back_keeps_the_plan_and_results():
    """Widgets persist for the session: rerunning the page script with the same session keeps them."""
    at = _page()
    at.radio(key="ba_split").set_value("optimise").run()
    at.number_input(key="ba_leaf_weight").set_value(5.0).run()
    shares = _levels(at)["Share of the budget"].to_numpy()
    at.switch_page(str(Path(PAGE).parents[1] / "home.py")).run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert at.radio(key="ba_split").value == "optimise"
    assert at.number_input(key="ba_leaf_weight").value == 5.0
    np.testing.assert_allclose(_levels(at)["Share of the budget"], shares)


def test_a_saved_plan_restores_every_widget_and_the_page_rebuilds_it():
    """What "Open a saved report" does: the plan's widget values, written to the session, give back the plan."""
    from core.census import AlgorithmPlan, MechanismSweepPlan, PublicInfoPlan, WemPlan
    from core.privacy.mechanisms import GeneralizedGaussianParams
    from dashboard.components.budget_input import plan_to_widgets
    plan = BudgetPlan(fanouts=(6, 5, 4), total=2.0, delta=1e-7, mechanism="generalized_gaussian",
                      mechanism_params=GeneralizedGaussianParams(order=4.0), split="custom",
                      custom_shares=(0.1, 0.2, 0.3, 0.4), targets=("leaf", "unit:1", "greedy:5", "scattered:5"),
                      target_weights=(2.0, 1.0, 1.0, 3.0), runs=20, seed=7, nonnegative=True,
                      algorithms=AlgorithmPlan(n_types=3, runs=2, seed=7, exact_level=0),
                      mechanisms=MechanismSweepPlan(k=300, gg_orders=(3.0,), mechanisms=(
                          "laplace", "geometric", "analytic_gaussian"), include_bound=False),
                      public=PublicInfoPlan(exact_through=1, wem=WemPlan(0.7, 3.0, 20, 7, True), dz_records=100,
                                            correlation=0.3))
    at = _page()
    for key, value in plan_to_widgets(plan).items():
        at.session_state[key] = value
    at.session_state["ba_subplans"] = {"algorithms": plan.algorithms, "mechanisms": plan.mechanisms,
                                       "public": plan.public}
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    rebuilt = at.session_state["ba_plan"]
    strip = lambda p: {k: v for k, v in p.to_dict().items() if k != "custom_shares"}  # noqa: E731
    assert strip(rebuilt) == strip(plan)
    np.testing.assert_allclose(np.asarray(rebuilt.custom_shares) / sum(rebuilt.custom_shares),
                               np.asarray(plan.custom_shares) / sum(plan.custom_shares))


def test_georgia_and_an_uploaded_district_plan_survive_navigation():
    """The file uploader forgets its file when the user leaves; the page keeps it by fingerprint."""
    from core.census.budget_plan import load_geography
    from core.contracts import DataRef, bytes_fingerprint
    from core.geography.assignments import plan_to_frame
    h = load_geography("georgia", (), 0).hierarchy
    districts = (h.ancestors_at(1) - h.level_offsets[1]) % 14            # 14 districts of whole counties
    csv = plan_to_frame(load_geography("georgia", (), 0).leaf_ids, districts).to_csv(index=False).encode()
    at = AppTest.from_file(str(Path(PAGE).parents[1] / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("tools/budget_allocation.py").run()
    assert "Georgia (real counties; synthetic below the county)" in at.radio(key="ba_geo").options
    at.radio(key="ba_geo").set_value("georgia").run()
    at.file_uploader(key="ba_plan_csv").set_value(("plan.csv", csv, "text/csv"))
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    plan = at.session_state["ba_plan"]
    assert plan.data == DataRef("upload", bytes_fingerprint(csv))
    targets = _table(at, SIM_SD)
    assert "your 14-district plan" in set(targets["Target"])
    at.switch_page("home.py").run()
    at.switch_page("tools/budget_allocation.py").run()
    assert not at.exception and not at.error
    assert at.radio(key="ba_geo").value == "georgia"
    assert at.file_uploader(key="ba_plan_csv").value is None          # the uploader itself forgot the file
    assert any("uploaded earlier" in c.value for c in at.caption)
    assert at.session_state["ba_plan"] == plan
    assert _table(at, SIM_SD).equals(targets)


def test_a_saved_plan_on_another_district_plan_never_uses_the_kept_one():
    """A report made with an uploaded district plan asks for that file, not whichever one is kept."""
    from core.census.budget_plan import load_geography
    from core.contracts import DataRef, bytes_fingerprint
    from core.geography.assignments import plan_to_frame
    from dashboard.components.budget_input import plan_to_widgets
    geo = load_geography("georgia", (), 0)
    county = geo.hierarchy.ancestors_at(1) - geo.hierarchy.level_offsets[1]
    kept, other = (plan_to_frame(geo.leaf_ids, county % k).to_csv(index=False).encode() for k in (14, 9))
    at = _page()
    at.radio(key="ba_geo").set_value("georgia").run()
    at.file_uploader(key="ba_plan_csv").set_value(("plan.csv", kept, "text/csv"))
    at.run()
    assert at.session_state["ba_plan"].data == DataRef("upload", bytes_fingerprint(kept))
    at.file_uploader(key="ba_plan_csv").set_value(None)
    saved = at.session_state["ba_plan"].replace(data=DataRef("upload", bytes_fingerprint(other)))
    for key, value in plan_to_widgets(saved).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception
    assert at.session_state["ba_plan"].data == DataRef("georgia")
    at.file_uploader(key="ba_plan_csv").set_value(("other.csv", other, "text/csv"))
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["ba_plan"].data == saved.data
