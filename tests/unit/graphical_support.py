"""Five correlated categorical columns for the estimator's and AIM's tests: a -> b -> c, d from a and c,
e mostly b's parity, so every pair carries signal and a junction tree has something to fit."""
from __future__ import annotations

import numpy as np

DOM = {"a": 3, "b": 4, "c": 2, "d": 3, "e": 2}


def correlated_rows(n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` rows of the columns of :data:`DOM`, as integer codes, drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = ((b > 1).astype(int) ^ (rng.random(n) < 0.2)).astype(int)
    d = (c + a + rng.integers(0, 2, n)) % 3
    e = np.where(rng.random(n) < 0.7, b % 2, rng.integers(0, 2, n))
    return {"a": a, "b": b, "c": c, "d": d, "e": e}
