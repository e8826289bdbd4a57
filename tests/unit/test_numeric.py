"""Shared numeric blocks: largest-remainder rounding and simplex projection, checked against a
plain per-group reference and against the properties the areas rely on."""
from __future__ import annotations

import numpy as np
import pytest

from core.numeric import largest_remainder, project_to_simplex


def reference_rounding(quotas, total):
    base = np.floor(quotas)
    short = int(round(total - base.sum()))
    order = sorted(range(len(quotas)), key=lambda i: (-(quotas[i] - base[i]), i))
    out = base.astype(np.int64)
    for i in order[:max(0, min(short, len(quotas)))]:
        out[i] += 1
    return out


def reference_projection(v, total):
    if total <= 0:
        return np.zeros_like(v)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    r = max(i + 1 for i in range(len(u)) if u[i] - css[i] / (i + 1) > 0)
    return np.maximum(v - css[r - 1] / r, 0.0)


@pytest.mark.parametrize("seed", range(5))
def test_rounding_matches_the_per_group_rule_and_keeps_sums(seed):
    rng = np.random.default_rng(seed)
    groups = np.sort(rng.integers(0, 7, 200))
    totals = rng.integers(0, 500, 7)
    weights = rng.random(200)
    sums = np.bincount(groups, weights=weights, minlength=7)
    quotas = weights / sums[groups] * totals[groups]
    out = largest_remainder(quotas, groups, totals)
    assert out.dtype == np.int64 and (out >= 0).all()
    assert np.array_equal(np.bincount(groups, weights=out, minlength=7), totals)
    for g in range(7):
        assert np.array_equal(out[groups == g], reference_rounding(quotas[groups == g], totals[g]))


def test_rounding_ties_go_to_the_earlier_element_and_groups_may_interleave():
    assert largest_remainder(np.array([0.5, 0.5, 0.5, 0.5]), np.zeros(4, int), np.array([2])).tolist() == [1, 1, 0, 0]
    out = largest_remainder(np.array([1.5, 2.5, 0.5, 0.5]), np.array([1, 0, 1, 0]), np.array([3, 2]))
    assert out.tolist() == [2, 3, 0, 0]   # group 0 (2.5, 0.5) -> 3; group 1 (1.5, 0.5) -> 2


@pytest.mark.parametrize("seed", range(5))
def test_projection_matches_the_sort_rule(seed):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(6), rng.integers(1, 30, 6))
    values = rng.normal(3, 5, groups.size)
    totals = np.append(rng.uniform(0, 50, 5), 0.0)
    out = project_to_simplex(values, groups, totals)
    assert (out >= 0).all()
    assert np.allclose(np.bincount(groups, weights=out, minlength=6), totals)
    for g in range(6):
        assert np.allclose(out[groups == g], reference_projection(values[groups == g], totals[g]))


def test_projection_refuses_negative_totals_and_accepts_empty_input():
    with pytest.raises(ValueError, match="non-negative"):
        project_to_simplex(np.ones(2), np.zeros(2, int), np.array([-1.0]))
    assert project_to_simplex(np.zeros(0), np.zeros(0, int), np.zeros(0)).shape == (0,)
