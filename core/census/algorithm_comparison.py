"""ToyDown variants against TopDown-lite on the same counts (simulation, not a release).

Person types are simulated by splitting each leaf's population over ``n_types`` groups with
shares that vary between neighbourhoods (one Dirichlet draw per parent of the leaves), so the
non-negativity constraints bind where groups are small, as in real block data.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.census.hierarchy import Hierarchy
from core.census.toydown import detailed_histogram, topdown_lite, total_histogram, toydown


@dataclass(frozen=True)
class AlgorithmConfig:
    """Settings of the ToyDown / TopDown-lite comparison."""

    n_types: int = 4
    detailed_share: float = 0.5
    root_total: bool = True
    exact_level: int = -1
    weights: str = "unweighted"
    runs: int = 3
    seed: int = 0


def simulate_types(h: Hierarchy, leaf_counts: np.ndarray, n_types: int, rng: np.random.Generator) -> np.ndarray:
    """Split each leaf's count over types with neighbourhood-level shares (Dirichlet(0.7) per parent)."""
    if h.depth < 2:
        raise ValueError("The comparison needs at least two levels.")
    parent_local = h.parent[h.leaf_nodes] - h.level_offsets[h.depth - 2]
    shares = rng.dirichlet(np.full(n_types, 0.7), size=int(h.level_sizes()[h.depth - 2]))[parent_local]
    return rng.multinomial(np.asarray(leaf_counts, dtype=np.int64), shares)


def compare_algorithms(h: Hierarchy, leaf_counts, budgets, config: AlgorithmConfig,
                       pure_mechanism: str = "laplace", sensitivity: float = 2.0, progress=None) -> pd.DataFrame:
    """Tidy errors per algorithm and level: MAE of unit totals, share of negative cells, L1 error of leaves.

    L1 error is sum over leaves and types of |alpha - a| / (2 x total), the Census validator's measure.
    """
    if not 1 <= config.n_types <= 20:
        raise ValueError("Use between 1 and 20 person types.")
    if not 0 < config.detailed_share <= 1:
        raise ValueError("The detailed histogram's share must lie in (0, 1].")
    rng = np.random.default_rng(config.seed)
    typed = simulate_types(h, leaf_counts, config.n_types, rng)
    true = h.aggregate(typed)
    total = true[0].sum()
    discrete = "geometric" if pure_mechanism in ("laplace", "geometric") else "discrete_gaussian"
    if config.detailed_share < 1:
        hists, shares = [detailed_histogram(config.n_types), total_histogram(config.n_types)], \
            (config.detailed_share, 1 - config.detailed_share)
    else:
        hists, shares = [detailed_histogram(config.n_types)], (1.0,)
    algorithms = {
        "ToyDown (negatives allowed)": lambda: toydown(h, typed, budgets, pure_mechanism, sensitivity, rng=rng),
        "ToyDown non-negative integer": lambda: toydown(h, typed, budgets, pure_mechanism, sensitivity,
                                                        nonnegative=True, integer=True, rng=rng),
        "TopDown-lite": lambda: topdown_lite(
            h, typed, budgets, hists, shares, invariants=("root_total",) if config.root_total else (),
            exact_level=None if config.exact_level < 0 else config.exact_level, weights=config.weights,
            mechanism=discrete, sensitivity=sensitivity, rng=rng),
    }
    rows = []
    steps = len(algorithms) * config.runs
    done = 0
    for name, run in algorithms.items():
        for r in range(int(config.runs)):
            alpha = run()
            err = alpha - true
            leaf_err = err[h.level_slice(h.depth - 1)]
            l1 = float(np.abs(leaf_err).sum() / (2.0 * total)) if total > 0 else np.nan
            for lvl in range(h.depth):
                sl = h.level_slice(lvl)
                rows.append({"algorithm": name, "run": r, "level": h.level_names[lvl],
                             "MAE of unit totals": float(np.mean(np.abs(err[sl].sum(axis=1)))),
                             "share of negative cells": float(np.mean(alpha[sl] < 0)),
                             "leaf L1 error": l1, "total error": float(alpha[0].sum() - total)})
            done += 1
            if progress is not None:
                progress(done, steps, name)
    return pd.DataFrame(rows)
