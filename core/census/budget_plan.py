"""The Budget allocation page as a plan: every choice in one frozen :class:`BudgetPlan`, one ``run``.

Given a total budget, a geography, a split rule, targets and a noise mechanism, ``run`` reports the
per-level noise, the analytic ToyDown error of each target (Cohen et al. 2021, Cor. 3) beside a
seeded Monte Carlo ToyDown estimate, the paper's Figure 2 curves, the Table 1 presets and the split
that minimises the targets' weighted variance (cube-root rule for epsilon, square-root rule for rho).
Each tab's sub-plan (ToyDown vs TopDown-lite, mechanism comparison, public information) runs as its
own cached sub-run, so changing one tab does not recompute the others.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from core.cache import cached, cached_call
from core.census.algorithm_comparison import LARGE_TREE, AlgorithmPlan, compare_algorithms
from core.census.allocation import Allocation
from core.census.checks import number as _finite
from core.census.analytic import (PRESETS, level_coefficients, level_node_variance, preset_shares,
                                  split_for_coefficients, unit_coefficients)
from core.census.targets import parse_target, split_for_means, target_labels
from core.census.geography_data import (GEOGRAPHIES, GeographyData, Hierarchy, check_fanouts, load_geography)
from core.census.mechanism_comparison import MechanismSweepPlan, generalized_gaussian_advantage, mechanism_sweep
from core.census.public_info import (PublicInfoPlan, beta_equicorrelated, delta_z_grid, dpz_statement,
                                     invariant_effects, wem_comparison)
from core.census.toydown import MAX_LEVEL_BUDGET, consistent_top_down, draw_node_noise
from core.contracts import DataRef, Plan, Result, bytes_fingerprint, param, seed_sequence, stream_key, whole_number
from core.parallel import map_trials
from core.privacy.mechanisms import (MECHANISMS, AnalyticGaussianParams, GeneralizedGaussianParams, NoParams,
                                     NoiseMechanism, get_mechanism)

SPLITS = {"preset": "Preset from the paper", "custom": "Custom sliders", "optimise": "Optimise for my targets"}
SIMULATION = "Simulation, not a release: seeded floating-point noise for illustration only."
#: Smallest delta a plan takes: below it calibrations lose their precision (and no release needs it).
MIN_DELTA = 1e-15
UNITS = {"epsilon": "epsilon", "rho": "rho"}
#: The delta values the page offers (a plan may hold any delta in (0, 0.1]).
DELTA_MENU = {d: f"{d:.0e}" for d in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)}
#: Where a rho budget's sensitivity starts: the l2 sensitivity of moving one person between two cells,
#: sqrt(2), to four places.
RHO_SENSITIVITY = 1.4142


@dataclass(frozen=True)
class TargetSettings:
    """The two numbers a curator gives about the targets besides which ones: ``k``, how many districts
    the district targets draw (it is written into each of them, ``"greedy:k"``), and ``weight``, one
    target's entry of :attr:`BudgetPlan.target_weights`. Declared once here with what the page
    offers; a plan itself may hold any k its targets accept and any weight up to 1,000,000."""

    k: int = param(4, label="k districts", low=1, high=10_000,
                   help="How many districts the hierarchy-following and scattered targets each draw.")
    weight: float = param(1.0, label="Importance", low=0.0, high=100.0, step=0.5,
                          help="Against the target's own equal-split variance: 2 counts it twice, 0 leaves it "
                               "out of the optimisation (it is still reported).")


@dataclass(frozen=True)
class BudgetPlan(Plan):
    """Every choice on the Budget allocation page. The seed makes every simulated number reproducible.

    ``data`` names the geography ("stylised" or "georgia"), or an uploaded district plan (a
    block-assignment CSV on Georgia) by its fingerprint: ``run`` then takes the CSV's bytes.
    ``mechanism`` is a registry key of ``core.privacy.mechanisms`` with its ``mechanism_params``; an
    (epsilon, delta) mechanism gets ``delta`` (the release's total) split evenly over the levels.
    ``algorithms``, ``mechanisms`` and ``public`` are the tabs' sub-plans (None: the tab has not been
    asked to run; the page adds a tab's sub-plan once the curator opens it).
    """

    data: DataRef = DataRef("stylised")
    fanouts: tuple[int, ...] = (20, 10, 4, 12)
    total: float = param(1.0, label="Total budget", low=0.001, high=100.0, step=0.1)
    unit: str = param("epsilon", label="Budget unit", choices=UNITS,
                      help="epsilon: pure DP (Laplace, geometric) or (epsilon, delta)-DP (analytic and Generalized "
                           "Gaussian). rho: zero-concentrated DP (Gaussian mechanisms).")
    delta: float | None = param(None, label="delta", choices=DELTA_MENU, kind="select_slider")
    split: str = param("preset", label="Split across levels", choices=SPLITS)
    preset: str = param("equal", label="Preset (Cohen et al. 2021, Table 1)", choices=tuple(PRESETS), kind="select")
    custom_shares: tuple[float, ...] = ()
    mechanism: str = param("laplace", label="Mechanism", choices=MECHANISMS.labels(), kind="select",
                           help=" ".join(f"{s.label}: {s.help}" for s in MECHANISMS.values()))
    mechanism_params: NoParams | AnalyticGaussianParams | GeneralizedGaussianParams = NoParams()
    sensitivity: float = param(
        2.0, label="Sensitivity", low=0.1, high=100.0, step=0.1,
        help="Bounded DP moves one person between two cells: l1 sensitivity 2 (pure DP), l2 sensitivity "
             "sqrt(2) (zCDP). Use 1 for add/remove-one neighbours. The Generalized Gaussian takes the number of "
             "counts one person changes by 1 (2 under bounded DP).")
    targets: tuple[str, ...] = ("leaf", "unit:2", "greedy:4", "scattered:4")
    target_weights: tuple[float, ...] = ()
    runs: int = param(30, label="ToyDown runs", low=0, high=300, step=10, kind="slider",
                      help="Seeded simulations that check the closed-form error; 0 skips them.")
    seed: int = param(0, label="Seed", low=0, high=2**31 - 1,
                      help="Seeds the simulated populations and every simulated noise draw.")
    nonnegative: bool = param(False, label="Non-negative ToyDown in the simulation (adds bias; the closed form "
                                           "assumes none)")
    fig2_fanouts: tuple[int, int] = (10, 10)
    algorithms: AlgorithmPlan | None = None
    mechanisms: MechanismSweepPlan | None = None
    public: PublicInfoPlan | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataRef):
            raise ValueError("data must name the geography (a DataRef).")
        if self.data.source not in (*GEOGRAPHIES, DataRef.UPLOAD):
            raise ValueError(f"Unknown geography {self.data.source!r}; choose one of {list(GEOGRAPHIES)} or "
                             "upload a district plan on Georgia.")
        if self.geography == "stylised":
            check_fanouts(self.fanouts)
        _finite(self.total, "The total budget", 0.0, 100.0, open_low=True)
        if not isinstance(self.nonnegative, bool):
            raise ValueError("nonnegative must be true or false.")
        for name, cls in (("algorithms", AlgorithmPlan), ("mechanisms", MechanismSweepPlan), ("public", PublicInfoPlan)):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__} (or empty).")
        if not isinstance(self.unit, str) or self.unit not in ("epsilon", "rho"):
            raise ValueError(f"The unit must be 'epsilon' (pure or approximate DP) or 'rho' (zCDP); got {self.unit!r}.")
        if not isinstance(self.mechanism, str) or self.mechanism not in MECHANISMS:
            raise ValueError(f"Unknown mechanism {self.mechanism!r}; choose one of {list(MECHANISMS)}.")
        spec = MECHANISMS[self.mechanism]
        if not isinstance(self.mechanism_params, spec.params):
            raise ValueError(f"{spec.label} takes {spec.params.__name__}, not {type(self.mechanism_params).__name__}.")
        mech = get_mechanism(self.mechanism, self.mechanism_params)
        if mech.unit != self.unit:
            raise ValueError(f"The {spec.label} mechanism spends {mech.unit}; switch the unit or the mechanism.")
        if (self.unit == "rho" or mech.approximate) and self.delta is None:
            raise ValueError(f"Give a delta (between 0 and 1) for the {spec.label}'s (epsilon, delta) statement.")
        if self.delta is not None:
            _finite(self.delta, "delta", MIN_DELTA, 0.1)
        _finite(self.sensitivity, "The sensitivity", 0.0, 100.0, open_low=True)
        if not isinstance(self.split, str) or self.split not in SPLITS:
            raise ValueError(f"Unknown split rule {self.split!r}; use one of {list(SPLITS)}.")
        if not isinstance(self.preset, str) or self.preset not in PRESETS:
            raise ValueError(f"Unknown preset {self.preset!r}; choose one of {list(PRESETS)}.")
        if not isinstance(self.custom_shares, tuple):
            raise ValueError("Custom shares must be a list of numbers, one per level.")
        if self.split == "custom":
            if not self.custom_shares or len(self.custom_shares) > 10:
                raise ValueError("Give one custom share per level.")
            shares = [_finite(s, "A level's share", 0.0, 1e6) for s in self.custom_shares]
            if not sum(shares) > 0:
                raise ValueError("At least one level needs a positive share; raise a slider.")
        if not isinstance(self.targets, tuple) or not 1 <= len(self.targets) <= 20:
            raise ValueError("Pick between 1 and 20 targets.")
        kinds = [parse_target(t).kind for t in self.targets]
        if "plan" in kinds and not self.data.is_upload:
            raise ValueError("The 'plan' target needs an uploaded district plan.")
        if not isinstance(self.target_weights, tuple):
            raise ValueError("Target weights must be a list of numbers, one per target.")
        if self.target_weights:
            bad = "Give one non-negative weight per target (at most 1,000,000), at least one of them positive; " \
                  f"got {list(self.target_weights)}."
            if len(self.target_weights) != len(self.targets):
                raise ValueError(bad)
            try:
                w = [_finite(x, "A target's weight", 0.0, 1e6) for x in self.target_weights]
            except ValueError:
                raise ValueError(bad) from None
            if not any(x > 0 for x in w):
                raise ValueError(bad)
        whole_number(self.runs, "ToyDown runs", 0, 2000)
        whole_number(self.seed, "The seed", 0, 2**63 - 1)
        if not isinstance(self.fig2_fanouts, tuple) or len(self.fig2_fanouts) != 2:
            raise ValueError("The Figure 2 tree takes two fan-outs.")
        for f in self.fig2_fanouts:
            whole_number(f, "A Figure 2 fan-out", 1, 1000)

    # ------------------------------------------------------------------ derived choices
    @property
    def geography(self) -> str:
        """'stylised' or 'georgia' (an uploaded district plan is always on Georgia)."""
        return "georgia" if self.data.is_upload else self.data.source

    def geography_data(self) -> GeographyData:
        return load_geography(self.geography, tuple(self.fanouts) if self.geography == "stylised" else (),
                              _geo_seed(self))

    def level_mechanism(self, depth: int) -> NoiseMechanism:
        """The mechanism every level uses, built once from the plan's key and Params: an (epsilon, delta)
        mechanism gets delta / depth per level."""
        params = self.mechanism_params
        if get_mechanism(self.mechanism, params).approximate:
            params = params.__class__(**{**params.__dict__, "delta": float(self.delta) / depth})
        return get_mechanism(self.mechanism, params)


def _geo_seed(plan: BudgetPlan) -> int:
    """Georgia's blocks are built from the plan's seed (seed 0 here and on the District maps page match)."""
    return int(plan.seed)


@dataclass
class BudgetResult(Result):
    """Tables behind every output of the page (tidy DataFrames) plus the allocation itself."""

    plan: BudgetPlan
    allocation: Allocation
    levels: pd.DataFrame
    targets: pd.DataFrame
    figure2: pd.DataFrame
    figure2_optimum: pd.DataFrame
    presets_levels: pd.DataFrame
    presets_targets: pd.DataFrame
    recommendation: pd.DataFrame
    recommended_split: pd.DataFrame
    source: str
    n_leaves: int
    level_names: tuple[str, ...]
    algorithms: pd.DataFrame | None = None
    sweep: pd.DataFrame | None = None
    gg_advantage: pd.DataFrame | None = None
    public: dict = field(default_factory=dict)

    @property
    def recommended_budgets(self) -> tuple[float, ...]:
        return tuple(self.recommended_split["budget"])

    @property
    def mean_gain(self) -> float:
        """Mean over targets of the recommended split's gain in error sd over the equal split (%)."""
        return float(self.recommendation["gain over equal (%)"].mean()) if len(self.recommendation) else float("nan")

    @property
    def algorithm_summary(self) -> pd.DataFrame | None:
        if self.algorithms is None:
            return None
        return (self.algorithms.groupby(["algorithm", "level"], sort=False).mean(numeric_only=True)
                .drop(columns="run").reset_index())

    def tables(self) -> dict[str, pd.DataFrame]:
        out = {"levels": self.levels, "targets": self.targets, "recommended_split": self.recommended_split,
               "recommendation": self.recommendation, "presets_levels": self.presets_levels,
               "presets_targets": self.presets_targets, "figure2": self.figure2,
               "figure2_optimum": self.figure2_optimum.assign(
                   budgets=self.figure2_optimum["budgets"].map(lambda b: ", ".join(f"{x:g}" for x in b))),
               "ledger": self.allocation.ledger().to_frame()}
        if self.algorithms is not None:
            out["algorithms"] = self.algorithms
        if self.sweep is not None:
            out["mechanism_sweep"] = self.sweep
            out["gg_advantage"] = self.gg_advantage
        for name in ("invariants", "wem_summary", "wem_cells", "delta_z"):
            if name in self.public:
                out[name] = self.public[name]
        return out

    def headline(self) -> dict[str, float]:
        out = {"total budget": self.allocation.total, "leaves": float(self.n_leaves),
               "mean gain of the recommended split (%)": self.mean_gain}
        if self.allocation.unit == "rho":
            out["epsilon (tight conversion)"] = self.allocation.epsilon_total()
        for _, row in self.targets.iterrows():
            out[f"error sd: {row['target']}"] = float(row["analytic sd"])
        return out

    def takeaway(self):
        """The budget in its own unit (epsilon or rho); the other units follow from the numbers' names."""
        from core.takeaway import Takeaway
        unit = "rho (zCDP)" if self.allocation.unit == "rho" else "epsilon"
        return Takeaway(units={"total budget": unit})

    def headline_uncertainty(self) -> dict[str, str]:
        """The budget and the split's numbers are closed forms; each target's analytic sd is checked
        against the spread of the simulated runs, with the chi-square interval of that simulated sd."""
        from core.uncertainty_words import CLOSED_FORM, SET_BY_PLAN, interval, num
        out = {"total budget": SET_BY_PLAN, "leaves": "exact (units of the geography)",
               "mean gain of the recommended split (%)": f"{CLOSED_FORM}; mean over {len(self.recommendation)} targets"}
        if self.allocation.unit == "rho":
            out["epsilon (tight conversion)"] = "exact (closed-form conversion of rho)"
        for _, row in self.targets.iterrows():
            runs = int(row["runs"]) if "runs" in row and np.isfinite(row["runs"]) else 0
            text = CLOSED_FORM
            if runs >= 2 and np.isfinite(row["simulated sd"]):
                text += (f"; simulated sd {num(row['simulated sd'])} over {runs} noisy runs, "
                         + interval(row["sd 95% low"], row["sd 95% high"], "95% interval"))
            out[f"error sd: {row['target']}"] = text
        return out

    def ledger(self):
        return self.allocation.ledger()


# ------------------------------------------------------------------------------ targets
def district_plan_labels(data: bytes | None, geo: GeographyData) -> np.ndarray | None:
    """The uploaded block-assignment CSV's district per leaf (None without an upload)."""
    if data is None:
        return None
    if geo.leaf_ids is None:
        raise ValueError("A district plan needs block GEOIDs; this Georgia geography has none.")
    import io

    from core.geography.assignments import plan_from_csv
    return plan_from_csv(io.BytesIO(data), geo.leaf_ids)


# ------------------------------------------------------------------------------ splits
def _split_budgets(plan: BudgetPlan, h: Hierarchy, target_coeffs: list[np.ndarray], mech: NoiseMechanism) -> np.ndarray:
    if plan.split == "preset":
        return plan.total * preset_shares(plan.preset, h.depth)
    if plan.split == "custom":
        shares = np.asarray(plan.custom_shares, dtype=float)
        if shares.shape[0] != h.depth:
            raise ValueError(f"Give one share per level ({h.depth}); got {shares.shape[0]}.")
        if np.any(shares <= 0):
            raise ValueError("Every level needs a positive share of the budget; raise the zero sliders.")
        return plan.total * shares / shares.sum()
    return recommended_split(plan, target_coeffs, mech)


def recommended_split(plan: BudgetPlan, target_coeffs: list[np.ndarray], mech: NoiseMechanism | str) -> np.ndarray:
    """Budgets minimising the weighted sum of each target's variance relative to its equal-split variance
    (:func:`core.census.targets.split_for_means`); every level keeps at least 0.5% of the budget so each
    node still gets finite noise."""
    weights = plan.target_weights or (1.0,) * len(target_coeffs)
    return split_for_means(target_coeffs, weights, plan.total, mech, plan.sensitivity, min_share=0.005)


# ---------------------------------------------------------------------------------- run
@cached
def run(plan: BudgetPlan, data: bytes | None = None, *, progress=None) -> BudgetResult:
    """Everything the Budget allocation page shows for one plan (analytic + seeded simulation).

    ``data`` is the uploaded district-plan CSV when ``plan.data`` is an upload (its fingerprint is
    checked), else None.
    """
    if plan.data.is_upload:
        if data is None:
            raise ValueError("This plan uses an uploaded district plan: pass the same CSV file.")
        if bytes_fingerprint(bytes(data)) != plan.data.fingerprint:
            raise ValueError("The district plan file given is not the one the plan was made with "
                             "(its fingerprint differs).")
    elif data is not None:
        raise ValueError("This plan uses no uploaded file.")
    report = progress or (lambda *a: None)
    report(0, 4, "Loading the geography")
    geo = plan.geography_data()
    report(1, 4, "Allocating the budget and running ToyDown")
    core = cached_call(_allocation_part)(plan.setup(), data, progress=progress)   # keyed without the tabs' sub-plans
    alloc = core["allocation"]
    algorithms = None
    if plan.algorithms is not None:
        report(2, 4, "Comparing ToyDown and TopDown-lite")
        algorithms = cached_call(_algorithms_part)(plan.geography, plan.fanouts if plan.geography == "stylised"
                                                   else (), _geo_seed(plan), alloc, plan.algorithms,
                                                   progress=progress)
    sweep = advantage = None
    if plan.mechanisms is not None:
        report(3, 4, "Comparing noise mechanisms")
        sweep = sweep_part(plan.mechanisms, progress=progress)
        advantage = generalized_gaussian_advantage(sweep)
    public = {}
    if plan.public is not None:
        report(3, 4, "Public information")
        public = cached_call(_public_part)(plan.geography, plan.fanouts if plan.geography == "stylised" else (),
                                           _geo_seed(plan), alloc, plan.public)
    report(4, 4, "Done")
    return BudgetResult(plan=plan, algorithms=algorithms, sweep=sweep, gg_advantage=advantage, public=public,
                        source=geo.source, n_leaves=geo.hierarchy.n_leaves,
                        level_names=geo.hierarchy.level_names, **core)


def _allocation_part(plan: BudgetPlan, data: bytes | None, progress=None) -> dict:
    geo = plan.geography_data()
    h = geo.hierarchy
    mech = plan.level_mechanism(h.depth)
    mech.prepare(plan.sensitivity, progress)   # e.g. the Generalized Gaussian's what-if curve
    district_plan = district_plan_labels(data, geo)
    # each target draws its districts from its own stream: listing another target never moves its numbers
    targets = [target_labels(h, spec, plan.seed, district_plan) for spec in plan.targets]
    coeffs = [level_coefficients(h, leaf_labels=labels) for _, labels in targets]
    mean_coeffs = [c.mean(axis=1) for c in coeffs]
    budgets = _split_budgets(plan, h, mean_coeffs, mech)
    alloc = Allocation(h.level_names, tuple(budgets), plan.unit, mech, plan.sensitivity,
                       plan.delta if plan.unit == "rho" or mech.approximate else None)
    v = level_node_variance(budgets, mech, plan.sensitivity)
    unit_coeffs = [unit_coefficients(h, lvl).mean(axis=1) for lvl in range(h.depth)]
    levels = _levels_table(h, plan, budgets, v, unit_coeffs, mech)
    target_table = _targets_table(h, geo, plan, targets, coeffs, budgets, v, mech, progress)
    presets_levels, presets_targets, recommendation, recommended = _compare_splits(
        h, plan, budgets, unit_coeffs, [n for n, _ in targets], mean_coeffs, mech)
    fig2, fig2_opt = figure2_curves(plan.fig2_fanouts, plan.total, mech, plan.sensitivity)
    rec_split = pd.DataFrame({"level": list(h.level_names), "budget": recommended,
                              "share": recommended / recommended.sum()})
    return dict(allocation=alloc, levels=levels, targets=target_table, figure2=fig2, figure2_optimum=fig2_opt,
                presets_levels=presets_levels, presets_targets=presets_targets, recommendation=recommendation,
                recommended_split=rec_split)


def _levels_table(h: Hierarchy, plan: BudgetPlan, budgets, v, unit_coeffs, mech: NoiseMechanism) -> pd.DataFrame:
    scales = np.atleast_1d(mech.scale_for(plan.sensitivity, budgets))
    fan = np.append(h.mean_fanouts(), np.nan)
    return pd.DataFrame({
        "level": list(h.level_names), "units": h.level_sizes(), "mean children": fan,
        f"budget ({plan.unit})": budgets, "share": budgets / budgets.sum(),
        "noise scale": scales, "node noise variance": v,
        "whole-unit error sd": [math.sqrt(float(np.dot(c, v))) for c in unit_coeffs]})


def _toydown_errors(args, rng) -> np.ndarray:
    """One ToyDown run: mean squared and mean absolute error of each target (rows) -> (targets, 2)."""
    h, counts, budgets, mech, sensitivity, nonnegative, labels = args
    noise = draw_node_noise(h, budgets, mech, sensitivity, rng=rng)
    alpha = consistent_top_down(h, counts + noise, nonnegative=nonnegative)
    err_leaf = (alpha - counts)[h.leaf_nodes]
    out = np.empty((len(labels), 2))
    for i, lab in enumerate(labels):
        e = np.bincount(lab, weights=err_leaf)
        out[i] = (np.mean(e * e), np.mean(np.abs(e)))
    return out


def _targets_table(h, geo, plan: BudgetPlan, targets, coeffs, budgets, v, mech, progress) -> pd.DataFrame:
    analytic = [np.sqrt(np.mean(v @ c)) for c in coeffs]
    runs = int(plan.runs)
    counts = h.aggregate(geo.leaf_counts).astype(float)
    args = (h, counts, np.asarray(budgets), mech, plan.sensitivity, plan.nonnegative, [lab for _, lab in targets])
    # one child generator per run, so the numbers do not depend on the worker count; in-process
    # below LARGE_TREE leaves, where shipping the tree to workers costs more than a run
    per_run = map_trials(_toydown_errors, [args] * runs, seed=seed_sequence(plan.seed, stream_key("toydown")),
                         n_jobs=1 if h.n_leaves <= LARGE_TREE else None, progress=progress, label="ToyDown runs")
    err = np.stack(per_run, axis=2) if runs else np.zeros((len(targets), 2, 0))
    rows = []
    for i, (name, labels) in enumerate(targets):
        row = {"target": name, "units": int(labels.max()) + 1, "analytic sd": float(analytic[i]),
               "simulated sd": np.nan, "sd 95% low": np.nan, "sd 95% high": np.nan,
               "simulated mean |error|": np.nan, "runs": runs}
        if runs >= 2:
            sq = err[i, 0]
            mean_sq = float(sq.mean())
            half = stats.t.ppf(0.975, runs - 1) * sq.std(ddof=1) / math.sqrt(runs)
            row.update({"simulated sd": math.sqrt(mean_sq), "sd 95% low": math.sqrt(max(mean_sq - half, 0.0)),
                        "sd 95% high": math.sqrt(mean_sq + half), "simulated mean |error|": float(err[i, 1].mean())})
        rows.append(row)
    return pd.DataFrame(rows)


def _compare_splits(h, plan: BudgetPlan, budgets, unit_coeffs, target_names, target_coeffs, mech):
    splits = {name: plan.total * preset_shares(name, h.depth) for name in PRESETS}
    splits["current"] = np.asarray(budgets)
    recommended = recommended_split(plan, target_coeffs, mech)
    splits["recommended"] = recommended
    variances = {name: level_node_variance(b, mech, plan.sensitivity, estimate=True) for name, b in splits.items()}
    lv_rows, tg_rows = [], []
    for name, v in variances.items():
        for lvl, c in enumerate(unit_coeffs):
            lv_rows.append({"split": name, "level": h.level_names[lvl], "sd": math.sqrt(float(np.dot(c, v)))})
        for tname, c in zip(target_names, target_coeffs):
            tg_rows.append({"split": name, "target": tname, "sd": math.sqrt(float(np.dot(c, v)))})
    rec_rows = []
    for tname, c in zip(target_names, target_coeffs):
        eq, rec, cur = (math.sqrt(float(np.dot(c, variances[x]))) for x in ("equal", "recommended", "current"))
        rec_rows.append({"target": tname, "sd equal split": eq, "sd recommended": rec, "sd current": cur,
                         "gain over equal (%)": 100.0 * (1.0 - rec / eq)})
    return pd.DataFrame(lv_rows), pd.DataFrame(tg_rows), pd.DataFrame(rec_rows), recommended


def figure2_curves(fanouts: tuple[int, int] = (10, 10), total: float = 1.0,
                   mechanism: str | NoiseMechanism = "laplace",
                   sensitivity: float = 2.0, bottom_shares=(0.5, 0.6, 0.7, 0.79, 0.85, 0.9),
                   points: int = 99) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Leaf variance of a 3-level homogeneous tree against eps_1/(eps_1+eps_2), one curve per bottom share.

    The analogue of Cohen et al. 2021, Fig. 2 (n1 = n2 = 10, epsilon = 1); the optimum (cube-root
    rule, square-root under rho) is returned as a second table.
    """
    mechanism = get_mechanism(mechanism)
    total = _finite(total, "The total budget", 0.0, MAX_LEVEL_BUDGET, open_low=True)
    h = Hierarchy.homogeneous(list(fanouts))
    c = level_coefficients(h, leaf_labels=np.r_[0, np.full(h.n_leaves - 1, -1)])[:, 0]
    x = np.linspace(0.01, 0.99, points)
    b3 = np.repeat(np.asarray(bottom_shares, dtype=float), x.size)
    xi = np.tile(x, len(bottom_shares))
    upper = (1.0 - b3) * total
    budgets = np.stack([xi * upper, (1 - xi) * upper, b3 * total])
    v = level_node_variance(budgets.ravel(), mechanism, sensitivity, estimate=True).reshape(budgets.shape)
    curves = pd.DataFrame({"bottom share": b3, "top share of upper levels": xi, "leaf variance": c @ v})
    best = split_for_coefficients(c, total, mechanism.unit)
    opt = pd.DataFrame([{"bottom share": best[2] / total, "top share of upper levels": best[0] / (best[0] + best[1]),
                         "leaf variance": float(np.dot(c, level_node_variance(best, mechanism, sensitivity, estimate=True))),
                         "budgets": tuple(round(float(b), 4) for b in best)}])
    return curves, opt


# ------------------------------------------------------------------------- tab sub-runs
def _algorithms_part(geography: str, fanouts, seed: int, alloc: Allocation, algo: AlgorithmPlan,
                     progress=None) -> pd.DataFrame:
    """The Algorithms tab's sub-run: the allocation hands its budgets and its built mechanism on (its cache
    key hashes the allocation's fields and the mechanism's key and Params, never the object)."""
    geo = load_geography(geography, tuple(fanouts), seed)
    return compare_algorithms(geo.hierarchy, geo.leaf_counts, alloc.eps_by_level, algo, alloc.noise,
                              alloc.sensitivity, progress=progress)


def wem_vector(h: Hierarchy, leaf_counts) -> tuple[np.ndarray, str]:
    """The count vector of the WEM demonstration (the leaf counts of the first parent of leaves) and its name."""
    parent = h.level_offsets[h.depth - 2] if h.depth >= 2 else 0
    lo, hi = h.child_ptr[parent], h.child_ptr[parent + 1]
    counts = h.aggregate(leaf_counts)[lo:hi]
    above = h.level_names[-2] if h.depth >= 2 else "unit"
    return np.asarray(counts, dtype=np.int64), f"the {hi - lo} {h.level_names[-1]} counts of the first {above}"


def _public_part(geography: str, fanouts, seed: int, alloc: Allocation, public: PublicInfoPlan) -> dict:
    geo = load_geography(geography, tuple(fanouts), seed)
    h = geo.hierarchy
    if public.exact_through >= h.depth:
        raise ValueError(f"This geography has levels 0..{h.depth - 1}; publish exactly through one of them.")
    effects = invariant_effects(h, h.aggregate(geo.leaf_counts), alloc.eps_by_level, alloc.noise,
                                alloc.sensitivity)
    m = public.exact_through
    invariants = [] if m < 0 else (["the total population"] if m == 0 else
                                   [f"every count at the {h.level_names[m]} level and above"])
    counts, vector_name = wem_vector(h, geo.leaf_counts)
    summary, cells = wem_comparison(counts, public.wem)
    n = public.dz_records
    return {
        "invariants": effects[effects["exact through level"].isin([-1, m])].reset_index(drop=True),
        "wem_summary": summary, "wem_cells": cells,
        "delta_z": delta_z_grid(n).rename_axis(columns=None).reset_index().melt(
            id_vars="z1", var_name="z0", value_name="Delta_z"),
        "statement": dpz_statement(alloc.total, alloc.unit, invariants),
        "conditioning_bound": 2.0 * alloc.total if invariants else None,
        "wem_vector": vector_name, "wem_total": int(counts.sum()),
        "dependence_factor": beta_equicorrelated(n, public.correlation) * n,
    }


def sweep_part(sweep: MechanismSweepPlan, progress=None) -> pd.DataFrame:
    """The Mechanisms tab's sub-run (cached on disk): pages call it to calibrate with progress shown
    next to the request, and ``run`` then finds it done."""
    return cached_call(mechanism_sweep)(sweep, progress=progress)
