"""The Budget allocation page's computation: config in, tidy tables out (no UI code here).

Given a total budget, a hierarchy, a split rule, targets and a mechanism, it reports per-level noise,
the analytic ToyDown error of each target (Cohen et al. 2021, Cor. 3) beside a seeded Monte Carlo
ToyDown estimate, the paper's Figure 2 curves, the Table 1 presets, and the split that minimises the
targets' variance (cube-root rule for epsilon, square-root rule for rho).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from core.census.allocation import Allocation
from core.census.analytic import (PRESETS, level_coefficients, level_node_variance, preset_shares,
                                  split_for_coefficients, unit_coefficients)
from core.census.hierarchy import Hierarchy
from core.census.toydown import consistent_top_down, draw_node_noise
from core.privacy.mechanisms import get_mechanism

STYLISED_NAMES = ("state", "county", "tract", "block group", "block")


@dataclass(frozen=True)
class BudgetConfig:
    """Every choice on the Budget allocation page; the seed makes the simulation reproducible."""

    total: float = 1.0
    unit: str = "epsilon"
    delta: float | None = None
    hierarchy: str = "stylised"              # "stylised" or "georgia"
    fanouts: tuple[int, ...] = (20, 10, 4, 12)
    split: str = "preset"                    # "preset", "custom" or "optimise"
    preset: str = "equal"
    custom_shares: tuple[float, ...] = ()
    targets: tuple[str, ...] = ("leaf", "unit:2", "greedy:4", "scattered:4")
    target_weights: tuple[float, ...] = ()   # importance of each target in the recommended split; () = equal
    district_plan: tuple[int, ...] = ()      # district label per leaf for the "plan" target (a user's plan)
    mechanism: str = "laplace"
    sensitivity: float = 2.0
    runs: int = 30
    seed: int = 0
    nonnegative: bool = False
    fig2_fanouts: tuple[int, int] = (10, 10)


@dataclass(frozen=True)
class GeographyData:
    """A hierarchy with its leaf populations and a description of where they come from."""

    hierarchy: Hierarchy
    leaf_counts: np.ndarray = field(repr=False)
    source: str
    leaf_ids: np.ndarray | None = field(default=None, repr=False)   # block GEOIDs, when the leaves have them


@dataclass
class BudgetResult:
    """Tables behind every output of the page (tidy DataFrames) plus the allocation itself."""

    allocation: Allocation
    levels: pd.DataFrame
    targets: pd.DataFrame
    figure2: pd.DataFrame
    figure2_optimum: pd.DataFrame
    presets_levels: pd.DataFrame
    presets_targets: pd.DataFrame
    recommendation: pd.DataFrame
    recommended_budgets: tuple[float, ...]
    source: str


# ------------------------------------------------------------------------------ geography
def stylised_geography(fanouts: tuple[int, ...], seed: int = 0) -> GeographyData:
    """Homogeneous tree with the given fan-outs; leaf populations Poisson(50) from the seed."""
    h = Hierarchy.homogeneous(fanouts, stylised_level_names(len(fanouts) + 1))
    if h.n_leaves > 2_000_000:
        raise ValueError(f"{h.n_leaves:,} leaves is too many for the page; keep it under 2 million.")
    counts = np.random.default_rng(seed).poisson(50, h.n_leaves)
    return GeographyData(h, counts, f"stylised homogeneous tree {' x '.join(map(str, fanouts))} "
                                    f"({h.n_leaves:,} leaves, populations simulated as Poisson(50))")


def georgia_geography(seed: int = 0) -> GeographyData:
    """Georgia: synthetic blocks under real counties when available, else the 159 real counties."""
    try:
        from core.districts.geography import load_georgia_blocks
    except ImportError:
        load_georgia_blocks = None
    if load_georgia_blocks is not None:
        geo = load_georgia_blocks(seed=seed)
        return GeographyData(geo.hierarchy, np.asarray(geo.blocks["total"], dtype=np.int64),
                             "Georgia: synthetic blocks nested in the real counties (state > county > tract > "
                             "block group > block)", geo.blocks["GEOID"].to_numpy())
    try:
        from core.datasets import load_georgia_counties
    except ImportError:
        raise ValueError("The Georgia geography is not installed yet; choose the stylised hierarchy.") from None
    gdf = load_georgia_counties()
    h = Hierarchy.from_unit_ids([gdf["GEOID"].astype(str).to_numpy()], ("state", "county"))
    return GeographyData(h, gdf["TotPop90"].to_numpy(dtype=np.int64),
                         "Georgia: the 159 real counties (1990 populations) under the state; the synthetic "
                         "block-level geography is not available, so this tree has two levels")


def stylised_level_names(depth: int) -> tuple[str, ...]:
    """Census-like names for a stylised tree, read from the block upwards (three fan-outs give county >
    tract > block group > block, as on the district maps' grid county, so an allocation made here loads
    there); 'nation' tops six levels."""
    if depth <= 1:
        return ("block",)
    if depth <= len(STYLISED_NAMES):
        return STYLISED_NAMES[len(STYLISED_NAMES) - depth:]
    if depth == len(STYLISED_NAMES) + 1:
        return ("nation",) + STYLISED_NAMES
    return tuple(f"level {i}" for i in range(depth))


@functools.lru_cache(maxsize=8)
def load_geography(kind: str, fanouts: tuple[int, ...], seed: int) -> GeographyData:
    """The geography a config asks for (cached per process)."""
    if kind == "stylised":
        return stylised_geography(tuple(int(f) for f in fanouts), seed)
    if kind == "georgia":
        return georgia_geography(seed)
    raise ValueError(f"Unknown hierarchy {kind!r}; choose 'stylised' or 'georgia'.")


# -------------------------------------------------------------------------------- targets
def target_labels(h: Hierarchy, spec: str, rng: np.random.Generator,
                  plan: np.ndarray | None = None) -> tuple[str, np.ndarray]:
    """Name and per-leaf district labels of a target spec ('leaf', 'unit:L', 'greedy:k', 'scattered:k', or
    'plan' for the districts of ``plan``, one label per leaf such as a plan from the district maps page)."""
    kind, _, arg = spec.partition(":")
    if kind == "plan":
        labels = np.asarray(plan if plan is not None else (), dtype=np.int64)
        if labels.shape != (h.n_leaves,) or (labels < 0).any():
            raise ValueError(f"The district plan needs one district per {h.level_names[-1]} "
                             f"({h.n_leaves:,}); load a plan made for this geography.")
        _, labels = np.unique(labels, return_inverse=True)
        return f"your {labels.max() + 1}-district plan", labels
    if kind == "leaf":
        return f"one {h.level_names[-1]}", np.arange(h.n_leaves)
    if kind == "unit":
        lvl = int(arg)
        if not 0 <= lvl < h.depth:
            raise ValueError(f"Whole-unit target level {lvl} is not in this hierarchy (levels 0..{h.depth - 1}).")
        return f"whole {h.level_names[lvl]}", h.ancestors_at(lvl) - h.level_offsets[lvl]
    if kind in ("greedy", "scattered"):
        k = int(arg)
        if not 1 <= k <= h.n_leaves:
            raise ValueError(f"The number of districts must be between 1 and {h.n_leaves}.")
        rank = h.leaf_nodes - h.level_offsets[h.depth - 1]   # position in storage (label) order
        if kind == "greedy":
            # Greedy (Alg. 3) on a labelled tree: equal runs of consecutive leaves from a random offset
            offset = int(rng.integers(h.n_leaves))
            return f"{k} hierarchy-following districts", ((rank + offset) % h.n_leaves) * k // h.n_leaves
        perm = rng.permutation(h.n_leaves)
        return f"{k} scattered districts", perm[rank] * k // h.n_leaves
    raise ValueError(f"Unknown target {spec!r}; use leaf, unit:<level>, greedy:<k>, scattered:<k> or plan.")


def _split_budgets(config: BudgetConfig, h: Hierarchy, target_coeffs: list[np.ndarray]) -> np.ndarray:
    if config.split == "preset":
        return config.total * preset_shares(config.preset, h.depth)
    if config.split == "custom":
        shares = np.asarray(config.custom_shares, dtype=float)
        if shares.shape[0] != h.depth:
            raise ValueError(f"Give one share per level ({h.depth}); got {shares.shape[0]}.")
        if np.any(shares <= 0):
            raise ValueError("Every level needs a positive share of the budget; raise the zero sliders.")
        return config.total * shares / shares.sum()
    if config.split == "optimise":
        return recommended_split(config, target_coeffs)
    raise ValueError(f"Unknown split rule {config.split!r}; use preset, custom or optimise.")


def recommended_split(config: BudgetConfig, target_coeffs: list[np.ndarray]) -> np.ndarray:
    """Budgets minimising the weighted sum of each target's variance relative to its equal-split variance.

    Normalising by the equal-split variance keeps one large target from drowning the others, so a
    weight reads as plain importance (weight 2 = twice as important); every level keeps at least
    0.5% of the budget so each node still gets finite noise.
    """
    depth = target_coeffs[0].shape[0]
    weights = config.target_weights or (1.0,) * len(target_coeffs)
    v_eq = level_node_variance(np.full(depth, config.total / depth), config.mechanism, config.sensitivity)
    a = sum(w * c / max(float(np.dot(c, v_eq)), 1e-300) for w, c in zip(weights, target_coeffs))
    return split_for_coefficients(a, config.total, get_mechanism(config.mechanism).unit, min_share=0.005)


# ---------------------------------------------------------------------------------- run
def _check(config: BudgetConfig) -> None:
    mech = get_mechanism(config.mechanism)
    if config.unit != mech.unit:
        raise ValueError(f"The {mech.label} mechanism spends {mech.unit}; switch the unit or the mechanism.")
    if not config.total > 0:
        raise ValueError("The total budget must be positive.")
    if config.unit == "rho" and not (config.delta and 0 < config.delta < 1):
        raise ValueError("Under rho (zCDP) give a delta between 0 and 1 to state the (epsilon, delta) guarantee.")
    if not 0 <= config.runs <= 2000:
        raise ValueError("Runs must be between 0 and 2,000.")
    if not config.targets:
        raise ValueError("Pick at least one target.")
    if config.target_weights:
        w = np.asarray(config.target_weights, dtype=float)
        if w.shape != (len(config.targets),) or not np.all(np.isfinite(w)) or (w < 0).any() or not (w > 0).any():
            raise ValueError("Give one non-negative weight per target, at least one of them positive.")


def run_budget_plan(config: BudgetConfig, progress=None) -> BudgetResult:
    """Everything the Budget allocation page shows for one configuration (analytic + seeded simulation)."""
    _check(config)
    geo = load_geography(config.hierarchy, tuple(config.fanouts), int(config.seed))
    h = geo.hierarchy
    rng = np.random.default_rng(config.seed)
    plan = np.asarray(config.district_plan, dtype=np.int64) if config.district_plan else None
    targets = [target_labels(h, spec, rng, plan) for spec in config.targets]
    coeffs = [level_coefficients(h, leaf_labels=labels) for _, labels in targets]
    mean_coeffs = [c.mean(axis=1) for c in coeffs]
    budgets = _split_budgets(config, h, mean_coeffs)
    alloc = Allocation(h.level_names, tuple(budgets), config.unit, config.mechanism, config.sensitivity,
                       config.delta if config.unit == "rho" else None)
    v = level_node_variance(budgets, config.mechanism, config.sensitivity)
    unit_coeffs = [unit_coefficients(h, lvl).mean(axis=1) for lvl in range(h.depth)]
    levels = _levels_table(h, config, budgets, v, unit_coeffs)
    target_table = _targets_table(h, geo, config, targets, coeffs, budgets, v, rng, progress)
    presets_levels, presets_targets, recommendation = _compare_splits(h, config, budgets, unit_coeffs,
                                                                      [n for n, _ in targets], mean_coeffs)
    fig2, fig2_opt = figure2_curves(config.fig2_fanouts, config.total, config.mechanism, config.sensitivity)
    return BudgetResult(alloc, levels, target_table, fig2, fig2_opt, presets_levels, presets_targets,
                        recommendation, tuple(recommendation.attrs["budgets"]), geo.source)


def _levels_table(h: Hierarchy, config: BudgetConfig, budgets, v, unit_coeffs) -> pd.DataFrame:
    mech = get_mechanism(config.mechanism)
    scales = np.atleast_1d(mech.scale_for(config.sensitivity, budgets))
    sizes = h.level_sizes()
    fan = np.append(h.mean_fanouts(), np.nan)
    return pd.DataFrame({
        "level": list(h.level_names), "units": sizes, "mean children": fan,
        f"budget ({config.unit})": budgets, "share": budgets / budgets.sum(),
        "noise scale": scales, "node noise variance": v,
        "whole-unit error sd": [math.sqrt(float(np.dot(c, v))) for c in unit_coeffs]})


def _targets_table(h, geo, config, targets, coeffs, budgets, v, rng, progress) -> pd.DataFrame:
    analytic = [np.sqrt(np.mean(v @ c)) for c in coeffs]
    runs = int(config.runs)
    sq = np.zeros((len(targets), runs))
    absval = np.zeros((len(targets), runs))
    counts = h.aggregate(geo.leaf_counts).astype(float)
    leaf_slice = h.level_slice(h.depth - 1)
    for r in range(runs):
        noise = draw_node_noise(h, budgets, config.mechanism, config.sensitivity, rng=rng)
        alpha = consistent_top_down(h, counts + noise, nonnegative=config.nonnegative)
        err_leaf = (alpha - counts)[h.leaf_nodes]
        for i, (_, labels) in enumerate(targets):
            e = np.bincount(labels, weights=err_leaf)
            sq[i, r] = np.mean(e * e)
            absval[i, r] = np.mean(np.abs(e))
        if progress is not None and (r % 5 == 4 or r == runs - 1):
            progress(r + 1, runs, "ToyDown runs")
    rows = []
    for i, (name, labels) in enumerate(targets):
        row = {"target": name, "units": int(labels.max()) + 1, "analytic sd": float(analytic[i]),
               "simulated sd": np.nan, "sd 95% low": np.nan, "sd 95% high": np.nan,
               "simulated mean |error|": np.nan, "runs": runs}
        if runs >= 2:
            mean_sq = float(sq[i].mean())
            half = stats.t.ppf(0.975, runs - 1) * sq[i].std(ddof=1) / math.sqrt(runs)
            row.update({"simulated sd": math.sqrt(mean_sq), "sd 95% low": math.sqrt(max(mean_sq - half, 0.0)),
                        "sd 95% high": math.sqrt(mean_sq + half), "simulated mean |error|": float(absval[i].mean())})
        rows.append(row)
    return pd.DataFrame(rows)


def _compare_splits(h, config, budgets, unit_coeffs, target_names, target_coeffs):
    splits = {name: config.total * preset_shares(name, h.depth) for name in PRESETS}
    splits["current"] = np.asarray(budgets)
    recommended = recommended_split(config, target_coeffs)
    splits["recommended"] = recommended
    lv_rows, tg_rows = [], []
    for name, b in splits.items():
        v = level_node_variance(b, config.mechanism, config.sensitivity)
        for lvl, c in enumerate(unit_coeffs):
            lv_rows.append({"split": name, "level": h.level_names[lvl], "sd": math.sqrt(float(np.dot(c, v)))})
        for tname, c in zip(target_names, target_coeffs):
            tg_rows.append({"split": name, "target": tname, "sd": math.sqrt(float(np.dot(c, v)))})
    v_eq = level_node_variance(splits["equal"], config.mechanism, config.sensitivity)
    v_rec = level_node_variance(recommended, config.mechanism, config.sensitivity)
    v_cur = level_node_variance(budgets, config.mechanism, config.sensitivity)
    rec_rows = []
    for tname, c in zip(target_names, target_coeffs):
        eq, rec, cur = (math.sqrt(float(np.dot(c, x))) for x in (v_eq, v_rec, v_cur))
        rec_rows.append({"target": tname, "sd equal split": eq, "sd recommended": rec, "sd current": cur,
                         "gain over equal (%)": 100.0 * (1.0 - rec / eq)})
    rec_table = pd.DataFrame(rec_rows)
    rec_table.attrs["budgets"] = recommended.tolist()
    return pd.DataFrame(lv_rows), pd.DataFrame(tg_rows), rec_table


def figure2_curves(fanouts: tuple[int, int] = (10, 10), total: float = 1.0, mechanism: str = "laplace",
                   sensitivity: float = 2.0, bottom_shares=(0.5, 0.6, 0.7, 0.79, 0.85, 0.9),
                   points: int = 99) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Leaf variance of a 3-level homogeneous tree against eps_1/(eps_1+eps_2), one curve per bottom share.

    The analogue of Cohen et al. 2021, Fig. 2 (n1 = n2 = 10, epsilon = 1); the optimum (cube-root
    rule, square-root under rho) is returned as a second table.
    """
    h = Hierarchy.homogeneous(list(fanouts))
    c = level_coefficients(h, leaf_labels=np.r_[0, np.full(h.n_leaves - 1, -1)])[:, 0]
    x = np.linspace(0.01, 0.99, points)
    rows = []
    for b3 in bottom_shares:
        upper = (1.0 - b3) * total
        for xi in x:
            budgets = np.array([xi * upper, (1 - xi) * upper, b3 * total])
            rows.append({"bottom share": b3, "top share of upper levels": xi,
                         "leaf variance": float(np.dot(c, level_node_variance(budgets, mechanism, sensitivity)))})
    best = split_for_coefficients(c, total, get_mechanism(mechanism).unit)
    opt = pd.DataFrame([{"bottom share": best[2] / total, "top share of upper levels": best[0] / (best[0] + best[1]),
                         "leaf variance": float(np.dot(c, level_node_variance(best, mechanism, sensitivity))),
                         "budgets": tuple(round(float(b), 4) for b in best)}])
    return pd.DataFrame(rows), opt
