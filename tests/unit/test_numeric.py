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


@pytest.mark.parametrize("layout", ["equal", "ragged", "interleaved"])
def test_every_layout_gives_the_per_group_rule(layout):
    """Equal contiguous groups (a reshape), ragged contiguous groups (a padded table) and interleaved
    groups (the two-key sort) all give the reference answer, ties to the earlier element included."""
    rng = np.random.default_rng(7)
    sizes = np.full(40, 6) if layout == "equal" else rng.integers(0, 9, 40)
    gid = np.repeat(np.arange(40), sizes)
    if layout == "interleaved":
        gid = rng.permutation(gid)
    quotas = np.round(np.abs(rng.normal(3, 2, gid.size)), 1)      # rounded: many equal fractions
    totals = np.floor(np.bincount(gid, weights=quotas, minlength=40)) + rng.integers(0, 3, 40)
    values = rng.normal(0, 2, gid.size)
    caps = np.abs(rng.normal(4, 2, 40))
    rounded = largest_remainder(quotas, gid, totals)
    projected = project_to_simplex(values, gid, caps)
    for g in range(40):
        members = np.flatnonzero(gid == g)
        np.testing.assert_array_equal(rounded[members], reference_rounding(quotas[members], totals[g]))
        if members.size:
            np.testing.assert_allclose(projected[members], reference_projection(values[members], caps[g]), atol=1e-12)


def test_toydown_sorts_each_level_once_whatever_its_number_of_parents():
    """Work is counted, not timed: non-negative ToyDown takes one row sort per level below the root
    (two with integer rounding), none of them an indirect two-key sort, on a regular and a ragged tree."""
    from core.census.toydown import toydown
    from core.geography.hierarchy import Hierarchy
    from core.numeric import SORTS

    regular = Hierarchy.homogeneous([3, 4, 5, 6])
    rng = np.random.default_rng(0)
    ids = [np.repeat(np.arange(4), [1, 5, 2, 2])[rng.integers(0, 10, 500)]]
    ids += [ids[0] * 10 + rng.integers(0, 7, 500), np.arange(500)]
    ragged = Hierarchy.from_unit_ids(ids)
    for tree in (regular, ragged):
        for integer, per_level in ((False, 1), (True, 2)):
            before = dict(SORTS)
            counts = rng.poisson(20, tree.n_leaves)
            out = toydown(tree, counts, [0.5] * tree.depth, nonnegative=True, integer=integer, rng=rng)
            assert SORTS["rows"] - before["rows"] == per_level * (tree.depth - 1)
            assert SORTS["lexsort"] == before["lexsort"]
            assert out.min() >= 0
            for lvl in range(tree.depth - 1):
                np.testing.assert_allclose(tree.sum_children(out, lvl), out[tree.level_slice(lvl)], atol=1e-6)
