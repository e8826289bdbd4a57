"""The group fairness plans declare their user-set fields once (label, bounds, menu): the checks name
the field by its label, the page's menus stay suggestions, and the saved form of a plan is unchanged."""
from __future__ import annotations

import pytest

from core.contracts import DataRef, plan_from_dict
from core.fairness import GroupFairnessPlan, LexifairPlan, MediatorRole, RankingPlan


@pytest.mark.parametrize("make, label", [
    (lambda: LexifairPlan(rounds=5), "Rounds per level"),
    (lambda: LexifairPlan(min_size=2.5), "Smallest group"),
    (lambda: LexifairPlan(levels=True), "Levels"),
    (lambda: LexifairPlan(bound=0.5), "Multiplier bound B"),
    (lambda: LexifairPlan(alpha="lots"), "Slack alpha"),
    (lambda: RankingPlan(synthetic_rows=50), "Synthetic applicants"),
    (lambda: GroupFairnessPlan(seed=-1), "Seed"),
])
def test_a_bad_value_is_refused_naming_the_field(make, label):
    with pytest.raises(ValueError, match=label):
        make()


def test_menu_values_are_suggestions_not_rules():
    lx = LexifairPlan(alpha=0.03, rounds=300, bound=3.0)
    assert (lx.alpha, lx.rounds, lx.bound) == (0.03, 300, 3.0)
    assert LexifairPlan(alpha="0.1").alpha == 0.1 and isinstance(LexifairPlan(alpha="0.1").alpha, float)
    assert RankingPlan(ks=(30, 7)).ks == (7, 30)
    assert RankingPlan(synthetic_rows=5000).synthetic_rows == 5000


def test_closed_lists_are_still_refused():
    with pytest.raises(ValueError, match="learning data"):
        GroupFairnessPlan(learning="cps")
    with pytest.raises(ValueError, match="COMPAS population"):
        GroupFairnessPlan(population="everybody")
    with pytest.raises(ValueError, match="learner"):
        LexifairPlan(learner="sgd")


def test_saved_form_is_unchanged():
    """A plan saved before the fields carried metadata loads into the same plan."""
    saved = {"__type__": "GroupFairnessPlan", "__module__": "core.fairness.group_fairness_plan",
             "data": {"__type__": "DataRef", "source": "moving-company", "fingerprint": ""},
             "learning": "adult", "population": "paper", "max_rows": 4000, "test_share": 0.25, "seed": 7,
             "lexifair": {"__type__": "LexifairPlan", "columns": ["sex", "age band"], "pairs": False,
                          "min_size": 30, "top_values": 2, "levels": 2, "alpha": 0.1, "rounds": 2000,
                          "learner": "ogd", "bound": None, "bootstrap": 0},
             "ranking": {"__type__": "RankingPlan", "attributes": ["gender", "race"],
                         "mediators": [{"__type__": "MediatorRole", "name": "lifting", "resolving_for": ["gender"]}],
                         "outcome": "score", "baseline": [], "ascending": False, "ks": [50, 100],
                         "synthetic_rows": 10000},
             "companion": None}
    plan = plan_from_dict(saved)
    assert plan == GroupFairnessPlan(
        data=DataRef("moving-company"), learning="adult", max_rows=4000, test_share=0.25, seed=7,
        lexifair=LexifairPlan(columns=("sex", "age band"), pairs=False, min_size=30, levels=2, alpha=0.1,
                              rounds=2000, learner="ogd", bound=None, bootstrap=0),
        ranking=RankingPlan(attributes=("gender", "race"), mediators=(MediatorRole("lifting", ("gender",)),),
                            outcome="score", ascending=False, ks=(50, 100), synthetic_rows=10000),
        companion=None)
    assert plan.to_dict() == saved
