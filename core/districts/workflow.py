"""The District maps study as one plan: geography, generator, allocation, noisy runs, checks, sub-studies.

``run(DistrictPlan(...)) -> DistrictResult``. Every noisy run noises the whole hierarchy once (Cohen et
al. 2021, §5-7); a district's noisy population is the sum of its blocks' noisy counts, so one run serves
every district of every plan in the ensemble, and moving through the ensemble needs no new computation.
Seeded runs are simulations, not releases.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.cache import cached, cached_call
from core.census.analytic import PRESETS, district_variances
from core.contracts import (DataRef, Plan, Result, bytes_fingerprint, check_params, named_rng, param,
                            seed_sequence, stream_key)
from core.districts.checks import check_warning, district_checks, plan_check
from core.districts.ecological import ecological_study
from core.districts.generators import GENERATORS, GRID_ONLY, UNIT_LABELS, GeneratorParams, ReComParams, is_grid
from core.districts.metrics import district_metrics
from core.districts.noise import NoiseConfig, ensemble_study, membership_matrix, noisy_leaf_counts, sd_interval
from core.districts.standards import balance_sentence
from core.districts.uploads import load_uploaded_blocks
from core.geography.adjacency import block_adjacency
from core.geography.assignments import plan_from_csv
from core.geography.blocks import BlockGeography
from core.geography.grid import synthetic_grid
from core.geography.sources import geographies, georgia_blocks
from core.parallel import map_trials
from core.takeaway import Takeaway
from core.uncertainty_words import with_interval

GEOGRAPHIES = geographies("grid", "georgia", "upload")
GRID_SHAPES = ((16, 4, 16), (64, 4, 16), (484, 4, 25))
GRID_NAMES = {(16, 4, 16): "Tiny: 16 tracts, 32 x 32 blocks", (64, 4, 16): "64 tracts, 64 x 64 blocks",
              (484, 4, 25): "Dallas-like: 484 tracts, 220 x 220 blocks"}
#: What the plan generator menu offers: every registered generator, or the curator's own plan.
GENERATOR_CHOICES = {**GENERATORS.labels(), "upload": "My block-assignment CSV"}
MAX_PLANS = 400
MAX_FANOUT = 1_000
MAX_GRID_BLOCKS = 250_000
MAX_RUN_CELLS = 30_000_000       # runs x blocks held in memory at once (about 240 MB)


def _whole(value, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)):
        raise ValueError(f"{name} must be a whole number; got {value!r}.")
    if isinstance(value, float) and (not np.isfinite(value) or value != int(value)):
        raise ValueError(f"{name} must be a whole number; got {value!r}.")
    if not low <= int(value) <= high:
        raise ValueError(f"{name} must be between {low:,} and {high:,}; got {value!r}.")
    return int(value)


# ----------------------------------------------------------------------------------------- sub-plans
@dataclass(frozen=True)
class EnsemblePlan(Plan):
    """Figure 4/6 analogue: districts of several generators noised together under several splits."""

    splits: tuple[str, ...] = param(("equal", "tract-heavy", "block-heavy"), label="Splits", choices=tuple(PRESETS),
                                    kind="multiselect")
    runs: int = param(16, label="Runs per split", low=2, high=400)
    n_square: int = param(200, label="Random Square districts", low=0, high=2000, step=50)
    recom_units: tuple[str, ...] = param(
        (), label="Also compare ReCom ensembles built from", choices=UNIT_LABELS, kind="multiselect",
        help="Same k, tolerance, steps, thinning and seed as the plan above; larger building units cut fewer units "
             "of the hierarchy (lower fragmentation).")
    disconn_units: tuple[str, ...] = param(
        (), label="Also compare Disconn districts (random units up to the ideal population, not connected) built "
                  "from", choices=UNIT_LABELS, kind="multiselect")
    n_disconn: int = param(100, label="Disconn districts each", low=10, high=1000, step=10)

    def __post_init__(self) -> None:
        if not self.splits:
            raise ValueError("Choose at least one split for the ensemble study.")
        bad = [s for s in self.splits if s not in PRESETS]
        if bad:
            raise ValueError(f"Unknown split {bad[0]!r}; choose among {list(PRESETS)}.")
        _whole(self.runs, "Runs per split", 2, 400)
        _whole(self.n_square, "Random Square districts", 0, 2000)
        _whole(self.n_disconn, "Disconn districts", 1, 1000)
        for u in self.recom_units + self.disconn_units:
            if u not in UNIT_LABELS:
                raise ValueError(f"Unknown unit {u!r}; choose among {list(UNIT_LABELS)}.")


@dataclass(frozen=True)
class ERPlan(Plan):
    """Ecological regression on a synthetic election: each group's support for the candidate."""

    group_support: float = param(0.85, label="Black voters' support", low=0.0, high=1.0, step=0.01, kind="slider")
    other_support: float = param(0.5, label="Other voters' support", low=0.0, high=1.0, step=0.01, kind="slider")
    election_seed: int = 0

    def __post_init__(self) -> None:
        for name, v in (("Black voters' support", self.group_support), ("Other voters' support", self.other_support)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= float(v) <= 1:
                raise ValueError(f"{name} must be a share between 0 and 1; got {v!r}.")
        _whole(self.election_seed, "Election seed", 0, 2**32 - 1)


def default_noise(depth: int = 4) -> NoiseConfig:
    """Equal split of epsilon 1 over ``depth`` levels, Laplace, 16 runs."""
    return NoiseConfig(tuple([1.0 / depth] * depth))


@dataclass(frozen=True)
class DistrictPlan(Plan):
    """Everything that shapes the District maps numbers.

    data: DataRef("grid" | "georgia" | "upload", fingerprint of the uploaded files in order: block
    shapefile zip, block counts CSV, then the block-assignment CSV when ``generator == "upload"``).
    """

    data: DataRef = DataRef("grid")
    grid_fanouts: tuple[int, ...] = param((64, 4, 16), label="Grid county", choices=GRID_NAMES, kind="select",
                                          help="Tracts, block groups per tract and blocks per block group.")
    geo_seed: int = param(0, label="Geography seed", low=0, high=10_000,
                          help="Seed of the synthetic units below the county (or of the grid).")
    generator: str = param("greedy", label="Plan generator", choices=GENERATOR_CHOICES, kind="select")
    params: GeneratorParams | None = None
    k: int = param(4, label="Districts (k)", low=2, high=400,
                   help="4 is like the county-commission districts of the paper; Georgia has 14 congressional "
                        "districts.")
    plan_seed: int = param(0, label="Plan seed", low=0, high=1_000_000)
    noise: NoiseConfig = param(default_noise(), label="Noise")
    balance_tolerance_pct: float = param(5.0, label="Balance tolerance (%)", low=0.0, high=100.0, step=0.5,
                                         help="A district passes when its population is within this share of the "
                                              "ideal (total / k) and it is one connected piece.")
    ensemble: EnsemblePlan | None = None
    er: ERPlan | None = None

    def __post_init__(self) -> None:
        if self.data.source not in GEOGRAPHIES:
            raise ValueError(f"Unknown geography {self.data.source!r}; choose one of {list(GEOGRAPHIES)}.")
        fan = tuple(_whole(n, "Every grid fan-out", 1, MAX_FANOUT) for n in self.grid_fanouts)
        if len(fan) != 3:
            raise ValueError("A grid county has three fan-outs: tracts, block groups per tract, blocks per group.")
        if int(np.prod(fan)) > MAX_GRID_BLOCKS:
            raise ValueError(f"That grid has {int(np.prod(fan)):,} blocks; at most {MAX_GRID_BLOCKS:,} are drawn.")
        object.__setattr__(self, "grid_fanouts", fan)
        _whole(self.geo_seed, "Geography seed", 0, 2**32 - 1)
        _whole(self.plan_seed, "Plan seed", 0, 2**32 - 1)
        _whole(self.k, "Districts (k)", 2, 400)
        if self.generator != "upload":
            spec = GENERATORS[self.generator]
            params = spec.default_params() if self.params is None else self.params
            if not isinstance(params, spec.params):
                raise ValueError(f"{spec.label} takes {spec.params.__name__}, not {type(params).__name__}.")
            check_params(params)
            object.__setattr__(self, "params", params)
            if self.generator in GRID_ONLY and self.data.source != "grid":
                raise ValueError(f"{spec.label} needs the synthetic grid county; choose ReCom for real maps.")
        elif self.params is not None:
            raise ValueError("An uploaded plan takes no generator settings.")
        tol = self.balance_tolerance_pct
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not np.isfinite(tol) or not 0 <= tol <= 100:
            raise ValueError(f"The balance tolerance must be a percentage between 0 and 100; got {tol!r}.")

    @property
    def n_uploads(self) -> int:
        """How many uploaded files the plan's data fingerprint covers."""
        return 2 * (self.data.source == "upload") + (self.generator == "upload")


# ----------------------------------------------------------------------------------------- geography
@functools.lru_cache(maxsize=4)
def _grid(fanouts: tuple[int, ...], seed: int) -> BlockGeography:
    return synthetic_grid(fanouts, seed=seed)


@functools.lru_cache(maxsize=4)
def _uploaded(fingerprint: str, shapefile_zip: bytes, counts_csv: bytes) -> BlockGeography:
    return load_uploaded_blocks(shapefile_zip, counts_csv)


def upload_parts(plan: DistrictPlan, data) -> tuple[bytes, ...]:
    """The uploaded files (bytes) in plan order, after checking their fingerprint against the plan's."""
    if plan.n_uploads == 0:
        if data is not None:
            raise ValueError("This plan runs on bundled geography; it takes no files.")
        return ()
    parts = (data,) if isinstance(data, (bytes, bytearray)) else tuple(data or ())
    if len(parts) != plan.n_uploads:
        raise ValueError(f"This plan needs {plan.n_uploads} uploaded file(s); got {len(parts)}.")
    if bytes_fingerprint(*parts) != plan.data.fingerprint:
        raise ValueError("The uploaded files are not the ones the plan was made with (their fingerprint differs).")
    return tuple(bytes(p) for p in parts)


def geography_files(plan: DistrictPlan, data=None) -> tuple[bytes, ...]:
    """The uploaded block files (shapefile zip, counts CSV), or () for bundled geography."""
    return upload_parts(plan, data)[:2] if plan.data.source == "upload" else ()


def build_geography(source: str, fanouts: tuple[int, ...], seed: int, files: tuple[bytes, ...] = ()) -> BlockGeography:
    """A block geography by source, built once per process (Georgia also cached on disk)."""
    if source == "grid":
        return _grid(tuple(fanouts), int(seed))
    if source == "georgia":
        return georgia_blocks(int(seed))
    zipped, counts = files
    return _uploaded(bytes_fingerprint(zipped, counts), zipped, counts)


def load_geography(plan: DistrictPlan, data=None) -> BlockGeography:
    """The plan's block geography."""
    return build_geography(plan.data.source, plan.grid_fanouts, plan.geo_seed, geography_files(plan, data))


def draw_plans(plan: DistrictPlan, geo: BlockGeography, data=None, progress=None) -> np.ndarray:
    """Block labels (n_plans, n_blocks) from the generator, or the uploaded block-assignment CSV."""
    if plan.generator == "upload":
        labels = plan_from_csv(upload_parts(plan, data)[-1], geo.blocks["GEOID"].to_numpy())[None, :]
    else:
        draw = GENERATORS[plan.generator].build(plan.params)
        labels = np.asarray(draw(geo, int(plan.k), int(plan.plan_seed), progress), dtype=np.int64)
    if labels.ndim != 2 or labels.shape[1] != len(geo.blocks):
        raise ValueError("The plan does not assign every block of the geography.")
    if int(labels.max()) + 1 > len(geo.blocks):
        raise ValueError(f"{int(labels.max()) + 1} districts cannot be drawn from {len(geo.blocks):,} blocks.")
    if labels.shape[0] > MAX_PLANS:
        raise ValueError(f"The generator kept {labels.shape[0]:,} plans; at most {MAX_PLANS} are studied. "
                         "Keep fewer plans (thin more, or use a smaller map).")
    return labels


# ----------------------------------------------------------------------------------------- noise
def _one_run(index: int, rng: np.random.Generator, h, pop: np.ndarray, config: NoiseConfig) -> np.ndarray:
    return noisy_leaf_counts(h, pop, config, rng) - pop


def noisy_block_errors(geo: BlockGeography, config: NoiseConfig, progress=None) -> np.ndarray:
    """(runs, n_blocks) noisy minus true block counts, one child stream of the noise seed per run."""
    pop = geo.blocks["total"].to_numpy(dtype=np.int64)
    work = functools.partial(_one_run, h=geo.hierarchy, pop=pop, config=config)
    seed = seed_sequence(int(config.seed), stream_key("district runs"))
    return np.vstack(map_trials(work, range(int(config.runs)), seed=seed, n_jobs=1, progress=progress,
                                label="Noisy runs"))


def district_tables(geo: BlockGeography, labels: np.ndarray, errors: np.ndarray, config: NoiseConfig,
                    tolerance_pct: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per plan x district: metrics, checks and the noise summary (mean noisy population, mean and 95th
    percentile |E_D|, empirical sd with a chi-square 95% interval, analytic ToyDown sd from Cor. 3, and
    the true deviation of a plan balanced exactly on the noisy counts); and the long per-run errors."""
    pop = geo.blocks["total"].to_numpy(dtype=np.int64)
    adj = block_adjacency(geo)
    county = geo.blocks["county"].to_numpy()
    black = geo.blocks["black"].to_numpy(dtype=float)
    runs = errors.shape[0]
    k = int(labels.max()) + 1
    district_err = (membership_matrix(labels).T @ errors.T).T          # (runs, n_plans * k)
    frames, run_frames = [], []
    for i, lab in enumerate(labels):
        metrics = district_metrics(geo.hierarchy, adj, pop, county, lab)
        checks = district_checks(adj, pop, lab, tolerance_pct)
        kk = len(metrics)
        true = metrics["population"].to_numpy(dtype=float)
        err = district_err[:, i * k:i * k + kk]
        noisy = true + err
        ideal = true.sum() / kk
        balanced = 100 * (noisy.sum(axis=1, keepdims=True) / kk - err - ideal) / ideal
        sd = err.std(axis=0, ddof=1)
        low, high = sd_interval(sd, runs)
        frame = metrics.drop(columns=["contiguous"]).assign(
            plan=i + 1, pieces=checks["pieces"], contiguous=checks["contiguous"], balanced=checks["balanced"],
            passes=checks["passes"], black_share_pct=100 * np.bincount(lab, weights=black, minlength=kk)
            / np.maximum(true, 1), mean_noisy_population=noisy.mean(axis=0), mean_abs_error=np.abs(err).mean(axis=0),
            p95_abs_error=np.percentile(np.abs(err), 95, axis=0), empirical_sd=sd, empirical_sd_low=low,
            empirical_sd_high=high,
            analytic_toydown_sd=np.sqrt(district_variances(geo.hierarchy, lab, config.budgets, config.mechanism,
                                                           config.sensitivity)),
            balanced_on_noisy_mean_abs_dev_pct=np.abs(balanced).mean(axis=0),
            balanced_on_noisy_max_abs_dev_pct=np.abs(balanced).max(axis=0))
        frames.append(frame)
        run_frames.append(pd.DataFrame({"plan": i + 1, "run": np.repeat(np.arange(1, runs + 1), kk),
                                        "district": np.tile(np.arange(1, kk + 1), runs),
                                        "noisy_population": noisy.ravel(), "error": err.ravel(),
                                        "balanced_on_noisy_dev_pct": balanced.ravel()}))
    table = pd.concat(frames, ignore_index=True)
    first = ["plan", "district", "population", "deviation_pct"]
    return table[first + [c for c in table.columns if c not in first]], pd.concat(run_frames, ignore_index=True)


def plan_summary_table(districts: pd.DataFrame, tolerance_pct: float) -> pd.DataFrame:
    """One row per plan of the ensemble: balance, cut edges, compactness, error, and the check verdict."""
    rows = []
    for plan_no, d in districts.groupby("plan", sort=True):
        verdict = plan_check(d)
        rows.append({"plan": int(plan_no), "districts": len(d), "max_abs_deviation_pct": verdict["max_abs_deviation_pct"],
                     "cut_edges": int(d["cut_edges"].sum() // 2), "mean_polsby_popper": float(d["polsby_popper"].mean()),
                     "mean_fragmentation": float(d["fragmentation"].mean()),
                     "split_counties": int((d["split_counties"] > 0).sum()),
                     "mean_abs_error": float(d["mean_abs_error"].mean()),
                     "contiguous": verdict["contiguous"], "balanced": verdict["balanced"],
                     "passes": verdict["passes"], "balance_tolerance_pct": float(tolerance_pct)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------- sub-runs
def _ensemble_generators(plan: DistrictPlan, geo: BlockGeography, labels: np.ndarray, sub: EnsemblePlan,
                         progress=None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The districts an ensemble study compares: the plan's own, and on a grid Greedy plans and random
    Square districts; ReCom ensembles on other units; Disconn districts from chosen units."""
    from core.districts.plans import disconn_masks, square_labels
    own = GENERATORS[plan.generator].label if plan.generator != "upload" else "Uploaded plan"
    gens = {own: labels}
    skipped: dict[str, str] = {}
    k = int(plan.k)
    if is_grid(geo):
        if plan.generator != "greedy":
            gens["Greedy"] = GENERATORS["greedy"].build(GENERATORS["greedy"].default_params())(geo, k, plan.plan_seed)
        if sub.n_square:
            rows, cols = geo.blocks["row"].to_numpy(), geo.blocks["col"].to_numpy()
            try:
                gens["Square (random)"] = square_labels(rows, cols, int(rows.max()) + 1, k, sub.n_square,
                                                        named_rng(int(plan.plan_seed), "random squares"))
            except ValueError as exc:
                skipped["Square (random)"] = str(exc)
    tol = plan.params.tolerance_pct if isinstance(plan.params, ReComParams) else 5.0
    for unit in sub.recom_units:
        params = ReComParams(unit, tol, *((plan.params.steps, plan.params.thin)
                                          if isinstance(plan.params, ReComParams) else (40, 10)))
        try:
            gens[f"ReCom ({UNIT_LABELS[unit]})"] = GENERATORS["recom"].build(params)(geo, k, plan.plan_seed, progress)
        except ValueError as exc:
            skipped[f"ReCom on {UNIT_LABELS[unit]}"] = str(exc)
    ideal = float(geo.blocks["total"].sum()) / k
    for unit in sub.disconn_units:
        name = f"Disconn ({UNIT_LABELS[unit]})"
        try:
            gens[name] = disconn_masks(geo.units(unit)["total"].to_numpy(), geo.leaf_unit_index(unit), ideal,
                                       tol / 100, sub.n_disconn, named_rng(int(plan.plan_seed), f"disconn {unit}"))
        except ValueError as exc:
            skipped[name] = str(exc)
    return gens, skipped


@cached_call
def ensemble_part(plan: DistrictPlan, data=None, progress=None) -> tuple[pd.DataFrame, dict[str, str]]:
    """Ensemble sub-run (cached on its own): one row per generator x split x district."""
    geo = load_geography(plan, data)
    labels = draw_plans(plan, geo, data)
    sub = plan.ensemble
    gens, skipped = _ensemble_generators(plan, geo, labels, sub, progress)
    noise = plan.noise
    total = float(sum(noise.budgets))
    study = ensemble_study(geo.hierarchy, geo.blocks["total"].to_numpy(), gens, total, tuple(sub.splits), sub.runs,
                           noise.mechanism, noise.sensitivity, noise.algorithm,
                           int(seed_sequence(noise.seed, stream_key("ensemble")).generate_state(1)[0]), progress)
    return study, skipped


@cached_call
def er_part(source: str, fanouts: tuple[int, ...], geo_seed: int, files: tuple[bytes, ...], noise: NoiseConfig,
            er: ERPlan, progress=None):
    """Ecological-regression sub-run, cached on the geography, the noise and its own settings only."""
    geo = build_geography(source, fanouts, geo_seed, files)
    return ecological_study(geo.hierarchy, geo.blocks, noise, er.election_seed, er.group_support,
                            er.other_support, progress=progress)


# ----------------------------------------------------------------------------------------- result
@dataclass
class DistrictResult(Result):
    """Block labels of every plan, per plan x district table, per-plan summary, per-run errors and
    each block's mean error; the ensemble and ER sub-results when asked for."""

    plan: DistrictPlan
    labels: np.ndarray = field(repr=False)
    districts: pd.DataFrame = field(repr=False)
    plans: pd.DataFrame = field(repr=False)
    runs: pd.DataFrame = field(repr=False)
    block_mean_error: np.ndarray = field(repr=False)
    geoids: np.ndarray = field(repr=False)
    ensemble: pd.DataFrame | None = field(default=None, repr=False)
    skipped: dict = field(default_factory=dict)
    er: object = field(default=None, repr=False)

    def plan_districts(self, plan_no: int) -> pd.DataFrame:
        """The district table of plan ``plan_no`` (1-based)."""
        if not 1 <= int(plan_no) <= self.labels.shape[0]:
            raise ValueError(f"Plan {plan_no} is not in the ensemble (1 to {self.labels.shape[0]}).")
        return self.districts[self.districts["plan"] == int(plan_no)].reset_index(drop=True)

    def verdict(self, plan_no: int) -> dict:
        return plan_check(self.plan_districts(plan_no))

    def tables(self) -> dict[str, pd.DataFrame]:
        out = {"districts": self.districts, "plans": self.plans, "runs": self.runs,
               "plan_assignment": pd.DataFrame({"GEOID": self.geoids, **{f"plan_{i + 1}": lab + 1
                                                for i, lab in enumerate(self.labels[:20])}})}
        if self.ensemble is not None:
            out["ensemble_study"] = self.ensemble
            out["ensemble_summary"] = ensemble_summary(self.ensemble)
        if self.er is not None:
            out["ecological_regression"] = self.er.estimates
            out["ecological_summary"] = er_summary(self.er.estimates)
        return out

    def headline(self) -> dict[str, float]:
        """What the page quotes of plan 1 (deviations in percent of the ideal district, errors in
        people) and how many of the ensemble's plans pass the checks."""
        first = self.plan_districts(1)
        return {"districts": float(len(first)),
                "plans": float(self.labels.shape[0]),
                "largest_true_deviation_pct": float(first["deviation_pct"].abs().max()),
                "mean_abs_district_error": float(first["mean_abs_error"].mean()),
                "worst_deviation_if_balanced_on_noisy_pct": float(first["balanced_on_noisy_max_abs_dev_pct"].max()),
                "cut_edges": float(first["cut_edges"].sum() // 2),
                "plans_passing_checks": float(self.plans["passes"].sum())}

    def takeaway(self) -> Takeaway:
        """Verdict first: whether plan 1 passes its checks, against which balance standard (named, with
        its source, in people), then its noisy-count error rounded to its interval over the runs."""
        first = self.plan_districts(1)
        verdict = plan_check(first)
        tolerance = self.plan.balance_tolerance_pct
        standard = balance_sentence(tolerance, float(first["population"].sum()) / max(len(first), 1))
        if verdict["passes"]:
            said = f"Plan 1 passes: every district is one piece and {standard}."
        else:
            said = check_warning(verdict, tolerance).replace("This plan", "Plan 1") + f" The standard: {standard}."
        low, high = self.mean_abs_error_interval(1)
        runs = int(self.runs["run"].nunique())
        head = self.headline()
        answer = [said, f"{int(head['plans_passing_checks'])} of {int(head['plans'])} plans pass these checks."]
        if np.isfinite(low):
            answer.append(f"A noisy count misses a district's true population by "
                          f"{with_interval(head['mean_abs_district_error'], low, high, 'people')} on average "
                          f"over {runs} seeded runs (a simulation, not a release).")
        answer.append(f"Drawn to balance the noisy counts exactly, plan 1's worst district would truly be "
                      f"{head['worst_deviation_if_balanced_on_noisy_pct']:.2f}% off the ideal.")
        return Takeaway(answer=tuple(answer), verdict=said,
                        key=("plans_passing_checks", "largest_true_deviation_pct", "mean_abs_district_error",
                             "worst_deviation_if_balanced_on_noisy_pct"),
                        units={"plans_passing_checks": "plans", "largest_true_deviation_pct": "%",
                               "mean_abs_district_error": "people", "worst_deviation_if_balanced_on_noisy_pct": "%",
                               "districts": "districts", "plans": "plans", "cut_edges": "edges between units"})

    def mean_abs_error_interval(self, plan_no: int = 1) -> tuple[float, float]:
        """Normal 95% interval of the plan's mean absolute district error over the seeded runs (mean of the
        per-run means +- 1.96 standard errors); (nan, nan) with a single run."""
        runs = self.runs[self.runs["plan"] == int(plan_no)]
        per_run = runs.assign(a=runs["error"].abs()).groupby("run")["a"].mean().to_numpy()
        if per_run.size < 2:
            return float("nan"), float("nan")
        half = 1.96 * float(per_run.std(ddof=1)) / np.sqrt(per_run.size)
        return float(per_run.mean()) - half, float(per_run.mean()) + half

    def headline_uncertainty(self) -> dict[str, str]:
        """Plan 1's noisy-run numbers with their spread over the seeded runs (from the runs table); the
        true deviation, cut edges and checks are exact on the true block counts."""
        from core.uncertainty_words import num
        runs = self.runs[self.runs["plan"] == 1]
        n_runs = int(runs["run"].nunique())
        per_run_abs = runs.assign(a=runs["error"].abs()).groupby("run")["a"].mean().to_numpy()
        per_run_worst = runs.assign(a=runs["balanced_on_noisy_dev_pct"].abs()).groupby("run")["a"].max().to_numpy()
        if n_runs >= 2:
            sd = float(per_run_abs.std(ddof=1))
            error = (f"± {num(sd / np.sqrt(n_runs), 2)} people (se of the mean; sd {num(sd, 2)} over "
                     f"{n_runs} noisy runs)")
            worst = (f"largest over {n_runs} noisy runs; one run's worst is typically {num(np.median(per_run_worst))} "
                     f"(median, sd {num(per_run_worst.std(ddof=1), 2)})")
        else:
            error = worst = "one noisy run: no spread measured"
        exact = "exact (true block counts, no noise)"
        return {"districts": "exact (count)", "plans": "exact (count)", "largest_true_deviation_pct": exact,
                "mean_abs_district_error": error, "worst_deviation_if_balanced_on_noisy_pct": worst,
                "cut_edges": exact, "plans_passing_checks": exact}


def ensemble_summary(study: pd.DataFrame) -> pd.DataFrame:
    """Mean fragmentation, error and variances by generator and split."""
    return study.groupby(["generator", "split"], as_index=False).agg(
        districts=("district", "size"), mean_fragmentation=("fragmentation", "mean"),
        mean_abs_error=("mean_abs_error", "mean"), mean_empirical_variance=("empirical_variance", "mean"),
        mean_analytic_variance=("analytic_variance", "mean"))


def er_summary(estimates: pd.DataFrame) -> pd.DataFrame:
    """ER point estimates by mode and count source: mean and sd over runs, precincts used and dropped."""
    return estimates.groupby(["mode", "source"], as_index=False).agg(
        group_support=("group_support", "mean"), group_sd=("group_support", "std"),
        complement_support=("complement_support", "mean"), complement_sd=("complement_support", "std"),
        precincts_used=("precincts_used", "mean"), dropped_nonpositive_vap=("dropped_nonpositive_vap", "mean"))


@cached
def run(plan: DistrictPlan, data=None, *, progress=None) -> DistrictResult:
    """Draw the plans, noise the hierarchy ``plan.noise.runs`` times, and summarise every district."""
    geo = load_geography(plan, data)
    if plan.k > len(geo.blocks) and plan.generator != "upload":
        raise ValueError(f"{plan.k} districts cannot be drawn from {len(geo.blocks):,} blocks; choose fewer.")
    if plan.noise.runs * len(geo.blocks) > MAX_RUN_CELLS:
        raise ValueError(f"{plan.noise.runs:,} runs of {len(geo.blocks):,} blocks are too many to hold at once; "
                         f"use at most {MAX_RUN_CELLS // len(geo.blocks):,} runs on this geography.")
    labels = draw_plans(plan, geo, data, progress)
    errors = noisy_block_errors(geo, plan.noise, progress)
    districts, runs = district_tables(geo, labels, errors, plan.noise, plan.balance_tolerance_pct)
    ensemble, skipped, er = None, {}, None
    if plan.ensemble is not None:
        ensemble, skipped = ensemble_part(plan.replace(er=None), data, progress)
    if plan.er is not None:
        er = er_part(plan.data.source, plan.grid_fanouts, plan.geo_seed, geography_files(plan, data), plan.noise,
                     plan.er, progress)
    return DistrictResult(plan, labels, districts, plan_summary_table(districts, plan.balance_tolerance_pct), runs,
                          errors.mean(axis=0), geo.blocks["GEOID"].to_numpy(), ensemble, skipped, er)


