"""Integer rounding that keeps group totals exact."""
from __future__ import annotations

import numpy as np


def largest_remainder(values: np.ndarray, groups: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Round non-negative ``values`` to integers whose sum per group equals ``targets[group]`` exactly.

    Floors first, then gives one extra unit to the rows with the largest remainders in each group
    (Hamilton's method). ``values`` are first rescaled so each group sums to its target.
    """
    vals = np.asarray(values, dtype=float)
    grp = np.asarray(groups, dtype=np.int64)
    tgt = np.asarray(targets, dtype=np.int64)
    sums = np.bincount(grp, weights=vals, minlength=tgt.shape[0])
    n_in = np.bincount(grp, minlength=tgt.shape[0])
    # a group whose values are all zero shares its target evenly
    flat = sums <= 0
    scaled = np.where(flat[grp], 1.0 / np.maximum(n_in[grp], 1), vals / np.where(sums > 0, sums, 1.0)[grp])
    scaled = scaled * tgt[grp]
    base = np.floor(scaled).astype(np.int64)
    deficit = tgt - np.bincount(grp, weights=base, minlength=tgt.shape[0]).astype(np.int64)
    rem = scaled - base
    order = np.lexsort((-rem, grp))
    sorted_grp = grp[order]
    starts = np.searchsorted(sorted_grp, np.arange(tgt.shape[0]))
    rank = np.arange(order.shape[0]) - starts[sorted_grp]
    bump = np.zeros_like(base)
    bump[order] = (rank < deficit[sorted_grp]).astype(np.int64)
    return base + bump
