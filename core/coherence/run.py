"""Run an :class:`AuditPlan`: load and sample the data, compare releases, sweep epsilon, do the theory.

``run(plan, data=None, *, progress=None)`` is cached on the plan digest and data fingerprint; the
comparison and the sweep are cached sub-runs keyed on only what each reads (the comparison on
``plan.setup()``, the plan without its sweep and calculator; the sweep on ``plan.for_sweep``), so
changing the sweep never recomputes the comparison and the other way round.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.cache import cached, cached_call
from core.coherence.adversaries import make_adversary
from core.coherence.audit import AuditResult, coherence_audit, coherence_curve, theory_alpha_curve
from core.coherence.calculator import TheoryOutcome, calculate
from core.coherence.plan import AuditPlan, RowSample
from core.coherence.releases import MAX_DOMAIN, RELEASES
from core.coherence.subgroups import custom_subgroup
from core.coherence.verdicts import min_trials_for_pass
from core.contracts import DataRef, Progress, Result, make_rng, seed_sequence, stream_key
from core.privacy.protection import ProtectionUnit

ROWS_STREAM = stream_key("row sample")


def worst_key(release: str) -> str:
    """The headline name of a release's worst failure rate (``AuditResult.worst_adversaries``)."""
    return f"worst failure rate: {release}"


def theory_key(release: str) -> str:
    """The headline name of the subgroup size the theory needs to certify a release of the audit."""
    return f"subgroup size the theory needs: {release}"


#: Each verdict in a few words, for the answer on a report's first page.
VERDICT_WORDS = {"FAIL": "FAIL: this release does not keep the data coherent",
                 "PASS": "PASS: no tested adversary found a gap often enough to matter",
                 "PASS (not private)": "PASS, but the release is not private: the tested adversaries found no gap, "
                                       "which protects no one",
                 "INCONCLUSIVE": "INCONCLUSIVE: the trials run cannot tell a pass from a fail"}


def load_frame(ref: DataRef, data: bytes | None = None) -> pd.DataFrame:
    """The full table a plan names: a bundled data set, or the uploaded file's bytes (fingerprint checked;
    cleaned by the curator's schema when the reference carries one): :func:`core.datasets.load_microdata`."""
    from core.datasets import load_microdata
    return load_microdata(ref, data)


def sample_rows(frame: pd.DataFrame, rows: RowSample) -> pd.DataFrame:
    """A uniform sample of ``rows.size`` rows without replacement (kept in file order), from the
    row-sample stream of ``rows.seed``; every row when the size is None or at least the file's."""
    if rows.size is None or rows.size >= len(frame):
        return frame.reset_index(drop=True)
    rng = make_rng(seed_sequence(rows.seed, ROWS_STREAM))
    idx = np.sort(rng.choice(len(frame), int(rows.size), replace=False))
    return frame.iloc[idx].reset_index(drop=True)


def usable_columns(frame: pd.DataFrame) -> list[str]:
    """Columns the audit can encode: no missing values and at most MAX_DOMAIN distinct values."""
    return [c for c in frame.columns if not frame[c].isna().any() and frame[c].nunique() <= MAX_DOMAIN]


def positive_value(frame: pd.DataFrame, target: str, positive: str | None):
    """The target value whose text is ``positive`` (None: the second of a binary target's two values)."""
    if positive is None or target not in frame.columns:
        return None
    for v in frame[target].astype("category").cat.categories:
        if str(v) == str(positive):
            return v
    raise ValueError(f"{positive!r} is not a value of {target!r}.")


def _audit(plan: AuditPlan, frame: pd.DataFrame, releases, trials: int, progress: Progress | None) -> AuditResult:
    subgroups = [*plan.subgroup_columns, *(custom_subgroup(frame, c) for c in plan.custom_subgroups)]
    adversaries = [make_adversary(a.key, **a.params.__dict__) for a in plan.adversaries]
    return coherence_audit(
        frame, [r.build() for r in releases], adversaries, plan.target, list(plan.lens), subgroups,
        plan.alpha, plan.beta, plan.gamma, trials, plan.seed, progress,
        positive=positive_value(frame, plan.target, plan.positive), subgroup_order=plan.subgroup_order,
        n_null_splits=plan.null_splits, confidence=plan.confidence, constants=plan.constants,
        protection=ProtectionUnit.of(plan.data))


def compare_releases(plan: AuditPlan, frame: pd.DataFrame, progress: Progress | None = None) -> AuditResult:
    """The release comparison of ``plan`` on the sampled rows."""
    return _audit(plan, frame, plan.releases, plan.trials, progress)


@dataclass
class SweepOutcome:
    """The swept release audited at each epsilon, and the alpha theory certifies against epsilon."""
    audit: AuditResult
    theory: pd.DataFrame


def sweep_epsilon(plan: AuditPlan, frame: pd.DataFrame, progress: Progress | None = None) -> SweepOutcome:
    """Audit ``plan.sweep``'s release at every epsilon on the same splits, plus the certified alpha for
    the smallest, median and largest eligible subgroup (audit view n = |X|, spec Sec. 3.5)."""
    sweep = plan.sweep
    res = _audit(plan, frame, sweep.releases(), sweep.trials, progress)
    sizes = np.unique(res.subgroups["size"].to_numpy())
    picks = sorted({int(sizes.min()), int(np.median(sizes)), int(sizes.max())})
    grid = np.unique(np.concatenate([np.geomspace(1e-4, max(sweep.epsilons), 30), sweep.epsilons]))
    spec, params = RELEASES[sweep.release.key], sweep.release.params

    def guarantee(e: float):
        return spec.build(params.__class__(**{**params.__dict__, "epsilon": e})).privacy

    curve = theory_alpha_curve(guarantee, grid, len(frame), picks, plan.beta, res.settings["n_subgroups"])
    return SweepOutcome(res, curve)


_compare_cached = cached_call(compare_releases)
_sweep_cached = cached_call(sweep_epsilon)


@dataclass
class CoherenceResult(Result):
    """What the page draws: the release comparison, the sweep and the calculator (each None if not asked).

    The page reads ``comparison`` and ``sweep`` directly and shows the curator every exact size.
    ``tables()`` and ``headline()`` are what reports and downloads share: on an uploaded file they quote
    no exact size of it (see :meth:`tables`)."""
    plan: AuditPlan
    n_rows: int
    comparison: AuditResult | None = None
    sweep: SweepOutcome | None = None
    theory: TheoryOutcome | None = None

    @property
    def private_sizes(self) -> bool:
        """True when the audited rows come from an uploaded (private) file, whose sizes are not shared."""
        return self.plan.data.is_upload

    def _shared(self, df: pd.DataFrame, *sizes: str, drop: tuple[str, ...] = ()) -> pd.DataFrame:
        """``df`` as reports hold it: on an upload each exact-size column becomes its band
        (:func:`core.report.size_band`) and the ``drop`` columns go; bundled data unchanged."""
        if not self.private_sizes:
            return df
        from core.report import banded
        return banded(df, *sizes).drop(columns=[c for c in drop if c in df.columns])

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the comparison, the sweep and the calculator. For an uploaded file the exact
        subgroup sizes (``subgroups``, ``excluded``, ``sweep_theory``'s ``size``) are replaced by bands such
        as '1000 <= n < 2000', and the per-trial shares ``p`` and ``q`` of each subgroup in the two halves
        are left out of ``trials`` (with the half size they give counts back); bundled public data keeps
        everything exact."""
        out: dict[str, pd.DataFrame] = {}
        if self.comparison is not None:
            c = self.comparison
            out.update({"verdicts": c.releases, "adversaries": c.summary, "worst_adversaries": c.worst_adversaries(),
                        "subgroups": self._shared(c.subgroups, "size"), "excluded": self._shared(c.excluded, "size"),
                        "maxima": c.maxima, "trials": self._shared(c.trials, drop=("p", "q")),
                        "curve": coherence_curve(c.maxima, confidence=self.plan.confidence)})
        if self.sweep is not None:
            out.update({"sweep_verdicts": self.sweep.audit.summary, "sweep_releases": self.sweep.audit.releases,
                        "sweep_theory": self._shared(self.sweep.theory, "size")})
        if self.theory is not None:
            out.update({"theory": self.theory.summary, "theory_gamma": self.theory.gamma_curve})
        return out

    def shared_table_names(self) -> tuple[str, ...]:
        """The calculator's tables: closed forms of its own plan's settings, which no row of the data enters."""
        return ("theory", "theory_gamma")

    def shared_headline_names(self) -> tuple[str, ...]:
        """The trials a PASS needs (from beta and the confidence) and the calculator's gamma: settings only."""
        return ("trials a PASS needs at least", "theory gamma (conservative)")

    @property
    def rows_shared(self) -> bool:
        """Whether the headline may quote the rows audited: always on bundled data; on an upload only when
        the plan's own row sample set that number (the file's row count is never quoted)."""
        return not self.private_sizes or self.plan.rows.size == self.n_rows

    def headline(self) -> dict[str, float]:
        """The rows audited (left out on an upload unless the plan's sample size fixed it), the trials a
        PASS needs, each release's worst failure rate and the calculator's gamma."""
        out = {"rows audited": float(self.n_rows)} if self.rows_shared else {}
        out["trials a PASS needs at least"] = float(min_trials_for_pass(self.plan.beta, self.plan.confidence))
        if self.comparison is not None:
            worst = self.comparison.worst_adversaries()
            out.update({worst_key(row["release"]): float(row["beta_hat"]) for _, row in worst.iterrows()})
            out.update({theory_key(row["release"]): float(row["theory_gamma"])
                        for _, row in self._certifiable().iterrows()})
        if self.theory is not None:
            row = self.theory.summary.iloc[0]
            out["theory gamma (conservative)"] = float("nan") if row["gamma"] is None else float(row["gamma"])
        return out

    def _certifiable(self) -> pd.DataFrame:
        """The audited releases the theory gives a subgroup size for (at the audit's rows, alpha, beta and
        subgroups); none on an upload whose row count is not shared (that size gives the count back)."""
        releases = self.comparison.releases
        if not self.rows_shared:
            return releases.iloc[:0]
        return releases[pd.to_numeric(releases["theory_gamma"], errors="coerce").notna()]

    def headline_uncertainty(self) -> dict[str, str]:
        """Each worst failure rate with the Clopper-Pearson bounds the verdict uses (the lower one
        Bonferroni-corrected over the adversaries); the other numbers are exact."""
        from core.uncertainty_words import CLOSED_FORM, num
        out = {"rows audited": "exact (rows the plan samples)"} if self.rows_shared else {}
        out["trials a PASS needs at least"] = f"{CLOSED_FORM}: from beta and the confidence"
        if self.comparison is not None:
            for _, row in self.comparison.worst_adversaries().iterrows():
                out[worst_key(row["release"])] = (
                    f"Clopper-Pearson bounds {num(row['ci_low'])}-{num(row['ci_high'])} over {int(row['trials'])} "
                    f"trials (adversary {row['adversary']}; upper at {100 * row['upper_confidence']:g}%, lower at "
                    f"{100 * row['lower_confidence']:.3g}% for {int(row['n_adversaries'])} adversaries)")
            for _, row in self._certifiable().iterrows():
                out[theory_key(row["release"])] = (f"{CLOSED_FORM}: {row['theory_basis']}, at the audit's rows, "
                                                   "alpha, beta and number of subgroups")
        if self.theory is not None:
            gamma = self.theory.summary.iloc[0]["gamma"]
            out["theory gamma (conservative)"] = (f"{CLOSED_FORM}: a proven bound, for the calculator's own "
                                                   "settings, not the audited release" if gamma is not None
                                                   else "no bound: the theory certifies nothing here")
        return out

    def takeaway(self):
        """The verdict of each audited release in words, first; the key numbers are the audited releases'
        worst failure rates, the subgroup size the theory needs for each private one and the rows audited.
        The calculator's gamma is of its own example settings, so it is never a key number."""
        from core.takeaway import Takeaway
        from core.uncertainty_words import num
        units = {"rows audited": "rows (people)", "trials a PASS needs at least": "trials",
                 "theory gamma (conservative)": "people per subgroup (the calculator's own example settings)"}
        if self.comparison is None:
            return Takeaway(answer=("No release was audited: this run holds the theory calculator alone, whose "
                                    "numbers follow from its own settings.",), units=units)
        worst = self.comparison.worst_adversaries().set_index("release")
        releases = self.comparison.releases
        verdicts = "; ".join(f"{row['verdict_shown']} for {row['release']}" for _, row in releases.iterrows())
        answer = [f"Verdict: {verdicts}."]
        key = []
        for _, row in releases.iterrows():
            name = row["release"]
            units[worst_key(name)] = "share of trials"
            key.append(worst_key(name))
            text = f"{name}: {VERDICT_WORDS.get(row['verdict_shown'], row['verdict_shown'])}."
            if name in worst.index:
                w = worst.loc[name]
                trials = int(w["trials"])
                text += (f" Its worst adversary ({w['adversary']}) pushed a subgroup past alpha {self.plan.alpha:g} in "
                         f"{int(round(float(w['beta_hat']) * trials)):,} of {trials:,} trials, a failure rate of "
                         f"{num(w['beta_hat'])} (interval {num(w['ci_low'])} to {num(w['ci_high'])}); a PASS needs "
                         f"that rate to stay at most beta {self.plan.beta:g}.")
            answer.append(text)
        for _, row in self._certifiable().iterrows():
            units[theory_key(row["release"])] = "people per subgroup"
            key.append(theory_key(row["release"]))
            answer.append(f"For the theory to certify {row['release']}, a subgroup needs at least "
                          f"{float(row['theory_gamma']):,.0f} people; it certifies {int(row['certified_subgroups'])} "
                          f"of the {int(row['eligible_subgroups'])} subgroups audited.")
        if self.rows_shared:
            key.append("rows audited")
        return Takeaway(answer=tuple(answer), verdict=answer[0], key=tuple(key), units=units)


@cached
def run(plan: AuditPlan, data: bytes | None = None, *, progress: Progress | None = None) -> CoherenceResult:
    """Run every part of ``plan`` that was asked for; ``data`` is the uploaded CSV's bytes for an upload."""
    if not isinstance(plan, AuditPlan):
        raise ValueError(f"run takes an AuditPlan, not {type(plan).__name__}.")
    frame = sample_rows(load_frame(plan.data, data), plan.rows)
    comparison = _compare_cached(plan.setup(), frame, progress=progress) if plan.compare else None
    sweep = _sweep_cached(plan.for_sweep, frame, progress=progress) if plan.sweep is not None else None
    theory = calculate(plan.theory) if plan.theory is not None else None
    return CoherenceResult(plan, len(frame), comparison, sweep, theory)
