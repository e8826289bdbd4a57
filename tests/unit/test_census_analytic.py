"""Closed-form district error, fragmentation and the best split (spec section 7 fixtures)."""
import numpy as np
import pytest
from scipy import stats

from core.census.analytic import (PRESETS, district_variance, district_variances, district_weights,
                                  fragmentation, leaf_variance_homogeneous, level_coefficients,
                                  level_node_variance, preset_shares, split_for_coefficients,
                                  split_objective, unit_coefficients)
from core.census.targets import Target, optimal_split, target_coefficients
from core.geography.hierarchy import Hierarchy
from core.privacy.mechanisms import get_mechanism
from core.census.toydown import consistent_top_down, draw_node_noise


def test_corollary4_optimum_and_splits():
    h = Hierarchy.homogeneous([10, 10])
    a = target_coefficients(h, Target("leaf"))
    best = optimal_split(h, 1.0, Target("leaf"))
    np.testing.assert_allclose(best, [0.03805, 0.17051, 0.79144], atol=1e-5)
    assert split_objective(a, best) == pytest.approx(14.5237, abs=1e-4)
    assert leaf_variance_homogeneous([10, 10], best) == pytest.approx(14.5237, abs=1e-4)
    assert split_objective(a, [1 / 3] * 3) == pytest.approx(65.5, abs=0.05)
    assert split_objective(a, [0.25, 0.25, 0.5]) == pytest.approx(30.0, abs=0.05)


def test_greedy_fragmentation_dallas_like():
    h = Hierarchy.homogeneous([484, 4, 25])
    mask = np.zeros(h.n_leaves, bool)
    mask[:h.n_leaves // 4] = True   # a Greedy district: 121 whole tracts
    assert fragmentation(h, mask) == pytest.approx(90.75, abs=1e-9)
    assert fragmentation(h, mask) <= 98  # Theorem 6 bound for Greedy


def test_whole_unit_sd_texas_like_illustration():
    # spec section 1.8: fan-outs (51, 254, 21, 3, 26), nation epsilon 9, five lower levels share 1
    fan = [51, 254, 21, 3, 26]
    # the illustration used Table 1's printed decimals (.083, .167), not exact twelfths
    rows = {(.2, .2, .2, .2, .2): [14.0, 14.1, 13.8, 12.4, 13.9],
            (.083, .083, .083, .25, .5): [33.7, 34.0, 33.3, 14.4, 5.6],
            (.083, .167, .5, .167, .083): [33.7, 16.9, 5.6, 14.0, 33.4]}
    for shares, expected in rows.items():
        eps = np.concatenate([[9.0], shares])
        sds = [np.sqrt(leaf_variance_homogeneous(fan[:m], eps[:m + 1])) for m in range(1, 6)]
        np.testing.assert_allclose(sds, expected, atol=0.06)


def test_unit_coefficients_match_corollary4_on_small_tree():
    h = Hierarchy.homogeneous([3, 4, 5])
    eps = np.array([0.3, 0.2, 0.4, 0.6])
    v = level_node_variance(eps)
    for m in range(1, 4):
        a = unit_coefficients(h, m)
        np.testing.assert_allclose(v @ a, leaf_variance_homogeneous([3, 4, 5][:m], eps[:m + 1]))


def test_weights_are_unweighted_child_means():
    h = Hierarchy.from_unit_ids([np.array(["a", "a", "a", "b"]), np.arange(4)])
    w = district_weights(h, np.array([1, 0, 0, 1]))
    np.testing.assert_allclose(w[:3], [(1 / 3 + 1) / 2, 1 / 3, 1.0])


def _random_tree(rng):
    n = 300
    top = rng.integers(0, 3, n)
    mid = top * 10 + rng.integers(0, 4, n)
    low = mid * 10 + rng.integers(0, 5, n)
    return Hierarchy.from_unit_ids([top, mid, low, np.arange(n)])


def test_many_districts_match_one_at_a_time():
    rng = np.random.default_rng(0)
    h = _random_tree(rng)
    labels = rng.integers(-1, 6, h.n_leaves)
    eps = [0.2, 0.3, 0.5, 0.4, 0.9]
    many = district_variances(h, labels, eps, mechanism="geometric")
    one = [district_variance(h, labels == j, eps, mechanism="geometric") for j in range(6)]
    np.testing.assert_allclose(many, one, rtol=1e-10)
    masks = np.stack([labels == j for j in range(6)], axis=1)
    np.testing.assert_allclose(district_variance(h, masks, eps, mechanism="geometric"), one, rtol=1e-10)


def test_monte_carlo_variance_within_interval_on_random_trees():
    rng = np.random.default_rng(7)
    runs = 3000
    for trial in range(2):
        h = _random_tree(rng)
        eps = rng.uniform(0.2, 1.0, h.depth)
        masks = rng.random((h.n_leaves, 3)) < rng.uniform(0.05, 0.5, 3)
        analytic = district_variance(h, masks, eps)
        errs = np.empty((runs, 3))
        for r in range(runs):
            noise = draw_node_noise(h, eps, rng=rng)
            alpha = consistent_top_down(h, noise)      # true counts zero: alpha is the error
            errs[r] = alpha[h.leaf_nodes] @ masks
        emp = errs.var(axis=0, ddof=1)
        lo = emp * (runs - 1) / stats.chi2.ppf(0.9995, runs - 1)
        hi = emp * (runs - 1) / stats.chi2.ppf(0.0005, runs - 1)
        # Laplace sums have slightly heavier tails than normal; the wide level keeps the check honest
        assert np.all((analytic > lo * 0.97) & (analytic < hi * 1.03)), (analytic, emp)


def test_optimal_split_beats_every_preset_on_its_own_target():
    rng = np.random.default_rng(3)
    h = Hierarchy.homogeneous([6, 5, 4, 8])
    targets = [Target("leaf"), Target("unit", 2), Target("unit", 1),
               Target("plan", labels=tuple(rng.integers(0, 4, h.n_leaves)))]
    for unit, mech, sens in (("epsilon", "laplace", 2.0), ("rho", "gaussian", 1.4)):
        for t in targets:
            a = target_coefficients(h, t)
            best = optimal_split(h, 2.0, t, mech, sens)
            assert get_mechanism(mech).unit == unit
            assert best.sum() == pytest.approx(2.0)
            for name in PRESETS:
                preset = 2.0 * preset_shares(name, h.depth)
                assert split_objective(a, best, mech, sens) <= split_objective(a, preset, mech, sens) + 1e-9


def test_square_root_rule_under_rho_and_floor():
    a = np.array([1.0, 4.0, 16.0])
    np.testing.assert_allclose(split_for_coefficients(a, 7.0, "rho"), [1.0, 2.0, 4.0])
    np.testing.assert_allclose(split_for_coefficients(np.array([1.0, 8.0, 27.0]), 6.0, "epsilon"), [1, 2, 3])
    floored = split_for_coefficients(np.array([0.0, 1.0, 1.0]), 1.0, "epsilon", min_share=0.05)
    assert floored.sum() == pytest.approx(1.0) and floored[0] == pytest.approx(0.05)


def test_leaf_target_is_mean_over_leaves():
    rng = np.random.default_rng(1)
    h = _random_tree(rng)
    all_leaves = level_coefficients(h, leaf_labels=np.arange(h.n_leaves)).mean(axis=1)
    np.testing.assert_allclose(target_coefficients(h, Target("leaf")), all_leaves)
