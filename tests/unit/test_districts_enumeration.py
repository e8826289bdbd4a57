"""Exact plan enumeration against the spec's grid oracles and a brute-force check."""
import itertools

import numpy as np
import pytest

from core.districts.enumeration import enumerate_plans, grid_edges
from core.geography.grid import synthetic_grid
from core.districts.generators import ExactParams, draw_exact


def _cuts(plans, edges):
    return (plans[:, edges[:, 0]] != plans[:, edges[:, 1]]).sum(axis=1)


def test_four_by_four_into_four_has_117_plans_with_the_known_cut_histogram():
    e = grid_edges(4, 4)
    plans = enumerate_plans(16, e, 4)
    assert len(plans) == 117
    cuts, counts = np.unique(_cuts(plans, e), return_counts=True)
    assert dict(zip(cuts.tolist(), counts.tolist())) == {8: 1, 10: 14, 11: 24, 12: 78}


def test_five_by_five_into_five_has_4006_plans_and_170_with_the_minimum_cut():
    e = grid_edges(5, 5)
    plans = enumerate_plans(25, e, 5)
    assert len(plans) == 4006
    cuts = _cuts(plans, e)
    assert cuts.min() == 16 and (cuts == 16).sum() == 170
    assert len({tuple(p) for p in plans}) == 4006          # no partition listed twice


def test_matches_brute_force_on_a_weighted_three_by_three():
    rng = np.random.default_rng(3)
    w = rng.integers(1, 6, 9).astype(float)
    e = grid_edges(3, 3)
    low, high = 0.8 * w.sum() / 3, 1.2 * w.sum() / 3
    found = {tuple(p) for p in enumerate_plans(9, e, 3, w, low, high)}
    nbrs = {i: set() for i in range(9)}
    for a, b in e:
        nbrs[a].add(b), nbrs[b].add(a)

    def connected(units):
        units, seen, stack = set(units), set(), [min(units)]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack += [x for x in nbrs[v] if x in units]
        return seen == units

    brute = set()
    for labels in itertools.product(range(3), repeat=9):
        parts = [[i for i in range(9) if labels[i] == d] for d in range(3)]
        if not all(parts) or [p[0] for p in parts] != sorted(p[0] for p in parts):
            continue                                   # canonical labels: districts ordered by lowest unit
        if all(connected(p) and low <= w[p].sum() <= high for p in parts):
            brute.add(labels)
    assert found == brute and len(found) > 0


def test_limits_and_bad_input():
    with pytest.raises(ValueError, match="too large to enumerate"):
        enumerate_plans(25, grid_edges(5, 5), 5, limit=100)
    with pytest.raises(ValueError, match="k must lie"):
        enumerate_plans(4, grid_edges(2, 2), 5)
    assert len(enumerate_plans(4, grid_edges(2, 2), 2, np.array([1.0, 1.0, 1.0, 5.0]))) == 0


def test_exact_generator_on_the_small_grid():
    geo = synthetic_grid((16, 4, 16), seed=0)
    plans = draw_exact(ExactParams("tract", 20.0), geo, 4, 0)
    pop = geo.blocks["total"].to_numpy()
    ideal = pop.sum() / 4
    sizes = np.stack([np.bincount(p, weights=pop, minlength=4) for p in plans])
    assert len(plans) > 10 and (np.abs(sizes / ideal - 1) <= 0.2 + 1e-9).all()
    assert len({tuple(p) for p in plans}) == len(plans)
    with pytest.raises(ValueError, match="raise the tolerance"):
        draw_exact(ExactParams("tract", 0.5), geo, 4, 0)
    with pytest.raises(ValueError, match="at most 40 units"):
        draw_exact(ExactParams("block group", 20.0), geo, 4, 0)
