"""The shared contract: seeded streams, plan round trips, registries, guarded CSV, report schema."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from core.contracts import (DataRef, Plan, Registry, Spec, _from_fields, check_params, finite_number, make_rng,
                            named_rng, param, seed_sequence, spawn_rngs, stream_key, whole_number)
from core.report import guarded_csv, migrate, table_records, tables_match, unguard_cell


@dataclass(frozen=True)
class _Inner(Plan):
    epsilon: float = 1.0
    columns: tuple[str, ...] = ("a", "b")


@dataclass(frozen=True)
class _Outer(Plan):
    data: DataRef = DataRef("cps")
    inner: _Inner | None = None
    seeds: tuple[int, ...] = (1, 2)


def test_make_rng_refuses_missing_seed_and_passes_generators_through():
    with pytest.raises(ValueError, match="seed"):
        make_rng(None)
    with pytest.raises(ValueError, match="non-negative"):
        make_rng(-3)
    g = np.random.default_rng(1)
    assert make_rng(g) is g
    assert make_rng(5).integers(1 << 30) == np.random.default_rng(5).integers(1 << 30)


def test_named_streams_are_independent_of_each_other_and_stable():
    a = np.random.default_rng(seed_sequence(7, stream_key("laplace"))).random(3)
    b = np.random.default_rng(seed_sequence(7, stream_key("laplace"))).random(3)
    c = np.random.default_rng(seed_sequence(7, stream_key("gaussian"))).random(3)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert [g.random() for g in spawn_rngs(3, 4)] == [g.random() for g in spawn_rngs(3, 4)]


def test_named_rng_is_the_seeded_sub_stream_of_its_keys():
    assert np.array_equal(named_rng(7, "laplace").random(3),
                          np.random.default_rng(seed_sequence(7, stream_key("laplace"))).random(3))
    assert np.array_equal(named_rng(7, "ensemble", 2).random(3),
                          np.random.default_rng(seed_sequence(7, stream_key("ensemble"), 2)).random(3))
    with pytest.raises(ValueError):
        named_rng(None, "laplace")


def test_plan_round_trip_keeps_nested_plans_tuples_and_digest():
    plan = _Outer(inner=_Inner(epsilon=0.5, columns=("x",)), seeds=(4,))
    body = json.loads(json.dumps(plan.to_dict()))
    back = _from_fields(_Outer, body)
    assert back == plan and back.digest() == plan.digest()
    assert isinstance(back.inner.columns, tuple)
    with pytest.raises(ValueError, match="no field"):
        _from_fields(_Outer, {**body, "surprise": 1})


@pytest.mark.parametrize("path, value, message", [
    (("inner", "epsilon"), "1", "Expected a float"),
    (("inner", "epsilon"), True, "Expected a float"),
    (("inner", "columns"), "ab", "Expected a list"),
    (("inner", "columns"), [1, 2], "Expected a str"),
    (("seeds",), [1.5], "whole number"),
    (("seeds",), [None], "whole number"),
    (("data",), [1], "DataRef"),
])
def test_saved_plan_members_of_the_wrong_type_are_refused_with_the_field_named(path, value, message):
    body = json.loads(json.dumps(_Outer(inner=_Inner()).to_dict()))
    holder = body
    for part in path[:-1]:
        holder = holder[part]
    holder[path[-1]] = value
    with pytest.raises(ValueError, match=message):
        _from_fields(_Outer, body)


def test_saved_plan_whole_floats_are_read_as_whole_numbers():
    body = json.loads(json.dumps(_Outer(seeds=(3,)).to_dict()))
    body["seeds"] = [3.0]
    assert _from_fields(_Outer, body).seeds == (3,)


def test_a_data_reference_carries_its_schema_and_keeps_old_digests():
    from core.intake import ColumnSchema, DataSchema
    plain = _Outer(data=DataRef("upload", "ab" * 32))
    assert "schema" not in plain.to_dict()["data"]          # plans without a schema hash as before
    schema = DataSchema("County extract", (ColumnSchema("sex", "category", categories=("Female", "Male")),))
    declared = plain.replace(data=DataRef("upload", "ab" * 32, schema=schema))
    back = _from_fields(_Outer, json.loads(json.dumps(declared.to_dict())))
    assert back.data.schema == schema and back.digest() == declared.digest() != plain.digest()


def test_upload_reference_needs_a_fingerprint():
    with pytest.raises(ValueError, match="fingerprint"):
        DataRef("upload")
    assert DataRef("upload", "ab" * 32).is_upload


@dataclass(frozen=True)
class _Params:
    epsilon: float = param(1.0, low=0.01, high=10.0, label="epsilon")
    method: str = param("a", choices=("a", "b"))
    rounds: int = param(3, low=1, high=100, label="Rounds")
    merge: bool = param(True, label="Merge repeats")

    def __post_init__(self):
        check_params(self)


def test_params_bounds_and_registry_errors_are_value_errors():
    with pytest.raises(ValueError, match="at most 10"):
        _Params(epsilon=11.0)
    with pytest.raises(ValueError, match="finite"):
        _Params(epsilon=float("nan"))
    with pytest.raises(ValueError, match="one of"):
        _Params(method="c")
    with pytest.raises(ValueError, match="Rounds must be a number"):
        _Params(rounds=True)                      # a yes/no is not a count of 1
    with pytest.raises(ValueError, match="Rounds must be a whole number"):
        _Params(rounds=2.5)
    with pytest.raises(ValueError, match="epsilon must be a number"):
        _Params(epsilon="1")
    with pytest.raises(ValueError, match="Merge repeats must be yes or no"):
        _Params(merge="false")
    assert _Params(rounds=4.0, epsilon=2).rounds == 4.0
    reg = Registry("mechanism", [Spec("x", "X", lambda p: p.epsilon, _Params)])
    assert reg["x"].build() == 1.0
    with pytest.raises(ValueError, match="Unknown mechanism"):
        reg["nope"]


def test_guarded_csv_escapes_formulas_and_round_trips():
    df = pd.DataFrame({"name": ["=HYPERLINK(1)", "+1", "-x", "@a", "plain", "'q"], "n": range(6)})
    text = guarded_csv(df)
    back = pd.read_csv(pd.io.common.StringIO(text))
    assert all(not str(v).startswith(("=", "+", "-", "@")) for v in back["name"])
    assert [unguard_cell(v) for v in back["name"]] == list(df["name"])


def test_tables_keep_every_float_bit_and_old_reports_are_refused():
    df = pd.DataFrame({"x": [0.1 + 0.2, np.nan, 1e-300]})
    assert tables_match({"tables": {"t": table_records(df)}}, {"t": df}) == []
    assert tables_match({"tables": {"t": table_records(df)}}, {"t": df + 1e-16}) == ["t"]
    with pytest.raises(ValueError, match="older version"):
        migrate({"config": {}, "tables": {}})
    with pytest.raises(ValueError, match="not a report"):
        migrate({"hello": 1})


RUNS: list[str] = []


def _toy_run(plan, data=None, *, progress=None):
    RUNS.append(plan.digest())
    return plan.inner.epsilon * (0 if data is None else len(data))


def test_cached_run_keys_on_plan_digest_and_data_fingerprint(tmp_path, monkeypatch):
    from core.cache import cached
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path))
    run = cached(_toy_run)
    RUNS.clear()
    plan = _Outer(inner=_Inner(epsilon=2.0))
    assert run(plan, b"abc") == 6.0 and run(plan, b"abc") == 6.0 and len(RUNS) == 1
    assert run.is_cached(plan, b"abc") and not run.is_cached(plan, b"abcd")
    assert run(plan, b"abcd", progress=lambda *a: None) == 8.0 and len(RUNS) == 2
    assert run(plan.replace(inner=_Inner(epsilon=3.0)), b"abc") == 9.0 and len(RUNS) == 3


def test_finite_and_whole_number_checks_say_what_to_change():
    assert finite_number("0.5", "The cut-off") == 0.5
    assert finite_number(3, "Alpha", 0, 5) == 3.0
    for bad, message in ((None, "must be a number"), ("x", "must be a number"), (float("nan"), "finite"),
                         (10**400, "must be a number"), (7, "between 0 and 5")):
        with pytest.raises(ValueError, match=message):
            finite_number(bad, "Alpha", 0, 5)
    with pytest.raises(ValueError, match="at least 1"):
        finite_number(0.5, "Rounds", low=1)
    assert whole_number(np.int64(4), "Runs", 1, 10) == 4
    for bad in (True, 4.0, "4", 0, 11):
        with pytest.raises(ValueError, match="whole number from 1 to 10"):
            whole_number(bad, "Runs", 1, 10)
