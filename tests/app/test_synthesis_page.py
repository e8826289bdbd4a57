"""Stratified synthesis page end to end with Streamlit's AppTest."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")


def _table(at, column):
    """The first rendered table having this column (tables carry no key in AppTest)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _chart_titles(at):
    import json
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def test_default_view_shows_strata_and_mean_estimation_without_running(app):
    assert not app.error
    assert app.title[0].value == "Stratified synthesis"
    strata = _table(app, "real_rows")
    assert len(strata) == 10                       # sex (2) x race (5) from the public categories
    assert strata["real_rows"].sum() == 50000
    assert any("Run sweep" in i.value for i in app.info)
    titles = _chart_titles(app)
    assert any("closed form over simulation" in t for t in titles)
    assert any(m.label == "Strata (public domain)" and m.value == "10" for m in app.metric)
    assert any("Simulation, not a release" in c.value for c in app.caption)


def test_public_sizes_need_an_explicit_tick():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.radio(key="ss_size_policy").set_value("public").run()
    assert not at.exception
    assert any("tick the box" in e.value for e in at.error)
    at.checkbox(key="ss_public_ok").check().run()
    assert not at.error
    assert any("declared public" in i.value for i in at.info)


def test_sweep_with_two_epsilons_and_two_seeds_renders_curves():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.multiselect(key="ss_columns_cps").set_value(["age_band", "education", "marital", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("0.5, 5").run()
    at.number_input(key="ss_seeds").set_value(2).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    (result,) = at.session_state["ss_results"].values()
    gm = result.group_metrics
    assert set(gm["epsilon"]) == {0.5, 5.0} and set(gm["seed"]) == {0, 1}
    assert set(gm["method"]) == {"stratified", "pooled"}
    curves = _table(at, "seeds")
    assert (curves["seeds"] == 2).all() and len(curves) == 2 * 2 * 10
    assert (curves["min"] <= curves["mean"]).all() and (curves["mean"] <= curves["max"]).all()
    titles = _chart_titles(at)
    assert any("Per-group error" in t for t in titles)
    assert any("Disparity" in t for t in titles)
    assert any("Train on synthetic" in t for t in titles)
    small = _table(at, "fate")
    assert len(small) == 6 and (small["fate"] == "kept").all()
    # a plot option does not recompute: the stored result is the same object
    before = dict(at.session_state["ss_results"])
    at.selectbox(key="ss_metric").set_value("accuracy").run()
    assert not at.exception
    assert dict(at.session_state["ss_results"]).keys() == before.keys()
    assert all(at.session_state["ss_results"][k] is before[k] for k in before)
    at.selectbox(key="ss_metric").set_value("workload_3way").run()
    chart = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "Per-group error" in c.proto.spec)
    assert chart["layout"]["yaxis"]["title"]["text"].startswith("three-way workload error")
    assert sum(trace.get("mode") == "lines+markers" for trace in chart["data"]) == 2 * 10   # 10 groups x 2
    work = result.group_metrics.query("metric == 'workload_3way'")["value"]
    assert len(work) and work.between(0, 2).all()               # an L1 distance between distributions


def test_synthesizer_and_strata_changes_and_release():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.selectbox(key="ss_synth").set_value("independent").run()
    at.multiselect(key="ss_strata_cps").set_value(["sex"]).run()
    assert not at.exception
    assert len(_table(at, "real_rows")) == 2
    at.button(key="ss_rel_run").click().run()
    assert not at.exception
    ledger = _table(at, "rho_equivalent")
    assert "stratum sizes (Gaussian counts)" in set(ledger["label"])
    assert any("rho" in s.value for s in at.success)
    assert len(at.get("download_button")) >= 4  # release CSV, budget statement, export JSON and zip
    # every new seed is a fresh 50,000-row data set; the session keeps only the latest few
    for seed in (1, 2, 3, 4):
        at.number_input(key="ss_rel_seed").set_value(seed).run()
        at.button(key="ss_rel_run").click().run()
    assert not at.exception
    assert len(at.session_state["ss_releases"]) == 3


def test_bad_epsilons_show_an_error_and_keep_inputs():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.text_input(key="ss_epsilons").input("0.1, abc").run()
    assert not at.exception
    assert any("Epsilons must be numbers" in e.value for e in at.error)
    assert at.text_input(key="ss_epsilons").value == "0.1, abc"


def test_adult_bins_numbers_and_mean_tab_widgets():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.selectbox(key="ss_dataset").set_value("adult").run()
    assert not at.exception and not at.error
    assert any("equal-width bins" in c.value for c in at.caption)
    assert len(_table(at, "real_rows")) == 10          # sex x race in Adult: 2 x 5
    cols = at.multiselect(key="ss_columns_adult").value
    assert len(cols) <= 10 and {"sex", "race", "income"} <= set(cols)
    before = _table(at, "pooled mean |error|")
    at.slider(key="ss_me_spread").set_value(0.0).run()
    assert not at.exception
    after = _table(at, "pooled mean |error|")
    # with equal group means the pooled mean serves every group far better than with spread means
    assert after["pooled mean |error|"].max() < before["pooled mean |error|"].max()
    at.radio(key="ss_me_weights").set_value("dp").run()
    assert not at.exception
    assert any("for the DP size counts" in c.value for c in at.caption)
    laplace = _table(at, "stratified theory sd")["stratified theory sd"].to_numpy()
    at.radio(key="ss_me_noise").set_value("gaussian").run()
    assert not at.exception
    gaussian = _table(at, "stratified theory sd")["stratified theory sd"].to_numpy()
    # at epsilon 1, delta 1e-9 the matching rho is about 0.015: Gaussian noise is wider than Laplace here
    assert (gaussian > laplace).all()
    assert any("1e-09)-DP in total" in c.value for c in at.caption)
    # education x occupation x workclass: thousands of strata are refused before any fit
    cols = at.multiselect(key="ss_columns_adult").value
    wide = [c for c in ("education", "occupation", "workclass") if c in cols]
    at.multiselect(key="ss_strata_adult").set_value(wide).run()
    assert not at.exception
    assert any("at most 200" in e.value for e in at.error)
    assert at.button(key="ss_run").disabled


def test_marginals_tab_after_a_sweep():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.multiselect(key="ss_columns_cps").set_value(["age_band", "education", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("1").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception
    titles = _chart_titles(at)
    assert any("One-way TVD of each column inside each group" in t for t in titles)
    # the default group is the smallest one
    assert at.selectbox(key="ss_mg_group").value == "Male · Amer Indian Aleut or Eskimo"
    at.selectbox(key="ss_mg_col").set_value("education").run()
    assert not at.exception
    assert any(t.startswith("education within") for t in _chart_titles(at))


def test_sweep_fits_fan_out_over_the_cores(monkeypatch):
    import core.synthesis.sweep as sweep

    workers = []
    real = sweep.map_trials

    def spy(func, items, **kwargs):
        workers.append(kwargs["n_jobs"])
        return real(func, items, **kwargs)

    monkeypatch.setattr(sweep, "map_trials", spy)
    monkeypatch.setenv("DASHBOARD_N_JOBS", "2")
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.multiselect(key="ss_columns_cps").set_value(["education", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("0.7").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    assert workers == [2]


def test_one_column_besides_the_strata_offers_only_defined_measures():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.multiselect(key="ss_columns_cps").set_value(["sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("1").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    assert at.selectbox(key="ss_metric").options == [
        "one-way marginal TVD (lower is better)", "TSTR accuracy on real held-out rows (higher is better)"]
    assert "Population error vs worst-group error (one-way TVD)" in _chart_titles(at)
    pareto = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "worst-group" in c.proto.spec)
    assert {t["textposition"] for t in pareto["data"]} == {"top center", "bottom center"}  # labels do not collide
    assert _table(at, "worst_group")["worst_group"].notna().all()
