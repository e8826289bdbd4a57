"""Conversions between privacy units. Every conversion in the project lives here.

Units: pure epsilon-DP, zero-concentrated DP (rho-zCDP) and approximate (epsilon, delta)-DP.
scipy is imported inside the functions that need it, so ``import core`` stays cheap.
"""
from __future__ import annotations

import math

import numpy as np


def _check_positive(value: float, name: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {value}.")
    return value


MAX_BUDGET = 1e6
"""The largest epsilon or rho the conversions take: far beyond any budget that still protects anyone,
and small enough that their searches stay inside floating point."""


def _check_budget(value: float, name: str) -> float:
    value = _check_positive(value, name)
    if value > MAX_BUDGET:
        raise ValueError(f"{name} must be at most {MAX_BUDGET:,.0f} (a budget this large protects no one); got {value:g}.")
    return value


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1 (e.g. 1e-6); got {delta}.")
    return delta


def _check_rho_delta(rho: float, delta: float) -> None:
    _check_positive(rho, "rho")
    _check_delta(delta)


def epsilon_to_rho(epsilon: float) -> float:
    """rho of zCDP implied by pure epsilon-DP: rho = epsilon^2 / 2 (Bun-Steinke 2016, Prop. 1.4)."""
    epsilon = _check_positive(epsilon, "epsilon")
    return epsilon * epsilon / 2.0


def exponential_mechanism_epsilon(rho: float) -> float:
    """epsilon of an exponential mechanism (score sensitivity 1) that costs ``rho`` of zCDP: such a
    mechanism is epsilon^2 / 8-zCDP (Cesar-Rogers 2021, bounded range), so epsilon = sqrt(8 rho)."""
    rho = _check_positive(rho, "rho")
    return math.sqrt(8.0 * rho)


def rho_to_epsilon_simple(rho: float, delta: float) -> float:
    """The simple bound epsilon = rho + 2 sqrt(rho ln(1/delta)) (Bun-Steinke 2016, Prop. 1.3)."""
    _check_rho_delta(rho, delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _log_alpha_search(objective) -> float:
    """Minimum over alpha > 1 of ``objective(alpha)`` (vectorised), searched on u = log(alpha - 1).

    A coarse grid over alpha - 1 in [e^-25, e^40] finds the best cell, then bounded Brent
    refines it inside the neighbouring cells.
    """
    from scipy.optimize import minimize_scalar

    grid = np.arange(-25.0, 40.0 + 1e-9, 0.25)
    with np.errstate(over="ignore", invalid="ignore"):
        values = objective(1.0 + np.exp(grid))
    values = np.where(np.isfinite(values), values, np.inf)
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    f = lambda u: float(objective(1.0 + np.exp(np.float64(u))))  # noqa: E731 - change of variable
    res = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10, "maxiter": 500})
    return float(min(res.fun, values[best]))


def rho_to_epsilon(rho: float, delta: float) -> float:
    """Tight epsilon for rho-zCDP at the given delta (Canonne, Kamath, Steinke 2020, Prop. 12 / Cor. 13).

    epsilon = inf over alpha > 1 of rho alpha + (ln(1/(alpha delta)) + (alpha - 1) ln(1 - 1/alpha)) / (alpha - 1),
    found with a bounded 1-D minimiser on log(alpha - 1); never above ``rho_to_epsilon_simple``.
    """
    _check_rho_delta(rho, delta)
    log_inv_delta = -math.log(delta)

    def eps_at(alpha):
        return rho * alpha + (log_inv_delta - np.log(alpha) + (alpha - 1.0) * np.log1p(-1.0 / alpha)) / (
            alpha - 1.0)

    return max(0.0, _log_alpha_search(eps_at))


def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """Largest rho whose tight (epsilon, delta) conversion stays within ``epsilon``: the inverse of
    ``rho_to_epsilon`` at fixed delta, found by root finding on log(rho) (CKS 2020, Cor. 13)."""
    from scipy.optimize import brentq

    epsilon = _check_budget(epsilon, "epsilon")
    _check_delta(delta)
    lo, hi = math.log(epsilon) - 30.0, math.log(epsilon) + 3.0
    return math.exp(brentq(lambda lr: rho_to_epsilon(math.exp(lr), delta) - epsilon, lo, hi, xtol=1e-13))


def delta_for(rho: float, epsilon: float) -> float:
    """Smallest delta the tight conversion certifies for rho-zCDP at this epsilon (CKS 2020, Cor. 13).

    delta = inf over alpha > 1 of exp((alpha - 1)(alpha rho - epsilon)) (1 - 1/alpha)^alpha / (alpha - 1).
    """
    rho = _check_budget(rho, "rho")
    epsilon = _check_budget(epsilon, "epsilon")

    def log_delta_at(alpha):
        return (alpha - 1.0) * (alpha * rho - epsilon) + alpha * np.log1p(-1.0 / alpha) - np.log(alpha - 1.0)

    return min(1.0, math.exp(_log_alpha_search(log_delta_at)))


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Gaussian noise sigma for rho-zCDP: sigma = Delta_2 / sqrt(2 rho) (Bun-Steinke 2016, Prop. 1.6)."""
    sensitivity = _check_positive(sensitivity, "The sensitivity")
    rho = _check_positive(rho, "rho")
    return sensitivity / math.sqrt(2.0 * rho)


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Classical Gaussian-mechanism sigma sqrt(2 ln(1.25/delta)) Delta_2 / epsilon (Dwork-Roth 2014, Thm. A.1; eps < 1)."""
    epsilon = _check_positive(epsilon, "epsilon")
    delta = _check_delta(delta)
    sensitivity = _check_positive(sensitivity, "The sensitivity")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def gaussian_privacy_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact delta of the Gaussian mechanism at epsilon (Balle-Wang 2018, Thm. 8).

    delta = Phi(D/(2 s) - eps s/D) - e^eps Phi(-D/(2 s) - eps s/D); the second term in log space.
    """
    from scipy.special import log_ndtr, ndtr

    sigma = _check_positive(sigma, "sigma")
    epsilon = float(epsilon)
    if not math.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be a non-negative finite number; got {epsilon}.")
    sensitivity = _check_positive(sensitivity, "The sensitivity")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest Gaussian sigma giving (epsilon, delta)-DP, the analytic Gaussian mechanism (Balle-Wang 2018, Thm. 8).

    Solves gaussian_privacy_delta(sigma, epsilon, sensitivity) = delta with brentq on log(sigma).
    """
    from scipy.optimize import brentq

    epsilon = _check_positive(epsilon, "epsilon")
    delta = _check_delta(delta)
    sensitivity = _check_positive(sensitivity, "The sensitivity")
    gap = lambda log_s: gaussian_privacy_delta(math.exp(log_s), epsilon, sensitivity) - delta  # noqa: E731
    hi = math.log(classical_gaussian_sigma(min(epsilon, 1.0), delta, sensitivity)) + 1.0
    lo = hi - 2.0
    while gap(lo) <= 0:  # the privacy curve decreases in sigma: widen the bracket until it changes sign
        lo -= 2.0
    while gap(hi) > 0:
        hi += 2.0
    return math.exp(brentq(gap, lo, hi, xtol=1e-14, rtol=1e-13, maxiter=500))


def generalized_gaussian_sigma_bound(k: int, p: float, epsilon: float, delta: float,
                                     check_range: bool = True) -> float:
    """The proven Generalized Gaussian scale for k queries of l_inf sensitivity 1 (Ganesh-Zhao 2021, Lemma 14 / Thm. 17).

    sigma = 185 sqrt(k p ln(1/delta)) / epsilon gives (epsilon, delta)-DP for an even integer p with
    4 <= p <= ln k, delta <= 1/k and epsilon = O(1) (read here as epsilon <= 1). With check_range the
    function raises ValueError outside that range; the constant is loose (numeric calibration is far smaller).
    """
    epsilon = _check_positive(epsilon, "epsilon")
    delta = _check_delta(delta)
    p = _check_positive(p, "The order p")
    if int(k) != k or k < 1:
        raise ValueError(f"k (the number of queries) must be a positive integer; got {k}.")
    if check_range:
        problems = []
        if p != int(p) or int(p) % 2:
            problems.append(f"p = {p:g} is not an even integer (round it up to one)")
        if not 4 <= p <= math.log(k):
            problems.append(f"p = {p:g} is outside [4, ln k = {math.log(k):.3g}]")
        if delta > 1.0 / k:
            problems.append(f"delta = {delta:g} is above 1/k = {1.0 / k:.3g}")
        if epsilon > 1:
            problems.append(f"epsilon = {epsilon:g} is above 1")
        if problems:
            raise ValueError("The Generalized Gaussian bound is only proven for even p in [4, ln k], "
                             "delta <= 1/k and epsilon <= 1: " + "; ".join(problems) + ".")
    return 185.0 * math.sqrt(k * p * math.log(1.0 / delta)) / epsilon


def per_row_budget(amount: float, unit: str, rows_per_person: int) -> float:
    """The budget one row may receive so that a person with up to ``rows_per_person`` rows gets ``amount``.

    Group privacy: a mechanism that is epsilon-DP for neighbours differing in one row is (k epsilon)-DP for
    neighbours differing in k rows (Dwork-Roth 2014, Thm. 2.2), so pure epsilon becomes epsilon / k; a
    rho-zCDP mechanism is (k^2 rho)-zCDP for groups of k rows (Bun-Steinke 2016, Prop. 1.9), so rho
    becomes rho / k^2. Running every mechanism at this budget is the same as scaling its sensitivity by k
    (Laplace scale k Delta / epsilon; Gaussian sigma k Delta / sqrt(2 rho)). ``unit`` is "epsilon" or "rho".
    """
    amount = _check_positive(amount, "The budget")
    if unit not in ("epsilon", "rho"):
        raise ValueError(f"unit must be 'epsilon' (pure DP) or 'rho' (zCDP); got {unit!r}.")
    if isinstance(rows_per_person, bool) or int(rows_per_person) != rows_per_person or rows_per_person < 1:
        raise ValueError(f"rows_per_person must be a whole number of at least 1; got {rows_per_person!r}.")
    k = int(rows_per_person)
    return amount / k if unit == "epsilon" else amount / (k * k)


def per_person_budget(amount: float, unit: str, rows_per_person: int) -> float:
    """The inverse of :func:`per_row_budget`: what a per-row ``amount`` costs a person with up to k rows
    (k epsilon; k^2 rho), by the same group-privacy bounds."""
    per_row_budget(amount, unit, rows_per_person)     # the same checks
    k = int(rows_per_person)
    return float(amount) * (k if unit == "epsilon" else k * k)
