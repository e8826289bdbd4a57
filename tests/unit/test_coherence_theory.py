"""Theory calculator against the spec's reference numbers (paper constants and conservative ones)."""
import math

import numpy as np
import pytest
from scipy.stats import hypergeom

from core.coherence import theory as th


@pytest.mark.parametrize("eps,n,alpha,groups,zeta,paper,conservative", [
    (0.01, 200_000, 0.5, 10, 10.7813, 625.89, 2503.57),
    (0.001, 10**6, 0.25, 100, 1.7489, 1609.86, 7322.24),
    (0.05, 10**5, 1.0, 1, 79.0492, 1407.97, 2815.94),
])
def test_pure_dp_table(eps, n, alpha, groups, zeta, paper, conservative):
    p = th.gamma_pure_dp(eps, n, alpha, 0.05, groups, constants="paper")
    c = th.gamma_pure_dp(eps, n, alpha, 0.05, groups, constants="conservative")
    assert p.zeta == pytest.approx(zeta, abs=1e-4)
    assert p.gamma == pytest.approx(paper, abs=0.01)
    assert c.gamma == pytest.approx(conservative, abs=0.01)


def test_pure_dp_binding_terms_hand_computed():
    z = 1e-4 * 2e5 / 4 + 0.005 * math.sqrt(2e5 * math.log(800))
    res = th.gamma_pure_dp(0.01, 200_000, 0.5, 0.05, 10, constants="paper")
    assert res.zeta == pytest.approx(z)
    assert res.binding == "8.3-term"
    assert res.gamma == pytest.approx(8.3 * (z + math.log(3200)) / 0.25)
    assert th.gamma_pure_dp(0.05, 10**5, 1.0, 0.05, 1, constants="paper").binding == "16.6-term"


def test_approx_dp_row_and_delta_cap():
    assert th.delta_cap(0.001, 10**5, 0.05, 100) == pytest.approx(1.7361e-27, rel=1e-4)
    p = th.gamma_approx_dp(0.001, 0.0, 10**5, 0.5, 0.05, 100, constants="paper")
    c = th.gamma_approx_dp(0.001, 0.0, 10**5, 0.5, 0.05, 100)
    assert p.zeta == pytest.approx(37.8761, abs=1e-4)
    assert p.gamma == pytest.approx(1624.90, abs=0.01)
    assert c.gamma == pytest.approx(6499.60, abs=0.01)
    above = th.gamma_approx_dp(0.001, 1e-20, 10**5, 0.5, 0.05, 100)
    assert above.gamma is None and "outside theorem" in above.reason
    assert th.gamma_approx_dp(0.6, 0.0, 10**5, 0.5, 0.05, 100).gamma is None


def test_inversions():
    assert th.max_epsilon(10_000, 10**6, 0.5, 0.05, 100, constants="paper") == pytest.approx(0.031241, abs=1e-6)
    assert th.max_epsilon(10_000, 10**6, 0.5, 0.05, 100) == pytest.approx(0.013394, abs=1e-6)
    assert th.certified_alpha_pure_dp(1000, 0.01, 200_000, 0.05, 10, constants="paper") == pytest.approx(0.39557, abs=1e-5)
    assert th.certified_alpha_pure_dp(1000, 0.01, 200_000, 0.05, 10) == pytest.approx(0.79113, abs=1e-5)
    for mode in th.CONSTANTS:
        assert th.certified_alpha_pure_dp(400, 0.1, 20_000, 0.05, 20, constants=mode) is None


@pytest.mark.parametrize("n", [10**4, 10**6, 3.3 * 10**8])
def test_epsilon_one_is_vacuous_for_every_n(n):
    for mode in th.CONSTANTS:
        for alpha in (0.1, 0.5, 1.0):
            assert th.gamma_pure_dp(1.0, int(n), alpha, 0.05, 10, constants=mode).gamma > n


def test_description_length_corollary():
    assert th.log_binomial(10**6, 10) == pytest.approx(123.05, abs=0.01)
    z = th.zeta_description_length(th.log_binomial(10**6, 10), 0.05, 100)
    assert z == pytest.approx(131.345, abs=1e-3)
    assert th.gamma_from_zeta(z, 0.5, 0.05, 100, constants="paper").gamma == pytest.approx(4705.0, abs=0.1)
    assert th.gamma_from_zeta(z, 0.5, 0.05, 100).gamma == pytest.approx(18820, abs=1)


def test_null_envelope_printed_values_and_conservative_validity():
    assert th.null_envelope(1000, 0.2, "paper") == pytest.approx(0.5219, abs=1e-4)
    assert th.null_envelope(2000, 0.2, "paper") == pytest.approx(6.798e-5, rel=1e-3)
    assert th.null_envelope(500, 0.5, "paper") == pytest.approx(3.325e-10, rel=1e-3)
    # the printed form is below the exact probability for a balanced +-1 predictor (so it is invalid) ...
    m = 500
    k = np.arange(m // 2 + 1)
    w1 = 4 * np.abs(2 * k - m // 2) / m
    exact = hypergeom(m, m // 2, m // 2).pmf(k)[w1 > 0.5 + 1e-9].sum()
    assert exact == pytest.approx(1.48e-8, rel=0.02)
    assert th.null_envelope(500, 0.5, "paper") < exact
    # ... while the conservative form stays above exact probabilities on a grid
    for m in (200, 1000, 3000):
        for alpha in (0.3, 0.7, 1.2):
            k = np.arange(m // 2 + 1)
            w1 = 4 * np.abs(2 * k - m // 2) / m
            exact = hypergeom(m, m // 2, m // 2).pmf(k)[w1 > alpha + 1e-9].sum()
            assert th.null_envelope(m, alpha) >= exact


def test_gamma_monotone_and_bad_input():
    g = [th.gamma_pure_dp(0.01, 10**5, a, 0.05, 10).gamma for a in (0.2, 0.5, 1.0, 2.0)]
    assert all(x >= y for x, y in zip(g, g[1:]))
    with pytest.raises(ValueError, match="beta"):
        th.gamma_pure_dp(0.01, 10**5, 0.5, 1.5, 10)
    with pytest.raises(ValueError, match="epsilon"):
        th.gamma_pure_dp(0.0, 10**5, 0.5, 0.05, 10)
    with pytest.raises(ValueError, match="constants"):
        th.gamma_from_zeta(1.0, 0.5, 0.05, 10, constants="bogus")


def test_max_epsilon_for_approximate_dp_inverts_thm8():
    e = th.max_epsilon(10_000, 10**5, 0.5, 0.05, 100, constants="paper", mechanism="approx_dp")
    assert e is not None and 0 < e < 0.5
    assert th.gamma_approx_dp(e, 0.0, 10**5, 0.5, 0.05, 100, constants="paper").gamma == pytest.approx(10_000, rel=1e-6)
    assert th.gamma_approx_dp(e * 1.01, 0.0, 10**5, 0.5, 0.05, 100, constants="paper").gamma > 10_000
    with pytest.raises(ValueError, match="mechanism"):
        th.max_epsilon(10_000, 10**5, 0.5, 0.05, 100, mechanism="gaussian")


def test_theory_plan_refuses_numbers_too_large_for_a_float():
    from core.coherence.calculator import TheoryPlan
    with pytest.raises(ValueError, match="number"):
        TheoryPlan(epsilon=10**400)
