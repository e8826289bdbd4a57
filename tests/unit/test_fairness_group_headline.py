"""Group fairness: one worst-off view read by the headline, its uncertainty and the page; the learner
registry; each number drawn from its own named stream."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.contracts import Registry, plan_from_dict
from core.fairness import GroupFairnessPlan, LexifairPlan, RankingPlan, run_group_fairness
from core.fairness.group_fairness_plan import (WORST_OFF_NAME, bootstrap_rng, learning_frame, lexifair_subrun,
                                               ranking_subrun)
from core.fairness.learner import cost_sensitive_oracle
from core.fairness.lexifair import LEARNERS, MergedOracle, bootstrap_group_errors, membership_matrix

QUICK = LexifairPlan(rounds=10, levels=2, bootstrap=20)


def _lexifair(seed: int, **changes):
    plan = GroupFairnessPlan(seed=seed, ranking=None, companion=None, lexifair=QUICK.replace(**changes))
    return run_group_fairness.uncached(plan)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_worst_off_line_and_the_headline_name_the_same_group_and_number(seed):
    """Worst-off = the largest held-out error. At seed 1 ranking by training error named Female & Caucasian
    (0.279) for ERM while the headline said 0.372 (Male & Caucasian)."""
    result = _lexifair(seed)
    groups, head = result.lexifair.groups, result.headline()
    first = result.lexifair.worst.query("rank_in_model == 1").set_index("model")
    for model, part in groups.groupby("model"):
        largest = part.loc[part["held_out_error"].idxmax()]
        assert first.loc[model, "group"] == largest["group"]
        assert first.loc[model, "held_out_error"] == head[WORST_OFF_NAME.format(model=model)] \
            == largest["held_out_error"]


def test_seed_one_erm_is_male_caucasian_at_0_372():
    view = _lexifair(1).worst_off().set_index("model")
    row = view.loc["ERM (plain accuracy)"]
    assert row["group"] == "sex = Male & race = Caucasian" and round(row["held_out_error"], 3) == 0.372
    assert row["held_out_low"] <= row["held_out_error"] <= row["held_out_high"]


def test_uncertainty_and_view_carry_the_same_group_and_interval():
    result = _lexifair(1)
    view, words = result.worst_off(), result.headline_uncertainty()
    assert list(view["model"]) == ["ERM (plain accuracy)", "minimax (level 1)", "lexifair level 2"]
    for row in view.itertuples(index=False):
        assert words[row.headline_name] == f"{row.group}: {row.interval}"
        assert f"{row.held_out_low:.3g}-{row.held_out_high:.3g}" in row.interval
    no_boot = _lexifair(1, bootstrap=0)
    assert no_boot.worst_off()["interval"].eq("one held-out split; no bootstrap asked").all()
    assert no_boot.worst_off()["held_out_error"].tolist() == view["held_out_error"].tolist()


def test_worst_table_ranks_by_held_out_error_within_each_model():
    worst = _lexifair(1).lexifair.worst
    for _, part in worst.groupby("model"):
        assert part["rank_in_model"].tolist() == [1, 2]
        assert part["held_out_error"].is_monotonic_decreasing


def test_learners_are_one_registry_and_plans_keep_their_keys():
    assert isinstance(LEARNERS, Registry) and list(LEARNERS) == ["ftpl", "ogd"]
    assert all(s.label and s.help for s in LEARNERS.values())
    assert LEARNERS["ogd"].build().loss == "logistic loss" and LEARNERS["ftpl"].build().loss == "0/1 error"
    with pytest.raises(ValueError, match="learner"):
        LexifairPlan(learner="sgd")
    saved = GroupFairnessPlan(lexifair=LexifairPlan(learner="ogd")).to_dict()
    assert saved["lexifair"]["learner"] == "ogd"
    assert plan_from_dict(saved).lexifair.learner == "ogd"


def test_each_models_bootstrap_draws_from_its_own_named_stream():
    """ERM's interval is the one its own stream gives, whatever else is fitted beside it."""
    plan = GroupFairnessPlan(seed=3, ranking=None, companion=None, lexifair=QUICK)
    data = learning_frame(plan)
    M, names = membership_matrix(data.attrs, QUICK.columns, pairs=QUICK.pairs, min_size=QUICK.min_size,
                             top_values=QUICK.top_values)
    w = np.zeros(data.y.size)
    w[data.train] = 1.0 / data.train.size
    _, erm = MergedOracle(data.X, cost_sensitive_oracle)(w * data.y, w * (1.0 - data.y))
    t = data.test
    lo, hi = bootstrap_group_errors(erm[t].astype(float), data.y[t].astype(float), M[t], QUICK.bootstrap,
                                    bootstrap_rng(3, "ERM (plain accuracy)"))
    groups = lexifair_subrun(plan).groups.query("model == 'ERM (plain accuracy)'").set_index("group")
    one_level = lexifair_subrun(plan.replace(lexifair=QUICK.replace(levels=1))).groups
    np.testing.assert_array_equal(groups.loc[names, "held_out_low"], lo)
    np.testing.assert_array_equal(groups.loc[names, "held_out_high"], hi)
    # the models both runs fit have the same numbers: adding a level moves none of them
    both = lexifair_subrun(plan).groups.merge(one_level, on=["model", "group"], suffixes=("", "_1"))
    assert set(both["model"]) == {"ERM (plain accuracy)", "minimax (level 1)"}
    for col in ("in_sample_error", "held_out_error", "held_out_low", "held_out_high"):
        np.testing.assert_array_equal(both[col], both[f"{col}_1"])


def test_a_tab_depends_only_on_its_own_plan_part():
    base = GroupFairnessPlan(lexifair=QUICK, ranking=RankingPlan(ks=(100,)), companion=None)
    lone = run_group_fairness.uncached(base.replace(ranking=None))
    both = run_group_fairness.uncached(base)
    pd.testing.assert_frame_equal(lone.lexifair.groups, both.lexifair.groups)
    # the COMPAS ranking ignores the learning data, its row cap and the seed
    other = base.replace(learning="adult", max_rows=500, seed=9)
    pd.testing.assert_frame_equal(ranking_subrun(base).measures, ranking_subrun(other).measures)
