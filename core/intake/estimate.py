"""Private estimates of what a schema needs public: a numeric column's bounds and a column's categories.

When a curator cannot declare a column's range or its category list from public knowledge (a code
book, the questionnaire), a small share of the budget can estimate them from the data. Both functions
return what they spent in a :class:`~core.privacy.ledger.BudgetLedger`, so the page records the
estimate as a release; a seeded run (``secure=False``) is a simulation.

Bounds (:func:`estimate_bounds`): two differentially private quantiles (default the 1st and 99th
percentiles), each by the exponential mechanism over a PUBLIC candidate grid (:data:`CANDIDATES`, fixed
here and never read from the data): 0 and +-10^e for e from -3 to 9 in 20 steps per decade (483 values).
The score of a candidate c for the quantile alpha is -|#{x < c} - alpha n| (Smith 2011, the same
quantity OpenDP scores); adding or removing one row moves it by at most max(alpha, 1 - alpha), and one
person's k rows by k times that. The epsilon is split evenly between the two quantiles. The seeded path
samples the exponential mechanism with ``core.privacy.mechanisms`` (McSherry-Talwar 2007); the secure path
is OpenDP's ``make_private_quantile`` (the same score, noisy max) with its scale found by OpenDP's
``binary_search_param`` so that its own privacy map gives epsilon / 2 for an input distance of k rows.
The estimate is reliable when alpha n is well above 2 max(alpha, 1 - alpha) k ln(483) / (epsilon / 2);
on small samples the tails may land on a far candidate, so the curator should look before using them.

Categories (:func:`estimate_categories`): a stability-based thresholded histogram (Korolova et al. 2009;
Wilson et al. 2020 for k rows per person). Every OBSERVED label's count gets Laplace noise of scale
k / epsilon (a person's k rows move the counts by at most k in L1) and only labels whose noisy count
reaches the threshold are returned. A label that only one person holds has a count of at most k, so it
clears the threshold T with probability at most 1/2 exp(-(T - k) / scale); a person holds at most k such
labels, so the default threshold T = k + scale ln(k / (2 delta)) makes the chance that any of them shows
at most delta. The release is (epsilon, delta)-DP: the ledger carries ``level_delta`` = delta, which the
project ledger books with the spend. Neither the counts nor the dropped labels leave the function.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from core.contracts import make_rng
from core.intake.check import apply
from core.intake.schema import ColumnSchema, DataSchema
from core.privacy.ledger import BudgetLedger
from core.privacy.mechanisms import sample_exponential_mechanism, sample_laplace
from core.privacy.protection import ProtectionUnit

CANDIDATES = np.concatenate([-np.geomspace(1e-3, 1e9, 241)[::-1], [0.0], np.geomspace(1e-3, 1e9, 241)])
"""The public candidate grid of the quantiles: 0 and +-10^e, e = -3 ... 9 in steps of 1/20 (483 values)."""

DEFAULT_QUANTILES = (0.01, 0.99)
DEFAULT_DELTA = 1e-6


def _check_epsilon(epsilon: float) -> float:
    try:
        epsilon = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a number; got {epsilon!r}.") from None
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be a positive number (e.g. 0.1); got {epsilon}.")
    return epsilon


def _check_rows(rows_per_person: int) -> ProtectionUnit:
    if isinstance(rows_per_person, bool) or not isinstance(rows_per_person, (int, np.integer)) \
            or rows_per_person < 1:
        raise ValueError(f"rows_per_person must be a whole number of at least 1; got {rows_per_person!r}.")
    k = int(rows_per_person)
    return ProtectionUnit(k, person_id=k > 1)


def _numbers(values) -> np.ndarray:
    series = pd.Series(values)
    numbers = pd.to_numeric(series, errors="coerce")
    if (numbers.isna() & series.notna()).any():
        raise ValueError("The column holds text that is not a number; clean it (or declare it a category) before "
                         "estimating its bounds.")
    out = numbers.dropna().to_numpy(float)
    if not np.all(np.isfinite(out)):
        raise ValueError("The column holds infinite values; remove them before estimating its bounds.")
    return out


def candidate_grid(nonnegative: bool = False, ceiling: float | None = None) -> np.ndarray:
    """The public grid, cut by what the curator declares as public knowledge: ``nonnegative`` (ages,
    counts, amounts) keeps its non-negative half, ``ceiling`` (a value no record could exceed, e.g. 130 for
    an age) keeps the candidates up to it. Beyond the data every candidate scores alike, so on the full
    grid a tail quantile is drawn from hundreds of tied far-away candidates (ages piled at 18 gave a
    negative low bound in two runs of three; at epsilon 0.5 the high bound's median was about 119,000);
    each declaration removes those ties."""
    grid = CANDIDATES[CANDIDATES >= 0] if nonnegative else CANDIDATES
    if ceiling is not None:
        ceiling = float(ceiling)
        if not math.isfinite(ceiling):
            raise ValueError(f"The ceiling must be a finite number; got {ceiling}.")
        grid = grid[grid <= ceiling]
        if grid.size < 2:
            raise ValueError(f"A ceiling of {ceiling:g} leaves fewer than two candidates; raise it.")
    return grid


def reliable_rows(epsilon: float, n_candidates: int, alpha: float = DEFAULT_QUANTILES[0],
                  rows_per_person: int = 1) -> float:
    """Rows a tail quantile needs beyond it to be found reliably: alpha n should exceed
    2 max(alpha, 1 - alpha) k ln(candidates) / (epsilon / 2) (the exponential mechanism's utility bound).
    Returns the smallest n with that property (public: it uses no data)."""
    need = 2 * max(alpha, 1 - alpha) * rows_per_person * math.log(max(n_candidates, 2)) / (epsilon / 2)
    return need / alpha


def quantile_scores(x: np.ndarray, alpha: float, candidates: np.ndarray = CANDIDATES) -> np.ndarray:
    """-|#{x < c} - alpha n| for every candidate c (higher is better; 0 at the exact quantile)."""
    below = np.searchsorted(np.sort(np.asarray(x, float)), candidates, side="left")
    return -np.abs(below - alpha * x.size)


def estimate_bounds(values, epsilon: float, *, secure: bool, rng=None, quantiles: tuple[float, float] = DEFAULT_QUANTILES,
                    rows_per_person: int = 1, nonnegative: bool = False,
                    ceiling: float | None = None) -> tuple[float, float, BudgetLedger]:
    """(low, high, ledger): private ``quantiles`` of ``values`` (missing values skipped) on the public grid.

    ``epsilon`` (pure DP, per person with up to ``rows_per_person`` rows each) is split evenly between the
    two quantiles. ``secure=True`` draws through OpenDP (a release); otherwise ``rng`` (a seed or a
    Generator) drives a simulation. low <= high always (the two are sorted). ``nonnegative`` (a public
    declaration) and ``ceiling`` (a public upper limit) cut the candidates (:func:`candidate_grid`).
    """
    epsilon = _check_epsilon(epsilon)
    unit = _check_rows(rows_per_person)
    lo_q, hi_q = (float(q) for q in quantiles)
    if not 0 < lo_q < hi_q < 1:
        raise ValueError(f"The quantiles must satisfy 0 < low < high < 1; got {quantiles!r}.")
    x = _numbers(values)
    grid = candidate_grid(bool(nonnegative), ceiling)
    k = unit.rows_per_person
    each = epsilon / 2.0
    if not secure:
        gen = make_rng(rng, what="a simulated estimate of bounds")
    picks = []
    for alpha in (lo_q, hi_q):
        if secure:
            picks.append(secure_quantile(x, alpha, each, k, grid))
        else:
            sensitivity = k * max(alpha, 1.0 - alpha)
            i = sample_exponential_mechanism(quantile_scores(x, alpha, grid), each, gen, sensitivity)
            picks.append(float(grid[i]))
    low, high = sorted(picks)
    ledger = BudgetLedger()
    for alpha in (lo_q, hi_q):
        ledger.spend(f"bounds: {alpha:.0%} quantile", each, "epsilon",
                     measured=f"one quantile on a public grid of {grid.size} candidates (exponential mechanism)")
    return low, high, unit.person_ledger(ledger, scale=False)


def secure_quantile(x: np.ndarray, alpha: float, epsilon: float, rows_per_person: int = 1,
                    grid: np.ndarray = CANDIDATES) -> float:
    """The ``alpha`` quantile of ``x`` on :data:`CANDIDATES` through OpenDP's ``make_private_quantile``,
    calibrated by OpenDP's ``binary_search_param`` to ``epsilon`` for ``rows_per_person`` rows (RELEASE PATH)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    candidates = [float(c) for c in grid]

    def make(scale: float):
        return dp.m.make_private_quantile(domain, dp.symmetric_distance(), dp.max_divergence(), candidates,
                                          float(alpha), scale)

    scale = dp.binary_search_param(make, d_in=int(rows_per_person), d_out=float(epsilon))
    return float(make(scale)([float(v) for v in x]))


def category_threshold(epsilon: float, delta: float = DEFAULT_DELTA, rows_per_person: int = 1) -> float:
    """The default threshold k + (k / epsilon) ln(k / (2 delta)): a label only one person holds is returned
    with probability at most delta (see the module docstring)."""
    epsilon = _check_epsilon(epsilon)
    k = _check_rows(rows_per_person).rows_per_person
    if not 0 < float(delta) < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1 (e.g. 1e-6); got {delta}.")
    return k + (k / epsilon) * math.log(k / (2.0 * float(delta)))


def estimate_categories(values, epsilon: float, threshold: float | None = None, *, secure: bool, rng=None,
                        delta: float = DEFAULT_DELTA, rows_per_person: int = 1) -> tuple[tuple[str, ...], BudgetLedger]:
    """(labels, ledger): the observed labels whose Laplace-noised count reaches ``threshold``, sorted.

    ``threshold`` None: :func:`category_threshold` at ``delta`` (the ledger's ``level_delta``). A threshold
    given below that default is refused (it would not keep the stated delta). Missing values are skipped;
    labels are compared as trimmed text. ``secure=True`` draws the noise through OpenDP (a release);
    otherwise ``rng`` drives a simulation.
    """
    epsilon = _check_epsilon(epsilon)
    unit = _check_rows(rows_per_person)
    k = unit.rows_per_person
    floor = category_threshold(epsilon, delta, k)
    if threshold is None:
        threshold = floor
    else:
        threshold = float(threshold)
        if not math.isfinite(threshold) or threshold < floor - 1e-12:
            raise ValueError(f"The threshold {threshold:g} is below {floor:.4g}, the least that keeps delta = "
                             f"{delta:g} at epsilon {epsilon:g}; raise it, or raise delta.")
    series = pd.Series(values).dropna().astype(str).str.strip()
    series = series[series != ""]
    counts = series.value_counts(sort=False)
    scale = k / epsilon
    if secure:
        from core.privacy.secure import secure_noise

        noise = np.asarray(secure_noise("laplace", scale, len(counts)), float) if len(counts) else np.zeros(0)
    else:
        noise = sample_laplace(scale, len(counts), make_rng(rng, what="a simulated estimate of categories"))
    keep = counts.to_numpy(float) + np.asarray(noise, float).reshape(-1) >= threshold
    labels = tuple(sorted(str(v) for v in counts.index[keep]))
    del counts, noise                     # nothing exact, nor a dropped label, leaves the function
    ledger = BudgetLedger()
    ledger.spend("categories: thresholded histogram", epsilon, "epsilon",
                 measured=f"noisy counts of the observed labels (Laplace scale {scale:.3g}), kept above a threshold "
                          f"of {threshold:.3g} (delta {delta:g})")
    ledger = unit.person_ledger(ledger, scale=False)
    ledger.level_delta = float(delta)
    return labels, ledger


def planned_estimate_ledger(what: str, column: str, epsilon: float, rows_per_person: int = 1) -> BudgetLedger:
    """What an estimate will spend before it runs, in the estimator's own shape (two quantiles at
    epsilon / 2 each, or one thresholded histogram at epsilon and :data:`DEFAULT_DELTA`): the
    confirmation's figures and the ledger's reservation, which the estimate's own ledger then matches."""
    epsilon = _check_epsilon(epsilon)
    unit = f" (per person, up to {rows_per_person} rows each)" if rows_per_person > 1 else ""
    planned = BudgetLedger()
    if what == "bounds":
        for q in DEFAULT_QUANTILES:
            planned.spend(f"bounds: {q:.0%} quantile", epsilon / 2, "epsilon",
                          measured=f"one private quantile of {column}{unit}")
    elif what == "categories":
        planned.spend("categories: thresholded histogram", epsilon, "epsilon",
                      measured=f"the private category list of {column}{unit}")
        planned.level_delta = DEFAULT_DELTA
    else:
        raise ValueError(f"Estimate 'bounds' or 'categories', not {what!r}.")
    return planned


def column_values(frame: pd.DataFrame, schema: DataSchema, column: str, what: str) -> pd.Series:
    """Column ``column`` of the declared file as an estimate reads it before its public information is known:
    trimmed, merged, numbers parsed, missing values dropped, and each person kept to the declared number
    of rows (contribution bounding with the schema's seed), so one person's rows move the estimate by at
    most that many. ``what`` is "bounds" (numbers) or "categories" (labels)."""
    col = schema.column(column)
    if what == "categories":
        keep = ColumnSchema(col.name, "category", merges=col.merges, missing="drop_row")
    else:
        keep = ColumnSchema(col.name, "number", parse_numbers=col.parse_numbers, missing="drop_row")
    cols = [keep]
    if schema.person_id is not None:
        cols.insert(0, ColumnSchema(schema.person_id, "person_id", missing="drop_row"))
    cleaned = apply(frame[[c.name for c in cols]], schema.replace(columns=tuple(cols)))
    return cleaned[column].astype(str) if what == "categories" else cleaned[column].astype(float)
