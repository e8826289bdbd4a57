"""Elicitation: sampling design, pair cards, orientation, aggregation weightings, diagnostics."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef
from core.fairness import elicitation as el


def J(rows):
    """Hand-made judgments: (stakeholder, position, a, b, response[, kind[, repeat_of]])."""
    cols = ["stakeholder", "position", "a", "b", "response", "kind", "repeat_of"]
    full = [tuple(r) + ("random", -1)[len(r) - 5:] for r in rows]
    return pd.DataFrame(full, columns=cols)


# ----------------------------------------------------------------------------- orientation

@pytest.mark.parametrize("fav, a_ge_b, b_ge_a", [(0, [(1, 2)], [(2, 1)]), (1, [(2, 1)], [(1, 2)])])
def test_orientation_for_both_favourable_labels(fav, a_ge_b, b_ge_a):
    # (x, x') means p(x) - p(x') <= gamma on the positive-label probability.
    assert el.judgment_to_ordered_constraints("a_at_least_b", 1, 2, fav) == a_ge_b
    assert el.judgment_to_ordered_constraints("b_at_least_a", 1, 2, fav) == b_ge_a
    assert sorted(el.judgment_to_ordered_constraints("same", 1, 2, fav)) == [(1, 2), (2, 1)]
    for nothing in ("differ", "none", "skip", "retract"):
        assert el.judgment_to_ordered_constraints(nothing, 1, 2, fav) == []
    with pytest.raises(ValueError, match="Unknown response"):
        el.judgment_to_ordered_constraints("maybe", 1, 2, fav)


def test_aggregate_orientation_matches_single_answer_mapping():
    # Person A is the larger index (7 vs 3) to exercise the side swap.
    for fav in (0, 1):
        for resp in ("a_at_least_b", "b_at_least_a"):
            out = el.aggregate_constraints(J([("u", 0, 7, 3, resp)]), "panel", favourable_label=fav)
            expected = el.judgment_to_ordered_constraints(resp, 7, 3, fav)
            got = ([(3, 7)] if out["w_ij"][0] > 0 else []) + ([(7, 3)] if out["w_ji"][0] > 0 else [])
            assert got == expected and out["weight"][0] == 0.0


# ----------------------------------------------------------------------------- aggregation

def test_panel_and_judged_weightings_by_hand():
    rows = [
        ("u1", 0, 1, 2, "same", "core"), ("u2", 0, 2, 1, "same", "core"), ("u3", 0, 1, 2, "differ", "core"),
        ("u1", 1, 5, 6, "same"),                          # only u1 saw (5, 6)
        ("u2", 1, 8, 9, "differ"), ("u3", 1, 9, 8, "same"),
        ("u3", 2, 4, 3, "skip"),                          # skip: not a judgment
    ]
    panel = el.aggregate_constraints(J(rows), "panel").set_index(["i", "j"])
    judged = el.aggregate_constraints(J(rows), "judged").set_index(["i", "j"])
    assert panel.loc[(1, 2), "weight"] == pytest.approx(2 / 3)
    assert judged.loc[(1, 2), "weight"] == pytest.approx(2 / 3)     # core pair: both agree
    assert panel.loc[(5, 6), "weight"] == pytest.approx(1 / 3)
    assert judged.loc[(5, 6), "weight"] == pytest.approx(1.0)
    assert panel.loc[(8, 9), "weight"] == pytest.approx(1 / 3)
    assert judged.loc[(8, 9), "weight"] == pytest.approx(1 / 2)
    assert (3, 4) not in judged.index
    assert list(panel.loc[(1, 2), ["n_judges", "n_same"]]) == [3, 2]
    assert panel.loc[(1, 2), "agreement"] == pytest.approx(2 / 3)
    assert panel.loc[(8, 9), "agreement"] == pytest.approx(1 / 2)
    # The panel size can be larger than those who answered (someone joined but answered nothing).
    wide = el.aggregate_constraints(J(rows), "panel", n_stakeholders=4).set_index(["i", "j"])
    assert wide.loc[(1, 2), "weight"] == pytest.approx(0.5)
    assert (panel["w_ij"] == panel["weight"]).all() and (panel["w_ji"] == panel["weight"]).all()
    assert list(el.aggregate_constraints(J(rows), "panel").columns[:5]) == ["i", "j", "weight", "n_judges", "agreement"]
    assert (el.aggregate_constraints(J(rows), "panel")["i"] < el.aggregate_constraints(J(rows), "panel")["j"]).all()


def test_each_stakeholder_counts_once_per_pair_and_repeats_only_measure_consistency():
    rows = [("u1", 0, 1, 2, "same"), ("u1", 1, 2, 1, "differ", "repeat", 0),
            ("u1", 2, 1, 2, "differ"),  # the same pair drawn again at random: first one counts
            ("u2", 0, 3, 4, "differ")]
    out = el.aggregate_constraints(J(rows), "judged").set_index(["i", "j"])
    assert out.loc[(1, 2), "n_judges"] == 1 and out.loc[(1, 2), "weight"] == 1.0
    sa = el.self_agreement(J(rows)).set_index("stakeholder")
    assert sa.loc["u1", "n_repeats"] == 1 and sa.loc["u1", "self_agreement"] == 0.0


def test_self_agreement_respects_side_swap_in_four_option_mode():
    rows = [("u", 0, 1, 2, "a_at_least_b"), ("u", 1, 2, 1, "b_at_least_a", "repeat", 0),
            ("v", 0, 1, 2, "a_at_least_b"), ("v", 1, 2, 1, "a_at_least_b", "repeat", 0)]
    sa = el.self_agreement(J(rows)).set_index("stakeholder")["self_agreement"]
    assert sa["u"] == 1.0 and sa["v"] == 0.0


def test_min_support_and_ordered_expansion():
    rows = [("u1", 0, 1, 2, "same"), ("u2", 0, 1, 2, "differ"), ("u1", 1, 3, 4, "a_at_least_b"),
            ("u2", 1, 3, 4, "a_at_least_b")]
    out = el.aggregate_constraints(J(rows), "panel", min_support=0.75)
    assert list(zip(out["i"], out["j"])) == [(3, 4)]
    ordered = el.ordered_constraints(el.aggregate_constraints(J(rows), "panel"))
    assert set(zip(ordered["i"], ordered["j"], ordered["w"])) == {(1, 2, 0.5), (2, 1, 0.5), (3, 4, 1.0)}


def test_aggregation_rejects_bad_input():
    with pytest.raises(ValueError, match="Weighting"):
        el.aggregate_constraints(J([("u", 0, 1, 2, "same")]), "votes")
    with pytest.raises(ValueError, match="missing"):
        el.aggregate_constraints(pd.DataFrame({"a": [1], "b": [2]}), "panel")
    with pytest.raises(ValueError, match="Unknown responses"):
        el.aggregate_constraints(J([("u", 0, 1, 2, "yes")]), "panel")
    with pytest.raises(ValueError, match="two different"):
        el.aggregate_constraints(J([("u", 0, 1, 1, "same")]), "panel")
    with pytest.raises(ValueError, match="between 0 and 1"):
        el.aggregate_constraints(J([("u", 0, 1, 2, "same")]), "panel", min_support=2)
    empty = el.aggregate_constraints(J([]), "panel")
    assert empty.empty and list(empty.columns[:5]) == ["i", "j", "weight", "n_judges", "agreement"]


# ----------------------------------------------------------------------------- diagnostics

def test_fleiss_kappa_matches_the_textbook_example():
    # Fleiss (1971) worked example as reproduced in most references: 10 items, 14 raters -> 0.210.
    counts = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                       [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    assert el.fleiss_kappa(counts) == pytest.approx(0.210, abs=5e-4)
    assert el.fleiss_kappa(np.array([[3, 0], [0, 3]])) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same number"):
        el.fleiss_kappa(np.array([[2, 0], [1, 0]]))


def test_inter_rater_agreement_on_core_pairs():
    rows = []
    answers = {"u1": ["same", "same", "differ"], "u2": ["same", "differ", "differ"], "u3": ["same", "same", "differ"]}
    for u, resp in answers.items():
        for p, r in enumerate(resp):
            rows.append((u, p, 10 + p, 20 + p, r, "core"))
    rows.append(("u1", 3, 1, 2, "same"))  # random pairs do not enter
    out = el.inter_rater_agreement(J(rows))
    counts = np.array([[3, 0], [1, 2], [0, 3]])
    assert out["core_pairs_used"] == 3 and out["raters"] == 3
    assert out["fleiss_kappa"] == pytest.approx(el.fleiss_kappa(counts))
    assert out["pairwise_agreement"] == pytest.approx((1 + 1 / 3 + 1) / 3)


def test_contested_pairs_flag_splits_and_opposite_orientations():
    rows = [("u1", 0, 1, 2, "a_at_least_b"), ("u2", 0, 2, 1, "a_at_least_b"),    # opposite claims
            ("u1", 1, 3, 4, "same"), ("u2", 1, 3, 4, "same"),                  # agreement
            ("u1", 2, 5, 6, "same"), ("u2", 2, 5, 6, "none")]                   # split
    out = el.contested_pairs(J(rows))
    assert set(zip(out["i"], out["j"])) == {(1, 2), (5, 6)}
    assert bool(out.set_index(["i", "j"]).loc[(1, 2), "opposite_orientations"])
    # Opposite claims pool into equality: both orientations carry weight.
    agg = el.aggregate_constraints(J(rows), "panel").set_index(["i", "j"])
    assert agg.loc[(1, 2), "w_ij"] == 0.5 and agg.loc[(1, 2), "w_ji"] == 0.5


# ----------------------------------------------------------------------------- sampling

def test_assignment_design_core_random_and_repeats():
    cfg = el.SessionConfig(n_core=10, n_random=40, n_repeat=2, seed=5)
    rows = el.population_rows(cfg)
    core = el.core_pairs(cfg)
    plans = [el.sample_assignment(cfg, core, rows, np.random.default_rng(el.stakeholder_seed(5, s)))
             for s in ("x", "y")]
    core_set = {tuple(sorted(p)) for p in core}
    for plan in plans:
        assert len(plan) == 52 and list(plan["position"]) == list(range(52))
        assert (plan["a"] != plan["b"]).all() and plan[["a", "b"]].to_numpy().max() < 7214
        assert {tuple(sorted(p)) for p in plan.loc[plan["kind"] == "core", ["a", "b"]].to_numpy()} == core_set
        reps = plan[plan["kind"] == "repeat"]
        assert len(reps) == 2
        for _, r in reps.iterrows():
            orig = plan.loc[r["repeat_of"]]
            assert orig["kind"] != "repeat" and r["repeat_of"] < r["position"] - 1
            assert (orig["a"], orig["b"]) == (r["b"], r["a"])        # shown with sides swapped
    # Order and sides differ between stakeholders; the same stakeholder id reproduces exactly.
    assert not plans[0][["a", "b"]].equals(plans[1][["a", "b"]])
    again = el.sample_assignment(cfg, core, rows, np.random.default_rng(el.stakeholder_seed(5, "x")))
    pd.testing.assert_frame_equal(plans[0], again)


def test_random_pairs_cover_the_population_uniformly():
    rows = np.array([3, 8, 9, 40, 41])              # five people, named by their file rows
    pairs = el._random_pairs(rows, 20000, np.random.default_rng(0))
    assert (pairs[:, 0] != pairs[:, 1]).all() and np.isin(pairs, rows).all()
    counts = np.zeros((5, 5))
    np.add.at(counts, (np.searchsorted(rows, pairs[:, 0]), np.searchsorted(rows, pairs[:, 1])), 1)
    off = counts[~np.eye(5, dtype=bool)]
    assert off.min() > 850 and off.max() < 1150   # 20 cells of expected 1000


@pytest.mark.parametrize("population", ["paper", "propublica", "full"])
def test_sampled_pairs_all_lie_in_the_population(population):
    from core.datasets import compas_population
    cfg = el.SessionConfig(population=population, n_core=20, n_random=400, n_repeat=5, seed=3)
    rows = el.population_rows(cfg)
    assert rows.tolist() == compas_population(population).tolist()
    core = el.core_pairs(cfg)
    assert np.isin(core, rows).all()
    for who in ("x", "y", "z"):
        plan = el.sample_assignment(cfg, core, rows, np.random.default_rng(el.stakeholder_seed(3, who)))
        assert np.isin(plan[["a", "b"]].to_numpy(), rows).all()
    assert el.outside_population(core, population).size == 0


def test_the_default_population_is_the_learners():
    import inspect
    from core.fairness.learning_data import compas_learning_data
    default = inspect.signature(compas_learning_data).parameters["population"].default
    assert el.SessionConfig().population == default == "paper"


def test_paper_pairs_leave_out_people_the_learner_does_not_fit():
    from core.datasets import compas_population
    paper = set(compas_population("paper").tolist())
    outside = sorted(set(range(7214)) - paper)[:2]
    assert el.outside_population(np.array([[outside[0], 0], [1, 2]]), "paper").tolist()[:1] == [outside[0]]


def test_full_population_draws_exactly_what_sessions_drew_before_populations():
    # Before populations, pairs were drawn with integers over 0..7213: "full" keeps every draw.
    cfg = el.SessionConfig(population="full", n_core=10, seed=5)
    rng = np.random.default_rng([5, 0xC0DE])
    i = rng.integers(0, 7214, size=10)
    j = rng.integers(0, 7213, size=10)
    assert el.core_pairs(cfg).tolist() == np.column_stack([i, j + (j >= i)]).tolist()


def test_settings_without_a_population_are_an_older_sessions():
    stored = el.SessionConfig(seed=4).session_dict()
    assert stored["population"] == "paper"
    del stored["population"]
    assert el.SessionConfig.from_dict(stored).population == "full"
    assert el.SessionConfig.from_dict(el.SessionConfig().session_dict()) == el.SessionConfig()
    assert el.SessionConfig.from_dict(el.SessionConfig().to_dict()) == el.SessionConfig()   # a saved plan too


@pytest.mark.parametrize("kwargs, message", [
    ({"features": ()}, "at least one feature"),
    ({"features": ("two_year_recid",)}, "cannot be shown"),
    ({"n_core": -1}, "n_core"),
    ({"n_core": 0, "n_random": 0}, "at least one"),
    ({"n_repeat": 20, "n_core": 2, "n_random": 3}, "repeated"),
    ({"response_mode": "likert"}, "Response mode"),
    ({"favourable_label": 2}, "favourable"),
    ({"data": DataRef("adult")}, "COMPAS"),
    ({"population": "everyone"}, "population"),
])
def test_session_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        el.SessionConfig(**kwargs)


def test_pair_card_speaks_plain_words():
    frame = pd.DataFrame({"age": [34, 19], "sex": ["Male", "Female"], "priors_count": [1, 0],
                          "juv_fel_count": [2, 0], "c_charge_degree": ["F", "M"]})
    card = el.pair_card(frame, 0, 1, ("age", "sex", "priors_count", "juv_fel_count", "c_charge_degree"))
    assert list(card["Feature"]) == ["Age", "Sex", "Prior offences", "Juvenile felonies", "Current charge"]
    assert list(card["Person A"]) == ["34 years old", "Male", "1 prior offence", "2 juvenile felonies", "Felony"]
    assert list(card["Person B"]) == ["19 years old", "Female", "None", "None", "Misdemeanour"]
    with pytest.raises(ValueError, match="outside the data"):
        el.pair_card(frame, 0, 5, ("age",))


# ----------------------------------------------------------------------------- simulation

def test_simulated_judges_mark_close_pairs_and_are_reproducible():
    frame = pd.DataFrame({"priors_count": [0, 0, 20, 1], "age": [30, 31, 60, 30], "juv_fel_count": 0,
                          "juv_misd_count": 0, "juv_other_count": 0, "c_charge_degree": ["F", "F", "M", "F"],
                          "sex": "Male", "race": "Caucasian"})
    pairs = pd.DataFrame({"stakeholder": ["s"] * 3, "a": [0, 0, 1], "b": [1, 2, 2]})
    out = el.simulate_judgments(frame, pairs, np.random.default_rng(1), flip_noise=0.0)
    # The closest pair (0, 1) is always within the judge's q share (q >= 0.1 covers the first of three).
    assert out.loc[0, "response"] == "same" and out["simulated"].all()
    assert out.loc[1, "response"] == "differ" or out.loc[2, "response"] == "differ"
    a = el.demo_panel(5, el.SessionConfig(n_core=3, n_random=10, n_repeat=1), seed=2, frame=_compas())
    b = el.demo_panel(5, el.SessionConfig(n_core=3, n_random=10, n_repeat=1), seed=2, frame=_compas())
    pd.testing.assert_frame_equal(a, b)
    share = a.groupby("stakeholder")["response"].apply(lambda r: (r == "same").mean())
    assert share.between(0.0, 0.9).all() and a["stakeholder"].nunique() == 5


def _compas():
    from core.datasets import load_compas
    return load_compas()


# ----------------------------------------------------------------------------- the design as a plan

def test_default_plan_gives_the_page_default_design():
    from core.fairness import ElicitationPlan, run
    result = run(ElicitationPlan())
    core = result.core_pairs
    assert len(core) == 10 and (core["i"] != core["j"]).all()
    expected = el.core_pairs(el.SessionConfig())
    assert core[["i", "j"]].to_numpy().tolist() == expected.tolist()
    assert list(core.columns[:4]) == ["i", "j", "age (A)", "sex (A)"]
    assert result.plan.population == "paper"
    assert result.headline() == {"core pairs": 10.0, "people pairs are drawn from": 5829.0,
                                 "cards per stakeholder": 52.0}
    assert set(result.tables()) == {"core_pairs"} and result.ledger() is None


def test_plan_validation_names_what_to_change():
    from core.contracts import DataRef
    from core.fairness import ElicitationPlan
    with pytest.raises(ValueError, match="n_core"):
        ElicitationPlan(n_core=-1)
    with pytest.raises(ValueError, match="at least one core or random pair"):
        ElicitationPlan(n_core=0, n_random=0)
    with pytest.raises(ValueError, match="COMPAS"):
        ElicitationPlan(data=DataRef("adult"))
    with pytest.raises(ValueError, match="Simulated stakeholders"):
        ElicitationPlan(demo_stakeholders=61)
    with pytest.raises(ValueError, match="Simulated judges"):
        ElicitationPlan(demo_stakeholders=3, demo_kind="coin")
    with pytest.raises(ValueError, match="demo seed"):
        ElicitationPlan(demo_seed=-2)


def test_simulated_panel_plan_exports_loads_and_reruns_bit_for_bit():
    from core.fairness import ElicitationPlan, run
    from core.report import build_report, load_plan, report_json, tables_match
    plan = ElicitationPlan(n_core=4, n_random=10, n_repeat=1, seed=3, demo_stakeholders=5,
                           demo_kind="score", demo_seed=9)
    result = run(plan)
    assert set(result.tables()) == {"core_pairs", "simulated_judgments", "constraints"}
    assert result.judgments["stakeholder"].nunique() == 5 and len(result.judgments) == 5 * 15
    report = build_report(result, page="Fairness elicitation")
    loaded = load_plan(report_json(report))
    assert loaded == plan and loaded.digest() == plan.digest()
    assert tables_match(report, run(loaded).tables()) == []
    from core.fairness.elicitation_plan import run_elicitation
    assert tables_match(report, run_elicitation.uncached(loaded).tables()) == []
    # The pooled constraints are the paper's panel weights of the simulated answers.
    again = el.aggregate_constraints(result.judgments, "panel", n_stakeholders=5)
    pd.testing.assert_frame_equal(again, result.constraints)


def test_cli_reproduces_a_design_report(tmp_path):
    from core.__main__ import main
    from core.fairness import ElicitationPlan, run
    from core.report import build_report, report_json
    plan = ElicitationPlan(n_core=3, n_random=5, n_repeat=0, demo_stakeholders=3, demo_seed=4)
    path = tmp_path / "design.json"
    path.write_text(report_json(build_report(run(plan), page="Fairness elicitation")))
    assert main(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "constraints.csv").exists()


def test_session_summary_pools_the_chosen_stakeholders():
    from core.fairness.session_summary import Pooling, run_history_table, summarise_session
    config = el.SessionConfig(n_core=3, n_random=6, n_repeat=1, seed=2)
    judged = el.demo_panel(4, config, seed=1).drop(columns=["simulated"]).assign(reason=None)
    judged.loc[0, "reason"] = "=looks alike"
    progress = pd.DataFrame({"stakeholder": sorted(judged["stakeholder"].unique()),
                             "self_agreement": [1.0, 0.0, np.nan, 1.0]})
    whole = summarise_session(judged, progress, config, Pooling())
    assert whole.panel == list(progress["stakeholder"])
    pd.testing.assert_frame_equal(whole.constraints, el.aggregate_constraints(judged, "panel", n_stakeholders=4))
    assert whole.metrics["self_agreement"] == pytest.approx(2 / 3)
    assert whole.metrics["answers"] == len(judged)
    assert whole.aggregation == {"weighting": "panel", "min_support": 0.0, "selection": "whole panel",
                                 "stakeholders": sorted(whole.panel)}
    one = summarise_session(judged, progress, config, Pooling("judged", 0.5, ("simulated-02",)))
    assert set(one.judged["stakeholder"]) == {"simulated-02"} and (one.constraints["n_judges"] == 1).all()
    assert one.aggregation["selection"] == "chosen" and one.metrics["self_agreement"] == 0.0
    with pytest.raises(ValueError, match="not in this session"):
        summarise_session(judged, progress, config, Pooling(stakeholders=("nobody",)))
    with pytest.raises(ValueError, match="Minimum support"):
        Pooling(min_support=float("nan"))
    runs = [{"created_at": "2026-01-01T10:00:00.000+00:00", "superseded": False, "constraint_hash": "ab" * 32,
             "n_constraints": 4, "aggregation": whole.aggregation, "learner": {"T": 100, "oracle": "ols"},
             "unconstrained_error": 0.3, "frontier": [{"target": 0.1, "error": 0.35, "unfairness": 0.1,
                                                        "on_hull": True}],
             "code_version": "test", "note": None}]
    table = run_history_table(runs)
    assert table.loc[0, "stakeholders"] == "whole panel (4)" and table.loc[0, "rounds"] == 100
    assert table.loc[0, "fairest hull point"] == "unfairness 0.100, error 0.350"


def test_demo_session_from_a_plan_is_reproducible(tmp_path):
    from core.datasets import load_compas
    from core.fairness import ElicitationPlan
    from core.fairness.elicitation_plan import fill_demo_session
    from core.fairness.store import ElicitationStore
    store = ElicitationStore(f"sqlite:///{tmp_path / 'demo.sqlite'}")
    plan = ElicitationPlan(n_core=2, n_random=4, n_repeat=0, demo_stakeholders=3, demo_seed=5)
    people = load_compas()
    first, second = (fill_demo_session(store, plan, people) for _ in range(2))
    a = store.judgments(first.session_id, first.facilitator_key)
    b = store.judgments(second.session_id, second.facilitator_key)
    cols = ["stakeholder", "position", "a", "b", "response"]
    pd.testing.assert_frame_equal(a[cols], b[cols])
    assert len(a) == 3 * 6 and store.progress(first.session_id, first.facilitator_key)["simulated"].all()
    # The store session and the plan run without a database hold the same cards and answers.
    from core.fairness import run
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), run(plan).judgments[cols], check_dtype=False)
    with pytest.raises(ValueError, match="at least two"):
        fill_demo_session(store, plan.replace(demo_stakeholders=1), people)
    store.dispose()


@pytest.mark.parametrize("text", ["Judge\u200b fairly", "Judge \u202efairly", "nul\x00"])
def test_instructions_refuse_invisible_characters(text):
    with pytest.raises(ValueError, match="invisible character"):
        el.SessionConfig(instructions=text)
    assert el.SessionConfig(instructions="Line one\n\tLine two").instructions.startswith("Line one")


def test_the_twelve_judge_demo_loses_no_pairs_to_the_learner():
    from core.fairness import ElicitationPlan, run
    from core.fairness.learning_data import compas_learning_data
    from core.fairness.session_summary import learner_pairs
    result = run(ElicitationPlan(demo_stakeholders=12))
    constraints = result.constraints
    assert len(constraints) == 490
    local, dropped = compas_learning_data().local_constraints(constraints)
    assert dropped == 0 and len(local) == len(constraints)
    same = learner_pairs(constraints, "paper", "paper")
    assert same.left_out == 0 and same.note is None
    pd.testing.assert_frame_equal(same.constraints, constraints)


def test_learner_pairs_says_when_session_and_learner_populations_differ():
    from core.datasets import compas_population
    from core.fairness.session_summary import learner_pairs
    paper = set(compas_population("paper").tolist())
    outsider = next(r for r in range(7214) if r not in paper)
    inside = sorted(paper)[:3]
    frame = pd.DataFrame({"i": [inside[0], min(outsider, inside[1])], "j": [inside[2], max(outsider, inside[1])],
                          "w_ij": [1.0, 0.5], "w_ji": [1.0, 0.5]})
    older = learner_pairs(frame, "full", "paper")
    assert older.left_out == 1 and older.constraints[["i", "j"]].to_numpy().tolist() == [[inside[0], inside[2]]]
    assert "1 of 2 pooled pair(s)" in older.note and "every row" in older.note
    wider = learner_pairs(frame.iloc[:1], "paper", "full")
    assert wider.left_out == 0 and "Every pooled pair" in wider.note
    with pytest.raises(ValueError, match="Unknown population"):
        learner_pairs(frame, "nobody", "paper")


# ----------------------------------------------------------------------------- one design class

def test_the_session_settings_and_the_plan_are_one_class_and_old_forms_still_load():
    from core.contracts import plan_from_dict
    from core.fairness import ElicitationPlan
    from core.fairness.elicitation_plan import ElicitationPlan as from_plan_module
    assert el.SessionConfig is ElicitationPlan is from_plan_module
    # A session stored before: settings form, no population, no pair source -> the same design.
    stored = {"dataset": "compas", "features": list(el.DEFAULT_FEATURES), "n_core": 3, "n_random": 7, "n_repeat": 1,
              "response_mode": "four_option", "favourable_label": 1, "seed": 9,
              "instructions": el.DEFAULT_INSTRUCTIONS}
    config = ElicitationPlan.from_dict(stored)
    assert config == ElicitationPlan(population="full", n_core=3, n_random=7, n_repeat=1,
                                     response_mode="four_option", favourable_label=1, seed=9)
    assert config.session_dict() == {**stored, "population": "full"}
    # A report saved when the plan lived in elicitation_plan.py: same plan, same digest.
    plan = ElicitationPlan(n_core=4, demo_stakeholders=3, demo_seed=2)
    saved = {**plan.to_dict(), "__module__": "core.fairness.elicitation_plan"}
    assert plan_from_dict(saved) == plan and plan_from_dict(saved).digest() == plan.digest()
    # The simulated panel is the plan's own: a live session stores only the design.
    assert "demo_stakeholders" not in plan.session_dict()
    assert plan.session_config() == ElicitationPlan(n_core=4)
    with pytest.raises(ValueError, match="Unknown session configuration fields"):
        ElicitationPlan.from_dict({**stored, "demo_stakeholders": 3})
