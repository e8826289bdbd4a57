"""Additive noise mechanisms with explicit random generators.

Each mechanism is calibrated in one unit: pure epsilon (Laplace, geometric) or zCDP rho
(Gaussian, discrete Gaussian). ``scale`` always means the parameter the sampler takes:
the Laplace/geometric scale b, or the Gaussian standard-deviation parameter sigma.
Two mechanisms are calibrated in (epsilon, delta): the analytic Gaussian (Balle and Wang 2018) and
the Generalized Gaussian of order p (Ganesh and Zhao 2021, scale found numerically in
``core.privacy.calibration``); their budget is an epsilon with a delta fixed by their Params.

``MECHANISMS`` is the one registry: key -> MechanismSpec(label, factory, Params, its line in the
mechanism comparison). ``get_mechanism(id)`` builds a :class:`NoiseMechanism`, which knows its
calibration (``scale_for``), sampler, moments, how it is spent (``guarantee``), the norm of its
sensitivity and whether OpenDP can draw it for a real release (``opendp``, read by
``core.privacy.secure``). An id is a registry key, or a key with its parameters, e.g.
``generalized_gaussian[p=3,delta=2e-07]`` (see :func:`mechanism_id`), so a mechanism with
non-default parameters travels between pages as one string.
Seeded draws are simulations; ``core.privacy.secure`` holds the release path.
"""
from __future__ import annotations

import math
import functools
from dataclasses import dataclass, field, fields
from typing import Callable, Literal

import numpy as np

from core.contracts import Registry, Spec, check_params, param

Unit = Literal["epsilon", "rho"]
UNITS = ("epsilon", "rho")

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


def sample_exponential_mechanism(scores, epsilon: float, rng: np.random.Generator,
                                 sensitivity: float = 1.0) -> int:
    """Index i drawn with probability proportional to exp(epsilon q_i / (2 sensitivity)) (McSherry &
    Talwar 2007): epsilon-DP, and epsilon^2/8-zCDP (Cesar & Rogers 2021); -inf scores are never drawn."""
    q = np.asarray(scores, float)
    open_ = np.isfinite(q)
    if not open_.any():
        raise ValueError("The exponential mechanism needs at least one finite score.")
    eps = _check_scale(epsilon, "epsilon") / _check_scale(sensitivity, "sensitivity")
    p = np.exp(eps / 2.0 * (np.where(open_, q, -np.inf) - q[open_].max()))
    p /= p.sum()
    return int(rng.choice(q.size, p=p))


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


# --------------------------------------------------------------------------------------------------
# Distribution of |X| (for maximum-error statistics): (survival function at t >= 0, quantile function)
# --------------------------------------------------------------------------------------------------


def abs_laplace(b: float):
    """|X| of Laplace(0, b) is Exponential(b)."""
    return (lambda t: np.exp(-t / b)), (lambda q: -b * np.log1p(-q))


def abs_gaussian(sigma: float):
    """|X| of N(0, sigma^2) is half-normal."""
    from scipy import special
    return (lambda t: special.erfc(t / (sigma * math.sqrt(2.0)))), \
           (lambda q: sigma * special.ndtri((1.0 + q) / 2.0))


def abs_generalized_gaussian(sigma: float, p: float):
    """(|X|/sigma)^p of the Generalized Gaussian is Gamma(1/p, 1) (regularised incomplete gamma)."""
    from scipy import special
    a = 1.0 / p
    return (lambda t: special.gammaincc(a, (t / sigma) ** p)), \
           (lambda q: sigma * special.gammaincinv(a, q) ** a)


def abs_geometric(b: float):
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


def abs_discrete_gaussian(sigma: float):
    """|K| of the discrete Gaussian from its mass function (support to 40 sigma + 10)."""
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


# --------------------------------------------------------------------------------------------------
# Mechanisms: calibration, sampler, moments and spend in one object
# --------------------------------------------------------------------------------------------------

def _positive_array(value, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"{what} must be positive finite number(s); got {value}.")
    return arr


@dataclass(frozen=True)
class NoiseMechanism:
    """A noise distribution with its calibration rule, sampler, closed-form moments and spend.

    ``unit`` is what its budget is counted in: "epsilon" or "rho". ``delta`` is None for pure
    epsilon-DP and zCDP mechanisms; for (epsilon, delta) mechanisms it is the delta of each
    noisy measurement, fixed by the mechanism's Params.
    """

    name: str
    label: str
    unit: Unit
    discrete: bool
    sampler: Callable[[float, object, np.random.Generator], np.ndarray]
    variance_of_scale: Callable[[float], float]
    mean_abs_of_scale: Callable[[float], float]
    abs_of_scale: Callable[[float], tuple] | None = field(default=None, repr=False)
    calibration: Callable[[float, float], float] | None = field(default=None, repr=False)
    estimate: Callable[[float, float], float] | None = field(default=None, repr=False)
    prepare_estimate: Callable[[float, object], None] | None = field(default=None, repr=False)
    delta: float | None = None
    key: str = ""
    params: object = None
    norm: str = "l1"
    opendp: tuple[str, str, str] | None = None
    fragmentation_line: bool = False
    """True when Cohen et al. (2021, §6)'s closed-form variance of a district's error under the equal split,
    2 s^2 d^2 / epsilon^2 (w1^2 + Frag), holds for this noise (it takes Laplace's variance 2 b^2, b = s / epsilon)."""

    @property
    def id(self) -> str:
        """The one string naming this mechanism and its parameters (see :func:`mechanism_id`)."""
        return self.name

    @property
    def supports_release(self) -> bool:
        """True when ``core.privacy.secure`` can draw this noise from OpenDP's samplers (a real release)."""
        return self.opendp is not None

    def sensitivity_of_counts(self, k: int):
        """The sensitivity argument of ``scale_for`` for k counts that one person changes by at most 1
        each: k in the l1 norm (Laplace, geometric), sqrt(k) in the l2 norm (Gaussians), or k itself for
        mechanisms calibrated on the number of such counts (the Generalized Gaussian)."""
        return math.sqrt(k) if self.norm == "l2" else k

    @property
    def approximate(self) -> bool:
        """True for (epsilon, delta) mechanisms (their spends carry a delta)."""
        return self.delta is not None

    def scale_for(self, sensitivity, budget):
        """Noise parameter for a query of the given sensitivity and budget in ``self.unit``.

        Pure DP: b = Delta_1 / epsilon. zCDP: sigma = Delta_2 / sqrt(2 rho) (Bun-Steinke 2016, Prop. 1.6).
        (epsilon, delta) mechanisms use their own calibration per budget. Scalars give a float;
        arrays (e.g. a sweep of budgets) give an array.
        """
        bud = _positive_array(budget, "The privacy budget")
        sens = _positive_array(sensitivity, "The sensitivity")
        if self.calibration is not None:
            sens_b, bud_b = np.broadcast_arrays(sens, bud)
            out = np.array([self.calibration(float(s), float(b)) for s, b in zip(sens_b.ravel(), bud_b.ravel())])
            return _as_output(out.reshape(bud_b.shape))
        if self.unit == "epsilon":
            return _as_output(sens / bud)
        from core.privacy.accounting import gaussian_sigma
        return _as_output(np.vectorize(gaussian_sigma, otypes=[float])(sens, bud))

    def scale_estimate(self, sensitivity, budget):
        """``scale_for``, or for mechanisms calibrated numerically a close interpolation of it: for
        what-if curves over many budgets. Noise that is drawn uses ``scale_for``."""
        if self.estimate is None:
            return self.scale_for(sensitivity, budget)
        bud = _positive_array(budget, "The privacy budget")
        sens = _positive_array(sensitivity, "The sensitivity")
        sens_b, bud_b = np.broadcast_arrays(sens, bud)
        out = np.array([self.estimate(float(s), float(b)) for s, b in zip(sens_b.ravel(), bud_b.ravel())])
        return _as_output(out.reshape(bud_b.shape))

    def prepare(self, sensitivity: float, progress=None) -> None:
        """Compute (once, reporting progress) what ``scale_estimate`` reads for this sensitivity."""
        if self.prepare_estimate is not None:
            self.prepare_estimate(float(sensitivity), progress)

    def sample(self, scale: float, size, rng: np.random.Generator) -> np.ndarray:
        """Draws of this noise at the given scale (a simulation: the generator is seeded by the caller)."""
        return self.sampler(scale, size, rng)

    def draw(self, sensitivity: float, budget: float, size, rng: np.random.Generator) -> np.ndarray:
        """Noise for a query of this sensitivity at this budget: calibrate, then sample (simulation)."""
        return self.sample(float(self.scale_for(sensitivity, budget)), size, rng)

    def variance(self, scale):
        """Variance of one draw at the given scale (scalar or array of scales)."""
        return self.variance_of_scale(scale)

    def mean_abs(self, scale):
        """Expected absolute value of one draw at the given scale (scalar or array of scales)."""
        return self.mean_abs_of_scale(scale)

    def abs_distribution(self, scale: float) -> tuple[Callable, Callable]:
        """(survival function, quantile function) of |X| at this scale, for largest-error statistics."""
        if self.abs_of_scale is None:
            raise ValueError(f"The {self.label} has no |X| distribution.")
        return self.abs_of_scale(float(_check_scale(scale)))

    def guarantee(self, budget: float) -> str:
        """What one measurement at this budget satisfies, in words."""
        if self.unit == "rho":
            return f"{budget:.4g}-zCDP (rho)"
        if self.approximate:
            return f"({budget:.4g}, {self.delta:.3g})-DP"
        return f"{budget:.4g}-DP (pure)"


# ---------------------------------------------------------------------------------------- Params
@dataclass(frozen=True)
class NoParams:
    """A mechanism with nothing to set beyond its budget."""


@dataclass(frozen=True)
class AnalyticGaussianParams:
    """The analytic Gaussian's delta (per noisy measurement)."""

    delta: float = param(1e-6, label="delta", low=1e-15, high=0.1,
                         help="Probability with which the epsilon guarantee may fail, per measurement.")

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class GeneralizedGaussianParams:
    """The Generalized Gaussian's order p and delta (per noisy measurement)."""

    order: float = param(3.0, label="order p", low=1.0, high=16.0, step=1.0,
                         help="1 is Laplace-shaped, 2 Gaussian; higher orders have lighter tails.")
    delta: float = param(1e-6, label="delta", low=1e-15, high=0.1,
                         help="Probability with which the epsilon guarantee may fail, per measurement.")

    def __post_init__(self) -> None:
        check_params(self)


def _whole_queries(sensitivity: float) -> int:
    k = int(round(sensitivity))
    if k < 1 or abs(k - sensitivity) > 1e-9:
        raise ValueError("The Generalized Gaussian is calibrated for a whole number of counts that one person "
                         f"changes by at most 1 each; give the sensitivity as that number (got {sensitivity:g}).")
    return k


def _laplace(_: NoParams) -> NoiseMechanism:
    return NoiseMechanism("laplace", "Laplace", "epsilon", False, sample_laplace, laplace_variance,
                          laplace_mean_abs, abs_laplace, key="laplace", params=NoParams(),
                          opendp=("f64", "l1", "then_laplace"), fragmentation_line=True)


def _geometric(_: NoParams) -> NoiseMechanism:
    return NoiseMechanism("geometric", "Two-sided geometric", "epsilon", True, sample_geometric,
                          geometric_variance, geometric_mean_abs, abs_geometric, key="geometric", params=NoParams(),
                          opendp=("i64", "l1", "then_laplace"))


def _gaussian(_: NoParams) -> NoiseMechanism:
    return NoiseMechanism("gaussian", "Gaussian (zCDP)", "rho", False, sample_gaussian, gaussian_variance,
                          gaussian_mean_abs, abs_gaussian, key="gaussian", params=NoParams(), norm="l2",
                          opendp=("f64", "l2", "then_gaussian"))


def _discrete_gaussian(_: NoParams) -> NoiseMechanism:
    return NoiseMechanism("discrete_gaussian", "Discrete Gaussian (zCDP)", "rho", True, sample_discrete_gaussian,
                          discrete_gaussian_variance, discrete_gaussian_mean_abs, abs_discrete_gaussian,
                          key="discrete_gaussian", params=NoParams(), norm="l2",
                          opendp=("i64", "l2", "then_gaussian"))


def _analytic_gaussian(params: AnalyticGaussianParams) -> NoiseMechanism:
    from core.privacy.accounting import analytic_gaussian_sigma

    delta = float(params.delta)
    return NoiseMechanism(
        mechanism_id("analytic_gaussian", params), f"Analytic Gaussian (delta {delta:.0e})", "epsilon", False,
        sample_gaussian, gaussian_variance, gaussian_mean_abs, abs_gaussian,
        calibration=lambda sens, eps: analytic_gaussian_sigma(eps, delta, sens),
        delta=delta, key="analytic_gaussian", params=params, norm="l2", opendp=("f64", "l2", "then_gaussian"))


def _generalized_gaussian(params: GeneralizedGaussianParams) -> NoiseMechanism:
    from core.privacy.calibration import calibrate_generalized_gaussian, gg_scale_curve, gg_scale_estimate

    p, delta = float(params.order), float(params.delta)
    return NoiseMechanism(
        mechanism_id("generalized_gaussian", params), f"Generalized Gaussian p={p:g} (delta {delta:.0e})",
        "epsilon", False,
        lambda scale, size, rng: sample_generalized_gaussian(scale, p, size, rng),
        lambda scale: generalized_gaussian_variance(scale, p),
        lambda scale: generalized_gaussian_mean_abs(scale, p),
        lambda scale: abs_generalized_gaussian(scale, p),
        calibration=lambda sens, eps: calibrate_generalized_gaussian(_whole_queries(sens), p, eps, delta),
        estimate=lambda sens, eps: gg_scale_estimate(_whole_queries(sens), p, eps, delta),
        prepare_estimate=lambda sens, progress: gg_scale_curve(_whole_queries(sens), p, delta, progress),
        delta=delta, key="generalized_gaussian", params=params, norm="queries")


@dataclass(frozen=True)
class MechanismSpec(Spec):
    """A noise mechanism's Spec, with how it appears in the mechanism comparison (Budget page): the line's
    key (``comparison_key``, the registry key unless it is given), its label and how its scale is
    calibrated there for (epsilon, delta)."""

    comparison_key: str = ""
    comparison_label: str = ""
    calibration_note: str = ""

    @property
    def line(self) -> str:
        """The key of this mechanism's line in the comparison."""
        return self.comparison_key or self.key


MECHANISMS = Registry("noise mechanism", [
    MechanismSpec("laplace", "Laplace", _laplace, NoParams, "Pure epsilon-DP; scale = l1 sensitivity / epsilon.",
                  comparison_label="Laplace (pure epsilon)", calibration_note="pure epsilon"),
    MechanismSpec("geometric", "Two-sided geometric", _geometric, NoParams,
                  "Pure epsilon-DP integer noise (discrete Laplace); scale = l1 sensitivity / epsilon.",
                  comparison_label="Geometric (pure epsilon)", calibration_note="pure epsilon"),
    MechanismSpec("gaussian", "Gaussian (zCDP)", _gaussian, NoParams,
                  "rho-zCDP; sigma = l2 sensitivity / sqrt(2 rho) (Bun and Steinke 2016).",
                  comparison_key="gaussian_zcdp", comparison_label="Gaussian via zCDP (CKS conversion)",
                  calibration_note="zCDP, CKS conversion"),
    MechanismSpec("discrete_gaussian", "Discrete Gaussian (zCDP)", _discrete_gaussian, NoParams,
                  "rho-zCDP integer noise (Canonne, Kamath and Steinke 2020); same sigma as the Gaussian.",
                  comparison_label="Discrete Gaussian via zCDP", calibration_note="zCDP, CKS conversion"),
    MechanismSpec("analytic_gaussian", "Analytic Gaussian", _analytic_gaussian, AnalyticGaussianParams,
                  "(epsilon, delta)-DP with the smallest Gaussian sigma that meets it (Balle and Wang 2018).",
                  comparison_label="Gaussian (analytic, tight)", calibration_note="analytic (Balle-Wang), tight"),
    MechanismSpec("generalized_gaussian", "Generalized Gaussian", _generalized_gaussian, GeneralizedGaussianParams,
                  "(epsilon, delta)-DP noise with density exp(-(|x|/sigma)^p) (Ganesh and Zhao 2021); sigma found "
                  "numerically for the counts one person changes.",
                  comparison_label="Generalized Gaussian (numeric, tight)", calibration_note="numeric (PLD), tight"),
])


def mechanism_id(key: str, params=None) -> str:
    """One string naming a mechanism and its parameters: the key when they are the defaults (or there
    are none), else ``key[name=value,...]`` with every field."""
    spec = MECHANISMS[key]
    params = spec.params() if params is None else params
    if params == spec.params():
        return key
    return key + "[" + ",".join(f"{f.name}={getattr(params, f.name)!r}" for f in fields(params)) + "]"


def parse_mechanism_id(text: str):
    """(key, Params) of a mechanism id; ValueError naming the problem for anything else."""
    text = str(text).strip()
    key, bracket, rest = text.partition("[")
    spec = MECHANISMS[key]
    if not bracket:
        return key, spec.params()
    if not rest.endswith("]"):
        raise ValueError(f"Mechanism {text!r} is not written as key[name=value,...].")
    names = {f.name: f.type for f in fields(spec.params)}
    values = {}
    for item in filter(None, rest[:-1].split(",")):
        name, _, raw = item.partition("=")
        if name not in names:
            raise ValueError(f"{spec.label} has no parameter {name!r}; it takes {sorted(names)}.")
        try:
            values[name] = float(raw)
        except ValueError:
            raise ValueError(f"Parameter {name} of {spec.label} must be a number; got {raw!r}.") from None
    return key, spec.params(**values)


@functools.lru_cache(maxsize=256)
def _built(key: str, params) -> NoiseMechanism:
    return MECHANISMS[key].build(params)


def get_mechanism(name, params=None) -> NoiseMechanism:
    """The mechanism for a registry key (with ``params``, or its defaults) or a full mechanism id; a
    :class:`NoiseMechanism` is returned as it is (code that holds the object passes it on, unparsed)."""
    if isinstance(name, NoiseMechanism):
        if params is not None and params != name.params:
            raise ValueError(f"The {name.label} was built with other parameters than {params!r}.")
        return name
    if params is None:
        key, params = parse_mechanism_id(name)
    else:
        key = str(name)
    return _built(key, params)


def mechanism_keys(unit: str | None = None) -> list[str]:
    """Registry keys, optionally only those whose budget is counted in ``unit``."""
    return [k for k in MECHANISMS if unit is None or _built(k, MECHANISMS[k].params()).unit == unit]
