"""``run(plan, data=None, *, progress=None) -> SynthesisResult``: every number of the Stratified
synthesis page from its plan.

Each tab is a cached sub-run keyed on the shared setup, its own sub-plan and the data's
fingerprint, so changing one tab's settings recomputes only that tab.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.cache import cached, cached_call, fingerprint_of
from core.contracts import Progress, Result
from core.privacy.accounting import rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.parallel import default_n_jobs
from core.synthesis.encoding import DEFAULT_BINS, ColumnUnits, identifier_like, numeric_view
from core.synthesis.mean_study import MeanStudy, run_means
from core.synthesis.plan import SynthesisPlan
from core.synthesis.release import SyntheticRelease, make_release
from core.synthesis.sweep import SweepResult, marginal_comparison, noise_table, run_sweep, strata_overview

CURATOR = ("Curator-only diagnostics: every error here is measured against the real data and is not itself "
           "private; share only a synthetic release and its budget statement.")


# --------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------

def load_raw(plan: SynthesisPlan, data=None) -> pd.DataFrame:
    """The raw table a plan runs on: the bundled data set, or the uploaded bytes after their fingerprint
    is checked against the plan's and, with the curator's schema, cleaned by it
    (:func:`core.datasets.load_microdata`); a table may be passed directly for bundled data."""
    if not plan.data.is_upload and isinstance(data, pd.DataFrame):
        return data
    from core.datasets import load_microdata

    return load_microdata(plan.data, data)


def prepared_view(raw: pd.DataFrame, bounds=None, bins=DEFAULT_BINS) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Every usable column as a category (numeric ones binned over declared public bounds), the notes on
    what was done, and the identifier-like columns (warned about, never pre-selected)."""
    view, notes, _ = numeric_view(raw, bounds, bins=bins)
    ids = identifier_like(raw)
    for col in ids:
        notes.append(f"{col}: looks like an identifier (a different value in almost every row); it is not "
                     "pre-selected, and synthesising it would publish its category list.")
    return view, notes, ids


def prepare(plan: SynthesisPlan, data=None) -> tuple[pd.DataFrame, list[str]]:
    """The category frame of the plan's columns and the preparation notes."""
    frame, notes, _ = prepare_units(plan, data)
    return frame, notes


def prepare_units(plan: SynthesisPlan, data=None) -> tuple[pd.DataFrame, list[str], dict[str, ColumnUnits]]:
    """:func:`prepare` plus how each numeric column returns to its units (its public bins and dtype)."""
    raw = load_raw(plan, data)
    view, notes, units = numeric_view(raw, plan.bounds, bins=plan.bins)
    notes += [f"{col}: looks like an identifier (a different value in almost every row); it is not "
              "pre-selected, and synthesising it would publish its category list." for col in identifier_like(raw)]
    missing = [c for c in plan.columns if c not in view.columns]
    if missing:
        raise ValueError(f"Column(s) {missing} cannot be synthesised as categories: give public bounds for "
                         "numeric columns, or leave them out.")
    return view[list(plan.columns)], notes, {c: u for c, u in units.items() if c in plan.columns}


def accounting_text(plan: SynthesisPlan, n_strata: int) -> str:
    """How one stratified release composes, in plain words (no private number)."""
    if plan.size_policy == "dp_count":
        sizes = (f"{plan.count_share:.0%} of each budget buys a Gaussian histogram of the {n_strata} stratum "
                 f"sizes (one person moves one count by one); the remaining {1 - plan.count_share:.0%} goes to "
                 "every stratum's synthesizer in full. A release has the noisy total, never the real row count.")
    else:
        sizes = ("Stratum sizes (and so the row count) are declared public, so they cost nothing; each "
                 "stratum's synthesizer gets the full budget.")
    return (f"**Accounting.** Each person belongs to exactly one stratum and strata come from the public "
            f"categories, so one model per stratum composes in parallel: the release costs one budget, not "
            f"{n_strata}. {sizes} Neighbouring data sets differ by adding or removing one person; if instead "
            "one person's group may change (replace-one), a stratified release costs twice the budget. Every "
            "release from the same data adds to one ledger.")


# --------------------------------------------------------------------------------------------------
# Cached sub-runs (one per tab)
# --------------------------------------------------------------------------------------------------

def _sweep_part(setup: SynthesisPlan, sub, key: str, frame: pd.DataFrame, n_jobs=None, progress=None) -> SweepResult:
    return run_sweep(setup.replace(sweep=sub), frame, progress, n_jobs)


def _marginals_part(setup: SynthesisPlan, split, sub, key: str, frame: pd.DataFrame, progress=None):
    return marginal_comparison(setup.replace(sweep=split, marginals=sub), frame, progress)


def _release_part(setup: SynthesisPlan, sub, key: str, frame: pd.DataFrame, units=None,
                  progress=None) -> SyntheticRelease:
    return make_release(setup.replace(release=sub), frame, units=units, progress=progress)


def _means_part(sub, sizes: tuple[int, ...], delta: float) -> MeanStudy:
    return run_means(sub, sizes, delta)


_sweep_cached = cached_call(_sweep_part, ignore=("frame", "n_jobs", "progress"))
_marginals_cached = cached_call(_marginals_part, ignore=("frame", "progress"))
_release_cached = cached_call(_release_part, ignore=("frame", "progress"))
_means_cached = cached_call(_means_part)


# --------------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------------

@dataclass
class SynthesisResult(Result):
    """What the page draws. ``overview`` and the ``real_rows`` columns are curator-only; ``tables()``
    (what reports and downloads hold) keeps exact sizes out unless they were declared public."""

    plan: SynthesisPlan
    overview: pd.DataFrame
    notes: tuple[str, ...]
    noise: pd.DataFrame
    sweep: SweepResult | None = None
    marginals: tuple[pd.DataFrame, pd.DataFrame] | None = None
    release: SyntheticRelease | None = None
    means: MeanStudy | None = None
    accounting: str = ""
    extra: dict = field(default_factory=dict)

    def _private(self, df: pd.DataFrame, *columns: str) -> pd.DataFrame:
        """``df`` without exact-size columns unless the plan declared sizes public."""
        if self.plan.sizes_public:
            return df
        return df.drop(columns=[c for c in columns if c in df.columns])

    def tables(self) -> dict[str, pd.DataFrame]:
        """What reports and downloads hold. Unless sizes were declared public, nothing from which an
        exact size or a private share can be read back: no real row counts, no real category shares,
        and none of the mean-estimation tables (their closed forms are functions of the exact sizes)."""
        public = self.plan.sizes_public
        out = {"strata": self._private(self.overview, "real_rows", "share"), "noise": self.noise}
        if self.sweep is not None:
            out["group_metrics"] = self._private(self.sweep.group_metrics, "real_rows")
            out["overall_metrics"] = self.sweep.overall_metrics
            out["worst_groups"] = self.sweep.worst_groups()
            out["strata_fates"] = self._private(self.sweep.strata, "real_rows")
            out["sweep_ledger"] = self.sweep.ledger
        if self.marginals is not None:
            out["marginal_shares"] = self._private(self.marginals[0], "real")
            out["marginal_tvd"] = self._private(self.marginals[1], "real_rows")
        if self.release is not None:
            out["release_ledger"] = self.release.ledger_table
            out["release_shares"] = self.release.shares()
        if self.means is not None and public:
            out["mean_curves"] = self.means.curves
            out["mean_group_errors"] = self.means.group_errors
            out["coinpress"] = self.means.coinpress
            out["dirichlet"] = self.means.dirichlet
        return out

    def headline(self) -> dict[str, float]:
        """The strata count; per method, the sweep's main measure for its worst group and for the whole
        population at the largest epsilon (``SweepResult.headline_rows``); the release's spend; the
        stratification cost multiplier when the sizes are public."""
        head: dict[str, float] = {"strata": float(len(self.overview))}
        if self.sweep is not None:
            for row in self.sweep.headline_rows():
                head[row["worst_name"]] = row["worst"]
                head[row["population_name"]] = row["population"]
        if self.release is not None:
            head["release rho"] = self.release.ledger.total("rho")
            head["release epsilon"] = self.release.ledger.total("epsilon", delta=self.plan.delta)
        if self.means is not None and self.plan.sizes_public:
            head["stratification cost multiplier"] = self.means.summary["cost_multiplier"]
        return head

    def headline_uncertainty(self) -> dict[str, str]:
        """The worst group's and the population's main measure with their sd over the sweep's seeds (from
        the group_metrics and overall_metrics tables that reports hold); no stratum size or group name is
        quoted, so nothing private is read back."""
        from core.uncertainty_words import LEDGER_TOTAL, sd_over
        out = {"strata": "exact (combinations of the strata columns' categories)"}
        if self.sweep is not None:
            for row in self.sweep.headline_rows():
                values = row["values"]
                if not np.isfinite(row["worst"]):
                    out[row["worst_name"]] = "no defined value: nothing to measure"
                else:
                    out[row["worst_name"]] = (
                        f"{sd_over(values, 'seeds')} (the worst group's values; their mean is shown)"
                        if len(values) > 1 else "one seed only: no spread measured (sweep more seeds to see one)")
                pop = row["population_values"]
                out[row["population_name"]] = (
                    f"{sd_over(pop, 'seeds')} (every row at once, on the same marginals as the groups)"
                    if len(pop) > 1 else "one seed only: no spread measured (sweep more seeds to see one)")
        if self.release is not None:
            out["release rho"] = LEDGER_TOTAL
            out["release epsilon"] = f"exact (tight conversion of the ledger at delta {self.plan.delta:g})"
        if self.means is not None and self.plan.sizes_public:
            out["stratification cost multiplier"] = "exact (closed form from the declared public sizes)"
        return out

    def takeaway(self):
        """Per method, the worst-off group of the sweep's main measure at its largest epsilon beside the whole
        population's, first. Group names are left out on an uploaded file whose category lists were not
        declared public (they would be read from private data)."""
        from core.takeaway import Takeaway
        from core.uncertainty_words import num
        units = {"strata": "strata (groups)", "release rho": "rho (zCDP)", "release epsilon": "epsilon",
                 "stratification cost multiplier": "times the pooled release's error"}
        if self.sweep is None:
            return Takeaway(units=units)
        named = not self.plan.data.is_upload or self.plan.domain_declared_public
        answer, key, worst = [], [], {}
        for row in self.sweep.headline_rows():
            measure = self.sweep.main_measure_name
            units[row["worst_name"]] = units[row["population_name"]] = f"{measure} (0 to 1)"
            key += [row["worst_name"], row["population_name"]]
            group = row["group"] if isinstance(row["group"], str) else ""
            who = (f"the group {group}" if named and group else
                   "one group (not named: the data are private)" if group else "no group (the measure is not defined)")
            answer.append(f"With the {row['method']} method at epsilon {row['epsilon']:g}, the worst-off group is "
                          f"{who}, with {measure} {num(row['worst'])} against {num(row['population'])} for the whole "
                          "population (mean over the seeds).")
            if named and group:
                worst[f"{row['method']} method"] = group
        return Takeaway(answer=tuple(answer), key=tuple(key), units=units, worst_off=worst,
                        worst_off_rule=f"largest {self.sweep.main_measure_name} at the largest epsilon swept")

    def sweep_ledger(self) -> BudgetLedger | None:
        """What the seeded sweep's fits would spend at each epsilon (a simulation: listed in the project
        ledger apart from releases, never counted); None without a sweep."""
        if self.sweep is None:
            return None
        plan = self.plan
        out = BudgetLedger()
        for eps in plan.sweep.epsilons:
            out.spend(f"{plan.synthesizer} at epsilon {eps:g}", rho_for_epsilon(eps, plan.delta), "rho",
                      measured=f"one seeded fit per method and seed ({len(plan.sweep.seeds)} seeds)")
        return out

    def ledger(self):
        return None if self.release is None else self.release.ledger


@cached
def run(plan: SynthesisPlan, data=None, *, progress: Progress | None = None) -> SynthesisResult:
    """Every tab the plan asks for, on the bundled data or the uploaded bytes."""
    if not isinstance(plan, SynthesisPlan):
        raise ValueError("run takes a SynthesisPlan.")
    frame, notes, units = prepare_units(plan, data)
    overview = strata_overview(frame, plan.strata)
    setup = plan.setup()
    key = fingerprint_of(frame)
    epsilons = plan.sweep.epsilons if plan.sweep is not None else (0.1, 1.0, 5.0)
    result = SynthesisResult(plan=plan, overview=overview, notes=tuple(notes), noise=noise_table(plan, epsilons),
                             accounting=accounting_text(plan, len(overview)))
    if plan.sweep is not None:
        result.sweep = _sweep_cached(setup, plan.sweep, key, frame, n_jobs=default_n_jobs(), progress=progress)
    if plan.marginals is not None:
        result.marginals = _marginals_cached(setup, plan.sweep, plan.marginals, key, frame, progress=progress)
    if plan.release is not None:
        result.release = _release_cached(setup, plan.release, key, frame, units=units, progress=progress)
    if plan.means is not None:
        sizes = tuple(int(s) for s in overview["real_rows"] if s > 0)
        result.means = _means_cached(plan.means, sizes, plan.delta)
    return result


def secure_release(plan: SynthesisPlan, data=None, *, progress: Progress | None = None) -> SyntheticRelease:
    """A real release of ``plan.release`` with OpenDP's sampler: never cached, never reproducible.
    ``progress`` hears the fit's rounds; a ``Cancelled`` raised there stops it before anything is released."""
    if plan.release is None:
        raise ValueError("Choose the release's epsilon and method first.")
    frame, _, units = prepare_units(plan, data)
    strata_overview(frame, plan.strata)   # refuses too many strata before spending anything
    return make_release(plan, frame, units=units, secure=True, progress=progress)
