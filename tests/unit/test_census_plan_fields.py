"""The budget and district plans declare their user-set fields once (label, bounds, menu): each default
is one its widget can show, the widget values of a plan give the plan back, and the saved form of a plan
is what it was before the declarations (reports keep loading)."""
from __future__ import annotations

import dataclasses

import pytest

from core.census import AlgorithmPlan, BudgetPlan, MechanismSweepPlan, PublicInfoPlan, WemPlan
from core.contracts import plan_from_dict
from core.districts import DistrictPlan, EnsemblePlan, ERPlan, NoiseConfig
from dashboard.components.params_form import check_shown, plan_widget_values

PLANS = (BudgetPlan, AlgorithmPlan, MechanismSweepPlan, PublicInfoPlan, WemPlan, DistrictPlan, NoiseConfig,
         EnsemblePlan, ERPlan)


def _default(cls):
    return cls((0.25,) * 4) if cls is NoiseConfig else cls()


@pytest.mark.parametrize("cls", PLANS, ids=lambda c: c.__name__)
def test_every_declared_default_is_one_its_widget_can_show(cls):
    plan = _default(cls)
    declared = [f for f in dataclasses.fields(cls) if "label" in f.metadata]
    assert declared, f"{cls.__name__} declares no field"
    # menus drawn from the data (a tree's levels) are the page's; a delta left unset (None) and the grid
    # county (one menu entry that is itself a tuple) are checked by hand below; the rest hold their default
    by_hand = ("delta", "grid_fanouts")
    fixed = [f.name for f in declared if f.name not in by_hand
             and (f.metadata.get("choices") is not None or f.metadata.get("low") is not None)]
    check_shown(plan, fixed)
    for f in declared:
        if f.name in by_hand and getattr(plan, f.name) is not None:
            assert getattr(plan, f.name) in f.metadata["choices"]


def test_the_budget_plans_widget_values_name_each_declared_field_once():
    values = plan_widget_values(BudgetPlan(), "ba")
    assert values == {"ba_total": 1.0, "ba_unit": "epsilon", "ba_delta": None, "ba_split": "preset",
                      "ba_preset": "equal", "ba_mechanism": "laplace", "ba_sensitivity": 2.0, "ba_runs": 30,
                      "ba_seed": 0, "ba_nonnegative": False}
    public = plan_widget_values(PublicInfoPlan(exact_through=2, wem=WemPlan(epsilon=0.7)), "ba_pub")
    assert public["ba_pub_exact_through"] == 2 and public["ba_pub_wem_epsilon"] == 0.7
    assert "ba_pub_wem_seed" not in public                   # the WEM's seed is the page's seed, not a widget


def test_the_district_plans_widget_values_reach_into_its_noise_settings():
    plan = DistrictPlan(k=6, noise=NoiseConfig((0.25,) * 4, algorithm="toydown_nonneg", runs=9, seed=3))
    values = plan_widget_values(plan, "dm")
    assert (values["dm_k"], values["dm_noise_algorithm"], values["dm_noise_runs"], values["dm_noise_seed"]) == \
        (6, "toydown_nonneg", 9, 3)
    assert "dm_noise_budgets" not in values                  # the allocation comes from its own section


@pytest.mark.parametrize("plan", [
    BudgetPlan(algorithms=AlgorithmPlan(n_types=3), mechanisms=MechanismSweepPlan(k=300),
               public=PublicInfoPlan(exact_through=1, wem=WemPlan(0.7, 3.0, 20, 7, True))),
    DistrictPlan(k=6, ensemble=EnsemblePlan(runs=4, recom_units=("tract",)), er=ERPlan(0.7, 0.4)),
], ids=["budget", "districts"])
def test_saved_plans_round_trip_unchanged(plan):
    again = plan_from_dict(plan.to_dict())
    assert again == plan and again.digest() == plan.digest()
