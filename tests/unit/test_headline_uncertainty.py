"""Every headline number states its uncertainty, from what the result holds, without private counts."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from core.contracts import DataRef, Result
from core.stakeholder_report import report_html


def _floats(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*(?:e-?\d+)?", text)]


@pytest.fixture(scope="module")
def synthesis():
    from core.synthesis import SweepPlan, SynthesisPlan, run
    from core.synthesis.plan import ReleasePlan
    return run(SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income"),
                             sweep=SweepPlan(epsilons=(3.0,), seeds=(0, 1, 2)), marginals=None, means=None,
                             release=ReleasePlan()))


@pytest.fixture(scope="module")
def coherence():
    from core.coherence import AuditPlan, RowSample, run
    return run(AuditPlan(rows=RowSample(1500, 0), trials=3))


@pytest.fixture(scope="module")
def districts():
    from core.districts import DistrictPlan, GreedyParams, run
    return run(DistrictPlan(generator="greedy", params=GreedyParams()))


@pytest.fixture(scope="module")
def learning():
    from core.fairness import CompanionPlan, ConstraintTable, FrontierPlan, LearningPlan, run_learning
    rng = np.random.default_rng(5)
    i, j = rng.integers(0, 7214, 150), rng.integers(0, 7214, 150)
    keep = i != j
    pairs = pd.DataFrame({"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                          "n_judges": 3, "agreement": 2 / 3})
    return run_learning(LearningPlan(constraints=ConstraintTable.from_frame(pairs, "simulated panel"),
                                     frontier=FrontierPlan(gammas=(0.0, 0.3, 1.0), T=100, oracle="ols"),
                                     companion=CompanionPlan(at=0.3)))


@pytest.fixture(scope="module")
def mean_release():
    from core.synthesis.mean_release import MeanReleasePlan, release_stratified_mean
    return release_stratified_mean(MeanReleasePlan(data=DataRef("cps"), column="income", strata=("sex", "race"),
                                                   epsilon=1.0, category="50K+"))


def _others():
    from core.fairness import ElicitationPlan, GroupFairnessPlan, RankingPlan, run_elicitation, run_group_fairness
    return [run_elicitation(ElicitationPlan(demo_stakeholders=5)),
            run_group_fairness(GroupFairnessPlan(lexifair=None, ranking=RankingPlan(), companion=None))]


def test_default_is_empty():
    assert Result.headline_uncertainty(object.__new__(Result)) == {}


@pytest.mark.slow
def test_parts_the_page_fixtures_leave_out_are_covered_too(synthesis, learning, mean_release):
    """Release, simulated panel, ranking, learning frontier, companion and the mean release."""
    for result in [synthesis, learning, mean_release, *_others()]:
        head, words = result.headline(), result.headline_uncertainty()
        assert head and set(words) == set(head), type(result).__name__
        assert all(isinstance(w, str) and w.strip() for w in words.values())
        text = report_html(result, page="x")
        assert text.count("<td class='uncertainty'>") == len(words) and "not stated" not in text
    assert "simulated panel: one draw" in _others()[0].headline_uncertainty()["pairs with a constraint"]


def test_synthesis_sd_over_seeds_is_numpys_sd_of_the_worst_groups_values(synthesis):
    gm = synthesis.tables()["group_metrics"]
    gm = gm[(gm["metric"] == "tvd_2way") & (gm["epsilon"] == 3.0)]   # the main measure with two other columns
    words = synthesis.headline_uncertainty()
    for method in ("stratified", "pooled"):
        part = gm[gm["method"] == method]
        worst = part.groupby("group")["value"].mean().idxmax()
        values = part.loc[part["group"] == worst, "value"].to_numpy()
        assert values.size == 3
        by_hand = np.std(values, ddof=1)
        text = words[f"worst-group two-way TVD, {method}, epsilon 3"]
        assert text.startswith("sd ") and "over 3 seeds" in text
        assert _floats(text)[0] == pytest.approx(by_hand, rel=0.03)
    assert words["release rho"].startswith("exact")


def test_synthesis_statements_hold_no_exact_stratum_size(synthesis):
    assert not synthesis.plan.sizes_public
    sizes = {str(int(n)) for n in synthesis.overview["real_rows"]} | {f"{int(n):,}" for n in synthesis.overview["real_rows"]}
    numbers = set(re.findall(r"\d[\d,]*", " ".join(synthesis.headline_uncertainty().values())))
    assert not numbers & {s for s in sizes if len(s) > 1}


def test_coherence_bounds_are_scipys_clopper_pearson(coherence):
    summary = coherence.comparison.summary
    conf = coherence.plan.confidence
    words = coherence.headline_uncertainty()
    for release, part in summary.groupby("release", sort=False):
        row = part.loc[part["beta_hat"].idxmax()]
        x, t, n_adv = int(row["exceedances"]), int(row["trials"]), len(part)
        low = 0.0 if x == 0 else stats.beta.ppf((1 - conf) / n_adv, x, t - x + 1)
        high = 1.0 if x == t else stats.beta.ppf(conf, x + 1, t - x)
        text = words[f"worst failure rate: {release}"]
        got_low, got_high = _floats(text.split("bounds ")[1])[:2]
        assert got_low == pytest.approx(low, rel=5e-3, abs=1e-12)
        assert got_high == pytest.approx(high, rel=5e-3)
        assert f"over {t} trials" in text
    assert words["trials a PASS needs at least"].startswith("exact")


def test_district_error_se_is_the_sd_over_runs_by_hand(districts):
    runs = districts.runs[districts.runs["plan"] == 1]
    n = runs["run"].nunique()
    per_run = np.array([np.abs(runs.loc[runs["run"] == r, "error"]).mean() for r in sorted(runs["run"].unique())])
    assert per_run.mean() == pytest.approx(districts.headline()["mean_abs_district_error"])
    text = districts.headline_uncertainty()["mean_abs_district_error"]
    se, sd = _floats(text)[0], _floats(text.split("sd ")[1])[0]
    assert se == pytest.approx(per_run.std(ddof=1) / np.sqrt(n), rel=0.03)
    assert sd == pytest.approx(per_run.std(ddof=1), rel=0.03)
    assert f"over {n} noisy runs" in text


def test_learning_held_out_binomial_se_by_hand(learning):
    here = learning.point()
    e, n = float(here["error_heldout"]), int(here["heldout_individuals"])
    text = learning.headline_uncertainty()["error at the operating point"]
    assert f"on {n:,} people" in text
    assert _floats(text.split("binomial se ")[1])[0] == pytest.approx(np.sqrt(e * (1 - e) / n), rel=0.03)


def test_mean_release_interval_is_the_overall_tables(mean_release):
    words = mean_release.headline_uncertainty()
    for _, row in mean_release.overall.iterrows():
        text = words[f"{row['estimate']} mean"]
        low, high = _floats(text.split("interval ")[1])[:2]
        assert low == pytest.approx(row["ci_low"], rel=5e-3) and high == pytest.approx(row["ci_high"], rel=5e-3)
        assert "noisy counts" in text                 # DP counts: the interval is first-order
        assert row["ci_low"] < row["mean"] < row["ci_high"]
