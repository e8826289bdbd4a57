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

from core.privacy.mechanisms import MECHANISMS, NoiseMechanism, get_mechanism

def _release_mechanism(mechanism) -> NoiseMechanism:
    """The registry mechanism (an id or the object) for a release, refused by name when it carries no
    OpenDP sampler (its ``opendp`` setup, set by its factory in ``core.privacy.mechanisms``)."""
    mechanism = get_mechanism(mechanism)
    if not mechanism.supports_release:
        able = [MECHANISMS[k].label for k in MECHANISMS if get_mechanism(k).supports_release]
        raise ValueError(f"The {mechanism.label} has no secure sampler here; a real release can use "
                         f"{', '.join(able)}. Simulate it instead.")
    return mechanism


def supports_release(mechanism) -> bool:
    """True when a mechanism (an id or the object) can be released through OpenDP's samplers."""
    return get_mechanism(mechanism).supports_release


@lru_cache(maxsize=1)
def _opendp():
    """Import OpenDP lazily (it takes about 2 s) and switch on its contributed mechanisms."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@lru_cache(maxsize=64)
def _measurement(mechanism: NoiseMechanism, scale: float):
    """OpenDP's measurement for a mechanism object at this scale, from the (atom type, metric, constructor
    name) its factory gave it (cached per object and scale; nothing is parsed back from a name)."""
    dp = _opendp()
    atom, metric, constructor = _release_mechanism(mechanism).opendp
    if atom == "f64":
        domain = dp.vector_domain(dp.atom_domain(T="f64", nan=False))
        distance = dp.l1_distance(T="f64") if metric == "l1" else dp.l2_distance(T="f64")
    else:
        domain = dp.vector_domain(dp.atom_domain(T="i64"))
        distance = dp.l1_distance(T="i64") if metric == "l1" else dp.l2_distance(T="i64")
    return (domain, distance) >> getattr(dp.m, constructor)(scale=scale)


def secure_release(values, mechanism, scale: float) -> np.ndarray:
    """Release ``values`` plus noise from OpenDP (not reproducible: OS randomness). RELEASE PATH.

    Discrete mechanisms ("geometric", "discrete_gaussian") take and return integers; the
    continuous ones return floats. The output has the shape of ``values``.
    """
    mechanism = _release_mechanism(mechanism)
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
    noisy = _measurement(mechanism, scale)(flat)
    return np.asarray(noisy, dtype=dtype).reshape(arr.shape)


def secure_noise(mechanism, scale: float, size) -> np.ndarray:
    """Pure noise draws from OpenDP's sampler (a release of zeros), shaped like numpy's ``size``."""
    n = int(np.prod(size)) if np.ndim(size) else int(size)
    mechanism = _release_mechanism(mechanism)
    dtype = np.int64 if mechanism.discrete else float
    return secure_release(np.zeros(n, dtype=dtype), mechanism, scale).reshape(size)


def secure_privacy_cost(mechanism, scale: float, sensitivity: float = 1.0) -> float:
    """OpenDP's own privacy map: epsilon (Laplace, geometric) or rho (Gaussians) at this scale."""
    mechanism = _release_mechanism(mechanism)
    d_in = int(sensitivity) if mechanism.discrete and float(sensitivity).is_integer() else float(sensitivity)
    return float(_measurement(mechanism, float(scale)).map(d_in))


class SecureMechanism:
    """A named mechanism on the release path, mirroring ``NoiseMechanism`` without an ``rng``.

    ``sample(scale, size)`` draws noise and ``release(values, scale)`` adds it, both through OpenDP.
    """

    def __init__(self, name) -> None:
        self.mechanism = _release_mechanism(name)
        self.name = self.mechanism.name
        self.unit = self.mechanism.unit
        self.discrete = self.mechanism.discrete

    def scale_for(self, sensitivity: float, budget: float) -> float:
        """Same calibration as the simulation mechanism (so both paths spend the same budget)."""
        return self.mechanism.scale_for(sensitivity, budget)

    def sample(self, scale: float, size) -> np.ndarray:
        """Noise draws from OpenDP (OS randomness): the release path."""
        return secure_noise(self.mechanism, scale, size)

    def release(self, values, scale: float) -> np.ndarray:
        """``values`` plus OpenDP noise: the release path."""
        return secure_release(values, self.mechanism, scale)

    def privacy_cost(self, scale: float, sensitivity: float = 1.0) -> float:
        """OpenDP's own privacy map at this scale, in ``self.unit``."""
        return secure_privacy_cost(self.mechanism, scale, sensitivity)


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
