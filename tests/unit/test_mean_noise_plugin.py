"""A noise for the private means is one Spec line of ``NOISES``: the means study and the stratified-mean
release ask its object (unit, calibration, samplers, variance, 95% point) and never read its key.

The Laplace and Gaussian numbers below were computed before the means asked the object (when they
branched on the key); they must not move beyond float rounding.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import core.synthesis.mean_estimation as me
from core.contracts import DataRef, Spec
from core.privacy.mechanisms import (NoParams, NoiseMechanism, abs_laplace, get_mechanism, laplace_mean_abs,
                                     laplace_variance, sample_laplace)
from core.synthesis.mean_noise import MeanNoise
from core.synthesis.mean_release import MeanReleasePlan, release_stratified_mean
from core.synthesis.mean_study import means_ledger, run_means
from core.synthesis.plan import NOISES, MeansPlan, mean_noise

REL = 1e-12

# A Laplace mechanism that deliberately spends twice the needed noise: b = 2 sensitivity / epsilon.
# Pure epsilon-DP (more noise than Laplace needs), so every closed form is Laplace's with b doubled.
DOUBLED = NoiseMechanism("laplace_doubled", "Laplace at twice the scale", "epsilon", False, sample_laplace,
                         laplace_variance, laplace_mean_abs, abs_laplace,
                         calibration=lambda sens, eps: 2.0 * sens / eps)


@pytest.fixture
def doubled(monkeypatch):
    """A throwaway mean noise registered with one Spec line (removed again after the test)."""
    spec = Spec("doubled", "Laplace, doubled", lambda _params: MeanNoise("Doubled Laplace", DOUBLED), NoParams,
                help="Laplace noise at twice the scale its budget needs.")
    monkeypatch.setitem(NOISES._specs, "doubled", spec)
    return "doubled"


def _study(noise):
    return run_means(MeansPlan(noise=noise, runs=3, coinpress_runs=2, epsilons=(0.5, 2.0)), (200, 300, 50), 1e-9)


def _release(noise, policy="public", secure=False):
    return release_stratified_mean(MeanReleasePlan(
        data=DataRef("cps"), column="income", strata=("sex", "race"), epsilon=1.0, category="50K+", noise=noise,
        delta=1e-7, seed=5, size_policy=policy, sizes_declared_public=policy == "public"), secure=secure)


def test_a_noise_is_an_object_with_its_unit_calibration_variance_and_quantile():
    lap, gau = mean_noise("laplace"), mean_noise("gaussian")
    assert (lap.unit, gau.unit) == ("epsilon", "rho")
    assert lap.quantile95 == pytest.approx(math.log(20) / math.sqrt(2), rel=REL)      # b ln 20 over sd sqrt(2) b
    assert gau.quantile95 == pytest.approx(1.959963984540054, rel=REL)
    assert lap.scale_for(3.0, 0.5) == pytest.approx(6.0) and lap.variance(6.0) == pytest.approx(72.0)
    assert gau.scale_for(3.0, 0.5) == pytest.approx(3.0)                             # 3 / sqrt(2 x 0.5)
    with pytest.raises(ValueError, match="continuous"):
        MeanNoise("integers", get_mechanism("geometric"))
    with pytest.raises(ValueError, match="own delta"):
        MeanNoise("analytic", get_mechanism("analytic_gaussian"))
    with pytest.raises(ValueError, match="noise must be 'laplace' or 'gaussian'"):
        mean_noise("cauchy")


def test_laplace_and_gaussian_numbers_are_those_computed_when_the_means_branched_on_the_key():
    lap, gau = _study("laplace"), _study("gaussian")
    assert lap.summary["stratified_sd_at_eps1"] == pytest.approx(0.03292094339693646, rel=REL)
    assert gau.summary["stratified_sd_at_eps1"] == pytest.approx(0.13452005235811576, rel=REL)
    assert lap.summary["cost_multiplier"] == pytest.approx(1.6269627288550235, rel=REL)
    assert lap.guarantee == ("Every group's mean uses the full epsilon 1 (disjoint groups, parallel composition): "
                             "1-DP in total. Publishing a separate pooled mean as well would cost epsilon 2.")
    assert gau.guarantee.startswith("Every group's mean uses Gaussian noise at rho 0.015, which is (1, 1e-09)-DP")
    for noise, pop_sd, strat, clipped, theory in (
            ("laplace", [0.018309598031146075, 0.01141229122990358],
             [-0.09799807747414008, -0.2745281287927192, 0.2051717390732874], -0.14781479143206483,
             [0.02216594817148942, 0.10262271502445869, 0.46694608238105534]),
            ("gaussian", [0.06443346667923325, 0.04016109394891345],
             [-0.03831402581147215, -0.48664750091415343, -0.48282529363066595], 0.15654620735359673,
             [0.07800438220936061, 0.36114049460904596, 1.643234045276032])):
        b = me.noise_budget(1.0, noise, 1e-7)
        assert [me.population_error_sd([800, 150, 50], 1.0, 0.1, b, s, noise) for s in (True, False)] == \
            pytest.approx(pop_sd, rel=REL)
        x = np.random.default_rng(1).normal(0, 1, 300)
        g = np.repeat(np.arange(3), [200, 70, 30])
        res = me.stratified_mean(x, g, 3, 1.0, 0.1, b, np.random.default_rng(2), noise=noise)
        assert res.group_means.tolist() == pytest.approx(strat, rel=REL)
        assert me.clipped_mean(x, 1.0, 0.1, b, np.random.default_rng(3), noise=noise) == pytest.approx(clipped, rel=REL)
        t = me.group_error_table([500, 100, 20], [0.0, 0.3, -0.2], 1.0, 0.1, 1.0, 5, np.random.default_rng(4),
                                 noise=noise, delta=1e-7)
        assert t["stratified theory sd"].tolist() == pytest.approx(theory, rel=REL)


def test_laplace_and_gaussian_releases_are_those_computed_when_the_release_branched_on_the_key():
    expected = {
        ("laplace", "public"): ([0.00877123982834438, 0.03556558365374968, 0.015131775538123282],
                                [0.0028979786114202767, 0.0010858519367115287, 0.0003151099737907966],
                                [0.0026324441858157103, 0.03326542066729852, 0.014464277259702162]),
        ("gaussian", "public"): ([0.01589894243114498, 0.04433631074853511, 0.01483616166708529],
                                 [0.00912163851683355, 0.0034178129577816124, 0.0009918359171601542],
                                 [0.0, 0.03763752044538884, 0.012892198990878135]),
    }
    for (noise, policy), (mean, se, ci_low) in expected.items():
        rel = _release(noise, policy)
        assert rel.strata["mean"].tolist()[:3] == pytest.approx(mean, rel=REL)
        assert rel.strata["se"].tolist()[:3] == pytest.approx(se, rel=REL)
        assert rel.strata["ci_low"].tolist()[:3] == pytest.approx(ci_low, rel=REL, abs=1e-15)
    lap, gau = _release("laplace", "dp_count"), _release("gaussian", "dp_count")
    assert lap.overall["ci_low"].tolist() == pytest.approx([0.05987335691340382, 0.059587733341402785], rel=REL)
    assert gau.overall["ci_high"].tolist() == pytest.approx([0.06211560715051109, 0.0618766031609009], rel=REL)
    assert list(lap.ledger_table["unit"]) == ["epsilon"] * 3 and list(gau.ledger_table["unit"]) == ["rho"] * 3
    assert lap.ledger_table["measured"].iloc[0].endswith("Laplace scale 0.694")
    assert gau.ledger_table["measured"].iloc[0].endswith("sigma 2.93")


def test_a_noise_added_with_one_spec_line_runs_a_means_study(doubled):
    plan = MeansPlan(noise=doubled, runs=3, coinpress_runs=2, epsilons=(1.0,))
    study, lap = _study(doubled), _study("laplace")
    # twice the Laplace scale at the same epsilon: every closed-form sd doubles; the spend stays a pure epsilon
    assert study.summary["stratified_sd_at_eps1"] == pytest.approx(2 * lap.summary["stratified_sd_at_eps1"], rel=REL)
    assert study.group_errors["stratified theory sd"].tolist() == pytest.approx(
        (2 * lap.group_errors["stratified theory sd"]).tolist(), rel=REL)
    ledger = means_ledger(plan, 1e-9)
    assert ledger.is_pure() and ledger.total("epsilon") == pytest.approx(1.0)
    assert study.guarantee.startswith("Every group's mean uses the full epsilon 1")


def test_a_noise_added_with_one_spec_line_runs_a_mean_release(doubled):
    rel, lap = _release(doubled), _release("laplace")
    # its own unit (not "rho" because it is not Laplace) and its own 95% point (Laplace-shaped, 2.12 sd)
    assert list(rel.ledger_table["unit"]) == ["epsilon", "epsilon"]
    assert rel.budget.is_pure() and rel.budget.total("epsilon") == pytest.approx(1.0)
    assert rel.ledger_table["measured"].iloc[0].endswith("Laplace scale 1.25")   # 2 x 0.5 / 0.8
    assert rel.strata["se"].tolist() == pytest.approx((2 * lap.strata["se"]).tolist(), rel=REL)
    usable = rel.strata["ci_low"] > 0
    half = (rel.strata["mean"] - rel.strata["ci_low"])[usable]
    assert half.tolist() == pytest.approx((math.log(20) / math.sqrt(2) * rel.strata["se"])[usable].tolist(), rel=1e-9)
    with pytest.raises(ValueError, match="no secure sampler"):
        _release(doubled, secure=True)
