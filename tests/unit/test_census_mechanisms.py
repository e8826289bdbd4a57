"""Mechanism comparison: tight calibrations side by side, Generalized Gaussian calibration and error metrics."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from core.census.mechanism_comparison import (MechanismSweepPlan, expected_max_abs, generalized_gaussian_advantage,
                                              gg_metrics, max_abs_quantile, mechanism_sweep)
from core.privacy.accounting import analytic_gaussian_sigma
from core.privacy.calibration import calibrate_generalized_gaussian, gg_delta_curve
from core.privacy.mechanisms import (abs_gaussian, abs_laplace, generalized_gaussian_variance, get_mechanism,
                                     sample_generalized_gaussian)


def test_gg_order2_calibration_is_the_analytic_gaussian():
    # density exp(-(x/sigma)^2) has sd sigma/sqrt(2); analytic Gaussian sd for l2 sensitivity sqrt(k)
    for k, expected in ((10, 13.36), (100, 42.25)):
        sigma = calibrate_generalized_gaussian(k, 2.0, 1.0, 1e-6)
        assert sigma / math.sqrt(2) == pytest.approx(analytic_gaussian_sigma(1.0, 1e-6, math.sqrt(k)), rel=0.005)
        assert sigma / math.sqrt(2) == pytest.approx(expected, rel=0.005)
        assert sigma / math.sqrt(2) >= analytic_gaussian_sigma(1.0, 1e-6, math.sqrt(k)) * 0.9999  # pessimistic


def test_the_gaussian_line_is_the_analytic_gaussian_of_the_spec():
    df = mechanism_sweep(MechanismSweepPlan(k=1000, epsilons=(1.0,), mechanisms=("analytic_gaussian", "gaussian_zcdp")))
    scale = df[df.metric == "RMSE"].set_index("mechanism")["scale"]
    assert scale["analytic_gaussian"] == pytest.approx(133.60, abs=0.005)     # spec §7 fixture
    assert scale["gaussian_zcdp"] > scale["analytic_gaussian"] * 1.05          # zCDP + conversion is looser
    labels = set(df["label"])
    assert "Gaussian (analytic, tight)" in labels and "Gaussian via zCDP (CKS conversion)" in labels


def test_generalized_gaussian_advantage_is_measured_against_the_tight_gaussian():
    plan = MechanismSweepPlan(k=1000, epsilons=(1.0,), gg_orders=(3.0, 4.0), include_bound=False,
                              mechanisms=("analytic_gaussian", "gaussian_zcdp", "generalized_gaussian"))
    df = mechanism_sweep(plan)
    adv = generalized_gaussian_advantage(df).iloc[0]
    assert adv["advantage (%)"] == pytest.approx(12.0, abs=1.0)           # the spec's "about 12%"
    emax = df[df.metric == "E max error"]
    zcdp = emax[emax.mechanism == "gaussian_zcdp"]["value"].iloc[0]
    assert 100 * (1 - adv["Generalized Gaussian"] / zcdp) > 16            # the old, unfair comparison


def test_gg_order1_is_laplace():
    rng = np.random.default_rng(0)
    draws = sample_generalized_gaussian(2.0, 1.0, 20000, rng)
    assert stats.kstest(draws, stats.laplace(scale=2.0).cdf).pvalue > 1e-3
    assert generalized_gaussian_variance(2.0, 1.0) == pytest.approx(8.0)
    # one query, Laplace scale 1 at shift 1: pure 1-DP, so delta vanishes just above epsilon = 1
    assert gg_delta_curve(1.0, 1.0, 1, [1.02])[0] < 1e-10
    assert gg_delta_curve(1.0, 1.0, 1, [0.5])[0] > 0.1


def test_gg_order2_sampler_is_gaussian():
    rng = np.random.default_rng(1)
    draws = sample_generalized_gaussian(3.0, 2.0, 20000, rng)
    assert stats.kstest(draws, stats.norm(scale=3.0 / math.sqrt(2)).cdf).pvalue > 1e-3


def test_gg_spec_table_k100_p3():
    sigma = calibrate_generalized_gaussian(100, 3.0, 1.0, 1e-6)
    assert sigma == pytest.approx(75.3, rel=0.01)
    m = gg_metrics(sigma, 3.0, 100)
    assert m["MAE"] == pytest.approx(38.1, rel=0.01)
    assert m["E max error"] == pytest.approx(111, rel=0.02)


def test_max_error_closed_forms():
    s, q = abs_laplace(2.0)
    harmonic = sum(1.0 / i for i in range(1, 51))
    assert expected_max_abs(s, q, 50) == pytest.approx(2.0 * harmonic, rel=1e-4)
    assert max_abs_quantile(q, 50) == pytest.approx(-2.0 * math.log(1 - 0.95 ** (1 / 50)))
    s, q = abs_gaussian(1.0)
    assert expected_max_abs(s, q, 1) == pytest.approx(math.sqrt(2 / math.pi), rel=1e-4)
    # many queries: the search for the upper limit must not ask the quantile for 1 - 1e-16
    from scipy import integrate, special
    for k in (300, 1000, 100_000):
        exact = integrate.quad(lambda t: -math.expm1(k * math.log1p(-special.erfc(t / math.sqrt(2)))), 0, 12,
                               limit=200)[0]
        assert expected_max_abs(s, q, k) == pytest.approx(exact, rel=1e-4)


def test_sweep_values():
    df = mechanism_sweep(MechanismSweepPlan(k=10, epsilons=(0.5, 2.0),
                                            mechanisms=("laplace", "geometric", "analytic_gaussian")))
    lap = df[(df.mechanism == "laplace") & (df.metric == "MAE")].set_index("epsilon")["value"]
    assert lap[0.5] == pytest.approx(20.0) and lap[2.0] == pytest.approx(5.0)
    geo = df[(df.mechanism == "geometric") & (df.metric == "RMSE") & (df.epsilon == 0.5)]["value"].iloc[0]
    beta = math.exp(-0.05)
    assert geo == pytest.approx(math.sqrt(2 * beta) / (1 - beta))
    gauss = df[(df.mechanism == "analytic_gaussian") & (df.metric == "RMSE")].set_index("epsilon")["value"]
    assert gauss[2.0] < gauss[0.5]


@pytest.mark.parametrize("bad", [dict(k=0), dict(k=4294967296), dict(k=2.5), dict(delta=0.0), dict(delta=float("nan")),
                                 dict(epsilons=()), dict(epsilons=(float("inf"),)), dict(epsilons=(-1.0,)),
                                 dict(gg_orders=(0.5,)), dict(mechanisms=("cauchy",))])
def test_sweep_plan_refuses_bad_settings_with_value_errors(bad):
    with pytest.raises(ValueError):
        MechanismSweepPlan(**bad)


def test_shipped_generalized_gaussian_grid_matches_the_calibration_and_is_used(monkeypatch):
    import core.privacy.calibration as cal
    table = pd.read_csv(cal.GG_GRID_FILE)
    grid = table[table["delta"] == 1e-6]
    assert len(grid) == 7 * 3 * 6
    # the allocation's default what-if curves: two counts per person, delta 1e-6 over five levels
    curves = table[table["delta"] == 1e-6 / 5]
    assert len(curves) == 6 * len(cal.CURVE_EPSILONS) and set(curves["k"]) == {2}
    assert set(table["delta"]) == {1e-6, 1e-6 / 5}
    row = grid[(grid.k == 3) & (grid.p == 3.0) & (grid.epsilon == 1.0)].iloc[0]
    assert row["sigma"] == pytest.approx(cal.gg_scale_by_bisection(3, 3.0, 1.0, 1e-6), rel=1e-9)
    # the page's default settings come from the grid; anything else is still calibrated
    cal._calibrate_cached.cache_clear()
    monkeypatch.setattr(cal, "_disk_calibration", lambda *a: (_ for _ in ()).throw(RuntimeError("computed")))
    assert cal.calibrate_generalized_gaussian(1000, 3.0, 1.0, 1e-6) == pytest.approx(
        grid[(grid.k == 1000) & (grid.p == 3.0) & (grid.epsilon == 1.0)]["sigma"].iloc[0])
    assert cal.is_calibrated(1000, 3.0, 1.0, 1e-6)
    for eps in cal.CURVE_EPSILONS:                      # the default allocation's curve needs no computing
        assert cal.is_calibrated(2, 3.0, eps, 1e-6 / 5)
    with pytest.raises(RuntimeError, match="computed"):
        cal.calibrate_generalized_gaussian(7, 3.0, 1.0, 1e-6)
    cal._calibrate_cached.cache_clear()


def test_every_mechanism_knows_the_distribution_of_its_absolute_error():
    for key in ("laplace", "geometric", "gaussian", "discrete_gaussian", "analytic_gaussian", "generalized_gaussian"):
        surv, quant = get_mechanism(key).abs_distribution(3.0)
        assert float(surv(0.0)) == pytest.approx(1.0, abs=0.2) and float(surv(1e4)) < 1e-12
        assert float(surv(float(quant(0.5)))) <= 0.5 + 1e-9


def test_the_comparisons_lines_and_the_release_path_come_from_the_mechanisms_specs():
    """No side tables: the comparison's choices are the registry Specs' lines, and whether a mechanism can be
    released (and how OpenDP draws it) is part of what its factory builds."""
    from core.census.mechanism_comparison import MECHANISM_CHOICES
    from core.privacy import secure
    from core.privacy.mechanisms import MECHANISMS
    assert MECHANISM_CHOICES == {spec.line: spec.comparison_label for spec in MECHANISMS.values()}
    releasable = {key for key in MECHANISMS if get_mechanism(key).supports_release}
    assert releasable == {"laplace", "geometric", "gaussian", "discrete_gaussian", "analytic_gaussian"}
    assert get_mechanism("gaussian").opendp == ("f64", "l2", "then_gaussian")
    with pytest.raises(ValueError, match="Generalized Gaussian p=3 .* has no secure sampler"):
        secure.secure_noise("generalized_gaussian", 1.0, 3)
    mech = get_mechanism("laplace")
    assert get_mechanism(mech) is mech                                   # the object passes through unparsed
