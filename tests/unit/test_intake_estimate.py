"""Private estimates of a column's bounds and categories: near the truth on large samples, a label one
person holds is not returned at the default threshold, and each estimate states what it spent."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.intake.estimate import (CANDIDATES, category_threshold, estimate_bounds, estimate_categories,
                                  quantile_scores)

STEP = 10 ** (1 / 20)       # the grid's ratio between neighbouring positive candidates


def test_candidate_grid_is_public_sorted_and_wide():
    assert CANDIDATES.size == 483 and np.all(np.diff(CANDIDATES) > 0)
    assert CANDIDATES[0] == -1e9 and CANDIDATES[-1] == 1e9 and 0.0 in CANDIDATES
    pos = CANDIDATES[CANDIDATES > 0]
    assert np.allclose(pos[1:] / pos[:-1], STEP)


def test_quantile_score_is_zero_at_the_exact_quantile_and_counts_rows_below():
    x = np.arange(1.0, 101.0)          # 1 ... 100
    cands = np.array([0.5, 10.5, 50.5, 200.0])
    # rows below: 0, 10, 50, 100; alpha n = 10
    assert quantile_scores(x, 0.1, cands).tolist() == [-10.0, 0.0, -40.0, -90.0]


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_bounds_land_within_one_grid_step_of_the_true_quantiles_on_a_large_sample(seed):
    x = pd.Series(np.random.default_rng(100 + seed).lognormal(3.0, 0.5, 50_000))
    true_lo, true_hi = np.quantile(x, [0.01, 0.99])
    low, high, ledger = estimate_bounds(x, 1.0, secure=False, rng=seed)
    assert true_lo / STEP**1.01 <= low <= true_lo * STEP**1.01
    assert true_hi / STEP**1.01 <= high <= true_hi * STEP**1.01
    assert ledger.total("epsilon") == pytest.approx(1.0) and len(ledger) == 2
    assert all(s.amount == pytest.approx(0.5) for s in ledger.spends)


def test_bounds_on_the_secure_path_through_opendp_also_land_near_the_truth():
    x = pd.Series(np.random.default_rng(7).normal(40.0, 10.0, 50_000))
    true_lo, true_hi = np.quantile(x, [0.01, 0.99])
    low, high, ledger = estimate_bounds(x, 1.0, secure=True)
    assert true_lo / STEP**1.01 <= low <= true_lo * STEP**1.01
    assert true_hi / STEP**1.01 <= high <= true_hi * STEP**1.01
    assert ledger.total("epsilon") == pytest.approx(1.0)


def test_bounds_per_person_keep_the_amount_and_say_the_unit():
    x = pd.Series(np.random.default_rng(3).normal(0.0, 1.0, 20_000))
    _, _, one = estimate_bounds(x, 0.8, secure=False, rng=0)
    _, _, three = estimate_bounds(x, 0.8, secure=False, rng=0, rows_per_person=3)
    assert three.total("epsilon") == pytest.approx(one.total("epsilon")) == pytest.approx(0.8)
    assert all("per person, up to 3 rows each" in s.measured for s in three.spends)
    assert not any("per person" in s.measured for s in one.spends)


def test_bounds_refuse_text_and_bad_budgets():
    with pytest.raises(ValueError, match="not a number"):
        estimate_bounds(pd.Series(["1", "two"]), 1.0, secure=False, rng=0)
    with pytest.raises(ValueError, match="epsilon must be a positive"):
        estimate_bounds(pd.Series([1.0, 2.0]), 0.0, secure=False, rng=0)
    with pytest.raises(ValueError, match="Give a seed"):
        estimate_bounds(pd.Series([1.0, 2.0]), 1.0, secure=False)
    with pytest.raises(ValueError, match="0 < low < high < 1"):
        estimate_bounds(pd.Series([1.0, 2.0]), 1.0, secure=False, rng=0, quantiles=(0.9, 0.1))


def test_default_threshold_closed_form():
    assert category_threshold(1.0, 1e-6) == pytest.approx(1.0 + math.log(1.0 / 2e-6))
    # k rows per person: scale k / epsilon, threshold k + (k / epsilon) ln(k / (2 delta))
    assert category_threshold(0.5, 1e-6, 3) == pytest.approx(3.0 + 6.0 * math.log(3.0 / 2e-6))


def test_common_labels_are_returned_and_the_ledger_states_epsilon_with_its_delta():
    values = pd.Series(["north"] * 400 + ["south"] * 300 + ["east"] * 200 + [None] * 10 + [" west "])
    labels, ledger = estimate_categories(values, 1.0, secure=False, rng=0)
    assert labels == ("east", "north", "south")
    assert ledger.total("epsilon") == pytest.approx(1.0) and ledger.level_delta == 1e-6
    assert "west" not in " ".join(s.measured + s.label for s in ledger.spends)


def test_a_label_one_person_holds_is_never_returned_at_the_default_threshold():
    values = pd.Series(["a"] * 500 + ["b"] * 200 + ["only-me"])
    shown = sum("only-me" in estimate_categories(values, 1.0, secure=False, rng=s)[0] for s in range(2000))
    assert shown == 0
    # a person with 3 rows of their own label, declared 3 rows per person: never shown either
    values3 = pd.Series(["a"] * 500 + ["mine"] * 3)
    shown3 = sum("mine" in estimate_categories(values3, 1.0, secure=False, rng=s, rows_per_person=3)[0]
                 for s in range(2000))
    assert shown3 == 0


def test_the_chance_a_singleton_label_shows_stays_within_delta():
    # at a large delta the bound can be checked statistically: P(shown) <= delta, with a 4-sd margin
    delta, draws = 0.05, 4000
    values = pd.Series(["a"] * 50 + ["rare"])
    shown = sum("rare" in estimate_categories(values, 1.0, secure=False, rng=s, delta=delta)[0]
                for s in range(draws))
    assert shown / draws <= delta + 4 * math.sqrt(delta * (1 - delta) / draws)
    # and the closed form: at the default threshold the chance is exactly delta / 1 for one row
    assert 0.5 * math.exp(-(category_threshold(1.0, delta) - 1.0)) == pytest.approx(delta)


def test_categories_secure_path_and_refusals():
    values = pd.Series(["x"] * 300 + ["y"] * 300)
    labels, ledger = estimate_categories(values, 1.0, secure=True)
    assert labels == ("x", "y") and ledger.total("epsilon") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="below"):
        estimate_categories(values, 1.0, threshold=2.0, secure=False, rng=0)
    labels, _ = estimate_categories(values, 1.0, threshold=1e6, secure=False, rng=0)
    assert labels == ()


def test_a_column_declared_never_negative_gets_a_low_bound_near_zero_not_far_below():
    """Ages start at 18 on a pile of equal values: every candidate below 18 ties, so on the full grid the
    low bound is often negative and far off; declaring the sign (public) keeps it in [0, 18]."""
    rng = np.random.default_rng(3)
    ages = np.concatenate([np.full(300, 18.0), rng.integers(19, 91, 3000).astype(float)])
    full = [estimate_bounds(ages, 2.0, secure=False, rng=s)[0] for s in range(60)]
    signed = [estimate_bounds(ages, 2.0, secure=False, rng=s, nonnegative=True)[0] for s in range(60)]
    assert min(full) < 0                                   # the tie the declaration removes
    assert all(0 <= low <= 18 for low in signed)
    low, high, _ = estimate_bounds(ages, 2.0, secure=True, nonnegative=True)
    assert 0 <= low <= 18 and 80 <= high <= 120


def test_a_public_ceiling_keeps_the_high_bound_near_the_data_at_the_page_default_epsilon():
    rng = np.random.default_rng(4)
    ages = np.concatenate([np.full(300, 18.0), rng.integers(19, 91, 3000).astype(float)])
    free = [estimate_bounds(ages, 1.0, secure=False, rng=s, nonnegative=True)[1] for s in range(60)]
    capped = [estimate_bounds(ages, 1.0, secure=False, rng=s, nonnegative=True, ceiling=130)[1] for s in range(60)]
    assert max(free) > 130                                  # far-away tied candidates are drawn without it
    assert all(80 <= high <= 130 for high in capped)
    with pytest.raises(ValueError, match="fewer than two candidates"):
        estimate_bounds(ages, 1.0, secure=False, rng=0, nonnegative=True, ceiling=-5)


def test_the_reliability_figure_is_the_exponential_mechanisms_bound():
    from core.intake.estimate import reliable_rows
    assert reliable_rows(1.0, 483, 0.01) == pytest.approx(2 * 0.99 * math.log(483) / 0.5 / 0.01)
    assert reliable_rows(1.0, 483, 0.01, rows_per_person=2) == pytest.approx(2 * reliable_rows(1.0, 483, 0.01))


def test_the_planned_ledger_is_what_each_estimate_then_spends():
    from core.intake.estimate import planned_estimate_ledger
    x = np.arange(1000, dtype=float)
    _, _, spent = estimate_bounds(x, 1.0, secure=False, rng=0)
    planned = planned_estimate_ledger("bounds", "age", 1.0)
    assert planned.total("epsilon") == pytest.approx(spent.total("epsilon")) == pytest.approx(1.0)
    cats = planned_estimate_ledger("categories", "sex", 0.5, rows_per_person=2)
    from core.intake.estimate import DEFAULT_DELTA
    assert cats.total("epsilon") == pytest.approx(0.5) and cats.level_delta == DEFAULT_DELTA
    assert "up to 2 rows each" in cats.spends[0].measured
    with pytest.raises(ValueError, match="bounds' or 'categories"):
        planned_estimate_ledger("median", "age", 1.0)
