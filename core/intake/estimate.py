"""Private estimates of what a schema needs public: a numeric column's bounds and a column's categories.

When a curator cannot declare a column's range or its category list from public knowledge (a code
book, the questionnaire), a small share of the budget can estimate them from the data. Both functions
return what they spent in a :class:`~core.privacy.ledger.BudgetLedger`, so the page records the
estimate as a release; a seeded run (``secure=False``) is a simulation.

Bounds (:func:`estimate_bounds`): a private 1st and 99th percentile in two steps, each a standard
mechanism, so that the bounds land near the data on every scale and sign:

1. *Bracket* (a quarter of epsilon): a noisy histogram of the values over PUBLIC bins, powers of
   sqrt(2) of |x| on both signs (|x| from 2^-20 to 2^40; smaller magnitudes share one bin around 0,
   larger ones count in the outermost bins), with Laplace noise of scale k / epsilon_1 (a person's k
   rows move the counts by at most k in L1). The bracket runs from the lowest to the highest bin whose
   noisy count clears T = (k / epsilon_1) ln(B / beta_1) (B bins, beta_1 = 0.01: some empty bin clears
   it with probability at most beta_1 / 2); if none clears, the fullest noisy bin is the bracket. This
   is SmartNoise's approximate bounds (powers of 2 there) on a finer grid.
2. *Quantiles* (3/8 of epsilon each): for alpha = 1% and 99%, report noisy max with exponential noise
   (permute-and-flip; McKenna & Sheldon 2020; OpenDP's ``make_noisy_max``) over at most G = 1001
   candidates, the same number evenly spaced in every bin of the bracket (fine where the data are,
   however many magnitudes the bracket spans), scoring c by -|#{x < c} - alpha n| (Smith 2011). One row
   moves every score by at most max(alpha, 1 - alpha), a person's k rows by k times that, and the scores
   do not all move the same way, so the noise scale is s = 2 k max(alpha, 1 - alpha) / epsilon_q.

The candidates come from the bracket, never from the raw data; the far-away candidates that tie on a
fixed wide grid (and pulled its tail quantiles to values like 10^7 on piled or offset columns) lie
outside the bracket. The seeded path (``secure=False``) and the release (``secure=True``) run this same
algorithm; only the noise source differs: numpy's Laplace and exponential draws from ``rng`` for a
simulation, OpenDP's samplers for a release (its Laplace, and its ``make_noisy_max``, whose own privacy
map is checked against the budget before it draws).

Requirement (:func:`required_values`, public: it reads no data). The promise, checked by
:func:`near_truth`: the low bound lies between a - w/2 and the 2.5th percentile, the high bound
between the 97.5th percentile and b + w/2, where a, b are the true 0.5 and 99.5 percentiles and
w = b - a (at most the true range widened to twice its width, clipping at most 2.5% on a side). With
m = alpha - 0.5% the rank margin, the noisy max misses the best score by more than s ln(G / beta_2)
with probability at most beta_2 / 2 per bound (a union bound over the candidates, beta_2 = 0.09), so
when m n exceeds that, and the tail holds at least T rows (m n >= T, so its bins can clear the
bracket's threshold), the promise holds in at least 90% of draws:
n >= max(T, s ln(G / beta_2)) / m. Below that the estimate refuses before drawing anything: raise
epsilon, or declare the bounds from a code book. A public ``floor`` and ``ceiling`` (what no value
can be below or above) clip the values and cut the bins; there is no sign default.
``benchmarks/bounds_bench.py`` measures the promise on the bundled and the messy data.

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
from fractions import Fraction

import numpy as np
import pandas as pd

from core.contracts import make_rng
from core.intake.check import apply
from core.intake.schema import ColumnSchema, DataSchema
from core.privacy.ledger import BudgetLedger
from core.privacy.mechanisms import sample_laplace
from core.privacy.protection import ProtectionUnit

MAGNITUDES = 2.0 ** (np.arange(-40, 81) / 2.0)
"""Public bin edges of |x|: 2^-20, 2^-19.5, ..., 2^40 (powers of sqrt(2))."""
EDGES = np.concatenate([-MAGNITUDES[::-1], MAGNITUDES])
"""Public bin edges on both signs: bin i is [EDGES[i], EDGES[i + 1]); the bin [-2^-20, 2^-20) holds 0."""
N_CANDIDATES = 1001
DEFAULT_QUANTILES = (0.01, 0.99)
TRUTH_RANGE = (0.005, 0.995)
BRACKET_SHARE = 0.25
BETA = 0.09
BRACKET_BETA = 0.01
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


def _public_limit(value, what: str) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"The {what} must be a number or left empty; got {value!r:.40}.") from None
    if not math.isfinite(value):
        raise ValueError(f"The {what} must be a finite number; got {value}.")
    return value


def public_bins(floor: float | None = None, ceiling: float | None = None) -> np.ndarray:
    """The bracket's bin edges cut by what the curator declares (public): the bins that reach above
    ``floor`` and below ``ceiling``, with the outer edges moved onto them. Reads no data."""
    floor, ceiling = _public_limit(floor, "floor"), _public_limit(ceiling, "ceiling")
    if floor is not None and ceiling is not None and not floor < ceiling:
        raise ValueError(f"The floor ({floor:g}) must lie below the ceiling ({ceiling:g}); correct one of them.")
    edges = EDGES
    if floor is not None:
        inner = edges[edges > floor]
        edges = np.r_[floor, inner] if inner.size else np.r_[floor, floor + 1.0]
    if ceiling is not None:
        inner = edges[edges < ceiling]
        edges = np.r_[inner, ceiling] if inner.size else np.r_[ceiling - 1.0, ceiling]
    return edges


def _check_quantiles(quantiles) -> tuple[float, float]:
    lo_q, hi_q = (float(q) for q in quantiles)
    if not TRUTH_RANGE[0] < lo_q < 0.5 < hi_q < TRUTH_RANGE[1]:
        raise ValueError(f"The quantiles must satisfy {TRUTH_RANGE[0]:.1%} < low < 50% < high < {TRUTH_RANGE[1]:.1%} "
                         f"(the estimate's promise is stated against the 0.5 to 99.5 percentile range); got "
                         f"{quantiles!r}.")
    return lo_q, hi_q


def _split(epsilon: float) -> tuple[float, float]:
    """(bracket epsilon, epsilon of each quantile)."""
    return epsilon * BRACKET_SHARE, epsilon * (1.0 - BRACKET_SHARE) / 2.0


def required_values(epsilon: float, rows_per_person: int = 1, quantiles: tuple[float, float] = DEFAULT_QUANTILES,
                    floor: float | None = None, ceiling: float | None = None) -> int:
    """The fewest values for which :func:`estimate_bounds` promises to land near the truth (module docstring):
    max(T, s ln(G / beta)) / m. Public: it uses the budget and the declarations only, never the data."""
    epsilon = _check_epsilon(epsilon)
    k = _check_rows(rows_per_person).rows_per_person
    lo_q, hi_q = _check_quantiles(quantiles)
    e_bracket, e_quantile = _split(epsilon)
    threshold = bracket_threshold(e_bracket, public_bins(floor, ceiling).size - 1, k)
    scale = 2.0 * k * max(lo_q, 1.0 - lo_q, hi_q, 1.0 - hi_q) / e_quantile
    margin = min(lo_q - TRUTH_RANGE[0], TRUTH_RANGE[1] - hi_q)
    return int(math.ceil(max(threshold, scale * math.log(N_CANDIDATES / BETA)) / margin))


def bracket_threshold(epsilon: float, n_bins: int, rows_per_person: int = 1) -> float:
    """T = (k / epsilon) ln(B / beta_1), beta_1 = 0.01: an empty bin's Laplace count clears it with
    probability beta_1 / (2B), so a bracket stretched by an empty bin has probability at most 0.5%."""
    return rows_per_person / epsilon * math.log(n_bins / BRACKET_BETA)


def bracket(x: np.ndarray, epsilon: float, edges: np.ndarray, rows_per_person: int, *, secure: bool,
            gen: np.random.Generator | None = None) -> np.ndarray:
    """Step 1: the edges of the bins from the lowest to the highest whose Laplace-noised count (scale
    k / epsilon) clears :func:`bracket_threshold` (the fullest noisy bin if none does). The bin around 0
    ends at 0 when it is the first or the last."""
    n_bins = edges.size - 1
    counts = np.bincount(np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1),
                         minlength=n_bins).astype(float)
    scale = rows_per_person / epsilon
    if secure:
        from core.privacy.secure import secure_noise

        noise = np.asarray(secure_noise("laplace", scale, n_bins), float)
    else:
        noise = sample_laplace(scale, n_bins, gen)
    noisy = counts + noise
    del counts
    clear = np.flatnonzero(noisy >= bracket_threshold(epsilon, n_bins, rows_per_person))
    if not clear.size:
        clear = np.array([int(np.argmax(noisy))])
    out = edges[int(clear[0]):int(clear[-1]) + 2].copy()
    if out.size > 2:                               # not the bin around 0 alone
        out[0] = 0.0 if out[0] == -MAGNITUDES[0] else out[0]
        out[-1] = 0.0 if out[-1] == MAGNITUDES[0] else out[-1]
    return out


def bracket_candidates(bins: np.ndarray) -> np.ndarray:
    """At most :data:`N_CANDIDATES` candidates spanning the bracket's bins: the same number evenly spaced in
    every bin, and the last edge, so a bracket stretched over many magnitudes still has fine candidates
    wherever the data are."""
    per_bin = max(1, (N_CANDIDATES - 1) // (bins.size - 1))
    steps = np.arange(per_bin) / per_bin
    inner = (bins[:-1, None] + np.diff(bins)[:, None] * steps[None, :]).ravel()
    return np.r_[inner, bins[-1]]


def rational(alpha: float) -> tuple[int, int]:
    """alpha as num / den with den at most 10,000 (0.01 -> 1 / 100), so the scores are exact integers."""
    frac = Fraction(alpha).limit_denominator(10_000)
    return frac.numerator, frac.denominator


def quantile_scores(sorted_x: np.ndarray, alpha: float, candidates: np.ndarray) -> np.ndarray:
    """-|den #{x < c} - num n| for every candidate c, alpha = num / den (:func:`rational`): the rank error
    |#{x < c} - alpha n| in units of 1 / den row, as exact integers (higher is better; 0 at the exact
    quantile). One row moves every score by at most max(num, den - num). ``sorted_x`` sorted ascending."""
    num, den = rational(alpha)
    below = np.searchsorted(sorted_x, candidates, side="left").astype(np.int64)
    return -np.abs(den * below - num * np.int64(sorted_x.size))


def noisy_max(scores: np.ndarray, epsilon: float, sensitivity: int, *, secure: bool,
              gen: np.random.Generator | None = None) -> int:
    """Index of the largest integer score plus exponential noise of scale 2 sensitivity / epsilon
    (permute-and-flip, McKenna & Sheldon 2020): epsilon-DP for scores that move by at most ``sensitivity``,
    not all the same way. ``secure``: OpenDP's ``make_noisy_max``, whose privacy map must give at most
    epsilon; otherwise numpy's exponential draws from ``gen``."""
    scale = 2.0 * sensitivity / epsilon
    if not secure:
        return int(np.argmax(scores + gen.exponential(scale, scores.size)))
    import opendp.prelude as dp

    dp.enable_features("contrib")
    measurement = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T="i64")), dp.linf_distance(T="i64"),
                                      dp.max_divergence(), scale=scale)
    spent = float(measurement.map(int(sensitivity)))
    if spent > epsilon * (1 + 1e-9):
        raise ValueError(f"OpenDP's noisy max would spend {spent:g}, more than the {epsilon:g} planned; "
                         "nothing was released.")
    return int(measurement([int(v) for v in scores]))


def estimate_bounds(values, epsilon: float, *, secure: bool, rng=None, quantiles: tuple[float, float] = DEFAULT_QUANTILES,
                    rows_per_person: int = 1, floor: float | None = None,
                    ceiling: float | None = None) -> tuple[float, float, BudgetLedger]:
    """(low, high, ledger): private ``quantiles`` of ``values`` (missing values skipped), bracket then noisy max.

    ``epsilon`` (pure DP, per person with up to ``rows_per_person`` rows each) goes a quarter to the bracket
    and 3/8 to each quantile. ``secure=True`` draws through OpenDP (a release); otherwise ``rng`` (a seed or a
    Generator) drives a simulation of the same algorithm. ``floor`` and ``ceiling`` are public declarations
    (values are clipped to them). ValueError before any draw when the column has fewer values than
    :func:`required_values`, saying how many are needed and what to do.
    """
    epsilon = _check_epsilon(epsilon)
    unit = _check_rows(rows_per_person)
    k = unit.rows_per_person
    lo_q, hi_q = _check_quantiles(quantiles)
    edges = public_bins(floor, ceiling)
    need = required_values(epsilon, k, (lo_q, hi_q), floor, ceiling)
    x = np.sort(np.clip(_numbers(values), -np.inf if floor is None else edges[0],
                        np.inf if ceiling is None else edges[-1]))
    if x.size < need:
        raise ValueError(f"The column has {x.size:,} values; at epsilon {epsilon:g}"
                         f"{f' with up to {k} rows per person' if k > 1 else ''} a private estimate of its bounds "
                         f"needs at least {need:,} to land near the truth, so nothing was spent. Raise epsilon, or "
                         "declare the bounds from public knowledge (a code book, the questionnaire's limits).")
    gen = None if secure else make_rng(rng, what="a simulated estimate of bounds")
    e_bracket, e_quantile = _split(epsilon)
    candidates = bracket_candidates(bracket(x, e_bracket, edges, k, secure=secure, gen=gen))
    picks = []
    for alpha in (lo_q, hi_q):
        num, den = rational(alpha)
        sensitivity = k * max(num, den - num)
        picks.append(float(candidates[noisy_max(quantile_scores(x, alpha, candidates), e_quantile, sensitivity,
                                                secure=secure, gen=gen)]))
    del x
    low, high = sorted(picks)
    return low, high, unit.person_ledger(_bounds_ledger(epsilon, (lo_q, hi_q), "the column"), scale=False)


def near_truth(values, low: float, high: float) -> bool:
    """The promise of :func:`required_values`, checked against the data (for tests and benchmarks, never
    a page): with a, b the true 0.5 and 99.5 percentiles and w = b - a, ``low`` lies in
    [a - w / 2, q(2.5%)] and ``high`` in [q(97.5%), b + w / 2]; the bounds are at most the true range
    widened by half its width on each side (twice as wide) and clip at most 2.5% of the values on a side."""
    a, b, inner_low, inner_high = np.quantile(_numbers(values), [TRUTH_RANGE[0], TRUTH_RANGE[1], 0.025, 0.975])
    half = (b - a) / 2.0
    return bool(a - half <= low <= inner_low and inner_high <= high <= b + half)


def _bounds_ledger(epsilon: float, quantiles: tuple[float, float], column: str, unit: str = "") -> BudgetLedger:
    """The three spends of a bounds estimate (the bracket, then each quantile)."""
    e_bracket, e_quantile = _split(epsilon)
    ledger = BudgetLedger()
    ledger.spend("bounds: bracket", e_bracket, "epsilon",
                 measured=f"a noisy histogram of {column} over public bins of |x| (Laplace){unit}")
    for q in quantiles:
        ledger.spend(f"bounds: {q:.0%} quantile", e_quantile, "epsilon",
                     measured=f"one private quantile of {column} among {N_CANDIDATES} candidates spanning the "
                              f"bracket (noisy max){unit}")
    return ledger


def estimate_input(frame: pd.DataFrame, schema: DataSchema, column: str, what: str) -> pd.Series:
    """The column as every run reads it before its public information is known (curator-only): trimmed,
    merged, numbers parsed, missing values dropped, and each person kept to the declared number of rows
    (contribution bounding with the schema's seed), so one person moves the estimate by at most that many
    rows. ``what`` is "bounds" (numbers) or "categories" (labels as text)."""
    if what not in ("bounds", "categories"):
        raise ValueError(f"Estimate 'bounds' or 'categories', not {what!r}.")
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
    """What an estimate will spend before it runs, in the estimator's own shape (the bracket and two
    quantiles, or one thresholded histogram at epsilon and :data:`DEFAULT_DELTA`): the confirmation's
    figures and the ledger's reservation, which the estimate's own ledger then matches."""
    epsilon = _check_epsilon(epsilon)
    unit = f" (per person, up to {rows_per_person} rows each)" if rows_per_person > 1 else ""
    if what == "bounds":
        return _bounds_ledger(epsilon, DEFAULT_QUANTILES, column, unit)
    if what == "categories":
        planned = BudgetLedger()
        planned.spend("categories: thresholded histogram", epsilon, "epsilon",
                      measured=f"the private category list of {column}{unit}")
        planned.level_delta = DEFAULT_DELTA
        return planned
    raise ValueError(f"Estimate 'bounds' or 'categories', not {what!r}.")
