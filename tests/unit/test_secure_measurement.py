"""The release path builds OpenDP's measurement from the mechanism object it is handed, never by parsing a
name back through the registry: a mechanism built outside ``MECHANISMS`` (with its OpenDP setup) releases."""
from __future__ import annotations

import numpy as np
import pytest

from core.privacy.mechanisms import (NoiseMechanism, abs_laplace, get_mechanism, laplace_mean_abs, laplace_variance,
                                     sample_laplace)
from core.privacy.secure import SecureMechanism, secure_privacy_cost, secure_release
from core.synthesis.mean_noise import MeanNoise

# Not a registry key and not a parseable mechanism id: only the object knows how OpenDP draws it.
UNLISTED = NoiseMechanism("laplace, unlisted", "Unlisted Laplace", "epsilon", False, sample_laplace,
                          laplace_variance, laplace_mean_abs, abs_laplace, opendp=("f64", "l1", "then_laplace"))


def test_an_unlisted_mechanism_object_releases_through_its_own_opendp_setup():
    with pytest.raises(ValueError):
        get_mechanism(UNLISTED.id)                      # its name means nothing to the registry
    out = secure_release(np.array([10.0, 20.0, 30.0]), UNLISTED, 2.0)
    assert out.shape == (3,) and np.all(np.isfinite(out)) and not np.allclose(out, [10.0, 20.0, 30.0])
    # OpenDP's own privacy map of Laplace: epsilon = sensitivity / scale
    assert secure_privacy_cost(UNLISTED, 2.0, sensitivity=3.0) == pytest.approx(1.5)
    assert SecureMechanism(UNLISTED).privacy_cost(4.0) == pytest.approx(0.25)


def test_a_mean_noise_on_an_unlisted_mechanism_draws_securely():
    draws = MeanNoise("Unlisted Laplace", UNLISTED).secure_sample(1.0, 50)
    assert draws.shape == (50,) and draws.std() > 0


def test_registry_mechanisms_keep_their_privacy_maps():
    assert secure_privacy_cost("laplace", 2.0, sensitivity=3.0) == pytest.approx(1.5)
    assert secure_privacy_cost(get_mechanism("gaussian"), 2.0) == pytest.approx(1 / 8)   # rho = 1 / (2 sigma^2)
