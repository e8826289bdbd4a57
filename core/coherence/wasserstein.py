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


def member_pairs(cell_of: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(subgroup, lens cell, person) of every membership, computed once per audit."""
    members = np.asarray(members, bool)
    if members.ndim == 1:
        members = members[:, None]
    gi, ii = np.nonzero(members.T)
    return gi, np.asarray(cell_of)[ii], ii


def cell_distances(cell_scores: np.ndarray, cell_of: np.ndarray, halves: np.ndarray, members: np.ndarray,
                   pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Same as ``subgroup_distances`` when each person's score is ``cell_scores[cell_of[i]]``.

    A predictor sees only the lens, so scores take one value per lens cell: the CDFs are built
    from per-cell counts (one bincount per split over all subgroups) on the U sorted cell
    scores, which avoids sorting all n people.
    """
    u = np.asarray(cell_scores, float)
    single = np.ndim(halves) == 1
    halves = np.atleast_2d(np.asarray(halves, bool))
    members = np.asarray(members, bool)
    if members.ndim == 1:
        members = members[:, None]
    U, G, S = u.size, members.shape[1], halves.shape[0]
    order = np.argsort(u, kind="stable")
    rank = np.empty(U, np.int64)
    rank[order] = np.arange(U)
    gi, ci, ii = pairs if pairs is not None else member_pairs(cell_of, members)
    key = gi * U + rank[ci]
    zs = u[order]
    gaps = np.diff(zs)
    block_end = np.r_[gaps > 0, True]
    w1, ks = np.empty((S, G)), np.empty((S, G))
    p, q = np.empty((S, G)), np.empty((S, G))
    with np.errstate(invalid="ignore", divide="ignore"):
        for s in range(S):
            side = halves[s, ii]
            ca = np.bincount(key[side], minlength=G * U).reshape(G, U)
            cb = np.bincount(key[~side], minlength=G * U).reshape(G, U)
            p[s], q[s] = ca.sum(axis=1), cb.sum(axis=1)
            diff = np.abs(np.cumsum(ca, axis=1) / p[s][:, None] - np.cumsum(cb, axis=1) / q[s][:, None])
            w1[s] = diff[:, :-1] @ gaps
            ks[s] = diff[:, block_end].max(axis=1)
    empty = (p == 0) | (q == 0)
    w1 = np.where(empty, np.nan, w1)
    ks = np.where(empty, np.nan, ks)
    if single:
        return w1[0], ks[0], p[0], q[0]
    return w1, ks, p, q


class SideCounts:
    """Per-split counts of every (subgroup, lens cell), from the people of one audit.

    People who share a lens cell and belong to exactly the same subgroups are interchangeable for
    the CDFs, so each person is mapped once per audit to such a class (``class_of``); a split then
    costs one bincount of the released half's classes plus a sparse product that spreads the class
    counts over (subgroup, cell). The other side's counts are the totals minus the released side's.
    The counts are the same integers the per-membership bincounts of ``cell_distances`` give.
    """

    def __init__(self, cell_of: np.ndarray, members: np.ndarray, n_cells: int) -> None:
        import scipy.sparse as sp

        members = np.asarray(members, bool)
        if members.ndim == 1:
            members = members[:, None]
        cell_of = np.asarray(cell_of, np.int64)
        n, G = members.shape
        packed = np.ascontiguousarray(np.packbits(members, axis=1))
        _, pattern = np.unique(packed.view(np.dtype((np.void, packed.shape[1]))).ravel(), return_inverse=True)
        pattern = pattern.ravel().astype(np.int64)
        n_patterns = int(pattern.max()) + 1 if n else 0
        classes, class_of = np.unique(cell_of * max(n_patterns, 1) + pattern, return_inverse=True)
        self.cell_of = cell_of
        self.class_of = class_of.ravel().astype(np.int64)
        first = np.zeros(classes.size, np.int64)
        first[self.class_of[::-1]] = np.arange(n)[::-1]            # one person of each class
        cls_cell = cell_of[first]
        g_idx, k_idx = np.nonzero(members[first].T)                # (subgroup, class) memberships
        self.shape = (G, int(n_cells))
        self.spread = sp.csr_matrix((np.ones(g_idx.size, np.int64), (g_idx * int(n_cells) + cls_cell[k_idx], k_idx)),
                                    shape=(G * int(n_cells), classes.size))
        self.totals = self.of_classes(np.bincount(self.class_of, minlength=classes.size))

    @property
    def n_classes(self) -> int:
        return self.spread.shape[1]

    def of_classes(self, class_counts: np.ndarray) -> np.ndarray:
        """(G, U) counts of (subgroup, cell) from per-class counts."""
        return np.asarray(self.spread @ class_counts.astype(np.int64)).reshape(self.shape)

    def released(self, half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(released side, other side) counts, each (G, U), for a half given as a mask or row indices."""
        ca = self.of_classes(np.bincount(self.class_of[half], minlength=self.n_classes))
        return ca, self.totals - ca


def count_distances(cell_scores: np.ndarray, sides: list[tuple[np.ndarray, np.ndarray]]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``cell_distances`` for several splits from their (released, other) counts per (subgroup, cell).

    Only the U cell scores are sorted; the counts are reordered by score and cumulated, so the cost
    per predictor does not grow with the number of people.
    """
    u = np.asarray(cell_scores, float)
    S = len(sides)
    G = sides[0][0].shape[0]
    order = np.argsort(u, kind="stable")
    zs = u[order]
    gaps = np.diff(zs)
    block_end = np.r_[gaps > 0, True]
    w1, ks = np.empty((S, G)), np.empty((S, G))
    p, q = np.empty((S, G)), np.empty((S, G))
    with np.errstate(invalid="ignore", divide="ignore"):
        for s, (a, b) in enumerate(sides):
            ca, cb = np.ascontiguousarray(a[:, order]), np.ascontiguousarray(b[:, order])
            p[s], q[s] = ca.sum(axis=1), cb.sum(axis=1)
            diff = np.abs(np.cumsum(ca, axis=1) / p[s][:, None] - np.cumsum(cb, axis=1) / q[s][:, None])
            w1[s] = diff[:, :-1] @ gaps
            ks[s] = diff[:, block_end].max(axis=1)
    empty = (p == 0) | (q == 0)
    return np.where(empty, np.nan, w1), np.where(empty, np.nan, ks), p, q
