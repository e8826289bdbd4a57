"""Samplers against their closed-form moments, tails and mass functions (fixed seeds)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from core.privacy import mechanisms as m

N = 200_000
Z = 5.0  # tolerance in standard errors: a correct sampler fails with probability ~1e-6 per check


def _dg_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(-int(20 * sigma) - 20, int(20 * sigma) + 21)
    w = np.exp(-k.astype(float) ** 2 / (2 * sigma * sigma))
    return k, w / w.sum()


def _geo_pmf(scale: float) -> tuple[np.ndarray, np.ndarray]:
    a = math.exp(-1 / scale)
    k = np.arange(-int(60 * scale) - 60, int(60 * scale) + 61)
    return k, (1 - a) / (1 + a) * a ** np.abs(k)


def _check_moments(x: np.ndarray, var: float, mean_abs: float, mu4: float) -> None:
    n = x.size
    assert abs(x.mean()) < Z * math.sqrt(var / n)
    assert abs(np.mean(x.astype(float) ** 2) - var) < Z * math.sqrt((mu4 - var * var) / n)
    assert abs(np.mean(np.abs(x)) - mean_abs) < Z * math.sqrt((var - mean_abs ** 2) / n)


def _check_tail(x: np.ndarray, threshold: float, prob: float) -> None:
    """P(|X| > threshold) against its formula, with a binomial standard error."""
    observed = np.mean(np.abs(x) > threshold)
    assert abs(observed - prob) < Z * math.sqrt(prob * (1 - prob) / x.size) + 1e-12


@pytest.mark.parametrize("b", [0.5, 3.0])
def test_laplace_moments_and_tail(b):
    x = m.sample_laplace(b, N, np.random.default_rng(1))
    assert m.laplace_variance(b) == pytest.approx(2 * b * b)
    assert m.laplace_mean_abs(b) == pytest.approx(b)
    _check_moments(x, 2 * b * b, b, 24 * b ** 4)
    _check_tail(x, 2 * b, math.exp(-2))


@pytest.mark.parametrize("sigma", [0.7, 4.0])
def test_gaussian_moments_and_tail(sigma):
    x = m.sample_gaussian(sigma, N, np.random.default_rng(2))
    assert m.gaussian_mean_abs(sigma) == pytest.approx(sigma * math.sqrt(2 / math.pi))
    _check_moments(x, sigma ** 2, sigma * math.sqrt(2 / math.pi), 3 * sigma ** 4)
    _check_tail(x, 2 * sigma, math.erfc(2 / math.sqrt(2)))


@pytest.mark.parametrize("scale", [0.4, 2.0, 10.0])
def test_geometric_closed_forms_match_pmf_and_samples(scale):
    k, p = _geo_pmf(scale)
    var, mean_abs = float(np.sum(k * k * p)), float(np.sum(np.abs(k) * p))
    assert m.geometric_variance(scale) == pytest.approx(var, rel=1e-10)
    assert m.geometric_mean_abs(scale) == pytest.approx(mean_abs, rel=1e-10)
    x = m.sample_geometric(scale, N, np.random.default_rng(3))
    assert x.dtype == np.int64
    _check_moments(x, var, mean_abs, float(np.sum(k ** 4.0 * p)))
    a = math.exp(-1 / scale)
    _check_tail(x, 2.5, 2 * a ** 3 / (1 + a))  # P(|K| >= 3) = 2 a^3 / (1 + a)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.5, 10.0, 40.0])
def test_discrete_gaussian_moments_and_tail(sigma):
    k, p = _dg_pmf(sigma)
    var, mean_abs = float(np.sum(k * k * p)), float(np.sum(np.abs(k) * p))
    assert m.discrete_gaussian_variance(sigma) == pytest.approx(var, rel=1e-10)
    assert m.discrete_gaussian_mean_abs(sigma) == pytest.approx(mean_abs, rel=1e-10)
    x = m.sample_discrete_gaussian(sigma, N, np.random.default_rng(4))
    assert x.dtype == np.int64
    _check_moments(x, var, mean_abs, float(np.sum(k ** 4.0 * p)))
    c = math.floor(1.5 * sigma)
    _check_tail(x, c, float(p[np.abs(k) > c].sum()))


@pytest.mark.parametrize("sigma", [0.8, 2.0, 10.0, 25.3])
def test_discrete_gaussian_chi_square_against_exact_pmf(sigma):
    k, p = _dg_pmf(sigma)
    x = m.sample_discrete_gaussian(sigma, 100_000, np.random.default_rng(5))
    expected = p * x.size
    keep = expected >= 5  # pool the sparse tails into one cell
    observed = np.bincount(x - k[0], minlength=k.size)
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_discrete_gaussian_rejects_a_wrong_distribution():
    """The goodness-of-fit check has power: a rounded continuous Laplace fails it."""
    sigma = 3.0
    k, p = _dg_pmf(sigma)
    x = np.rint(np.random.default_rng(6).laplace(0, sigma / math.sqrt(2), 100_000)).astype(np.int64)
    expected = p * x.size
    keep = expected >= 5
    observed = np.bincount(np.clip(x - k[0], 0, k.size - 1), minlength=k.size)
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(obs, exp).pvalue < 1e-10


def test_discrete_gaussian_moments_for_large_sigma_match_direct_sum():
    sigma = 2.5e4  # above the switch to the asymptotic formulas
    k = np.arange(0, int(15 * sigma), dtype=float)
    w = np.exp(-k * k / (2 * sigma * sigma))
    w[1:] *= 2
    assert m.discrete_gaussian_variance(sigma) == pytest.approx(np.sum(k * k * w) / w.sum(), rel=1e-12)
    assert m.discrete_gaussian_mean_abs(sigma) == pytest.approx(np.sum(k * w) / w.sum(), rel=1e-12)
    # and it stays below sigma^2 and below the continuous E|X| for moderate sigma
    assert m.discrete_gaussian_variance(2.0) < 4.0 + 1e-12
    assert m.discrete_gaussian_mean_abs(5.0) < 5.0 * math.sqrt(2 / math.pi)


@pytest.mark.parametrize("p", [0.7, 1.0, 1.5, 2.0, 4.0, 8.0, 60.0])
def test_generalized_gaussian_moments_tail_and_ks(p):
    sigma = 3.0
    var = m.generalized_gaussian_variance(sigma, p)
    mean_abs = m.generalized_gaussian_mean_abs(sigma, p)
    assert var == pytest.approx(sigma ** 2 * math.gamma(3 / p) / math.gamma(1 / p))
    assert mean_abs == pytest.approx(sigma * math.gamma(2 / p) / math.gamma(1 / p))
    x = m.sample_generalized_gaussian(sigma, p, N, np.random.default_rng(7))
    mu4 = sigma ** 4 * math.gamma(5 / p) / math.gamma(1 / p)
    _check_moments(x, var, mean_abs, mu4)
    # P(|X| > c) = Q(1/p, (c/sigma)^p), the regularised upper incomplete gamma
    _check_tail(x, 1.2 * sigma, float(special.gammaincc(1 / p, 1.2 ** p)))
    assert stats.kstest(x[:20_000], stats.gennorm(beta=p, scale=sigma).cdf).pvalue > 1e-4


def test_generalized_gaussian_special_orders():
    sigma = 2.0
    # p = 1 is Laplace with scale sigma
    assert m.generalized_gaussian_variance(sigma, 1) == pytest.approx(m.laplace_variance(sigma))
    assert m.generalized_gaussian_mean_abs(sigma, 1) == pytest.approx(m.laplace_mean_abs(sigma))
    # p = 2 is a Gaussian whose standard deviation is sigma / sqrt(2)
    s = sigma / math.sqrt(2)
    assert m.generalized_gaussian_variance(sigma, 2) == pytest.approx(m.gaussian_variance(s))
    assert m.generalized_gaussian_mean_abs(sigma, 2) == pytest.approx(m.gaussian_mean_abs(s))


def test_shapes_dtypes_and_reproducibility():
    for name in m.MECHANISMS:
        mech = m.get_mechanism(name)
        a = mech.sample(2.0, (3, 4), np.random.default_rng(9))
        b = mech.sample(2.0, (3, 4), np.random.default_rng(9))
        assert a.shape == (3, 4)
        assert np.array_equal(a, b), name
        assert (a.dtype == np.int64) == mech.discrete
    assert m.sample_discrete_gaussian(5.0, 0, np.random.default_rng(0)).shape == (0,)
    assert m.sample_generalized_gaussian(1.0, 3.0, (2, 5), np.random.default_rng(0)).shape == (2, 5)


def test_calibration_rules():
    assert m.get_mechanism("laplace").scale_for(2.0, 0.5) == pytest.approx(4.0)
    assert m.get_mechanism("discrete_gaussian").scale_for(1.0, 0.125) == pytest.approx(2.0)
    assert m.get_mechanism("gaussian").variance(3.0) == pytest.approx(9.0)


@pytest.mark.parametrize("call", [
    lambda: m.sample_laplace(0.0, 5, np.random.default_rng(0)),
    lambda: m.sample_geometric(-1.0, 5, np.random.default_rng(0)),
    lambda: m.sample_discrete_gaussian(float("nan"), 5, np.random.default_rng(0)),
    lambda: m.sample_discrete_gaussian(1.0, -3, np.random.default_rng(0)),
    lambda: m.sample_generalized_gaussian(1.0, 0.0, 5, np.random.default_rng(0)),
    lambda: m.generalized_gaussian_variance(-1.0, 2.0),
    lambda: m.discrete_gaussian_variance(0.0),
    lambda: m.get_mechanism("cauchy"),
    lambda: m.get_mechanism("laplace").scale_for(1.0, 0.0),
    lambda: m.get_mechanism("gaussian").scale_for(-1.0, 0.5),
])
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("name", sorted(m.MECHANISMS))
def test_moments_and_calibration_accept_arrays(name):
    mech = m.get_mechanism(name)
    scales = np.array([0.5, 2.0, 30.0])
    assert isinstance(mech.variance(2.0), float) and isinstance(mech.mean_abs(2.0), float)
    np.testing.assert_allclose(mech.variance(scales), [mech.variance(s) for s in scales], rtol=1e-12)
    np.testing.assert_allclose(mech.mean_abs(scales), [mech.mean_abs(s) for s in scales], rtol=1e-12)
    budgets = np.array([0.1, 0.5, 2.0])
    if mech.approximate:
        expected = [mech.scale_for(1.0, b) for b in budgets]
    else:
        expected = 1.0 / budgets if mech.unit == "epsilon" else 1.0 / np.sqrt(2 * budgets)
    np.testing.assert_allclose(mech.scale_for(1.0, budgets), expected)
    with pytest.raises(ValueError):
        mech.variance(np.array([1.0, -1.0]))
    with pytest.raises(ValueError):
        mech.scale_for(1.0, np.array([0.5, 0.0]))


def test_registry_has_one_shape_and_every_mechanism_knows_its_calibration():
    from core.contracts import Registry, Spec
    from core.privacy.accounting import analytic_gaussian_sigma
    assert isinstance(m.MECHANISMS, Registry)
    for key in m.MECHANISMS:
        spec = m.MECHANISMS[key]
        assert isinstance(spec, Spec) and spec.help
        mech = spec.build()
        assert mech.key == key and mech.unit in m.UNITS
        assert mech.guarantee(0.5)
    ag = m.get_mechanism("analytic_gaussian")
    assert ag.approximate and ag.scale_for(math.sqrt(1000), 1.0) == pytest.approx(133.60, abs=0.005)
    assert ag.scale_for(2.0, 0.5) == pytest.approx(analytic_gaussian_sigma(0.5, 1e-6, 2.0))
    assert m.mechanism_keys("rho") == ["gaussian", "discrete_gaussian"]
    assert "generalized_gaussian" in m.mechanism_keys("epsilon")


def test_mechanism_ids_carry_parameters_between_pages():
    params = m.GeneralizedGaussianParams(order=4.0, delta=2e-7)
    text = m.mechanism_id("generalized_gaussian", params)
    assert text == "generalized_gaussian[order=4.0,delta=2e-07]"
    assert m.parse_mechanism_id(text) == ("generalized_gaussian", params)
    assert m.get_mechanism(text).delta == 2e-7
    assert m.mechanism_id("generalized_gaussian") == "generalized_gaussian"
    for bad in ("generalized_gaussian[order=x]", "generalized_gaussian[size=3]", "laplace[", "cauchy[p=1]",
                "generalized_gaussian[order=0.5]"):
        with pytest.raises(ValueError):
            m.get_mechanism(bad)


@pytest.mark.slow
def test_generalized_gaussian_is_calibrated_for_the_counts_one_person_changes():
    from core.privacy.calibration import calibrate_generalized_gaussian, gg_scale_estimate
    gg = m.get_mechanism("generalized_gaussian")
    assert gg.scale_for(2.0, 0.5) == pytest.approx(calibrate_generalized_gaussian(2, 3.0, 0.5, 1e-6))
    assert gg.scale_estimate(2.0, 0.5) == pytest.approx(gg.scale_for(2.0, 0.5), rel=2e-3)
    assert gg_scale_estimate(2, 3.0, 0.5, 1e-6) == pytest.approx(gg.scale_for(2.0, 0.5), rel=2e-3)
    with pytest.raises(ValueError, match="whole number of counts"):
        gg.scale_for(1.5, 0.5)
    draws = gg.draw(2.0, 1.0, 1000, np.random.default_rng(0))
    assert draws.shape == (1000,)


@pytest.mark.slow
def test_exponential_mechanism_matches_its_distribution_and_skips_minus_infinity():
    rng = np.random.default_rng(0)
    scores = np.array([0.0, 1.0, -np.inf, 2.0])
    draws = np.array([m.sample_exponential_mechanism(scores, 2.0, rng) for _ in range(20_000)])
    assert not (draws == 2).any()
    expected = np.exp(np.array([0.0, 1.0, 2.0]))
    expected /= expected.sum()
    observed = np.bincount(draws, minlength=4)[[0, 1, 3]] / draws.size
    assert np.abs(observed - expected).max() < 0.015
    # a sensitivity of 2 halves the effective epsilon
    half = np.array([m.sample_exponential_mechanism(scores, 4.0, rng, sensitivity=2.0) for _ in range(20_000)])
    assert np.abs(np.bincount(half, minlength=4)[[0, 1, 3]] / half.size - expected).max() < 0.015
    with pytest.raises(ValueError):
        m.sample_exponential_mechanism(np.array([-np.inf]), 1.0, rng)
