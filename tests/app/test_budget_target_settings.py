"""The Budget page's district k and target weights are declared once (TargetSettings): the page draws
them from the declaration and a saved plan restores them through it, naming a value the page cannot show."""
from __future__ import annotations

import pytest

from core.census import BudgetPlan
from core.census.budget_plan import TargetSettings
from core.census.targets import parse_target
from dashboard.components.budget_input import target_settings_values, target_widgets


def test_the_declared_defaults_are_the_plans():
    picked, k = target_widgets(BudgetPlan())
    assert TargetSettings().k == k == parse_target("greedy:4").arg
    assert TargetSettings().weight == 1.0        # an empty target_weights weighs every target 1


def test_widget_values_of_k_and_each_weight():
    assert target_settings_values(7, {"leaf": 2.0, "unit:1": 0.0, "greedy": 0.5}) == {
        "ba_k": 7, "ba_leaf_weight": 2.0, "ba_unit:1_weight": 0.0, "ba_greedy_weight": 0.5}


def test_a_value_the_page_cannot_show_is_named():
    with pytest.raises(ValueError, match="importance from 0 to 100; the saved plan has 500"):
        target_settings_values(4, {"leaf": 500.0})
    with pytest.raises(ValueError, match="k districts from 1 to 10000; the saved plan has 20000"):
        target_settings_values(20_000, {})


def test_page_plan_to_widgets_refuses_an_off_page_weight():
    from dashboard.components.budget_input import plan_to_widgets
    plan = BudgetPlan(fanouts=(6, 5, 4), targets=("leaf", "greedy:5"), target_weights=(500.0, 1.0))
    with pytest.raises(ValueError, match="importance"):
        plan_to_widgets(plan)
    values = plan_to_widgets(plan.replace(target_weights=(2.5, 0.0)))
    assert (values["ba_k"], values["ba_leaf_weight"], values["ba_greedy_weight"]) == (5, 2.5, 0.0)
