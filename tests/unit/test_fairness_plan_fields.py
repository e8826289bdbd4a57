"""The elicitation design, sweep and companion plans declare their user-set fields once (label, help,
what the pages offer). The declaration changes no saved form, the plans still accept what they accepted
before (their rules are broader than the pages' offer), and the companion's one penalty and parity
map onto its two penalties and back."""
from __future__ import annotations

import dataclasses

import pytest

from core.contracts import plan_from_dict
from core.fairness import CompanionPlan, ElicitationPlan, FrontierPlan
from core.fairness.companion import default_penalty, penalties, penalty_and_parity
from core.fairness.elicitation import SessionConfig


def declared(cls) -> dict[str, dict]:
    return {f.name: dict(f.metadata) for f in dataclasses.fields(cls) if "label" in f.metadata}


def test_each_declared_default_lies_within_what_its_page_offers():
    for cls in (ElicitationPlan, FrontierPlan, CompanionPlan):
        for f in dataclasses.fields(cls):
            meta = f.metadata
            if "label" not in meta or f.name == "demo_stakeholders":   # 0 = no panel; the demo starts at 12
                continue
            values = f.default if isinstance(f.default, tuple) else (f.default,)
            if meta.get("choices") is not None:
                assert all(v in list(meta["choices"]) for v in values), (cls.__name__, f.name)
            if isinstance(f.default, (int, float)) and not isinstance(f.default, bool) and meta.get("high"):
                assert meta["low"] <= f.default <= meta["high"], (cls.__name__, f.name)


def test_the_declared_fields_are_the_ones_the_pages_set():
    assert set(declared(ElicitationPlan)) == {
        "population", "features", "n_core", "n_random", "n_repeat", "response_mode", "seed", "instructions",
        "demo_stakeholders", "demo_kind", "demo_seed", "pair_source", "pair_epsilon"}
    assert set(declared(FrontierPlan)) == {"population", "sweep", "T", "averaging", "oracle", "pair_holdout",
                                           "use_protected", "seed"}
    assert set(declared(CompanionPlan)) == {"cutoff", "bins", "attribute", "mode"}
    assert declared(FrontierPlan)["T"]["choices"] == (100, 300, 1000, 2000, 3000)
    assert declared(ElicitationPlan)["n_core"]["high"] == 100 and declared(CompanionPlan)["bins"]["high"] == 20


def test_saved_forms_are_unchanged():
    """Plans saved before the fields carried metadata load into the same plans and save the same way."""
    frontier = {"__type__": "FrontierPlan", "population": "full", "gammas": [0.0, 0.5, 1.0], "sweep": "eta",
                "etas": [0.0, 0.2], "eta_gamma": 0.1, "T": 300, "C_lambda": 10.0, "averaging": "paper",
                "oracle": "ols", "pair_holdout": 0.1, "individual_holdout": True, "use_protected": False,
                "seed": 4, "tol": 0.02, "__module__": "core.fairness.frontier"}
    companion = {"__type__": "CompanionPlan", "cutoff": 0.6, "bins": 8, "attribute": "sex",
                 "groups": ["Male", "Female"], "seed": 0, "at": 0.3, "mode": "soft", "share_low": None,
                 "penalty_fpr": 0.0, "penalty_tpr": 10.0, "__module__": "core.fairness.companion"}
    for saved in (frontier, companion):
        assert plan_from_dict(saved).to_dict() == saved
    assert plan_from_dict(frontier) == FrontierPlan(population="full", gammas=(0.0, 0.5, 1.0), sweep="eta",
                                                    etas=(0.0, 0.2), eta_gamma=0.1, T=300, averaging="paper",
                                                    oracle="ols", pair_holdout=0.1, use_protected=False, seed=4)
    design = ElicitationPlan(n_core=5, n_random=7, response_mode="four_option", seed=42, features=("age", "sex"))
    assert plan_from_dict(design.to_dict()) == design
    assert ElicitationPlan().to_dict()["instructions"] == ElicitationPlan().instructions


def test_stored_sessions_and_plans_beyond_the_pages_offer_still_load():
    """The declared ranges are what the pages offer; the plans' rules stay as broad as they were."""
    stored = {"dataset": "compas", "features": ["age"], "n_core": 150, "n_random": 300, "n_repeat": 30,
              "response_mode": "binary", "favourable_label": 0, "seed": 2 ** 31 + 5, "instructions": "Judge."}
    config = SessionConfig.from_dict(stored)
    assert (config.n_core, config.n_repeat, config.seed, config.population) == (150, 30, 2 ** 31 + 5, "full")
    assert FrontierPlan(T=123, pair_holdout=0.7, seed=50_000).T == 123
    assert CompanionPlan(cutoff=0.99, bins=40).bins == 40
    assert ElicitationPlan(pair_source="dp_synthetic", pair_epsilon=0.01).pair_epsilon == 0.01


def test_the_rules_still_refuse_with_their_own_words():
    with pytest.raises(ValueError, match="n_core"):
        ElicitationPlan(n_core=-1)
    with pytest.raises(ValueError, match="Pairs come from"):
        ElicitationPlan(pair_source="nowhere")
    with pytest.raises(ValueError, match="Rounds"):
        FrontierPlan(T=10 ** 9)
    with pytest.raises(ValueError, match="sweep"):
        FrontierPlan(sweep="delta")
    with pytest.raises(ValueError, match="cut-off"):
        CompanionPlan(cutoff=1.0)


@pytest.mark.parametrize("penalty, parity, fpr, tpr", [(1.0, "both", 1.0, 1.0), (10.0, "tpr", 0.0, 10.0),
                                                      (3.0, "fpr", 3.0, 0.0), (0.0, "both", 0.0, 0.0)])
def test_one_penalty_and_parity_give_the_two_penalties_and_back(penalty, parity, fpr, tpr):
    plan = CompanionPlan(**penalties(penalty, parity))
    assert (plan.penalty_fpr, plan.penalty_tpr) == (fpr, tpr)
    assert penalty_and_parity(plan) == (penalty, parity)


def test_the_penalty_starts_from_the_plans_default_and_bad_parity_is_refused():
    assert default_penalty() == CompanionPlan().penalty_fpr == CompanionPlan().penalty_tpr == 1.0
    with pytest.raises(ValueError, match="Penalise differences"):
        penalties(1.0, "ppv")
