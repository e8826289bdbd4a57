"""ToyDown variants against TopDown-lite on the same counts (simulation, not a release).

Person types are simulated by splitting each leaf's population over ``n_types`` groups with
shares that vary between neighbourhoods (one Dirichlet draw per parent of the leaves), so the
non-negativity constraints bind where groups are small, as in real block data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.census.geography_data import Hierarchy
from core.census.toydown import detailed_histogram, topdown_lite, total_histogram, toydown
from core.census.checks import choice, number
from core.contracts import Plan, named_rng, param, whole_number
from core.privacy.mechanisms import MECHANISMS, NoiseMechanism, get_mechanism

# Above this many leaves the comparison (several typed runs) takes seconds, so the page runs it
# only when the curator asks.
LARGE_TREE = 200_000
WEIGHTS = {"unweighted": "Unweighted", "inverse_variance": "Inverse-variance"}


@dataclass(frozen=True)
class AlgorithmPlan(Plan):
    """Settings of the ToyDown / TopDown-lite comparison (the budgets come from the allocation).

    ``exact_level`` -1 publishes only the total exactly; m >= 0 publishes every count through level m.
    """

    n_types: int = param(4, label="Person types", low=1, high=12)
    detailed_share: float = param(0.5, label="Detailed histogram share", low=0.05, high=1.0, step=0.05,
                                  kind="slider", help="The rest goes to the total-population histogram.")
    root_total: bool = True
    exact_level: int = param(-1, label="Also publish exactly", kind="select")      # its menu is the tree's levels
    weights: str = "unweighted"
    runs: int = param(3, label="Runs", low=1, high=20, kind="slider")
    seed: int = 0

    def __post_init__(self) -> None:
        whole_number(self.n_types, "The number of person types", 1, 20)
        whole_number(self.runs, "The comparison's runs", 1, 50)
        whole_number(self.exact_level, "The exact level", -1, 10)
        whole_number(self.seed, "The seed", 0, 2**63 - 1)
        number(self.detailed_share, "The detailed histogram's share", 0.0, 1.0, open_low=True)
        choice(self.weights, "weights", WEIGHTS)
        if not isinstance(self.root_total, bool):
            raise ValueError("root_total must be true or false.")


def runtime_estimate(n_leaves: int, runs: int, n_types: int) -> int:
    """Seconds the comparison takes on this machine, roughly (measured: about 500,000 leaf-type-runs a second)."""
    return max(1, math.ceil(int(n_leaves) * int(runs) * int(n_types) / 500_000))


def simulate_types(h: Hierarchy, leaf_counts: np.ndarray, n_types: int, rng: np.random.Generator) -> np.ndarray:
    """Split each leaf's count over types with neighbourhood-level shares (Dirichlet(0.7) per parent)."""
    if h.depth < 2:
        raise ValueError("The comparison needs at least two levels.")
    parent_local = h.parent[h.leaf_nodes] - h.level_offsets[h.depth - 2]
    shares = rng.dirichlet(np.full(n_types, 0.7), size=int(h.level_sizes()[h.depth - 2]))[parent_local]
    return rng.multinomial(np.asarray(leaf_counts, dtype=np.int64), shares)


def compare_algorithms(h: Hierarchy, leaf_counts, budgets, config: AlgorithmPlan,
                       pure_mechanism: str | NoiseMechanism = "laplace", sensitivity: float = 2.0,
                       progress=None) -> pd.DataFrame:
    """Tidy errors per algorithm and level: MAE of unit totals, share of negative cells, L1 error of leaves.

    L1 error is sum over leaves and types of |alpha - a| / (2 x total), the Census validator's measure.
    ``pure_mechanism`` is the allocation's mechanism (the built object, or its id); ToyDown's runs draw
    from it and TopDown-lite from its integer counterpart, each built once here.
    """
    if h.depth < 2:
        raise ValueError("The comparison needs at least two levels.")
    if config.exact_level >= h.depth - 1:
        raise ValueError(f"Publishing every count through level {config.exact_level} leaves nothing noisy; "
                         f"choose a level above {h.level_names[-1]}.")
    typed = simulate_types(h, leaf_counts, config.n_types,
                           named_rng(config.seed, "person types"))
    true = h.aggregate(typed)
    total = true[0].sum()
    mech = get_mechanism(pure_mechanism)
    # TopDown-lite draws integer noise: the geometric for epsilon budgets (pure DP, so it also meets any
    # (epsilon, delta) the allocation promises) and the discrete Gaussian for rho budgets.
    discrete_key = "geometric" if mech.unit == "epsilon" else "discrete_gaussian"
    discrete = get_mechanism(discrete_key, MECHANISMS[discrete_key].params())
    if config.detailed_share < 1:
        hists, shares = [detailed_histogram(config.n_types), total_histogram(config.n_types)], \
            (config.detailed_share, 1 - config.detailed_share)
    else:
        hists, shares = [detailed_histogram(config.n_types)], (1.0,)
    algorithms = {
        "ToyDown (negatives allowed)": lambda rng: toydown(h, typed, budgets, mech, sensitivity, rng=rng),
        "ToyDown non-negative integer": lambda rng: toydown(h, typed, budgets, mech, sensitivity,
                                                            nonnegative=True, integer=True, rng=rng),
        "TopDown-lite": lambda rng: topdown_lite(
            h, typed, budgets, hists, shares, invariants=("root_total",) if config.root_total else (),
            exact_level=None if config.exact_level < 0 else config.exact_level, weights=config.weights,
            mechanism=discrete, sensitivity=sensitivity, rng=rng),
    }
    rows = []
    steps = len(algorithms) * config.runs
    done = 0
    for name, run in algorithms.items():
        rng = named_rng(config.seed, "algorithm noise", name)   # each algorithm its own stream
        for r in range(int(config.runs)):
            alpha = run(rng)
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
