"""Marginal tables counted with np.bincount on flattened cell indices."""
from __future__ import annotations

import numpy as np

from core.numeric import project_to_simplex as simplex


def one_way_counts(codes: np.ndarray, size: int) -> np.ndarray:
    """Counts of each value 0..size-1 in a code vector."""
    return np.bincount(codes, minlength=size).astype(float)


def two_way_counts(a: np.ndarray, b: np.ndarray, size_a: int, size_b: int) -> np.ndarray:
    """(size_a, size_b) contingency table of two code vectors."""
    return np.bincount(a * size_b + b, minlength=size_a * size_b).astype(float).reshape(size_a, size_b)


def normalise(counts: np.ndarray) -> np.ndarray:
    """Counts as a probability table (uniform when the total is zero)."""
    total = counts.sum()
    return counts / total if total > 0 else np.full(counts.shape, 1.0 / counts.size)


def tvd(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """Total variation distance 1/2 sum |p - q| between two count tables, each normalised."""
    return 0.5 * float(np.abs(normalise(p_counts) - normalise(q_counts)).sum())


def project_to_simplex(v: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of v onto {x >= 0, sum x = total} (sort-based, Duchi et al. 2008)."""
    if total <= 0:
        return np.zeros_like(v)
    return simplex(np.asarray(v, dtype=float), np.zeros(np.size(v), np.int64), np.array([float(total)]))
