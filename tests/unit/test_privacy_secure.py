"""The OpenDP release path: types, shapes, noise level and privacy maps."""
from __future__ import annotations

import math

import numpy as np
import pytest

from core.privacy import secure
from core.privacy.accounting import rho_to_epsilon
from core.privacy.mechanisms import get_mechanism


@pytest.mark.parametrize("name", ["geometric", "discrete_gaussian"])
def test_discrete_release_returns_integers_of_the_input_shape(name):
    counts = np.arange(12).reshape(3, 4)
    out = secure.secure_release(counts, name, 2.0)
    assert out.shape == (3, 4) and out.dtype == np.int64


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_continuous_release_returns_floats(name):
    out = secure.secure_release([1.5, 2.5, 3.5], name, 1.0)
    assert out.shape == (3,) and out.dtype == float
    assert not np.all(out == [1.5, 2.5, 3.5])


@pytest.mark.parametrize("name,scale", [("geometric", 3.0), ("discrete_gaussian", 4.0), ("laplace", 2.0)])
def test_release_noise_has_the_mechanism_variance(name, scale):
    n = 4000
    noise = secure.secure_noise(name, scale, n).astype(float)
    var = get_mechanism(name).variance(scale)
    # Var(X^2) = mu4 - var^2, which is below 6 var^2 for these three laws (kurtosis about 6 or less)
    assert abs(np.mean(noise ** 2) - var) < 5 * math.sqrt(6 * var * var / n)


def test_privacy_maps_agree_with_our_calibration():
    lap = get_mechanism("laplace")
    assert secure.secure_privacy_cost("laplace", lap.scale_for(1.0, 0.5)) == pytest.approx(0.5)
    assert secure.secure_privacy_cost("geometric", 2.0) == pytest.approx(0.5)
    dg = get_mechanism("discrete_gaussian")
    assert secure.secure_privacy_cost("discrete_gaussian", dg.scale_for(1.0, 1 / 18)) == pytest.approx(1 / 18)


def test_opendp_zcdp_conversion_agrees_with_the_tight_conversion():
    dp = secure._opendp()
    meas = secure._measurement("discrete_gaussian", 3.0)
    opendp_eps = dp.c.make_zCDP_to_approxDP(meas).map(1).epsilon(1e-6)
    assert rho_to_epsilon(1 / 18, 1e-6) == pytest.approx(opendp_eps, rel=1e-6)


@pytest.mark.parametrize("values,name,scale", [
    ([1.5, 2.0], "geometric", 1.0),          # non-integer counts for a discrete mechanism
    ([1.0, float("nan")], "gaussian", 1.0),
    (["a", "b"], "laplace", 1.0),
    ([1, 2], "laplace", 0.0),
    ([1, 2], "cauchy", 1.0),
])
def test_bad_release_inputs_raise_value_error(values, name, scale):
    with pytest.raises(ValueError):
        secure.secure_release(values, name, scale)


def test_secure_mechanism_mirrors_the_simulation_interface():
    mech = secure.SecureMechanism("discrete_gaussian")
    assert mech.unit == "rho" and mech.discrete
    scale = mech.scale_for(1.0, 0.125)
    assert scale == pytest.approx(2.0)
    assert mech.privacy_cost(scale) == pytest.approx(0.125)
    draws = mech.sample(scale, (2, 5))
    assert draws.shape == (2, 5) and draws.dtype == np.int64
    released = mech.release(np.full(4, 1000), scale)
    assert released.dtype == np.int64 and np.all(np.abs(released - 1000) < 40)  # 20 sigma
