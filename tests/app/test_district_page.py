"""District maps page end to end with Streamlit's AppTest: plan and allocation choices fill the map and table."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.census.allocation import Allocation

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "district_maps.py")
LEVELS_GA = ("state", "county", "tract", "block group", "block")


def _table(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def _map(at):
    return next(c for c in at.get("plotly_chart") if "choroplethmap" in c.proto.spec)


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def test_default_view_is_georgia_with_map_and_table(app):
    assert not app.error
    assert app.title[0].value == "District maps"
    table = _table(app, "analytic_toydown_sd")
    assert len(table) == 14
    assert (table["empirical_sd"] > 0).all() and table["contiguous"].all()
    assert _metric(app, "Districts") == "14"
    spec = json.loads(_map(app).proto.spec)
    assert spec["layout"]["map"]["style"] == "white-bg"
    assert any("synthetic" in c.value.lower() for c in app.caption)
    assert any("Simulation, not a release" in c.value for c in app.caption)


def test_grid_greedy_plan_and_allocation_choice_change_outputs():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.radio(key="dm_geo").set_value("grid").run()
    assert not at.exception and not at.error
    at.selectbox(key="dm_gen_grid").select("greedy").run()
    table = _table(at, "analytic_toydown_sd")
    assert len(table) == 4 and (table["true_population"] > 0).all()
    equal_sd = table["analytic_toydown_sd"].copy()
    # a block-heavy split changes the closed-form district error
    at.selectbox(key="dm_budget_preset").select("block-heavy").run()
    assert not at.exception
    assert not _table(at, "analytic_toydown_sd")["analytic_toydown_sd"].equals(equal_sd)
    at.selectbox(key="dm_colour").select("deviation").run()
    assert not at.exception
    assert "deviation" in _map(at).proto.spec
    at.button(key="dm_run_ensemble").click().run()
    assert not at.exception and not at.error
    study = _table(at, "mean_fragmentation")
    assert {"Greedy", "Square (random)"} <= set(study["generator"])


def test_allocation_from_budget_page_session_and_bad_geography():
    at = AppTest.from_file(PAGE, default_timeout=120)
    alloc = Allocation(LEVELS_GA, (0.1, 0.1, 0.5, 0.2, 0.1), "epsilon", "laplace")
    at.session_state["census_allocation_json"] = alloc.to_json()
    at.run()
    at.radio(key="dm_alloc_src").set_value("session").run()
    assert not at.exception and not at.error
    assert any("tract 0.5" in c.value for c in at.caption)
    # a Georgia allocation does not fit the four-level grid: the page says so and keeps going
    at.radio(key="dm_geo").set_value("grid").run()
    assert not at.exception
    assert any("make an allocation for this geography" in e.value for e in at.error)


def test_tab_outputs_and_block_view():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.selectbox(key="dm_display_georgia").select("block").run()
    assert not at.exception and not at.error
    assert "blocks" in json.loads(_map(at).proto.spec)["layout"]["title"]["text"]
    er = _table(at, "complement_support")
    assert set(er["mode"]) == {"all", "filtered", "weighted"}
    assert "naive Gaussian" in set(er["source"])
    labels = [b.label for b in at.get("download_button")]
    assert any("GeoJSON" in lbl for lbl in labels) and any("CSV" in lbl for lbl in labels)


def test_georgia_ensemble_compares_building_units():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.multiselect(key="dm_ens_units_georgia").set_value(["county", "block group"]).run()
    at.multiselect(key="dm_ens_disconn_georgia").set_value(["tract", "block"])
    at.number_input(key="dm_ens_disconn_n").set_value(20)
    at.button(key="dm_run_ensemble").click().run()
    assert not at.exception and not at.error
    # counties cannot hold 14 balanced districts (Fulton alone is too big): left out with a warning
    assert any("ReCom on counties left out" in w.value for w in at.warning)
    study = _table(at, "mean_fragmentation")
    assert set(study["generator"]) == {"ReCom (tracts)", "ReCom (block groups)", "Disconn (tracts)",
                                       "Disconn (blocks)"}
    assert (study.loc[study["generator"].str.startswith("Disconn"), "districts"] == 20).all()
    frag = study.groupby("generator")["mean_fragmentation"].first()
    assert frag["ReCom (tracts)"] < frag["ReCom (block groups)"] < frag["Disconn (blocks)"]
    assert frag["Disconn (tracts)"] < frag["Disconn (blocks)"]


def test_exact_enumeration_on_the_small_grid():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.radio(key="dm_geo").set_value("grid").run()
    at.selectbox(key="dm_grid").select("(16, 4, 16)").run()
    at.selectbox(key="dm_gen_grid").select("exact").run()
    assert not at.exception and not at.error
    assert at.number_input(key="dm_tol_exact").value == 20.0
    assert at.slider(key="dm_plan_idx").max > 10              # every plan of the 16 tracts is in the ensemble
    table = _table(at, "analytic_toydown_sd")
    assert len(table) == 4 and table["contiguous"].all() and (table["deviation_pct"].abs() <= 20).all()
    at.number_input(key="dm_tol_exact").set_value(0.5).run()
    assert not at.exception
    assert any("raise the tolerance" in e.value for e in at.error)
