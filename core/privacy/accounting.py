"""Conversions between privacy units. Every conversion in the project lives here."""
from __future__ import annotations

import math


def epsilon_to_rho(epsilon: float) -> float:
    """rho of zCDP implied by pure epsilon-DP: rho = epsilon^2 / 2 (Bun-Steinke 2016, Prop. 1.4)."""
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive; got {epsilon}.")
    return epsilon * epsilon / 2.0


def rho_to_epsilon_simple(rho: float, delta: float) -> float:
    """The simple bound epsilon = rho + 2 sqrt(rho ln(1/delta)) (Bun-Steinke 2016, Prop. 1.3)."""
    _check_rho_delta(rho, delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Gaussian noise sigma for rho-zCDP: sigma = Delta_2 / sqrt(2 rho)."""
    if rho <= 0:
        raise ValueError(f"rho must be positive; got {rho}.")
    return sensitivity / math.sqrt(2.0 * rho)


def _check_rho_delta(rho: float, delta: float) -> None:
    if rho <= 0:
        raise ValueError(f"rho must be positive; got {rho}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie strictly between 0 and 1; got {delta}.")
