"""The release settings of the Stratified synthesis page (the synthetic release's epsilon, method and seed,
and the stratified-mean release's epsilon, noise and pooled share) are declared once on their plans: the
page draws them from the declaration and a saved plan restores them through it."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import DataRef
from core.synthesis import ReleasePlan, SynthesisPlan
from core.synthesis.mean_release import MeanReleasePlan
from dashboard.components.params_form import plan_widget_values
from dashboard.components.synthesis_widgets import REL, plan_to_widgets

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")
COLS = ("education", "sex", "race", "income")


def script():
    import streamlit as st

    from core.synthesis import ReleasePlan
    from core.synthesis.mean_release import MeanReleasePlan
    from dashboard.components.params_form import field_widget
    from dashboard.components.synthesis_widgets import MR, REL

    st.session_state["release"] = ReleasePlan(**{n: field_widget(ReleasePlan, n, REL)
                                                 for n in ("epsilon", "method", "seed")})
    st.session_state["mean"] = {n: field_widget(MeanReleasePlan, n, MR) for n in ("epsilon", "noise", "pooled_share")}


def test_untouched_release_widgets_give_the_declared_defaults():
    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    assert at.session_state["release"] == ReleasePlan()
    assert at.session_state["mean"] == {"epsilon": 1.0, "noise": "laplace", "pooled_share": 0.2}
    assert at.radio(key="ss_rel_method").options == ["stratified", "pooled"]
    assert at.number_input(key="ss_rel_seed").max == 2**31 - 1
    assert at.slider(key="ss_mr_pooled_share").max == 0.5
    assert at.radio(key="ss_mr_noise").options == ["Laplace (pure epsilon-DP)", "Gaussian (zCDP at the plan's delta)"]


def test_a_release_plans_widget_values_redraw_it():
    release = ReleasePlan(epsilon=2.5, method="pooled", seed=7)
    at = AppTest.from_function(script, default_timeout=60)
    for key, value in plan_widget_values(release, REL).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception
    assert at.session_state["release"] == release


def test_a_saved_release_is_shown_by_the_page_or_refused_by_name():
    plan = SynthesisPlan(data=DataRef("cps"), columns=COLS, release=ReleasePlan(epsilon=2.5, method="pooled", seed=7))
    at = AppTest.from_file(PAGE, default_timeout=180)
    for key, value in plan_to_widgets(plan).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception
    assert at.number_input(key="ss_rel_epsilon").value == 2.5
    assert at.radio(key="ss_rel_method").value == "pooled"
    assert at.number_input(key="ss_rel_seed").value == 7
    with pytest.raises(ValueError, match="epsilon from 0.01 to 50"):
        plan_to_widgets(plan.replace(release=ReleasePlan(epsilon=0.005)))


def test_declaring_the_fields_keeps_the_plans_and_their_digests():
    """The declarations carry widget metadata only: defaults and digests (cache keys, saved reports) are
    those of the plans before the fields were declared."""
    mean = MeanReleasePlan(data=DataRef("cps"), column="income", strata=("sex",), category="50K+")
    assert (mean.epsilon, mean.noise, mean.pooled_share) == (1.0, "laplace", 0.2)
    assert mean.digest() == "b86d936a6c811358d414cdd8b8c565545b033c1b084637a23ab458b255a7da04"
    assert (ReleasePlan().epsilon, ReleasePlan().method, ReleasePlan().seed) == (1.0, "stratified", 0)
    assert ReleasePlan().digest() == "8e62d4891a54b2967a208934da4fd951d1f5e8319e46349c0d4ac7236336099f"
