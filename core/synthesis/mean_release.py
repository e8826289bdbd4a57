"""A real release of a private stratified mean: one noisy mean per stratum, recombined, and a pooled
mean beside it for comparison.

The value is a numeric column clipped to a PUBLIC range the curator states (never the data's own
minimum and maximum), or the indicator of one category of a categorical column (a share; its range
[0, 1] is public by construction). Values are centred on the middle c of the range, so adding or
removing one person moves a stratum's sum by at most h = (high - low) / 2 and its count by 1. When the
data declare up to k rows per person (contribution bounding), one person moves the sums by at most k h
and the counts by at most k in total (L1 and L2, however the rows fall across strata): every sensitivity
is scaled by k, so the plan's budget holds per person and the ledger states it so.

Mechanism, in the plan's noise (Laplace: pure epsilon; Gaussian: the zCDP rho that is
(epsilon, delta)-DP), with the total split up front:

* ``pooled_share`` of the budget: one noisy sum over every row (the pooled comparison);
* the rest for the strata. Each person is in exactly one stratum, so the strata compose in
  parallel: every stratum's noisy sum gets the whole of it (less ``count_share`` under DP counts,
  which buys one noisy count per stratum).

A stratum's mean is c + noisy sum / size, where size is the declared public size or its noisy count
(post-processing either way). The recombined mean weights strata by those sizes. Standard errors come
from the known noise: exact with public sizes; with DP counts a first-order (delta-method)
approximation from the released numbers only. Intervals cover the privacy noise, not sampling.

Under DP counts nothing returned holds an exact stratum size or the exact row count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.contracts import DataRef, Plan, Result, named_rng, param
from core.privacy.ledger import BudgetLedger
from core.privacy.protection import ProtectionUnit
from core.synthesis.encoding import encode_categories
from core.synthesis.plan import (NOISES, SIZE_POLICIES, check_epsilon, check_number, check_numeric_bounds,
                                 check_public_range, check_whole, mean_noise)
from core.synthesis.strata import StrataIndex

Z95 = 1.959963984540054          # two-sided 95% point of the standard normal
ROUGH = 0.1                      # count noise sd above this share of the noisy size: interval flagged approximate
SIMULATION = ("Simulation, not a release: the noise comes from a seeded generator so the numbers can be "
              "reproduced from the plan.")
RELEASE = "Release: every privacy noise value was drawn by OpenDP's secure sampler."


@dataclass(frozen=True)
class MeanReleasePlan(Plan):
    """Everything a stratified-mean release depends on.

    ``category``: the mean is the share of rows in this category of ``column``. ``value_range``:
    ``column`` is numeric and clipped to this public (low, high). Exactly one of the two is given.
    ``numeric_bounds`` are the page's public ranges, used to bin wide numeric strata columns.
    """

    data: DataRef
    column: str
    strata: tuple[str, ...]
    epsilon: float = param(1.0, label="Epsilon", low=0.01, high=50.0, step=0.1)
    delta: float = 1e-9
    noise: str = param("laplace", label="Noise", choices=NOISES.labels(), kind="radio",
                       help="Gaussian noise runs at the zCDP rho that is (epsilon, delta)-DP at the plan's delta.")
    category: str | None = None
    value_range: tuple[float, float] | None = None
    size_policy: str = "dp_count"
    sizes_declared_public: bool = False
    count_share: float = 0.1
    pooled_share: float = param(0.2, label="Share of the budget for the pooled comparison mean", low=0.0, high=0.5,
                                step=0.05, kind="slider",
                                help="The pooled mean is a second measurement of the same people, so it costs "
                                     "its own share of epsilon; 0 releases no pooled mean.")
    numeric_bounds: tuple[tuple[str, float, float], ...] = ()
    domain_declared_public: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataRef):
            raise ValueError("The plan needs a data reference (a bundled data set or an upload).")
        if not str(self.column).strip():
            raise ValueError("Choose the column whose mean is released.")
        if not self.strata:
            raise ValueError("Choose at least one strata column: with no strata there is nothing to stratify.")
        if len(set(self.strata)) != len(self.strata) or len(self.strata) > 3:
            raise ValueError("Choose one to three different strata columns.")
        if self.column in self.strata:
            raise ValueError(f"{self.column} is a strata column; choose another column for the mean.")
        check_epsilon(self.epsilon, "The mean release's epsilon")
        check_number(self.delta, "delta", 0.0, 0.01, low_open=True)
        if self.noise not in NOISES:
            raise ValueError(f"Noise must be one of {list(NOISES)}; got {self.noise!r}.")
        if (self.category is None) == (self.value_range is None):
            raise ValueError(f"{self.column}: give a public range (low-high) for a numeric column, or choose a "
                             "category for a share; a range read from the data's own minimum and maximum "
                             "would publish them.")
        if self.value_range is not None:
            if len(self.value_range) != 2:
                raise ValueError("The public range is (low, high).")
            check_public_range(self.column, *self.value_range)
        check_numeric_bounds(self.numeric_bounds)
        if self.size_policy not in SIZE_POLICIES:
            raise ValueError(f"The stratum-size policy must be one of {list(SIZE_POLICIES)}; got {self.size_policy!r}.")
        if self.size_policy == "public" and not self.sizes_declared_public:
            raise ValueError("Public stratum sizes must be declared public: tick the box, or choose DP counts.")
        check_number(self.count_share, "The share of the budget for the counts", 0.0, 0.9, low_open=True)
        check_number(self.pooled_share, "The share of the budget for the pooled mean", 0.0, 0.9)
        check_whole(self.seed, "The seed", 0, 2**31 - 1)
        if self.data.is_upload and not self.domain_declared_public:
            raise ValueError("For an uploaded file the strata's category lists would be read from the private "
                             "rows. Declare that the categories are public knowledge (tick the box), or choose "
                             "a bundled data set.")

    @property
    def sizes_public(self) -> bool:
        return self.size_policy == "public" and self.sizes_declared_public

    @property
    def mean_noise(self):
        """The plan's noise as its :class:`~core.synthesis.mean_noise.MeanNoise` (unit, calibration, samplers)."""
        return mean_noise(self.noise)

    @property
    def unit(self) -> str:
        return self.mean_noise.unit

    @property
    def budget(self) -> float:
        """The whole budget in the noise's unit: epsilon (Laplace) or the (epsilon, delta) rho (Gaussian)."""
        return self.mean_noise.budget_for(self.epsilon, self.delta)

    def split(self) -> dict[str, float]:
        """The budget of each measurement in ``unit``: pooled sum, stratum sums, stratum counts (0: none)."""
        total = self.budget
        pooled = self.pooled_share * total
        strata = total - pooled
        counts = 0.0 if self.sizes_public else self.count_share * strata
        return {"pooled": pooled, "sums": strata - counts, "counts": counts}

    @property
    def label(self) -> str:
        what = f"share {self.column} = {self.category}" if self.category is not None else f"mean of {self.column}"
        return f"stratified {what}"


@dataclass
class MeanRelease(Result):
    """Per-stratum and overall private means, the ledger of what they spent, and how they were drawn.

    ``strata``: group, size (public sizes only, declared) or noisy_size (DP counts), weight, mean,
    se, ci_low, ci_high, note. ``overall``: estimate (stratified / pooled), mean, se, ci_low, ci_high.
    """

    plan: MeanReleasePlan
    strata: pd.DataFrame
    overall: pd.DataFrame
    budget: BudgetLedger
    ledger_table: pd.DataFrame
    statement: str
    secure: bool

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"stratum_means": self.strata, "overall_means": self.overall, "ledger": self.ledger_table}

    def headline(self) -> dict[str, float]:
        out = {f"{e} mean": float(m) for e, m in zip(self.overall["estimate"], self.overall["mean"])}
        out["epsilon"] = self.budget.total("epsilon", delta=self.plan.delta)
        return out

    def headline_uncertainty(self) -> dict[str, str]:
        """Each overall mean's 95% interval and standard error from the known noise (the overall_means
        table): exact with public sizes, first-order when the sizes are noisy counts. They cover the
        privacy noise only, not sampling."""
        from core.uncertainty_words import LEDGER_TOTAL, interval, num
        how = ("known mechanism, privacy noise only" if self.plan.sizes_public
               else "known mechanism, first-order with noisy counts; privacy noise only")
        out = {}
        for _, row in self.overall.iterrows():
            out[f"{row['estimate']} mean"] = (f"{interval(row['ci_low'], row['ci_high'], '95% interval')}, "
                                              f"se {num(row['se'], 2)} ({how})")
        out["epsilon"] = (LEDGER_TOTAL if self.budget.is_pure()
                          else f"exact (tight conversion of the ledger's rho at delta {self.plan.delta:g})")
        return out

    def takeaway(self):
        """The means in the column's own terms: a share of people for a category, else the column's units."""
        from core.takeaway import Takeaway
        plan = self.plan
        unit = (f"share of people with {plan.column} = {plan.category} (0 to 1)" if plan.category is not None
                else f"units of {plan.column}")
        units = {f"{e} mean": unit for e in self.overall["estimate"]}
        return Takeaway(units={**units, "epsilon": "epsilon"})

    def ledger(self) -> BudgetLedger:
        return self.budget

    def export(self) -> pd.DataFrame:
        """One table for the CSV: every stratum, then the overall estimates (releasable numbers only)."""
        overall = self.overall.rename(columns={"estimate": "group"}).assign(note="overall")
        return pd.concat([self.strata, overall], ignore_index=True)


def _values(plan: MeanReleasePlan, raw: pd.DataFrame) -> tuple[np.ndarray, float, float]:
    """The clipped values of ``plan.column`` and the public range they lie in."""
    if plan.column not in raw.columns:
        raise ValueError(f"Column {plan.column!r} is not in the data.")
    series = raw[plan.column]
    if series.isna().any():
        raise ValueError(f"Column {plan.column!r} has missing values; choose another column, or fill them.")
    if plan.category is not None:
        cats = (list(series.cat.categories) if isinstance(series.dtype, pd.CategoricalDtype)
                else sorted(series.astype(str).unique()))
        names = [str(c) for c in cats]
        if str(plan.category) not in names:
            raise ValueError(f"{plan.category!r} is not a category of {plan.column}; choose one of {names[:12]}.")
        return (series.astype(str).to_numpy() == str(plan.category)).astype(float), 0.0, 1.0
    if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        raise ValueError(f"{plan.column} is not numeric: choose a category to release its share instead.")
    lo, hi = (float(v) for v in plan.value_range)
    return np.clip(series.to_numpy(dtype=float), lo, hi), lo, hi


def _strata_codes(plan: MeanReleasePlan, raw: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Each row's stratum (flat index over the public domain) and every stratum's name."""
    from core.synthesis.sweep import check_strata_count
    from core.synthesis.workflow import prepared_view

    missing = [c for c in plan.strata if c not in raw.columns]
    if missing:
        raise ValueError(f"Strata column(s) {missing} are not in the data.")
    view, _, _ = prepared_view(raw[list(plan.strata)], {c: (lo, hi) for c, lo, hi in plan.numeric_bounds})
    unusable = [c for c in plan.strata if c not in view.columns]
    if unusable:
        raise ValueError(f"Strata column(s) {unusable} cannot be used as categories: give public bounds for "
                         "wide numeric columns, or choose others.")
    codes, domain, labels = encode_categories(view[list(plan.strata)])
    index = StrataIndex.of(plan.strata, domain)
    check_strata_count(index.count)
    names = index.names(labels)
    return index.flat(codes.to_numpy()), [names[i] for i in range(index.count)]


def _noise(plan: MeanReleasePlan, secure: bool):
    """A ``draw(scale, size, what)`` from OpenDP's sampler (release) or, in a simulation, from the named
    stream of ``what`` ("stratum sums", "stratum counts", "pooled sum") under the plan's seed and
    epsilon: each measurement has its own stream, so declaring sizes public (no counts drawn) or
    dropping the pooled mean never moves the noise of another measurement."""
    noise = plan.mean_noise
    if secure:
        return lambda scale, size, what: noise.secure_sample(scale, size)

    def draw(scale, size, what):
        rng = named_rng(plan.seed, "stratified mean release", int(round(plan.epsilon * 1e6)), what)
        return np.asarray(noise.sample(scale, size, rng), float)
    return draw


def quantile95(noise) -> float:
    """The two-sided 95% point of one draw of ``noise`` (a ``NOISES`` key or its object), in its standard
    deviations (``MeanNoise.quantile95``): 1.96 for a Gaussian, ln 20 / sqrt 2 (about 2.12) for Laplace,
    whose 1.96 sd interval would cover only 1 - exp(-1.96 sqrt 2), about 93.75%."""
    return mean_noise(noise).quantile95


def _interval(mean, half, lo, hi):
    return np.clip(mean - half, lo, hi), np.clip(mean + half, lo, hi)


def release_stratified_mean(plan: MeanReleasePlan, data=None, *, secure: bool = False) -> MeanRelease:
    """Release ``plan``'s stratified and pooled means on the bundled data or the uploaded bytes.

    ``secure=True`` draws every noise value from OpenDP (a release, not reproducible); otherwise the
    plan's seed drives a simulation that reproduces its numbers.
    """
    if not isinstance(plan, MeanReleasePlan):
        raise ValueError("release_stratified_mean takes a MeanReleasePlan.")
    from core.synthesis.workflow import load_raw

    raw = load_raw(plan, data)
    if len(raw) == 0:
        raise ValueError("The table has no rows.")
    x, lo, hi = _values(plan, raw)
    groups, names = _strata_codes(plan, raw)
    k = len(names)
    centre, h = (lo + hi) / 2, (hi - lo) / 2
    sums = np.bincount(groups, weights=x - centre, minlength=k)
    counts = np.bincount(groups, minlength=k).astype(float)

    mech = plan.mean_noise
    split = plan.split()
    draw = _noise(plan, secure)
    protect = ProtectionUnit.of(plan.data)
    h_person, count_sensitivity = protect.sensitivity(h), protect.sensitivity(1.0)   # h and 1 at one row per person
    ledger = BudgetLedger()
    unit = plan.unit
    # each measurement draws from its own named stream, so a seeded plan reproduces every number
    sum_scale = float(mech.scale_for(h_person, split["sums"]))
    noisy_sums = sums + draw(sum_scale, k, "stratum sums")
    var_sum = float(mech.variance(sum_scale))
    ledger.spend("stratum sums", split["sums"], unit, composition="parallel", group="strata", part="every stratum",
                 measured=f"{k} clipped sums of {plan.column}, one per stratum, "
                          f"{mech.scale_name} {sum_scale:.3g}")
    if plan.sizes_public:
        sizes, var_count = counts, 0.0
    else:
        count_scale = float(mech.scale_for(count_sensitivity, split["counts"]))
        sizes = counts + draw(count_scale, k, "stratum counts")
        var_count = float(mech.variance(count_scale))
        ledger.spend("stratum counts", split["counts"], unit, composition="parallel", group="strata",
                     part="every stratum", measured=f"{k} noisy stratum counts, "
                     f"{mech.scale_name} {count_scale:.3g}")
    pooled_noisy = None
    if split["pooled"] > 0:
        pooled_scale = float(mech.scale_for(h_person, split["pooled"]))
        pooled_noisy = float(sums.sum() + draw(pooled_scale, 1, "pooled sum")[0])
        var_pooled = float(mech.variance(pooled_scale))
        ledger.spend("pooled sum (comparison)", split["pooled"], unit,
                     measured=f"one clipped sum of {plan.column} over every row, "
                              f"{mech.scale_name} {pooled_scale:.3g}")
    ledger = protect.person_ledger(ledger, scale=False)     # amounts already per person; lines say the unit
    del sums, counts   # from here on only released numbers (and public sizes, when declared) are used

    usable = sizes >= 1.0
    denom = np.where(usable, sizes, 1.0)
    offset = noisy_sums / denom                                  # estimated mean - centre
    means = np.where(usable, np.clip(centre + offset, lo, hi), np.nan)
    se = np.sqrt(var_sum + offset ** 2 * var_count) / denom
    # 95% point in standard errors: the normal one, or a Laplace draw's (exact with public sizes, where
    # b ln 20 / size = q x sqrt(2) b / size; with DP counts it widens the first-order interval for heavy tails)
    half = mech.quantile95 * se
    ci_low, ci_high = _interval(means, half, lo, hi)
    se, ci_low, ci_high = (np.where(usable, v, np.nan) for v in (se, ci_low, ci_high))
    weights = np.where(usable, np.maximum(sizes, 0.0), 0.0)
    weights = weights / weights.sum() if weights.sum() > 0 else weights
    note = np.where(usable, "", "public size 0: no estimate" if plan.sizes_public else "noisy size below 1: no estimate")
    # the first-order error of a ratio degrades when the count's noise is not small against the count
    rough = usable & (math.sqrt(var_count) > ROUGH * np.abs(sizes))
    note = np.where(rough, "count noise large against the size: interval approximate", note)
    table = pd.DataFrame({"group": names, ("size" if plan.sizes_public else "noisy_size"): sizes,
                          "weight": weights, "mean": means, "se": se, "ci_low": ci_low, "ci_high": ci_high,
                          "note": note})

    overall = []
    n_used = float(sizes[usable].sum())
    if n_used >= 1.0:
        est = float(np.nansum(weights * means))
        off = est - centre
        k_used = int(usable.sum())
        se_all = math.sqrt(k_used * var_sum + off ** 2 * k_used * var_count) / n_used
        # a sum of several independent draws is near normal; a single stratum's is the noise's own draw
        overall.append(("stratified (recombined)", est, se_all, Z95 if k_used > 1 else mech.quantile95))
        if pooled_noisy is not None:
            n_pool = float(sizes.sum())
            p_off = pooled_noisy / max(n_pool, 1.0)
            se_pool = math.sqrt(var_pooled + p_off ** 2 * k * var_count) / max(n_pool, 1.0)
            # one draw of the plan's noise: its own 95% point, as for the stratum rows
            overall.append(("pooled (comparison)", float(np.clip(centre + p_off, lo, hi)), se_pool,
                            mech.quantile95))
    overall_df = pd.DataFrame(overall, columns=["estimate", "mean", "se", "q95"])
    overall_df["ci_low"], overall_df["ci_high"] = _interval(overall_df["mean"].to_numpy(),
                                                            (overall_df["q95"] * overall_df["se"]).to_numpy(), lo, hi)
    overall_df = overall_df.drop(columns="q95")
    size_note = ("Stratum sizes: public, as declared." if plan.sizes_public else
                 "Stratum sizes: the noisy counts paid for above, never the real ones.")
    statement = " ".join([RELEASE if secure else SIMULATION, ledger.statement(delta=plan.delta), size_note,
                          f"Values clipped to the public range [{lo:g}, {hi:g}].",
                          "Neighbouring data sets differ by adding or removing one person.", protect.sentence()])
    return MeanRelease(plan, table, overall_df, ledger, ledger.to_frame(), statement, secure)


def projected_ledger(plan: MeanReleasePlan) -> BudgetLedger:
    """What ``plan``'s release will spend, measurement by measurement as ``release_stratified_mean`` spends
    it (``plan.split()``), from the plan alone: what the ledger reserves before the release runs."""
    ledger = BudgetLedger()
    split, unit = plan.split(), plan.unit
    ledger.spend("stratum sums", split["sums"], unit, composition="parallel", group="strata", part="every stratum",
                 measured=f"clipped sums of {plan.column}, one per stratum")
    if not plan.sizes_public:
        ledger.spend("stratum counts", split["counts"], unit, composition="parallel", group="strata",
                     part="every stratum", measured="noisy stratum counts")
    if split["pooled"] > 0:
        ledger.spend("pooled sum (comparison)", split["pooled"], unit,
                     measured=f"one clipped sum of {plan.column} over every row")
    return ProtectionUnit.of(plan.data).person_ledger(ledger, scale=False)
