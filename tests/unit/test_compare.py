"""Delta tables between two scenarios: headline numbers with sign and percentage, tidy cell deltas."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from core.compare import (compare, compare_reports, compare_results, format_change, headline_delta, identifying_columns,
                          relative_change, snapshot_of_report, snapshot_of_result, table_delta)
from core.contracts import Plan, Result
from core.report import build_report, report_json


@dataclass(frozen=True)
class ToyPlan(Plan):
    scale: float = 1.0


@dataclass
class ToyResult(Result):
    plan: ToyPlan
    calls: list

    def tables(self):
        self.calls.append("tables")
        s = self.plan.scale
        return {"groups": pd.DataFrame({"group": ["a", "b", "=c"], "district": [1, 2, 3],
                                        "error": [1.0 * s, 2.0 * s, 0.0], "passes": [True, s < 2, True]})}

    def headline(self):
        return {"worst error": 2.0 * self.plan.scale, "zero": 0.0, "only A" if self.plan.scale == 1 else "only B": 1.0}


def toy(scale: float) -> ToyResult:
    return ToyResult(ToyPlan(scale), [])


def test_headline_delta_signs_percentages_and_missing():
    out = headline_delta({"x": 2.0, "z": 0.0, "a only": 1.0}, {"x": 3.0, "z": -1.0, "b only": 4.0})
    assert list(out.columns) == ["number", "A", "B", "change", "change_pct", "direction", "why"]
    assert list(out["number"]) == ["x", "z", "a only", "b only"]
    assert (out["why"] == "").all()                      # no meaning declared: every number is subtracted
    row = out.set_index("number")
    assert row.loc["x", "change"] == 1.0 and row.loc["x", "change_pct"] == pytest.approx(50.0)
    assert row.loc["x", "direction"] == "higher"
    assert row.loc["z", "change"] == -1.0 and math.isnan(row.loc["z", "change_pct"])  # A = 0: no percentage
    assert row.loc["z", "direction"] == "lower"
    assert math.isnan(row.loc["a only", "B"]) and row.loc["a only", "direction"] == "n/a"
    assert math.isnan(row.loc["b only", "A"]) and row.loc["b only", "direction"] == "n/a"


def test_relative_change_uses_magnitude_of_a():
    np.testing.assert_allclose(relative_change(np.array([-2.0, 4.0]), np.array([-1.0, 2.0])), [50.0, -50.0])
    assert np.isnan(relative_change(np.inf, 1.0))


def test_table_delta_matches_rows_on_identifying_columns():
    a = toy(1.0).tables()["groups"]
    b = toy(2.0).tables()["groups"].iloc[::-1].reset_index(drop=True)  # row order does not matter
    assert identifying_columns(a, b) == ["group"]  # district differs in order, so it is a value here
    out = table_delta(a, b)
    err = out[out["column"] == "error"].set_index("group")
    assert err.loc["b", "A"] == 2.0 and err.loc["b", "B"] == 4.0 and err.loc["b", "change_pct"] == 100.0
    assert err.loc["=c", "direction"] == "same"
    passes = out[out["column"] == "passes"].set_index("group")
    assert passes.loc["b", "change"] == -1.0  # a flag that switched off


def test_table_delta_keeps_rows_only_one_side_has():
    a = pd.DataFrame({"k": ["x", "y"], "v": [1.0, 2.0]})
    b = pd.DataFrame({"k": ["y", "z"], "v": [3.0, 5.0]})
    out = table_delta(a, b).set_index("k")
    assert math.isnan(out.loc["x", "B"]) and math.isnan(out.loc["z", "A"]) and out.loc["y", "change"] == 1.0


def test_table_delta_without_numbers_is_an_empty_tidy_frame():
    out = table_delta(pd.DataFrame({"k": ["a"]}), pd.DataFrame({"k": ["b"]}))
    assert out.empty and "change_pct" in out.columns


def test_snapshot_freezes_a_result_so_comparing_does_not_recompute_it():
    a_result = toy(1.0)
    a = snapshot_of_result(a_result, page="Toy")
    calls_after_pin = len(a_result.calls)
    b = snapshot_of_result(toy(2.0), page="Toy", label="B")
    comparison = compare(a, b)
    assert len(a_result.calls) == calls_after_pin  # A was not asked for its tables again
    assert a.plan_class == "ToyPlan" and a.plan_digest == ToyPlan(1.0).digest()
    assert not comparison.same_plan
    head = comparison.headline.set_index("number")
    assert head.loc["worst error", "change"] == 2.0 and head.loc["worst error", "change_pct"] == 100.0
    assert set(comparison.tables()) == {"headline_delta", "delta_groups"}


def test_reports_compare_from_raw_bytes_like_uploads():
    raw_a = report_json(build_report(toy(1.0), page="Toy")).encode()
    raw_b = report_json(build_report(toy(1.5), page="Toy")).encode()
    comparison = compare_reports(raw_a, raw_b)
    head = comparison.headline.set_index("number")
    assert head.loc["worst error", "B"] == 3.0 and head.loc["worst error", "change_pct"] == pytest.approx(50.0)
    groups = comparison.table("groups")
    assert set(groups["group"]) == {"a", "b", "=c"}  # text read back as written


def test_same_settings_compare_as_the_same_plan():
    comparison = compare(snapshot_of_result(toy(1.0), page="Toy"), snapshot_of_result(toy(1.0), page="Toy"))
    assert comparison.same_plan and set(comparison.headline["direction"]) == {"same"}


def test_scenarios_of_different_pages_do_not_compare():
    other = build_report(toy(1.0), page="Toy")
    other["plan"] = {**other["plan"], "__type__": "OtherPlan"}
    with pytest.raises(ValueError, match="same page"):
        compare(snapshot_of_result(toy(1.0), page="Toy"), snapshot_of_report(other, "B"))


def test_a_file_that_is_not_a_report_is_refused():
    with pytest.raises(ValueError):
        compare_reports(b'{"hello": 1}', b"{}")
    with pytest.raises(ValueError):
        snapshot_of_report(b"\x00\x01 not json")


def test_missing_table_names_what_to_do():
    comparison = compare(snapshot_of_result(toy(1.0), page="Toy"), snapshot_of_result(toy(2.0), page="Toy"))
    with pytest.raises(ValueError, match="Only one"):
        comparison.table("nope")


def test_format_change():
    assert format_change(1.5, 50.0) == "+1.5 (+50.0%)"
    assert format_change(-2.0, float("nan")) == "-2 (n/a %)"
    assert format_change(0.0, 0.0) == "no change"
    assert format_change(float("nan"), float("nan")) == "n/a"


def test_very_large_tables_are_left_out_of_cell_deltas():
    comparison = compare(snapshot_of_result(toy(1.0), page="Toy"), snapshot_of_result(toy(2.0), page="Toy"))
    assert comparison.too_large("groups", max_cells=5) and not comparison.too_large("groups")
    assert set(comparison.tables(max_cells=5)) == {"headline_delta"}


def test_two_results_compare_directly():
    comparison = compare_results(toy(1.0), toy(3.0), page="Toy")
    head = comparison.headline.set_index("number")
    assert head.loc["worst error", "change"] == 4.0 and head.loc["worst error", "change_pct"] == pytest.approx(200.0)
    assert comparison.a.label == "A" and comparison.b.label == "B"
