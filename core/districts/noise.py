"""What repeated ToyDown / TopDown-lite runs do to district populations (Cohen et al. 2021, §5-7).

Every run noises the whole hierarchy once; a district's noisy population is the sum of its blocks'
noisy counts, so one run serves every district of every plan at once. Seeded runs are simulations,
not releases.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.stats import chi2

from core.census.analytic import (fragmentation_from_coefficients, level_coefficients, level_node_variance,
                                  preset_shares)
from core.contracts import Plan, Progress, Registry, Spec, param, seed_sequence, stream_key
from core.geography.hierarchy import Hierarchy, check_counts
from core.parallel import map_trials
from core.census.toydown import check_budgets, topdown_lite, toydown
from core.privacy.mechanisms import NoParams

def _toydown_leaves(h: Hierarchy, leaf_counts: np.ndarray, eps: np.ndarray, mechanism, sensitivity: float,
                    rng: np.random.Generator, *, nonnegative: bool, integer: bool) -> np.ndarray:
    alpha = toydown(h, leaf_counts, eps, mechanism=mechanism, sensitivity=sensitivity, nonnegative=nonnegative,
                    integer=integer, rng=rng)
    return np.asarray(alpha[h.leaf_nodes], dtype=float)


def _topdown_lite_leaves(h: Hierarchy, leaf_counts: np.ndarray, eps: np.ndarray, mechanism, sensitivity: float,
                         rng: np.random.Generator) -> np.ndarray:
    counts = np.asarray(leaf_counts)
    out = topdown_lite(h, counts if counts.ndim == 2 else counts[:, None], eps, mechanism=mechanism,
                       sensitivity=sensitivity, rng=rng)
    leaf = out[h.leaf_nodes].astype(float)
    return leaf if counts.ndim == 2 else leaf[:, 0]


def _toydown_variant(nonnegative: bool, integer: bool):
    return lambda _params: functools.partial(_toydown_leaves, nonnegative=nonnegative, integer=integer)


@dataclass(frozen=True)
class AlgorithmSpec(Spec):
    """A noising algorithm's Spec, with ``closed_form_note``: why its observed district errors depart from
    plain ToyDown's closed-form sd (Cohen et al. 2021, Cor. 3), shown beside them; empty when they follow it."""

    closed_form_note: str = ""


_AWAY_FROM_CLOSED_FORM = ("The closed-form sd is for plain ToyDown (Cor. 3); non-negativity, rounding and "
                          "TopDown-lite's fitting move the observed errors away from it.")

# ``ALGORITHMS[key].build()`` is ``noise(h, leaf_counts, budgets, mechanism, sensitivity, rng) -> leaf counts``
ALGORITHMS = Registry("noising algorithm", [
    AlgorithmSpec("toydown", "ToyDown (negative counts allowed)", _toydown_variant(False, False), NoParams,
                  "Noise at every node, then a top-down fit that spreads each parent's discrepancy over its children."),
    AlgorithmSpec("toydown_nonneg", "ToyDown, non-negative", _toydown_variant(True, False), NoParams,
                  "ToyDown with the children projected onto non-negative counts that add up to their parent.",
                  closed_form_note=_AWAY_FROM_CLOSED_FORM),
    AlgorithmSpec("toydown_nonneg_int", "ToyDown, non-negative integers", _toydown_variant(True, True), NoParams,
                  "Non-negative ToyDown rounded by largest remainder so the sums still hold.",
                  closed_form_note=_AWAY_FROM_CLOSED_FORM),
    AlgorithmSpec("topdown_lite", "TopDown-lite (non-negative integers, exact state total)",
                  lambda _params: _topdown_lite_leaves, NoParams,
                  "The dashboard's stand-in for TopDown: least squares, non-negative integer counts, exact state "
                  "total.", closed_form_note=_AWAY_FROM_CLOSED_FORM),
])


@dataclass(frozen=True)
class NoiseConfig(Plan):
    """Budgets per level (top first, in the mechanism's unit), mechanism, algorithm, runs and seed."""

    budgets: tuple[float, ...]
    mechanism: str = "laplace"
    sensitivity: float = 2.0
    algorithm: str = param("toydown", label="Noising algorithm", choices=ALGORITHMS.labels(), kind="select")
    runs: int = param(16, label="Runs", low=2, high=1000, help="The paper uses 16 runs.")
    seed: int = param(0, label="Noise seed", low=0, high=1_000_000)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"Unknown algorithm {self.algorithm!r}; choose one of {list(ALGORITHMS)}.")
        if not isinstance(self.budgets, (tuple, list)) or not 1 <= len(self.budgets) <= 20:
            raise ValueError("Give one budget per level of the geography (1 to 20 levels).")
        budgets = []
        for b in self.budgets:
            if isinstance(b, bool) or not isinstance(b, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(float(b)) or not 0 < float(b) <= 1e6:
                raise ValueError(f"Every level's budget must be a positive number up to 1e6; got {b!r}.")
            budgets.append(float(b))
        object.__setattr__(self, "budgets", tuple(budgets))
        if not isinstance(self.mechanism, str) or not self.mechanism:
            raise ValueError("Name the noise mechanism (for example 'laplace').")
        s = self.sensitivity
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or not 0 < s <= 1e6:
            raise ValueError(f"The sensitivity must be a positive number; got {s!r}.")
        for name, v, low, high in (("Runs", self.runs, 2, 5000), ("Noise seed", self.seed, 0, 2**32 - 1)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not low <= int(v) <= high:
                raise ValueError(f"{name} must be a whole number between {low} and {high:,}; got {v!r}.")


def noisy_leaf_counts(h: Hierarchy, leaf_counts: np.ndarray, config: NoiseConfig,
                      rng: np.random.Generator) -> np.ndarray:
    """One run of the chosen algorithm; the noisy count of every leaf (same shape as ``leaf_counts``)."""
    eps = check_budgets(h, config.budgets)
    noise = ALGORITHMS[config.algorithm].build()
    return noise(h, leaf_counts, eps, config.mechanism, config.sensitivity, rng)


def sd_interval(sd: np.ndarray, runs: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Chi-square confidence interval for a standard deviation estimated from ``runs`` draws."""
    a = (1 - level) / 2
    df = runs - 1
    return sd * np.sqrt(df / chi2.ppf(1 - a, df)), sd * np.sqrt(df / chi2.ppf(a, df))


# ------------------------------------------------------------------------- ensembles
def membership_matrix(labels_or_masks: np.ndarray) -> sparse.csr_matrix:
    """Sparse (n_leaves, n_districts) 0/1 matrix from plans (n_plans, n_leaves labels) or masks (n_leaves, m)."""
    arr = np.asarray(labels_or_masks)
    if arr.dtype == bool:
        return sparse.csr_matrix(arr.astype(float))
    n_plans, n_leaves = arr.shape
    k = int(arr.max()) + 1
    cols = (arr + k * np.arange(n_plans)[:, None]).ravel()
    rows = np.tile(np.arange(n_leaves), n_plans)
    return sparse.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n_leaves, n_plans * k))


def ensemble_coefficients(h: Hierarchy, labels_or_masks: np.ndarray) -> np.ndarray:
    """Level coefficients a (depth, n_districts) of every district (plans: labels; generators: masks)."""
    arr = np.asarray(labels_or_masks)
    if arr.dtype == bool:
        return np.hstack([level_coefficients(h, leaf_mask=arr[:, i:i + 64].astype(float))
                          for i in range(0, arr.shape[1], 64)])
    return np.hstack([level_coefficients(h, leaf_labels=plan) for plan in arr])


def _district_errors(index: int, rng: np.random.Generator, h: Hierarchy, pop: np.ndarray, config: NoiseConfig,
                     mats: Mapping[str, sparse.csr_matrix]) -> dict[str, np.ndarray]:
    """One noisy run of the hierarchy, summed into every district of every generator."""
    leaf_err = noisy_leaf_counts(h, pop, config, rng) - pop
    return {g: m.T @ leaf_err for g, m in mats.items()}


def ensemble_study(h: Hierarchy, population: np.ndarray, generators: Mapping[str, np.ndarray],
                   total_budget: float, splits=("equal", "tract-heavy", "block-heavy"), runs: int = 16,
                   mechanism: str = "laplace", sensitivity: float = 2.0, algorithm: str = "toydown",
                   seed: int = 0, progress: Progress | None = None) -> pd.DataFrame:
    """District error across ensembles (Fig. 4 and Fig. 6 analogues): one row per generator x split x district
    with Frag, w_1^2, mean observed |E_D| over ``runs``, empirical and analytic ToyDown variance."""
    pop = np.asarray(check_counts(population, "Block populations", nonnegative=True), dtype=np.int64)
    if not generators:
        raise ValueError("Give the districts of at least one generator to compare.")
    mats = {g: membership_matrix(x) for g, x in generators.items()}
    coef = {g: ensemble_coefficients(h, x) for g, x in generators.items()}
    frames = []
    for split in splits:
        budgets = tuple(total_budget * preset_shares(split, h.depth))
        cfg = NoiseConfig(budgets, mechanism, sensitivity, algorithm, runs, seed)
        work = functools.partial(_district_errors, h=h, pop=pop, config=cfg, mats=mats)
        # one child stream per run of each split, keyed by the split's name (not its place in the list): the
        # numbers depend neither on where the runs execute nor on which other splits are studied
        outs = map_trials(work, range(int(runs)), seed=seed_sequence(seed, stream_key("ensemble"), stream_key(split)),
                          n_jobs=1, progress=progress, label=f"Noisy runs ({split} split)")
        errs = {g: [out[g] for out in outs] for g in generators}
        v = level_node_variance(budgets, mechanism, sensitivity)
        for g in generators:
            e = np.vstack(errs[g])
            size = np.asarray(mats[g].sum(axis=0)).ravel()
            keep = size > 0
            frames.append(pd.DataFrame({
                "generator": g, "split": split, "district": np.arange(keep.sum()),
                "fragmentation": fragmentation_from_coefficients(coef[g][:, keep]), "w1_squared": coef[g][0, keep],
                "mean_abs_error": np.abs(e[:, keep]).mean(axis=0), "empirical_variance": e[:, keep].var(axis=0, ddof=1),
                "analytic_variance": v @ coef[g][:, keep], "depth": h.depth,
                "eps_equal_line": total_budget}))
    return pd.concat(frames, ignore_index=True)


def equal_split_line(frag: np.ndarray, w1_squared: float, depth: int, total_budget: float,
                     sensitivity: float = 2.0) -> np.ndarray:
    """Var(E_D) = 2 s^2 d^2 / eps^2 (w_1^2 + Frag) under the equal split (Cohen et al. 2021, §6; 8 d^2/eps^2 for s=2)."""
    return 2 * sensitivity ** 2 * depth ** 2 / total_budget ** 2 * (w1_squared + np.asarray(frag))
