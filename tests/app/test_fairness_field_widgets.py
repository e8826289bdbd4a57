"""The elicitation design, sweep and companion plans draw their own widgets from their declared fields
(field_widget) and a saved plan redraws them (plan_widget_values): untouched widgets give the plans'
defaults, each field gets the widget the page has always shown, any plan the pages offer comes back
from its widget values, and a saved value the page cannot show is named instead of breaking a widget."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.fairness import CompanionPlan, ConstraintTable, ElicitationPlan, FrontierPlan, LearningPlan
from dashboard.components.params_form import plan_widget_values

def script():
    import streamlit as st

    from core.fairness import ElicitationPlan, FrontierPlan
    from dashboard.components.fairness_results import companion_settings
    from dashboard.components.params_form import field_widget

    design = ("population", "pair_source", "pair_epsilon", "features", "n_core", "n_random", "n_repeat",
              "response_mode", "seed", "instructions", "demo_stakeholders", "demo_kind", "demo_seed")
    sweep = ("population", "averaging", "T", "oracle", "sweep", "pair_holdout", "use_protected", "seed")
    panel = {"demo_stakeholders": 12}         # the demo's first panel (a plan's own default is no panel)
    st.session_state["built"] = (ElicitationPlan(**{n: field_widget(ElicitationPlan, n, "t", default=panel.get(n))
                                                    for n in design}),
                                 FrontierPlan(**{n: field_widget(FrontierPlan, n, "t_fr") for n in sweep}),
                                 companion_settings("t_fr", None, 0))


def _run(values: dict | None = None) -> AppTest:
    at = AppTest.from_function(script, default_timeout=60)
    for key, value in (values or {}).items():
        at.session_state[key] = value
    return at.run()


def test_untouched_widgets_give_the_plans_defaults():
    at = _run()
    assert not at.exception
    design, sweep, companion = at.session_state["built"]
    assert design == ElicitationPlan(demo_stakeholders=12)
    assert sweep == FrontierPlan()
    assert companion == CompanionPlan()


def test_each_field_gets_the_widget_the_page_showed():
    at = _run()
    assert at.selectbox(key="t_population").value == "paper"
    assert at.radio(key="t_pair_source").options == ["real records", "a private synthetic copy"]
    assert at.number_input(key="t_pair_epsilon").min == 0.05 and at.number_input(key="t_pair_epsilon").max == 10.0
    assert at.multiselect(key="t_features").value == list(ElicitationPlan().features)
    assert at.multiselect(key="t_features").options[0] == "Age"
    assert at.number_input(key="t_n_core").max == 100 and at.number_input(key="t_n_random").max == 400
    assert at.number_input(key="t_n_repeat").max == 20 and at.number_input(key="t_seed").max == 2 ** 31 - 1
    assert at.selectbox(key="t_response_mode").options == ["same / may differ", "four options"]
    assert at.text_area(key="t_instructions").value == ElicitationPlan().instructions
    assert at.number_input(key="t_demo_stakeholders").min == 2
    assert at.selectbox(key="t_demo_kind").options == ["similarity on record features", "similar risk score"]
    assert list(at.select_slider(key="t_fr_T").options) == ["100", "300", "1000", "2000", "3000"]
    assert at.radio(key="t_fr_averaging").value == "fast"
    assert at.selectbox(key="t_fr_oracle").options[0] == "weighted logistic regression (default)"
    assert at.radio(key="t_fr_sweep").value == "gamma"
    assert (at.slider(key="t_fr_pair_holdout").min, at.slider(key="t_fr_pair_holdout").max) == (0.0, 0.5)
    assert at.checkbox(key="t_fr_use_protected").value is True
    assert at.number_input(key="t_fr_seed").max == 10_000
    assert at.selectbox(key="t_fr_rv_attribute").options == ["African-American vs Caucasian", "Male vs Female"]
    assert (at.slider(key="t_fr_rv_cutoff").min, at.slider(key="t_fr_rv_cutoff").max) == (0.05, 0.95)
    assert at.slider(key="t_fr_rv_bins").max == 20 and at.radio(key="t_fr_rv_mode").value == "exact"
    assert at.select_slider(key="t_fr_rv_penalty").value == 1.0 and at.radio(key="t_fr_rv_parity").value == "both"


def test_saved_plans_redraw_from_their_widget_values():
    from dashboard.components.fairness_results import plan_widgets
    design = ElicitationPlan(population="full", pair_source="dp_synthetic", pair_epsilon=0.75,
                             features=("age", "priors_count"), n_core=4, n_random=9, n_repeat=1,
                             response_mode="four_option", seed=17, instructions="Judge each pair.",
                             demo_stakeholders=5, demo_kind="score", demo_seed=3)
    sweep = FrontierPlan(population="propublica", averaging="paper", T=300, oracle="ols", sweep="eta",
                         pair_holdout=0.1, use_protected=False, seed=8)
    companion = CompanionPlan(cutoff=0.6, bins=8, attribute="sex", groups=("Male", "Female"), mode="soft",
                              penalty_fpr=0.0, penalty_tpr=10.0)
    learning = LearningPlan(constraints=ConstraintTable(i=(1,), j=(2,), weight=(1.0,), w_ij=(1.0,), w_ji=(1.0,),
                                                        agreement=(1.0,)),
                            frontier=sweep, companion=companion)
    at = _run({**plan_widget_values(design, "t"), **plan_widgets("t_fr", learning)})
    assert not at.exception
    assert at.session_state["built"] == (design, sweep, companion)


def test_a_saved_value_the_page_cannot_show_is_named():
    from dashboard.components.fairness_results import companion_widget_values, plan_widgets
    cons = ConstraintTable(i=(1,), j=(2,), weight=(1.0,), w_ij=(1.0,), w_ji=(1.0,), agreement=(1.0,))
    with pytest.raises(ValueError, match="share of pairs held out from 0 to 0.5; the saved plan has 0.7"):
        plan_widgets("t", LearningPlan(constraints=cons, frontier=FrontierPlan(pair_holdout=0.7)))
    with pytest.raises(ValueError, match="seed from 0 to 10000"):
        plan_widgets("t", LearningPlan(constraints=cons, frontier=FrontierPlan(seed=50_000)))
    with pytest.raises(ValueError, match="score bins"):
        companion_widget_values("t", CompanionPlan(bins=40))
    with pytest.raises(ValueError, match="disparity penalty"):
        companion_widget_values("t", CompanionPlan(penalty_fpr=2.0, penalty_tpr=2.0))
    with pytest.raises(ValueError, match="compares"):
        companion_widget_values("t", CompanionPlan(attribute="age", groups=("young", "old")))
