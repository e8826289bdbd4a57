"""Additive noise mechanisms with explicit random generators.

Each mechanism is calibrated in one unit: pure epsilon (Laplace, geometric) or zCDP rho
(Gaussian, discrete Gaussian). ``scale`` always means the parameter the sampler takes:
the Laplace/geometric scale b, or the Gaussian standard-deviation parameter sigma.
Seeded draws are simulations; ``core.privacy.secure`` holds the release path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

Unit = Literal["epsilon", "rho"]


def sample_laplace(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Continuous Laplace(0, scale) draws."""
    return rng.laplace(0.0, scale, size)


def sample_geometric(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Two-sided geometric (discrete Laplace) draws: P(k) proportional to exp(-|k|/scale).

    Drawn as the difference of two i.i.d. geometric variables with success 1 - exp(-1/scale).
    """
    p = -math.expm1(-1.0 / scale)
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)


def sample_gaussian(sigma: float, size, rng: np.random.Generator) -> np.ndarray:
    """Continuous N(0, sigma^2) draws."""
    return rng.normal(0.0, sigma, size)


def sample_discrete_gaussian(sigma: float, size, rng: np.random.Generator) -> np.ndarray:
    """Exact discrete Gaussian draws, P(k) proportional to exp(-k^2 / (2 sigma^2)).

    Rejection from a discrete Laplace with scale t = floor(sigma) + 1, accepting with
    probability exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)) (Canonne, Kamath, Steinke 2020, Alg. 3),
    vectorised over batches.
    """
    n = int(np.prod(size)) if np.ndim(size) else int(size)
    t = math.floor(sigma) + 1
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        batch = max(1024, int((n - filled) * 1.6))
        y = sample_geometric(t, batch, rng)
        accept_p = np.exp(-((np.abs(y) - sigma * sigma / t) ** 2) / (2.0 * sigma * sigma))
        y = y[rng.random(batch) < accept_p]
        take = min(len(y), n - filled)
        out[filled:filled + take] = y[:take]
        filled += take
    return out.reshape(size)


def discrete_gaussian_variance(sigma: float) -> float:
    """Exact variance of the discrete Gaussian by summing its mass function (never above sigma^2)."""
    k = np.arange(-int(12 * sigma + 12), int(12 * sigma + 13), dtype=float)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    return float(np.sum(k * k * w) / np.sum(w))


def discrete_gaussian_mean_abs(sigma: float) -> float:
    """Exact expected absolute value of the discrete Gaussian."""
    k = np.arange(-int(12 * sigma + 12), int(12 * sigma + 13), dtype=float)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    return float(np.sum(np.abs(k) * w) / np.sum(w))


def geometric_variance(scale: float) -> float:
    """Variance of the two-sided geometric: 2 a / (1 - a)^2 with a = exp(-1/scale)."""
    a = math.exp(-1.0 / scale)
    return 2.0 * a / (1.0 - a) ** 2


def geometric_mean_abs(scale: float) -> float:
    """E|K| of the two-sided geometric: 2 a / ((1 - a)(1 + a)) with a = exp(-1/scale)."""
    a = math.exp(-1.0 / scale)
    return 2.0 * a / ((1.0 - a) * (1.0 + a))


@dataclass(frozen=True)
class NoiseMechanism:
    """A noise distribution with its calibration rule and closed-form error moments."""

    name: str
    label: str
    unit: Unit
    discrete: bool
    sampler: Callable[[float, object, np.random.Generator], np.ndarray]
    variance_of_scale: Callable[[float], float]
    mean_abs_of_scale: Callable[[float], float]

    def scale_for(self, sensitivity: float, budget: float) -> float:
        """Noise parameter for a query of the given sensitivity and budget in ``self.unit``.

        Pure DP: b = Delta_1 / epsilon. zCDP: sigma = Delta_2 / sqrt(2 rho) (Bun-Steinke 2016, Prop. 1.6).
        """
        if budget <= 0:
            raise ValueError(f"The privacy budget must be positive; got {budget}.")
        if sensitivity <= 0:
            raise ValueError(f"The sensitivity must be positive; got {sensitivity}.")
        if self.unit == "epsilon":
            return sensitivity / budget
        return sensitivity / math.sqrt(2.0 * budget)

    def sample(self, scale: float, size, rng: np.random.Generator) -> np.ndarray:
        return self.sampler(scale, size, rng)

    def variance(self, scale: float) -> float:
        return self.variance_of_scale(scale)

    def mean_abs(self, scale: float) -> float:
        return self.mean_abs_of_scale(scale)


MECHANISMS: dict[str, NoiseMechanism] = {
    "laplace": NoiseMechanism(
        "laplace", "Laplace", "epsilon", False, sample_laplace,
        lambda b: 2.0 * b * b, lambda b: b),
    "geometric": NoiseMechanism(
        "geometric", "Two-sided geometric", "epsilon", True, sample_geometric,
        geometric_variance, geometric_mean_abs),
    "gaussian": NoiseMechanism(
        "gaussian", "Gaussian (zCDP)", "rho", False, sample_gaussian,
        lambda s: s * s, lambda s: s * math.sqrt(2.0 / math.pi)),
    "discrete_gaussian": NoiseMechanism(
        "discrete_gaussian", "Discrete Gaussian (zCDP)", "rho", True, sample_discrete_gaussian,
        discrete_gaussian_variance, discrete_gaussian_mean_abs),
}


def get_mechanism(name: str) -> NoiseMechanism:
    """Look up a mechanism by name, with a message listing the known names."""
    try:
        return MECHANISMS[name]
    except KeyError:
        raise ValueError(f"Unknown mechanism {name!r}; choose one of {sorted(MECHANISMS)}.") from None
