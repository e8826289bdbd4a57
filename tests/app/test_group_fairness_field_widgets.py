"""The group fairness plans' declared fields draw their own widgets (field_widget) and a saved plan
redraws them (plan_widget_values): untouched widgets give the plans' defaults, each field gets the
widget its metadata names, and any plan's widget values rebuild that plan."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.fairness import GroupFairnessPlan, LexifairPlan, RankingPlan
from dashboard.components.params_form import plan_widget_values

def script():
    import streamlit as st

    from core.fairness import GroupFairnessPlan, LexifairPlan, RankingPlan
    from dashboard.components.params_form import field_widget

    columns = ("sex", "race", "gender", "lifting", "score", "decile_score")
    top = {n: field_widget(GroupFairnessPlan, n, "t") for n in ("learning", "population", "seed")}
    lx = {n: field_widget(LexifairPlan, n, "t_lx")
          for n in ("columns", "pairs", "min_size", "levels", "alpha", "rounds", "learner", "bound")}
    rk = {n: field_widget(RankingPlan, n, "t_rk", columns=columns)
          for n in ("attributes", "outcome", "ascending", "ks", "synthetic_rows")}
    st.session_state["built"] = (GroupFairnessPlan(**top, lexifair=None, ranking=None, companion=None),
                                 LexifairPlan(**lx), RankingPlan(**rk, mediators=()))


def test_untouched_widgets_give_the_plans_defaults():
    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    top, lx, rk = at.session_state["built"]
    assert top == GroupFairnessPlan(lexifair=None, ranking=None, companion=None)
    assert lx == LexifairPlan()
    assert rk == RankingPlan(mediators=())


def test_each_field_gets_the_widget_its_metadata_names():
    at = AppTest.from_function(script, default_timeout=60).run()
    assert at.slider(key="t_lx_levels").max == 3
    assert list(at.select_slider(key="t_lx_rounds").options) == ["100", "200", "500", "1000", "2000", "5000"]
    assert at.selectbox(key="t_lx_bound").options[-1] == "paper: (alpha + j) / alpha"
    assert at.radio(key="t_lx_learner").value == "ftpl"
    assert at.multiselect(key="t_lx_columns").value == ["sex", "race"]
    assert at.number_input(key="t_lx_min_size").value == 50
    assert at.radio(key="t_rk_ascending").options == ["low to high (lower score first)", "high to low"]
    assert at.selectbox(key="t_rk_outcome").value == "decile_score"
    assert at.selectbox(key="t_learning").value == "compas"
    assert at.number_input(key="t_seed").value == 0


def test_a_plans_widget_values_redraw_it():
    top = GroupFairnessPlan(learning="adult", population="paper", seed=11, lexifair=None, ranking=None,
                            companion=None)
    lx = LexifairPlan(columns=("age band",), pairs=False, min_size=30, levels=1, alpha=0.2, rounds=1000,
                      learner="ogd", bound=None)
    rk = RankingPlan(attributes=("gender",), mediators=(), outcome="score", ascending=False, ks=(20, 50),
                     synthetic_rows=10_000)
    at = AppTest.from_function(script, default_timeout=60)
    for prefix, plan in (("t", top), ("t_lx", lx), ("t_rk", rk)):
        for key, value in plan_widget_values(plan, prefix).items():
            at.session_state[key] = value
    at.run()
    assert not at.exception
    assert at.session_state["built"] == (top, lx, rk)
