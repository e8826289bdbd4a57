"""Inverse-CDF draws of integer codes, vectorised: one distribution, or one per parent cell."""
from __future__ import annotations

import numpy as np


def draw_codes(prob: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``size`` codes from one probability vector by inverse CDF."""
    cdf = np.cumsum(prob)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), prob.size - 1)


def draw_conditional(cond: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw one child code per row from rows of ``cond`` (parent x child) picked by ``parent``.

    Row r's CDF is shifted by r so that all rows sit in one increasing array; a single
    searchsorted then serves every row (no Python loop over rows).
    """
    n_par, n_child = cond.shape
    cdf = np.cumsum(cond, axis=1)
    cdf /= cdf[:, -1:]
    flat = (cdf + np.arange(n_par)[:, None]).ravel()
    u = rng.random(parent.size) * (1 - 1e-12)
    idx = np.searchsorted(flat, parent + u, side="right")
    return np.clip(idx - parent * n_child, 0, n_child - 1)
