"""ToyDown and TopDown-lite: consistency, non-negativity, integrality, invariants."""
import numpy as np
import pytest

from core.census.analytic import district_error_from_noise
from core.census.consistency import project_to_simplex, round_keeping_sums
from core.geography.hierarchy import Hierarchy
from core.census.toydown import (Histogram, consistent_top_down, detailed_histogram, draw_node_noise,
                                 topdown_lite, total_histogram, toydown)


def _random_tree(rng, levels=3):
    """A non-homogeneous tree from random nested ids."""
    n = 400
    ids = [rng.integers(0, 4, n)]
    for _ in range(levels - 1):
        ids.append(ids[-1] * 10 + rng.integers(0, 3 + len(ids), n))
    ids.append(np.arange(n))
    return Hierarchy.from_unit_ids(ids)


def _assert_consistent(h, alpha):
    for lvl in range(h.depth - 1):
        np.testing.assert_allclose(h.sum_children(alpha, lvl), alpha[h.level_slice(lvl)], atol=1e-8)


def test_simplex_projection_small_cases():
    out = project_to_simplex(np.array([3.0, 1.0, -1.0, 0.5, 0.5]), np.array([0, 3]), np.array([2.0, 0.0]))
    np.testing.assert_allclose(out, [2.0, 0.0, 0.0, 0.0, 0.0])
    out = project_to_simplex(np.array([1.0, 2.0]), np.array([0]), np.array([5.0]))
    np.testing.assert_allclose(out, [2.0, 3.0])


def test_simplex_projection_is_closest_point():
    rng = np.random.default_rng(1)
    u = rng.normal(size=6) * 3
    x = project_to_simplex(u, np.array([0]), np.array([4.0]))
    for _ in range(500):  # no random feasible point is closer
        y = rng.dirichlet(np.ones(6)) * 4
        assert np.sum((y - u) ** 2) >= np.sum((x - u) ** 2) - 1e-12


def test_rounding_keeps_sums_and_moves_less_than_one():
    rng = np.random.default_rng(2)
    vals = rng.uniform(0, 10, 30)
    starts = np.array([0, 7, 20])
    totals = np.rint(np.add.reduceat(vals, starts)) 
    vals = vals + np.repeat((totals - np.add.reduceat(vals, starts)) / np.diff(np.append(starts, 30)),
                            np.diff(np.append(starts, 30)))
    out = round_keeping_sums(vals, starts, totals)
    assert np.array_equal(np.add.reduceat(out, starts), totals.astype(int))
    assert np.all(np.abs(out - vals) < 1)


@pytest.mark.parametrize("nonneg,integer", [(False, False), (True, False), (True, True), (False, True)])
def test_toydown_consistent_on_random_tree(nonneg, integer):
    rng = np.random.default_rng(3)
    h = _random_tree(rng)
    counts = rng.poisson(3, (h.n_leaves, 2))
    alpha = toydown(h, counts, [0.5] * h.depth, nonnegative=nonneg, integer=integer, rng=rng)
    assert alpha.shape == (h.n_nodes, 2)
    _assert_consistent(h, alpha)
    if nonneg:
        assert alpha.min() >= 0
    if integer:
        assert alpha.dtype == np.int64


def test_toydown_leaf_errors_equal_theorem2_for_same_draws():
    rng = np.random.default_rng(4)
    h = _random_tree(rng)
    counts = h.aggregate(rng.poisson(20, h.n_leaves)).astype(float)
    noise = draw_node_noise(h, [0.2, 0.3, 0.4, 0.6, 1.0], rng=rng)
    alpha = consistent_top_down(h, counts + noise)
    err_leaf = (alpha - counts)[h.leaf_nodes]
    masks = rng.random((h.n_leaves, 5)) < 0.3
    for j in range(5):
        simulated = err_leaf[masks[:, j]].sum()
        closed = district_error_from_noise(h, masks[:, j], noise)
        assert abs(simulated - closed) < 1e-9 * max(1.0, abs(simulated))


def test_multi_attribute_equals_independent_single_runs():
    rng = np.random.default_rng(5)
    h = Hierarchy.homogeneous([3, 4])
    counts = rng.poisson(10, (12, 3))
    noise = draw_node_noise(h, [1, 1, 1], n_attributes=3, rng=rng)
    joint = consistent_top_down(h, h.aggregate(counts) + noise)
    for t in range(3):
        single = consistent_top_down(h, h.aggregate(counts[:, t]) + noise[:, t])
        np.testing.assert_allclose(joint[:, t], single)


def test_toydown_needs_rng_and_matching_budgets():
    h = Hierarchy.homogeneous([2])
    with pytest.raises(ValueError, match="rng"):
        toydown(h, [1, 2], [1, 1])
    with pytest.raises(ValueError, match="one budget per level"):
        toydown(h, [1, 2], [1], rng=np.random.default_rng(0))


def test_topdown_lite_invariants_nonneg_integer_consistent():
    rng = np.random.default_rng(6)
    h = _random_tree(rng)
    counts = rng.poisson(2, (h.n_leaves, 4))
    hists = [detailed_histogram(4), total_histogram(4), Histogram("pairs", (0, 0, 1, 1))]
    alpha = topdown_lite(h, counts, [0.3] * h.depth, hists, shares=(0.2, 0.5, 0.3), rng=rng)
    assert alpha.dtype == np.int64 and alpha.min() >= 0
    _assert_consistent(h, alpha)
    assert alpha[0].sum() == counts.sum()          # root total invariant
    exact = topdown_lite(h, counts, [0.3] * h.depth, exact_level=1, weights="inverse_variance",
                         mechanism="laplace", rng=rng)
    true = h.aggregate(counts)
    assert np.array_equal(exact[: h.level_offsets[2]], true[: h.level_offsets[2]])
    _assert_consistent(h, exact)


def test_topdown_lite_rejects_unidentified_histograms():
    h = Hierarchy.homogeneous([2])
    with pytest.raises(ValueError, match="detailed"):
        topdown_lite(h, np.ones((2, 3), int), [1, 1], [total_histogram(3)], rng=np.random.default_rng(0))
