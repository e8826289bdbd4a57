"""Exact W1 and KS against scipy and closed forms, one split or many at once."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import hypergeom, ks_2samp, wasserstein_distance

from core.coherence.wasserstein import subgroup_distances, wasserstein1

scores = st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(scores, scores)
def test_w1_matches_scipy(u, v):
    assert wasserstein1(u, v) == pytest.approx(wasserstein_distance(u, v), abs=1e-12)


def test_w1_closed_forms():
    rng = np.random.default_rng(0)
    u, v = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)
    # equal sizes: mean absolute difference of the sorted samples
    assert wasserstein1(u, v) == pytest.approx(np.mean(np.abs(np.sort(u) - np.sort(v))), abs=1e-12)
    # +-1 scores: W1 = 2 |share of +1 on one side - share on the other|
    a = np.r_[np.ones(30), -np.ones(70)]
    b = np.r_[np.ones(10), -np.ones(40)]
    assert wasserstein1(a, b) == pytest.approx(2 * abs(0.3 - 0.2), abs=1e-12)
    assert wasserstein1([-1.0], [1.0]) == pytest.approx(2.0)
    assert wasserstein1(u, u) == 0.0
    assert np.isnan(wasserstein1([], [0.5]))


def test_subgroup_distances_match_scipy_per_group_and_split():
    rng = np.random.default_rng(1)
    n = 3000
    s = np.round(rng.uniform(-1, 1, n), 2)            # ties on purpose
    members = rng.random((n, 6)) < np.linspace(0.05, 0.9, 6)
    halves = np.zeros((3, n), bool)
    for j in range(3):
        halves[j, rng.choice(n, n // 2, replace=False)] = True
    w1, ks, p, q = subgroup_distances(s, halves, members)
    assert w1.shape == (3, 6)
    for j in range(3):
        for g in range(6):
            a, b = s[halves[j] & members[:, g]], s[~halves[j] & members[:, g]]
            assert w1[j, g] == pytest.approx(wasserstein_distance(a, b), abs=1e-12)
            assert ks[j, g] == pytest.approx(ks_2samp(a, b).statistic, abs=1e-12)
            assert (p[j, g], q[j, g]) == (a.size, b.size)


def test_empty_side_gives_nan():
    s = np.array([0.1, 0.2, 0.3, 0.4])
    half = np.array([True, True, False, False])
    members = np.array([[True, True], [True, False], [False, True], [False, False]])
    w1, ks, p, q = subgroup_distances(s, half, members)
    assert np.isnan(w1[0]) and np.isnan(ks[0]) and (p[0], q[0]) == (2, 0)
    assert w1[1] == pytest.approx(0.2)


def test_binary_universe_invariant_and_exact_rate():
    """Spec T2: with h(0) = -1, h(1) = +1, W1 = 4|2K - k|/n for K ones in the released half."""
    n, k = 1000, 300
    x = np.r_[np.ones(k, bool), np.zeros(n - k, bool)]
    h = np.where(x, 1.0, -1.0)
    rng = np.random.default_rng(2)
    S = 3000
    halves = np.zeros((S, n), bool)
    idx = np.argsort(rng.random((S, n)), axis=1)[:, : n // 2]
    np.put_along_axis(halves, idx, True, axis=1)
    w1, _, _, _ = subgroup_distances(h, halves, np.ones((n, 1), bool))
    K = halves[:, :k].sum(axis=1)
    np.testing.assert_allclose(w1[:, 0], 4 * np.abs(2 * K - k) / n, atol=1e-12)
    # exact P(W1 > 0.1) from the hypergeometric law: 0.084408 (spec table)
    kk = np.arange(0, k + 1)
    exact = hypergeom(n, k, n // 2).pmf(kk)[4 * np.abs(2 * kk - k) / n > 0.1 + 1e-9].sum()
    assert exact == pytest.approx(0.084408, abs=1e-6)
    rate = np.mean(w1[:, 0] > 0.1 + 1e-9)
    assert abs(rate - exact) < 4 * np.sqrt(exact * (1 - exact) / S)


def test_cell_distances_equal_person_level_distances():
    """Scores that depend on the lens cell only: the per-cell path gives the same W1, KS, p, q."""
    from core.coherence.wasserstein import cell_distances, member_pairs
    rng = np.random.default_rng(4)
    n, U = 5000, 300
    cell = rng.integers(0, U, n)
    u = np.round(rng.uniform(-1, 1, U), 1)             # ties between cells on purpose
    members = np.column_stack([np.ones(n, bool), rng.random(n) < 0.1, np.zeros(n, bool), rng.random(n) < 0.002])
    halves = np.zeros((2, n), bool)
    for j in range(2):
        halves[j, rng.choice(n, n // 2, replace=False)] = True
    want = subgroup_distances(u[cell], halves, members)
    got = cell_distances(u, cell, halves, members, member_pairs(cell, members))
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, atol=1e-12, equal_nan=True)
    assert np.isnan(got[0][:, 2]).all()
