"""Small numeric building blocks shared by several areas, each vectorised over groups.

Groups are given as one integer id per element (``groups``), so one call handles every parent of
a hierarchy level, every stratum, or a single vector (all ids 0). Where the groups sit next to each
other (a hierarchy level: children of one parent are contiguous), they are laid out as the rows of
one table, padded to the largest group, and every step works along the rows: one single-key
``np.sort`` per call and no index arrays per element. A level whose parents all have the same
number of children is that table already (a reshape, no copy).
"""
from __future__ import annotations

import numpy as np

__all__ = ["largest_remainder", "project_to_simplex", "largest_remainder_rows", "simplex_rows", "SORTS"]

SORTS = {"rows": 0, "lexsort": 0}
"""How many sorts each layout took (tests read it: one sort per call, whatever the number of groups)."""


def _sort_desc(table: np.ndarray) -> np.ndarray:
    """Each row in descending order (a new array)."""
    SORTS["rows"] += 1
    out = np.negative(table)
    out.sort(axis=1)
    np.negative(out, out=out)
    return out


def simplex_rows(table: np.ndarray, totals: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Euclidean projection of every row of ``table`` onto {x >= 0, sum x = totals[row]}; with ``valid``
    (a mask of the same shape) only the marked cells of a row take part and the others come back 0.

    The sort rule of Duchi et al. (2008): with u the row in descending order and
    c_r = (u_1 + ... + u_r - total) / r, theta = c_r for the largest r with u_r > c_r, and
    x = max(v - theta, 0). A row with total 0 projects to zeros.
    """
    v = np.asarray(table, dtype=float)
    tot = np.maximum(np.asarray(totals, dtype=float), 0.0)
    n_rows, width = v.shape
    u = _sort_desc(v if valid is None else np.where(valid, v, -np.inf))
    if valid is not None:
        u[np.isneginf(u)] = 0.0          # padding sorts last; it never qualifies below
    c = np.cumsum(u, axis=1)
    c -= tot[:, None]
    c /= np.arange(1, width + 1, dtype=float)
    ok = u > c
    if valid is not None:
        ok &= np.arange(width) < valid.sum(axis=1)[:, None]
    del u
    # the ranks that qualify form a prefix of each row, so their count is the largest one
    r = ok.sum(axis=1)
    del ok
    theta = np.where(r > 0, c[np.arange(n_rows), np.maximum(r, 1) - 1], np.inf)
    out = np.subtract(v, theta[:, None], out=c)     # c is spent: reuse its memory
    np.maximum(out, 0.0, out=out)
    out[np.isinf(theta)] = 0.0
    if valid is not None:
        out[~valid] = 0.0
    return out


def largest_remainder_rows(table: np.ndarray, totals: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Whole numbers close to each row of ``table`` whose row sums are ``totals`` (Hamilton's method).

    Every quota is floored; the row's shortfall s (clipped to 0..row size) goes one unit each to the
    s largest fractional parts, equal fractions to the earlier cell: every fraction above the row's
    s-th largest fraction t gets a unit, then the earliest fractions equal to t until s are given.
    Cells outside ``valid`` stay 0. Callers rescale rows so their quotas sum to their totals first.
    """
    q = np.asarray(table, dtype=float)
    tot = np.asarray(totals, dtype=float)
    n_rows, width = q.shape
    base = np.floor(q)
    frac = q - base
    if valid is not None:
        base[~valid] = 0.0
        frac[~valid] = -1.0               # below every real fraction: never a threshold, never bumped
    size = np.full(n_rows, width) if valid is None else valid.sum(axis=1)
    short = np.clip(np.rint(tot - base.sum(axis=1)).astype(np.int64), 0, size)
    ordered = _sort_desc(frac)
    threshold = np.where(short > 0, ordered[np.arange(n_rows), np.maximum(short, 1) - 1], np.inf)
    del ordered
    above = frac > threshold[:, None]
    tied = frac == threshold[:, None]
    still = short - above.sum(axis=1)
    tie_rank = np.cumsum(tied, axis=1) - tied
    bump = above | (tied & (tie_rank < still[:, None]))
    return base.astype(np.int64) + bump


def _as_rows(values: np.ndarray, groups: np.ndarray, n_groups: int):
    """``values`` as a table with one row per group (plus the mask of real cells and the cells'
    positions), or None when the groups are not contiguous or too uneven to pad cheaply."""
    n = values.shape[0]
    if n > 1 and not bool(np.all(groups[1:] >= groups[:-1])):
        return None
    sizes = np.bincount(groups, minlength=n_groups)
    width = int(sizes.max()) if n_groups else 0
    if width and n == n_groups * width:
        return values.reshape(n_groups, width), None, None
    if n_groups * width > 2 * n + 1024:
        return None
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.arange(n) - first[groups]
    valid = np.zeros((n_groups, width), dtype=bool)
    valid[groups, rank] = True
    table = np.zeros((n_groups, width), dtype=values.dtype)
    table[groups, rank] = values
    return table, valid, (groups, rank)


def _group_order(keys: np.ndarray, groups: np.ndarray, n_groups: int):
    """Any layout: positions sorted by group, then by descending key (ties keep their input order),
    with each element's rank inside its group and its group id in that order."""
    SORTS["lexsort"] += 1
    order = np.lexsort((-keys, groups))
    g = groups[order]
    first = np.searchsorted(g, np.arange(n_groups))
    rank = np.arange(order.shape[0]) - first[g]
    return order, g, first, rank


def largest_remainder(quotas: np.ndarray, groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Whole numbers close to ``quotas`` whose sum in each group is ``totals[group]``: Hamilton's
    method per group (see :func:`largest_remainder_rows`)."""
    q = np.asarray(quotas, dtype=float)
    gid = np.asarray(groups, dtype=np.int64)
    tot = np.asarray(totals, dtype=float)
    n_groups = tot.shape[0]
    if q.size == 0:
        return np.zeros(0, dtype=np.int64)
    rows = _as_rows(q, gid, n_groups)
    if rows is not None:
        table, valid, cells = rows
        out = largest_remainder_rows(table, tot, valid)
        return out.reshape(-1) if cells is None else out[cells]
    base = np.floor(q)
    short = np.rint(tot - np.bincount(gid, weights=base, minlength=n_groups)).astype(np.int64)
    short = np.clip(short, 0, np.bincount(gid, minlength=n_groups))
    order, g, _, rank = _group_order(q - base, gid, n_groups)
    bump = np.zeros(q.shape[0], dtype=np.int64)
    bump[order] = rank < short[g]
    return base.astype(np.int64) + bump


def project_to_simplex(values: np.ndarray, groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Euclidean projection of each group onto {x >= 0, sum x = totals[group]} (Duchi et al. 2008, see
    :func:`simplex_rows`). A group with total 0 projects to zeros; a negative total raises ValueError."""
    v = np.asarray(values, dtype=float)
    gid = np.asarray(groups, dtype=np.int64)
    tot = np.asarray(totals, dtype=float)
    if np.any(tot < -1e-9):
        raise ValueError("Totals must be non-negative to project onto the simplex.")
    tot = np.maximum(tot, 0.0)
    if v.size == 0:
        return v.copy()
    n_groups = tot.shape[0]
    rows = _as_rows(v, gid, n_groups)
    if rows is not None:
        table, valid, cells = rows
        out = simplex_rows(table, tot, valid)
        return out.reshape(-1) if cells is None else out[cells]
    order, g, first, rank = _group_order(v, gid, n_groups)
    u = v[order]
    csum = np.cumsum(u)
    within = csum - np.concatenate([[0.0], csum])[first][g]
    ok = u - (within - tot[g]) / (rank + 1) > 0
    r = np.bincount(g, weights=ok, minlength=n_groups).astype(np.int64)
    last = first + np.maximum(r, 1) - 1
    theta = np.where(r > 0, (within[np.minimum(last, len(u) - 1)] - tot) / np.maximum(r, 1), np.inf)
    out = np.maximum(v - theta[gid], 0.0)
    out[np.isinf(theta[gid])] = 0.0
    return out
