"""The ranking tab's numbers at the largest k are one named view of the ranking result: utility loss,
AP@k and the range of the groups' selection rates, checked on rankings small enough to count by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.fairness.causal_ranking import at_k, measures
from core.fairness.group_fairness_plan import GroupFairnessPlan, GroupFairnessResult, RankingResult


def _table():
    """Six people, scores 6..1 (ranked high to low), groups a a a b b c; the counterfactual order puts
    b first, then c, then a."""
    y = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    groups = np.array(["a", "a", "a", "b", "b", "c"])
    orders = {"original": np.array([0, 1, 2, 3, 4, 5]), "counterfactual": np.array([3, 4, 5, 0, 1, 2])}
    return measures(orders, y, groups, (2, 3), ascending=False)


def test_at_k_reads_the_largest_k_by_hand():
    top = at_k(_table(), "counterfactual")
    # top 3 of the counterfactual order: people 3, 4, 5 (groups b, b, c), scores 3 + 2 + 1 = 6.
    # Original top 3: scores 6 + 5 + 4 = 15, so the utility loss is 1 - 6 / 15 = 0.6.
    assert top.k == 3
    assert top.utility_loss == pytest.approx(0.6)
    # None of the original top 3 is in it: AP@3 = 0.
    assert top.ap_at_k == pytest.approx(0.0)
    # Selection rates: a 0 / (3/6) = 0; b (2/3) / (2/6) = 2; c (1/3) / (1/6) = 2 (b listed first).
    assert (top.rate_low, top.rate_low_group) == (pytest.approx(0.0), "a")
    assert (top.rate_high, top.rate_high_group) == (pytest.approx(2.0), "b")


def test_at_k_at_a_given_k_and_the_original_ranking():
    table = _table()
    cf2 = at_k(table, "counterfactual", 2)
    # top 2: people 3, 4 (both b): b (2/2) / (2/6) = 3, a and c 0; utility 1 - 5 / 11.
    assert cf2.rate_high == pytest.approx(3.0) and cf2.rate_high_group == "b"
    assert cf2.rate_low == pytest.approx(0.0) and cf2.rate_low_group == "a"
    assert cf2.utility_loss == pytest.approx(1 - 5 / 11)
    orig = at_k(table, "original")
    assert orig.utility_loss == pytest.approx(0.0) and orig.ap_at_k == pytest.approx(1.0)
    assert orig.rate_high == pytest.approx(2.0) and orig.rate_high_group == "a"
    with pytest.raises(ValueError, match="measured at k"):
        at_k(table, "counterfactual", 5)
    with pytest.raises(ValueError, match="No measures"):
        at_k(table, "quota")


def test_headline_and_its_uncertainty_name_the_view():
    table = _table()
    empty = pd.DataFrame()
    ranking = RankingResult(table, empty, empty, {"group": "b"}, 6, empty)
    plan = GroupFairnessPlan(lexifair=None, companion=None)
    result = GroupFairnessResult(plan, None, ranking, None)
    head = result.headline()
    assert head == {"utility loss at k=3": pytest.approx(0.6), "AP at k=3": pytest.approx(0.0),
                    "lowest selection rate at k=3": pytest.approx(0.0),
                    "highest selection rate at k=3": pytest.approx(2.0)}
    words = result.headline_uncertainty()
    assert set(words) == set(head)
    assert words["lowest selection rate at k=3"].startswith("a: exact")
    assert words["highest selection rate at k=3"].startswith("b: exact")
