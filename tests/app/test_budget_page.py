"""Budget allocation page end to end with Streamlit's AppTest."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "budget_allocation.py")


def _table(at, column):
    """The first rendered table having this column (tables carry no key in AppTest)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _levels(at):
    return _table(at, "noise scale")


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def test_first_render_shows_outputs(app):
    assert not app.error
    assert len(app.get("plotly_chart")) >= 8
    levels = _levels(app)
    assert list(levels["level"]) == ["state", "county", "tract", "block group", "block"]
    assert levels["noise scale"].round(6).tolist() == [10.0] * 5      # Laplace, sensitivity 2, eps 0.2 each
    targets = _table(app, "simulated sd")
    assert targets["simulated sd"].notna().all()
    assert any("Simulation, not a release" in c.value for c in app.caption)
    assert any(m.value == "1-DP" for m in app.metric)


def test_split_and_mechanism_change_table_and_charts():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    before = _levels(at)
    fig_before = [c.proto.spec for c in at.get("plotly_chart")]
    at.selectbox(key="ba_preset").set_value("block-heavy").run()
    assert not at.exception
    after = _levels(at)
    assert after["share"].iloc[-1] == pytest.approx(0.5)
    assert after["whole-unit error sd"].iloc[-1] < before["whole-unit error sd"].iloc[-1]
    fig_after = [c.proto.spec for c in at.get("plotly_chart")]
    assert fig_after[0] != fig_before[0] and fig_after[1] != fig_before[1]
    at.selectbox(key="ba_mech_epsilon").set_value("geometric").run()
    assert not at.exception
    geo = _levels(at)
    assert (geo["node noise variance"] != after["node noise variance"]).all()
    assert [c.proto.spec for c in at.get("plotly_chart")][1] != fig_after[1]


def test_custom_sliders_optimise_and_rho():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.radio(key="ba_split").set_value("custom").run()
    at.slider(key="ba_w4_5").set_value(1.0).run()
    lv = _levels(at)
    assert lv["share"].sum() == pytest.approx(1.0)
    assert lv["share"].iloc[-1] > 0.5
    at.radio(key="ba_split").set_value("optimise").run()
    assert not at.exception
    rec = _table(at, "gain over equal (%)")
    assert (rec["gain over equal (%)"] > 0).all()
    at.radio(key="ba_unit").set_value("rho").run()
    assert not at.exception
    assert any("e-06" in m.value for m in at.metric)


def test_target_importance_moves_the_optimised_split():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.radio(key="ba_split").set_value("optimise").run()
    before = _levels(at)["share"].to_numpy()
    at.number_input(key="ba_weight_leaf").set_value(20.0).run()      # one block matters most
    assert not at.exception and not at.error
    after = _levels(at)["share"].to_numpy()
    assert after[-1] > before[-1]                                    # the block level gets more budget
    rec = _table(at, "gain over equal (%)").set_index("target")
    assert rec.loc[rec.index[0], "gain over equal (%)"] > 0


def test_bad_fanouts_show_error_and_keep_input():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.text_input(key="ba_fanouts").input("4, a").run()
    assert not at.exception
    assert any("whole numbers" in e.value for e in at.error)
    assert at.text_input(key="ba_fanouts").value == "4, a"


def test_export_offers_allocation_json(app):
    assert app.session_state["census_allocation_json"].startswith("{")
    assert '"format": "census-budget-allocation"' in app.session_state["census_allocation_json"]


def test_topdown_lite_tab_and_ledger(app):
    algo = _table(app, "leaf L1 error")
    assert set(algo["algorithm"]) == {"ToyDown (negatives allowed)", "ToyDown non-negative integer", "TopDown-lite"}
    assert (algo[algo.algorithm == "TopDown-lite"]["total error"] == 0).all()
    ledger = _table(app, "rho_equivalent")
    assert ledger["amount"].sum() == pytest.approx(1.0)


def test_tiny_tree_caps_k_instead_of_stopping_the_page():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.text_input(key="ba_fanouts").input("2").run()
    assert not at.exception and not at.error
    assert any("k = 2 instead of 4" in w.value for w in at.warning)
    assert set(_table(at, "simulated sd")["units"]) == {2}


def test_exact_levels_are_labelled_on_the_log_chart(app):
    import json
    spec = next(json.loads(c.proto.spec) for c in app.get("plotly_chart")
                if "TopDown-lite (" in json.dumps(json.loads(c.proto.spec)["layout"].get("title", "")))
    ticks = spec["layout"]["xaxis"]["ticktext"]
    assert ticks[0] == "state<br><sub>exact: TopDown-lite</sub>" and ticks[1] == "county"


def test_topdown_comparison_reruns_only_for_its_own_inputs(monkeypatch):
    import core.census.algorithm_comparison as algo
    calls = []
    real = algo.compare_algorithms
    monkeypatch.setattr(algo, "compare_algorithms", lambda *a, **k: calls.append(1) or real(*a, **k))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.number_input(key="ba_seed").set_value(4242).run()      # a seed no other test uses: fresh cache
    assert len(calls) == 1
    at.slider(key="ba_runs").set_value(10).run()
    at.number_input(key="ba_k").set_value(7).run()
    assert not at.exception and len(calls) == 1                # ToyDown runs and k do not feed it
    at.selectbox(key="ba_preset").set_value("BG-heavy").run()
    assert len(calls) == 2                                     # the budgets do


def test_large_tree_runs_the_comparison_on_request():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.slider(key="ba_runs").set_value(0)
    at.text_input(key="ba_fanouts").input("1000, 201").run()
    assert not at.exception and not at.error
    assert any("only on request" in i.value for i in at.info)
    assert not any("leaf L1 error" in d.value.columns for d in at.dataframe)
    at.number_input(key="ba_algo_types").set_value(1)
    at.slider(key="ba_algo_runs").set_value(1)
    at.toggle(key="ba_algo_large").set_value(True).run()
    assert not at.exception
    assert any("leaf L1 error" in d.value.columns for d in at.dataframe)
