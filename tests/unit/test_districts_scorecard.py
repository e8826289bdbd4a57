"""District scorecard: closed-form compactness, deviations that sum to zero, two plans side by side."""
import numpy as np
import pandas as pd
import pytest
import shapely

from core.districts.metrics import district_metrics, polsby_popper
from core.districts.scorecard import (SUMMARY, compare_scorecards, comparison_words, mean_sd_intervals, plan_summary,
                                      scorecard)
from core.districts.standards import balance_sentence, standard_for
from core.uncertainty_words import round_to_uncertainty, rounded, rounding_step, with_interval
from core.geography.adjacency import grid_adjacency
from core.geography.hierarchy import Hierarchy


def _quadrants():
    """A 4 x 4 grid of unit squares cut into four 2 x 2 square districts, each its own county."""
    rows, cols = np.divmod(np.arange(16), 4)
    labels = (rows // 2) * 2 + cols // 2
    return labels, np.array([f"county {q}" for q in labels])


def test_polsby_popper_of_a_square_is_pi_over_4_and_of_a_circle_about_1():
    assert polsby_popper(1.0, 4.0) == pytest.approx(np.pi / 4)
    circle = shapely.Point(0, 0).buffer(10.0, quad_segs=256)
    assert polsby_popper(circle.area, circle.length) == pytest.approx(1.0, abs=1e-4)
    strip = shapely.box(0, 0, 100, 1)
    assert polsby_popper(strip.area, strip.length) == pytest.approx(4 * np.pi * 100 / 202 ** 2)


def test_square_districts_on_a_grid_score_pi_over_4_and_their_deviations_sum_to_zero():
    labels, counties = _quadrants()
    pop = np.arange(1, 17) * 10
    metrics = district_metrics(Hierarchy.homogeneous((4, 4)), grid_adjacency(4, 4, cell=3.0), pop, counties, labels)
    np.testing.assert_allclose(metrics["polsby_popper"], np.pi / 4)
    table = metrics.assign(empirical_sd=[1.0, 2.0, 3.0, 4.0],
                           black_share_pct=[10.0, 20.0, 30.0, 40.0])
    card = scorecard(table)
    # hand-computed: district populations 10*(1+2+5+6), 10*(3+4+7+8), 10*(9+10+13+14), 10*(11+12+15+16)
    np.testing.assert_array_equal(card["population"], [140, 220, 460, 540])
    np.testing.assert_allclose(card["deviation"], [-200, -120, 120, 200])
    assert card["deviation"].sum() == pytest.approx(0.0)
    assert card["deviation_pct"].sum() == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(card["deviation_pct"], 100 * card["deviation"] / 340)
    assert (card["split_counties"] == 0).all()                 # each quadrant is exactly its county
    halves = np.where(np.arange(16) % 4 < 2, "west", "east")   # two districts share each half
    assert list(district_metrics(Hierarchy.homogeneous((4, 4)), grid_adjacency(4, 4), pop, halves,
                                 labels)["split_counties"]) == [1, 1, 1, 1]
    assert list(card["minority_share_pct"]) == [10.0, 20.0, 30.0, 40.0]


def test_a_district_across_the_county_line_counts_as_splitting_it():
    labels, _ = _quadrants()
    rows, cols = np.divmod(np.arange(16), 4)
    counties = np.where(cols < 1, "west", "east")              # the line runs through the western quadrants
    metrics = district_metrics(Hierarchy.homogeneous((4, 4)), grid_adjacency(4, 4), np.ones(16), counties, labels)
    assert list(metrics["split_counties"]) == [2, 1, 2, 1]


def _card(dev_pct, sd, pp, split, share):
    n = len(dev_pct)
    pop = 1000 * (1 + np.asarray(dev_pct) / 100)
    return scorecard(pd.DataFrame({"district": np.arange(1, n + 1), "population": pop.astype(int),
                                   "deviation_pct": dev_pct, "empirical_sd": sd, "polsby_popper": pp,
                                   "split_counties": split, "black_share_pct": share}))


def test_two_plans_side_by_side_with_the_signed_difference():
    a = _card([-2.0, 2.0], [4.0, 6.0], [0.5, 0.7], [0, 1], [10.0, 30.0])
    b = _card([-1.0, 1.0], [5.0, 5.0], [0.4, 0.8], [2, 1], [15.0, 25.0])
    both = compare_scorecards(a, b, ("plan 1", "plan 2")).set_index("measure")
    assert list(both.index) == list(SUMMARY)
    assert both.loc["Largest |deviation| (%)", "plan 1"] == 2.0
    assert both.loc["Largest |deviation| (%)", "plan 2 - plan 1"] == -1.0
    assert both.loc["Least compact district (Polsby-Popper)", "plan 2"] == 0.4
    assert both.loc["Districts that split a county", "plan 1"] == 1.0
    assert both.loc["Districts that split a county", "plan 2"] == 2.0
    assert both.loc["Mean noisy-count error sd (people)", "plan 2 - plan 1"] == 0.0
    assert plan_summary(a)["Largest Black share (%)"] == 30.0


def test_a_scorecard_wants_one_plans_table():
    t = pd.DataFrame({"plan": [1, 2], "district": [1, 1], "population": [5, 5], "deviation_pct": [0.0, 0.0],
                      "empirical_sd": [1.0, 1.0], "polsby_popper": [0.5, 0.5], "split_counties": [0, 0],
                      "black_share_pct": [1.0, 1.0]})
    with pytest.raises(ValueError, match="one plan"):
        scorecard(t)
    with pytest.raises(ValueError, match="lacks"):
        scorecard(t.drop(columns="polsby_popper"))


def test_the_bootstrap_pairs_the_runs_that_serve_both_plans():
    rng = np.random.default_rng(5)
    shared = rng.normal(0, 100, size=(16, 4))
    a, b = shared, shared * 1.1           # plan B's errors are plan A's, 10% larger, run by run
    got = mean_sd_intervals(a, b, np.random.default_rng(0))
    sd_a = a.std(axis=0, ddof=1).mean()
    assert got[0, 0] < sd_a < got[0, 1]
    # paired: every resample has B - A = 0.1 * A's sd, so the difference's interval is 0.1 x A's interval
    np.testing.assert_allclose(got[2], 0.1 * got[0], rtol=1e-9)
    assert got[2, 1] - got[2, 0] < (got[1, 1] - got[1, 0]) / 5
    with pytest.raises(ValueError, match="same noisy runs"):
        mean_sd_intervals(a, b[:8], np.random.default_rng(0))
    assert np.isnan(mean_sd_intervals(a[:1], b[:1], np.random.default_rng(0))).all()


def test_the_noisy_measure_is_rounded_to_its_interval_and_the_exact_ones_are_not():
    a = _card([-2.0, 2.0], [100.0, 140.0], [0.5, 0.7], [0, 1], [10.0, 30.0])
    b = _card([-1.0, 1.0], [90.0, 109.12], [0.4, 0.8], [2, 1], [15.0, 25.0])
    intervals = np.array([[100.0, 140.0], [80.0, 119.0], [-45.3, 4.9]])
    names = ("plan 1", "plan 2")
    words = comparison_words(compare_scorecards(a, b, names, intervals), names).set_index("measure")
    noisy = words.loc["Mean noisy-count error sd (people)"]
    assert noisy["plan 2 - plan 1"] == "\u221220 (\u221250 to 0)"      # -20.44 with a +-25 interval
    assert noisy["plan 1"] == "120 (100 to 140)"
    assert words.loc["Least compact district (Polsby-Popper)", "plan 2"] == "0.400"
    assert words.loc["Districts that split a county", "plan 2 - plan 1"] == "1"


def test_rounding_follows_the_first_figure_of_the_half_width():
    assert rounding_step(42) == 10 and rounding_step(14) == 1 and rounding_step(0.3) == 0.1
    assert rounding_step(0) == 0 and rounding_step(float("nan")) == 0
    assert round_to_uncertainty(-20.56, 42) == -20 and round_to_uncertainty(116.13, 5.9) == 116
    assert with_interval(118.4, 77.2, 161.3, "people") == "120 people (95% interval 80 to 160)"
    assert with_interval(118.4, 77.2, 161.3, short=True) == "120 (80 to 160)"
    assert rounded(1.234, 1.234, 1.234) == "1.23"


def test_a_tolerance_names_its_standard_and_its_source_or_says_it_has_none():
    five = balance_sentence(5, 1_612_580)
    assert "\u00b180,629 people" in five and "Brown v. Thomson" in five and "10%" in five
    assert "Karcher v. Daggett" in balance_sentence(0, 700_000)
    assert "French" in balance_sentence(20, 50_000)
    custom = balance_sentence(7.5, 1000)
    assert "not a named legal standard" in custom
    assert standard_for(5.0).tolerance_pct == 5.0 and standard_for(3) is None
