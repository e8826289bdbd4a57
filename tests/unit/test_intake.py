"""A curator's own data: profile, draft schema, every problem at once, cleaning, and the command line."""
from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import core.intake as intake
from core.contracts import Plan, plan_from_dict, plan_to_dict
from core.intake import (BLOCKS, MISSING_LABEL, WARNING, ColumnSchema, DataSchema, apply, check, clean,
                         draft_schema, needs_public_info, profile, read_table)
from core.report import guarded_csv
from core.uploads import read_upload
from tests.core_command import core_command

REPO = Path(__file__).resolve().parents[2]
MESSY = REPO / "tests" / "fixtures" / "messy_county.csv"


@pytest.fixture(scope="module")
def messy() -> pd.DataFrame:
    return read_table(MESSY)


@pytest.fixture(scope="module")
def draft(messy) -> DataSchema:
    return draft_schema(messy, "County extract")


def small() -> pd.DataFrame:
    """Twenty rows whose cleaning is worked out by hand in the tests below."""
    return pd.DataFrame({
        "pid": [f"P{i:02d}" for i in range(20)],
        "sex": ["Female", "female", "F", "Male ", "M", "FEMALE", "Male", "Female", "Male", "Female"] * 2,
        "income": ["45,000", "$45,000", "12%", "N/A", "52000", "n/a", "1,234.5", "$ 7", "0", "100"] * 2,
        "note": [f"free text {i}" for i in range(20)],
    })


# ---------------------------------------------------------------------------------------- profile
def test_profile_counts_missing_and_numbers_written_as_text():
    prof = profile(small())
    income = prof.column("income")
    assert income.missing == 4                        # "N/A" and "n/a", twice each
    assert income.numbers == 16
    assert income.numbers_as_text == 10               # 45,000  $45,000  12%  1,234.5  $ 7 (x2); 52000 0 100 are plain
    assert income.percent == 2
    sex = prof.column("sex")
    assert sex.distinct == 6 and sex.case_variants == 2  # female and FEMALE beside Female ("Male " is trimmed)
    assert prof.column("pid").guess == "id"
    assert not hasattr(prof, "to_report")


def test_missing_tokens_are_configurable():
    frame = pd.DataFrame({"a": ["unknown", "x", "y", ""] * 5})
    assert profile(frame).column("a").missing == 10
    assert profile(frame, missing_tokens=("",)).column("a").missing == 5


def test_type_guess_income_is_a_number_and_codes_are_ids():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "income": [f"{v:,}" for v in rng.integers(10_000, 200_000, 300)],     # nearly all distinct, with spread
        "plain_income": rng.integers(10_000, 99_999, 300),                      # five digits, not named id
        "code": [f"{i:06d}" for i in range(300)],                               # zero-padded codes
        "serial": np.arange(5_000, 5_300),                                      # a contiguous run
        "age": rng.integers(18, 90, 300),
        "grade": rng.integers(1, 4, 300),
    })
    prof = profile(frame)
    guesses = {c.name: c.guess for c in prof.columns}
    assert guesses == {"income": "number", "plain_income": "number", "code": "id", "serial": "id",
                       "age": "number", "grade": "category"}


def test_messy_fixture_profile(messy):
    prof = profile(messy)
    assert prof.rows == 3_500 and len(prof.columns) == 10
    raw_age = messy["age"].str.strip().str.lower()
    assert prof.column("age").missing == int(raw_age.isin(["", "unknown", "?"]).sum()) > 0
    assert prof.column("income").guess == "number"
    assert prof.column("person_id").guess == "id"
    assert prof.column("education").missing == int((messy["education"] == "").sum()) == 60


# ---------------------------------------------------------------------------------------- draft
def test_draft_merges_variants_parses_numbers_and_leaves_public_info_unset():
    schema = draft_schema(small(), "small")
    sex = schema.column("sex")
    assert sex.role == "category"
    assert sex.merges == (("F", "Female"), ("female", "Female"), ("M", "Male"))
    income = schema.column("income")
    assert income.role == "number" and income.parse_numbers and income.bounds is None
    assert income.missing == "drop_row"
    assert schema.person_id == "pid" and schema.column("pid").role == "person_id"
    assert schema.column("note").role == "leave_out"
    assert needs_public_info(schema) == (("sex", "categories"), ("income", "bounds"))


def test_aliases_merge_only_when_the_full_label_is_present():
    frame = pd.DataFrame({"a": ["F", "M", "x"] * 10, "b": ["F", "Female", "M"] * 10})
    schema = draft_schema(frame, "t")
    assert schema.column("a").merges == ()
    assert schema.column("b").merges == (("F", "Female"),)     # no "Male" in b, so M stays


def test_apply_small_by_hand():
    schema = draft_schema(small(), "small")
    out = apply(small(), schema, rng_seed=0)
    kept = [i for i in range(20) if i % 10 not in (3, 5)]      # N/A and n/a rows dropped
    assert len(out) == 16
    assert list(out["pid"]) == [f"P{i:02d}" for i in kept]
    assert list(out["sex"].cat.categories) == ["Female", "Male"]
    expect_sex = ["Female", "Female", "Female", "Male", "Male", "Female", "Male", "Female"] * 2
    assert list(out["sex"].astype(str)) == expect_sex
    assert out["income"].tolist() == [45000, 45000, 12, 52000, 1234.5, 7, 0, 100] * 2
    assert "note" not in out.columns


# ---------------------------------------------------------------------------------------- check
def test_check_lists_every_problem_at_once(messy, draft):
    cols = list(draft.columns)
    change = {
        "age": dict(missing=None),                                         # missing values, no policy
        "income": dict(parse_numbers=False),                              # "45,000" then unreadable
        "race": dict(categories=("White", "Black", "Asian"), missing=None),   # "Other" outside, no policy
        "hours_per_week": dict(bounds=(0.0, 40.0)),                        # values above 40 are clipped
        "county": dict(role="leave_out"),
    }
    cols = [dataclasses.replace(c, **change.get(c.name, {})) for c in cols]
    cols = [c for c in cols if c.name != "household_size"] + [ColumnSchema("district", "category")]
    schema = draft.replace(columns=tuple(cols))
    problems = check(messy, schema)
    blocking = {p.column for p in problems if p.severity == BLOCKS}
    assert blocking == {"age", "income", "race", "district"}
    warned = {p.column for p in problems if p.severity == WARNING}
    assert {"person_id", "hours_per_week", "household_size", "sex", "education"} <= warned
    race = next(p for p in problems if p.column == "race" and "not public categories" in p.what)
    assert f"{int((messy['race'] == 'Other').sum()):,} values" in race.what
    hours = pd.to_numeric(messy["hours_per_week"], errors="coerce")
    clip = next(p for p in problems if p.column == "hours_per_week" and "clipped" in p.what)
    assert f"{int((hours > 40).sum()):,} values" in clip.what
    formatted = next(p for p in problems if p.column == "income" and p.severity == BLOCKS)
    assert "parse_numbers" in formatted.what
    with pytest.raises(ValueError) as err:
        apply(messy, schema, rng_seed=0)
    for column in blocking:
        assert f"{column}: [blocks a run]" in str(err.value)


def test_draft_as_written_has_no_blocking_problem_and_flags_public_info(messy, draft):
    problems = check(messy, draft)
    assert not [p for p in problems if p.blocks]
    flagged = {p.column for p in problems if "estimate them privately" in p.todo}
    assert flagged == {c for c, _ in needs_public_info(draft)}
    assert "person_id" in {p.column for p in problems}          # P00007 and others exceed one row


# ---------------------------------------------------------------------------------------- apply
def test_apply_gives_a_table_every_microdata_page_accepts(messy, draft):
    from core.coherence.run import usable_columns
    from core.synthesis.encoding import categorical_view, encode_categories, identifier_like

    out = apply(messy, draft, rng_seed=0)
    assert not out.isna().any().any()
    assert list(out["sex"].cat.categories) == ["Female", "Male"]
    assert list(out["employed"].cat.categories) == ["No", "Yes"]
    assert list(out["county"].cat.categories) == ["Adams", "Brown", "Clark", "Dane"]
    assert MISSING_LABEL in out["education"].cat.categories
    assert out["income"].dtype == np.int64                      # "45,000" and "$45,000" read as numbers
    table = read_upload(guarded_csv(out).encode(), "microdata_csv")
    assert len(table) == len(out) and list(table.columns) == list(out.columns)
    view, _ = categorical_view(table)
    encode_categories(view)
    assert identifier_like(table) == ["person_id"]
    assert {"sex", "education", "county", "employed", "race"} <= set(usable_columns(table))


def test_bounds_bins_fill_and_outside_categories_by_hand():
    frame = pd.DataFrame({"age": ["5", "17", "30", "", "130", "64"] * 3,
                          "sex": ["Female", "X", "Male", "", "F", "Male"] * 3})
    schema = DataSchema("t", (
        ColumnSchema("age", "number", bounds=(0, 100), bins=(0, 18, 65, 100), missing="own_category"),
        ColumnSchema("sex", "category", categories=("Female", "Male"), missing="fill", fill="Female",
                     merges=(("F", "Female"),)),
    ))
    cleaned = clean(frame, schema, rng_seed=1)
    out = cleaned.frame
    assert list(out["age"].cat.categories) == ["0 to 18", "18 to 65", "65 to 100", MISSING_LABEL]
    assert list(out["age"].astype(str)[:6]) == ["0 to 18", "0 to 18", "18 to 65", MISSING_LABEL, "65 to 100",
                                                "18 to 65"]
    assert list(out["sex"].astype(str)[:6]) == ["Female", "Female", "Male", "Female", "Female", "Male"]
    report = cleaned.report
    assert dict(report.clipped) == {"age": 3}
    assert dict(report.outside_categories) == {"sex": 3}
    assert dict(report.filled) == {"sex": 6}                  # 3 blanks + 3 outside
    assert dict(report.merged) == {"sex": 3}
    assert report.rows_in == report.rows_out == 18


@pytest.mark.slow
def test_contribution_bounding_keeps_at_most_k_rows_per_person_seeded(messy, draft):
    per_person_raw = messy["person_id"].value_counts()
    assert per_person_raw["P00007"] == 4
    for k in (1, 2):
        schema = draft.replace(max_rows_per_person=k)
        out = apply(messy, schema, rng_seed=5)
        counts = out["person_id"].value_counts()
        assert counts.max() <= k
        assert counts["P00007"] == k
        again = apply(messy, schema, rng_seed=5)
        pd.testing.assert_frame_equal(out, again)
    kept = {tuple(apply(messy, draft, rng_seed=s).query("person_id == 'P00007'")["age"]) for s in range(8)}
    assert len(kept) > 1                                         # which row is kept depends on the seed


def test_bounding_keeps_the_smallest_keys():
    frame = pd.DataFrame({"pid": ["a", "a", "a", "b", "c", "c"], "x": ["1", "2", "3", "4", "5", "6"]})
    schema = DataSchema("t", (ColumnSchema("pid", "person_id"), ColumnSchema("x", "category")),
                         person_id="pid", max_rows_per_person=2)
    from core.intake.bounding import row_keys
    key = row_keys(frame["pid"].to_numpy(object), [pd.Categorical(frame["x"])], seed=9)
    expect = sorted(list(np.argsort(key[:3])[:2]) + [3] + [4, 5])
    out = apply(frame, schema, rng_seed=9)
    assert list(out["x"].astype(str)) == [str(i + 1) for i in expect]


# ---------------------------------------------------------------------------------------- schema
def full_schema() -> DataSchema:
    return DataSchema("County extract", (
        ColumnSchema("person_id", "person_id", missing="drop_row"),
        ColumnSchema("sex", "category", categories=("Female", "Male"), merges=(("F", "Female"), ("M", "Male")),
                     missing="fill", fill="Female"),
        ColumnSchema("age", "number", bounds=(0, 120), bins=6, missing="own_category"),
        ColumnSchema("income", "number", bounds=(0, 500_000), missing="fill", fill=0),
        ColumnSchema("hours", "number", bounds=(0, 99), bins=(0, 20, 40, 99), missing="drop_row"),
        ColumnSchema("notes", "leave_out"),
    ), person_id="person_id", max_rows_per_person=2, missing_tokens=("", "n/a"))


def test_schema_json_round_trip_and_digest():
    schema = full_schema()
    text = json.dumps(schema.to_dict())
    back = DataSchema.from_dict(json.loads(text))
    assert back == schema and back.digest() == schema.digest() and hash(back) == hash(schema)
    assert json.loads(text)["schema_version"] == 1
    assert schema.column("income").fill == 0.0 and schema.column("age").bounds == (0.0, 120.0)
    assert schema.digest() != schema.replace(max_rows_per_person=1).digest()
    with pytest.raises(ValueError, match="version"):
        DataSchema.from_dict({**schema.to_dict(), "schema_version": 99})
    with pytest.raises(ValueError, match="colour"):
        DataSchema.from_dict({**schema.to_dict(), "colour": "red"})


def test_schema_round_trips_inside_a_plan(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class CarrierPlan(Plan):
        data_schema: DataSchema
        seed: int = 0

    CarrierPlan.__module__ = "core.intake"
    monkeypatch.setattr(intake, "CarrierPlan", CarrierPlan, raising=False)
    monkeypatch.setattr(intake, "__all__", [*intake.__all__, "CarrierPlan"])
    plan = CarrierPlan(full_schema(), seed=3)
    back = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
    assert back == plan and back.digest() == plan.digest()
    assert isinstance(back.data_schema.columns[1].merges[0], tuple)


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="age", role="number", bins=5), "'age'.*need public bounds"),
    (dict(name="age", role="number", missing="own_category"), "'age'.*binned"),
    (dict(name="age", role="number", bounds=(0, 10), bins=(0, 5, 9)), "'age'.*first and last edge"),
    (dict(name="sex", categories=("Female",), merges=(("F", "Woman"),)), "'sex'.*not a public category"),
    (dict(name="sex", merges=(("F", "Female"), ("f", "Woman"))), "'sex'.*merged twice"),
    (dict(name="sex", missing="fill"), "'sex'.*no fill value"),
    (dict(name="sex", role="kind"), "'sex'.*role"),
    (dict(name="sex", bounds=(0, 1)), "'sex'.*takes no bounds"),
])
def test_invalid_column_declarations_name_the_column(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ColumnSchema(**kwargs)


def test_invalid_data_schema():
    with pytest.raises(ValueError, match="person_id"):
        DataSchema("t", (ColumnSchema("pid", "person_id"),))
    with pytest.raises(ValueError, match="twice"):
        DataSchema("t", (ColumnSchema("a"), ColumnSchema("a")))
    with pytest.raises(ValueError, match="missing_tokens"):
        DataSchema("t", (ColumnSchema("a", categories=("Unknown", "Yes")),))


# ---------------------------------------------------------------------------------------- reading
def test_parquet_and_excel(tmp_path, messy):
    path = tmp_path / "messy.parquet"
    messy.to_parquet(path)
    assert draft_schema(read_table(path), "p") == draft_schema(messy, "p")
    xlsx = tmp_path / "messy.xlsx"
    xlsx.write_bytes(b"PK\x03\x04")
    import importlib.util
    if importlib.util.find_spec("openpyxl") is None:
        with pytest.raises(ValueError, match="openpyxl"):
            read_table(xlsx)
    with pytest.raises(ValueError, match="too large"):
        read_table(MESSY, max_bytes=1_000)


def test_csv_header_checks(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("a,b,a\n1,2,3\n")
    with pytest.raises(ValueError, match="Duplicate"):
        read_table(path)


# ---------------------------------------------------------------------------------------- command line
def cli(*args: str) -> subprocess.CompletedProcess:
    return core_command("data", *args)


@pytest.mark.slow
def test_python_m_core_runs_as_its_own_process(tmp_path):
    """The one real ``python -m core`` (the others call its ``main`` in the test's process)."""
    schema_path = tmp_path / "schema.json"
    done = subprocess.run([sys.executable, "-m", "core", "data", "profile", str(MESSY), "--out", str(schema_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(schema_path.read_text())["columns"]


@pytest.mark.slow
def test_command_line_profile_check_apply(tmp_path):
    schema_path, clean_path = tmp_path / "schema.json", tmp_path / "clean.csv"
    done = cli("profile", str(MESSY), "--out", str(schema_path))
    assert done.returncode == 0, done.stderr
    schema = DataSchema.from_dict(json.loads(schema_path.read_text()))
    assert schema.name == "messy_county" and schema.person_id == "person_id"
    done = cli("check", str(MESSY), "--schema", str(schema_path))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == len(check(read_table(MESSY), schema)) + 1
    assert all(line.split(":")[0] in {c.name for c in schema.columns} for line in lines[:-1])
    done = cli("apply", str(MESSY), "--schema", str(schema_path), "--out", str(clean_path), "--seed", "4")
    assert done.returncode == 0, done.stderr
    written = read_upload(clean_path.read_bytes(), "microdata_csv")
    expected = apply(read_table(MESSY), schema, rng_seed=4)
    assert len(written) == len(expected) and list(written["person_id"]) == list(expected["person_id"])

    body = schema.to_dict()
    for col in body["columns"]:
        if col["name"] == "age":
            col["missing"] = None
    schema_path.write_text(json.dumps(body))
    done = cli("check", str(MESSY), "--schema", str(schema_path))
    assert done.returncode == 1
    assert "age: [blocks a run]" in done.stdout
    done = cli("apply", str(MESSY), "--schema", str(schema_path), "--out", str(tmp_path / "no.csv"))
    assert done.returncode == 1 and not (tmp_path / "no.csv").exists()
    done = cli("check", str(tmp_path / "absent.csv"), "--schema", str(schema_path))
    assert done.returncode == 2 and "not found" in done.stderr


def test_fixture_is_the_generator_output():
    sys.path.insert(0, str(MESSY.parent))
    try:
        from make_messy import EXPORT, make, make_export
    finally:
        sys.path.pop(0)
    for made, path in ((make, MESSY), (make_export, EXPORT)):
        buffer = io.StringIO()
        made().to_csv(buffer, index=False)
        assert buffer.getvalue() == path.read_text(), path.name


def test_text_that_is_no_number_blocks_and_ragged_csv_is_refused(tmp_path):
    frame = pd.DataFrame({"hours": ["12", "12 years", "", "40", "1,5"] * 4, "g": ["a", "b"] * 10})
    schema = DataSchema("t", (ColumnSchema("hours", "number", missing="drop_row"), ColumnSchema("g")))
    problems = check(frame, schema)
    bad = [p for p in problems if p.blocks]
    assert [p.column for p in bad] == ["hours"]
    assert "8 values that cannot be read as numbers" in bad[0].what and "parse_numbers" not in bad[0].what
    with pytest.raises(ValueError, match="hours: \\[blocks a run\\]"):
        apply(frame, schema, rng_seed=0)
    path = tmp_path / "ragged.csv"
    path.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(ValueError, match="comma-separated fields"):
        read_table(path)
