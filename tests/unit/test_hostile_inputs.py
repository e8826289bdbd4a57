"""Hostile numbers and files are refused at the core's door with a ValueError that says what to change.

Each area gets one parametrised test: NaN and infinite numbers, numbers near the float maximum,
zero-size settings, and JSON members of the wrong kind in a session export, a stored synthetic copy
or a report. Before these checks each case either raised another exception deep inside or ran on
and produced garbage.
"""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

NAN, INF, HUGE = float("nan"), float("inf"), 1.7e308


# ------------------------------------------------------------------------------ coherence

@pytest.mark.parametrize("field, value, message", [
    ("epsilon", HUGE, "epsilon must be at most"),
    ("zeta", HUGE, "zeta at most"),
    ("n", INF, "n must be a whole number"),
    ("n", 10**300, "n must be a whole number"),
    ("size", NAN, "size must be a whole number"),
    ("n_groups", "3", "n groups must be a whole number"),
    ("k_records", True, "k records must be a whole number"),
    ("k_records", 0, "k records must be a whole number"),
])
def test_theory_calculator_refuses_hostile_numbers(field, value, message):
    from core.coherence.calculator import TheoryPlan
    with pytest.raises(ValueError, match=message):
        TheoryPlan(**{field: value})


@pytest.mark.parametrize("item", [NAN, 0, "age<30", None])
def test_audit_plan_refuses_custom_subgroups_that_are_not_subgroups(item):
    from core.coherence.plan import AuditPlan
    with pytest.raises(ValueError, match="custom subgroup needs a name and its conditions"):
        AuditPlan(custom_subgroups=(item,))


# ------------------------------------------------------------------------------ fairness: learner

@pytest.mark.parametrize("field, value, message", [
    ("gamma", NAN, "gamma"), ("gamma", INF, "gamma"),
    ("eta", NAN, "eta"), ("eta", HUGE, "eta"),
    ("T", NAN, "T \\(number of rounds"), ("T", INF, "T \\(number of rounds"), ("T", 0, "T \\(number of rounds"),
    ("T", 2.5, "T \\(number of rounds"),
    ("C_lambda", NAN, "C_lambda"), ("C_lambda", HUGE, "C_lambda"), ("C_lambda", 0, "C_lambda"),
    ("C_tau", INF, "C_tau"), ("mu_lambda", NAN, "mu_lambda"), ("mu_lambda", 0.0, "mu_lambda"),
    ("record_every", 0, "record_every"), ("record_every", NAN, "record_every"),
])
def test_learner_settings_refuse_hostile_numbers(field, value, message):
    from core.fairness.learner import LearnerConfig
    with pytest.raises(ValueError, match=message):
        LearnerConfig(**{field: value}).validate()


# ------------------------------------------------------------------------------ fairness: session files

@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A small session export with one stakeholder, one answer and one logged fit run."""
    from core.fairness.elicitation import SessionConfig
    from core.fairness.store import ElicitationStore
    store = ElicitationStore(f"sqlite:///{tmp_path_factory.mktemp('hostile') / 's.sqlite'}")
    created = store.create_session(SessionConfig(n_core=1, n_random=2, n_repeat=1), "hostile")
    me = store.join(created.join_code, "Ann")
    store.record_answer(me.token, 0, "same", "evt-00000001", confidence=3, latency_ms=12.0)
    store.record_fit_run(created.session_id, created.facilitator_key, constraint_hash="c" * 16,
                         aggregation={"rule": "majority"}, learner={"T": 10},
                         summary={"n_constraints": 1, "unconstrained_error": 0.3,
                                  "frontier": [{"target": 0.1, "error": 0.3, "unfairness": 0.1, "on_hull": True}]})
    text = store.export_json(created.session_id, created.facilitator_key)
    store.dispose()
    return json.loads(text)


def _set(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize("path, value, message", [
    (("schema_version",), 0, "schema_version must be 1 or more"),
    (("schema_version",), NAN, "schema_version must be a whole number"),
    (("events",), {}, "no 'events' section"),
    (("stakeholders",), {"s001": {}}, "no 'stakeholders' section"),
    (("session", "config"), [1, 2], "settings \\('config'\\) must be a JSON object"),
    (("session", "name"), ["a list"], "name must be text"),
    (("session", "simulated"), "false", "'simulated' must be true or false"),
    (("stakeholders", 0, "simulated"), "no", "'simulated' must be true or false"),
    (("assignments", 0, "stakeholder"), ["s001"], "unknown stakeholder"),
    (("events", 0, "stakeholder"), {"id": 1}, "text 'stakeholder' and 'response'"),
    (("events", 0, "response"), ["same"], "text 'stakeholder' and 'response'"),
    (("events", 0, "latency_ms"), HUGE, "Latency on card 0"),
    (("events", 0, "latency_ms"), -1, "Latency on card 0"),
    (("fit_runs",), 0, "fit_runs must be a list"),
    (("fit_runs", 0, "superseded"), "false", "'superseded' must be true or false"),
    (("fit_runs", 0, "n_constraints"), 10**18, "n_constraints must be a whole number from 0"),
    (("fit_runs", 0, "unconstrained_error"), True, "unconstrained_error must be a number"),
    (("fit_runs", 0, "frontier", 0, "on_hull"), "yes", "on_hull must be true or false"),
    (("fit_runs", 0, "frontier", 0, "error"), [0.3], "error must be a number"),
])
def test_session_export_refuses_members_of_the_wrong_kind(export, path, value, message):
    from core.fairness.store import parse_export
    bad = _set(export, path, value)
    with pytest.raises(ValueError, match=message) as err:
        parse_export(bad)
    assert "malformed" not in str(err.value)        # says what is wrong, not which exception fired


@pytest.mark.parametrize("latency", [NAN, INF, HUGE, -1.0, True, "12", [12]])
def test_an_answer_refuses_a_hostile_latency(latency):
    from core.fairness.store.sessions import check_answer
    with pytest.raises(ValueError, match="Latency must be a number of milliseconds"):
        check_answer(("same", "different"), frozenset({0}), 0, "same", None, latency)


@pytest.fixture(scope="module")
def stored_copy():
    from core.fairness.private_pairs import PrivatePairsPlan, copy_to_json, simulated_synthetic_people
    made = simulated_synthetic_people(PrivatePairsPlan(epsilon=1.0), np.random.default_rng(11))
    return json.loads(json.dumps(copy_to_json(made)))


@pytest.mark.parametrize("path, value, message", [
    (("delta",), [1e-9], "not a COMPAS copy at delta"),
    (("delta",), True, "not a COMPAS copy at delta"),
    (("epsilon",), HUGE, "epsilon"),
    (("epsilon",), NAN, "epsilon"),
    (("secure",), "false", "'secure' must be true or false"),
    (("created_at",), 12, "'created_at' must be a date and time"),
    (("people", "age"), [[1]] * 2000, "numeric column 'age' does not match"),
    (("people", "age"), ["x"] * 2000, "numeric column 'age' does not match"),
    (("people", "age"), [1.0], "numeric column 'age' does not match"),
])
def test_a_stored_copy_refuses_members_of_the_wrong_kind(stored_copy, path, value, message):
    from core.fairness.private_pairs import copy_from_json
    with pytest.raises(ValueError, match=message):
        copy_from_json(_set(stored_copy, path, value))


# ------------------------------------------------------------------------------ reports and the command line

@pytest.fixture(scope="module")
def report():
    import core.census
    from core.census import BudgetPlan
    from core.report import build_report, report_json
    return json.loads(report_json(build_report(core.census.run(BudgetPlan()), page="Budget allocation")))


@pytest.mark.parametrize("path, value, message", [
    (("schema",), True, "schema must be a whole number"),
    (("schema",), 0, "schema must be a whole number"),
    (("schema",), 1.5, "schema must be a whole number"),
    (("plan",), "BudgetPlan", "'plan' must be an object"),
    (("tables",), None, "'tables' must be an object"),
    (("tables",), "x", "'tables' must be an object"),
    (("tables",), [1], "'tables' must be an object"),
    (("headline",), [1, 2], "'headline' must be an object or null"),
    (("page",), 7, "'page' must be text or null"),
    (("ledger",), "spent", "'ledger' must be an object or null"),
    (("tables", "t"), [1], "table 't' must be an object"),
    (("tables", "t"), {"columns": ["a", 1], "rows": []}, "column names as text"),
    (("tables", "t"), {"columns": ["a", "b"], "rows": [[1]]}, "list of 2 cells"),
    (("tables", "t"), {"columns": ["a"], "rows": "1"}, "list of 1 cells"),
])
def test_a_report_refuses_members_of_the_wrong_kind(report, path, value, message):
    from core.compare import snapshot_of_report
    from core.report import load_plan, parse_report
    bad = _set(report, path, value)
    with pytest.raises(ValueError, match=message):
        parse_report(json.dumps(bad))
    with pytest.raises(ValueError, match=message):
        load_plan(bad)
    with pytest.raises(ValueError, match=message):
        snapshot_of_report(bad)


@pytest.mark.parametrize("path, value", [(("tables",), None), (("tables",), "x"), (("schema",), True)])
def test_reproduce_says_what_is_wrong_with_a_hostile_report(report, path, value, tmp_path, capsys):
    from core.__main__ import main
    file = tmp_path / "report.json"
    file.write_text(json.dumps(_set(report, path, value)))
    assert main(["reproduce", str(file), "--out", str(tmp_path / "out")]) == 2
    assert "error: The report's" in capsys.readouterr().err


@pytest.mark.parametrize("field, value, message", [
    ("C_lambda", HUGE, "C_lambda"), ("C_lambda", NAN, "C_lambda"), ("C_lambda", 0.0, "C_lambda"),
    ("T", 0, "Rounds"), ("T", INF, "Rounds"), ("gammas", (NAN, 0.1), "gammas"), ("gammas", (HUGE, 0.1), "gamma"),
    ("pair_holdout", NAN, "pair_holdout"),
])
def test_frontier_plan_refuses_hostile_numbers(field, value, message):
    from core.fairness.frontier import FrontierPlan
    with pytest.raises(ValueError, match=message):
        FrontierPlan(**{field: value})


# ------------------------------------------------------------------------------ synthesis

def _synthesis_plan(**changes):
    from core.contracts import DataRef
    from core.synthesis.plan import SynthesisPlan
    return SynthesisPlan(data=DataRef("adult"), columns=("sex", "race", "age", "income"), **changes)


@pytest.mark.parametrize("bounds, message", [
    ((("age", -HUGE, HUGE),), "wider than a number can hold"),
    ((("age", 0.0, NAN),), "upper bound of age must be a finite number"),
    ((("age", 0.0, 10**400),), "upper bound of age must be a number"),
    ((("age", True, 90.0),), "lower bound of age must be a number"),
    ((("age", 90.0, 17.0),), "upper bound above its lower bound"),
    ((("age", 17.0, 90.0), ("age", 0.0, 50.0)), "two public ranges"),
    (("age",), "Each numeric bound is \\(column, low, high\\)"),
    (((3, 0.0, 1.0),), "Each numeric bound is \\(column, low, high\\)"),
])
def test_synthesis_plans_refuse_hostile_public_ranges(bounds, message):
    from core.contracts import DataRef
    from core.synthesis.mean_release import MeanReleasePlan
    with pytest.raises(ValueError, match=message):
        _synthesis_plan(numeric_bounds=bounds)
    with pytest.raises(ValueError, match=message):
        MeanReleasePlan(data=DataRef("adult"), column="hours", strata=("sex",), value_range=(0.0, 99.0),
                        numeric_bounds=bounds)


@pytest.mark.parametrize("value_range, message", [
    ((-HUGE, HUGE), "wider than a number can hold"), ((0.0, INF), "finite number"), ((NAN, 1.0), "finite number"),
])
def test_mean_release_refuses_a_hostile_value_range(value_range, message):
    from core.contracts import DataRef
    from core.synthesis.mean_release import MeanReleasePlan
    with pytest.raises(ValueError, match=message):
        MeanReleasePlan(data=DataRef("adult"), column="hours", strata=("sex",), value_range=value_range)


@pytest.mark.parametrize("field, value", [("count_share", True), ("delta", 10**400), ("min_stratum_size", True)])
def test_synthesis_plan_refuses_yes_no_and_overflowing_numbers(field, value):
    with pytest.raises(ValueError, match="must be a number"):
        _synthesis_plan(**{field: value})
