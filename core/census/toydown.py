"""ToyDown and TopDown-lite: noisy, hierarchically consistent counts (Cohen et al. 2021, §3).

ToyDown (Alg. 2) noises every node and then fixes the tree top-down, one level at a time, with
every parent's discrepancy spread equally over its children; the non-negative variant projects the
children onto {x >= 0, sum = parent}; the integer variant rounds by largest remainder so sums hold.
TopDown-lite is this project's feasible stand-in for the Census TopDown algorithm (it is not the
Bureau's code): invariants, several histograms per node with budget shares, weighted least squares,
then non-negativity and controlled rounding. Seeded draws are simulations, not releases.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.census.consistency import (project_to_simplex, round_keeping_sums, round_total,
                                     spread_discrepancy)
from core.census.geography_data import Hierarchy
from core.privacy.mechanisms import NoiseMechanism, get_mechanism


#: Largest budget a level may take (the allocation's and the district noise's cap): beyond it the noise
#: scale underflows towards 0 and every number would read as exact.
MAX_LEVEL_BUDGET = 1e6


def check_budgets(h: Hierarchy, eps_by_level) -> np.ndarray:
    """Per-level budgets as a float array, one positive entry per level of ``h``."""
    eps = np.asarray(eps_by_level, dtype=float).reshape(-1)
    if eps.shape[0] != h.depth:
        raise ValueError(f"Give one budget per level ({h.depth} levels: {', '.join(h.level_names)}); got {eps.shape[0]}.")
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0) or np.any(eps > MAX_LEVEL_BUDGET):
        raise ValueError(f"Every level needs a positive finite budget of at most {MAX_LEVEL_BUDGET:g}; "
                         f"got {eps.tolist()}.")
    return eps


def level_noise_scales(eps_by_level, mechanism: str | NoiseMechanism = "laplace",
                       sensitivity: float = 2.0) -> np.ndarray:
    """Noise parameter per level: b = sensitivity/epsilon (pure DP) or sigma = sensitivity/sqrt(2 rho) (zCDP).

    The paper's §3.2 text says scale 1/epsilon but its Algorithm 2 and variance 8/epsilon^2 use 2/epsilon:
    we follow the algorithm (sensitivity 2 of a histogram under bounded DP) and keep it a parameter.
    """
    mech = get_mechanism(mechanism)
    return np.atleast_1d(np.asarray(mech.scale_for(sensitivity, np.asarray(eps_by_level, dtype=float)), dtype=float))


def draw_node_noise(h: Hierarchy, eps_by_level, mechanism: str | NoiseMechanism = "laplace",
                    sensitivity: float = 2.0, n_attributes: int | None = None,
                    rng: np.random.Generator | None = None) -> np.ndarray:
    """Independent noise for every node (and attribute), each level at its own scale.

    ``mechanism`` is best passed as the built mechanism (callers that hold it hand it on; an id is parsed)."""
    if rng is None:
        raise ValueError("Pass rng=np.random.default_rng(seed) so the simulation is reproducible.")
    eps = check_budgets(h, eps_by_level)
    mech = get_mechanism(mechanism)
    scales = level_noise_scales(eps, mech, sensitivity)
    tail = () if n_attributes is None else (int(n_attributes),)
    noise = np.empty((h.n_nodes,) + tail, dtype=float)
    for lvl in range(h.depth):
        sl = h.level_slice(lvl)
        noise[sl] = mech.sample(float(scales[lvl]), (sl.stop - sl.start,) + tail, rng)
    return noise


def _starts(h: Hierarchy, lvl: int) -> np.ndarray:
    """First row (within level lvl+1) of the children of each node of level lvl."""
    return h.child_ptr[h.level_slice(lvl)] - h.level_offsets[lvl + 1]


def consistent_top_down(h: Hierarchy, estimates: np.ndarray, nonnegative: bool = False, integer: bool = False,
                        fixed_through_level: int = -1, root: np.ndarray | None = None,
                        overwrite: bool = False) -> np.ndarray:
    """Post-process per-node estimates into consistent counts, level by level from the root (Alg. 2).

    Levels 0..fixed_through_level keep ``estimates`` as given (invariant levels); ``root``
    overrides the root's value. Each lower level is fitted to its already-fixed parents. With
    ``overwrite`` the fitted values replace the estimates in their own array (a level is read
    before it is written), which saves one node array on a national tree.
    """
    est = np.asarray(estimates, dtype=float)
    alpha = est if overwrite and est is estimates else np.empty_like(est)
    start_level = max(fixed_through_level, 0)
    if fixed_through_level >= 0:
        stop = h.level_offsets[fixed_through_level + 1]
        alpha[:stop] = est[:stop]
    else:
        r = est[0] if root is None else np.asarray(root, dtype=float)
        if root is None and nonnegative:
            r = np.maximum(r, 0.0)
        if root is None and integer:
            r = np.rint(r)
        alpha[0] = r
    for lvl in range(start_level, h.depth - 1):
        starts = _starts(h, lvl)
        totals = alpha[h.level_slice(lvl)]
        child = est[h.level_slice(lvl + 1)]
        fitted = project_to_simplex(child, starts, totals) if nonnegative else spread_discrepancy(child, starts, totals)
        if integer:
            fitted = round_keeping_sums(fitted, starts, totals)
        alpha[h.level_slice(lvl + 1)] = fitted
    return alpha.astype(np.int64) if integer else alpha


def toydown(h: Hierarchy, leaf_counts, eps_by_level, mechanism: str | NoiseMechanism = "laplace",
            sensitivity: float = 2.0, nonnegative: bool = False, integer: bool = False,
            rng: np.random.Generator | None = None) -> np.ndarray:
    """ToyDown (Cohen et al. 2021, Alg. 2): noisy consistent counts for every node, shape of h.aggregate.

    ``eps_by_level`` is in the mechanism's unit (epsilon for Laplace/geometric, rho for the Gaussians).
    """
    counts = h.aggregate(leaf_counts)
    noisy = draw_node_noise(h, eps_by_level, mechanism, sensitivity,
                            None if counts.ndim == 1 else counts.shape[1], rng)
    noisy += counts                       # in place: a national tree holds one node array, not three
    del counts
    return consistent_top_down(h, noisy, nonnegative=nonnegative, integer=integer, overwrite=True)


@dataclass(frozen=True)
class Histogram:
    """A partition of the person types into bins: ``bins[t]`` is the bin of type t."""

    name: str
    bins: tuple[int, ...]

    def matrix(self, n_types: int) -> np.ndarray:
        """Bin-by-type 0/1 matrix A with A[b, t] = 1 when type t falls in bin b."""
        b = np.asarray(self.bins, dtype=np.int64)
        if b.shape[0] != n_types or b.min() < 0:
            raise ValueError(f"Histogram {self.name!r} must give a bin for each of the {n_types} types.")
        a = np.zeros((int(b.max()) + 1, n_types))
        a[b, np.arange(n_types)] = 1.0
        return a


def detailed_histogram(n_types: int) -> Histogram:
    """Every type in its own bin (Q_detailed)."""
    return Histogram("detailed", tuple(range(n_types)))


def total_histogram(n_types: int) -> Histogram:
    """All types in one bin (the total population)."""
    return Histogram("total", (0,) * n_types)


def topdown_lite(h: Hierarchy, leaf_counts, eps_by_level, histograms: Sequence[Histogram] | None = None,
                 shares: Sequence[float] | None = None, invariants: Sequence[str] = ("root_total",),
                 exact_level: int | None = None, weights: str = "unweighted",
                 mechanism: str | NoiseMechanism = "geometric", sensitivity: float = 2.0,
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """TopDown-lite: non-negative integer consistent counts (n_nodes, n_types) from several noisy histograms.

    Each level's budget is split over histograms by ``shares``; per node the type counts are the
    (weighted) least-squares fit to all histograms; children then fit their parent (least squares,
    projection onto non-negative vectors with the parent's sum, largest-remainder rounding).
    Invariants: "root_total" keeps the total population exact; ``exact_level`` publishes every
    count at that level (and so above it) without noise, spending no budget there.
    """
    if rng is None:
        raise ValueError("Pass rng=np.random.default_rng(seed) so the simulation is reproducible.")
    counts = h.aggregate(leaf_counts)
    if counts.ndim == 1:
        counts = counts[:, None]
    n_types = counts.shape[1]
    hists = list(histograms) if histograms else [detailed_histogram(n_types)]
    sh = np.full(len(hists), 1.0 / len(hists)) if shares is None else np.asarray(shares, dtype=float)
    if sh.shape[0] != len(hists) or np.any(sh <= 0) or abs(sh.sum() - 1.0) > 1e-6:
        raise ValueError(f"Histogram shares must be positive, one per histogram, and sum to 1; got {sh.tolist()}.")
    if weights not in ("unweighted", "inverse_variance"):
        raise ValueError("weights must be 'unweighted' or 'inverse_variance'.")
    unknown = set(invariants) - {"root_total"}
    if unknown:
        raise ValueError(f"Unknown invariants {sorted(unknown)}; supported: 'root_total' and exact_level.")
    if exact_level is not None and not 0 <= exact_level < h.depth:
        raise ValueError(f"exact_level must be between 0 and {h.depth - 1}.")
    eps = check_budgets(h, eps_by_level)
    mech = get_mechanism(mechanism)
    mats = [q.matrix(n_types) for q in hists]
    normal = sum(a.T @ a for a in mats)
    if np.linalg.matrix_rank(normal) < n_types:
        raise ValueError("The histograms do not pin down every type; include the detailed histogram.")
    first_noisy = 0 if exact_level is None else exact_level + 1
    est = counts.astype(float)
    for lvl in range(first_noisy, h.depth):
        sl = h.level_slice(lvl)
        true = counts[sl].astype(float)
        rhs = np.zeros_like(true)
        gram = np.zeros((n_types, n_types))
        for a, share in zip(mats, sh):
            scale = float(mech.scale_for(sensitivity, share * eps[lvl]))
            noisy = true @ a.T + mech.sample(scale, (true.shape[0], a.shape[0]), rng)
            omega = 1.0 if weights == "unweighted" else 1.0 / float(mech.variance(scale))
            rhs += omega * noisy @ a
            gram += omega * a.T @ a
        est[sl] = np.linalg.solve(gram, rhs.T).T
    if exact_level is not None:
        alpha = consistent_top_down(h, est, nonnegative=True, integer=True, fixed_through_level=exact_level)
    else:
        if "root_total" in invariants:
            total = int(counts[0].sum())
            root = round_total(project_to_simplex(est[0], np.array([0]), np.array([float(total)])), total)
        else:
            root = np.rint(np.maximum(est[0], 0.0))
        alpha = consistent_top_down(h, est, nonnegative=True, integer=True, root=root)
    return alpha
