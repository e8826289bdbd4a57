"""What a budget split should make accurate, and the split that does it: the one target/split API.

A :class:`Target` is one leaf, the whole units of a level, k districts that follow the hierarchy
(Alg. 3 of Cohen et al. 2021 on a labelled tree) or k scattered districts, or given districts (an
uploaded plan). Plans write targets as text (``"leaf"``, ``"unit:2"``, ``"greedy:4"``,
``"scattered:4"``, ``"plan"``); :func:`parse_target` reads them. Random district targets draw from
their own named sub-stream of the plan's seed, so a target's districts, and so its numbers, depend
only on the target and the seed, never on which targets are listed before it.

:func:`optimal_split` gives the per-level budgets that minimise the weighted targets' variance: the
Budget allocation page and the Reproductions page both call it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.census.analytic import level_coefficients, level_node_variance, split_for_coefficients
from core.contracts import named_rng
from core.geography.hierarchy import Hierarchy
from core.privacy.mechanisms import NoiseMechanism, get_mechanism

MAX_DISTRICTS = 10_000
KINDS = ("leaf", "unit", "greedy", "scattered", "plan")


@dataclass(frozen=True)
class Target:
    """One target: ``kind`` with its argument (the level of "unit", the k of "greedy" / "scattered"),
    its ``weight`` in the optimum and, for "plan", optionally the districts themselves (one label per
    leaf; without them the plan given to :func:`target_labels` is used)."""

    kind: str = "leaf"
    arg: int | None = None
    weight: float = 1.0
    labels: tuple[int, ...] | None = None

    @property
    def spec(self) -> str:
        """The text form plans store (``"unit:2"``); also the name of the target's random stream."""
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


def parse_target(spec: str, weight: float = 1.0) -> Target:
    """The :class:`Target` a plan's text names, checked; ValueError saying how to write it."""
    if not isinstance(spec, str):
        raise ValueError(f"A target is written as text such as 'leaf' or 'greedy:4'; got {spec!r:.40}.")
    kind, _, arg = spec.partition(":")
    if kind in ("leaf", "plan") and not arg:
        return Target(kind, None, weight)
    if kind in ("unit", "greedy", "scattered") and arg.isdigit() and len(arg) <= 6:
        n = int(arg)
        if kind == "unit" and n <= 10:
            return Target(kind, n, weight)
        if kind != "unit" and 1 <= n <= MAX_DISTRICTS:
            return Target(kind, n, weight)
    raise ValueError(f"Target {spec!r} is not one of leaf, unit:<level>, greedy:<k>, scattered:<k> (k from 1 to "
                     f"{MAX_DISTRICTS:,}) or plan.")


def _as_target(target: Target | str) -> Target:
    return target if isinstance(target, Target) else parse_target(target)


def target_labels(h: Hierarchy, target: Target | str, seed: int = 0,
                  plan: np.ndarray | None = None) -> tuple[str, np.ndarray]:
    """Name and per-leaf district labels of a target.

    Greedy and scattered districts are drawn from the sub-stream ``named_rng(seed, "target", spec)``
    of this target alone. ``plan`` is one district per leaf (a plan from the District maps page) for
    a "plan" target that carries no labels of its own.
    """
    t = _as_target(target)
    if t.kind == "plan":
        given = t.labels if t.labels is not None else plan
        labels = np.asarray(given if given is not None else (), dtype=np.int64)
        if labels.shape != (h.n_leaves,) or (labels < 0).any():
            raise ValueError(f"The district plan needs one district per {h.level_names[-1]} "
                             f"({h.n_leaves:,}); load a plan made for this geography.")
        _, labels = np.unique(labels, return_inverse=True)
        return f"your {labels.max() + 1}-district plan", labels
    if t.kind == "leaf":
        return f"one {h.level_names[-1]}", np.arange(h.n_leaves)
    if t.kind == "unit":
        if not 0 <= t.arg < h.depth:
            raise ValueError(f"Whole-unit target level {t.arg} is not in this hierarchy (levels 0..{h.depth - 1}).")
        return f"whole {h.level_names[t.arg]}", h.ancestors_at(t.arg) - h.level_offsets[t.arg]
    k = t.arg
    if not 1 <= k <= h.n_leaves:
        raise ValueError(f"The number of districts must be between 1 and {h.n_leaves:,} (the leaves of this tree).")
    rng = named_rng(seed, "target", t.spec)
    rank = h.leaf_nodes - h.level_offsets[h.depth - 1]   # position in storage (label) order
    if t.kind == "greedy":
        # Greedy (Alg. 3) on a labelled tree: equal runs of consecutive leaves from a random offset
        offset = int(rng.integers(h.n_leaves))
        return f"{k} hierarchy-following districts", ((rank + offset) % h.n_leaves) * k // h.n_leaves
    perm = rng.permutation(h.n_leaves)
    return f"{k} scattered districts", perm[rank] * k // h.n_leaves


def target_coefficients(h: Hierarchy, target: Target | str, seed: int = 0,
                        plan: np.ndarray | None = None) -> np.ndarray:
    """Mean level coefficients (depth,) over the target's districts: its mean Var(E_D) = sum_l a_l v_l (Cor. 3)."""
    return level_coefficients(h, leaf_labels=target_labels(h, target, seed, plan)[1]).mean(axis=1)


def optimal_split(h: Hierarchy, total_budget: float, targets: Target | str | Sequence[Target | str],
                  mechanism: str | NoiseMechanism = "laplace", sensitivity: float = 2.0, *, seed: int = 0,
                  plan: np.ndarray | None = None, min_share: float = 0.0) -> np.ndarray:
    """Per-level budgets summing to ``total_budget`` that minimise the weighted targets' variance.

    Each target enters through its mean level coefficients, weighted by ``weight`` and divided by its
    variance under the equal split, so a weight reads as plain importance (see :func:`split_for_means`).
    """
    items = [targets] if isinstance(targets, (Target, str)) else list(targets)
    if not items:
        raise ValueError("Give at least one target to optimise the split for.")
    ts = [_as_target(t) for t in items]
    means = [target_coefficients(h, t, seed, plan) for t in ts]
    return split_for_means(means, [t.weight for t in ts], total_budget, mechanism, sensitivity, min_share)


def split_for_means(target_coeffs: Sequence[np.ndarray], weights: Sequence[float], total: float,
                    mechanism: str | NoiseMechanism, sensitivity: float, min_share: float = 0.0) -> np.ndarray:
    """Budgets minimising sum_t w_t Var_t(x) / Var_t(equal split) over budgets x summing to ``total``.

    Normalising by the equal-split variance keeps one large target from drowning the others. The
    closed forms (cube-root rule for epsilon, square-root for rho; Cohen et al. 2021, §5.1) are exact
    for noise whose variance scales as 1/budget^2 or 1/budget; for (epsilon, delta) mechanisms, whose
    variance only nearly does, the closed form starts a numerical refinement on the mechanism's own
    variance.
    """
    mech = get_mechanism(mechanism)
    depth = np.asarray(target_coeffs[0]).shape[0]
    v_eq = level_node_variance(np.full(depth, total / depth), mech, sensitivity, estimate=True)
    a = sum(w * np.asarray(c) / max(float(np.dot(c, v_eq)), 1e-300) for w, c in zip(weights, target_coeffs))
    start = split_for_coefficients(a, total, mech.unit, min_share=min_share)
    if not mech.approximate or depth == 1:
        return start
    return _refine_split(a, start, total, mech, sensitivity, min_share)


def _refine_split(a: np.ndarray, start: np.ndarray, total: float, mech: NoiseMechanism, sensitivity: float,
                  min_share: float) -> np.ndarray:
    """Minimise sum_l a_l v_l(x_l) over budgets summing to ``total`` (each at least ``min_share`` of it,
    and positive), from ``start``, on the mechanism's own (interpolated) variance; keeps ``start``
    unless it improves."""
    from scipy.optimize import minimize

    floor = max(min_share, 1e-6) * total
    objective = lambda x: float(np.dot(a, level_node_variance(np.maximum(x, floor), mech, sensitivity,  # noqa: E731
                                                              estimate=True)))
    scale = objective(start)
    res = minimize(lambda x: objective(x) / scale, start, method="SLSQP",
                   bounds=[(floor, total)] * start.size,
                   constraints=[{"type": "eq", "fun": lambda x: (x.sum() - total) / total}],
                   options={"maxiter": 200, "ftol": 1e-10})
    best = np.maximum(res.x, floor)
    best *= total / best.sum()
    return best if np.all(np.isfinite(best)) and objective(best) < objective(start) else start
