"""Reich and Vijaykumar companion panel: equal error rates and calibration on its construction."""
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from core.fairness.companion import (CompanionPlan, corollary5, cost_ratio, equal_error_rate_scores,
                                     stage2)
from core.fairness.learning_data import compas_learning_data


@pytest.fixture(scope="module")
def compas():
    d = compas_learning_data()
    score = LogisticRegression().fit(d.X, d.y).predict_proba(d.X)[:, 1]
    return d, score


@pytest.mark.parametrize("cutoff", [0.3, 0.5, 0.6])
def test_equal_error_rates_and_calibration(compas, cutoff):
    d, score = compas
    res = equal_error_rate_scores(score, d.y, d.groups, CompanionPlan(cutoff=cutoff, bins=10))
    assert res.feasible and res.nonconstant
    after = res.rates[res.rates["stage"] == "equal error rates"].set_index("group")
    assert len(after) == 2
    assert after["fpr"].to_numpy() == pytest.approx([res.target["fpr"]] * 2, abs=1e-6)
    assert after["tpr"].to_numpy() == pytest.approx([res.target["tpr"]] * 2, abs=1e-6)
    # decisions on a calibrated score are rational: PPV >= cut-off and NPV >= 1 - cut-off
    assert (after["ppv"] >= cutoff - 1e-6).all() and (after["npv"] >= 1 - cutoff - 1e-6).all()
    # calibration within groups holds for the kernel: every output value is its inflow's mean
    for group, kernel in res.kernels.items():
        T = kernel.to_numpy()
        p = kernel.index.to_numpy(dtype=float)
        q = kernel.columns.to_numpy(dtype=float)
        rows = d.groups["race"].to_numpy() == group
        s = np.bincount(pd.qcut(score[rows], 10, labels=False, duplicates="drop")) / rows.sum()
        inflow = T.T @ s
        used = inflow > 1e-9
        assert np.allclose((T.T @ (p * s))[used] / inflow[used], q[used], atol=1e-3)
        assert np.allclose(T.sum(axis=1), 1, atol=1e-8)
    # a post-processed score per person of the two groups, none elsewhere
    both = d.groups["race"].isin(["African-American", "Caucasian"]).to_numpy()
    assert res.scores[both].notna().all() and res.scores[~both].isna().all()


def test_discrete_scores_keep_one_bin_per_value():
    from core.fairness.companion import calibrate_in_bins
    score = np.r_[np.zeros(80), np.ones(20)]
    y = np.r_[np.zeros(60), np.ones(20), np.ones(15), np.zeros(5)]
    codes, means = calibrate_in_bins(score, y, 10)
    assert means.tolist() == pytest.approx([0.25, 0.75])
    assert np.bincount(codes).tolist() == [80, 20]


def test_stage2_on_a_toy_reaches_the_rates():
    p = np.array([0.2, 0.5, 0.8])
    s = np.array([0.3, 0.4, 0.3])
    T, q = stage2(p, s, 0.5, fpr=0.25, tpr=0.6)
    flag = q >= 0.5
    mu = p @ s
    tpr = ((p * s)[:, None] * T)[:, flag].sum() / mu
    fpr = (((1 - p) * s)[:, None] * T)[:, flag].sum() / (1 - mu)
    assert tpr == pytest.approx(0.6, abs=1e-7) and fpr == pytest.approx(0.25, abs=1e-7)
    # the identity is the least contraction when the input already has those rates
    T0, q0 = stage2(p, s, 0.5, fpr=(0.5 * 0.4 + 0.2 * 0.3) / (1 - mu), tpr=(0.5 * 0.4 + 0.8 * 0.3) / mu)
    assert ((p[:, None] - q0[None, :]) ** 2 * s[:, None] * T0).sum() == pytest.approx(0, abs=1e-9)


def test_corollary5_closed_form():
    assert cost_ratio(0.5) == pytest.approx(1.0)
    assert corollary5(0.3, 0.45, 0.5)["trivial"] == "nobody flagged"     # mu_H <= cut-off
    assert corollary5(0.6, 0.7, 0.5)["trivial"] == "everybody flagged"   # mu_L >= cut-off
    c = corollary5(0.4, 0.6, 0.5)
    assert c["trivial"] is None
    b_l, b_h = 0.4 / 0.6, 0.6 / 0.4
    assert c["a1"] == pytest.approx(b_l / (b_h - b_l) * (b_h - (1 + b_h) * 0.5) / 0.5)
    assert np.isnan(corollary5(0.4, 0.4, 0.5)["a1"])


def test_constant_scores_are_infeasible_between_base_rates():
    rng = np.random.default_rng(0)
    groups = pd.DataFrame({"race": np.repeat(["A", "B"], 500), "sex": "x"})
    y = np.r_[rng.random(500) < 0.6, rng.random(500) < 0.4].astype(int)
    res = equal_error_rate_scores(np.full(1000, 0.5), y, groups,
                                  CompanionPlan(cutoff=0.5, groups=("A", "B")))
    assert not res.feasible and "Corollary 5" in res.message


@pytest.mark.parametrize("kwargs, message", [({"cutoff": 1.0}, "cut-off"), ({"bins": 1}, "bins"),
                                             ({"groups": ("A", "A")}, "two different")])
def test_bad_companion_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CompanionPlan(**kwargs)


def test_unknown_group_rejected(compas):
    d, score = compas
    with pytest.raises(ValueError, match="do not occur"):
        equal_error_rate_scores(score, d.y, d.groups, CompanionPlan(groups=("Martian", "Caucasian")))


def test_soft_tradeoff_matches_a_hand_computed_case():
    """Group L (base rate 0.3) has a perfectly informative score, so its calibratable rates are
    FPR 0 and any TPR; group H (base rate 0.4 < cut-off 0.5) has a constant score, so only
    'nobody flagged' (0, 0) is calibratable. With share w of L's loss and penalty P = lambda*I the
    objective reduces to w*0.3*(1 - t) + (1 - w)*0.4 + lambda*t^2 over L's TPR t, minimised at
    t = w*0.3 / (2 lambda): 0.075 for w = 0.5, lambda = 1, objective 0.138750 + 0.2 + 0.005625."""
    from core.fairness.companion import soft_tradeoff
    curves = {"L": np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), "H": np.array([[0.0, 0.0], [1.0, 1.0]])}
    res = soft_tradeoff(curves, {"L": 0.3, "H": 0.4}, "L", "H", 0.5, 0.5, (1.0, 1.0))
    assert res["L"]["fpr"] == pytest.approx(0.0, abs=1e-7)
    assert res["L"]["tpr"] == pytest.approx(0.075, abs=1e-6)
    assert (res["H"]["fpr"], res["H"]["tpr"]) == pytest.approx((0.0, 0.0), abs=1e-7)
    assert res["objective"] == pytest.approx(0.5 * 0.3 * 0.925 + 0.5 * 0.4 + 0.075 ** 2, abs=1e-9)
    # no penalty: L takes its own best rates (flag exactly the reoffenders); a huge one forces parity
    free = soft_tradeoff(curves, {"L": 0.3, "H": 0.4}, "L", "H", 0.5, 0.5, (0.0, 0.0))
    assert (free["L"]["fpr"], free["L"]["tpr"]) == pytest.approx((0.0, 1.0), abs=1e-6)
    tight = soft_tradeoff(curves, {"L": 0.3, "H": 0.4}, "L", "H", 0.5, 0.5, (1e5, 1e5))
    assert tight["L"]["tpr"] == pytest.approx(0.5 * 0.3 / 2e5, abs=1e-6)
    # TPR-only parity leaves FPR free but L's best FPR is 0 anyway; FPR-only leaves TPR free
    fpr_only = soft_tradeoff(curves, {"L": 0.3, "H": 0.4}, "L", "H", 0.5, 0.5, (1.0, 0.0))
    assert fpr_only["L"]["tpr"] == pytest.approx(1.0, abs=1e-6)


def test_infeasible_panel_answers_with_the_soft_tradeoff():
    """Constant scores between the base rates admit no common rates; the panel still post-processes,
    each group at its own calibratable rates: nobody flagged in the low group, everybody in the high."""
    rng = np.random.default_rng(0)
    groups = pd.DataFrame({"race": np.repeat(["A", "B"], 500), "sex": "x"})
    y = np.r_[rng.random(500) < 0.6, rng.random(500) < 0.4].astype(int)
    res = equal_error_rate_scores(np.full(1000, 0.5), y, groups, CompanionPlan(cutoff=0.5, groups=("A", "B")))
    assert not res.feasible and res.used == "soft" and "soft trade-off" in res.message
    low, high = "B", "A"                                  # B has the lower base rate
    assert (res.soft[low]["fpr"], res.soft[low]["tpr"]) == pytest.approx((0.0, 0.0), abs=1e-6)
    assert (res.soft[high]["fpr"], res.soft[high]["tpr"]) == pytest.approx((1.0, 1.0), abs=1e-6)
    after = res.rates[res.rates["stage"] == "soft trade-off"].set_index("group")
    assert after.loc[low, "fpr"] == pytest.approx(0.0, abs=1e-6) and after.loc[high, "tpr"] == pytest.approx(1.0)
    assert res.scores.notna().all() and set(res.calibration["stage"]) == {"before", "after"}


def test_soft_mode_on_request_keeps_calibration(compas):
    d, score = compas
    res = equal_error_rate_scores(score, d.y, d.groups, CompanionPlan(cutoff=0.5, mode="soft", penalty_fpr=0.0,
                                                                      penalty_tpr=0.0))
    assert res.feasible and res.used == "soft"
    after = res.rates[res.rates["stage"] == "soft trade-off"].set_index("group")
    before = res.rates[res.rates["stage"] == "calibrated score"].set_index("group")
    # without a penalty each group keeps its own loss-minimising rates: no worse than thresholding
    assert (after["loss"] <= before["loss"] + 1e-6).all()
    assert (after["ppv"] >= 0.5 - 1e-6).all() and (after["npv"] >= 0.5 - 1e-6).all()
