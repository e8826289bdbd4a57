"""Metrics on hand-made frames, and the sweep's tidy output and accounting on a small CPS sample."""
from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from core.datasets import load_cps
from core.synthesis.metrics import (ml_utility, one_way_tvd, parity_error, tvd_by_stratum, two_way_tvd,
                                    workload_error)
from core.privacy.accounting import rho_for_epsilon
from core.contracts import DataRef
from core.synthesis.plan import ReleasePlan, SweepPlan, SynthesisPlan
from core.synthesis.release import make_release
from core.synthesis.sweep import run_sweep


def test_tvd_identical_disjoint_and_half():
    real = pd.DataFrame({"a": [0, 0, 1, 1], "b": [0, 1, 0, 1]})
    dom = {"a": 2, "b": 2}
    assert one_way_tvd(real, real, dom)["tvd"].tolist() == [0.0, 0.0]
    other = pd.DataFrame({"a": [1, 1, 1, 1], "b": [0, 0, 0, 0]})
    assert one_way_tvd(real, other, dom)["tvd"].tolist() == pytest.approx([0.5, 0.5])
    two = two_way_tvd(real, other, dom)
    assert list(two.columns) == ["column_a", "column_b", "tvd"] and two["tvd"].iloc[0] == pytest.approx(0.75)
    # different sizes are normalised first
    assert one_way_tvd(real, pd.concat([real, real]), dom)["tvd"].max() == 0.0


def test_tvd_by_stratum_normalises_within_each_stratum():
    real = pd.DataFrame({"s": [0, 0, 1, 1], "x": [0, 1, 0, 0], "y": [0, 0, 1, 1]})
    synth = pd.DataFrame({"s": [0, 0, 0, 1], "x": [0, 1, 1, 1], "y": [0, 0, 0, 1]})
    dom = {"s": 2, "x": 2, "y": 2}
    out = tvd_by_stratum(real, synth, dom, ["s"]).set_index("stratum")
    assert out.loc[0, "real_rows"] == 2 and out.loc[0, "synth_rows"] == 3
    # stratum 0: x real (1/2, 1/2) vs synth (1/3, 2/3) -> 1/6 ; y identical -> 0
    assert out.loc[0, "tvd_1way"] == pytest.approx((1 / 6 + 0) / 2)
    # stratum 1: x real all 0 vs synth all 1 -> 1 ; y both all 1 -> 0
    assert out.loc[1, "tvd_1way"] == pytest.approx(0.5)
    assert out.loc[1, "tvd_2way"] == pytest.approx(1.0)


def test_three_way_workload_error_by_hand():
    real = pd.DataFrame({"a": [0, 0, 1, 1], "b": [0, 1, 0, 1], "c": [0, 0, 0, 0], "d": [1, 1, 1, 1]})
    dom = {"a": 2, "b": 2, "c": 2, "d": 2}
    assert workload_error(real, real, dom) == 0.0
    assert workload_error(real, pd.concat([real] * 3), dom) == 0.0          # sizes normalised
    flipped = real.assign(d=0)                                                # d differs in every row
    # triples with d (3 of 4) are disjoint (L1 = 2); (a, b, c) is identical (0)
    assert workload_error(real, flipped, dom) == pytest.approx(3 * 2.0 / 4)
    assert np.isnan(workload_error(real[["a", "b"]], real[["a", "b"]], dom))
    per = tvd_by_stratum(real, flipped, dom, ["a"]).set_index("stratum")
    # inside each stratum of a: triples of (b, c, d) only, all involve d -> 2
    assert per["workload_3way"].tolist() == pytest.approx([2.0, 2.0])


def test_parity_error_and_max_disparity_by_hand():
    real = pd.DataFrame({"g": [0, 0, 1, 1], "v": [2, 2, 4, 4]})
    synth = pd.DataFrame({"g": [0, 0, 1, 1], "v": [3, 3, 4, 2]})
    dom = {"g": 2, "v": 5}
    got = parity_error(real, synth, dom, ["g"], columns=["v"], definition="paper_codes")
    # group 0: |2-3|/2 = 0.5; group 1: |4-3|/4 = 0.25; overall: real 3, synth 3 -> 0; omega = 1/2
    assert got["parity_error"] == pytest.approx(0.75)
    assert got["max_disparity"] == pytest.approx(0.5)
    avg = parity_error(real, synth, dom, ["g"], columns=["v"], average=True, definition="paper_codes")
    assert avg["parity_error"] == pytest.approx(0.375)
    # a real mean of zero is skipped, not divided by
    zero = parity_error(pd.DataFrame({"g": [0, 1], "v": [0, 1]}), pd.DataFrame({"g": [0, 1], "v": [1, 1]}),
                        {"g": 2, "v": 2}, ["g"], columns=["v"], definition="paper_codes")
    assert np.isfinite(zero["parity_error"]) and zero["max_disparity"] == 0.0


def _relabel_and_near_zero_cases():
    """The two failures of the paper's code-mean parity error: a full relabelling of a nominal
    column, and a 40-row change in a column whose real code mean is almost zero."""
    rng = np.random.default_rng(0)
    n = 4000
    g = rng.integers(0, 2, n)
    # shares 1/3, 1/2, 1/6 (code mean 5/6); renaming 0->2, 1->0, 2->1 keeps the code mean at 5/6
    v = rng.choice(3, n, p=[1 / 3, 1 / 2, 1 / 6])
    real = pd.DataFrame({"g": g, "v": v})
    relabelled = real.assign(v=np.array([2, 0, 1])[v])
    # a column that is 0 in every row but two; the synthetic copy has 40 more ones
    z = np.zeros(n, np.int64)
    z[:2] = 1
    near_zero = real.assign(z=z)
    moved = near_zero.copy()
    moved.loc[moved.index[2:42], "z"] = 1
    return real, relabelled, near_zero, moved


def test_parity_error_on_codes_misses_relabelling_and_explodes_near_zero():
    real, relabelled, near_zero, moved = _relabel_and_near_zero_cases()
    dom = {"g": 2, "v": 3, "z": 2}
    swap = parity_error(real, relabelled, dom, ["g"], columns=["v"], definition="paper_codes")
    tiny = parity_error(near_zero, moved, dom, ["g"], columns=["z"], definition="paper_codes")
    assert swap["parity_error"] < 0.3            # a complete relabelling barely registers
    assert tiny["parity_error"] > 10             # 40 rows out of 4000 look like a disaster


def test_parity_error_on_proportions_scores_relabelling_and_bounds_small_changes():
    real, relabelled, near_zero, moved = _relabel_and_near_zero_cases()
    dom = {"g": 2, "v": 3, "z": 2}
    swap = parity_error(real, relabelled, dom, ["g"], columns=["v"])
    tiny = parity_error(near_zero, moved, dom, ["g"], columns=["z"])
    # relabelling: shares become 1/2, 1/6, 1/3; mean over categories of |dq|/p = (0.5 + 2/3 + 1) / 3,
    # counted for both groups and omega = 1/2 times overall: 2.5 times that
    assert swap["parity_error"] == pytest.approx(2.5 * (0.5 + 2 / 3 + 1) / 3, rel=0.1)
    # 40 of 4000 rows move into a category of real share 0.0005: |dq| ~ 0.01 is divided by the guard 0.05
    assert tiny["parity_error"] < 0.5
    assert tiny["parity_error"] > 0
    # identical data score exactly zero under both definitions
    for definition in ("proportions", "paper_codes"):
        assert parity_error(real, real, dom, ["g"], columns=["v"], definition=definition)["parity_error"] == 0
    with pytest.raises(ValueError, match="Parity definition"):
        parity_error(real, real, dom, ["g"], definition="codes")


def test_ml_utility_perfect_and_gaps():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, 400)
    train = pd.DataFrame({"x": x, "y": x})
    test = pd.DataFrame({"x": [0, 1, 0, 1], "y": [0, 1, 1, 0]})   # group 1 rows are mislabelled
    overall, by_group = ml_utility(train, test, "y", np.array([0, 0, 1, 1]), n_estimators=5)
    assert overall["accuracy"] == pytest.approx(0.5)
    assert overall["fpr_gap"] == pytest.approx(1.0) and overall["fnr_gap"] == pytest.approx(1.0)
    assert by_group.set_index("group")["accuracy"].tolist() == [1.0, 0.0]



def test_rate_gaps_skip_groups_where_the_rate_is_undefined():
    # group 0 has no real positives (no FNR) and group 2 no real negatives (no FPR); scoring those
    # as 0 would report gaps of 0.5 although every defined rate is 0.5
    train = pd.DataFrame({"x": [0, 1] * 50, "y": [0, 1] * 50})
    test = pd.DataFrame({"x": [0, 1, 0, 1, 0, 1, 1, 0],
                         "y": [0, 0, 1, 1, 0, 0, 1, 1]})
    group = np.array([0, 0, 1, 1, 1, 1, 2, 2])
    overall, by_group = ml_utility(train, test, "y", group, n_estimators=5)
    rates = by_group.set_index("group")
    assert np.isnan(rates.loc[0, "fnr"]) and np.isnan(rates.loc[2, "fpr"])
    assert rates.loc[[1, 2], "fnr"].tolist() == [0.5, 0.5] and rates.loc[[0, 1], "fpr"].tolist() == [0.5, 0.5]
    assert overall["fnr_gap"] == pytest.approx(0.0) and overall["fpr_gap"] == pytest.approx(0.0)

COLS = ("age_band", "education", "sex", "race", "income")


@pytest.fixture(scope="module")
def small_cps():
    return load_cps().sample(3000, random_state=0).reset_index(drop=True)


def _plan(columns=COLS, strata=("sex", "race"), epsilons=(1.0,), seeds=(0,), target="income", **kw):
    return SynthesisPlan(data=DataRef("cps"), columns=columns, strata=strata, target=target,
                         sweep=SweepPlan(epsilons=epsilons, seeds=seeds, n_trees=5), **kw)


@pytest.mark.slow
def test_sweep_is_tidy_and_spends_the_declared_budget(small_cps):
    plan = _plan(epsilons=(0.3, 3.0), seeds=(0, 1), count_share=0.2)
    res = run_sweep(plan, small_cps)
    assert set(res.overall_metrics["method"]) == {"stratified", "pooled"}
    assert set(res.overall_metrics["epsilon"]) == {0.3, 3.0}
    assert {"tvd_1way", "tvd_2way", "workload_3way", "parity_error", "max_disparity", "parity_error_codes",
            "max_disparity_codes", "accuracy", "fpr_gap", "fnr_gap"} <= set(res.overall_metrics["metric"])
    assert {"tvd_1way", "tvd_2way", "workload_3way", "accuracy"} == set(res.group_metrics["metric"])
    assert set(res.group_metrics["group"]) <= set(res.group_labels.values())
    assert len(res.strata) == 2 * 2 * 10  # every (eps, seed) lists all 10 sex x race strata
    led = res.ledger
    assert led[led["label"].str.startswith("stratum sizes")]["amount"].iloc[0] == pytest.approx(
        0.2 * rho_for_epsilon(0.3, 1e-9))
    assert "rho" in res.budget_statement


@pytest.mark.slow
def test_sweep_fanned_out_over_workers_gives_the_same_numbers(small_cps):
    # the page spreads a sweep's fits over the cores; every run seeds itself, so scheduling cannot matter
    plan = _plan(seeds=(0, 1))
    serial = run_sweep(plan, small_cps, n_jobs=1)
    fanned = run_sweep(plan, small_cps, n_jobs=2)
    pd.testing.assert_frame_equal(serial.overall_metrics, fanned.overall_metrics)
    pd.testing.assert_frame_equal(serial.group_metrics, fanned.group_metrics)


def test_worst_group_skips_measures_undefined_for_every_group(small_cps):
    # one column besides the strata: no two-way table inside any group, so its TVD is NaN everywhere
    from core.synthesis.sweep import worst_group_table
    res = run_sweep(_plan(columns=("sex", "race", "income")), small_cps)
    assert res.group_metrics.query("metric == 'tvd_2way'")["value"].isna().all()
    two = worst_group_table(res, "tvd_2way")
    # the population figure is over the same column pairs as the groups': none here either
    assert len(two) == 2 and two["worst_group"].isna().all() and two["population"].isna().all()
    assert res.measures == ("tvd_1way", "accuracy") and res.main_measure == "tvd_1way"
    one = worst_group_table(res, "tvd_1way")
    assert one["worst_group"].notna().all() and set(one["worst_group_name"]) <= set(res.group_labels.values())


def test_plan_requires_an_explicit_public_size_declaration():
    with pytest.raises(ValueError, match="tick the box"):
        _plan(size_policy="public")
    with pytest.raises(ValueError, match="must be among the columns"):
        _plan(columns=("age_band", "income"), strata=("sex",))


def test_release_has_labels_and_budget_statement(small_cps):
    plan = _plan(size_policy="public", sizes_declared_public=True).replace(release=ReleasePlan(epsilon=1.0))
    rel = make_release(plan, small_cps)
    assert len(rel.data) == len(small_cps) and list(rel.data.columns) == list(COLS)
    assert set(rel.data["sex"].astype(str)) <= set(small_cps["sex"].astype(str))
    assert rel.ledger_table["rho_equivalent"].max() == pytest.approx(rho_for_epsilon(1.0, 1e-9))
    assert "epsilon = 1" in rel.statement and "Simulation, not a release" in rel.statement
    pooled = make_release(plan.replace(release=ReleasePlan(epsilon=1.0, method="pooled")), small_cps)
    assert len(pooled.ledger) == 1 and len(pooled.data) == len(small_cps)


@pytest.mark.slow
def test_summaries_for_the_page(small_cps):
    from core.synthesis.sweep import curve_table, noise_table, smallest_strata, strata_overview, worst_group_table
    plan = _plan(epsilons=(0.5, 5.0), seeds=(0, 1), size_policy="public", sizes_declared_public=True)
    res = run_sweep(plan, small_cps)
    curves = curve_table(res.group_metrics[res.group_metrics["metric"] == "tvd_2way"])
    assert (curves["seeds"] == 2).all() and (curves["min"] <= curves["mean"]).all()
    worst = worst_group_table(res)
    assert len(worst) == 4 and (worst["worst_group"] >= worst["population"]).all()
    small = smallest_strata(res, n=3)
    assert len(small) == 3 and small["real_rows"].is_monotonic_increasing
    assert (small["size_used"] == small["real_rows"]).all()     # public sizes are the training counts
    over = strata_overview(small_cps, ("sex", "race"))
    assert len(over) == 10 and over["real_rows"].sum() == len(small_cps)
    noise = noise_table(plan, (0.5, 5.0)).set_index("epsilon")
    d = len(COLS) - 2
    assert noise.loc[5.0, "stratum one-way cell sd"] == pytest.approx(np.sqrt(d / (2 * rho_for_epsilon(5.0, 1e-9) / 3)))
    assert (noise["stratum count sd"] == 0).all()


def test_categorical_view_bins_wide_numbers_only_over_public_bounds():
    from core.synthesis.encoding import categorical_view, identifier_like
    df = pd.DataFrame({"age": np.arange(100) + 17, "g": ["a", "b"] * 50, "id": [f"x{i}" for i in range(100)]})
    # without declared bounds the observed min and max would become public: the column is left out
    out, notes = categorical_view(df, max_levels=40, bins=5)
    assert list(out.columns) == ["g"]
    assert any("age" in n and "public bounds" in n for n in notes)
    assert not any("17" in n or "116" in n for n in notes)      # the private range is never printed
    out, notes = categorical_view(df, bounds={"age": (0, 150)}, max_levels=40, bins=5)
    assert list(out.columns) == ["age", "g"] and out["age"].cat.categories.size == 5
    assert out["age"].cat.categories[0].startswith("(-0.001, 30")  # edges from the declared range
    assert any("age" in n and "declared public range [0, 150]" in n for n in notes)
    assert any("id" in n and "left out" in n for n in notes)
    assert identifier_like(df) == ["age", "id"]
    with pytest.raises(ValueError, match="No column can be used"):
        categorical_view(df[["id"]])


def test_dirichlet_summary():
    from core.synthesis.mean_estimation import dirichlet_summary
    ny = [138474, 24024, 17030, 10964, 5646, 508, 244, 72, 5]
    summary, table = dirichlet_summary(ny + [0])
    assert summary["k"] == 9 and summary["worst"] == pytest.approx(89.94, abs=0.01)
    assert summary["alpha_mle"] == pytest.approx(0.257, abs=0.005)
    assert summary["theorem10_at_mle"] == pytest.approx(summary["observed"], abs=0.05)  # MLE identity
    assert table["expected"].is_monotonic_increasing
    with pytest.raises(ValueError, match="at least two non-empty"):
        dirichlet_summary([5, 0])


def test_release_ledger_names_strata_and_rows_are_shuffled(small_cps):
    plan = _plan(size_policy="public", sizes_declared_public=True).replace(release=ReleasePlan())
    rel = make_release(plan, small_cps)
    assert any(lbl.endswith("Female · White") for lbl in rel.ledger_table["label"])
    assert not any("sex=" in lbl for lbl in rel.ledger_table["label"])
    # rows are not grouped by stratum: the stratum changes often along the file
    key = rel.data["sex"].astype(str) + rel.data["race"].astype(str)
    assert (key != key.shift()).mean() > 0.2


def test_marginal_comparison_shares_and_tvd(small_cps):
    from core.synthesis.plan import MarginalsPlan
    from core.synthesis.sweep import marginal_comparison
    plan = _plan(size_policy="public", sizes_declared_public=True).replace(marginals=MarginalsPlan(1.0, 0))
    shares, tv = marginal_comparison(plan, small_cps)
    sums = shares.groupby(["group", "column"])[["real", "stratified", "pooled"]].sum()
    assert np.allclose(sums["real"], 1.0) and np.allclose(sums["stratified"].dropna(), 1.0)
    assert set(tv["column"]) == {"age_band", "education", "income"} and set(tv["method"]) == {"stratified", "pooled"}
    one = shares[(shares["group"] == tv["group"].iloc[0]) & (shares["column"] == "income")]
    assert tv[(tv["group"] == tv["group"].iloc[0]) & (tv["column"] == "income") & (tv["method"] == "pooled")][
        "tvd"].iloc[0] == pytest.approx(0.5 * np.abs(one["real"] - one["pooled"]).sum())


def test_sweeps_over_too_many_strata_are_refused(small_cps):
    plan = _plan(strata=("age_band", "education", "race"))
    with pytest.raises(ValueError, match="at most 200"):
        run_sweep(plan, small_cps)


def test_population_figures_use_the_same_marginals_as_the_groups(small_cps):
    """Each population measure beside a per-group one is computed on the columns besides the strata:
    recomputed by hand from the pooled fit's synthetic table, it matches; over every column it would not."""
    from core.synthesis import sweep
    from core.synthesis.encoding import encode_categories
    from core.synthesis.metrics import workload_error

    plan = _plan(seeds=(0,))
    res = run_sweep(plan, small_cps, n_jobs=1)
    codes, domain, labels = encode_categories(small_cps[list(plan.columns)])
    train, _ = sweep.split_train_test(codes, plan.sweep.test_fraction, plan.sweep.split_seed)
    model = sweep.build_synthesizer(plan, "pooled", labels=labels)
    rng = sweep.fit_rng(0, 1.0, "pooled")
    synth = model.fit(train, domain, rho_for_epsilon(1.0, plan.delta), rng).sample(len(train), rng)
    others = [c for c in plan.columns if c not in plan.strata]
    om = res.overall_metrics.query("method == 'pooled'").set_index("metric")["value"]
    assert om["tvd_1way"] == pytest.approx(one_way_tvd(train, synth, domain, others)["tvd"].mean())
    assert om["tvd_2way"] == pytest.approx(two_way_tvd(train, synth, domain, others)["tvd"].mean())
    assert om["workload_3way"] == pytest.approx(workload_error(train, synth, domain, others))
    assert om["tvd_2way"] != pytest.approx(two_way_tvd(train, synth, domain)["tvd"].mean())
    table = res.worst_groups("tvd_2way").set_index("method")
    assert table.loc["pooled", "population"] == pytest.approx(om["tvd_2way"])


@pytest.mark.slow
def test_named_views_pick_the_main_measure_and_the_headline_reads_them(small_cps):
    """Two or more columns besides the strata: two-way TVD leads; the headline quotes its worst group
    and population figure at the largest epsilon, each the mean over seeds of the sweep's own rows."""
    from core.synthesis.workflow import SynthesisResult

    res = run_sweep(_plan(epsilons=(0.5, 2.0), seeds=(0, 1)), small_cps)
    assert res.measures == ("tvd_2way", "tvd_1way", "workload_3way", "accuracy")
    assert res.main_measure == "tvd_2way" and res.main_measure_name == "two-way TVD"
    gm = res.group_metrics.query("metric == 'tvd_2way' and epsilon == 2.0")
    om = res.overall_metrics.query("metric == 'tvd_2way' and epsilon == 2.0")
    result = SynthesisResult(plan=_plan(), overview=pd.DataFrame({"group": ["a"]}), notes=(), noise=pd.DataFrame(),
                             sweep=res)
    head = result.headline()
    for method in ("stratified", "pooled"):
        by_group = gm[gm["method"] == method].groupby("group")["value"].mean()
        assert head[f"worst-group two-way TVD, {method}, epsilon 2"] == pytest.approx(by_group.max())
        assert head[f"population two-way TVD, {method}, epsilon 2"] == pytest.approx(
            om[om["method"] == method]["value"].mean())
    assert not any("one-way" in k for k in head)
    curves = res.curves()
    assert set(curves["epsilon"]) == {0.5, 2.0} and (curves["seeds"] == 2).all()
    assert curves.equals(res.curves("tvd_2way"))
    with pytest.raises(ValueError, match="not defined"):
        res.curves("nope")
