"""Ecological regression: closed-form fits, the three modes, and estimates on true vs noisy counts."""
import numpy as np
import pytest

from core.districts.ecological import (MIN_VOTES, ecological_fit, ecological_study, naive_gaussian_sigma,
                                       synthetic_election)
from core.geography.grid import synthetic_grid
from core.districts.noise import NoiseConfig


@pytest.fixture(scope="module")
def grid():
    return synthetic_grid((64, 4, 16), seed=5, precinct_side=4)


def test_fit_recovers_an_exact_line_and_weights_matter():
    x = np.array([0.0, 0.2, 0.5, 0.9, 1.0])
    y = 0.5 + 0.35 * x
    assert ecological_fit(x, y) == pytest.approx((0.85, 0.5))
    assert ecological_fit(x, y, weights=np.array([1, 5, 2, 7, 3])) == pytest.approx((0.85, 0.5))
    # one heavy outlier moves the weighted fit toward itself
    y2 = y.copy()
    y2[0] = 1.0
    light = ecological_fit(x, y2, weights=np.array([0.01, 1, 1, 1, 1]))
    heavy = ecological_fit(x, y2, weights=np.array([100, 1, 1, 1, 1]))
    assert abs(light[1] - 0.5) < abs(heavy[1] - 0.5)


def test_election_is_consistent(grid):
    elec = synthetic_election(grid.blocks, seed=1)
    assert (elec["votes"] <= grid.blocks["vap"]).all()
    assert (elec["candidate_votes"] <= elec["votes"]).all()


def test_true_count_estimates_near_simulated_truth_and_modes(grid):
    cfg = NoiseConfig((0.25,) * 4, runs=6, seed=2)
    res = ecological_study(grid.hierarchy, grid.blocks, cfg, election_seed=1, group_support=0.85, other_support=0.5)
    est = res.estimates
    assert len(est) == 3 * (2 * cfg.runs + 1)
    true = est[est["run"] == -1].set_index("mode")
    assert true.loc["weighted", "group_support"] == pytest.approx(0.85, abs=0.05)
    assert true.loc["weighted", "complement_support"] == pytest.approx(0.5, abs=0.03)
    p = res.precincts
    assert true.loc["filtered", "precincts_used"] == int((p["votes"] >= MIN_VOTES).sum())
    assert true.loc["all", "precincts_used"] == int((p["votes"] > 0).sum())
    assert true.loc["all", "precincts_used"] > true.loc["filtered", "precincts_used"]
    noisy = est[est["run"] >= 0]
    assert set(noisy["source"]) == {"noisy counts", "naive Gaussian"}
    noisy = noisy[noisy["source"] == "noisy counts"]
    # votes are exact and VAP is noised only slightly, so weighted noisy estimates stay near the true fit
    w = noisy[noisy["mode"] == "weighted"]
    assert abs(w["group_support"].mean() - true.loc["weighted", "group_support"]) < 0.05
    assert res.noisy_shares["run"].nunique() == 5
    assert res.noisy_shares["noisy_group_share"].dropna().between(0, 1).all()


def test_naive_gaussian_sigma_matches_the_l1_error():
    # E|N(0, s^2)| = s sqrt(2/pi): with b units and c attributes the expected L1 error is b c s sqrt(2/pi)
    s = naive_gaussian_sigma(1000.0, 50, 2)
    assert 50 * 2 * s * np.sqrt(2 / np.pi) == pytest.approx(1000.0)
    # the paper's Dallas baseline: sigma = 20 corresponds to E_avg = 20 b c sqrt(2/pi)
    assert naive_gaussian_sigma(20 * 827 * 2 * np.sqrt(2 / np.pi), 827, 2) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="at least one unit"):
        naive_gaussian_sigma(1.0, 0, 2)


def test_naive_baseline_rows_are_matched_to_the_runs(grid):
    cfg = NoiseConfig((0.25,) * 4, runs=4, seed=1)
    res = ecological_study(grid.hierarchy, grid.blocks, cfg, election_seed=2)
    naive = res.estimates[res.estimates["source"] == "naive Gaussian"]
    assert len(naive) == 3 * cfg.runs
    n_p = len(res.precincts)
    assert res.true_support["naive_sigma"] == pytest.approx(
        res.true_support["mean_l1_error"] * np.sqrt(np.pi) / (n_p * 2 * np.sqrt(2)))
