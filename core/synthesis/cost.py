"""The synthesis area's cost model: how long a synthesis plan runs, said before it starts.

A sweep fits every stratum's model and one pooled model per (epsilon, seed) point, and scores both; a
page's marginals tab adds one such point and a simulated release one fit. Each synthesizer's fit has
its own cost model in :data:`FIT_COSTS` (one line per synthesizer key); the coefficients live in
``core/estimate_costs.json`` (``benchmarks/estimate_bench.py --fit``), this module's defaults stand in
until then. Registered into :data:`core.estimates.ESTIMATORS` by the area's descriptor
(``core/synthesis/area.py``).

Nothing here reads private numbers into a statement meant to be shared: the work sentence names the
public strata count and the plan's own settings, never a stratum's size.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from core.estimates import Tip, Work, workers


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


@dataclass(frozen=True)
class FitCost:
    """The cost model of one synthesizer's fit: ``units(params, rows, dims, share, stratum, rho)`` counts
    the fit's work beyond its passes over the data (see :func:`fit_features`), and ``defaults`` are its
    coefficients (``fixed``, ``data``, ``units``, and any other feature ``units`` returns) until the
    benchmark has fitted them on this machine."""

    units: Callable[..., dict]
    defaults: Mapping[str, float]


def _independent_units(params, rows, dims, share, stratum, rho) -> dict:
    return {"units": sum(dims) / 1e3}


def _mst_units(params, rows, dims, share, stratum, rho) -> dict:
    return {"units": pair_cells(dims) / 1e4}


def _aim_units(params, rows, dims, share, stratum, rho) -> dict:
    from core.synthesis.aim import planned_rounds

    rounds = planned_rounds(getattr(params, "max_rounds", 0), len(dims))
    cells = triple_cells(dims) if getattr(params, "degree", 2) == 3 else pair_cells(dims)
    return {"units": rounds * cells / 1e5}


def _gem_units(params, rows, dims, share, stratum, rho) -> dict:
    rounds, batch = gem_fit_plan(params, rows, share, stratum, rho if len(dims) > 1 else None)
    steps = getattr(params, "steps", 40)
    return {"units": rounds * steps * batch * sum(dims) / 1e9, "steps": rounds * steps * sum(dims) / 1e6}


#: Synthesizer key -> its fit's cost model. Every key of ``SYNTHESIZERS`` has one
#: (``tests/unit/test_registries.py`` walks them); a synthesizer without one is refused by
#: :func:`fit_features`, never timed as another.
FIT_COSTS: dict[str, FitCost] = {
    "independent": FitCost(_independent_units, {"fixed": 0.01, "data": 0.05, "units": 0.01}),
    "mst": FitCost(_mst_units, {"fixed": 0.05, "data": 0.2, "units": 0.05}),
    "aim": FitCost(_aim_units, {"fixed": 0.5, "data": 0.3, "units": 0.5}),
    "gem": FitCost(_gem_units, {"fixed": 0.3, "data": 0.1, "units": 1.0, "steps": 0.08, "compile": 8.0}),
}


def fit_cost(key: str) -> FitCost:
    """The cost model of synthesizer ``key``; ``ValueError`` when it has none."""
    try:
        return FIT_COSTS[key]
    except KeyError:
        raise ValueError(f"The synthesizer {key!r} has no cost model: add a FitCost for it to FIT_COSTS in "
                         "core/synthesis/cost.py, so its runs are timed as its own.") from None


def uncosted(synthesizers=None) -> list[str]:
    """Keys of ``synthesizers`` (default: ``SYNTHESIZERS``) that have no cost model in :data:`FIT_COSTS`."""
    if synthesizers is None:
        from core.synthesis.registry import SYNTHESIZERS as synthesizers
    return [key for key in synthesizers if key not in FIT_COSTS]


def fit_features(key: str, params, rows: float, dims, share: float = 1.0, stratum: bool = False,
                 rho: float | None = None) -> dict:
    """Work units of one synthesizer fit on ``rows`` rows of columns with category counts ``dims``.

    ``data`` = rows x columns / 1e5 (passes over the data). ``units`` by synthesizer (its
    :data:`FIT_COSTS` entry): independent, the one-way cells / 1e3; MST, the two-way cells / 1e4; AIM,
    rounds (``max_rounds`` or 16 per column) x workload cells / 1e5; GEM, rounds x training steps x
    generator rows per step x one-hot width / 1e9, with the rounds and generator rows the fit itself
    runs (:func:`gem_fit_plan`: a stratum's share of the rounds, the cut to its size and budget ``rho``
    when given, the smaller generator batch of a small fit), and ``steps`` = rounds x training steps x
    one-hot width / 1e6, the part of a step that does not shrink with the generator rows.
    """
    cost = fit_cost(key)
    dims = [int(x) for x in dims]
    return {"fixed": 1.0, "data": rows * len(dims) / 1e5, **cost.units(params, rows, dims, share, stratum, rho)}


def coefficients(costs: Mapping, key: str) -> Mapping:
    """Synthesizer ``key``'s coefficients: the fitted ones, else its cost model's defaults."""
    return costs["synthesis"].get(key) or fit_cost(key).defaults


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
    return point_shape(plan, category_frame(plan, data), plan.sweep.epsilons, plan.sweep.seeds)


def category_frame(plan, data) -> pd.DataFrame:
    """``data`` as the run prepares it (every plan column a category): as given when it already is, else
    prepared from the raw table, the uploaded bytes or (None) the bundled data set."""
    if isinstance(data, pd.DataFrame) and all(c in data.columns and isinstance(data[c].dtype, pd.CategoricalDtype)
                                              for c in plan.columns):
        return data
    from core.synthesis.workflow import prepare

    return prepare(plan, data)[0]


def point_seconds(shape: SweepShape, costs: Mapping) -> list[tuple[float, float, float]]:
    """Per epsilon of the sweep, one point's modelled CPU seconds: (stratified fit, pooled fit, scoring
    of one of the two). The fits depend on the epsilon only through GEM's rounds cut to the budget."""
    syn = costs["synthesis"]
    coef = coefficients(costs, shape.key)
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
    coef = coefficients(costs, shape.key)
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


#: The synthesis section of the coefficients (``costs["synthesis"]``) until the benchmark has run.
DEFAULT_COSTS: dict[str, Any] = {"synthesis": {
    **{key: dict(cost.defaults) for key, cost in FIT_COSTS.items()},
    "score": {"fixed": 0.3, "data": 0.5},
    "parallel_efficiency": 0.8,
    "pool_start": 1.0,
}}


def point_shape(plan, frame, epsilons, seeds) -> SweepShape:
    """The :class:`SweepShape` of ``plan``'s fits at these epsilons and seeds (a sweep, or one point)."""
    frame = frame[list(plan.columns)]
    counts = _category_counts(frame, plan.columns)
    test_fraction = float(plan.sweep.test_fraction) if plan.sweep is not None else 0.0
    train_share = 1.0 - test_fraction
    strata_dims = tuple(counts[c] for c in plan.strata)
    other_dims = tuple(counts[c] for c in plan.columns if c not in plan.strata)
    sizes = frame.groupby(list(plan.strata), observed=True).size().to_numpy(float) * train_share
    from core.privacy.accounting import rho_for_epsilon

    rhos = tuple(float(rho_for_epsilon(float(e), float(plan.delta))) for e in epsilons)
    n_trees = int(plan.sweep.n_trees) if plan.sweep is not None else 20
    return SweepShape(plan.synthesizer, plan.params, len(frame) * train_share, strata_dims, other_dims,
                      tuple(sizes), len(epsilons), len(seeds), int(plan.min_stratum_size), plan.small_action,
                      plan.target is not None, n_trees, rhos, tuple(float(e) for e in epsilons))


def release_seconds(shape: SweepShape, method: str, costs: Mapping) -> float:
    """One simulated release: the stratified fit (a model per kept stratum) or the pooled one."""
    coef = coefficients(costs, shape.key)
    rho = shape.rhos[0] if shape.rhos else None
    if method == "pooled":
        dims = list(shape.strata_dims) + list(shape.other_dims)
        return fit_seconds(coef, fit_features(shape.key, shape.params, shape.rows, dims, rho=rho))
    total = max(shape.rows, 1.0)
    return sum(fit_seconds(coef, fit_features(shape.key, shape.params, r, shape.other_dims, share=r / total,
                                              stratum=True, rho=rho))
               for r in shape.fitted_strata())


def estimate_synthesis(plan, data, costs) -> Work:
    """The sweep (when the plan holds one), the marginals tab's one point and the simulated release's
    fit, added up; a plan that fits nothing (the overview and the simulated means) costs the scoring's
    fixed seconds."""
    from core.synthesis.registry import SYNTHESIZERS

    fit_cost(plan.synthesizer)      # a synthesizer without a cost model is refused before anything runs
    label = SYNTHESIZERS[plan.synthesizer].label.split(" (")[0]
    if plan.sweep is None and plan.marginals is None and plan.release is None:
        return Work("the strata overview and the simulated means (no synthesizer fitted)", 0,
                    float(costs["synthesis"]["score"]["fixed"]))
    parts, units, seconds = [], 0, 0.0
    tips: tuple = ()
    data = category_frame(plan, data)
    if plan.sweep is not None:
        shape = sweep_shape(plan, data)
        sentence, units = sweep_sentence(shape, label)
        sweep = sweep_seconds(shape, costs)
        seconds += sweep
        parts.append(sentence)
        tips = synthesis_suggestions(shape, sweep, costs)
    if plan.marginals is not None:
        shape = point_shape(plan, data, (plan.marginals.epsilon,), (plan.marginals.seed,))
        seconds += sweep_seconds(shape, costs)
        units += len(shape.fitted_strata()) + 1
        parts.append(f"one stratified and one pooled {label} fit for the marginals")
    if plan.release is not None:
        shape = point_shape(plan, data, (plan.release.epsilon,), (plan.release.seed,))
        seconds += release_seconds(shape, plan.release.method, costs)
        units += 1 if plan.release.method == "pooled" else len(shape.fitted_strata())
        parts.append(f"one {plan.release.method} {label} release")
    return Work("; ".join(parts), units, seconds, tips)


__all__ = ["DEFAULT_COSTS", "FIT_COSTS", "FitCost", "SweepShape", "category_frame", "coefficients", "epsilon_parts",
           "estimate_synthesis", "fit_cost", "fit_features", "fit_seconds", "gem_fit_plan", "point_seconds",
           "point_shape", "release_seconds", "sweep_seconds", "sweep_sentence", "sweep_shape",
           "synthesis_suggestions", "uncosted"]
