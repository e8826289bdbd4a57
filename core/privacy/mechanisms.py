"""Additive noise mechanisms with explicit random generators.

Each mechanism is calibrated in one unit: pure epsilon (Laplace, geometric) or zCDP rho
(Gaussian, discrete Gaussian). ``scale`` always means the parameter the sampler takes:
the Laplace/geometric scale b, or the Gaussian standard-deviation parameter sigma.
The Generalized Gaussian of order p is offered as plain functions: its calibration is an
(epsilon, delta) statement about k queries at once (``accounting.generalized_gaussian_sigma_bound``).
Seeded draws are simulations; ``core.privacy.secure`` holds the release path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

Unit = Literal["epsilon", "rho"]

# Candidates are generated in chunks of this many draws: small enough that the working
# arrays stay in cache, large enough that per-call numpy overhead is negligible.
_CHUNK = 1 << 17


def _count(size) -> int:
    """Number of draws requested by a numpy-style ``size`` (int or shape tuple)."""
    if size is None:
        raise ValueError("size must be a non-negative integer or a shape tuple, not None.")
    n = int(np.prod(size)) if np.ndim(size) else int(size)
    if n < 0:
        raise ValueError(f"size must be non-negative; got {size}.")
    return n


def _check_scale(scale: float, what: str = "scale") -> float:
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"The noise {what} must be a positive finite number; got {scale}.")
    return scale


def _scales(scale, what: str = "scale") -> np.ndarray:
    """Scale(s) as a float array, all positive and finite (moment functions accept arrays)."""
    arr = np.asarray(scale, dtype=float)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"The noise {what} must be positive finite number(s); got {scale}.")
    return arr


def _as_output(values: np.ndarray):
    """A Python float for scalar input, the array otherwise."""
    return float(values) if np.ndim(values) == 0 else values


def sample_laplace(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Continuous Laplace(0, scale) draws."""
    return rng.laplace(0.0, _check_scale(scale), size)


def _floor_exponential(scale: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """floor(scale * E) with E ~ Exp(1): a one-sided geometric, P(m) = (1 - a) a^m, a = e^(-1/scale)."""
    m = rng.standard_exponential(n)
    m *= scale
    np.floor(m, out=m)
    return m


def sample_geometric(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Two-sided geometric (discrete Laplace) draws: P(k) proportional to exp(-|k|/scale).

    The difference of two i.i.d. one-sided geometric variables, each floor(scale * Exp(1)).
    """
    scale = _check_scale(scale)
    n = _count(size)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        a = _floor_exponential(scale, stop - start, rng)
        a -= _floor_exponential(scale, stop - start, rng)
        out[start:stop] = a
    return out.reshape(size)


def sample_gaussian(sigma: float, size, rng: np.random.Generator) -> np.ndarray:
    """Continuous N(0, sigma^2) draws."""
    return rng.normal(0.0, _check_scale(sigma, "sigma"), size)


def _discrete_gaussian_candidates(sigma: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """One round of the discrete-Laplace rejection sampler; returns the accepted draws (float).

    Proposal: discrete Laplace with scale t = floor(sigma) + 1, written as a magnitude
    floor(t E) and a sign (the pair "minus, 0" is rejected, i.e. magnitude 0 gets weight 1/2).
    Acceptance: exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)) (Canonne, Kamath, Steinke 2020, Alg. 3).
    One uniform U serves both tests: accept if U < w; among accepted draws U/w is uniform, so
    U < w/2 decides the sign.
    """
    t = math.floor(sigma) + 1
    magnitude = _floor_exponential(t, n, rng)
    w = magnitude - sigma * sigma / t
    w *= w
    w *= -0.5 / (sigma * sigma)
    np.exp(w, out=w)
    w[magnitude == 0] *= 0.5
    u = rng.random(n)
    accepted = u < w
    w *= 0.5
    np.negative(magnitude, out=magnitude, where=u >= w)
    return magnitude[accepted]


def sample_discrete_gaussian(sigma: float, size, rng: np.random.Generator) -> np.ndarray:
    """Discrete Gaussian draws, P(k) proportional to exp(-k^2 / (2 sigma^2)).

    Vectorised rejection sampler after Canonne, Kamath, Steinke 2020 (Alg. 3), in chunks. Exact in
    law up to the double-precision rounding of the acceptance probabilities (a simulation sampler;
    ``core.privacy.secure`` uses OpenDP's bit-exact one).
    """
    sigma = _check_scale(sigma, "sigma")
    n = _count(size)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    # Acceptance runs from about 0.3 (sigma << 1) to about 0.76 (large sigma); start from a
    # guess and learn the rate, so that one round per chunk usually suffices.
    rate = 0.3 if sigma < 1 else (0.55 if sigma < 5 else 0.7)
    proposed = accepted = 0
    while filled < n:
        need = min(_CHUNK, n - filled)
        batch = int(need / rate * 1.03) + 64
        y = _discrete_gaussian_candidates(sigma, batch, rng)
        proposed += batch
        accepted += y.size
        rate = max(accepted / proposed, 0.05)
        take = min(y.size, n - filled)
        out[filled:filled + take] = y[:take]
        filled += take
    return out.reshape(size)


# Above this sigma the discrete Gaussian's moments are computed from their asymptotic
# expansions (Poisson summation makes the normaliser exact to double precision there).
_DISCRETE_GAUSSIAN_ASYMPTOTIC = 1.0e4


def _discrete_gaussian_support(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(0, int(20 * sigma) + 21, dtype=float)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    w[1:] *= 2.0  # fold the negative half onto the positive one
    return k, w


def _discrete_gaussian_moment(sigma: float, power: int) -> float:
    k, w = _discrete_gaussian_support(sigma)
    return float(np.sum(k ** power * w) / np.sum(w))


def discrete_gaussian_variance(sigma):
    """Exact variance of the discrete Gaussian (sum over its mass function; never above sigma^2).

    For sigma > 1e4 it equals sigma^2 to double precision (Canonne et al. 2020, Cor. 9 / Poisson summation).
    Accepts a scalar or an array of sigmas.
    """
    sig = _scales(sigma, "sigma")
    out = np.array([s * s if s > _DISCRETE_GAUSSIAN_ASYMPTOTIC else _discrete_gaussian_moment(s, 2)
                    for s in sig.ravel()]).reshape(sig.shape)
    return _as_output(out)


def discrete_gaussian_mean_abs(sigma):
    """Exact E|K| of the discrete Gaussian (sum over its mass function); scalar or array of sigmas.

    For sigma > 1e4: Euler-Maclaurin, 2 (sigma^2 - 1/12 - 1/(240 sigma^2)) / (sigma sqrt(2 pi)).
    """
    sig = _scales(sigma, "sigma")
    asymptotic = lambda s: 2.0 * (s * s - 1.0 / 12.0 - 1.0 / (240.0 * s * s)) / (  # noqa: E731
        s * math.sqrt(2.0 * math.pi))
    out = np.array([asymptotic(s) if s > _DISCRETE_GAUSSIAN_ASYMPTOTIC else _discrete_gaussian_moment(s, 1)
                    for s in sig.ravel()]).reshape(sig.shape)
    return _as_output(out)


def geometric_variance(scale):
    """Variance of the two-sided geometric: 2 a / (1 - a)^2 with a = exp(-1/scale); scalar or array."""
    b = _scales(scale)
    a = np.exp(-1.0 / b)
    return _as_output(2.0 * a / (-np.expm1(-1.0 / b)) ** 2)


def geometric_mean_abs(scale):
    """E|K| of the two-sided geometric: 2 a / ((1 - a)(1 + a)) with a = exp(-1/scale); scalar or array."""
    b = _scales(scale)
    a = np.exp(-1.0 / b)
    return _as_output(2.0 * a / ((-np.expm1(-1.0 / b)) * (1.0 + a)))


def laplace_variance(scale):
    """Variance of Laplace(0, b): 2 b^2; scalar or array."""
    b = _scales(scale)
    return _as_output(2.0 * b * b)


def laplace_mean_abs(scale):
    """E|X| of Laplace(0, b): b; scalar or array."""
    return _as_output(_scales(scale) * 1.0)


def gaussian_variance(sigma):
    """Variance of N(0, sigma^2): sigma^2; scalar or array."""
    sig = _scales(sigma, "sigma")
    return _as_output(sig * sig)


def gaussian_mean_abs(sigma):
    """E|X| of N(0, sigma^2): sigma sqrt(2/pi); scalar or array."""
    return _as_output(_scales(sigma, "sigma") * math.sqrt(2.0 / math.pi))


def _check_order(p: float) -> float:
    p = float(p)
    if not math.isfinite(p) or p <= 0:
        raise ValueError(f"The Generalized Gaussian order p must be a positive number; got {p}.")
    return p


def sample_generalized_gaussian(sigma: float, p: float, size, rng: np.random.Generator) -> np.ndarray:
    """Generalized Gaussian draws, density proportional to exp(-(|x|/sigma)^p) (Ganesh-Zhao 2021, §2).

    Exact: |X| = sigma G^(1/p) with G ~ Gamma(1/p, 1) and a fair sign. Drawn as
    sigma V H^(1/p) with V ~ Uniform(-1, 1) and H ~ Gamma(1 + 1/p), which has the same law
    (Gamma(a) = Gamma(a + 1) U^(1/a)) and does not underflow when p is large.
    p = 1 is Laplace(sigma); p = 2 is Gaussian with standard deviation sigma / sqrt(2).
    """
    sigma = _check_scale(sigma, "sigma")
    p = _check_order(p)
    n = _count(size)
    x = rng.standard_gamma(1.0 + 1.0 / p, n)
    np.power(x, 1.0 / p, out=x)
    v = rng.random(n)
    v *= 2.0
    v -= 1.0
    x *= v
    x *= sigma
    return x.reshape(size)


def generalized_gaussian_variance(sigma, p: float):
    """Variance of the Generalized Gaussian: sigma^2 Gamma(3/p) / Gamma(1/p); sigma scalar or array."""
    sig = _scales(sigma, "sigma")
    p = _check_order(p)
    return _as_output(sig * sig * math.exp(math.lgamma(3.0 / p) - math.lgamma(1.0 / p)))


def generalized_gaussian_mean_abs(sigma, p: float):
    """E|X| of the Generalized Gaussian: sigma Gamma(2/p) / Gamma(1/p); sigma scalar or array."""
    sig = _scales(sigma, "sigma")
    p = _check_order(p)
    return _as_output(sig * math.exp(math.lgamma(2.0 / p) - math.lgamma(1.0 / p)))


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

    def scale_for(self, sensitivity, budget):
        """Noise parameter for a query of the given sensitivity and budget in ``self.unit``.

        Pure DP: b = Delta_1 / epsilon. zCDP: sigma = Delta_2 / sqrt(2 rho) (Bun-Steinke 2016, Prop. 1.6).
        Scalars give a float; arrays (e.g. a sweep of budgets) give an array.
        """
        bud = np.asarray(budget, dtype=float)
        sens = np.asarray(sensitivity, dtype=float)
        if bud.size == 0 or not np.all(np.isfinite(bud)) or not np.all(bud > 0):
            raise ValueError(f"The privacy budget must be positive; got {budget}.")
        if sens.size == 0 or not np.all(np.isfinite(sens)) or not np.all(sens > 0):
            raise ValueError(f"The sensitivity must be positive; got {sensitivity}.")
        if self.unit == "epsilon":
            return _as_output(sens / bud)
        return _as_output(sens / np.sqrt(2.0 * bud))

    def sample(self, scale: float, size, rng: np.random.Generator) -> np.ndarray:
        """Draws of this noise at the given scale (a simulation: the generator is seeded by the caller)."""
        return self.sampler(scale, size, rng)

    def variance(self, scale):
        """Variance of one draw at the given scale (scalar or array of scales)."""
        return self.variance_of_scale(scale)

    def mean_abs(self, scale):
        """Expected absolute value of one draw at the given scale (scalar or array of scales)."""
        return self.mean_abs_of_scale(scale)


MECHANISMS: dict[str, NoiseMechanism] = {
    "laplace": NoiseMechanism(
        "laplace", "Laplace", "epsilon", False, sample_laplace,
        laplace_variance, laplace_mean_abs),
    "geometric": NoiseMechanism(
        "geometric", "Two-sided geometric", "epsilon", True, sample_geometric,
        geometric_variance, geometric_mean_abs),
    "gaussian": NoiseMechanism(
        "gaussian", "Gaussian (zCDP)", "rho", False, sample_gaussian,
        gaussian_variance, gaussian_mean_abs),
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
