"""Unit conversions against hand-computed values and their defining conditions."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from core.privacy import accounting as acc


def test_epsilon_to_rho_and_gaussian_sigma_by_hand():
    assert acc.epsilon_to_rho(1.0) == 0.5
    assert acc.epsilon_to_rho(0.2) == pytest.approx(0.02)
    assert acc.gaussian_sigma(1.0, 0.5) == pytest.approx(1.0)
    assert acc.gaussian_sigma(3.0, 1 / 18) == pytest.approx(9.0)


def test_exponential_mechanism_epsilon_by_hand():
    assert acc.exponential_mechanism_epsilon(0.5) == pytest.approx(2.0)
    assert acc.epsilon_to_rho(acc.exponential_mechanism_epsilon(0.02)) / 4 == pytest.approx(0.02)
    with pytest.raises(ValueError):
        acc.exponential_mechanism_epsilon(0.0)


def test_simple_bound_by_hand():
    # rho + 2 sqrt(rho ln(1/delta)) at rho = 0.5, delta = 1e-5:
    # ln(1e5) = 11.512925465, times 0.5 = 5.756462732, sqrt = 2.399263 -> 0.5 + 4.798526 = 5.298526
    assert acc.rho_to_epsilon_simple(0.5, 1e-5) == pytest.approx(5.298526, abs=1e-6)


def test_tight_conversion_matches_opendp_value_from_packages_note():
    # OpenDP 0.16: make_zCDP_to_approxDP(...).map(1).epsilon(1e-6) at rho = 1/18 gives 1.558
    assert acc.rho_to_epsilon(1 / 18, 1e-6) == pytest.approx(1.5577, abs=1e-3)


def _tight_objective(alpha: np.ndarray, rho: float, delta: float) -> np.ndarray:
    return rho * alpha + (np.log(1 / (alpha * delta)) + (alpha - 1) * np.log(1 - 1 / alpha)) / (alpha - 1)


@pytest.mark.parametrize("rho,delta", [(0.5, 1e-5), (1 / 18, 1e-6), (1e-4, 1e-9), (5.0, 1e-3), (200.0, 1e-12)])
def test_tight_conversion_is_the_infimum_and_beats_the_simple_bound(rho, delta):
    eps = acc.rho_to_epsilon(rho, delta)
    alphas = 1 + np.logspace(-6, 8, 400_001)
    grid_min = float(np.min(_tight_objective(alphas, rho, delta)))
    assert eps <= grid_min + 1e-9  # no alpha on a fine grid does better
    assert eps == pytest.approx(grid_min, rel=1e-6)
    assert eps < acc.rho_to_epsilon_simple(rho, delta)


@pytest.mark.parametrize("rho,epsilon", [(0.5, 4.0), (0.01, 0.8), (2.0, 12.0)])
def test_delta_for_inverts_the_tight_conversion(rho, epsilon):
    delta = acc.delta_for(rho, epsilon)
    assert 0 < delta < 1
    assert acc.rho_to_epsilon(rho, delta) == pytest.approx(epsilon, rel=1e-7)


def _classical_delta(sigma: float, eps: float) -> float:
    """The Balle-Wang condition evaluated directly with scipy's normal CDF (independent check)."""
    return norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * norm.cdf(-1 / (2 * sigma) - eps * sigma)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (0.5, 1e-6), (0.9, 1e-9), (1.0, 1e-5), (3.0, 1e-6)])
def test_analytic_gaussian_sigma_meets_its_condition_with_equality(eps, delta):
    sigma = acc.analytic_gaussian_sigma(eps, delta)
    assert _classical_delta(sigma, eps) == pytest.approx(delta, rel=1e-6)
    assert _classical_delta(sigma * 0.999, eps) > delta  # any smaller sigma breaks (eps, delta)
    if eps < 1:
        assert sigma < acc.classical_gaussian_sigma(eps, delta)


def test_analytic_gaussian_sigma_scales_with_sensitivity_and_handles_large_epsilon():
    base = acc.analytic_gaussian_sigma(0.5, 1e-6)
    assert acc.analytic_gaussian_sigma(0.5, 1e-6, sensitivity=4.0) == pytest.approx(4 * base, rel=1e-9)
    big = acc.analytic_gaussian_sigma(60.0, 1e-6)  # e^60 must not overflow the condition
    assert acc.gaussian_privacy_delta(big, 60.0) == pytest.approx(1e-6, rel=1e-6)


@pytest.mark.parametrize("call", [
    lambda: acc.epsilon_to_rho(0.0),
    lambda: acc.epsilon_to_rho(-1.0),
    lambda: acc.rho_to_epsilon(0.0, 1e-6),
    lambda: acc.rho_to_epsilon(0.5, 0.0),
    lambda: acc.rho_to_epsilon(0.5, 1.0),
    lambda: acc.rho_to_epsilon_simple(0.5, 2.0),
    lambda: acc.delta_for(0.5, -1.0),
    lambda: acc.gaussian_sigma(1.0, 0.0),
    lambda: acc.gaussian_sigma(0.0, 0.5),
    lambda: acc.analytic_gaussian_sigma(0.0, 1e-6),
    lambda: acc.analytic_gaussian_sigma(1.0, 1.5),
    lambda: acc.analytic_gaussian_sigma(float("inf"), 1e-6),
])
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("rho", [1e-3, 0.05, 0.5, 4.0])
def test_delta_for_is_the_infimum_and_decreases_in_epsilon(rho):
    alphas = 1 + np.logspace(-8, 7, 300_001)
    deltas = []
    for eps in [0.5 * rho, rho, 2 * rho, 1.0, 3.0]:
        log_d = (alphas - 1) * (alphas * rho - eps) + alphas * np.log1p(-1 / alphas) - np.log(alphas - 1)
        brute = float(np.exp(log_d.min()))
        got = acc.delta_for(rho, eps)
        assert got == pytest.approx(brute, rel=1e-6, abs=1e-300)
        deltas.append(got)
    order = np.argsort([0.5 * rho, rho, 2 * rho, 1.0, 3.0], kind="stable")
    assert np.all(np.diff(np.array(deltas)[order]) <= 1e-12)


def test_generalized_gaussian_bound_by_hand_and_its_range():
    # k = 10**4, p = 4, eps = 1, delta = 1e-6: 185 sqrt(4e4 * ln(1e6)) = 185 * 200 * 3.716922 = 137526.1
    k = 10 ** 4
    assert acc.generalized_gaussian_sigma_bound(k, 4, 1.0, 1e-6) == pytest.approx(137_526.1, rel=1e-6)
    # k = 1000, p = 4 lies in the range (ln 1000 = 6.9); the topdown spec's table lists 43,490
    assert acc.generalized_gaussian_sigma_bound(1000, 4, 1.0, 1e-6) == pytest.approx(43_490, rel=1e-3)
    with pytest.raises(ValueError, match="even integer"):
        acc.generalized_gaussian_sigma_bound(1000, 3, 1.0, 1e-6)
    with pytest.raises(ValueError, match="ln k"):
        acc.generalized_gaussian_sigma_bound(20, 4, 1.0, 1e-6)
    with pytest.raises(ValueError, match="1/k"):
        acc.generalized_gaussian_sigma_bound(1000, 4, 1.0, 0.01)
    # outside the proven range the formula is still available on request (e.g. to plot it)
    assert acc.generalized_gaussian_sigma_bound(100, 2, 1.0, 1e-6, check_range=False) == pytest.approx(9_725, rel=1e-3)


@pytest.mark.parametrize("epsilon,delta", [(0.1, 1e-9), (1.0, 1e-6), (5.0, 1e-5)])
def test_rho_for_epsilon_inverts_the_tight_conversion(epsilon, delta):
    rho = acc.rho_for_epsilon(epsilon, delta)
    assert acc.rho_to_epsilon(rho, delta) == pytest.approx(epsilon, rel=1e-9)
    # inverting the simple bound rho + 2 sqrt(rho ln(1/delta)) by hand gives a smaller rho
    log_inv = math.log(1 / delta)
    assert rho > (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2


def test_rho_for_epsilon_rejects_bad_input():
    with pytest.raises(ValueError):
        acc.rho_for_epsilon(0.0, 1e-6)
    with pytest.raises(ValueError):
        acc.rho_for_epsilon(1.0, 1.5)


@pytest.mark.parametrize("call", [lambda: acc.rho_for_epsilon(1e308, 1e-6), lambda: acc.delta_for(1e308, 1.0),
                                  lambda: acc.rho_for_epsilon(1e7, 1e-6)])
def test_budgets_beyond_any_meaning_are_refused_not_overflowed(call):
    """An epsilon or rho of 1e308 used to escape as OverflowError from the root search."""
    with pytest.raises(ValueError, match="at most"):
        call()
