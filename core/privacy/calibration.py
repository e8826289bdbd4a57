"""Numerical calibration of the Generalized Gaussian mechanism (privacy-loss distribution).

The Generalized Gaussian of order p (density proportional to exp(-(|x|/sigma)^p), Ganesh and Zhao
2021) has a proven closed-form scale (``accounting.generalized_gaussian_sigma_bound``) that is about
two orders of magnitude too large to plot. Here the scale is found numerically: the privacy loss of
one coordinate shifted by 1 is discretised, composed k-fold by FFT (every coordinate shifted, the
worst case), and delta(epsilon) = E[(1 - e^(epsilon - L))_+] is bisected on log sigma. Losses are
rounded up to the grid and mass beyond it is added to delta, so the scale leans conservative.

Scales for the budget page's default grid ship precomputed (``scripts/build_gg_calibration.py``);
other settings are computed once and then kept in memory and in the on-disk cache.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

_MAX_FFT = 1 << 20
GG_GRID_FILE = Path(__file__).with_name("gg_calibration_grid.csv")


def _gg_single_loss(sigma: float, p: float, k: int, cells: int = 20000):
    """Privacy-loss values (upper ends) and masses of one GG coordinate shifted by 1, plus tail mass."""
    from scipy import stats

    tail = 1e-14 / k
    x_hi = float(stats.gennorm.isf(tail / 2.0, p, scale=sigma))
    edges = np.linspace(-x_hi, x_hi + 1.0, cells + 1)
    mid = len(edges) // 2
    cdf = stats.gennorm.cdf(edges[:mid], p, scale=sigma)
    sf = stats.gennorm.sf(edges[mid:], p, scale=sigma)
    left = np.diff(cdf)
    right = -np.diff(sf)
    bridge = np.array([max(0.0, 1.0 - cdf[-1] - sf[0])])
    mass = np.concatenate([left, bridge, right])
    # L(x) = (|x-1|^p - |x|^p)/sigma^p decreases in x, so a cell's largest loss is at its left edge
    x = edges[:-1]
    loss = (np.abs(x - 1.0) ** p - np.abs(x) ** p) / sigma ** p
    outside = float(cdf[0] + sf[-1])
    return loss, mass, outside


def gg_delta_curve(sigma: float, p: float, k: int, epsilons: Sequence[float]) -> np.ndarray:
    """delta(epsilon) of the k-query Generalized Gaussian with every query shifted by 1 (the worst case).

    Privacy-loss distribution composed k-fold by FFT; losses are rounded up to the grid and mass
    beyond the grid is added to delta, so the values lean pessimistic (up to FFT round-off).
    """
    eps = np.asarray(epsilons, dtype=float)
    loss, mass, outside = _gg_single_loss(sigma, p, k)
    mean = float(np.dot(loss, mass))
    sd = float(math.sqrt(max(np.dot(loss * loss, mass) - mean * mean, 1e-300)))
    window = 24.0 * math.sqrt(k) * sd + 1e-9
    span1 = float(loss.max() - loss.min())
    h = max(float(eps.min()) / (400.0 * k), (2.0 * window + span1) / (_MAX_FFT * 0.9))
    idx = np.ceil(loss / h).astype(np.int64)
    imin = int(idx.min())
    single = np.bincount(idx - imin, weights=mass)
    n = 1 << int(math.ceil(math.log2(max(single.shape[0], int(2.0 * window / h) + 2) + 1)))
    n = max(n, 1024)
    if single.shape[0] > n:
        raise ValueError("The Generalized Gaussian calibration grid is too coarse for these settings; "
                         "use fewer queries (a smaller k).")
    spec = np.fft.rfft(single, n)
    total = np.fft.irfft(spec ** k, n)
    total = np.maximum(total, 0.0)
    centre = k * mean / h
    lo = int(math.floor(centre - n / 2.0))
    pos = np.arange(n)
    s_idx = k * imin + pos + n * np.ceil((lo - k * imin - pos) / n).astype(np.int64)
    lvals = s_idx * h
    out = np.empty(eps.shape[0])
    for i, e in enumerate(eps):
        sel = lvals > e
        out[i] = float(np.sum(total[sel] * -np.expm1(e - lvals[sel]))) + k * outside
    return out


def gg_scale_by_bisection(k: int, p: float, epsilon: float, delta: float) -> float:
    """The numerical calibration itself (no lookup): bisection on log sigma against the PLD's delta."""
    # start from the classical Gaussian scale sqrt(k) sqrt(2 ln(1.25/delta)) / epsilon and bracket
    guess = math.sqrt(k) * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    lo, hi = math.log(guess) - 1.5, math.log(guess) + 1.5
    for _ in range(20):
        if gg_delta_curve(math.exp(lo), p, k, [epsilon])[0] > delta:
            break
        lo -= 2.0
    for _ in range(20):
        if gg_delta_curve(math.exp(hi), p, k, [epsilon])[0] <= delta:
            break
        hi += 2.0
    for _ in range(14):
        mid = 0.5 * (lo + hi)
        if gg_delta_curve(math.exp(mid), p, k, [epsilon])[0] > delta:
            lo = mid
        else:
            hi = mid
    return math.exp(hi)


@functools.lru_cache(maxsize=1)
def shipped_grid() -> dict[tuple[int, float, float, float], float]:
    """Scales precomputed for the budget page's default settings (scripts/build_gg_calibration.py)."""
    if not GG_GRID_FILE.exists():
        return {}
    table = pd.read_csv(GG_GRID_FILE)
    return {(int(r.k), float(r.p), float(round(r.epsilon, 12)), float(r.delta)): float(r.sigma)
            for r in table.itertuples()}


def _disk_calibration(k: int, p: float, epsilon: float, delta: float) -> float:
    from core.cache import cached_call

    return cached_call(gg_scale_by_bisection)(k, p, epsilon, delta)


@functools.lru_cache(maxsize=1024)
def _calibrate_cached(k: int, p: float, epsilon: float, delta: float) -> float:
    shipped = shipped_grid().get((k, p, epsilon, delta))
    return shipped if shipped is not None else _disk_calibration(k, p, epsilon, delta)


def is_calibrated(k: int, p: float, epsilon: float, delta: float) -> bool:
    """True when the scale for these settings is known without computing (shipped or already asked for
    in this process); pages use it to say that a calibration will take time."""
    key = (int(k), float(p), float(round(epsilon, 12)), float(delta))
    if key in shipped_grid():
        return True
    try:
        from core.cache import memory

        return memory().cache(gg_scale_by_bisection).check_call_in_cache(*key)
    except Exception:  # noqa: BLE001 - a cache probe never decides a number
        return False


def calibrate_generalized_gaussian(k: int, p: float, epsilon: float, delta: float) -> float:
    """Smallest GG scale sigma (density exp(-(|x|/sigma)^p)) with delta(epsilon) <= delta for k queries
    of l_inf sensitivity 1 (numeric, privacy-loss distribution); cached per (k, p, epsilon, delta).

    Much smaller than the proven bound of Ganesh-Zhao 2021; p = 2 reproduces the analytic Gaussian.
    """
    try:
        k_int, p, epsilon, delta = int(k), float(p), float(epsilon), float(delta)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("The Generalized Gaussian calibration takes numbers for k, p, epsilon and delta.") from None
    if k_int != k or not 1 <= k_int <= 100_000:
        raise ValueError(f"k (the number of queries one person changes) must be a whole number from 1 to "
                         f"100,000; got {k}.")
    if not (math.isfinite(epsilon) and 0 < epsilon <= 100):
        raise ValueError(f"epsilon must be a positive number up to 100; got {epsilon}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1; got {delta}.")
    if not (math.isfinite(p) and 1 <= p <= 16):
        raise ValueError(f"The Generalized Gaussian order p must lie between 1 and 16; got {p}.")
    return _calibrate_cached(k_int, p, float(round(epsilon, 12)), delta)


# Scales for drawing curves: a log-spaced grid of epsilons (every half decade) calibrated once per
# (k, p, delta), then interpolated in log-log space, where sigma is nearly straight (its slope drifts
# by about 0.01 per decade, so the interpolation is within about 0.3%). Draws use the exact scale.
CURVE_EPSILONS = tuple(float(e) for e in np.geomspace(1e-3, 100.0, 11))


def _curve_point(item) -> float:
    k, p, eps, delta = item
    return calibrate_generalized_gaussian(k, p, eps, delta)      # shipped or cached points cost nothing


def _scale_curve(k: int, p: float, delta: float, progress=None) -> tuple[float, ...]:
    from core.parallel import map_trials

    items = [(k, p, e, delta) for e in CURVE_EPSILONS]
    todo = sum(not is_calibrated(*item) for item in items)
    return tuple(map_trials(_curve_point, items, progress=progress, n_jobs=None if todo > 1 else 1,
                            label="Calibrating the Generalized Gaussian curve"))


@functools.lru_cache(maxsize=64)
def _curve(k: int, p: float, delta: float) -> tuple[float, ...]:
    from core.cache import cached_call

    return cached_call(_scale_curve)(int(k), float(p), float(delta))


def gg_scale_curve(k: int, p: float, delta: float, progress=None) -> tuple[float, ...]:
    """Calibrated scales at ``CURVE_EPSILONS`` (a few seconds the first time, in parallel; then cached on
    disk). ``progress`` reports the first computation."""
    from core.cache import cached_call

    if progress is not None and not gg_curve_is_cached(k, p, delta):
        cached_call(_scale_curve)(int(k), float(p), float(delta), progress=progress)
    return _curve(int(k), float(p), float(delta))


def gg_scale_estimate(k: int, p: float, epsilon: float, delta: float) -> float:
    """The calibrated scale read off the interpolated curve (for plotted what-ifs over many budgets);
    beyond the curve's epsilons its end segments are extended in log-log space. Draws use the exact
    calibration."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number; got {epsilon}.")
    x = np.log(CURVE_EPSILONS)
    y = np.log(np.asarray(gg_scale_curve(k, p, delta)))
    t = math.log(epsilon)
    if t < x[0]:
        return float(math.exp(y[0] + (t - x[0]) * (y[1] - y[0]) / (x[1] - x[0])))
    if t > x[-1]:
        return float(math.exp(y[-1] + (t - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2])))
    return float(math.exp(np.interp(t, x, y)))


def gg_curve_is_cached(k: int, p: float, delta: float) -> bool:
    """True when the interpolation curve for these settings needs no computing."""
    try:
        from core.cache import memory

        return memory().cache(_scale_curve).check_call_in_cache(int(k), float(p), float(delta))
    except Exception:  # noqa: BLE001 - a cache probe never decides a number
        return False
