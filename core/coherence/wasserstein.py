"""Exact Wasserstein-1 and Kolmogorov-Smirnov distances between score distributions.

The distributions compared in the coherence experiment are uniform over finite sets of scores,
so W1 is computed exactly from empirical CDFs (coherence spec, Def. 5 and Sec. 2.4).
"""
from __future__ import annotations

import numpy as np


def wasserstein1(u: np.ndarray, v: np.ndarray) -> float:
    """W1 between the empirical distributions of ``u`` and ``v`` (integral of |F_u - F_v|)."""
    u = np.asarray(u, float).ravel()
    v = np.asarray(v, float).ravel()
    if u.size == 0 or v.size == 0:
        return float("nan")
    z = np.concatenate([u, v])
    order = np.argsort(z, kind="stable")
    zs = z[order]
    in_u = order < u.size
    fu = np.cumsum(in_u) / u.size
    fv = np.cumsum(~in_u) / v.size
    return float(np.sum(np.abs(fu - fv)[:-1] * np.diff(zs)))


def subgroup_distances(scores: np.ndarray, halves: np.ndarray, members: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """W1 and KS between the two halves inside every subgroup, for one or more splits at once.

    scores: (n,) in [-1, 1]; halves: (n,) or (s, n) booleans, True = released half; members:
    (n, g) booleans. Returns w1, ks, p, q each of shape (s, g) (or (g,) for a single split);
    a subgroup with an empty side gets NaN distances. Scores are sorted once; within each
    subgroup the CDF gaps of all splits come from one cumulative sum (spec Sec. 2.4).
    """
    scores = np.asarray(scores, float)
    single = np.ndim(halves) == 1
    halves = np.atleast_2d(np.asarray(halves, bool))
    members = np.asarray(members, bool)
    if members.ndim == 1:
        members = members[:, None]
    n = scores.size
    if halves.shape[1] != n or members.shape[0] != n:
        raise ValueError("scores, halves and subgroup memberships must describe the same people.")
    order = np.argsort(scores, kind="stable")
    zs = scores[order]
    m_sorted = members[order]                                      # (n, g)
    h_sorted = halves[:, order]                                    # (s, n)
    S, G = halves.shape[0], members.shape[1]
    w1, ks = np.zeros((S, G)), np.zeros((S, G))
    p, q = np.zeros((S, G)), np.zeros((S, G))
    with np.errstate(invalid="ignore", divide="ignore"):
        for g in range(G):                                             # few subgroups; each pass is vectorised
            idx = np.flatnonzero(m_sorted[:, g])
            if idx.size == 0:
                continue
            hg = h_sorted[:, idx]                                      # members in score order, per split
            p[:, g] = hg.sum(axis=1)
            q[:, g] = idx.size - p[:, g]
            diff = np.abs(np.cumsum(hg, axis=1) / p[:, g:g + 1] - np.cumsum(~hg, axis=1) / q[:, g:g + 1])
            gaps = np.diff(zs[idx])
            w1[:, g] = diff[:, :-1] @ gaps
            block_end = np.r_[gaps > 0, True]                          # CDFs are read at the end of tie blocks
            ks[:, g] = diff[:, block_end].max(axis=1)
    empty = (p == 0) | (q == 0)
    w1 = np.where(empty, np.nan, w1)
    ks = np.where(empty, np.nan, ks)
    if single:
        return w1[0], ks[0], p[0], q[0]
    return w1, ks, p, q
