"""Stratified synthesis page end to end with Streamlit's AppTest."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import DataRef
from core.report import build_report, report_json
from core.synthesis import MarginalsPlan, MeansPlan, SweepPlan, SynthesisPlan, run
from tests.release_steps import confirm_release

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")
HOME = str(Path(PAGE).parents[1] / "home.py")


def _table(at, column):
    """The first rendered table having this column (tables carry no key in AppTest)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _chart_titles(at):
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def _page(timeout=180):
    at = AppTest.from_file(PAGE, default_timeout=timeout)
    at.run()
    assert not at.exception
    return at


@pytest.fixture(scope="module")
def app():
    return _page()


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
    # the Run button sits with the settings, in the main area, not in the sidebar
    assert app.button(key="ss_run") in app.main.button
    assert not app.sidebar.button


def test_page_numbers_match_a_plan_built_in_plain_python():
    """The mean-estimation numbers on screen equal run(plan) for the same settings."""
    at = _page()
    plan = SynthesisPlan(data=DataRef("cps"), columns=tuple(at.multiselect(key="ss_columns_cps").value),
                         strata=("sex", "race"), target="income",
                         means=MeansPlan(epsilons=(0.1, 1.0, 5.0), group_epsilon=1.0))
    result = run(plan)
    shown = _table(at, "pooled mean |error|")
    assert shown["pooled mean |error|"].tolist() == pytest.approx(result.means.group_errors["pooled mean |error|"])
    multiplier = next(m.value for m in at.metric if m.label == "Stratification cost multiplier")
    assert multiplier == f"{result.means.summary['cost_multiplier']:.2f}x"


def test_public_sizes_need_an_explicit_tick():
    at = _page()
    at.radio(key="ss_size_policy").set_value("public").run()
    assert not at.exception
    assert any("tick the box" in e.value for e in at.error)
    at.checkbox(key="ss_sizes_declared_public").check().run()
    assert not at.error
    assert any("declared public" in i.value for i in at.info)


def test_sweep_with_two_epsilons_and_two_seeds_renders_curves():
    at = _page()
    at.multiselect(key="ss_columns_cps").set_value(["age_band", "education", "marital", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("0.5, 5").run()
    at.number_input(key="ss_seeds").set_value(2).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    curves = _table(at, "seeds")
    assert (curves["seeds"] == 2).all() and len(curves) == 2 * 2 * 10
    assert set(curves["epsilon"]) == {0.5, 5.0} and set(curves["method"]) == {"stratified", "pooled"}
    assert (curves["min"] <= curves["mean"]).all() and (curves["mean"] <= curves["max"]).all()
    titles = _chart_titles(at)
    assert any("Per-group error" in t for t in titles)
    assert any("Disparity" in t for t in titles)
    assert any("Train on synthetic" in t for t in titles)
    small = _table(at, "fate")
    assert len(small) == 6 and (small["fate"] == "kept").all()
    at.selectbox(key="ss_metric").set_value("workload_3way").run()
    assert not at.exception
    chart = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "Per-group error" in c.proto.spec)
    assert chart["layout"]["yaxis"]["title"]["text"].startswith("three-way workload error")
    assert sum(trace.get("mode") == "lines+markers" for trace in chart["data"]) == 2 * 10   # 10 groups x 2


def test_seeded_simulation_and_secure_release_both_enter_one_ledger():
    at = _page()
    at.selectbox(key="ss_synthesizer").set_value("independent").run()
    at.multiselect(key="ss_strata_cps").set_value(["sex"]).run()
    assert not at.exception
    assert len(_table(at, "real_rows")) == 2
    from core.privacy.project_ledger import ProjectLedger
    book = ProjectLedger()
    before = len(book.releases("cps", "release"))
    sims_before = len(book.releases("cps", "simulation"))
    at.button(key="ss_rel_run").click().run()
    assert not at.exception and not at.error
    ledger = _table(at, "rho_equivalent")
    assert "stratum sizes (Gaussian counts)" in set(ledger["label"])
    assert not any(ledger["measured"].str.contains("rows").fillna(False) & ledger["measured"].str.contains(r"\d"))
    assert any(w.value.startswith("Simulation, not a release") for w in at.warning)
    assert len(book.releases("cps", "simulation")) == sims_before + 1     # listed apart, never counted
    assert len(book.releases("cps", "release")) == before
    confirm_release(at, "ss_rel_secure")
    assert not at.exception and not at.error
    assert any(s.value.startswith("Release:") for s in at.success)
    releases = _table(at, "release")
    assert len(releases) == before + 1 == len(book.releases("cps", "release"))   # kept in the database
    assert any(f"{before + 1} release" in c.value for c in at.caption)
    names = [b.proto.label for b in at.get("download_button")]
    assert names.count("Download synthetic data (CSV)") == 2


@pytest.mark.parametrize("text,message", [("0.1, abc", "Epsilons must be numbers"),
                                          ("nan", "finite number"), ("1, inf", "finite number")])
def test_bad_epsilons_show_an_error_and_keep_inputs(text, message):
    at = _page()
    at.text_input(key="ss_epsilons").input(text).run()
    assert not at.exception
    assert any(message in e.value for e in at.error)
    assert at.text_input(key="ss_epsilons").value == text
    assert at.button(key="ss_run").disabled


def test_adult_numbers_need_public_ranges_and_mean_tab_widgets():
    at = _page()
    at.selectbox(key="ss_dataset").set_value("adult").run()
    assert not at.exception and not at.error
    assert any("give public bounds" in c.value for c in at.caption)
    assert len(_table(at, "real_rows")) == 10          # sex x race in Adult: 2 x 5
    cols = at.multiselect(key="ss_columns_adult").value
    assert len(cols) <= 10 and {"sex", "race", "income"} <= set(cols) and "age" not in cols
    at.number_input(key="ss_lo_adult_age").set_value(0).run()
    at.number_input(key="ss_hi_adult_age").set_value(120).run()
    assert not at.exception and not at.error
    assert any("declared public range [0, 120]" in c.value for c in at.caption)
    at.number_input(key="ss_hi_adult_age").set_value(None).run()
    assert any("both ends of the public range of age" in e.value for e in at.error)
    at.number_input(key="ss_lo_adult_age").set_value(None).run()
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
    assert any("1e-09)-DP (rho" in c.value for c in at.caption)
    cols = at.multiselect(key="ss_columns_adult").value
    wide = [c for c in ("education", "occupation", "workclass") if c in cols]
    at.multiselect(key="ss_strata_adult").set_value(wide).run()
    assert not at.exception
    assert any("at most 200" in e.value for e in at.error)


def test_marginals_tab_after_a_sweep():
    at = _page()
    at.multiselect(key="ss_columns_cps").set_value(["age_band", "education", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("1").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception
    titles = _chart_titles(at)
    assert any("One-way TVD of each column inside each group" in t for t in titles)
    assert at.selectbox(key="ss_mg_group").value == "Male · Amer Indian Aleut or Eskimo"   # the smallest group
    at.selectbox(key="ss_mg_col").set_value("education").run()
    assert not at.exception
    assert any(t.startswith("education within") for t in _chart_titles(at))
    # every main chart carries the numbers it was drawn from: an expander under it, or its table beside it
    behind = [e.label for e in at.expander if e.label.startswith("The numbers behind")]
    assert len(behind) == len(set(behind))
    for what in ("the curves", "the heat map", "the bars", "the disparity curves", "the error curves",
                 "the per-group errors", "the COINPRESS curves", "the size-skew curve"):
        assert f"The numbers behind {what}" in behind
    bars = next(d.value for d in at.dataframe if {"category", "real", "stratified", "pooled"} <= set(d.value.columns)
                and "group" in d.value.columns)
    assert set(bars["column"]) == {"education"} and abs(bars["real"].sum() - 1.0) < 1e-9


def test_sweep_fits_fan_out_over_the_cores(monkeypatch):
    import core.synthesis.sweep as sweep

    workers = []

    def spying(real):
        def spy(func, items, **kwargs):
            workers.append(kwargs["n_jobs"])
            return real(func, items, **kwargs)
        return spy

    # fits fan out through map_trials, or through the round relay when a progress bar listens
    monkeypatch.setattr(sweep, "map_trials", spying(sweep.map_trials))
    monkeypatch.setattr(sweep, "relayed_map", spying(sweep.relayed_map))
    monkeypatch.setenv("DASHBOARD_N_JOBS", "2")
    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")       # the spy lives in this process
    at = _page()
    at.multiselect(key="ss_columns_cps").set_value(["education", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("0.7").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    assert workers == [2]


def test_one_column_besides_the_strata_offers_only_defined_measures():
    at = _page()
    at.multiselect(key="ss_columns_cps").set_value(["sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("1").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    assert at.selectbox(key="ss_metric").options == [
        "one-way marginal TVD (lower is better)", "TSTR accuracy on real held-out rows (higher is better)"]
    assert "Population error vs worst-group error (one-way TVD)" in _chart_titles(at)
    assert _table(at, "worst_group")["worst_group"].notna().all()


def test_navigating_away_and_back_keeps_the_plan_and_results():
    at = _page()
    at.multiselect(key="ss_columns_cps").set_value(["education", "sex", "race", "income"])
    at.text_input(key="ss_epsilons").input("2").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    at.button(key="ss_rel_run").click().run()
    curves = _table(at, "seeds")
    at.switch_page(HOME).run()
    at.switch_page(PAGE).run()
    assert not at.exception and not at.error
    assert at.text_input(key="ss_epsilons").value == "2"
    assert at.multiselect(key="ss_columns_cps").value == ["education", "sex", "race", "income"]
    assert _table(at, "seeds").equals(curves)                        # the sweep is still there
    assert any(w.value.startswith("Simulation, not a release") for w in at.warning)   # and the release


def test_a_saved_report_restores_the_settings_and_results():
    """What "Open a saved report" writes into the session rebuilds the plan and its results."""
    from core.report import load_plan
    from dashboard.components.synthesis_widgets import plan_to_widgets

    plan = SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income"),
                         sweep=SweepPlan(epsilons=(3.0,), seeds=(0,)), marginals=MarginalsPlan(3.0, 0),
                         means=MeansPlan(epsilons=(3.0,), group_epsilon=3.0))
    report = json.loads(report_json(build_report(run(plan), page="Stratified synthesis")))
    at = AppTest.from_file(PAGE, default_timeout=180)
    for key, value in plan_to_widgets(load_plan(report)).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception and not at.error
    assert at.text_input(key="ss_epsilons").value == "3"
    assert at.multiselect(key="ss_columns_cps").value == ["education", "sex", "race", "income"]
    assert set(_table(at, "seeds")["epsilon"]) == {3.0}          # the sweep result is back without a click


def test_synthesizer_settings_survive_navigation():
    """The synthesizer's own widgets (drawn from its Params) keep their values across pages."""
    at = AppTest.from_file(str(Path(PAGE).parents[1] / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("tools/stratified_synthesis.py").run()
    at.selectbox(key="ss_synthesizer").select("gem").run()
    at.number_input(key="ss_gem_rounds").set_value(50).run()
    assert not at.exception
    at.switch_page("home.py").run()
    at.switch_page("tools/stratified_synthesis.py").run()
    assert not at.exception
    assert at.selectbox(key="ss_synthesizer").value == "gem"
    assert at.number_input(key="ss_gem_rounds").value == 50


def _own_ledger(tmp_path, monkeypatch):
    from core.privacy.project_ledger import ProjectLedger

    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    return ProjectLedger()


def test_stratified_mean_release_is_recorded_in_the_project_ledger(tmp_path, monkeypatch):
    ledger = _own_ledger(tmp_path, monkeypatch)
    at = _page()
    assert at.selectbox(key="ss_mr_column_cps").value == "income"
    assert at.selectbox(key="ss_mr_category_cps_income").value == "50K+"
    assert not ledger.releases("cps", "release")
    at.number_input(key="ss_mr_epsilon").set_value(0.5).run()
    confirm_release(at, "ss_mr_release")
    assert not at.exception and not at.error
    made = ledger.releases("cps", "release")
    assert len(made) == 1 and made[0].action == "stratified mean release" and made[0].kind == "release"
    assert made[0].label == "stratified share income = 50K+, epsilon 0.5"
    assert sum(s.amount for s in made[0].spends) == pytest.approx(0.5)            # all Laplace, in epsilon
    assert ledger.totals("cps").epsilon == pytest.approx(0.5)
    table = _table(at, "ci_high")
    assert len(table) == 10 and "noisy_size" in table.columns and "size" not in table.columns
    assert (table["ci_low"] <= table["mean"]).all() and (table["mean"] <= table["ci_high"]).all()
    assert any(m.label == "Overall, pooled (comparison)" for m in at.metric)
    assert any(t.startswith("Private share in 50K+ per stratum") for t in _chart_titles(at))
    assert any(s.value.startswith("Release:") for s in at.success)
    assert "Download the stratified means (CSV)" in [b.proto.label for b in at.get("download_button")]
    at.run()                                                                       # a rerun records nothing new
    assert len(ledger.releases("cps", "release")) == 1
    confirm_release(at, "ss_mr_release")                       # a second release, confirmed again: a new one
    assert len(ledger.releases("cps", "release")) == 2
    assert ledger.totals("cps").epsilon == pytest.approx(1.0)


def test_a_numeric_mean_needs_a_public_range_typed_by_the_curator(tmp_path, monkeypatch):
    ledger = _own_ledger(tmp_path, monkeypatch)
    at = _page()
    at.selectbox(key="ss_dataset").set_value("adult").run()
    at.selectbox(key="ss_mr_column_adult").set_value("hours_per_week").run()
    assert not at.exception
    assert any("give a public range" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "ss_mr_release"]                 # nothing to press without one
    at.text_input(key="ss_mr_range_adult_hours_per_week").input("0-99").run()
    assert not at.exception and not at.error
    confirm_release(at, "ss_mr_release")
    assert not at.exception and not at.error
    made = ledger.releases("adult", "release")
    assert [m.label for m in made] == ["stratified mean of hours_per_week, epsilon 1"]
    assert any("public range [0, 99]" in s.value for s in at.success)
    assert _table(at, "ci_high")["mean"].between(0, 99).all()


def test_cancelling_a_secure_synthetic_release_records_nothing(tmp_path, monkeypatch):
    from contextlib import contextmanager

    import dashboard.components.progress as progress_module
    from core.contracts import Cancelled

    ledger = _own_ledger(tmp_path, monkeypatch)

    @contextmanager
    def clicked(label, *, cancel_key=None, n_jobs=None):
        if cancel_key == "ss_rel_cancel":
            raise Cancelled(f"{label} was cancelled.")
        yield lambda done, total, message="": None

    monkeypatch.setattr(progress_module, "progress_bar", clicked)
    at = _page()
    at.selectbox(key="ss_synthesizer").set_value("independent").run()
    confirm_release(at, "ss_rel_secure")
    assert not at.exception and not at.error
    assert any("cancelled before anything was published" in i.value for i in at.info)
    assert not ledger.releases("cps", "release")


def test_a_mean_release_with_declared_public_sizes_shows_them(tmp_path, monkeypatch):
    ledger = _own_ledger(tmp_path, monkeypatch)
    at = _page()
    at.radio(key="ss_size_policy").set_value("public").run()
    at.checkbox(key="ss_sizes_declared_public").check().run()
    at.radio(key="ss_mr_noise").set_value("gaussian").run()
    confirm_release(at, "ss_mr_release")
    assert not at.exception and not at.error
    table = _table(at, "ci_high")
    assert "size" in table.columns and table["size"].sum() == 50000            # declared public: exact
    [made] = ledger.releases("cps", "release")
    assert [s.unit for s in made.spends] == ["rho", "rho"]                   # Gaussian: stratum sums and pooled
