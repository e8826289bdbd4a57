"""Error of noise mechanisms for k overlapping counting queries, as a function of epsilon.

One person can change each of the k queries by at most 1 (l1 sensitivity k, l2 sensitivity sqrt(k),
l_inf sensitivity 1). Mechanisms: Laplace and two-sided geometric (pure epsilon, scale k/epsilon);
Gaussian and discrete Gaussian under zCDP, with rho chosen so the tight rho -> (epsilon, delta)
conversion meets the target; the Generalized Gaussian of order p (Ganesh-Zhao 2021), calibrated
numerically with a privacy-loss distribution, beside the paper's proven closed-form scale.
Errors: mean absolute error and RMSE per query, expected maximum over the k queries and its
95th percentile.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import special, stats

from core.privacy.accounting import generalized_gaussian_sigma_bound, rho_for_epsilon

# ---------------------------------------------------------------- |X| distribution per mechanism
# Each returns (survival function of |X| at t >= 0, quantile function of |X|) for one query.


def _abs_laplace(b: float):
    return (lambda t: np.exp(-t / b)), (lambda q: -b * np.log1p(-q))


def _abs_gaussian(sigma: float):
    return (lambda t: special.erfc(t / (sigma * math.sqrt(2.0)))), \
           (lambda q: sigma * special.ndtri((1.0 + q) / 2.0))


def _abs_generalized_gaussian(sigma: float, p: float):
    a = 1.0 / p
    return (lambda t: special.gammaincc(a, (t / sigma) ** p)), \
           (lambda q: sigma * special.gammaincinv(a, q) ** a)


def _abs_geometric(b: float):
    """|K| for P(K=k) proportional to beta^|k|, beta = exp(-1/b): P(|K| > j) = 2 beta^(j+1)/(1+beta)."""
    beta = math.exp(-1.0 / b)

    def surv(t):
        j = np.floor(t)
        return np.minimum(1.0, 2.0 * np.exp(-(j + 1.0) / b) / (1.0 + beta))

    def quant(q):
        # smallest integer j with P(|K| <= j) >= q
        j = np.ceil(-b * np.log((1.0 - q) * (1.0 + beta) / 2.0) - 1.0)
        return np.maximum(j, 0.0)
    return surv, quant


def _abs_discrete_gaussian(sigma: float):
    top = int(math.ceil(sigma * 40 + 10))
    k = np.arange(top + 1)
    logw = -(k.astype(float) ** 2) / (2.0 * sigma * sigma)
    w = np.exp(logw - logw.max())
    w[1:] *= 2.0
    pmf = w / w.sum()
    tail = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(|K| > j)

    def surv(t):
        j = np.clip(np.floor(t).astype(np.int64), 0, top)
        return tail[j]

    def quant(q):
        return np.searchsorted(np.cumsum(pmf), q).astype(float)
    return surv, quant


def _tail_point(surv: Callable, quant: Callable, tail: float) -> float:
    """A point t with S(t) <= tail, found on the survival function itself.

    Asking the quantile function for 1 - tail fails once tail is below float spacing near 1
    (for k in the hundreds 1 - 1e-13/k rounds to 1 and the Gaussian quantile is infinite).
    """
    hi = float(quant(0.5))
    hi = hi if math.isfinite(hi) and hi > 0 else 1.0
    for _ in range(2000):
        if float(surv(hi)) <= tail:
            break
        hi *= 2.0
    lo = 0.0
    for _ in range(60):                       # shrink to the first such point, within 1e-18 of hi
        mid = 0.5 * (lo + hi)
        if float(surv(mid)) <= tail:
            hi = mid
        else:
            lo = mid
    return hi


def expected_max_abs(surv: Callable, quant: Callable, k: int, discrete: bool = False) -> float:
    """E max_i |X_i| over k i.i.d. queries: integral of 1 - (1 - S(t))^k (sum over integers if discrete)."""
    hi = _tail_point(surv, quant, 1e-13 / max(k, 1))
    if discrete:
        t = np.arange(0.0, hi + 2.0)
        with np.errstate(divide="ignore"):
            return float(np.sum(-np.expm1(k * np.log1p(-np.minimum(surv(t), 1.0)))))
    t = np.linspace(0.0, hi * 1.05 + 1e-12, 4001)
    s = np.minimum(surv(t), 1.0)
    with np.errstate(divide="ignore"):
        f = -np.expm1(k * np.log1p(-s))
    f[s >= 1.0] = 1.0
    return float(np.trapezoid(f, t))


def max_abs_quantile(quant: Callable, k: int, q: float = 0.95) -> float:
    """q-quantile of max_i |X_i| over k i.i.d. queries: F^-1(q^(1/k))."""
    return float(quant(q ** (1.0 / k)))


# ---------------------------------------------------------------- numeric GG calibration (PLD)
_MAX_FFT = 1 << 20


def _gg_single_loss(sigma: float, p: float, k: int, cells: int = 20000):
    """Privacy-loss values (upper ends) and masses of one GG coordinate shifted by 1, plus tail mass."""
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

    Privacy-loss distribution, composed k-fold by FFT; losses are rounded up to the grid and mass
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
        raise ValueError("Generalized Gaussian calibration grid is too coarse for these settings; use smaller k.")
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


GG_GRID_FILE = Path(__file__).with_name("gg_calibration_grid.csv")


@functools.lru_cache(maxsize=1)
def _shipped_grid() -> dict[tuple[int, float, float, float], float]:
    """Scales precomputed for the page's default settings (scripts/build_gg_calibration.py)."""
    if not GG_GRID_FILE.exists():
        return {}
    table = pd.read_csv(GG_GRID_FILE)
    return {(int(r.k), float(r.p), float(round(r.epsilon, 12)), float(r.delta)): float(r.sigma)
            for r in table.itertuples()}


@functools.lru_cache(maxsize=512)
def _calibrate_gg_cached(k: int, p: float, epsilon: float, delta: float) -> float:
    shipped = _shipped_grid().get((k, p, epsilon, delta))
    return shipped if shipped is not None else gg_scale_by_bisection(k, p, epsilon, delta)


def gg_scale_by_bisection(k: int, p: float, epsilon: float, delta: float) -> float:
    """The numerical calibration itself (no lookup): bisection on log sigma against the PLD's delta."""
    # start from the Gaussian-like scale sqrt(k) * sqrt(2 ln(1.25/delta)) / epsilon and bracket
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


def calibrate_generalized_gaussian(k: int, p: float, epsilon: float, delta: float) -> float:
    """Smallest GG scale sigma (density exp(-(|x|/sigma)^p)) with delta(epsilon) <= delta for k queries.

    Numeric, via the privacy-loss distribution (bisection on log sigma, upper end returned);
    cached per (k, p, epsilon, delta). Much smaller than the proven bound of Ganesh-Zhao 2021.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k}.")
    if not (epsilon > 0 and 0 < delta < 1 and p >= 1):
        raise ValueError("Need epsilon > 0, 0 < delta < 1 and p >= 1 for the Generalized Gaussian calibration.")
    return _calibrate_gg_cached(int(k), float(p), float(round(epsilon, 12)), float(delta))


# --------------------------------------------------------------------------------- sweep
@dataclass(frozen=True)
class MechanismSweepConfig:
    """Settings of the mechanism comparison: k overlapping queries, epsilons, delta, GG orders."""

    k: int = 100
    epsilons: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
    delta: float = 1e-6
    gg_orders: tuple[float, ...] = (3.0,)
    mechanisms: tuple[str, ...] = ("laplace", "geometric", "gaussian", "discrete_gaussian", "generalized_gaussian")
    include_bound: bool = True


_LABELS = {"laplace": "Laplace", "geometric": "Geometric", "gaussian": "Gaussian (zCDP)",
           "discrete_gaussian": "Discrete Gaussian (zCDP)"}


def _metrics(surv, quant, k: int, discrete: bool, mae: float, rmse: float) -> dict:
    return {"MAE": mae, "RMSE": rmse, "E max error": expected_max_abs(surv, quant, k, discrete),
            "95th pct of max error": max_abs_quantile(quant, k)}


def mechanism_sweep(config: MechanismSweepConfig, progress=None) -> pd.DataFrame:
    """Tidy table: mechanism, calibration, epsilon, scale, metric, value for every mechanism and epsilon."""
    k = int(config.k)
    if k < 1 or k > 100_000:
        raise ValueError("k (the number of overlapping queries) must be between 1 and 100,000.")
    if not 0 < config.delta < 1:
        raise ValueError("delta must lie strictly between 0 and 1.")
    if any(e <= 0 for e in config.epsilons):
        raise ValueError("Every epsilon must be positive.")
    rows = []
    eps_list = sorted(set(float(e) for e in config.epsilons))
    steps = len(eps_list) * max(1, len(config.mechanisms))
    done = 0
    for eps in eps_list:
        for name in config.mechanisms:
            if name == "laplace":
                b = k / eps
                s, q = _abs_laplace(b)
                rows += _rows(name, _LABELS[name], "pure epsilon", eps, b,
                              _metrics(s, q, k, False, b, math.sqrt(2) * b))
            elif name == "geometric":
                b = k / eps
                beta = math.exp(-1.0 / b)
                s, q = _abs_geometric(b)
                var = 2 * beta / (1 - beta) ** 2
                mae = 2 * beta / ((1 - beta) * (1 + beta))
                rows += _rows(name, _LABELS[name], "pure epsilon", eps, b, _metrics(s, q, k, True, mae, math.sqrt(var)))
            elif name in ("gaussian", "discrete_gaussian"):
                rho = rho_for_epsilon(eps, config.delta)
                sigma = math.sqrt(k) / math.sqrt(2.0 * rho)
                if name == "gaussian":
                    s, q = _abs_gaussian(sigma)
                    m = _metrics(s, q, k, False, sigma * math.sqrt(2 / math.pi), sigma)
                else:
                    s, q = _abs_discrete_gaussian(sigma)
                    from core.privacy.mechanisms import discrete_gaussian_mean_abs, discrete_gaussian_variance
                    m = _metrics(s, q, k, True, float(discrete_gaussian_mean_abs(sigma)),
                                 math.sqrt(float(discrete_gaussian_variance(sigma))))
                rows += _rows(name, _LABELS[name], "zCDP, tight conversion", eps, sigma, m, rho=rho)
            elif name == "generalized_gaussian":
                for p in config.gg_orders:
                    sig = calibrate_generalized_gaussian(k, p, eps, config.delta)
                    rows += _rows(name, f"Generalized Gaussian p={p:g}", "numeric (PLD)", eps, sig,
                                  _gg_metrics(sig, p, k))
                    if config.include_bound:
                        bound = generalized_gaussian_sigma_bound(k, p, eps, config.delta, check_range=False)
                        rows += _rows(name, f"Generalized Gaussian p={p:g}", "proven bound", eps, bound,
                                      _gg_metrics(bound, p, k))
            else:
                raise ValueError(f"Unknown mechanism {name!r} in the comparison.")
            done += 1
            if progress is not None:
                progress(done, steps, f"epsilon={eps:g}, {name}")
    return pd.DataFrame(rows)


def _gg_metrics(sigma: float, p: float, k: int) -> dict:
    s, q = _abs_generalized_gaussian(sigma, p)
    mae = sigma * math.exp(math.lgamma(2 / p) - math.lgamma(1 / p))
    rmse = sigma * math.exp(0.5 * (math.lgamma(3 / p) - math.lgamma(1 / p)))
    return _metrics(s, q, k, False, mae, rmse)


def _rows(name: str, label: str, calibration: str, eps: float, scale: float, metrics: dict,
          rho: float | None = None) -> list[dict]:
    return [{"mechanism": name, "label": label, "calibration": calibration, "epsilon": eps, "rho": rho,
             "scale": scale, "metric": metric, "value": value} for metric, value in metrics.items()]
