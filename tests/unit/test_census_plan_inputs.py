"""Whatever a page or a saved report feeds the budget plans, only ValueError comes back (never a
TypeError, ZeroDivisionError or OverflowError), and numbers that would wrap around are refused."""
import dataclasses
import json

import pytest

from core.census import AlgorithmPlan, Allocation, BudgetPlan, MechanismSweepPlan, PublicInfoPlan, WemPlan
from core.census.geography_data import check_fanouts, parse_fanouts
from core.contracts import plan_from_dict
from core.report import load_plan

WEIRD = [None, "abc", "", float("nan"), float("inf"), -float("inf"), -1, 0, 2**64, 4294967296, 10**400, True,
         (), (1,), ("a",), (float("nan"),), {"a": 1}, [1, 2], 1e308, -1e308]


def _fields(cls):
    return [f.name for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("cls", [BudgetPlan, AlgorithmPlan, MechanismSweepPlan, PublicInfoPlan, WemPlan])
def test_every_field_refuses_weird_values_with_value_error_only(cls):
    for name in _fields(cls):
        for value in WEIRD:
            try:
                cls(**{name: value})
            except ValueError:
                pass
            # anything else (TypeError, OverflowError, ZeroDivisionError, ...) fails the test


@pytest.mark.parametrize("fanouts", [(4294967296, 4294967296), (2**32, 2**32, 1), (65536, 65536), (0, 4),
                                     (-3,), (1.5,), (True,), (10**30,), ()])
def test_fanouts_that_would_wrap_are_refused(fanouts):
    with pytest.raises(ValueError):
        check_fanouts(fanouts)
    with pytest.raises(ValueError):
        BudgetPlan(fanouts=fanouts)


@pytest.mark.parametrize("text", ["4294967296, 4294967296", "9" * 40, "-4", "4.5", "a", "", ",,,", "1e9"])
def test_typed_fanouts_are_checked(text):
    with pytest.raises(ValueError):
        parse_fanouts(text)


def test_a_saved_report_with_tampered_values_gives_value_errors():
    base = BudgetPlan().to_dict()
    for key in ("total", "fanouts", "targets", "target_weights", "runs", "seed", "delta", "mechanism",
                "sensitivity", "custom_shares", "split"):
        for value in ("x", None, [1, "a"], 1e999 if False else 1e308, -5, {"__type__": "DataRef"}):
            body = {**base, key: value}
            try:
                plan_from_dict(body)
            except ValueError:
                pass
    with pytest.raises(ValueError):
        load_plan({"schema": 2, "plan": {**base, "fanouts": [4294967296, 4294967296]}})


@pytest.mark.parametrize("text", [
    '{"format": "census-budget-allocation", "level_names": 3, "budgets": [1], "unit": "epsilon", "mechanism": "laplace"}',
    '{"format": "census-budget-allocation", "level_names": ["a"], "budgets": [1e308, 1e308], "unit": "epsilon", '
    '"mechanism": "laplace"}',
    '{"format": "census-budget-allocation", "level_names": ["a"], "budgets": [1], "unit": "epsilon", '
    '"mechanism": "laplace", "sensitivity": [2]}',
    '{"format": "census-budget-allocation", "level_names": ["a"], "budgets": [1], "unit": "rho", '
    '"mechanism": "gaussian", "delta": "x"}',
    '{"format": "census-budget-allocation", "level_names": ["a"], "budgets": [1], "unit": "epsilon", '
    '"mechanism": ["laplace"]}',
    '{"format": "census-budget-allocation", "level_names": ["a"], "budgets": [true], "unit": "epsilon", '
    '"mechanism": "laplace"}',
    '[1, 2]', 'null', '"text"', '{"format": "census-budget-allocation"}'])
def test_allocation_files_give_value_errors(text):
    with pytest.raises(ValueError):
        Allocation.from_json(text)


def test_allocation_round_trip_keeps_a_parameterised_mechanism():
    alloc = Allocation(("a", "b"), (0.5, 0.5), "epsilon", "generalized_gaussian[order=4.0,delta=5e-07]", 2.0, 1e-6)
    back = Allocation.from_json(alloc.to_json())
    assert back == alloc and back.noise.delta == 5e-07 and back.total_delta == pytest.approx(1e-6)
    assert json.loads(alloc.to_json())["mechanism"].startswith("generalized_gaussian[")
