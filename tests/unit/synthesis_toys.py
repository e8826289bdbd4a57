"""A small correlated three-column table the synthesizer tests fit (codes on a public domain)."""
from __future__ import annotations

import numpy as np
import pandas as pd

DOMAIN = {"a": 2, "b": 3, "c": 2}


def correlated(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """``b`` follows ``a`` 80% of the time and ``c`` follows ``b`` 70% of the time."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.8, a + rng.integers(0, 2, n), rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.7, (b > 0).astype(int), rng.integers(0, 2, n))
    return pd.DataFrame({"a": a, "b": b, "c": c})
