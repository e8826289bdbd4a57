"""Privacy-utility sweep: epsilons x seeds x {stratified, pooled}, metrics per group, cached on disk."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from core.cache import memory
from core.parallel import map_trials
from core.privacy.accounting import rho_for_epsilon
from core.synthesis.encoding import decode_categories, encode_categories
from core.synthesis.metrics import (group_keys, ml_utility, one_way_tvd, parity_error, tvd_by_stratum, two_way_tvd,
                                    workload_error)
from core.synthesis.registry import SYNTHESIZERS
from core.synthesis.stratified import StratifiedSynthesizer

METHODS = ("stratified", "pooled")
MAX_STRATA = 200   # beyond this a sweep takes minutes and its per-group views are unreadable


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep depends on (the data is passed separately and fingerprinted by the cache)."""

    columns: tuple[str, ...]
    strata_columns: tuple[str, ...] = ("sex", "race")
    target: str | None = "income"
    synthesizer: str = "mst"
    epsilons: tuple[float, ...] = (0.1, 1.0, 5.0)
    seeds: tuple[int, ...] = (0, 1)
    delta: float = 1e-9
    size_policy: str = "public"
    sizes_declared_public: bool = False
    count_share: float = 0.1
    min_stratum_size: int = 0
    small_action: str = "keep"
    test_fraction: float = 0.2
    split_seed: int = 42
    n_trees: int = 20
    n_jobs: int = 1

    def validate(self) -> None:
        """Raise ValueError saying what to change when the configuration cannot run."""
        if self.synthesizer not in SYNTHESIZERS:
            raise ValueError(f"Unknown synthesizer {self.synthesizer!r}.")
        if not self.epsilons or any(e <= 0 for e in self.epsilons):
            raise ValueError("Give at least one positive epsilon.")
        if not self.seeds:
            raise ValueError("Give at least one seed.")
        if not self.strata_columns:
            raise ValueError("Choose at least one strata column.")
        missing = [c for c in self.strata_columns if c not in self.columns]
        if missing:
            raise ValueError(f"Strata column(s) {missing} must be among the columns to synthesise.")
        if self.target is not None and self.target not in self.columns:
            raise ValueError("The target column must be among the columns to synthesise.")
        if len(self.columns) - len(self.strata_columns) < 1:
            raise ValueError("Synthesise at least one column besides the strata columns.")
        if self.size_policy == "public" and not self.sizes_declared_public:
            raise ValueError("Public stratum sizes must be declared public: tick the box, or choose DP counts.")
        if not 0 < self.test_fraction < 1:
            raise ValueError("The held-out test fraction must be between 0 and 1.")


@dataclass
class SweepResult:
    """Tidy results: per-group and overall metrics per (epsilon, seed, method), strata fates, a ledger."""

    group_metrics: pd.DataFrame
    overall_metrics: pd.DataFrame
    strata: pd.DataFrame
    ledger: pd.DataFrame
    budget_statement: str
    group_labels: dict = field(default_factory=dict)
    real_baseline: dict = field(default_factory=dict)


def stratum_labels(strata_columns, labels, domain) -> dict[int, str]:
    """Readable name of every stratum flat index, e.g. 'Female · White'."""
    sizes = tuple(domain[c] for c in strata_columns)
    out = {}
    for flat in range(int(np.prod(sizes))):
        idx = np.unravel_index(flat, sizes)
        out[flat] = " · ".join(str(labels[c][i]) for c, i in zip(strata_columns, idx))
    return out


def split_train_test(codes: pd.DataFrame, fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Random train/test split; synthesizers see only the training rows."""
    perm = np.random.default_rng(seed).permutation(len(codes))
    n_test = int(round(fraction * len(codes)))
    return codes.iloc[perm[n_test:]].reset_index(drop=True), codes.iloc[perm[:n_test]].reset_index(drop=True)


def build_synthesizer(config: SweepConfig, method: str):
    """The pooled synthesizer or its stratified wrapper for this configuration."""
    factory = SYNTHESIZERS[config.synthesizer][1]
    if method == "pooled":
        return factory()
    return StratifiedSynthesizer(factory, config.strata_columns, config.size_policy, config.count_share,
                                 config.min_stratum_size, config.small_action, n_jobs=1)


def _one_run(args) -> dict:
    config, train, test, domain, epsilon, seed, method = args
    rho = rho_for_epsilon(epsilon, config.delta)
    rng = np.random.default_rng([seed, int(round(epsilon * 1e6)), METHODS.index(method)])
    model = build_synthesizer(config, method).fit(train, domain, rho, rng)
    synth = model.sample(len(train), rng)
    per = tvd_by_stratum(train, synth, domain, config.strata_columns)
    per_metric = ("tvd_1way", "tvd_2way", "workload_3way")
    rows = [(g, m, v) for g, *values in zip(per["stratum"], *(per[m] for m in per_metric))
            for m, v in zip(per_metric, values)]
    overall = {"tvd_1way": float(one_way_tvd(train, synth, domain)["tvd"].mean()),
               "tvd_2way": float(two_way_tvd(train, synth, domain)["tvd"].mean()),
               "workload_3way": workload_error(train, synth, domain),
               **parity_error(train, synth, domain, config.strata_columns), "rho": rho}
    if config.target is not None:
        keys = group_keys(test, config.strata_columns, domain)
        util, by_group = ml_utility(synth, test, config.target, keys, config.n_trees)
        overall.update(util)
        rows += [(int(g), "accuracy", float(a)) for g, a in zip(by_group["group"], by_group["accuracy"])]
    strata = model.strata_.assign(epsilon=epsilon, seed=seed) if method == "stratified" else None
    ledger = model.ledger_.to_frame() if method == "stratified" else None
    statement = model.ledger_.statement(delta=config.delta) if method == "stratified" else ""
    return {"epsilon": epsilon, "seed": seed, "method": method, "groups": rows, "overall": overall,
            "strata": strata, "ledger": ledger, "statement": statement}


def check_strata_count(n_strata: int) -> None:
    """Refuse sweeps over more than MAX_STRATA strata (the public domain's product, empty cells included)."""
    if n_strata > MAX_STRATA:
        raise ValueError(f"These strata columns make {n_strata:,} strata (every combination of their values); "
                         f"choose fewer or coarser columns (at most {MAX_STRATA}).")


def _run_sweep(config: SweepConfig, data: pd.DataFrame, progress: Callable | None = None) -> SweepResult:
    config.validate()
    codes, domain, labels = encode_categories(data[list(config.columns)])
    check_strata_count(int(np.prod([domain[c] for c in config.strata_columns])))
    train, test = split_train_test(codes, config.test_fraction, config.split_seed)
    items = [(config, train, test, domain, e, s, m) for e in config.epsilons for s in config.seeds for m in METHODS]
    runs = map_trials(_one_run, items, n_jobs=config.n_jobs, progress=progress, label="synthesizer fits")
    names = stratum_labels(config.strata_columns, labels, domain)
    real_sizes = np.bincount(group_keys(train, config.strata_columns, domain), minlength=len(names))
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
    if config.target is not None:
        # curator-only reference: the same classifier trained on the real training rows
        baseline, _ = ml_utility(train, test, config.target, group_keys(test, config.strata_columns, domain),
                                 config.n_trees)
        majority = float(max(np.mean(test[config.target].to_numpy() > 0), np.mean(test[config.target].to_numpy() == 0)))
        baseline["majority_accuracy"] = majority
    strata_df = pd.concat(strata, ignore_index=True)
    strata_df["group"] = [names[_flat_of(s, config.strata_columns, domain)] for s in strata_df["stratum"]]
    strata_df["real_rows"] = [int(real_sizes[_flat_of(s, config.strata_columns, domain)]) for s in strata_df["stratum"]]
    return SweepResult(
        group_metrics=pd.DataFrame(group_rows, columns=["epsilon", "seed", "method", "group", "real_rows",
                                                        "metric", "value"]),
        overall_metrics=pd.DataFrame(overall_rows, columns=["epsilon", "seed", "method", "metric", "value"]),
        strata=strata_df, ledger=readable_ledger(ledger, config.strata_columns, labels, domain),
        budget_statement=statement, group_labels=names,
        real_baseline=baseline)


def readable_ledger(ledger: pd.DataFrame, strata_columns, labels, domain) -> pd.DataFrame:
    """The ledger with stratum keys like 'sex=0|race=4' replaced by their category names."""
    names = stratum_labels(strata_columns, labels, domain)
    sizes = tuple(domain[c] for c in strata_columns)
    keys = {"|".join(f"{c}={int(i)}" for c, i in zip(strata_columns, np.unravel_index(flat, sizes))): name
            for flat, name in names.items()}
    out = ledger.copy()
    for col in ("label", "part"):
        out[col] = [next((v.replace(k, n) for k, n in keys.items() if isinstance(v, str) and v.endswith(k)), v)
                    for v in out[col]]
    return out


def _flat_of(key: str, strata_columns, domain) -> int:
    codes = [int(p.split("=", 1)[1]) for p in key.split("|")]
    return int(np.ravel_multi_index(tuple(codes), tuple(domain[c] for c in strata_columns)))


_cached_sweep = None


def run_sweep(config: SweepConfig, data: pd.DataFrame, progress: Callable | None = None) -> SweepResult:
    """Run (or load from the shared cache) the sweep of ``config`` on category-dtype ``data``."""
    global _cached_sweep
    config.validate()
    if _cached_sweep is None:
        _cached_sweep = memory().cache(_run_sweep, ignore=["progress"])
    return _cached_sweep(config, data, progress)


def synthesize_release(config: SweepConfig, data: pd.DataFrame, epsilon: float, seed: int,
                       method: str = "stratified") -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """One synthetic data set (category labels) fitted on all rows, its ledger and budget statement."""
    config.validate()
    codes, domain, labels = encode_categories(data[list(config.columns)])
    rho = rho_for_epsilon(epsilon, config.delta)
    rng = np.random.default_rng([seed, 7])
    model = build_synthesizer(config, method).fit(codes, domain, rho, rng)
    synth = decode_categories(model.sample(len(codes), rng), labels)
    if method == "stratified":
        ledger = readable_ledger(model.ledger_.to_frame(), config.strata_columns, labels, domain)
        return synth, ledger, model.ledger_.statement(delta=config.delta)
    from core.privacy.ledger import BudgetLedger
    ledger = BudgetLedger()
    ledger.spend(f"{SYNTHESIZERS[config.synthesizer][0]} on all rows", rho, "rho", measured=f"{len(codes)} rows")
    return synth, ledger.to_frame(), ledger.statement(delta=config.delta)


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


def noise_table(config: SweepConfig, n_rows: int) -> pd.DataFrame:
    """Per epsilon: rho, the Gaussian sd on each cell of the chosen synthesizer's measurements
    inside one stratum, and the sd of the DP stratum counts (0 when sizes are public)."""
    d = len(config.columns) - len(config.strata_columns)  # a stratum's model sees the other columns
    rows = []
    for eps in config.epsilons:
        rho = rho_for_epsilon(eps, config.delta)
        rho_count = config.count_share * rho if config.size_policy == "dp_count" else 0.0
        rho_s = rho - rho_count
        if config.synthesizer == "mst" and d > 1:
            one, two = np.sqrt(d / (2 * rho_s / 3)), np.sqrt((d - 1) / (2 * rho_s / 3))
        else:
            one, two = np.sqrt(max(d, 1) / (2 * rho_s)), np.nan
        pooled_d = len(config.columns)
        pooled_one = (np.sqrt(pooled_d / (2 * rho / 3)) if config.synthesizer == "mst" and pooled_d > 1
                      else np.sqrt(pooled_d / (2 * rho)))
        rows.append((eps, rho, one, two, pooled_one, np.sqrt(1 / (2 * rho_count)) if rho_count else 0.0))
    return pd.DataFrame(rows, columns=["epsilon", "rho", "stratum one-way cell sd", "stratum two-way cell sd",
                                       "pooled one-way cell sd", "stratum count sd"])


def marginal_comparison(config: SweepConfig, data: pd.DataFrame, epsilon: float,
                        seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Real, stratified and pooled one-way shares of every non-strata column inside every group, for one
    (epsilon, seed) of the sweep (same training rows and seeds), and the per group x column TVD.

    Returns (shares: group, column, category, real, stratified, pooled) and
    (tvd: group, real_rows, column, method, tvd). Curator-only diagnostics.
    """
    config.validate()
    codes, domain, labels = encode_categories(data[list(config.columns)])
    train, _ = split_train_test(codes, config.test_fraction, config.split_seed)
    rho = rho_for_epsilon(epsilon, config.delta)
    synths = {}
    for method in METHODS:
        rng = np.random.default_rng([seed, int(round(epsilon * 1e6)), METHODS.index(method)])
        synths[method] = build_synthesizer(config, method).fit(train, domain, rho, rng).sample(len(train), rng)
    names = stratum_labels(config.strata_columns, labels, domain)
    k = len(names)
    keys = {"real": group_keys(train, config.strata_columns, domain),
            **{m: group_keys(s, config.strata_columns, domain) for m, s in synths.items()}}
    frames = {"real": train, **synths}
    real_rows = np.bincount(keys["real"], minlength=k)
    present = np.flatnonzero(real_rows > 0)
    share_parts, tvd_rows = [], []
    for col in [c for c in config.columns if c not in config.strata_columns]:
        size = domain[col]
        tables = {}
        for src, frame in frames.items():
            counts = np.bincount(keys[src] * size + frame[col].to_numpy(np.int64), minlength=k * size)
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
    shares = pd.concat(share_parts, ignore_index=True).rename(columns={})
    tvd_df = pd.DataFrame(tvd_rows, columns=["group", "real_rows", "column", "method", "tvd"])
    return shares, tvd_df
