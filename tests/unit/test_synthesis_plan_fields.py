"""The synthesis plans' declared fields: the shared setup that keys cached sub-runs, where the page's
widgets start, and how a saved plan is turned back into widget values (or refused with a reason)."""
from __future__ import annotations

import dataclasses

import pytest

from core.contracts import DataRef, Plan
from core.synthesis import (GEMParams, MarginalsPlan, MeansPlan, ReleasePlan, SYNTHESIZERS, SweepPlan,
                            SynthesisPlan)
from dashboard.components.params_form import declared_state, params_widget_values, plan_widget_values
from dashboard.components.synthesis_widgets import plan_to_widgets

COLS = ("education", "sex", "race", "income")


def cps_plan(**kw) -> SynthesisPlan:
    return SynthesisPlan(data=DataRef("cps"), columns=COLS, **kw)


def test_the_setup_clears_exactly_the_four_tabs_so_sub_run_keys_are_unchanged():
    tabs = dict(sweep=SweepPlan(epsilons=(2.0,), seeds=(0,)), marginals=MarginalsPlan(2.0, 0),
                release=ReleasePlan(epsilon=2.0), means=MeansPlan(epsilons=(2.0,), group_epsilon=2.0))
    plan = cps_plan(synthesizer="gem", synth_params=GEMParams(rounds=50), delta=1e-7, **tabs)
    assert plan.part_names() == ("sweep", "marginals", "release", "means")
    setup = plan.setup()
    # what the cached sub-runs were keyed on before: the plan with its four tabs stripped by hand
    by_hand = cps_plan(synthesizer="gem", synth_params=GEMParams(rounds=50), delta=1e-7)
    assert setup == by_hand and setup.digest() == by_hand.digest()
    assert setup.synth_params == GEMParams(rounds=50) and setup.target == "income"
    # a tab's own settings never move the shared key; a shared setting does
    assert plan.replace(release=ReleasePlan(epsilon=3.0)).setup().digest() == setup.digest()
    assert plan.replace(delta=1e-9).setup().digest() != setup.digest()
    assert "setup" not in vars(SynthesisPlan)          # one generic rule, no hand-written copy
    assert SynthesisPlan.setup is Plan.setup


def test_declared_fields_start_where_the_page_always_started():
    """The values the page's widgets started from before they were drawn from the declaration."""
    plan = cps_plan()
    page_start = {"synthesizer": "mst", "delta": 1e-9, "size_policy": "dp_count", "sizes_declared_public": False,
                  "count_share": 0.1, "min_stratum_size": 0, "small_action": "keep", "domain_declared_public": False}
    assert {k[3:]: v for k, v in plan_widget_values(plan, "ss").items()} == page_start
    means_start = {"R": 1.0, "gamma": 0.1, "runs": 40, "noise": "laplace", "group_epsilon": 1.0, "spread": 0.5,
                   "weights": "exact", "count_epsilon": 0.1, "coinpress_alpha": 0.3, "coinpress_k": 3}
    assert {k[6:]: v for k, v in plan_widget_values(MeansPlan(), "ss_me").items()} == means_start
    undeclared = {f.name for f in dataclasses.fields(MeansPlan) if "label" not in f.metadata}
    assert undeclared == {"epsilons", "coinpress_runs", "seed"}    # set by the page from elsewhere, or not at all


def test_a_saved_plan_becomes_the_widget_values_that_redraw_it():
    plan = cps_plan(strata=("sex",), target=None, synthesizer="gem", synth_params=GEMParams(rounds=50),
                    delta=1e-5, size_policy="public", sizes_declared_public=True, count_share=0.3,
                    min_stratum_size=20, small_action="merge",
                    sweep=SweepPlan(epsilons=(0.5, 2.0), seeds=(0, 1, 2)),
                    means=MeansPlan(group_epsilon=5.0, noise="gaussian", coinpress_k=6, runs=20))
    values = plan_to_widgets(plan)
    assert values["ss_synthesizer"] == "gem" and values["ss_gem_rounds"] == 50
    assert values["ss_delta"] == 1e-5 and values["ss_small_action"] == "merge" and values["ss_min_stratum_size"] == 20
    assert values["ss_sizes_declared_public"] is True and values["ss_count_share"] == 0.3
    assert values["ss_columns_cps"] == list(COLS) and values["ss_strata_cps"] == ["sex"]
    assert values["ss_target_cps"] == "(none)"
    assert values["ss_epsilons"] == "0.5, 2" and values["ss_seeds"] == 3
    assert values["ss_me_group_epsilon"] == 5.0 and values["ss_me_noise"] == "gaussian"
    assert values["ss_me_coinpress_k"] == 6 and values["ss_me_runs"] == 20
    assert values["ss_requested"]["setup"] == plan.setup().digest()
    assert values["ss_requested"]["sweep"] == plan.sweep


@pytest.mark.parametrize("plan,setting", [
    (cps_plan(delta=1e-6), "delta"),
    (cps_plan(count_share=0.8), "share of the budget for the counts"),
    (cps_plan(means=MeansPlan(runs=5)), "simulated runs per epsilon"),
    (cps_plan(means=MeansPlan(coinpress_k=4)), "groups k"),
])
def test_a_saved_plan_the_page_cannot_show_is_refused_naming_the_setting(plan, setting):
    """The plans accept these (a script may use them); the page's widgets cannot show them."""
    with pytest.raises(ValueError, match=f"This page offers {setting}"):
        plan_to_widgets(plan)


def test_widget_state_fills_only_declared_fields_that_have_a_widget_value():
    state = {"ss_me_R": 2.5, "ss_me_noise": "gaussian", "ss_me_epsilons": [9.0], "other": 1}
    assert declared_state(MeansPlan, "ss_me", state) == {"R": 2.5, "noise": "gaussian"}
    built = MeansPlan(**declared_state(MeansPlan, "ss_me", state))
    assert built == MeansPlan(R=2.5, noise="gaussian")     # every other field: the dataclass default


def test_a_synthesizers_params_become_the_keys_params_widgets_draws():
    spec = SYNTHESIZERS["gem"]
    values = params_widget_values(spec, "ss", GEMParams(rounds=50))
    assert values["ss_gem_rounds"] == 50
    assert set(values) == {f"ss_gem_{f.name}" for f in dataclasses.fields(GEMParams)}
