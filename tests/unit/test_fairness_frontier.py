"""Trade-off frontier: convex hull, monotonicity, per-pair tables, group rates, cache, progress."""
import numpy as np
import pandas as pd
import pytest

from core.datasets import compas_population
from core.fairness.frontier import (FrontierPlan, group_rates, is_cached, lower_hull,
                                    trade_off_frontier)
from core.fairness.learning_data import compas_learning_data

SMALL = FrontierPlan(gammas=(0.0, 0.2, 0.5, 1.0), T=150, oracle="ols", averaging="paper")


def random_pairs(n, k, seed):
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, k), rng.integers(0, n, k)
    keep = i != j
    return pd.DataFrame({"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                         "n_judges": 2, "agreement": 0.75})


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    import os
    os.environ["DASHBOARD_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    calls = []
    res = trade_off_frontier(random_pairs(7214, 200, 0), SMALL,
                             progress=lambda d, t, m: calls.append((d, t, m)))
    return res, calls


def test_lower_hull_closed_form():
    x = np.array([0.0, 0.1, 0.2, 0.5, 1.0, 0.6])
    y = np.array([0.45, 0.45, 0.40, 0.38, 0.32, 0.44])
    hull = lower_hull(x, y)
    assert hull.tolist() == [0, 2, 4]            # (0.1, .45) dominated, (.5, .38) above the chord
    ys = y[hull]
    assert np.all(np.diff(ys) < 0) and np.all(np.diff(x[hull]) > 0)


def test_frontier_is_monotone_and_convex(sweep):
    res, _ = sweep
    pts = res.points
    assert list(pts["gamma"]) == [0.0, 0.2, 0.5, 1.0]
    hull = pts[pts["on_hull"]].sort_values("realized_gamma")
    assert len(hull) >= 2
    assert np.all(np.diff(hull["error"].to_numpy()) <= 1e-12)
    slopes = np.diff(hull["error"]) / np.diff(hull["realized_gamma"])
    assert np.all(np.diff(slopes) >= -1e-9)                      # convex
    # every fitted point lies on or above the hull's piecewise-linear curve
    interp = np.interp(pts["realized_gamma"], hull["realized_gamma"], hull["error"])
    assert np.all(pts["error"].to_numpy() >= interp - 1e-12)
    # the fitted errors fall as the slack grows, from near the best constant to near 0.32
    assert pts["error"].iloc[0] >= pts["error"].iloc[-1] + 0.08
    assert 0.30 <= pts["error"].iloc[-1] <= 0.34
    assert res.baseline["best_constant_error"] == pytest.approx(pts["error"].iloc[0], abs=0.03)


def test_pairs_table_per_point(sweep):
    res, _ = sweep
    pairs = res.pairs
    assert set(pairs["split"]) == {"fit", "held-out"}
    per_gamma = pairs.groupby("gamma").size()
    kept, dropped = compas_learning_data().local_constraints(random_pairs(7214, 200, 0))
    assert dropped == res.baseline["dropped_pairs"] > 0         # pairs outside the paper's population
    assert (per_gamma == len(kept)).all()
    # pairs are reported by their COMPAS file rows, all inside the population
    assert set(pairs["i"]) | set(pairs["j"]) <= set(compas_population("paper"))
    assert np.allclose(pairs["gap"], np.abs(pairs["p_i"] - pairs["p_j"]))
    assert (pairs["violated"] == (pairs["gap"] > pairs["gamma"] + 0.02)).all()
    fit = pairs[pairs.split == "fit"]
    assert (fit["shadow_price"] >= 0).all()
    assert pairs.loc[pairs.split == "held-out", "shadow_price"].isna().all()
    at1 = res.points.set_index("gamma").loc[1.0]
    assert at1["violated_pairs"] == 0


def test_group_rates_and_intervals(sweep):
    res, _ = sweep
    g = res.groups[res.groups["gamma"] == 1.0]
    assert set(g["attribute"]) == {"race", "sex"}
    assert (g["fpr_low"] <= g["fpr"] + 1e-12).all() and (g["fpr"] <= g["fpr_high"] + 1e-12).all()
    # closed form: a classifier flagging everybody has FPR 1 and FNR 0 in every group
    groups = pd.DataFrame({"race": ["a", "a", "b", "b"], "sex": ["m", "f", "m", "f"]})
    rates = group_rates(np.ones(4), np.array([0, 1, 0, 1]), groups).set_index(["attribute", "group"])
    assert np.allclose(rates.loc["race", "fpr"], 1) and np.allclose(rates.loc["race", "fnr"], 0)
    assert np.isnan(rates.loc[("sex", "f"), "fpr"]) and np.isnan(rates.loc[("sex", "m"), "fnr"])
    half = group_rates(np.full(4, 0.5), np.array([0, 1, 0, 0]), groups)
    assert half.set_index("group").loc["b", "fpr"] == pytest.approx(0.5)


def test_progress_and_cache(sweep):
    res, calls = sweep
    assert calls, "progress was never reported"
    done = [c[0] for c in calls]
    assert done == sorted(done) and calls[-1][0] == calls[-1][1]
    assert is_cached(random_pairs(7214, 200, 0), SMALL)
    again = trade_off_frontier(random_pairs(7214, 200, 0), SMALL)
    pd.testing.assert_frame_equal(again.points, res.points)


def test_bad_frontier_config():
    with pytest.raises(ValueError, match="two slack"):
        FrontierPlan(gammas=(0.1,))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        FrontierPlan(gammas=(0.0, 1.5))
    for bad in (float("nan"), "x", 1e400):
        with pytest.raises(ValueError, match="gammas"):
            FrontierPlan(gammas=(0.0, bad))
    with pytest.raises(ValueError, match="population"):
        FrontierPlan(population="everyone")
    with pytest.raises(ValueError, match="Rounds"):
        FrontierPlan(T=10 ** 9)
    with pytest.raises(ValueError, match="columns i, j and weight"):
        trade_off_frontier(pd.DataFrame({"a": [1]}), SMALL)


def test_eta_sweep_traces_budget_against_error():
    """Spec R6: at gamma = 0, a larger budget eta lowers the error; the x-axis is the realised excess."""
    cons = random_pairs(7214, 150, 1)
    cfg = FrontierPlan(sweep="eta", etas=(0.0, 0.2, 2.0), T=600, oracle="ols", averaging="paper",
                         pair_holdout=0.0)
    res = trade_off_frontier(cons, cfg)
    pts = res.points.set_index("target")
    assert list(pts.index) == [0.0, 0.2, 2.0]
    assert (pts["gamma"] == 0).all() and list(pts["eta"]) == [0.0, 0.2, 2.0]
    assert np.allclose(pts["unfairness"], pts["mean_excess"])
    assert pts.loc[2.0, "error"] < pts.loc[0.0, "error"] - 0.05
    assert pts.loc[0.2, "mean_excess"] <= 0.2 + 0.05
    assert res.baseline["symbol"] == "η"
    with pytest.raises(ValueError, match="sweep"):
        FrontierPlan(sweep="delta")


def test_fpr_gap_along_the_sweep(sweep):
    from core.fairness.frontier import fpr_gap
    res, _ = sweep
    gap = fpr_gap(res.groups)
    assert list(gap["target"]) == [0.0, 0.2, 0.5, 1.0]
    g = res.groups.set_index(["target", "attribute", "group"])
    expect = g.loc[(1.0, "race", "African-American"), "fpr"] - g.loc[(1.0, "race", "Caucasian"), "fpr"]
    assert gap.iloc[-1]["fpr_gap"] == pytest.approx(expect)
    assert (gap["low"] <= gap["fpr_gap"]).all() and (gap["fpr_gap"] <= gap["high"]).all()
    assert gap.iloc[-1]["fpr_gap"] > 0.05        # the unconstrained fit flags more African-Americans wrongly


@pytest.mark.slow
def test_points_do_not_depend_on_the_other_points_or_the_warm_start():
    """Each point starts its logistic oracle from the unconstrained fit (a function of the data
    only), so a point's numbers are the same whichever sweep it belongs to, and the same as from a
    cold start: the warm start saves time only."""
    from core.fairness.learner import LearnerConfig, fit_elicited_fair, ordered_pairs, unconstrained_coefficients
    cons = random_pairs(7214, 120, 3)
    a = trade_off_frontier(cons, FrontierPlan(gammas=(0.0, 0.3, 1.0), T=60))
    b = trade_off_frontier(cons, FrontierPlan(gammas=(0.3, 0.6), T=60))
    row_a = a.points.set_index("target").loc[0.3]
    row_b = b.points.set_index("target").loc[0.3]
    for col in ("error", "error_heldout", "realized_gamma", "heldout_realized_gamma", "mean_excess"):
        assert row_a[col] == row_b[col]
    assert np.array_equal(a.p_hat[1], b.p_hat[0])
    data = compas_learning_data()
    local, _ = data.local_constraints(cons)
    pairs = ordered_pairs(local, data.n)
    config = LearnerConfig(gamma=0.2, T=40)
    warm = fit_elicited_fair(data, pairs, config, warm_start=unconstrained_coefficients(data, np.arange(data.n)))
    cold = fit_elicited_fair(data, pairs, config)
    assert np.allclose(warm.hypotheses, cold.hypotheses, atol=1e-6)
    assert np.array_equal(warm.p_hat, cold.p_hat)


def test_a_sweep_on_synthetic_constraint_people_keeps_them_out_of_error_and_rates():
    from core.fairness.private_pairs import PrivatePairsPlan, simulated_synthetic_people
    copy = simulated_synthetic_people(PrivatePairsPlan(population="paper", epsilon=2.0), np.random.default_rng(1))
    people = copy.plan
    cons = random_pairs(2000, 150, 3)
    plan = FrontierPlan(gammas=(0.0, 1.0), T=100, oracle="ols")
    res = trade_off_frontier(cons, plan, people=people, copy=copy)
    data = compas_learning_data()
    assert res.p_hat.shape == (2, data.n) and res.baseline["n_individuals"] == data.n
    assert res.baseline["n_constraint_people"] == 2000 and res.baseline["dropped_pairs"] == 0
    assert "sampling assumption" in res.baseline["people_note"]
    pts = res.points.set_index("target")
    assert pts.loc[0.0, "unfairness"] < pts.loc[1.0, "unfairness"]
    # Rows are the copy's positions, and the pair's probabilities are the synthetic people's.
    assert res.pairs["i"].max() < 2000
    # A synthetic sweep is cached apart from a real-rows sweep on the same numbers.
    assert is_cached(cons, plan, people, copy) and not is_cached(cons, plan)
    with pytest.raises(ValueError, match="positions of the synthetic people"):
        trade_off_frontier(random_pairs(2000, 5, 1).assign(j=2000), plan, people=people, copy=copy)
    with pytest.raises(ValueError, match="PrivatePairsPlan"):
        trade_off_frontier(cons, plan, people="copy")
