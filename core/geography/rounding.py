"""Integer rounding that keeps group totals exact."""
from __future__ import annotations

import numpy as np

from core.numeric import largest_remainder as rounded


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
    return rounded(scaled, grp, tgt)
