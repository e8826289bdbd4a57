"""Mean estimation: closed forms against the spec's values and against simulation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from core.synthesis import mean_estimation as me

NY_RACE = [138474, 24024, 17030, 10964, 5646, 508, 244, 72, 5]


def test_theorem10_values_and_bounds():
    n = sum(NY_RACE)
    assert n == 196967
    got = [me.dirichlet_expected_log_sizes(a, 9, n) for a in (0.2, 0.3, 0.5, 0.7, 1.0)]
    assert got == pytest.approx([59.55, 71.02, 79.55, 82.91, 85.26], abs=0.006)
    assert me.dirichlet_expected_log_sizes(0.13, 9, n) == pytest.approx(40.00, abs=0.006)
    assert me.worst_case_log_sizes(n, 9) == pytest.approx(89.94, abs=0.005)
    assert me.best_case_log_sizes(n, 9) == pytest.approx(12.19, abs=0.005)
    assert sum(math.log(g) for g in NY_RACE) == pytest.approx(67.22, abs=0.005)


@pytest.mark.parametrize("alpha", [0.2, 0.5, 1.0])
def test_theorem10_is_an_equality_by_monte_carlo(alpha):
    n = 196967
    sim = me.simulate_dirichlet_log_sizes(alpha, 9, n, 200000, np.random.default_rng(0))
    assert sim == pytest.approx(me.dirichlet_expected_log_sizes(alpha, 9, n), rel=0.002)


def test_dirichlet_mle_on_ny_race():
    p = np.array(NY_RACE) / sum(NY_RACE)
    assert me.dirichlet_alpha_mle(p) == pytest.approx(0.257, abs=0.005)


def test_lemma12_holds_for_random_sizes():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(2, 12))
        g = rng.integers(1, 5000, k).astype(float)
        assert np.log(g).sum() <= me.worst_case_log_sizes(g.sum(), k) + 1e-9


@pytest.mark.parametrize("sizes, ratio", [
    (NY_RACE, 2.57), ([196967 // 9] * 9, 2.81), ([196967 - 8] + [1] * 8, 1.79)])
def test_laplace_cost_ratio_closed_form_vs_simulation(sizes, ratio):
    R, gamma, eps = 1.0, 0.1, 1.0
    closed = me.population_error_sd(sizes, R, gamma, eps) / me.population_error_sd(sizes, R, gamma, eps, False)
    assert closed == pytest.approx(ratio, abs=0.01)
    lo, hi = me.cost_ratio_bounds(len(sizes), sum(sizes), R, gamma)
    assert lo <= closed <= hi
    sim = me.simulate_laplace_cost(sizes, R, gamma, eps, 40000, np.random.default_rng(1))
    # sd of a sample of 40000: relative standard error about 1/sqrt(2 * 40000) for the Gaussian part
    assert sim["sd_stratified"] == pytest.approx(me.population_error_sd(sizes, R, gamma, eps), rel=0.03)
    assert sim["sd_pooled"] == pytest.approx(me.population_error_sd(sizes, R, gamma, eps, False), rel=0.03)


def test_stratified_estimator_error_matches_theory_on_real_draws():
    sizes = np.array([2000, 500, 100])
    R, gamma, eps = 1.0, 0.1, 0.5
    groups = np.repeat(np.arange(3), sizes)
    rng = np.random.default_rng(3)
    x = rng.normal(0.3, 1.0, groups.size)
    runs = np.array([me.stratified_mean(x, groups, 3, R, gamma, eps, rng).population for _ in range(4000)])
    emp = np.bincount(groups, weights=np.clip(x, -me.clip_bound(sizes, R, gamma)[groups],
                                              me.clip_bound(sizes, R, gamma)[groups])).sum() / x.size
    assert runs.mean() == pytest.approx(emp, abs=4 * me.population_error_sd(sizes, R, gamma, eps) / math.sqrt(4000))
    assert runs.std() == pytest.approx(me.population_error_sd(sizes, R, gamma, eps), rel=0.05)


@pytest.mark.slow
def test_gaussian_means_match_their_closed_form():
    # rho-zCDP versions: the clipped mean's noise sd is (2B/n)/sqrt(2 rho), and the stratified
    # population error adds one such term per stratum, weighted by g_i/n
    sizes = np.array([3000, 400, 60])
    R, gamma, rho = 1.0, 0.1, 0.08
    groups = np.repeat(np.arange(3), sizes)
    rng = np.random.default_rng(9)
    x = np.clip(rng.normal(0.2, 1.0, groups.size), -2.5, 2.5)   # nothing clipped: the error is the noise
    n = x.size
    pooled = np.array([me.clipped_mean(x, R, gamma, rho, rng, noise="gaussian") for _ in range(4000)])
    assert pooled.std() == pytest.approx(2 * me.clip_bound(n, R, gamma) / n / math.sqrt(2 * rho), rel=0.05)
    assert pooled.std() == pytest.approx(me.population_error_sd(sizes, R, gamma, rho, False, "gaussian"), rel=0.05)
    strat = np.array([me.stratified_mean(x, groups, 3, R, gamma, rho, rng, noise="gaussian").population
                      for _ in range(4000)])
    assert strat.mean() == pytest.approx(x.mean(), abs=4 * strat.std() / math.sqrt(4000))
    assert strat.std() == pytest.approx(me.population_error_sd(sizes, R, gamma, rho, True, "gaussian"), rel=0.05)
    with pytest.raises(ValueError, match="laplace' or 'gaussian"):
        me.stratified_mean(x, groups, 3, R, gamma, rho, rng, noise="cauchy")


def test_mean_estimation_curves_theory_over_simulation():
    df = me.mean_estimation_curves([800, 150, 50], 1.0, 0.1, [0.5, 2.0], 300, np.random.default_rng(0))
    for eps in (0.5, 2.0):
        for method in ("stratified", "pooled"):
            part = df[(df.epsilon == eps) & (df.method == method)]
            theory = part[part.kind == "theory sd"]["value"].iloc[0]
            mae = part[part.kind == "simulated |error|"]["value"].mean()
            # Laplace sums: mean |error| lies between sqrt(2/pi) sd (Gaussian) and sd/sqrt(2) (one Laplace)
            assert 0.6 * theory < mae < 0.9 * theory
    th = df[df.kind == "theory sd"].set_index(["epsilon", "method"])["value"]
    assert th[(0.5, "stratified")] > th[(2.0, "stratified")] and th[(0.5, "stratified")] > th[(0.5, "pooled")]


def test_weights_policies_normalised_and_checked():
    sizes = np.array([10.0, 30.0, 60.0])
    assert me.recombination_weights(sizes, "exact") == pytest.approx([0.1, 0.3, 0.6])
    w = me.recombination_weights(sizes, "dp", np.random.default_rng(0), count_epsilon=1.0)
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
    assert me.recombination_weights(sizes, "user", user_weights=[1, 1, 2]) == pytest.approx([0.25, 0.25, 0.5])
    with pytest.raises(ValueError, match="exactly 3 user weights"):
        me.recombination_weights(sizes, "user", user_weights=[1, 2])
    with pytest.raises(ValueError, match="positive count epsilon"):
        me.recombination_weights(sizes, "dp", np.random.default_rng(0))
    with pytest.raises(ValueError, match="Weight policy"):
        me.recombination_weights(sizes, "census")


def test_dp_weights_charge_count_epsilon():
    x = np.zeros(300)
    groups = np.repeat([0, 1, 2], 100)
    res = me.stratified_mean(x, groups, 3, 1.0, 0.1, 0.7, np.random.default_rng(0), policy="dp", count_epsilon=0.2)
    assert res.unit == "epsilon" and res.budget_total == pytest.approx(0.9)
    exact = me.stratified_mean(x, groups, 3, 1.0, 0.1, 0.7, np.random.default_rng(0))
    assert exact.unit == "epsilon" and exact.budget_total == pytest.approx(0.7)

    assert exact.population == pytest.approx(exact.weights @ exact.group_means)


def test_gaussian_stratified_mean_with_dp_weights_states_one_unit():
    """Gaussian means spend rho; Laplace DP weights spend pure epsilon. The total is one rho:
    rho + eps_c^2 / 2 (0.3 + 0.2^2 / 2 = 0.32), not rho + eps_c (0.5)."""
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(3), [50, 100, 200])
    x = rng.normal(0, 1, groups.size)
    res = me.stratified_mean(x, groups, 3, 1.0, 0.1, 0.3, np.random.default_rng(0), policy="dp",
                             count_epsilon=0.2, noise="gaussian")
    assert res.unit == "rho"
    assert res.budget_total == pytest.approx(0.3 + 0.2 ** 2 / 2)
    assert res.budget_total != pytest.approx(0.5)
    frame = res.ledger.to_frame()
    assert set(frame["unit"]) == {"rho", "epsilon"}
    # stated as (epsilon, delta) it goes through the one tight conversion in core.privacy
    from core.privacy.accounting import rho_to_epsilon
    assert res.ledger.total("epsilon", delta=1e-6) <= 0.2 + rho_to_epsilon(0.3, 1e-6) + 1e-12
    with pytest.raises(ValueError, match="finite"):
        me.stratified_mean(x, groups, 3, 1.0, 0.1, float("nan"), np.random.default_rng(0))


def test_clip_interval_is_symmetric():
    B = float(me.clip_bound(100, 2.0, 0.1))
    assert B == pytest.approx(2.0 + math.sqrt(math.log(1000)))
    assert float(me.clip_bound(100, 2.0, 0.1, "proof")) == pytest.approx(2.0 + math.sqrt(2 * math.log(1000)))
    # values far outside are clipped to +-B, so a huge budget returns the clipped mean
    got = me.clipped_mean(np.array([-1e6, 1e6, 1e6]), 2.0, 0.1, 1e12, np.random.default_rng(0))
    B3 = float(me.clip_bound(3, 2.0, 0.1))
    assert got == pytest.approx(B3 / 3, abs=1e-6)
    with pytest.raises(ValueError, match="budget must be a positive"):
        me.clipped_mean(np.ones(3), 1.0, 0.1, 0.0, np.random.default_rng(0))


def test_coinpress_acceptance_on_the_mixture():
    df = me.simulate_mixture_coinpress(10000, 0.3, 3, 20, np.random.default_rng(0))
    mae = df.groupby("method")["abs_error"].mean()
    assert mae["Strat"] <= 0.01 and mae["PubStrat"] <= 0.01 and mae["COINPRESS"] <= 0.01
    small = me.simulate_mixture_coinpress(1000, 0.3, 3, 20, np.random.default_rng(0)).groupby("method")["abs_error"].mean()
    assert small["Strat"] > mae["Strat"] and small["COINPRESS"] > mae["COINPRESS"]


def test_coinpress_single_stratum_total_rho():
    x = np.random.default_rng(0).normal(1.5, 1.0, 50000)
    est = me.coinpress_mean(x, -3.0, 3.0, [0.125, 0.375], np.random.default_rng(1))
    assert est == pytest.approx(x.mean(), abs=0.01)


def test_group_error_table_who_pays():
    t = me.group_error_table([5000, 500, 50], [0.0, 0.6, -0.6], 1.0, 0.1, 1.0, 300, np.random.default_rng(0))
    # stratified per-group error tracks its closed form: mean |Laplace| = b, sd = sqrt(2) b
    ratio = t["stratified mean |error|"] / (t["stratified theory sd"] / math.sqrt(2))
    assert ratio.between(0.85, 1.15).all()
    # the pooled mean misses the minority groups by about their distance from the population mean
    assert t["pooled mean |error|"].iloc[1] == pytest.approx(0.6 - (500 * 0.6 - 50 * 0.6) / 5550, abs=0.08)
    assert (t["pooled mean |error|"].iloc[1:] > t["stratified mean |error|"].iloc[1:]).all()
    assert t.attrs["population"]["stratified"] > 0
    with pytest.raises(ValueError, match="one mean per group"):
        me.group_error_table([10, 10], [0.0], 1.0, 0.1, 1.0, 5, np.random.default_rng(0))


def test_gaussian_noise_on_the_mean_tab_runs_at_the_equivalent_rho():
    from core.privacy.accounting import rho_for_epsilon, rho_to_epsilon
    rho = me.noise_budget(1.0, "gaussian", 1e-6)
    assert rho == pytest.approx(rho_for_epsilon(1.0, 1e-6)) and rho_to_epsilon(rho, 1e-6) == pytest.approx(1.0)
    assert me.noise_budget(1.0, "laplace") == 1.0
    t = me.group_error_table([5000, 500, 50], [0.0, 0.6, -0.6], 1.0, 0.1, 1.0, 400, np.random.default_rng(0),
                             noise="gaussian", delta=1e-6)
    # per-group error is |N(0, sd)|: its mean is sqrt(2/pi) sd with sd = 2 B / (g sqrt(2 rho))
    sd = 2 * me.clip_bound(np.array([5000, 500, 50]), 1.0, 0.1) / np.array([5000, 500, 50]) / math.sqrt(2 * rho)
    assert t["stratified theory sd"].to_numpy() == pytest.approx(sd)
    ratio = t["stratified mean |error|"] / (t["stratified theory sd"] * math.sqrt(2 / math.pi))
    assert ratio.between(0.85, 1.15).all()
    curves = me.mean_estimation_curves([800, 150, 50], 1.0, 0.1, [1.0], 300, np.random.default_rng(1),
                                       noise="gaussian", delta=1e-6)
    for method in ("stratified", "pooled"):
        part = curves[curves.method == method]
        theory = part[part.kind == "theory sd"]["value"].iloc[0]
        assert part[part.kind == "simulated |error|"]["value"].mean() == pytest.approx(
            theory * math.sqrt(2 / math.pi), rel=0.12)
    with pytest.raises(ValueError, match="noise must be"):
        me.noise_budget(1.0, "cauchy")


@pytest.mark.parametrize("R, gamma", [(0.0, 0.1), (-1.0, 0.1), (float("nan"), 0.1), (float("inf"), 0.1),
                                      (1.0, 0.0), (1.0, 1.0), (1.0, -0.5), (1.0, float("nan"))])
def test_mean_model_outside_its_range_is_refused_with_a_value_error(R, gamma):
    """|mu| <= R needs R > 0 and the failure probability gamma lies in (0, 1): anything else is a
    message, not a clip radius of R alone (R = 0 used to pass silently) or an infinite one."""
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="R|gamma"):
        me.mean_estimation_curves([100, 200], R, gamma, [1.0], 1, rng)
    with pytest.raises(ValueError, match="R|gamma"):
        me.clipped_mean(np.ones(5), R, gamma, 1.0, rng)
