"""Closed-form ToyDown error for districts and the best split of a budget (Cohen et al. 2021, §5-6).

A district D (a set of leaves) induces node weights w: 1 on its leaves, and for an internal node
the unweighted mean of its children's weights (Def. 1). Theorem 2 gives the district error as
E_D = w_root L_root + sum over other nodes of (w_h - w_parent) L_h, so with per-level node noise
variance v_l, Var(E_D) = v_0 w_root^2 + sum_l v_l S_l with S_l = sum_{h in level l} (w_h - w_parent)^2
(Cor. 3, any mechanism through its variance; valid without non-negativity or rounding).
Per level, S_l = sum_h w_h^2 - sum_{parents P} n_P w_P^2, which lets many districts be handled at once
from sparse (node, district, weight) triples.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from core.census.geography_data import Hierarchy
from core.census.toydown import check_budgets, level_noise_scales
from core.privacy.mechanisms import get_mechanism

# Table 1 of Cohen et al. 2021: shares of the budget below the nation, for state, county, tract,
# block group and block. Thirds are written as fractions so each row sums to exactly 1.
EQUAL = (0.2, 0.2, 0.2, 0.2, 0.2)
STATE_HEAVY = (0.5, 0.25, 1 / 12, 1 / 12, 1 / 12)
TRACT_HEAVY = (1 / 12, 1 / 6, 0.5, 1 / 6, 1 / 12)
BG_HEAVY = (1 / 12, 1 / 12, 1 / 6, 0.5, 1 / 6)
BLOCK_HEAVY = (1 / 12, 1 / 12, 1 / 12, 0.25, 0.5)
PRESETS: dict[str, tuple[float, ...]] = {
    "equal": EQUAL, "state-heavy": STATE_HEAVY, "tract-heavy": TRACT_HEAVY,
    "BG-heavy": BG_HEAVY, "block-heavy": BLOCK_HEAVY,
}


def preset_shares(name: str, depth: int) -> np.ndarray:
    """Budget shares of a Table 1 preset for a tree with ``depth`` levels (summing to 1).

    The paper's five levels map one-to-one when depth is 5. For other depths the preset is read
    as a profile over relative height (top to bottom) and linearly resampled, then renormalised.
    """
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; choose one of {list(PRESETS)}.")
    prof = np.asarray(PRESETS[name], dtype=float)
    if depth == prof.shape[0]:
        out = prof.copy()
    elif depth == 1:
        out = np.ones(1)
    else:
        out = np.interp(np.linspace(0, 1, depth), np.linspace(0, 1, prof.shape[0]), prof)
    return out / out.sum()


# ------------------------------------------------------------------------------ weights
def _as_mask(h: Hierarchy, leaf_mask) -> np.ndarray:
    mask = np.asarray(leaf_mask, dtype=float)
    if mask.shape[0] != h.n_leaves or mask.ndim not in (1, 2):
        raise ValueError(f"A district mask needs one entry per leaf ({h.n_leaves}); got shape {mask.shape}.")
    return mask


def district_weights(h: Hierarchy, leaf_mask) -> np.ndarray:
    """Node weights of one district (n_nodes,) or of several (n_nodes, m) from leaf masks (Def. 1)."""
    mask = _as_mask(h, leaf_mask)
    w = np.zeros((h.n_nodes,) + mask.shape[1:])
    w[h.leaf_nodes] = mask
    n_child = h.n_children
    for lvl in range(h.depth - 2, -1, -1):
        sl = h.level_slice(lvl)
        sums = h.sum_children(w, lvl)
        w[sl] = sums / (n_child[sl] if w.ndim == 1 else n_child[sl][:, None])
    return w


def _sparse_level_sums(h: Hierarchy, leaf_idx: np.ndarray, district: np.ndarray, value: np.ndarray,
                       n_districts: int) -> tuple[np.ndarray, np.ndarray]:
    """Per level and district: Q_l = sum_h w_h^2 and R_l = sum_h n_h w_h^2, from sparse leaf weights."""
    q = np.zeros((h.depth, n_districts))
    r = np.zeros((h.depth, n_districts))
    nodes = h.leaf_nodes[leaf_idx]
    dist = district.astype(np.int64)
    w = value.astype(float)
    n_child = h.n_children
    for lvl in range(h.depth - 1, -1, -1):
        if lvl < h.depth - 1:
            # move to the parents: sum weights over (parent, district) pairs, divide by n(parent)
            par = h.parent[nodes]
            key = par * n_districts + dist
            ukey, inv = np.unique(key, return_inverse=True)
            w = np.bincount(inv, weights=w) / n_child[ukey // n_districts]
            nodes = ukey // n_districts
            dist = ukey % n_districts
        q[lvl] = np.bincount(dist, weights=w * w, minlength=n_districts)
        r[lvl] = np.bincount(dist, weights=n_child[nodes] * w * w, minlength=n_districts)
    return q, r


def _level_coefficients_from_sums(q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """a_0 = w_root^2 and a_l = S_l = Q_l - R_{l-1}: Var(E_D) = sum_l a_l v_l."""
    a = np.empty_like(q)
    a[0] = q[0]
    a[1:] = np.maximum(q[1:] - r[:-1], 0.0)
    return a


def level_coefficients(h: Hierarchy, leaf_labels=None, leaf_mask=None) -> np.ndarray:
    """Coefficients a (depth, m) with Var(E_D) = sum_l a_l v_l for each district (Cor. 3).

    Give either ``leaf_labels`` (an integer district per leaf, -1 = in none: many disjoint
    districts at once) or ``leaf_mask`` ((n_leaves,) or (n_leaves, m), any weights, overlaps allowed).
    """
    if (leaf_labels is None) == (leaf_mask is None):
        raise ValueError("Give exactly one of leaf_labels or leaf_mask.")
    if leaf_labels is not None:
        lab = np.asarray(leaf_labels).astype(np.int64)
        if lab.shape != (h.n_leaves,):
            raise ValueError(f"leaf_labels needs one district label per leaf ({h.n_leaves}).")
        inside = np.flatnonzero(lab >= 0)
        m = int(lab.max()) + 1 if inside.size else 0
        q, r = _sparse_level_sums(h, inside, lab[inside], np.ones(inside.size), m)
        return _level_coefficients_from_sums(q, r)
    mask = _as_mask(h, leaf_mask)
    m2 = mask if mask.ndim == 2 else mask[:, None]
    rows, cols = np.nonzero(m2)
    q, r = _sparse_level_sums(h, rows, cols, m2[rows, cols], m2.shape[1])
    a = _level_coefficients_from_sums(q, r)
    return a if mask.ndim == 2 else a[:, 0]


def fragmentation(h: Hierarchy, leaf_mask=None, *, leaf_labels=None) -> float | np.ndarray:
    """Frag(D) = sum over non-root nodes of (w_h - w_parent)^2 (Def. 5; no root term, as Frag(D_G)=90.75
    needs), for one mask, each column of a 2-D mask, or every district of ``leaf_labels``."""
    out = fragmentation_from_coefficients(level_coefficients(h, leaf_labels=leaf_labels, leaf_mask=leaf_mask))
    return float(out) if np.ndim(out) == 0 else out


def fragmentation_from_coefficients(a: np.ndarray) -> np.ndarray:
    """Frag(D) from the level coefficients of ``level_coefficients``: every level but the root."""
    return np.asarray(a)[1:].sum(axis=0)


def level_node_variance(eps_by_level, mechanism: str = "laplace", sensitivity: float = 2.0,
                        estimate: bool = False) -> np.ndarray:
    """Variance of one node's noise at each level, e.g. 8/epsilon_l^2 for Laplace with sensitivity 2.

    ``estimate`` reads numerically calibrated scales off their interpolated curve (for what-if
    curves over many budgets); the noise actually drawn uses the exact scale.
    """
    mech = get_mechanism(mechanism)
    if estimate:
        scales = np.atleast_1d(np.asarray(mech.scale_estimate(sensitivity, np.asarray(eps_by_level, dtype=float)),
                                          dtype=float))
    else:
        scales = level_noise_scales(eps_by_level, mech, sensitivity)
    return np.atleast_1d(np.asarray(mech.variance(scales), dtype=float))


def district_variance(h: Hierarchy, leaf_mask, eps_by_level, mechanism: str = "laplace",
                      sensitivity: float = 2.0) -> float | np.ndarray:
    """ToyDown Var(E_D) for one district mask, or for each column of a 2-D mask (Cohen et al. 2021, Cor. 3)."""
    v = level_node_variance(check_budgets(h, eps_by_level), mechanism, sensitivity)
    a = level_coefficients(h, leaf_mask=leaf_mask)
    out = np.tensordot(v, a, axes=(0, 0))
    return float(out) if np.ndim(out) == 0 else out


def district_variances(h: Hierarchy, leaf_labels, eps_by_level, mechanism: str = "laplace",
                       sensitivity: float = 2.0) -> np.ndarray:
    """Var(E_D) for every district of a labelling (one label per leaf, -1 = none), Cor. 3, vectorised."""
    v = level_node_variance(check_budgets(h, eps_by_level), mechanism, sensitivity)
    return v @ level_coefficients(h, leaf_labels=leaf_labels)


def district_error_from_noise(h: Hierarchy, leaf_mask, noise: np.ndarray) -> float | np.ndarray:
    """E_D from the node noise draws, Theorem 2: w_root L_root + sum_h (w_h - w_parent) L_h."""
    w = district_weights(h, leaf_mask)
    diff = w.copy()
    diff[1:] -= w[h.parent[1:]]
    out = np.tensordot(diff, noise, axes=(0, 0))
    return float(out) if np.ndim(out) == 0 else out


# --------------------------------------------------------------------------- targets
def unit_coefficients(h: Hierarchy, level: int) -> np.ndarray:
    """Level coefficients of every whole unit at ``level`` (depth, n_units): each unit as a district."""
    h.nodes_at(level)  # validates the level
    anc = h.ancestors_at(level) - h.level_offsets[level]
    return level_coefficients(h, leaf_labels=anc)


def leaf_variance_homogeneous(fanouts: Sequence[int], eps_by_level, sensitivity: float = 2.0) -> float:
    """Var of one leaf's ToyDown error in a homogeneous Laplace tree (Cohen et al. 2021, Cor. 4)."""
    n = np.asarray(fanouts, dtype=float)
    eps = np.asarray(eps_by_level, dtype=float)
    if eps.shape[0] != n.shape[0] + 1:
        raise ValueError("Give one budget per level: one more than the number of fan-outs.")
    c = 2.0 * sensitivity ** 2  # 8 for sensitivity 2
    below = np.concatenate([np.cumprod(n[::-1])[::-1], [1.0]])  # n_l ... n_{d-1}
    total = c / (eps[0] ** 2 * below[0] ** 2)
    for lvl in range(1, eps.shape[0]):
        total += c * n[lvl - 1] * (n[lvl - 1] - 1) / (eps[lvl] ** 2 * below[lvl - 1] ** 2)
    return float(total)


# ------------------------------------------------------------------------ optimal split
def split_for_coefficients(coefficients, total_budget: float, unit: str = "epsilon",
                           min_share: float = 0.0) -> np.ndarray:
    """Budgets minimising sum_l a_l / x_l^2 (epsilon) or sum_l a_l / x_l (rho) with sum x_l = total.

    Closed forms (Cohen et al. 2021, §5.1): x_l proportional to a_l^(1/3) under pure DP and to
    a_l^(1/2) under zCDP (rho adds up). ``coefficients`` are the a_l of the (weighted) targets;
    with ``min_share`` > 0 every level keeps at least that share (water-filling on the multiplier).
    """
    a = np.asarray(coefficients, dtype=float).reshape(-1)
    if a.size == 0 or np.any(a < 0) or not np.all(np.isfinite(a)) or a.sum() <= 0:
        raise ValueError("Target coefficients must be non-negative with at least one positive entry.")
    if not total_budget > 0:
        raise ValueError("The total budget must be positive.")
    if unit not in ("epsilon", "rho"):
        raise ValueError("unit must be 'epsilon' or 'rho'.")
    power = 1.0 / 3.0 if unit == "epsilon" else 0.5
    if not 0 <= min_share * a.size < 1:
        raise ValueError(f"min_share must be below 1/{a.size}.")
    root = a ** power
    x = total_budget * root / root.sum()
    floor = min_share * total_budget
    if floor > 0 and np.any(x < floor):
        # x_l = max(floor, c a_l^power); find c by bisection so that the budgets sum to the total
        lo, hi = 0.0, total_budget / max(root[root > 0].min(), 1e-300)
        for _ in range(200):
            c = 0.5 * (lo + hi)
            if np.maximum(floor, c * root).sum() > total_budget:
                hi = c
            else:
                lo = c
        x = np.maximum(floor, lo * root)
        x *= total_budget / x.sum()
    return x


def split_objective(coefficients, budgets, mechanism: str = "laplace", sensitivity: float = 2.0) -> float:
    """Weighted target variance sum_l a_l v_l for given per-level budgets (levels with a_l = 0 may get 0)."""
    a = np.asarray(coefficients, dtype=float)
    b = np.asarray(budgets, dtype=float)
    used = a > 0
    if np.any(b[used] <= 0):
        return float("inf")
    return float(np.dot(a[used], level_node_variance(b[used], mechanism, sensitivity)))
