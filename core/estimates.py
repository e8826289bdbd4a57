"""How long a run will take, said before it starts: ``estimate(plan, data=None) -> RunEstimate``.

Each long-running plan type has one estimator in :data:`ESTIMATORS` (key -> :class:`EstimatorSpec`, the
same shape as the project's plugin registries): it counts the work the plan asks for (fits, rounds,
adversary fits, chain steps), turns it into seconds with a cost model, and lists what would make the
run faster. The cost models are sums of work units times coefficients; the coefficients live in
``core/estimate_costs.json``, written by ``benchmarks/estimate_bench.py --fit`` from measurements on
this machine (built-in defaults stand in until it has been run).

Two corrections turn fitted seconds into seconds here and now:

- the machine's speed: a fixed numpy probe (:func:`probe_seconds`) was timed when the coefficients
  were fitted, and is timed once more (cached) in the running process; predicted seconds are scaled
  by ``probe_now / probe_at_fit`` (a loaded machine runs the probe, and the work, slower);
- observed runs: :func:`observe` takes a finished run's measured seconds and keeps a process-wide
  correction factor, a decaying geometric mean of ``measured / predicted`` (a run's weight halves every
  ``OBSERVED_HALF_LIFE`` seconds of age, so the machine's recent load counts most), clipped to
  ``[1/OBSERVED_CLIP, OBSERVED_CLIP]`` and applied to every later estimate.

Both corrections scale the headline and every suggestion's seconds alike, so a suggestion ("1 seed:
about 20 minutes") is read against the same clock as the headline.

Nothing here reads private numbers into a statement meant to be shared: the work sentence names the
public strata count and the plan's own settings, never a stratum's size.
"""
from __future__ import annotations

import functools
import json
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

COSTS_PATH = Path(__file__).with_name("estimate_costs.json")
LONG_RUN_SECONDS = 180.0          # runs predicted above this ask before starting (3 minutes)
OBSERVED_CLIP = 5.0               # one surprising run never moves estimates by more than this factor
DEFAULT_BAND = 2.0                # low/high band around the estimate when the fit gives none
OBSERVED_HALF_LIFE = 1800.0       # seconds after which an observed run weighs half as much as a new one

#: Coefficients used until ``benchmarks/estimate_bench.py --fit`` has written core/estimate_costs.json.
#: Units of each feature are stated beside the estimator that uses it.
DEFAULT_COSTS: dict[str, Any] = {
    "probe_seconds": None,
    "band": DEFAULT_BAND,
    "synthesis": {
        "independent": {"fixed": 0.01, "data": 0.05, "units": 0.01},
        "mst": {"fixed": 0.05, "data": 0.2, "units": 0.05},
        "aim": {"fixed": 0.5, "data": 0.3, "units": 0.5},
        "gem": {"fixed": 0.3, "data": 0.1, "units": 1.0, "steps": 0.08, "compile": 8.0},
        "score": {"fixed": 0.3, "data": 0.5},
        "parallel_efficiency": 0.8,
        "pool_start": 1.0,
    },
    "learner": {"fixed": 1.0, "per_round": 0.004},
    "group_fairness": {"fixed": 2.0, "per_round": 0.003},
    "coherence": {"fixed": 1.0, "per_fit": 0.05},
    "districts": {"fixed": 1.0, "per_run": 0.02, "per_step": 0.05, "per_district": 0.002},
}


# --------------------------------------------------------------------------------------------------
# The estimate
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunEstimate:
    """What a run will do and roughly how long it takes here.

    ``work`` is one sentence of the work ("36 strata x 6 fits = 216 GEM fits"); ``units`` the count
    it ends on; ``seconds`` the corrected prediction with its ``low``/``high`` band; ``suggestions``
    the changes that would make this run faster (only those that apply); ``raw_seconds`` the fitted
    model's seconds before the speed corrections (what :func:`observe` compares against).
    """

    kind: str
    work: str
    units: int
    seconds: float
    low: float
    high: float
    suggestions: tuple[str, ...] = ()
    raw_seconds: float = 0.0
    observed: float = 1.0
    factor: float = 1.0
    """Both corrections together (speed x observed): ``seconds = raw_seconds x factor``, and every
    suggestion's seconds are scaled by it too."""

    def duration_text(self) -> str:
        """'about 40 seconds' or 'about 12 minutes' (rounded the way people say it)."""
        return duration_words(self.seconds)

    def sentence(self) -> str:
        """'About 12 minutes here: 36 strata x 6 fits = 216 GEM fits'."""
        text = self.duration_text()
        return f"{text[0].upper()}{text[1:]} here: {self.work}"

    def is_long(self, threshold: float = LONG_RUN_SECONDS) -> bool:
        return self.seconds > threshold


def duration_words(seconds: float) -> str:
    """Seconds in words: under 90 s in seconds (at least 1), else whole minutes, else hours."""
    seconds = max(float(seconds), 0.0)
    if seconds < 90:
        n = max(1, int(round(seconds)))
        return f"about {n} second{'s' if n != 1 else ''}"
    if seconds < 90 * 60:
        return f"about {int(round(seconds / 60))} minutes"
    hours = seconds / 3600
    return f"about {hours:.1f} hours"


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

Estimator = Callable[[Any, Any, Mapping], "Work"]


@dataclass(frozen=True)
class Tip:
    """A suggestion that quotes modelled seconds: ``text`` with one ``{}`` per entry of ``seconds``,
    filled in words once the estimate knows its corrections, so a suggestion reads on the same clock
    as the headline."""

    text: str
    seconds: tuple[float, ...] = ()

    def render(self, factor: float) -> str:
        return self.text.format(*(duration_words(max(x, 0.0) * factor) for x in self.seconds))


@dataclass(frozen=True)
class Work:
    """An estimator's answer before corrections: the sentence, the count, the modelled seconds and the
    suggestions that apply (plain text, or a :class:`Tip` whose seconds get the headline's corrections)."""

    sentence: str
    units: int
    seconds: float
    suggestions: tuple[str | Tip, ...] = ()


@dataclass(frozen=True)
class EstimatorSpec:
    """One estimator: ``key`` is the plan class's name it answers for, ``label`` what it estimates, and
    ``estimator(plan, data, costs) -> Work``."""

    key: str
    label: str
    estimator: Estimator


class EstimatorRegistry(Mapping[str, EstimatorSpec]):
    """Plan class name -> :class:`EstimatorSpec`; looking a plan up walks its class's bases, so a plan
    subclass is estimated as its parent unless it has its own estimator."""

    def __init__(self) -> None:
        self._specs: dict[str, EstimatorSpec] = {}

    def register(self, key: str, label: str) -> Callable[[Estimator], Estimator]:
        def add(func: Estimator) -> Estimator:
            if key in self._specs:
                raise ValueError(f"An estimator for {key!r} is registered twice.")
            self._specs[key] = EstimatorSpec(key, label, func)
            return func
        return add

    def for_plan(self, plan) -> EstimatorSpec:
        for cls in type(plan).__mro__:
            if cls.__name__ in self._specs:
                return self._specs[cls.__name__]
        raise ValueError(f"No time estimate for a {type(plan).__name__}; estimates cover "
                         f"{', '.join(self._specs)}.")

    def __getitem__(self, key: str) -> EstimatorSpec:
        try:
            return self._specs[key]
        except KeyError:
            raise ValueError(f"Unknown estimator {key!r}; choose one of {list(self._specs)}.") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


ESTIMATORS = EstimatorRegistry()


def estimate(plan, data=None, *, costs: Mapping | None = None, speed: float | None = None) -> RunEstimate:
    """The estimate of ``plan`` (on ``data`` where the work depends on it), corrected for this machine.

    ``costs`` defaults to :func:`load_costs`; ``speed`` to :func:`speed_factor` (1 means as fast as when
    the coefficients were fitted). The observed correction of :func:`observe` is applied on top.
    """
    spec = ESTIMATORS.for_plan(plan)
    costs = load_costs() if costs is None else costs
    work = spec.estimator(plan, data, costs)
    observed = observed_factor()
    factor = (speed_factor(costs) if speed is None else float(speed)) * observed
    seconds = max(work.seconds, 0.0) * factor
    band = max(float(costs.get("band", DEFAULT_BAND) or DEFAULT_BAND), 1.0)
    tips = tuple(t.render(factor) if isinstance(t, Tip) else str(t) for t in work.suggestions)
    return RunEstimate(kind=spec.key, work=work.sentence, units=int(work.units), seconds=seconds,
                       low=seconds / band, high=seconds * band, suggestions=tips,
                       raw_seconds=max(work.seconds, 0.0), observed=observed, factor=factor)


# --------------------------------------------------------------------------------------------------
# Coefficients and speed corrections
# --------------------------------------------------------------------------------------------------

def merge_costs(base: Mapping, update: Mapping) -> dict:
    """``base`` with ``update`` written over it, nested dictionaries merged key by key."""
    out = dict(base)
    for k, v in update.items():
        out[k] = merge_costs(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


@functools.lru_cache(maxsize=4)
def _read_costs(path: str, mtime: float) -> dict:
    with open(path, encoding="utf-8") as fh:
        return merge_costs(DEFAULT_COSTS, json.load(fh))


def load_costs(path: Path | None = None) -> dict:
    """The fitted coefficients (``core/estimate_costs.json``) over the built-in defaults; the defaults
    alone when the file is missing or unreadable (estimates then say less, but still say something)."""
    path = Path(os.environ.get("DASHBOARD_ESTIMATE_COSTS", COSTS_PATH)) if path is None else Path(path)
    try:
        return _read_costs(str(path), path.stat().st_mtime)
    except (OSError, ValueError):
        return merge_costs(DEFAULT_COSTS, {})


def probe_seconds(repeats: int = 5, clock=time.perf_counter) -> float:
    """Seconds of a fixed numpy workload (matrix products and a sort on a seeded array) on one thread,
    the mean of ``repeats``: the yardstick that compares this machine now with the machine the costs were
    fitted on. The mean, not the best, so a loaded machine (whose work gets a share of a core) reads as
    slower; one thread, as each fit runs its linear algebra on one thread of one worker. ``clock=
    time.process_time`` reads the workload's CPU seconds instead: the core's speed whatever its load."""
    try:
        from threadpoolctl import threadpool_limits   # installed with scikit-learn
    except ImportError:
        return _probe(repeats, clock)
    with threadpool_limits(limits=1):
        return _probe(repeats, clock)


def _probe(repeats: int, clock=time.perf_counter) -> float:
    rng = np.random.default_rng(12345)
    a = rng.standard_normal((200, 200)) / 15.0
    v = rng.standard_normal(1_000_000)
    took = []
    for _ in range(max(int(repeats), 1)):
        start = clock()
        b = a
        for _ in range(24):     # long enough (about 0.1 s idle) to see the share of a core it gets
            b = np.tanh(b @ a)
        np.sort(v)
        took.append(clock() - start)
    return float(np.mean(took))


@functools.lru_cache(maxsize=1)
def current_probe_seconds() -> float:
    """:func:`probe_seconds` once per process (cached: a server times its machine once)."""
    return probe_seconds()


def speed_correction(probe_at_fit: float | None, probe_now: float | None) -> float:
    """How much slower than at fitting time this machine runs: ``probe_now / probe_at_fit`` (1 when
    either is unknown), bounded to [0.2, 10] so one odd probe cannot make an estimate absurd."""
    if not probe_at_fit or not probe_now or probe_at_fit <= 0 or probe_now <= 0:
        return 1.0
    return float(min(max(probe_now / probe_at_fit, 0.2), 10.0))


def speed_factor(costs: Mapping | None = None) -> float:
    """The speed correction of the loaded coefficients against this process's probe."""
    costs = load_costs() if costs is None else costs
    fitted = costs.get("probe_seconds")
    return speed_correction(fitted, current_probe_seconds() if fitted else None)


class ObservedSpeed:
    """A running correction from finished runs: a decaying geometric mean of measured / predicted seconds.

    Ratios are combined on the log scale (a run twice as slow and one twice as fast cancel), each
    weighted by ``0.5 ** (age / half_life)`` with its age in seconds of ``clock`` (recent runs weigh more:
    the machine's load now matters, not this morning's), so the factor is
    ``exp(sum w_i log r_i / sum w_i)``, clipped to [1/clip, clip]. Both sums are kept scaled to the
    latest run and decayed when the next one comes, so adding a run is O(1). Thread-safe: one instance
    serves every session of a server.
    """

    def __init__(self, clip: float = OBSERVED_CLIP, half_life: float = OBSERVED_HALF_LIFE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not half_life > 0:
            raise ValueError(f"The half-life of observed runs must be positive; got {half_life}.")
        self.clip = float(clip)
        self.half_life = float(half_life)
        self.clock = clock
        self._lock = threading.Lock()
        self._log_sum = 0.0
        self._weight = 0.0
        self._last: float | None = None
        self._n = 0

    def add(self, predicted: float, measured: float) -> float:
        predicted, measured = float(predicted), float(measured)
        if not (predicted > 0 and measured > 0 and math.isfinite(predicted) and math.isfinite(measured)):
            return self.factor()
        now = float(self.clock())
        with self._lock:
            if self._last is not None:
                decay = 0.5 ** (max(now - self._last, 0.0) / self.half_life)
                self._log_sum *= decay
                self._weight *= decay
            self._log_sum += math.log(measured / predicted)
            self._weight += 1.0
            self._last = now if self._last is None else max(now, self._last)
            self._n += 1
        return self.factor()

    def factor(self) -> float:
        with self._lock:
            if self._n == 0 or self._weight <= 0:
                return 1.0
            value = math.exp(self._log_sum / self._weight)
        return float(min(max(value, 1.0 / self.clip), self.clip))

    def count(self) -> int:
        return self._n

    def reset(self) -> None:
        with self._lock:
            self._log_sum, self._weight, self._last, self._n = 0.0, 0.0, None, 0


OBSERVED = ObservedSpeed()


def observe(estimate_: RunEstimate, measured_seconds: float) -> float:
    """Record that a run estimated by ``estimate_`` took ``measured_seconds``; returns the new factor.

    The comparison is against the estimate's seconds without the observed correction it was made with
    (the model's seconds times the machine's speed correction), so repeated runs do not compound it.
    """
    return OBSERVED.add(estimate_.seconds / max(estimate_.observed, 1e-12), measured_seconds)


def observed_factor() -> float:
    return OBSERVED.factor()


# --------------------------------------------------------------------------------------------------
# Synthesis sweep
# --------------------------------------------------------------------------------------------------

def pair_cells(dims) -> float:
    """Cells over all two-way marginals of columns with these category counts: sum_{i<j} d_i d_j."""
    d = np.asarray(list(dims), dtype=float)
    return float((d.sum() ** 2 - (d ** 2).sum()) / 2.0)


def triple_cells(dims) -> float:
    """Cells over all three-way marginals: the third elementary symmetric sum of the category counts."""
    d = np.asarray(list(dims), dtype=float)
    p1, p2, p3 = d.sum(), (d ** 2).sum(), (d ** 3).sum()
    return float((p1 ** 3 - 3 * p1 * p2 + 2 * p3) / 6.0)


def gem_fit_plan(params, rows: float, share: float = 1.0, stratum: bool = False,
                 rho: float | None = None) -> tuple[int, int]:
    """(rounds, generator rows per step) a GEM fit of ``params`` runs on about ``rows`` rows, as
    ``core.synthesis.gem`` decides them (its functions, not a copy of its constants): a stratum's rounds
    scaled by its ``share`` (``GEM.for_stratum``), then, with ``scale_rounds`` and a budget ``rho``, cut
    to what the noisy total carries (``fit_rounds``, with the row count standing in for the noisy
    total); the generator rows per step from the bucket for that size (``generator_rows``)."""
    from core.synthesis.gem import GEM, fit_rounds, generator_rows

    model = GEM(rounds=int(getattr(params, "rounds", 100)), steps=int(getattr(params, "steps", 40)),
                batch=int(getattr(params, "batch", 1000)), scale_rounds=bool(getattr(params, "scale_rounds", False)))
    cut = model.scale_rounds
    if stratum:
        model = model.for_stratum(share)
    rounds = model.rounds
    if cut and rho is not None and rho > 0:
        rounds = fit_rounds(rounds, max(float(rows), 1.0), rho - rho / max(rounds, 1))
    return int(rounds), int(generator_rows(model.batch, max(float(rows), 1.0)))


def fit_features(key: str, params, rows: float, dims, share: float = 1.0, stratum: bool = False,
                 rho: float | None = None) -> dict:
    """Work units of one synthesizer fit on ``rows`` rows of columns with category counts ``dims``.

    ``data`` = rows x columns / 1e5 (passes over the data). ``units`` by synthesizer: independent,
    the one-way cells / 1e3; MST, the two-way cells / 1e4; AIM, rounds (``max_rounds`` or 16 per
    column) x workload cells / 1e5; GEM, rounds x training steps x generator rows per step x one-hot
    width / 1e9, with the rounds and generator rows the fit itself runs (:func:`gem_fit_plan`: a
    stratum's share of the rounds, the cut to its size and budget ``rho`` when given, the smaller
    generator batch of a small fit), and ``steps`` = rounds x training steps x one-hot width / 1e6, the
    part of a step that does not shrink with the generator rows.
    """
    dims = [int(x) for x in dims]
    n_cols = len(dims)
    out = {"fixed": 1.0, "data": rows * n_cols / 1e5}
    if key == "independent":
        out["units"] = sum(dims) / 1e3
    elif key == "mst":
        out["units"] = pair_cells(dims) / 1e4
    elif key == "aim":
        from core.synthesis.aim import planned_rounds

        rounds = planned_rounds(getattr(params, "max_rounds", 0), n_cols)
        cells = triple_cells(dims) if getattr(params, "degree", 2) == 3 else pair_cells(dims)
        out["units"] = rounds * cells / 1e5
    elif key == "gem":
        rounds, batch = gem_fit_plan(params, rows, share, stratum, rho if n_cols > 1 else None)
        steps = getattr(params, "steps", 40)
        out["units"] = rounds * steps * batch * sum(dims) / 1e9
        out["steps"] = rounds * steps * sum(dims) / 1e6
    else:
        out["units"] = pair_cells(dims) / 1e4
    return out


def fit_seconds(coef: Mapping, features: Mapping) -> float:
    """A fit's modelled seconds: the features weighted by the synthesizer's coefficients."""
    return float(sum(float(coef.get(k, 0.0)) * v for k, v in features.items()))


def _category_counts(frame, columns) -> dict[str, int]:
    out = {}
    for c in columns:
        s = frame[c]
        out[c] = int(len(s.cat.categories)) if hasattr(s, "cat") else int(s.nunique())
    return out


@dataclass(frozen=True)
class SweepShape:
    """What a sweep's cost depends on: training rows, the category counts of the strata and other columns,
    the training rows of each stratum of the public domain (curator-only; never shown), the points."""

    key: str
    params: Any
    rows: float
    strata_dims: tuple[int, ...]
    other_dims: tuple[int, ...]
    stratum_rows: tuple[float, ...]
    epsilons: int
    seeds: int
    min_size: int = 0
    small_action: str = "keep"
    target: bool = True
    n_trees: int = 20
    rhos: tuple[float, ...] = ()
    epsilon_values: tuple[float, ...] = ()
    """The zCDP budget of each epsilon of the sweep (every fit of a point spends it); empty: unknown,
    and GEM's rounds are then not cut to the budget."""

    @property
    def n_strata(self) -> int:
        return int(np.prod(self.strata_dims)) if self.strata_dims else 1

    @property
    def points(self) -> int:
        return self.epsilons * self.seeds

    def fitted_strata(self) -> list[float]:
        """Rows of each model a stratified fit trains: every kept stratum, and one for the merged small ones."""
        rows = list(self.stratum_rows) + [0.0] * (self.n_strata - len(self.stratum_rows))
        small = [r for r in rows if r < self.min_size]
        big = [r for r in rows if r >= self.min_size]
        if self.small_action == "drop":
            return big
        if self.small_action == "merge":
            return big + ([float(sum(small))] if small else [])
        return rows


def sweep_shape(plan, data) -> SweepShape:
    """The :class:`SweepShape` of a synthesis plan with a sweep, on its prepared category frame ``data``."""
    if plan.sweep is None:
        raise ValueError("This plan holds no sweep to estimate; set its sweep first.")
    if data is None:
        from core.synthesis.workflow import prepare

        data, _ = prepare(plan)
    frame = data[list(plan.columns)]
    counts = _category_counts(frame, plan.columns)
    train_share = 1.0 - float(plan.sweep.test_fraction)
    strata_dims = tuple(counts[c] for c in plan.strata)
    other_dims = tuple(counts[c] for c in plan.columns if c not in plan.strata)
    sizes = frame.groupby(list(plan.strata), observed=True).size().to_numpy(float) * train_share
    from core.privacy.accounting import rho_for_epsilon

    rhos = tuple(float(rho_for_epsilon(float(e), float(plan.delta))) for e in plan.sweep.epsilons)
    return SweepShape(plan.synthesizer, plan.params, len(frame) * train_share, strata_dims, other_dims,
                      tuple(sizes), len(plan.sweep.epsilons), len(plan.sweep.seeds),
                      int(plan.min_stratum_size), plan.small_action, plan.target is not None,
                      int(plan.sweep.n_trees), rhos, tuple(float(e) for e in plan.sweep.epsilons))


def workers() -> int:
    """Local workers a fan-out uses (``core.parallel``'s default)."""
    try:
        from core.cluster import default_n_jobs

        return max(int(default_n_jobs()), 1)
    except Exception:   # an estimate never fails for want of the worker count
        return max(os.cpu_count() or 1, 1)


def point_seconds(shape: SweepShape, costs: Mapping) -> list[tuple[float, float, float]]:
    """Per epsilon of the sweep, one point's modelled CPU seconds: (stratified fit, pooled fit, scoring
    of one of the two). The fits depend on the epsilon only through GEM's rounds cut to the budget."""
    syn = costs["synthesis"]
    coef = syn.get(shape.key, syn["mst"])
    all_dims = list(shape.strata_dims) + list(shape.other_dims)
    total_rows = max(shape.rows, 1.0)
    score_coef = syn["score"]
    trees = shape.n_trees / 20.0 if shape.target else 0.3
    score = float(score_coef["fixed"]) + float(score_coef["data"]) * shape.rows * len(all_dims) / 1e5 * trees
    rhos = list(shape.rhos) if len(shape.rhos) == shape.epsilons else [None] * shape.epsilons
    out = []
    for rho in rhos:
        pooled = fit_seconds(coef, fit_features(shape.key, shape.params, shape.rows, all_dims, rho=rho))
        stratified = sum(fit_seconds(coef, fit_features(shape.key, shape.params, r, shape.other_dims,
                                                        share=r / total_rows, stratum=True, rho=rho))
                         for r in shape.fitted_strata())
        out.append((stratified, pooled, score))
    return out


def sweep_seconds(shape: SweepShape, costs: Mapping, n_workers: int | None = None) -> float:
    """Modelled wall seconds of a sweep: per point, the stratified fit (a sum over its strata's models)
    plus the pooled fit plus the scoring of both; the points x 2 fits share the workers.

    On ``lanes`` workers the CPU seconds take ``cpu / (lanes x parallel_efficiency)`` plus the pool's
    start, at least a lane's share of the long (stratified) items, and never more than one process
    takes (``cpu``): a fitted efficiency below 1 / lanes would otherwise make more workers slower."""
    syn = costs["synthesis"]
    coef = syn.get(shape.key, syn["mst"])
    per_eps = point_seconds(shape, costs)
    cpu = shape.seeds * sum(st + po + 2 * sc for st, po, sc in per_eps)
    n_workers = workers() if n_workers is None else max(int(n_workers), 1)
    items = 2 * shape.points
    lanes = min(n_workers, items)
    if lanes > 1:
        efficiency = float(syn.get("parallel_efficiency", 0.8))
        wall = cpu / (lanes * efficiency) + float(syn.get("pool_start", 0.0))
        # the stratified fit is the long item: the sweep lasts at least one of those per lane's share
        long_items = [st + sc for st, _, sc in per_eps]
        wall = max(wall, math.ceil(shape.points / lanes) * float(np.mean(long_items)), max(long_items))
        wall = min(wall, cpu)
    else:
        wall = cpu
    # compiled programs (GEM): each lane builds the pooled and the per-stratum shape once, side by side
    return wall + 2 * float(coef.get("compile", 0.0))


def epsilon_parts(shape: SweepShape, costs: Mapping, n_workers: int | None = None) -> tuple[float, ...]:
    """The sweep's modelled seconds split over its epsilons, in proportion to each epsilon's CPU
    seconds (its points' fits and scoring): the parts add up to :func:`sweep_seconds` exactly."""
    total = sweep_seconds(shape, costs, n_workers)
    cpu = [st + po + 2 * sc for st, po, sc in point_seconds(shape, costs)]
    whole = sum(cpu)
    if whole <= 0:
        return tuple(total / max(shape.epsilons, 1) for _ in cpu)
    return tuple(total * c / whole for c in cpu)


def sweep_sentence(shape: SweepShape, label: str) -> tuple[str, int]:
    """'36 strata x 6 fits = 216 GEM fits (3 epsilons x 2 seeds), plus 6 pooled fits' and the model count."""
    models = len(shape.fitted_strata())
    total = models * shape.points
    fits = f"{shape.points} fit{'s' if shape.points != 1 else ''}"
    sentence = (f"{models} strata x {fits} = {total:,} {label} fits "
                f"({shape.epsilons} epsilon{'s' if shape.epsilons != 1 else ''} x "
                f"{shape.seeds} seed{'s' if shape.seeds != 1 else ''}), plus {shape.points} pooled "
                f"fit{'s' if shape.points != 1 else ''}")
    return sentence, total


def synthesis_suggestions(shape: SweepShape, seconds: float, costs: Mapping) -> tuple[str | Tip, ...]:
    """The changes that would make this sweep faster, each only where it applies (and helps). Their
    seconds are modelled like the headline's (:class:`Tip`): one seed is the same sweep with one seed,
    and the epsilons' parts (:func:`epsilon_parts`) add up to the headline."""
    out: list[str | Tip] = []
    if shape.seeds > 1:
        one = sweep_seconds(replace(shape, seeds=1), costs)
        out.append(Tip(f"Fewer seeds: 1 seed instead of {shape.seeds} takes {{}}.", (one,)))
    if shape.epsilons > 1:
        parts = epsilon_parts(shape, costs)
        names = [f"{e:g}" for e in shape.epsilon_values] if len(shape.epsilon_values) == len(parts) else \
            [str(i + 1) for i in range(len(parts))]
        each = ", ".join(f"epsilon {n} {{}}" for n in names[1:])
        out.append(Tip(f"Fewer epsilons: of the whole run, epsilon {names[0]} takes {{}}"
                       + (f", {each}." if each else "."), parts))
    if shape.n_strata > 4:
        out.append(f"Fewer strata: {shape.n_strata} strata come from every combination of the strata "
                   "columns; a coarser or single strata column fits fewer models.")
    small = sum(1 for r in shape.stratum_rows if r < max(shape.min_size, 1)) + (shape.n_strata - len(shape.stratum_rows))
    if shape.small_action == "keep" and small > 0 and shape.n_strata > 4:
        out.append("Merge small strata into one model (Small strata are: merged) with a small-stratum threshold.")
    if shape.key == "gem":
        from core.synthesis.registry import AIMParams

        aim = replace(shape, key="aim", params=AIMParams())
        aim_s = sweep_seconds(aim, costs)
        if aim_s < 0.7 * seconds:
            out.append(Tip("AIM instead of GEM: {} for the same sweep.", (aim_s,)))
    if not os.environ.get("DASHBOARD_DASK_SCHEDULER"):
        out.append("A Dask cluster (set DASHBOARD_DASK_SCHEDULER; see `make cluster`) runs the fits on "
                   "more cores than this machine's.")
    return tuple(out)


@ESTIMATORS.register("SynthesisPlan", "synthesis sweep")
def _estimate_synthesis(plan, data, costs) -> Work:
    from core.synthesis.registry import SYNTHESIZERS

    shape = sweep_shape(plan, data)
    label = SYNTHESIZERS[plan.synthesizer].label.split(" (")[0]
    sentence, total = sweep_sentence(shape, label)
    seconds = sweep_seconds(shape, costs)
    return Work(sentence, total, seconds, synthesis_suggestions(shape, seconds, costs))


# --------------------------------------------------------------------------------------------------
# Learners, the coherence audit, district ensembles
# --------------------------------------------------------------------------------------------------

def _fewer(what: str, now: int, to: int, seconds: float, share: float) -> Tip:
    return Tip(f"Fewer {what}: {to} instead of {now:,} takes {{}}.", (seconds * share,))


@ESTIMATORS.register("LearningPlan", "elicitation learner and frontier")
def _estimate_learner(plan, data, costs) -> Work:
    """Slack values x rounds: one cost-sensitive oracle call per round (``per_round`` seconds)."""
    c = costs["learner"]
    values, rounds = len(plan.frontier.values), int(plan.frontier.T)
    units = values * rounds
    seconds = float(c["fixed"]) + float(c["per_round"]) * units
    tips = []
    if rounds > 200:
        tips.append(_fewer("rounds per slack value", rounds, 200, seconds, 200 / rounds))
    if values > 4:
        tips.append(_fewer("slack values", values, 4, seconds, 4 / values))
    return Work(f"{values} slack values x {rounds:,} rounds = {units:,} learner rounds", units, seconds, tuple(tips))


@ESTIMATORS.register("GroupFairnessPlan", "group-fairness learner")
def _estimate_group_fairness(plan, data, costs) -> Work:
    """Levels x rounds of the lexicographic learner (one weighted classifier per round), plus the ranking
    and calibration tabs' fixed cost."""
    c = costs["group_fairness"]
    lex = plan.lexifair
    levels, rounds = (int(lex.levels), int(lex.rounds)) if lex is not None else (0, 0)
    units = levels * rounds
    seconds = float(c["fixed"]) + float(c["per_round"]) * units
    tips = []
    if rounds > 200:
        tips.append(_fewer("rounds per level", rounds, 200, seconds, 200 / rounds))
    if levels > 1:
        tips.append(_fewer("levels", levels, 1, seconds, 1 / levels))
    sentence = (f"{levels} level{'s' if levels != 1 else ''} x {rounds:,} rounds = {units:,} classifier calls"
                if lex is not None else "the ranking and calibration tabs (no lexicographic learner)")
    return Work(sentence, units, seconds, tuple(tips))


@ESTIMATORS.register("AuditPlan", "coherence audit")
def _estimate_coherence(plan, data, costs) -> Work:
    """Trials x adversaries x releases adversary fits (each null split scores again), each in proportion
    to the audited rows / 10,000; the epsilon sweep, when asked, adds its own trials."""
    c = costs["coherence"]
    trials, adv, rel = int(plan.trials), len(plan.adversaries), len(plan.releases)
    units = trials * adv * rel
    rows = plan.rows.size if plan.rows.size is not None else (len(data) if hasattr(data, "__len__") else 10_000)
    size = max(float(rows), 1.0) / 1e4
    splits = 1 + 0.25 * (int(plan.null_splits) - 1)
    extra = 0
    if plan.sweep is not None:
        extra = len(plan.sweep.epsilons) * int(plan.sweep.trials) * adv
    seconds = float(c["fixed"]) + float(c["per_fit"]) * (units * splits + extra) * size
    tips = []
    if trials > 20:
        tip = _fewer("trials", trials, 20, seconds, 20 / trials)
        tips.append(replace(tip, text=tip.text + " (a PASS at beta 0.05 needs 59)."))
    if adv > 1:
        tips.append(_fewer("adversaries", adv, 1, seconds, 1 / adv))
    if rows > 5_000:
        tips.append(Tip(f"Fewer audited rows: 5,000 instead of {int(rows):,} takes {{}}.",
                        (seconds * 5_000 / rows,)))
    sentence = f"{trials} trials x {adv} adversaries x {rel} releases = {units:,} adversary fits"
    if extra:
        sentence += f", plus {extra:,} for the epsilon sweep"
    return Work(sentence, units + extra, seconds, tuple(tips))


@ESTIMATORS.register("DistrictPlan", "district plans and ensembles")
def _estimate_districts(plan, data, costs) -> Work:
    """Chains x steps of ReCom (the plan generator's and each ensemble unit's chain), the noisy runs
    (the main study's and runs x splits of the ensemble), and the ensemble's random districts."""
    c = costs["districts"]
    params = plan.params
    steps = int(getattr(params, "steps", 0)) if plan.generator == "recom" else 0
    chains = 1 if steps else 0
    runs = int(plan.noise.runs)
    districts = 0
    ens = plan.ensemble
    if ens is not None:
        ens_steps = int(getattr(params, "steps", 40)) if steps else 40
        chains += len(ens.recom_units)
        steps_total = steps + len(ens.recom_units) * ens_steps
        runs += len(ens.splits) * int(ens.runs)
        districts = int(ens.n_square) + len(ens.disconn_units) * int(ens.n_disconn)
    else:
        steps_total = steps
    blocks = float(np.prod(plan.grid_fanouts)) if plan.data.source == "grid" else 20_000.0
    size = blocks / 4096.0
    seconds = float(c["fixed"]) + size * (float(c["per_run"]) * runs + float(c["per_step"]) * steps_total
                                          + float(c["per_district"]) * districts)
    parts = []
    if chains:
        parts.append(f"{chains} chain{'s' if chains != 1 else ''} x {steps_total // max(chains, 1):,} steps")
    parts.append(f"{runs:,} noisy runs")
    if districts:
        parts.append(f"{districts:,} random districts")
    tips = []
    if ens is not None and ens.runs > 8:
        tips.append(_fewer("runs per split", int(ens.runs), 8, seconds, 0.6))
    if steps_total > 200:
        tips.append("Fewer ReCom steps: chains cost in proportion to their steps.")
    return Work(", ".join(parts), chains * max(steps_total, 1) + runs + districts, seconds, tuple(tips))


__all__ = ["RunEstimate", "Work", "EstimatorSpec", "ESTIMATORS", "estimate", "observe", "observed_factor",
           "speed_factor", "speed_correction", "probe_seconds", "load_costs", "LONG_RUN_SECONDS", "SweepShape",
           "sweep_shape", "sweep_seconds", "fit_features", "fit_seconds", "duration_words", "OBSERVED",
           "ObservedSpeed", "DEFAULT_COSTS", "merge_costs", "COSTS_PATH", "Tip", "gem_fit_plan", "epsilon_parts",
           "point_seconds", "OBSERVED_HALF_LIFE"]
