"""Where a synthesizer's privacy noise comes from: a seeded simulation or the secure release sampler.

Calibration and draws both live in ``core.privacy``; this module only picks the sampler. A
seeded source reproduces its numbers from the plan's seed and is a simulation; the secure source
draws from OpenDP (operating-system randomness) and is what a real release uses.
"""
from __future__ import annotations

import numpy as np

from core.privacy.accounting import gaussian_sigma
from core.privacy.mechanisms import sample_exponential_mechanism, sample_gaussian


class SeededNoise:
    """Gaussian noise from a numpy generator (``core.privacy.mechanisms``): reproducible, a simulation."""

    secure = False

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def gaussian(self, sensitivity: float, rho: float, size) -> tuple[np.ndarray, float]:
        """Noise of the Gaussian mechanism at ``rho`` for this L2 ``sensitivity``, and its sigma."""
        sigma = gaussian_sigma(sensitivity, rho)
        return sample_gaussian(sigma, size, self.rng), sigma

    def choose(self, scores: np.ndarray, epsilon: float) -> int:
        """The exponential mechanism (score sensitivity 1) of ``core.privacy.mechanisms``; -inf never chosen."""
        return sample_exponential_mechanism(scores, epsilon, self.rng)


class SecureNoise:
    """Gaussian noise from OpenDP's sampler (``core.privacy.secure``): the release path."""

    secure = True

    def gaussian(self, sensitivity: float, rho: float, size) -> tuple[np.ndarray, float]:
        from core.privacy.secure import secure_noise

        sigma = gaussian_sigma(sensitivity, rho)
        return np.asarray(secure_noise("gaussian", sigma, size), float), sigma

    def choose(self, scores: np.ndarray, epsilon: float) -> int:
        """The exponential mechanism as OpenDP's Gumbel noisy max (scale 2 / epsilon); -inf never chosen."""
        from core.privacy.secure import secure_noisy_max

        q = np.asarray(scores, float)
        open_ = np.flatnonzero(np.isfinite(q))
        return int(open_[secure_noisy_max(q[open_], 2.0 / epsilon)])


def noise_source(rng: np.random.Generator, noise=None):
    """The given source, or a seeded one on ``rng``."""
    return SeededNoise(rng) if noise is None else noise
