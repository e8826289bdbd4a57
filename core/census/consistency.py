"""Top-down consistency steps, vectorised over every parent of a level (Cohen et al. 2021, §3.2, Alg. 2).

Children of a parent are a contiguous block of rows; groups are given by ``starts`` (first row of
each group) and the parent values ``totals``. Multi-attribute values (rows x k) are handled by
treating every (parent, column) pair as its own group.
"""
from __future__ import annotations

import numpy as np

from core.numeric import largest_remainder
from core.numeric import project_to_simplex as simplex


def _group_ids(starts: np.ndarray, n_rows: int) -> np.ndarray:
    sizes = np.diff(np.append(starts, n_rows))
    return np.repeat(np.arange(starts.shape[0]), sizes)


def spread_discrepancy(values: np.ndarray, starts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Least-squares fit of children to their parent's total: add (total - sum)/n to every child (§3.2)."""
    n_rows = values.shape[0]
    sizes = np.diff(np.append(starts, n_rows))
    sums = np.add.reduceat(values, starts, axis=0)
    gap = (totals - sums) / (sizes if values.ndim == 1 else sizes[:, None])
    return values + np.repeat(gap, sizes, axis=0)


def _flatten_groups(values: np.ndarray, starts: np.ndarray, totals: np.ndarray):
    """Column-major flattening: group id per element and totals per group, for (rows x k) input."""
    n_rows = values.shape[0]
    gid = _group_ids(starts, n_rows)
    if values.ndim == 1:
        return values.astype(float), gid, np.asarray(totals, dtype=float), starts.shape[0]
    k = values.shape[1]
    n_groups = starts.shape[0]
    flat = values.T.reshape(-1).astype(float)
    flat_gid = (np.arange(k)[:, None] * n_groups + gid[None, :]).reshape(-1)
    flat_tot = np.asarray(totals, dtype=float).T.reshape(-1)
    return flat, flat_gid, flat_tot, n_groups * k


def _unflatten(flat: np.ndarray, shape: tuple) -> np.ndarray:
    if len(shape) == 1:
        return flat
    return flat.reshape(shape[1], shape[0]).T


def project_to_simplex(values: np.ndarray, starts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Euclidean projection of each group's children onto {x >= 0, sum x = parent total}
    (core.numeric.project_to_simplex, the sort rule of Duchi et al. 2008). A zero total gives zeros."""
    flat, gid, tot, _ = _flatten_groups(values, starts, totals)
    return _unflatten(simplex(flat, gid, tot), values.shape)


def round_keeping_sums(values: np.ndarray, starts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Integers summing to each (integer) parent total: floor, then +1 to the largest remainders."""
    flat, gid, tot, _ = _flatten_groups(values, starts, totals)
    return _unflatten(largest_remainder(flat, gid, tot), values.shape)


def round_total(values: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of one vector to integers summing to ``total``."""
    vals = np.asarray(values, dtype=float)
    return round_keeping_sums(vals.reshape(-1), np.array([0]), np.array([float(total)])).reshape(vals.shape)
