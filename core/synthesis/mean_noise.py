"""The noise a private mean takes, as one object: what the means simulation and the stratified-mean release ask.

A :class:`MeanNoise` wraps one additive mechanism of ``core.privacy.mechanisms`` (which holds the
calibration, the samplers and the moments) and adds what a private mean needs on top of it:

* ``budget_for(epsilon, delta)``: the budget in the mechanism's unit that meets a target epsilon, so
  every noise is compared at the same epsilon (the epsilon itself for an epsilon-unit mechanism; the
  largest zCDP rho that is (epsilon, delta)-DP for a rho-unit one, Canonne, Kamath and Steinke 2020);
* ``scale_for(sensitivity, budget)``, ``sample(scale, size, rng)`` (seeded, a simulation),
  ``secure_sample(scale, size)`` (OpenDP, a release), ``variance(scale)``;
* ``quantile95``: the two-sided 95% point of one draw in its standard deviations, read from the
  distribution of |X| the mechanism knows (about 2.12 for Laplace, 1.96 for a Gaussian).

``mean_noise_factory(mechanism_key)`` is what a ``Spec`` line of ``core.synthesis.plan.NOISES`` takes,
so a new noise for the means is that one line. The means rescale one standard draw per stratum, so a
mean noise must be a continuous scale family (draws at scale s are s times draws at scale 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from core.privacy.mechanisms import NoiseMechanism, get_mechanism


@dataclass(frozen=True)
class MeanNoise:
    """One noise for a private mean: its mechanism (calibration, samplers, moments) and the mean's views of it."""

    label: str
    mechanism: NoiseMechanism

    def __post_init__(self) -> None:
        if self.mechanism.discrete:
            raise ValueError(f"The {self.mechanism.label} draws integers; a private mean needs continuous noise.")
        if self.mechanism.approximate:
            raise ValueError(f"The {self.mechanism.label} is calibrated at its own delta, which the means' ledgers "
                             "do not record; choose a pure epsilon or a zCDP (rho) mechanism.")

    @property
    def unit(self) -> str:
        """What its budget is counted in: "epsilon" or "rho"."""
        return self.mechanism.unit

    @property
    def scale_name(self) -> str:
        """What its scale is called in a ledger line ("Laplace scale", "sigma")."""
        return "Laplace scale" if self.mechanism.norm == "l1" and self.unit == "epsilon" else "sigma"

    def budget_for(self, epsilon: float, delta: float) -> float:
        """The budget in ``unit`` that meets ``epsilon`` (at ``delta`` when the unit is rho)."""
        if self.unit == "epsilon":
            return float(epsilon)
        from core.privacy.accounting import rho_for_epsilon
        return float(rho_for_epsilon(epsilon, delta))

    def scale_for(self, sensitivity, budget):
        """The mechanism's calibration: its scale for this sensitivity at this budget (arrays broadcast)."""
        return self.mechanism.scale_for(sensitivity, budget)

    def sample(self, scale, size, rng: np.random.Generator) -> np.ndarray:
        """Draws at ``scale`` from the seeded generator ``rng`` (a simulation)."""
        return self.mechanism.sample(scale, size, rng)

    def secure_sample(self, scale: float, size) -> np.ndarray:
        """Draws at ``scale`` from OpenDP's sampler (a release; not reproducible)."""
        from core.privacy.secure import SecureMechanism
        return np.asarray(SecureMechanism(self.mechanism).sample(scale, size), float)

    def variance(self, scale):
        """Variance of one draw at ``scale`` (scalar or array)."""
        return self.mechanism.variance(scale)

    @property
    def quantile95(self) -> float:
        """Two-sided 95% point of one draw, in standard deviations: q with P(|X| <= q sd) = 0.95.

        Laplace with scale b: sd sqrt(2) b and P(|X| > t) = exp(-t / b), so q = ln 20 / sqrt 2, about 2.12
        (a 1.96 sd interval would cover about 93.75%). Gaussian: the normal point 1.96.
        """
        _, quantile = self.mechanism.abs_distribution(1.0)
        return float(quantile(0.95)) / math.sqrt(float(self.variance(1.0)))


def mean_noise_factory(mechanism_key: str, label: str | None = None) -> Callable[[Any], MeanNoise]:
    """A Spec factory: ``params -> MeanNoise`` over the registered mechanism ``mechanism_key``."""
    def build(params) -> MeanNoise:
        mechanism = get_mechanism(mechanism_key, params)
        return MeanNoise(label or mechanism.label, mechanism)
    return build

