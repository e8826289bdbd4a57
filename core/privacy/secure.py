"""The release path: noise from OpenDP's samplers, for numbers that will actually be published.

Same mechanism names and ``scale`` meaning as ``core.privacy.mechanisms``, but no ``rng``:
OpenDP draws from the operating system's cryptographic randomness and, for the integer
mechanisms, samples the discrete Laplace / discrete Gaussian exactly. Use the seeded
samplers in ``mechanisms`` for simulations and this module for releases.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from core.privacy.mechanisms import get_mechanism

# OpenDP measurement per mechanism name: (atom type, metric, measurement constructor name)
_OPENDP_SETUP = {
    "laplace": ("f64", "l1", "then_laplace"),
    "geometric": ("i64", "l1", "then_laplace"),
    "gaussian": ("f64", "l2", "then_gaussian"),
    "discrete_gaussian": ("i64", "l2", "then_gaussian"),
    "analytic_gaussian": ("f64", "l2", "then_gaussian"),
}


def _release_mechanism(mechanism_name: str):
    """The registry mechanism for a release, refused by name when OpenDP has no sampler for it."""
    mechanism = get_mechanism(mechanism_name)
    if mechanism.key not in _OPENDP_SETUP:
        raise ValueError(f"The {mechanism.label} has no secure sampler here; a real release can use "
                         f"{', '.join(sorted(_OPENDP_SETUP))}. Simulate it instead.")
    return mechanism


def supports_release(mechanism_name: str) -> bool:
    """True when a mechanism can be released through OpenDP's samplers."""
    try:
        _release_mechanism(mechanism_name)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=1)
def _opendp():
    """Import OpenDP lazily (it takes about 2 s) and switch on its contributed mechanisms."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@lru_cache(maxsize=64)
def _measurement(mechanism_name: str, scale: float):
    dp = _opendp()
    atom, metric, constructor = _OPENDP_SETUP[mechanism_name]
    if atom == "f64":
        domain = dp.vector_domain(dp.atom_domain(T="f64", nan=False))
        distance = dp.l1_distance(T="f64") if metric == "l1" else dp.l2_distance(T="f64")
    else:
        domain = dp.vector_domain(dp.atom_domain(T="i64"))
        distance = dp.l1_distance(T="i64") if metric == "l1" else dp.l2_distance(T="i64")
    return (domain, distance) >> getattr(dp.m, constructor)(scale=scale)


def secure_release(values, mechanism_name: str, scale: float) -> np.ndarray:
    """Release ``values`` plus noise from OpenDP (not reproducible: OS randomness). RELEASE PATH.

    Discrete mechanisms ("geometric", "discrete_gaussian") take and return integers; the
    continuous ones return floats. The output has the shape of ``values``.
    """
    mechanism = _release_mechanism(mechanism_name)
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"The noise scale must be a positive finite number; got {scale}.")
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"Only numbers can be released; got values of type {arr.dtype}.")
    if mechanism.discrete:
        if arr.size and not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError(f"The {mechanism.label} mechanism releases integer counts; round the "
                             "values first or choose a continuous mechanism.")
        flat = [int(v) for v in arr.astype(np.int64).ravel()]
        dtype = np.int64
    else:
        if arr.size and not np.all(np.isfinite(arr)):
            raise ValueError("The values to release contain NaN or infinity; remove or impute them first.")
        flat = [float(v) for v in arr.astype(float).ravel()]
        dtype = float
    if not flat:
        return np.zeros(arr.shape, dtype=dtype)
    noisy = _measurement(mechanism.key, scale)(flat)
    return np.asarray(noisy, dtype=dtype).reshape(arr.shape)


def secure_noise(mechanism_name: str, scale: float, size) -> np.ndarray:
    """Pure noise draws from OpenDP's sampler (a release of zeros), shaped like numpy's ``size``."""
    n = int(np.prod(size)) if np.ndim(size) else int(size)
    dtype = np.int64 if _release_mechanism(mechanism_name).discrete else float
    return secure_release(np.zeros(n, dtype=dtype), mechanism_name, scale).reshape(size)


def secure_privacy_cost(mechanism_name: str, scale: float, sensitivity: float = 1.0) -> float:
    """OpenDP's own privacy map: epsilon (Laplace, geometric) or rho (Gaussians) at this scale."""
    mechanism = _release_mechanism(mechanism_name)
    d_in = int(sensitivity) if mechanism.discrete and float(sensitivity).is_integer() else float(sensitivity)
    return float(_measurement(mechanism.key, float(scale)).map(d_in))


class SecureMechanism:
    """A named mechanism on the release path, mirroring ``NoiseMechanism`` without an ``rng``.

    ``sample(scale, size)`` draws noise and ``release(values, scale)`` adds it, both through OpenDP.
    """

    def __init__(self, name: str) -> None:
        self.mechanism = _release_mechanism(name)
        self.name = self.mechanism.name
        self.unit = self.mechanism.unit
        self.discrete = self.mechanism.discrete

    def scale_for(self, sensitivity: float, budget: float) -> float:
        """Same calibration as the simulation mechanism (so both paths spend the same budget)."""
        return self.mechanism.scale_for(sensitivity, budget)

    def sample(self, scale: float, size) -> np.ndarray:
        """Noise draws from OpenDP (OS randomness): the release path."""
        return secure_noise(self.name, scale, size)

    def release(self, values, scale: float) -> np.ndarray:
        """``values`` plus OpenDP noise: the release path."""
        return secure_release(values, self.name, scale)

    def privacy_cost(self, scale: float, sensitivity: float = 1.0) -> float:
        """OpenDP's own privacy map at this scale, in ``self.unit``."""
        return secure_privacy_cost(self.name, scale, sensitivity)


def secure_noisy_max(scores, scale: float) -> int:
    """Index of the largest of ``scores`` after Gumbel noise of ``scale`` drawn by OpenDP: the
    exponential mechanism on the release path (epsilon = 2 x score sensitivity / scale). RELEASE PATH."""
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"The noise scale must be a positive finite number; got {scale}.")
    values = [float(v) for v in np.asarray(scores, float).ravel()]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError("Noisy max needs at least one score, all finite.")
    dp = _opendp()
    measurement = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T="f64", nan=False)),
                                      dp.linf_distance(T="f64"), dp.max_divergence(), scale=scale)
    return int(measurement(values))
