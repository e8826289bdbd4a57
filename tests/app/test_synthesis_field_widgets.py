"""The Stratified synthesis page draws its declared plan fields from their declaration: untouched, they
build the plans' defaults; restored from a saved plan with every declared field changed, the page
builds that same plan again."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.contracts import DataRef
from core.synthesis import GEMParams, MeansPlan, SweepPlan, SynthesisPlan
from dashboard.components.synthesis_widgets import plan_to_widgets

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")
COLS = ("education", "sex", "race", "income")


def test_untouched_widgets_build_the_plans_defaults():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.session_state["ss_columns_cps"] = list(COLS)
    at.run()
    assert not at.exception and not at.error
    shown = at.session_state["ss_plan"]
    means = shown.means
    assert shown == SynthesisPlan(data=DataRef("cps"), columns=COLS, means=means)
    assert means == MeansPlan(epsilons=SweepPlan().epsilons, group_epsilon=1.0)
    assert at.selectbox(key="ss_delta").options == ["1e-09", "1e-07", "1e-05"]
    assert at.radio(key="ss_size_policy").options == ["Estimate with a DP count (charged)",
                                                      "Public (e.g. census totals)"]
    assert at.select_slider(key="ss_me_coinpress_k").options == ["2", "3", "6", "12"]
    assert at.selectbox(key="ss_me_group_epsilon").options == ["0.1", "1.0", "5.0"]
    assert at.number_input(key="ss_me_count_epsilon").disabled          # only with DP-noised weights
    assert at.checkbox(key="ss_sizes_declared_public").disabled          # only with public sizes


def test_a_saved_plan_with_every_declared_field_changed_is_rebuilt_by_the_page():
    plan = SynthesisPlan(
        data=DataRef("cps"), columns=COLS, strata=("sex",), target=None, synthesizer="gem",
        synth_params=GEMParams(rounds=50), delta=1e-5, size_policy="public", sizes_declared_public=True,
        count_share=0.3, min_stratum_size=20, small_action="merge",
        means=MeansPlan(R=2.0, gamma=0.05, runs=20, noise="gaussian", group_epsilon=5.0, spread=1.0,
                        weights="dp", count_epsilon=0.5, coinpress_alpha=1.0, coinpress_k=6))
    at = AppTest.from_file(PAGE, default_timeout=180)
    for key, value in plan_to_widgets(plan).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["ss_plan"] == plan
    assert at.selectbox(key="ss_synthesizer").value == "gem"
    assert at.number_input(key="ss_me_gamma").value == 0.05
