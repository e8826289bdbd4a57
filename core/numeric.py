"""Small numeric building blocks shared by several areas, each vectorised over groups.

Groups are given as one integer id per element (``groups``), so one call handles every parent of
a hierarchy level, every stratum, or a single vector (all ids 0).
"""
from __future__ import annotations

import numpy as np

__all__ = ["largest_remainder", "project_to_simplex"]


def _group_order(keys: np.ndarray, groups: np.ndarray, n_groups: int):
    """Positions sorted by group, then by descending key (ties keep their input order), with each
    element's rank inside its group and its group id in that order."""
    order = np.lexsort((-keys, groups))
    g = groups[order]
    first = np.searchsorted(g, np.arange(n_groups))
    rank = np.arange(order.shape[0]) - first[g]
    return order, g, first, rank


def largest_remainder(quotas: np.ndarray, groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Whole numbers close to ``quotas`` whose sum in each group is ``totals[group]`` (Hamilton's method).

    Every quota is floored, then the group's shortfall (clipped to 0..group size) goes one unit at a
    time to its elements with the largest fractional parts; equal fractions go to the earlier
    element. Callers rescale their values so each group's quotas sum to its total first.
    """
    q = np.asarray(quotas, dtype=float)
    gid = np.asarray(groups, dtype=np.int64)
    tot = np.asarray(totals, dtype=float)
    n_groups = tot.shape[0]
    base = np.floor(q)
    short = np.rint(tot - np.bincount(gid, weights=base, minlength=n_groups)).astype(np.int64)
    short = np.clip(short, 0, np.bincount(gid, minlength=n_groups))
    order, g, _, rank = _group_order(q - base, gid, n_groups)
    bump = np.zeros(q.shape[0], dtype=np.int64)
    bump[order] = rank < short[g]
    return base.astype(np.int64) + bump


def project_to_simplex(values: np.ndarray, groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Euclidean projection of each group onto {x >= 0, sum x = totals[group]}.

    The sort-based rule of Duchi et al. (2008): with u the group's values in descending order,
    theta = (u_1 + ... + u_r - total) / r for the largest r with u_r > theta, and x = max(v - theta, 0).
    A group with total 0 projects to zeros; a negative total raises ValueError.
    """
    v = np.asarray(values, dtype=float)
    gid = np.asarray(groups, dtype=np.int64)
    tot = np.asarray(totals, dtype=float)
    if np.any(tot < -1e-9):
        raise ValueError("Totals must be non-negative to project onto the simplex.")
    tot = np.maximum(tot, 0.0)
    if v.size == 0:
        return v.copy()
    n_groups = tot.shape[0]
    order, g, first, rank = _group_order(v, gid, n_groups)
    u = v[order]
    csum = np.cumsum(u)
    within = csum - np.concatenate([[0.0], csum])[first][g]
    ok = u - (within - tot[g]) / (rank + 1) > 0
    # the ranks that qualify form a prefix of each group, so their count is the largest one
    r = np.bincount(g, weights=ok, minlength=n_groups).astype(np.int64)
    last = first + np.maximum(r, 1) - 1
    theta = np.where(r > 0, (within[np.minimum(last, len(u) - 1)] - tot) / np.maximum(r, 1), np.inf)
    out = np.maximum(v - theta[gid], 0.0)
    out[np.isinf(theta[gid])] = 0.0
    return out
