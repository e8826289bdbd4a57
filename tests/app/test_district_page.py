"""District maps page end to end with Streamlit's AppTest: plan parity, checks, navigation, reports, uploads."""
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.census.allocation import Allocation
from core.contracts import DataRef
from core.districts import DistrictPlan, NoiseConfig, ReComParams, run
from core.report import build_report, load_plan, report_json, tables_match
from core.uncertainty_words import rounded

DASH = Path(__file__).resolve().parents[2] / "dashboard"
PAGE = str(DASH / "tools" / "district_maps.py")
APP = str(DASH / "app.py")
LEVELS_GA = ("state", "county", "tract", "block group", "block")


def _table(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def _map(at):
    return json.loads(next(c for c in at.get("plotly_chart") if "choroplethmap" in c.proto.spec).proto.spec)


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert not at.exception
    return at


def default_plan(mechanism: str) -> DistrictPlan:
    """The page's default settings written by hand: grid county, ReCom on tracts, 4 districts, equal split."""
    return DistrictPlan(data=DataRef("grid"), grid_fanouts=(64, 4, 16), generator="recom", params=ReComParams(),
                        k=4, balance_tolerance_pct=5.0, noise=NoiseConfig((0.25,) * 4, mechanism, 2.0))


def test_default_plan_in_python_matches_the_page(app):
    page_plan = app.session_state["dm_plan"]
    plan = default_plan(page_plan.noise.mechanism)
    assert plan == page_plan
    result = run(plan)
    first = result.plan_districts(1)
    assert _metric(app, "Districts") == str(len(first)) == "4"
    assert _metric(app, "Largest true deviation (plan 1)") == f"{first['deviation_pct'].abs().max():.2f}%"
    # rounded to what its 95% interval over the runs supports
    assert _metric(app, "Mean absolute district error (people)") == rounded(first["mean_abs_error"].mean(),
                                                                            *result.mean_abs_error_interval(1))
    shown = _table(app, "Closed-form ToyDown sd (people)")
    assert np.allclose(shown["Closed-form ToyDown sd (people)"], first["analytic_toydown_sd"])
    assert shown["Passes checks"].all()


def test_page_reads_plainly_and_maps_stay_offline(app):
    assert not app.error
    table = _table(app, "Closed-form ToyDown sd (people)")
    assert not any(c in table.columns for c in ("TotPop90", "balanced_on_noisy_mean_abs_dev_pct", "ci_low"))
    spec = _map(app)
    assert spec["layout"]["map"]["style"] == "white-bg"
    # no text layer: map labels would fetch font glyphs from the internet
    assert all(t.get("mode") != "text" and "text" not in str(t.get("mode", "")) for t in spec["data"])
    assert "glyphs" not in json.dumps(spec)
    assert any("Simulation, not a release" in c.value for c in app.caption)


def test_checks_flag_greedy_plans_and_tolerance_is_the_users():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.selectbox(key="dm_generator").select("greedy").run()
    assert not at.exception and not at.error
    assert any("fail the checks" in w.value for w in at.warning)
    table = _table(at, "Passes checks")
    assert not table["Within tolerance"].all()
    at.number_input(key="dm_balance_tolerance_pct").set_value(100.0).run()
    assert _table(at, "Passes checks")["Passes checks"].all()


def test_display_changes_keep_the_plan():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    plan = at.session_state["dm_plan"]
    at.selectbox(key="dm_colour").select("deviation").run()
    at.number_input(key="dm_plan_no").set_value(3).run()
    assert not at.exception
    assert "deviation from the ideal" in json.dumps(_map(at))
    assert "Plan 3" in _map(at)["layout"]["title"]["text"]
    assert at.session_state["dm_plan"] == plan


def test_export_load_rerun_and_cli_reproduce(tmp_path):
    from core.__main__ import main
    plan = default_plan("laplace").replace(noise=NoiseConfig((0.1, 0.2, 0.3, 0.4), runs=4, seed=3))
    result = run(plan)
    report = build_report(result, page="District maps")
    again = load_plan(json.loads(report_json(report)))
    assert again == plan
    assert tables_match(report, run.uncached(again).tables()) == []
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    assert main(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0


def test_navigating_away_and_back_keeps_settings_and_results():
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("tools/district_maps.py").run()
    assert not at.exception
    at.number_input(key="dm_k").set_value(2).run()
    at.selectbox(key="dm_colour").select("population").run()
    assert not at.exception and not at.error
    plan = at.session_state["dm_plan"]
    before = {m.label: m.value for m in at.metric}
    at.switch_page("home.py").run()
    at.switch_page("tools/district_maps.py").run()
    assert not at.exception
    assert at.number_input(key="dm_k").value == 2
    assert at.selectbox(key="dm_colour").value == "population"
    assert at.session_state["dm_plan"] == plan
    assert {m.label: m.value for m in at.metric} == before


def test_allocation_from_the_budget_page_and_a_mismatched_geography():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["census_allocation_json"] = Allocation(LEVELS_GA, (0.1, 0.1, 0.5, 0.2, 0.1), "epsilon",
                                                            "laplace").to_json()
    at.run()
    at.radio(key="dm_alloc_src").set_value("session").run()
    assert not at.exception
    # a five-level Georgia allocation does not fit the four-level grid: the page says so
    assert at.error and "allocation" in at.error[0].value.lower()


def test_checkerboard_upload_is_flagged_and_kept_by_fingerprint():
    from core.geography.assignments import plan_to_frame
    from core.districts.workflow import load_geography
    geo = load_geography(DistrictPlan())
    rows, cols = geo.blocks["row"].to_numpy(), geo.blocks["col"].to_numpy()
    checker = ((rows + cols) % 2).astype(np.int64)
    csv = plan_to_frame(geo.blocks["GEOID"].to_numpy(), checker).to_csv(index=False).encode()
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("tools/district_maps.py").run()
    at.selectbox(key="dm_generator").select("upload").run()
    at.file_uploader(key="dm_plan_csv").set_value(("plan.csv", csv, "text/csv"))
    at.run()
    assert not at.exception and not at.error
    assert any("in more than one piece" in w.value for w in at.warning)
    assert not _table(at, "Passes checks")["Contiguous"].any()
    plan = at.session_state["dm_plan"]
    at.switch_page("home.py").run()
    at.switch_page("tools/district_maps.py").run()
    assert not at.exception and not at.error
    assert at.session_state["dm_plan"] == plan


def test_saved_report_restores_the_settings_and_the_numbers():
    from core.districts import GreedyParams
    plan = DistrictPlan(generator="greedy", params=GreedyParams(2), k=4, balance_tolerance_pct=2.5,
                        noise=NoiseConfig((0.1, 0.2, 0.3, 0.4), "laplace", 2.0, "toydown_nonneg", 5, 7))
    report = build_report(run(plan), page="District maps")
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.file_uploader(key="dm__report_file").set_value(("report.json", report_json(report).encode(),
                                                       "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["dm_plan"] == plan
    assert at.number_input(key="dm_balance_tolerance_pct").value == 2.5
    assert _metric(at, "Plans passing the checks") == f"{int(run(plan).plans['passes'].sum())} of 2"


def test_ensemble_and_ecological_regression_tabs_on_a_small_grid():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.selectbox(key="dm_grid_fanouts").select((16, 4, 16)).run()
    at.multiselect(key="dm_ens_splits").set_value(["equal"])
    at.number_input(key="dm_ens_runs").set_value(4)
    at.number_input(key="dm_ens_n_square").set_value(20)
    at.toggle(key="dm_ens_on").set_value(True)
    at.toggle(key="dm_er_on").set_value(True).run()
    assert not at.exception and not at.error
    plan = at.session_state["dm_plan"]
    assert plan.ensemble is not None and plan.er is not None and plan.ensemble.runs == 4
    study = _table(at, "Mean closed-form variance (people²)")
    assert {"ReCom ensemble", "Greedy", "Square (random)"} <= set(study["Generator"])
    er = _table(at, "Black voters' support (share)")
    assert set(er["Mode"]) == {"all", "filtered", "weighted"}
    assert "naive Gaussian" in set(er["Counts used"])
    behind = [e.label for e in at.expander if e.label.startswith("The numbers behind")]
    assert behind.count("The numbers behind the ensemble charts") == 1
    assert {"The numbers behind the map", "The numbers behind the scatter",
            "The numbers behind the histogram"} <= set(behind)
    # the ER mode is a display choice: the plan does not change
    at.selectbox(key="dm_er_mode").select("weighted").run()
    assert at.session_state["dm_plan"] == plan


def test_geography_choice_and_a_loaded_allocation_survive_navigation():
    """Georgia and an allocation loaded from a Budget page export are still in use after leaving the page."""
    alloc = Allocation(LEVELS_GA, (0.05, 0.15, 0.3, 0.3, 0.2), "epsilon", "laplace")
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.switch_page("tools/district_maps.py").run()
    assert "Georgia (real counties; synthetic below the county)" in at.radio(key="dm_geo").options
    at.radio(key="dm_geo").set_value("georgia").run()
    at.radio(key="dm_alloc_src").set_value("file").run()
    at.file_uploader(key="dm_alloc_json").set_value(("allocation.json", alloc.to_json().encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    plan = at.session_state["dm_plan"]
    assert plan.data == DataRef("georgia")
    np.testing.assert_allclose(plan.noise.budgets, alloc.budgets)
    before = {m.label: m.value for m in at.metric}
    at.switch_page("home.py").run()
    at.switch_page("tools/district_maps.py").run()
    assert not at.exception and not at.error
    assert at.radio(key="dm_geo").value == "georgia"
    assert at.radio(key="dm_alloc_src").value == "file"
    assert at.session_state["dm_plan"] == plan
    assert {m.label: m.value for m in at.metric} == before


def test_the_map_has_its_numbers_and_fits_its_column(app):
    """One 'numbers behind' expander under the map listing every unit's district and colour value; the colour
    bar lies under the map so the whole map column is the map (the zoom fit is tested in the unit tests)."""
    behind = [e.label for e in app.expander if e.label.startswith("The numbers behind")]
    assert behind == ["The numbers behind the map"]
    units = next(d.value for d in app.dataframe if {"Unit", "District"} <= set(d.value.columns))
    spec = _map(app)
    assert len(units) == len(spec["data"][0]["locations"])
    assert spec["data"][0]["colorbar"]["orientation"] == "h"
