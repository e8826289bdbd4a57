"""Privacy-utility sweep: epsilons x seeds x {stratified, pooled}, metrics per group.

Every function here takes the page's :class:`~core.synthesis.plan.SynthesisPlan` and the prepared
category frame of its columns. The metrics are measured against the real rows: they are
curator-only diagnostics, never a release.
"""
from __future__ import annotations

import functools
import inspect
import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.contracts import Progress, make_rng, seed_sequence
from core.parallel import map_trials
from core.privacy.accounting import gaussian_sigma, rho_for_epsilon
from core.privacy.protection import ProtectionUnit
from core.synthesis.encoding import encode_categories
from core.synthesis.metrics import (group_keys, ml_utility, one_way_tvd, parity_error, tvd_by_stratum, two_way_tvd,
                                    workload_error)
from core.synthesis.plan import MAX_STRATA, METHODS, SynthesisPlan
from core.synthesis.registry import SYNTHESIZERS
from core.synthesis.round_relay import relayed_map
from core.synthesis.stratified import StratifiedSynthesizer
from core.synthesis.strata import StrataIndex


MEASURES = {"tvd_2way": "two-way TVD", "tvd_1way": "one-way TVD", "workload_3way": "three-way workload error",
            "accuracy": "TSTR accuracy"}
"""The per-group measures a sweep can define, in the order the page offers them, and their short names."""


def defined_measures(n_other: int, has_target: bool) -> tuple[str, ...]:
    """The per-group measures defined with ``n_other`` columns besides the strata: one-way TVD always,
    two-way TVD from two columns, three-way workload error from three, accuracy with a target."""
    out = [m for m, need in (("tvd_2way", 2), ("tvd_1way", 1), ("workload_3way", 3)) if n_other >= need]
    return tuple(out + (["accuracy"] if has_target else []))


@dataclass
class SweepResult:
    """Tidy results: per-group and overall metrics per (epsilon, seed, method), strata fates, a ledger.

    Every figure a page, a headline or a report shows is one of the named views below, computed here
    once: ``measures`` (those defined for these columns), ``main_measure``, ``curves(measure)``,
    ``overall_curves()``, ``worst_groups(measure)`` and ``headline_rows()``.

    Like with like: the population error beside a per-group error is computed on the same marginals,
    those of the columns besides the strata (inside a stratum the strata columns are constant, so the
    per-group figures cannot include them). The population figure is that measure over all rows at
    once; how well a method reproduces the strata sizes themselves is in the strata table, not here.
    """

    group_metrics: pd.DataFrame
    overall_metrics: pd.DataFrame
    strata: pd.DataFrame
    ledger: pd.DataFrame
    budget_statement: str
    group_labels: dict = field(default_factory=dict)
    real_baseline: dict = field(default_factory=dict)
    measures: tuple[str, ...] = ("tvd_2way", "tvd_1way", "workload_3way")

    @property
    def main_measure(self) -> str:
        """The measure the page leads with and the headline reports: two-way TVD when defined, else one-way."""
        return "tvd_2way" if "tvd_2way" in self.measures else "tvd_1way"

    @property
    def main_measure_name(self) -> str:
        """The main measure in words ("two-way TVD")."""
        return MEASURES[self.main_measure]

    def _check(self, measure: str) -> str:
        if measure not in self.measures:
            raise ValueError(f"The measure {measure!r} is not defined for these columns; "
                             f"choose one of {list(self.measures)}.")
        return measure

    def curves(self, measure: str | None = None) -> pd.DataFrame:
        """Per (epsilon, method, group): mean, min and max of ``measure`` over seeds, and each group's real
        rows (curator only)."""
        measure = self._check(measure or self.main_measure)
        gm = self.group_metrics[self.group_metrics["metric"] == measure]
        out = curve_table(gm)
        return out.assign(real_rows=out["group"].map(gm.groupby("group")["real_rows"].first()))

    def overall_curves(self) -> pd.DataFrame:
        """Per (epsilon, method, metric): mean, min and max over seeds of every population metric."""
        return curve_table(self.overall_metrics, by=("epsilon", "method", "metric"))

    def worst_groups(self, measure: str | None = None) -> pd.DataFrame:
        """Per (epsilon, method): the population ``measure`` and the worst group's, averaged over seeds,
        on the same marginals (see the class docstring). Error measures only: the worst is the largest."""
        measure = self._check(measure or self.main_measure)
        if measure == "accuracy":
            raise ValueError("The worst group is defined for the error measures (lower is better); "
                             "choose one of the TVDs or the workload error, not accuracy.")
        return worst_group_table(self, measure)

    def headline_rows(self) -> list[dict]:
        """At the largest epsilon, per method: the main measure's worst group (its name, the mean over
        seeds, the values per seed) and the population figure beside it (mean and values per seed), with
        the names the headline gives them."""
        measure = self.main_measure
        table = self.worst_groups(measure)
        top = float(table["epsilon"].max())
        gm = self.group_metrics[(self.group_metrics["metric"] == measure) & (self.group_metrics["epsilon"] == top)]
        om = self.overall_metrics[(self.overall_metrics["metric"] == measure) & (self.overall_metrics["epsilon"] == top)]
        rows = []
        for method in METHODS:
            row = table[(table["epsilon"] == top) & (table["method"] == method)].iloc[0]
            name = row["worst_group_name"]
            values = gm.loc[(gm["method"] == method) & (gm["group"] == name), "value"] if isinstance(name, str) \
                else pd.Series(dtype=float)
            words = f"{MEASURES[measure]}, {method}, epsilon {top:g}"
            rows.append({"method": method, "epsilon": top, "measure": measure, "group": name,
                         "worst_name": f"worst-group {words}", "worst": float(row["worst_group"]),
                         "values": values.to_numpy(float),
                         "population_name": f"population {words}", "population": float(row["population"]),
                         "population_values": om.loc[om["method"] == method, "value"].to_numpy(float)})
        return rows


def stratum_labels(strata_columns, labels, domain) -> dict[int, str]:
    """Readable name of every stratum flat index, e.g. 'Female · White'."""
    return StrataIndex.of(strata_columns, domain).names(labels)


def split_train_test(codes: pd.DataFrame, fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Random train/test split; synthesizers see only the training rows."""
    perm = make_rng(seed, what="the train/test split").permutation(len(codes))
    n_test = int(round(fraction * len(codes)))
    return codes.iloc[perm[n_test:]].reset_index(drop=True), codes.iloc[perm[:n_test]].reset_index(drop=True)


def fit_progress(model, progress: Progress | None, prefix: str) -> dict:
    """Keyword arguments that hand ``model.fit`` a per-fit ``progress(round, planned, message)``.

    The synthesizer's own message is shown after ``prefix`` ("fit 2 of 6 - AIM round 3 ..."), and a
    ``Cancelled`` raised by ``progress`` stops the fit at its next round. A fit whose signature takes
    no ``progress`` gets nothing; a wrapper that keeps its callback as an attribute (the stratified
    wrapper, which reports its strata as they finish) gets it set there. Only call this for a fit
    that runs in this process: a callback cannot reach the page from a worker process.
    """
    if progress is None:
        return {}

    def inner(done: int, total: int, message: str = "") -> None:
        progress(done, total, f"{prefix} - {message}" if message else prefix)

    try:
        params = inspect.signature(model.fit).parameters
        accepts = "progress" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        accepts = False
    if accepts:
        return {"progress": inner}
    if hasattr(model, "progress"):
        model.progress = inner
    return {}


def build_synthesizer(plan: SynthesisPlan, method: str, n_jobs: int = 1, labels=None):
    """The pooled synthesizer or its stratified wrapper for this plan; with the columns' category
    ``labels`` the wrapper names strata by them in its ledger and progress ('stratum Female · White')."""
    spec, params = SYNTHESIZERS[plan.synthesizer], plan.params

    def factory():
        return spec.build(params)

    if method == "pooled":
        return factory()
    return StratifiedSynthesizer(factory, plan.strata, plan.size_policy, plan.count_share,
                                 plan.min_stratum_size, plan.small_action, n_jobs=n_jobs, labels=labels)


def fit_rng(seed: int, epsilon: float, method: str) -> np.random.Generator:
    """The sub-stream of one (seed, epsilon, method) fit: the same in the sweep and the marginals tab."""
    return make_rng(seed_sequence(seed, int(round(epsilon * 1e6)), METHODS.index(method)))


def _one_run(args, progress: Progress | None = None) -> dict:
    plan, train, test, domain, labels, epsilon, seed, method, position, total = args
    rho = rho_for_epsilon(epsilon, plan.delta)
    unit = ProtectionUnit.of(plan.data)
    rng = fit_rng(seed, epsilon, method)
    model = build_synthesizer(plan, method, labels=labels)
    # the mechanisms run at the per-row budget, so rho holds per person (the same at one row per person)
    model = model.fit(train, domain, unit.row_budget(rho, "rho"), rng,
                      **fit_progress(model, progress, f"fit {position} of {total} ({method}, epsilon {epsilon:g})"))
    synth = model.sample(len(train), rng)
    per = tvd_by_stratum(train, synth, domain, plan.strata)
    per_metric = ("tvd_1way", "tvd_2way", "workload_3way")
    rows = [(g, m, v) for g, *values in zip(per["stratum"], *(per[m] for m in per_metric))
            for m, v in zip(per_metric, values)]
    codes_parity = parity_error(train, synth, domain, plan.strata, definition="paper_codes")
    # the population figures on the same marginals as the per-group ones: the columns besides the strata
    others = [c for c in train.columns if c not in plan.strata]
    overall = {"tvd_1way": float(one_way_tvd(train, synth, domain, others)["tvd"].mean()),
               "tvd_2way": (float(two_way_tvd(train, synth, domain, others)["tvd"].mean()) if len(others) > 1
                            else float("nan")),
               "workload_3way": workload_error(train, synth, domain, others),
               **parity_error(train, synth, domain, plan.strata),
               "parity_error_codes": codes_parity["parity_error"],
               "max_disparity_codes": codes_parity["max_disparity"], "rho": rho}
    if plan.target is not None:
        keys = group_keys(test, plan.strata, domain)
        util, by_group = ml_utility(synth, test, plan.target, keys, plan.sweep.n_trees)
        overall.update(util)
        rows += [(int(g), "accuracy", float(a)) for g, a in zip(by_group["group"], by_group["accuracy"])]
    strata = model.strata_.assign(epsilon=epsilon, seed=seed) if method == "stratified" else None
    person = unit.person_ledger(model.ledger_) if method == "stratified" else None
    ledger = person.to_frame() if method == "stratified" else None
    statement = (" ".join([person.statement(delta=plan.delta), unit.sentence()]) if method == "stratified"
                 else "")
    return {"epsilon": epsilon, "seed": seed, "method": method, "groups": rows, "overall": overall,
            "strata": strata, "ledger": ledger, "statement": statement}


def check_strata_count(n_strata: int) -> None:
    """Refuse more than MAX_STRATA strata (the public domain's product, empty cells included)."""
    if n_strata > MAX_STRATA:
        raise ValueError(f"These strata columns make {n_strata:,} strata (every combination of their values); "
                         f"choose fewer or coarser columns (at most {MAX_STRATA}).")


def run_sweep(plan: SynthesisPlan, frame: pd.DataFrame, progress: Progress | None = None,
              n_jobs: int | None = None) -> SweepResult:
    """The sweep of ``plan.sweep`` on the prepared category ``frame`` (curator-only diagnostics)."""
    sweep = plan.sweep
    codes, domain, labels = encode_categories(frame[list(plan.columns)])
    check_strata_count(int(np.prod([domain[c] for c in plan.strata])))
    train, test = split_train_test(codes, sweep.test_fraction, sweep.split_seed)
    grid = [(e, s, m) for e in sweep.epsilons for s in sweep.seeds for m in METHODS]
    items = [(plan, train, test, domain, labels, e, s, m, i + 1, len(grid)) for i, (e, s, m) in enumerate(grid)]
    # one process: each fit reports its own rounds; workers, local or on a Dask cluster, relay theirs
    # (``round_relay``)
    if n_jobs == 1:
        runs = map_trials(functools.partial(_one_run, progress=progress), items, n_jobs=1, progress=progress,
                          label="synthesizer fits")
    elif progress is not None:
        runs = relayed_map(_one_run, items, n_jobs=n_jobs, progress=progress, label="synthesizer fits")
    else:
        runs = map_trials(_one_run, items, n_jobs=n_jobs, label="synthesizer fits")
    names = stratum_labels(plan.strata, labels, domain)
    real_sizes = np.bincount(group_keys(train, plan.strata, domain), minlength=len(names))
    group_rows, overall_rows, strata, ledger, statement = [], [], [], None, ""
    for r in runs:
        for g, metric, value in r["groups"]:
            group_rows.append((r["epsilon"], r["seed"], r["method"], names[g], int(real_sizes[g]), metric, value))
        for metric, value in r["overall"].items():
            overall_rows.append((r["epsilon"], r["seed"], r["method"], metric, value))
        if r["strata"] is not None:
            strata.append(r["strata"])
            if ledger is None:
                ledger, statement = r["ledger"], r["statement"]
    baseline = {}
    if plan.target is not None:
        # curator-only reference: the same classifier trained on the real training rows
        baseline, _ = ml_utility(train, test, plan.target, group_keys(test, plan.strata, domain),
                                 sweep.n_trees)
        y = test[plan.target].to_numpy()
        baseline["majority_accuracy"] = float(max(np.mean(y > 0), np.mean(y == 0)))
    strata_df = pd.concat(strata, ignore_index=True)
    index = StrataIndex.of(plan.strata, domain)
    flat = [index.flat_of(s) for s in strata_df["stratum"]]
    strata_df["group"] = [names[f] for f in flat]
    strata_df["real_rows"] = [int(real_sizes[f]) for f in flat]
    return SweepResult(
        group_metrics=pd.DataFrame(group_rows, columns=["epsilon", "seed", "method", "group", "real_rows",
                                                        "metric", "value"]),
        overall_metrics=pd.DataFrame(overall_rows, columns=["epsilon", "seed", "method", "metric", "value"]),
        strata=strata_df, ledger=readable_ledger(ledger, plan.strata, labels, domain),
        budget_statement=statement, group_labels=names, real_baseline=baseline,
        measures=defined_measures(len(plan.columns) - len(plan.strata), plan.target is not None))


def readable_ledger(ledger: pd.DataFrame, strata_columns, labels, domain) -> pd.DataFrame:
    """The ledger with stratum keys like 'sex=0|race=4' replaced by their category names, in a part
    and in a label that names the stratum ('stratum sex=0|race=4: round 3: selection')."""
    index = StrataIndex.of(strata_columns, domain)
    keys = {index.key(flat): name for flat, name in index.names(labels).items()}
    out = ledger.copy()
    if not keys or out.empty:
        return out
    # a whole key only: not preceded by more of a key, followed by the end or ':'
    pattern = re.compile("(?<![\\w=|])(" + "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
                         + ")(?=:|$)")
    for col in ("label", "part"):
        out[col] = [pattern.sub(lambda m: keys[m.group(1)], v) if isinstance(v, str) else v for v in out[col]]
    return out


def curve_table(frame: pd.DataFrame, by: tuple[str, ...] = ("epsilon", "method", "group")) -> pd.DataFrame:
    """Mean, min and max over seeds of ``value`` for each (epsilon, method, group) (the curve and its band)."""
    keys = [c for c in by if c in frame.columns]
    out = frame.groupby(keys, observed=True)["value"].agg(["mean", "min", "max", "count"]).reset_index()
    return out.rename(columns={"count": "seeds"})


def smallest_strata(result: SweepResult, metric: str = "tvd_2way", n: int = 6) -> pd.DataFrame:
    """The ``n`` smallest strata by real rows, their fate, the size the release used, and their mean
    ``metric`` per method at the smallest and largest epsilon (curator-only diagnostics)."""
    st = result.strata
    eps_lo = float(st["epsilon"].min())
    fate = (st[st["epsilon"] == eps_lo].groupby("group", observed=True)
            .agg(real_rows=("real_rows", "first"), size_used=("size_used", "mean"),
                 sample_share=("sample_share", "mean"),
                 fate=("fate", lambda f: ", ".join(sorted(set(f)))))
            .reset_index().sort_values("real_rows").head(n))
    gm = result.group_metrics
    gm = gm[gm["metric"] == metric]
    for eps in sorted({float(gm["epsilon"].min()), float(gm["epsilon"].max())}) if len(gm) else []:
        for method in METHODS:
            col = gm[(gm["epsilon"] == eps) & (gm["method"] == method)].groupby("group")["value"].mean()
            fate[f"{metric} {method} eps={eps:g}"] = fate["group"].map(col)
    return fate.reset_index(drop=True)


def strata_overview(data: pd.DataFrame, strata_columns: tuple[str, ...]) -> pd.DataFrame:
    """Every stratum of the public domain with its real size and share (curator-only diagnostic)."""
    codes, domain, labels = encode_categories(data[list(strata_columns)])
    check_strata_count(int(np.prod([domain[c] for c in strata_columns])))
    names = stratum_labels(strata_columns, labels, domain)
    sizes = np.bincount(group_keys(codes, strata_columns, domain), minlength=len(names))
    out = pd.DataFrame({"group": [names[i] for i in range(len(names))], "real_rows": sizes,
                        "share": sizes / max(sizes.sum(), 1)})
    return out.sort_values("real_rows", ascending=False).reset_index(drop=True)


def worst_group_table(result: SweepResult, metric: str = "tvd_2way") -> pd.DataFrame:
    """Per (epsilon, method): the population ``metric`` and the worst group's, each averaged over seeds.

    Groups where the metric is undefined (NaN, e.g. a two-way TVD with one column besides the strata)
    are left out; with no defined group the worst-group columns are NaN.
    """
    pop = (result.overall_metrics[result.overall_metrics["metric"] == metric]
           .groupby(["epsilon", "method"])["value"].mean().rename("population"))
    gm = result.group_metrics[(result.group_metrics["metric"] == metric) & result.group_metrics["value"].notna()]
    per_group = gm.groupby(["epsilon", "method", "group"])["value"].mean()
    worst = per_group.groupby(["epsilon", "method"]).max().rename("worst_group")
    which = per_group.groupby(["epsilon", "method"]).idxmax().map(lambda t: t[2]).rename("worst_group_name")
    out = pd.concat([pop, worst, which], axis=1)
    out.index.names = ["epsilon", "method"]
    return out.reset_index()


def measurement_sds(key: str, params, d: int, rho: float) -> tuple[float, float]:
    """The Gaussian sd on one cell of the one-way and the two-way marginals the synthesizer ``key``
    (with ``params``; its defaults when None) measures on ``d`` columns with budget ``rho``, as the
    synthesizer itself plans them (its ``planned_sds``; NaN where it measures no two-way marginal).
    A synthesizer that states no plan gets NaN for both: its noise is not known in advance."""
    if key not in SYNTHESIZERS:
        raise ValueError(f"No noise calibration is known for the synthesizer {key!r}: it is not registered; "
                         f"choose one of {', '.join(SYNTHESIZERS)}.")
    model = SYNTHESIZERS[key].build(params)
    planned = getattr(model, "planned_sds", None)
    if planned is None:
        return math.nan, math.nan
    one, two = planned(int(d), float(rho))
    return float(one), float(two)


def noise_table(plan: SynthesisPlan, epsilons) -> pd.DataFrame:
    """Per epsilon: rho, the Gaussian sd on each cell of the chosen synthesizer's one-way and two-way
    measurements inside one stratum, the pooled one-way sd, and the sd of the DP counts (0 when sizes
    are public). Each synthesizer's own budget split is followed (:func:`measurement_sds`), calibrated
    by ``core.privacy.accounting.gaussian_sigma``. ``rho`` is the per-person budget; with up to k rows per
    person the sds are those of the per-row budget rho / k^2 the mechanisms run at."""
    unit = ProtectionUnit.of(plan.data)
    d = len(plan.columns) - len(plan.strata)  # a stratum's model sees the other columns
    pooled_d = len(plan.columns)
    rows = []
    for eps in epsilons:
        rho = rho_for_epsilon(eps, plan.delta)
        run = unit.row_budget(rho, "rho")
        rho_count = plan.count_share * run if plan.size_policy == "dp_count" else 0.0
        one, two = measurement_sds(plan.synthesizer, plan.params, d, run - rho_count)
        pooled_one, _ = measurement_sds(plan.synthesizer, plan.params, pooled_d, run)
        rows.append((eps, rho, one, two, pooled_one, gaussian_sigma(1.0, rho_count) if rho_count else 0.0))
    return pd.DataFrame(rows, columns=["epsilon", "rho", "stratum one-way cell sd", "stratum two-way cell sd",
                                       "pooled one-way cell sd", "stratum count sd"])


def marginal_comparison(plan: SynthesisPlan, frame: pd.DataFrame,
                        progress: Progress | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Real, stratified and pooled one-way shares of every non-strata column inside every group, for
    ``plan.marginals`` (epsilon, seed), fitted on the sweep's training rows with the sweep's seeds.

    Returns (shares: group, column, category, real, stratified, pooled) and
    (tvd: group, real_rows, column, method, tvd). Curator-only diagnostics.
    """
    sub = plan.marginals
    split = plan.sweep if plan.sweep is not None else None
    codes, domain, labels = encode_categories(frame[list(plan.columns)])
    train, _ = split_train_test(codes, split.test_fraction if split else 0.2, split.split_seed if split else 42)
    rho = ProtectionUnit.of(plan.data).row_budget(rho_for_epsilon(sub.epsilon, plan.delta), "rho")
    synths = {}
    for i, method in enumerate(METHODS):
        rng = fit_rng(sub.seed, sub.epsilon, method)
        model = build_synthesizer(plan, method, labels=labels)
        extra = fit_progress(model, progress, f"marginals: fit {i + 1} of {len(METHODS)} ({method})")
        synths[method] = model.fit(train, domain, rho, rng, **extra).sample(len(train), rng)
    names = stratum_labels(plan.strata, labels, domain)
    k = len(names)
    keys = {"real": group_keys(train, plan.strata, domain),
            **{m: group_keys(s, plan.strata, domain) for m, s in synths.items()}}
    frames = {"real": train, **synths}
    real_rows = np.bincount(keys["real"], minlength=k)
    present = np.flatnonzero(real_rows > 0)
    share_parts, tvd_rows = [], []
    for col in [c for c in plan.columns if c not in plan.strata]:
        size = domain[col]
        tables = {}
        for src, fr in frames.items():
            counts = np.bincount(keys[src] * size + fr[col].to_numpy(np.int64), minlength=k * size)
            counts = counts.reshape(k, size).astype(float)
            tot = counts.sum(1, keepdims=True)
            tables[src] = np.divide(counts, tot, out=np.full_like(counts, np.nan), where=tot > 0)[present]
        grid_g, grid_v = np.meshgrid(present, np.arange(size), indexing="ij")
        share_parts.append(pd.DataFrame({
            "group": [names[g] for g in grid_g.ravel()], "column": col,
            "category": [str(labels[col][v]) for v in grid_v.ravel()],
            **{src: tables[src].ravel() for src in frames}}))
        for method in METHODS:
            tv = 0.5 * np.abs(tables["real"] - tables[method]).sum(1)
            tv[np.isnan(tables[method]).all(1)] = 1.0  # a group the method never produced
            tvd_rows += [(names[g], int(real_rows[g]), col, method, float(t)) for g, t in zip(present, tv)]
    shares = pd.concat(share_parts, ignore_index=True)
    tvd_df = pd.DataFrame(tvd_rows, columns=["group", "real_rows", "column", "method", "tvd"])
    return shares, tvd_df
