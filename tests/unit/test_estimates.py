"""Run-time estimates: the work sentence and its counts in closed form, monotonicity, the speed corrections."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from core import estimates
from core.contracts import DataRef
from core.estimates import (DEFAULT_COSTS, ESTIMATORS, ObservedSpeed, estimate, fit_features, observe,
                            speed_correction, sweep_seconds, sweep_shape)
from core.synthesis import AIMParams, GEMParams, SweepPlan, SynthesisPlan

COSTS = estimates.merge_costs(DEFAULT_COSTS, {"probe_seconds": None})


@pytest.fixture(autouse=True)
def _fresh_observations():
    estimates.OBSERVED.reset()
    yield
    estimates.OBSERVED.reset()


def frame(rows: int = 3500, seed: int = 0, a: int = 6, b: int = 6) -> pd.DataFrame:
    """Two strata columns with a x b categories (every stratum present) and two other columns."""
    rng = np.random.default_rng(seed)
    cat = lambda k, n: pd.Categorical(rng.integers(0, k, n), categories=range(k))  # noqa: E731
    df = pd.DataFrame({"a": cat(a, rows), "b": cat(b, rows), "c": cat(4, rows), "y": cat(2, rows)})
    df.loc[: a * b - 1, "a"] = np.repeat(np.arange(a), b)[: a * b]
    df.loc[: a * b - 1, "b"] = np.tile(np.arange(b), a)[: a * b]
    return df


def plan(synth: str = "gem", eps=(0.1, 1.0, 5.0), seeds=(0, 1), **kw) -> SynthesisPlan:
    return SynthesisPlan(data=DataRef("cps"), columns=("a", "b", "c", "y"), strata=("a", "b"), target="y",
                         synthesizer=synth, sweep=SweepPlan(epsilons=tuple(eps), seeds=tuple(seeds)), **kw)


def test_work_sentence_counts_strata_times_epsilons_times_seeds():
    est = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    assert est.units == 216                    # 36 strata x 3 epsilons x 2 seeds
    assert est.work == "36 strata x 6 fits = 216 GEM fits (3 epsilons x 2 seeds), plus 6 pooled fits"
    assert est.kind == "SynthesisPlan"
    one = estimate(plan("mst", eps=(1.0,), seeds=(0,)), frame(), costs=COSTS, speed=1.0)
    assert one.work == "36 strata x 1 fit = 36 MST fits (1 epsilon x 1 seed), plus 1 pooled fit"


def test_small_strata_policies_change_the_models_fitted():
    df = frame(rows=400)
    small = int(pd.crosstab(df["a"], df["b"]).to_numpy().min() * 0.8) + 2   # above the smallest stratum
    sizes = df.groupby(["a", "b"], observed=True).size().to_numpy() * 0.8
    n_small = int((sizes < small).sum())
    assert 0 < n_small < 36
    merged = estimate(plan(min_stratum_size=small, small_action="merge"), df, costs=COSTS, speed=1.0)
    dropped = estimate(plan(min_stratum_size=small, small_action="drop"), df, costs=COSTS, speed=1.0)
    assert merged.units == (36 - n_small + 1) * 6
    assert dropped.units == (36 - n_small) * 6


def test_gem_rounds_of_a_stratum_follow_its_share_with_a_floor_of_ten():
    params = GEMParams(rounds=100, steps=40, batch=1000)
    dims = [4, 2]
    unit = 40 * 1000 * 6 / 1e9
    assert fit_features("gem", params, 100, dims, share=0.5, stratum=True)["units"] == pytest.approx(50 * unit)
    assert fit_features("gem", params, 100, dims, share=0.01, stratum=True)["units"] == pytest.approx(10 * unit)
    assert fit_features("gem", params, 100, dims)["units"] == pytest.approx(100 * unit)
    # AIM: 16 rounds per column unless capped, times the two-way cells (4 x 2 = 8)
    assert fit_features("aim", AIMParams(), 10, dims)["units"] == pytest.approx(32 * 8 / 1e5)


@pytest.mark.parametrize("synth", ["independent", "mst", "aim", "gem"])
def test_more_rows_seeds_epsilons_or_strata_are_never_cheaper(synth):
    base = estimate(plan(synth), frame(), costs=COSTS, speed=1.0).seconds
    assert estimate(plan(synth), frame(rows=20_000), costs=COSTS, speed=1.0).seconds >= base
    assert estimate(plan(synth, seeds=(0, 1, 2)), frame(), costs=COSTS, speed=1.0).seconds >= base
    assert estimate(plan(synth, eps=(0.1, 0.5, 1.0, 5.0)), frame(), costs=COSTS, speed=1.0).seconds >= base
    assert estimate(plan(synth), frame(a=8), costs=COSTS, speed=1.0).seconds >= base
    fitted = estimates.load_costs(estimates.COSTS_PATH)   # this machine's fitted coefficients keep the order
    assert (estimate(plan(synth), frame(rows=20_000), costs=fitted, speed=1.0).seconds
            >= estimate(plan(synth), frame(), costs=fitted, speed=1.0).seconds)


def test_one_worker_costs_the_sum_of_the_fits_and_more_workers_never_more():
    shape = sweep_shape(plan("mst"), frame())
    assert sweep_seconds(shape, COSTS, n_workers=2) <= sweep_seconds(shape, COSTS, n_workers=1)
    half = estimates.replace(shape, seeds=1)
    assert sweep_seconds(shape, COSTS, n_workers=1) == pytest.approx(2 * sweep_seconds(half, COSTS, n_workers=1))


def test_speed_correction_is_the_ratio_of_probe_times_and_scales_the_estimate():
    assert speed_correction(0.1, 0.25) == pytest.approx(2.5)
    assert speed_correction(None, 0.25) == 1.0
    assert speed_correction(0.1, 100.0) == 10.0          # bounded
    one = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    two = estimate(plan(), frame(), costs=COSTS, speed=2.0)
    assert two.seconds == pytest.approx(2 * one.seconds)
    assert two.raw_seconds == pytest.approx(one.raw_seconds)
    assert (two.low, two.high) == pytest.approx((two.seconds / 2.0, two.seconds * 2.0))


def test_observed_runs_keep_a_geometric_mean_correction():
    est = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    assert observe(est, 2 * est.seconds) == pytest.approx(2.0)
    again = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    assert again.seconds == pytest.approx(2 * est.seconds)
    assert again.observed == pytest.approx(2.0)
    # the second run measured at half the uncorrected prediction: ratios 2 and 1/2 cancel
    assert observe(again, 0.5 * est.seconds) == pytest.approx(1.0)
    speed = ObservedSpeed(clip=5.0)
    assert speed.add(1.0, 100.0) == 5.0                   # one surprising run moves it at most 5x
    assert speed.add(1.0, -1.0) == 5.0                    # nonsense is ignored
    assert speed.count() == 1


def test_suggestions_name_only_what_applies(monkeypatch):
    monkeypatch.delenv("DASHBOARD_DASK_SCHEDULER", raising=False)
    many = estimate(plan("gem"), frame(), costs=COSTS, speed=1.0).suggestions
    assert any(s.startswith("Fewer seeds") for s in many)
    assert any("Dask" in s for s in many)
    one = estimate(plan("gem", seeds=(0,), eps=(1.0,)), frame(), costs=COSTS, speed=1.0).suggestions
    assert not any(s.startswith(("Fewer seeds", "Fewer epsilons")) for s in one)
    monkeypatch.setenv("DASHBOARD_DASK_SCHEDULER", "tcp://127.0.0.1:1")
    assert not any("Dask" in s for s in estimate(plan("gem"), frame(), costs=COSTS, speed=1.0).suggestions)
    cheap_aim = estimates.merge_costs(COSTS, {"synthesis": {"aim": {"fixed": 0.0, "data": 0.0, "units": 0.0}}})
    assert any(s.startswith("AIM instead of GEM") for s in estimate(plan("gem"), frame(), costs=cheap_aim,
                                                                     speed=1.0).suggestions)


def test_the_other_tools_state_their_work_in_closed_form():
    from core.coherence import AuditPlan
    from core.fairness.frontier import FrontierPlan
    from core.fairness.group_fairness_plan import GroupFairnessPlan, LexifairPlan
    from core.fairness.learning_plan import ConstraintTable, LearningPlan

    audit = estimate(AuditPlan(), costs=COSTS, speed=1.0)
    assert audit.work == "60 trials x 3 adversaries x 2 releases = 360 adversary fits"
    assert audit.units == 360
    longer = estimate(AuditPlan(trials=120), costs=COSTS, speed=1.0)
    assert longer.seconds > audit.seconds
    gf = estimate(GroupFairnessPlan(lexifair=LexifairPlan(levels=3, rounds=500)), costs=COSTS, speed=1.0)
    assert gf.work == "3 levels x 500 rounds = 1,500 classifier calls"
    table = ConstraintTable(i=(0,), j=(1,), weight=(1.0,), w_ij=(0.0,), w_ji=(0.0,), agreement=(1.0,))
    learner = estimate(LearningPlan(constraints=table, frontier=FrontierPlan(T=1000)), costs=COSTS, speed=1.0)
    n = len(FrontierPlan().values)
    assert learner.work == f"{n} slack values x 1,000 rounds = {n * 1000:,} learner rounds"
    assert learner.units == n * 1000


def test_districts_count_noisy_runs_and_chain_steps():
    from core.districts import DistrictPlan, EnsemblePlan

    base = DistrictPlan(grid_fanouts=(16, 4, 16))
    est = estimate(base, costs=COSTS, speed=1.0)
    assert est.work == f"{base.noise.runs} noisy runs"
    ens = estimate(base.replace(ensemble=EnsemblePlan(runs=4, n_square=50)), costs=COSTS, speed=1.0)
    assert ens.work == f"{base.noise.runs + 3 * 4} noisy runs, 50 random districts"
    assert ens.seconds > est.seconds


def test_a_plan_without_an_estimator_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="No time estimate"):
        estimate(SweepPlan())
    assert {"SynthesisPlan", "LearningPlan", "GroupFairnessPlan", "AuditPlan", "DistrictPlan"} <= set(ESTIMATORS)


def test_a_sweepless_synthesis_plan_says_what_to_set():
    with pytest.raises(ValueError, match="no sweep"):
        estimate(plan().replace(sweep=None), frame(), costs=COSTS)


def test_costs_file_is_written_over_the_defaults(tmp_path, monkeypatch):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"probe_seconds": 0.5, "synthesis": {"mst": {"fixed": 7.0}}}))
    monkeypatch.setenv("DASHBOARD_ESTIMATE_COSTS", str(path))
    costs = estimates.load_costs()
    assert costs["synthesis"]["mst"]["fixed"] == 7.0
    assert costs["synthesis"]["mst"]["units"] == DEFAULT_COSTS["synthesis"]["mst"]["units"]
    assert costs["learner"] == DEFAULT_COSTS["learner"]
    monkeypatch.setenv("DASHBOARD_ESTIMATE_COSTS", str(tmp_path / "missing.json"))
    assert estimates.load_costs()["synthesis"] == DEFAULT_COSTS["synthesis"]


def test_durations_are_said_in_seconds_then_minutes():
    assert estimates.duration_words(0.2) == "about 1 second"
    assert estimates.duration_words(42) == "about 42 seconds"
    assert estimates.duration_words(720) == "about 12 minutes"
    est = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    assert est.sentence().startswith("About ") and est.sentence().endswith(est.work)
