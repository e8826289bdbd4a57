"""Run-time estimates: the work sentence and its counts in closed form, monotonicity, the speed corrections.

Every figure here is the cost model's arithmetic on fixed coefficients (speed 1, a frozen clock for the
observed runs): nothing is timed, so a busy machine cannot change an outcome. Properties of the model's
seconds are checked as ratios between two of its figures."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dataclasses import replace

from core import estimates
from core.contracts import DataRef
from core.estimates import ESTIMATORS, ObservedSpeed, default_costs, estimate, observe, speed_correction
from core.synthesis import AIMParams, GEMParams, SweepPlan, SynthesisPlan
from core.synthesis import cost as synthesis_cost
from core.synthesis.cost import fit_features, sweep_seconds, sweep_shape

import core.census, core.coherence, core.districts, core.fairness  # noqa: E401,F401,E402  (their cost models)

DEFAULT_COSTS = default_costs()
COSTS = estimates.merge_costs(DEFAULT_COSTS, {"probe_seconds": None})


@pytest.fixture(autouse=True)
def _fresh_observations(monkeypatch):
    estimates.OBSERVED.reset()
    # runs observed within one test are simultaneous: their weights never depend on how fast it runs
    monkeypatch.setattr(estimates.OBSERVED, "clock", lambda: 0.0)
    yield
    estimates.OBSERVED.reset()


def model_ratio(a, b, *, less: float = 0.0, per: float | None = None) -> float:
    """The cost model's figure for ``a`` less ``less``, over ``b``'s less ``less`` (or over ``per``): a
    ratio of two predictions on fixed coefficients, never a measured time."""
    return (a.seconds - less) / ((b.seconds - less) if per is None else per)


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
    # 100 rows train on the 62-row generator batch (1000 / 16, the largest bucket not above 100 rows),
    # as GEM does; the cost once counted the full 1000 rows
    unit = 40 * 62 * 6 / 1e9
    assert fit_features("gem", params, 100, dims, share=0.5, stratum=True)["units"] == pytest.approx(50 * unit)
    assert fit_features("gem", params, 100, dims, share=0.01, stratum=True)["units"] == pytest.approx(10 * unit)
    assert fit_features("gem", params, 100, dims)["units"] == pytest.approx(100 * unit)
    # AIM: 16 rounds per column unless capped, times the two-way cells (4 x 2 = 8)
    assert fit_features("aim", AIMParams(), 10, dims)["units"] == pytest.approx(32 * 8 / 1e5)


@pytest.mark.slow
@pytest.mark.parametrize("synth", ["independent", "mst", "aim", "gem"])
def test_more_rows_seeds_epsilons_or_strata_are_never_cheaper(synth):
    """The cost model's order, from fixed coefficients and no clock: a bigger sweep never costs less."""
    def model(plan_, frame_, costs=COSTS):
        return estimate(plan_, frame_, costs=costs, speed=1.0).raw_seconds

    base = model(plan(synth), frame())
    bigger = [model(plan(synth), frame(rows=20_000)), model(plan(synth, seeds=(0, 1, 2)), frame()),
              model(plan(synth, eps=(0.1, 0.5, 1.0, 5.0)), frame()), model(plan(synth), frame(a=8))]
    assert min([base, *bigger]) == base                   # the smallest sweep is the cheapest
    fitted = estimates.load_costs(estimates.COSTS_PATH)   # this machine's fitted coefficients keep the order
    small, large = model(plan(synth), frame(), fitted), model(plan(synth), frame(rows=20_000), fitted)
    assert min(small, large) == small


def modelled(shape, n_workers: int) -> float:
    """The cost model's figure for ``shape`` from the fixed coefficients above: arithmetic, no clock."""
    return sweep_seconds(shape, COSTS, n_workers=n_workers)


def test_one_worker_costs_the_sum_of_the_fits_and_more_workers_never_more():
    shape = sweep_shape(plan("mst"), frame())
    half = replace(shape, seeds=1)
    speed_up = modelled(shape, 1) / modelled(shape, 2)
    growth = modelled(shape, 1) / modelled(half, 1)
    assert speed_up >= 1.0                                # a second worker never predicts a slower sweep
    assert growth == pytest.approx(2.0)                   # two seeds are twice the fits of one


def test_speed_correction_is_the_ratio_of_probe_times_and_scales_the_estimate():
    assert speed_correction(0.1, 0.25) == pytest.approx(2.5)
    assert speed_correction(None, 0.25) == 1.0
    assert speed_correction(0.1, 100.0) == 10.0          # bounded
    one = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    two = estimate(plan(), frame(), costs=COSTS, speed=2.0)
    scaled, model_ratio = two.seconds / one.seconds, two.raw_seconds / one.raw_seconds
    assert scaled == pytest.approx(2.0)                   # the correction scales the stated figure ...
    assert model_ratio == pytest.approx(1.0)              # ... and leaves the fitted model's alone
    band = (two.seconds / two.low, two.high / two.seconds)
    assert band == pytest.approx((2.0, 2.0))              # the stated range: half to twice the figure


def test_observed_runs_keep_a_geometric_mean_correction():
    """No clock is read: the "measured" seconds handed to ``observe`` are made-up multiples of a prediction
    from fixed coefficients, and what is checked is the correction's arithmetic."""
    est = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    twice, half = (factor * est.seconds for factor in (2.0, 0.5))     # made-up "measured" runs
    assert observe(est, twice) == pytest.approx(2.0)
    again = estimate(plan(), frame(), costs=COSTS, speed=1.0)
    assert model_ratio(again, est) == pytest.approx(2.0)
    assert again.observed == pytest.approx(2.0)
    # the second run measured at half the uncorrected prediction: ratios 2 and 1/2 cancel
    assert observe(again, half) == pytest.approx(1.0)
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
    fixed = COSTS["coherence"]["fixed"]                   # closed form on fixed coefficients: twice the fits
    assert model_ratio(longer, audit, less=fixed) == pytest.approx(2.0)
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
    # closed form on fixed coefficients: the ensemble adds its runs, its chains' steps and its districts
    c, e = COSTS["districts"], base.replace(ensemble=EnsemblePlan(runs=4, n_square=50)).ensemble
    added = (c["per_run"] * 3 * 4 + c["per_step"] * 40 * len(e.recom_units)
             + c["per_district"] * (50 + len(e.disconn_units) * e.n_disconn))
    assert model_ratio(ens, est, less=est.seconds, per=added * 16 * 4 * 16 / 4096) == pytest.approx(1.0)


def test_a_plan_without_an_estimator_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="No time estimate"):
        estimate(SweepPlan())
    from core.coherence import AuditPlan
    from core.districts import DistrictPlan
    from core.fairness import GroupFairnessPlan, LearningPlan
    assert {SynthesisPlan, LearningPlan, GroupFairnessPlan, AuditPlan, DistrictPlan} <= set(ESTIMATORS)


def test_a_sweepless_synthesis_plan_says_what_to_set():
    with pytest.raises(ValueError, match="no sweep"):
        sweep_shape(plan().replace(sweep=None), frame())


def test_a_synthesis_plan_without_fits_costs_the_overview_and_each_tab_adds_its_fits():
    from core.synthesis import MarginalsPlan, ReleasePlan

    overview = estimate(plan().replace(sweep=None), frame(), costs=COSTS, speed=1.0)
    assert overview.raw_seconds == pytest.approx(COSTS["synthesis"]["score"]["fixed"])
    assert overview.units == 0
    base = plan("mst").replace(sweep=None)
    marg = estimate(base.replace(marginals=MarginalsPlan(1.0, 0)), frame(), costs=COSTS, speed=1.0)
    assert marg.units == 36 + 1                       # every stratum's model and the pooled one
    pooled = estimate(base.replace(release=ReleasePlan(1.0, "pooled")), frame(), costs=COSTS, speed=1.0)
    strat = estimate(base.replace(release=ReleasePlan(1.0, "stratified")), frame(), costs=COSTS, speed=1.0)
    assert (pooled.units, strat.units) == (1, 36)
    # 36 stratum models cost more than one pooled model; the marginals fit both and score them
    assert marg.raw_seconds > strat.raw_seconds > pooled.raw_seconds > 0


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


# --------------------------------------------------------------------------------------------------
# GEM's cost follows the rounds and generator rows each fit runs; workers; suggestions; decay
# --------------------------------------------------------------------------------------------------

def test_gem_fit_of_a_small_stratum_counts_its_small_batch_and_its_cut_rounds():
    from core.synthesis.cost import gem_fit_plan

    params = GEMParams(rounds=100, steps=40, batch=1000, scale_rounds=True)
    rho = 0.01
    # share 0.1: 10 rounds; their cut: c = 1 - (0.67^2 / 8) / (0.67^2 / 8 + 0.33^2 / 2) of each later
    # round measures, and 1 + floor(100 sqrt(2 c rho (1 - 1/10)) / 6.4) = 2 rounds fit, at least 3
    c = 1 - (0.67 ** 2 / 8) / (0.67 ** 2 / 8 + 0.33 ** 2 / 2)
    assert 1 + int(100 * np.sqrt(2 * c * rho * 0.9) / 6.4) == 2
    assert gem_fit_plan(params, 100, share=0.1, stratum=True, rho=rho) == (3, 62)
    feats = fit_features("gem", params, 100, [4, 2], share=0.1, stratum=True, rho=rho)
    assert feats["units"] == pytest.approx(3 * 40 * 62 * 6 / 1e9)
    assert feats["steps"] == pytest.approx(3 * 40 * 6 / 1e6)
    # 30 rows: the 16-row batch; 5,000 rows at epsilon-sized rho 0.5: the whole batch, no cut
    assert gem_fit_plan(params, 30, share=0.01, stratum=True, rho=rho)[1] == 16
    assert gem_fit_plan(params, 5000, rho=0.5) == (100, 1000)
    # without scale_rounds the rounds stand as asked, the batch still follows the rows
    assert gem_fit_plan(GEMParams(rounds=100, batch=1000, scale_rounds=False), 100, 0.1, True, rho) == (100, 62)


def test_a_gem_sweep_costs_the_sum_of_its_fits_at_their_own_batch_and_rounds():
    from core.synthesis.gem import fit_rounds, generator_rows

    only_units = estimates.merge_costs(COSTS, {"synthesis": {
        "gem": {"fixed": 0.0, "data": 0.0, "units": 1.0, "steps": 0.0, "compile": 0.0},
        "score": {"fixed": 0.0, "data": 0.0}}})
    p = plan("gem", eps=(1.0,), seeds=(0,))
    df = frame()
    shape = sweep_shape(p, df)
    rho = shape.rhos[0]
    width = sum(shape.other_dims)
    steps, batch = GEMParams().steps, GEMParams().batch        # the plan's GEM settings

    def units(rows, rounds):
        rows = max(rows, 1.0)
        return fit_rounds(rounds, rows, rho - rho / rounds) * steps * generator_rows(batch, rows) * width

    strata = sum(units(r, max(10, int(np.ceil(100 * r / shape.rows)))) for r in shape.fitted_strata())
    pooled = (fit_rounds(100, shape.rows, rho - rho / 100) * steps * generator_rows(batch, shape.rows)
              * (width + sum(shape.strata_dims)))
    assert sweep_seconds(shape, only_units, n_workers=1) == pytest.approx((strata + pooled) / 1e9)
    # every stratum here has under 100 training rows: the full batch would have cost over 10 times more
    full = len(shape.fitted_strata()) * 10 * steps * batch * width
    assert strata * 10 < full


@pytest.mark.parametrize("synth, eps, seeds", [("gem", (1.0,), (0,)), ("mst", (0.1, 1.0, 5.0), (0, 1))])
def test_more_workers_never_predict_a_slower_sweep(synth, eps, seeds):
    slow = estimates.merge_costs(COSTS, {"synthesis": {"parallel_efficiency": 0.376, "pool_start": 5.0}})
    shape = sweep_shape(plan(synth, eps=eps, seeds=seeds), frame())
    one = sweep_seconds(shape, slow, n_workers=1)
    two = sweep_seconds(shape, slow, n_workers=2)
    assert two <= one
    assert sweep_seconds(shape, slow, n_workers=8) <= two
    if len(eps) * len(seeds) == 1:     # 0.376 x 2 lanes < 1: the fan-out gains nothing, one process stands
        assert two == pytest.approx(one)


def test_suggestions_carry_the_headline_corrections_and_epsilon_parts_add_up():
    p, df = plan("gem"), frame()
    shape = sweep_shape(p, df)
    estimates.OBSERVED.add(1.0, 1.5)                  # observed factor 1.5, speed 2: factor 3
    est = estimate(p, df, costs=COSTS, speed=2.0)
    assert est.factor == pytest.approx(3.0)
    assert est.seconds == pytest.approx(3.0 * sweep_seconds(shape, COSTS))
    parts = synthesis_cost.epsilon_parts(shape, COSTS)
    assert len(parts) == 3
    assert sum(parts) == pytest.approx(sweep_seconds(shape, COSTS))
    assert sum(parts) * est.factor == pytest.approx(est.seconds)
    eps_tip = next(s for s in est.suggestions if s.startswith("Fewer epsilons"))
    assert eps_tip == (f"Fewer epsilons: of the whole run, epsilon 0.1 takes {estimates.duration_words(3 * parts[0])}, "
                       f"epsilon 1 {estimates.duration_words(3 * parts[1])}, "
                       f"epsilon 5 {estimates.duration_words(3 * parts[2])}.")
    one_seed = sweep_seconds(replace(shape, seeds=1), COSTS)
    assert est.seconds / 2 <= 3 * one_seed <= est.seconds
    seed_tip = next(s for s in est.suggestions if s.startswith("Fewer seeds"))
    assert seed_tip == f"Fewer seeds: 1 seed instead of 2 takes {estimates.duration_words(3 * one_seed)}."


def test_other_tools_suggestions_are_corrected_like_their_headline():
    from core.coherence import AuditPlan

    one = estimate(AuditPlan(trials=120), costs=COSTS, speed=1.0)
    four = estimate(AuditPlan(trials=120), costs=COSTS, speed=4.0)
    tip = next(s for s in four.suggestions if s.startswith("Fewer trials"))
    assert tip.startswith(f"Fewer trials: 20 instead of 120 takes {estimates.duration_words(four.seconds / 6)}")
    assert tip.endswith("(a PASS at beta 0.05 needs 59).")
    assert one.suggestions != four.suggestions


def test_observed_correction_is_a_mean_decaying_with_age():
    now = [0.0]
    speed = ObservedSpeed(clip=5.0, half_life=100.0, clock=lambda: now[0])
    assert speed.add(1.0, 2.0) == pytest.approx(2.0)
    now[0] = 100.0                                     # the first run now weighs 1/2
    # exp((0.5 ln 2 + ln(1/2)) / 1.5) = 2^(-1/3)
    assert speed.add(1.0, 0.5) == pytest.approx(2 ** (-1 / 3))
    now[0] = 300.0                                     # weights 1/8 and 1/4 before the third run's 1
    expected = np.exp((0.125 * np.log(2) + 0.25 * np.log(0.5) + np.log(3.0)) / (0.125 + 0.25 + 1.0))
    assert speed.add(1.0, 3.0) == pytest.approx(expected)
    assert speed.count() == 3
    with pytest.raises(ValueError, match="half-life"):
        ObservedSpeed(half_life=0.0)


def test_the_speed_probe_reads_the_clock_it_is_given():
    from itertools import count

    ticks = count(0.0, 0.5)                          # every reading half a second after the last
    assert estimates.probe_seconds(repeats=3, clock=lambda: next(ticks)) == pytest.approx(0.5)


def test_the_learner_is_timed_in_waves_of_fits_over_the_workers():
    """Fits spread over the workers: ceil(fits / lanes) waves of T rounds; a slack of 1 is solved directly."""
    from core.fairness.cost import estimate_learner
    from core.fairness.frontier import FrontierPlan
    from core.fairness.learning_plan import ConstraintTable, LearningPlan

    table = ConstraintTable(i=(0,), j=(1,), weight=(1.0,), w_ij=(0.0,), w_ji=(0.0,), agreement=(1.0,))
    c = COSTS["learner"]
    ten = LearningPlan(constraints=table, frontier=FrontierPlan(T=1000))   # 0.0 ... 0.8 and 1.0: nine fits
    assert estimate_learner(ten, None, COSTS, n_workers=2).seconds == pytest.approx(
        c["fixed"] + 5 * 1000 * c["per_round"])
    assert estimate_learner(ten, None, COSTS, n_workers=1).seconds == pytest.approx(
        c["fixed"] + 9 * 1000 * c["per_round"])
    three = LearningPlan(constraints=table, frontier=FrontierPlan(gammas=(0.0, 0.2, 0.4), T=500))
    assert estimate_learner(three, None, COSTS, n_workers=2).seconds == pytest.approx(
        c["fixed"] + 2 * 500 * c["per_round"])
