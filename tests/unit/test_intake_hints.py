"""A county export read on the first try: problems name their values, numbers with units parse by a declared
rule, missing codes and spelling variants are suggested (never declared behind the curator's back), and the
command line declares every choice without editing the schema file by hand."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.intake import BLOCKS, WARNING, ColumnSchema, DataSchema, apply, check, draft_schema, profile
from core.intake.check import unreadable_values
from core.intake.hints import fold_label, missing_code_suggestions, named, unit_suggestions
from core.intake.suggest import column_suggestions, label_merges
from core.intake.values import read_values
from tests.core_command import core_command

REPO = Path(__file__).resolve().parents[2]


def export() -> pd.DataFrame:
    """A county export worked out by hand: 300 rows.

    age: 60 x '45 yrs', 40 x 'unknown', 12 x '999', 3 x 'refused', 1 x '*', and 184 plain ages 18..63
    (each of 46 ages four times); income: '$52,000' x 100, '12 %' x 100, '41000' x 100;
    education: 'Post-secondary' x 150, 'Post secondary' x 90, 'post-Secondary' x 10, 'Montréal' x 20,
    'Montreal' x 30; region: 'North' x 150, 'South' x 145, 'Rgion X' x 5."""
    ages = ["45 yrs"] * 60 + ["unknown"] * 40 + ["999"] * 12 + ["refused"] * 3 + ["*"] + \
        [str(a) for a in range(18, 64)] * 4
    income = ["$52,000"] * 100 + ["12 %"] * 100 + ["41000"] * 100
    education = ["Post-secondary"] * 150 + ["Post secondary"] * 90 + ["post-Secondary"] * 10 + ["Montréal"] * 20 + \
        ["Montreal"] * 30
    region = ["North"] * 150 + ["South"] * 145 + ["Rgion X"] * 5
    return pd.DataFrame({"age": ages, "income": income, "education": education, "region": region})


def schema(**age) -> DataSchema:
    return DataSchema("county", (
        ColumnSchema("age", "number", missing="drop_row", bounds=(0.0, 99.0), **age),
        ColumnSchema("income", "number"),
        ColumnSchema("education", "category"),
        ColumnSchema("region", "category", categories=("North", "South"), missing="drop_row")))


def problem(problems, column: str, words: str):
    return next(p for p in problems if p.column == column and words in p.what)


# ---------------------------------------------------------------------------------------- values named
def test_named_caps_the_list_largest_first():
    assert named(["a", "b", "", "c"], [1, 5, 3, 2], limit=2) == "'b' (5), (blank) (3) and 2 more"
    assert named(["x" * 60], [1]).startswith("'" + "x" * 37 + "...'")


def test_every_problem_names_its_values_with_counts():
    problems = check(export(), schema())
    bad = problem(problems, "age", "cannot be read as numbers")
    assert bad.severity == BLOCKS
    # 60 + 3 + 1 values are no numbers ('unknown' is a default missing token)
    assert bad.what.startswith("has 64 values that cannot be read as numbers: '45 yrs' (60), 'refused' (3), '*' (1).")
    assert "'yrs' (units) reads 60 of them" in bad.what
    assert "'refused', '*' look like missing codes" in bad.what
    region = problem(problems, "region", "not public categories")
    assert "has 5 values (1 distinct labels) that are not public categories: 'Rgion X' (5);" in region.what
    variants = problem(problems, "education", "letter case, accents, spacing or hyphens")
    assert variants.what.startswith("has 3 labels that differ") and \
        "'Post secondary' (90), 'Montréal' (20), 'post-Secondary' (10)" in variants.what
    dropped = problem(problems, "age", "those rows will be dropped")
    assert "Read as missing: 'unknown' (40)." in dropped.what


def test_a_problem_can_be_said_without_its_values():
    """Another page that only says why a data set cannot run names no value of the file."""
    problems = check(export(), schema())
    assert {p.column for p in problems if p.brief} == {"age", "income", "education", "region"}
    for p in problems:
        brief = p.line(values=False)
        for value in ("45 yrs", "refused", "999", "Rgion X", "Montréal", "Post secondary", "unknown", "yrs", "12 %"):
            assert value not in brief, (value, brief)
    region = problem(problems, "region", "not public categories")
    assert region.line(values=False) == ("region: [warning] has 5 values (1 distinct labels) that are not public "
                                         "categories; they will be treated as missing (drop_row). " + region.todo)


def test_bounds_percent_labels_and_people_over_the_limit_are_named():
    problems = check(export(), schema(units=("yrs",), missing_codes=("refused", "*")))
    assert "They are: '999' (12)." in problem(problems, "age", "outside the public bounds").what
    assert "They are: '12 %' (100)." in problem(problems, "income", "percent sign").what
    found = problem(problems, "education", "no public category list").what
    assert found.endswith("Found: 'Post-secondary' (150), 'Post secondary' (90), 'Montreal' (30), 'Montréal' (20), "
                          "'post-Secondary' (10).")
    frame = pd.DataFrame({"pid": ["a", "a", "a", "b", "b", "c"], "x": ["1"] * 6})
    people = check(frame, DataSchema("t", (ColumnSchema("pid", "person_id"), ColumnSchema("x", "number")),
                                     person_id="pid"))
    assert "Rows per person: 'a' (3), 'b' (2)." in problem(people, "pid", "more than 1 row").what


def test_a_long_list_of_values_is_capped():
    frame = pd.DataFrame({"n": [f"v{i}" for i in range(12)] * 2 + ["1"] * 100})
    problems = check(frame, DataSchema("t", (ColumnSchema("n", "number"),)))
    assert "'v0' (2), 'v1' (2), 'v2' (2), 'v3' (2), 'v4' (2) and 7 more." in problem(problems, "n", "cannot").what


def test_unreadable_values_table_for_the_page():
    table = unreadable_values(export(), schema(), "age")
    assert table.to_dict("list") == {"value": ["45 yrs", "refused", "*"], "rows": [60, 3, 1]}
    table = unreadable_values(export(), schema(units=("yrs",), missing_codes=("refused", "*")), "age")
    assert table.empty


# ---------------------------------------------------------------------------------------- numbers by a rule
def test_units_currency_and_percent_parse_by_the_declared_rule():
    declared = schema(units=("yrs",), missing_codes=("999", "refused", "*"))
    assert not [p for p in check(export(), declared) if p.blocks]
    out = apply(export(), declared)
    assert len(out) == 300 - 40 - 12 - 3 - 1 - 5            # 'Rgion X' is outside region's categories: dropped
    assert (out["age"] == 45).sum() == 60 + 4                  # '45 yrs' and the plain 45s
    assert sorted(set(out["income"])) == [12, 41000, 52000]
    assert out["age"].max() == 63                               # 999 is missing, not clipped to 99


def test_units_strip_before_or_after_ignoring_case():
    values = read_values(pd.Series(["45 YRS", "yrs 3", "USD 52,000", "7 years", "4 x"]), ("",), ("yrs", "USD", "years"))
    np.testing.assert_array_equal(values.numbers[:4], [45, 3, 52000, 7])
    assert np.isnan(values.numbers[4])


def test_unit_declarations_are_checked():
    with pytest.raises(ValueError, match="'age'.*parse_numbers"):
        ColumnSchema("age", "number", units=("yrs",), parse_numbers=False)
    with pytest.raises(ValueError, match="'age'.*digits"):
        ColumnSchema("age", "number", units=("2yrs",))
    with pytest.raises(ValueError, match="'sex'.*takes no units"):
        ColumnSchema("sex", "category", units=("yrs",))


def test_the_profile_reads_a_column_of_numbers_with_units_as_a_number():
    frame = pd.DataFrame({"age": [f"{a} yrs" for a in range(20, 80)] + ["33"] * 10})
    assert profile(frame).column("age").guess == "number"
    assert unit_suggestions(read_values(frame["age"], ("",))) == (("yrs", 60),)


# ---------------------------------------------------------------------------------------- missing codes
def test_missing_codes_are_suggested_from_the_values():
    values = read_values(export()["age"], ("",))
    found = dict(missing_code_suggestions(values, ("",)))
    assert found == {"unknown": 40, "999": 12, "refused": 3, "*": 1}
    # a plain age of 99 among ages is no code: it is not far beyond the others
    ages = pd.Series([str(a) for a in range(18, 100)])
    assert missing_code_suggestions(read_values(ages, ("",)), ("",)) == ()
    # -1 among amounts that are never negative
    amounts = pd.Series([52000, 31000, 45000, 120000, 61000, -1] * 3)
    assert missing_code_suggestions(read_values(amounts, ("",)), ("",)) == (("-1", 3),)
    # tokens already read as missing are not suggested again
    assert "unknown" not in dict(missing_code_suggestions(read_values(export()["age"], ("unknown",)), ("unknown",)))


def test_a_far_code_warns_instead_of_being_clipped_silently():
    problems = check(export(), schema(units=("yrs",), missing_codes=("refused", "*")))
    code = problem(problems, "age", "look like missing codes")
    assert code.severity == WARNING and "'999' (12)" in code.what and "clipped" in code.what


def test_a_numeric_column_stored_as_numbers_takes_codes_too():
    frame = pd.DataFrame({"age": np.r_[np.arange(20, 70), [999] * 5]})
    plain = DataSchema("t", (ColumnSchema("age", "number"),))
    assert "'999' (5)" in problem(check(frame, plain), "age", "missing codes").what
    coded = DataSchema("t", (ColumnSchema("age", "number", missing="drop_row", missing_codes=("999",)),))
    assert apply(frame, coded)["age"].max() == 69


def test_missing_codes_belong_to_their_column_only():
    frame = pd.DataFrame({"age": ["30", "999", "40"] * 10, "income": ["999", "1000", "2000"] * 10})
    declared = DataSchema("t", (ColumnSchema("age", "number", missing="drop_row", missing_codes=("999",)),
                                ColumnSchema("income", "number", missing="drop_row")))
    out = apply(frame, declared)
    assert len(out) == 20 and 999 in set(out["income"])


# ---------------------------------------------------------------------------------------- merges
def test_accent_case_spacing_and_hyphen_variants_are_suggested():
    assert fold_label("Post-secondary") == fold_label("post  Secondary") == fold_label("Póst_secondary")
    merges = label_merges(read_values(export()["education"], ("",)))
    # one pair per lower-cased spelling; merges match ignoring case, so 'post-secondary' covers 'post-Secondary'
    assert merges == (("montréal", "Montreal"), ("post secondary", "Post-secondary"),
                      ("post-secondary", "Post-secondary"))


def test_a_merge_added_by_hand_is_any_pair_and_the_draft_takes_no_codes_or_units():
    declared = schema().with_choices(merges=(("education", "Montréal", "Post-secondary"),),
                                     codes=(("age", "999"),), units=(("age", "yrs"),), tokens=("refused",))
    assert declared.column("education").merges == (("Montréal", "Post-secondary"),)
    assert declared.column("age").missing_codes == ("999",) and declared.column("age").units == ("yrs",)
    assert "refused" in declared.missing_tokens
    undone = declared.with_choices(no_codes=(("age", "999"),), no_tokens=("refused",))
    assert undone.column("age").missing_codes is None and "refused" not in undone.missing_tokens
    draft = draft_schema(export(), "county")
    assert all(c.units is None and c.missing_codes is None for c in draft.columns)
    assert "refused" not in draft.missing_tokens


def test_suggestions_of_one_column():
    frame, tokens = export(), schema().missing_tokens
    found = column_suggestions(frame["age"], "number", tokens)
    assert found.units == (("yrs", 60),) and dict(found.missing_codes) == {"999": 12, "refused": 3, "*": 1}
    assert column_suggestions(frame["age"], "number", tokens + ("999",)).missing_codes == (("refused", 3), ("*", 1))
    assert column_suggestions(frame["education"], "category", tokens).merges[0] == ("montréal", "Montreal")
    assert column_suggestions(frame["education"], "leave_out", tokens) == column_suggestions(frame["age"],
                                                                                             "person_id", tokens)


# ---------------------------------------------------------------------------------------- the schema stays compatible
def test_old_schemas_load_and_keep_their_digest():
    old = schema()
    body = old.to_dict()
    for col in body["columns"]:
        del col["units"], col["missing_codes"]
    assert DataSchema.from_dict(body) == old
    assert "units" not in digest_of_text(old) and "missing_codes" not in digest_of_text(old)
    new = schema(units=("yrs",), missing_codes=("999",))
    assert DataSchema.from_dict(json.loads(json.dumps(new.to_dict()))) == new
    assert new.digest() != old.digest()
    assert schema(units=()).digest() == old.digest()


def digest_of_text(value) -> str:
    from core.contracts import _canonical
    return json.dumps(_canonical(value))


# ---------------------------------------------------------------------------------------- command line
def cli(*args: str) -> subprocess.CompletedProcess:
    return core_command("data", *args)


def test_the_command_line_declares_every_choice_without_a_hand_edit(tmp_path):
    path, schema_path = tmp_path / "county.csv", tmp_path / "county.json"
    export().to_csv(path, index=False)
    done = cli("profile", str(path), "--out", str(schema_path))
    assert done.returncode == 0, done.stderr
    assert "looks like missing codes: '999' (12), 'refused' (3), '*' (1) (--missing-code age TEXT)" in done.stdout
    assert "numbers written with a unit: 'yrs' (60) (--units age UNIT)" in done.stdout
    done = cli("check", str(path), "--schema", str(schema_path))
    assert done.returncode == 1 and "'45 yrs' (60)" in done.stdout
    done = cli("edit", str(schema_path), "--units", "age", "yrs", "--missing-code", "age", "999",
               "--missing-code", "age", "refused", "--missing-code", "age", "*",
               "--merge", "region", "Rgion X", "North")
    assert done.returncode == 0, done.stderr
    declared = DataSchema.from_dict(json.loads(schema_path.read_text()))
    assert declared.column("age").units == ("yrs",) and declared.column("age").missing_codes == ("999", "refused", "*")
    assert declared.column("region").merges == (("Rgion X", "North"),)
    done = cli("check", str(path), "--schema", str(schema_path))
    assert done.returncode == 0, done.stdout
    done = cli("apply", str(path), "--schema", str(schema_path), "--out", str(tmp_path / "clean.csv"))
    assert done.returncode == 0, done.stdout + done.stderr
    cleaned = pd.read_csv(tmp_path / "clean.csv")
    assert len(cleaned) == 300 - 56 and cleaned["age"].max() == 63
    assert (cleaned["region"] == "North").sum() == 150 - 56 + 5
    # the profile takes the same choices at once
    done = cli("profile", str(path), "--out", str(tmp_path / "two.json"), "--units", "age", "yrs",
               "--missing-code", "age", "999", "--missing-token", "refused", "--missing-token", "*")
    assert done.returncode == 0, done.stderr
    two = DataSchema.from_dict(json.loads((tmp_path / "two.json").read_text()))
    assert two.column("age").role == "number" and two.column("age").missing == "drop_row"
    assert {"refused", "*"} <= set(two.missing_tokens)


def test_the_county_export_goes_through_the_command_line_with_its_choices_only(tmp_path):
    """The committed export (units, 999 and refused, variants) profiled with the curator's choices named on
    the command line, checked (nothing blocks) and cleaned, without touching the schema file by hand."""
    export_file = REPO / "tests" / "fixtures" / "county_export.csv"
    schema_path = tmp_path / "export.json"
    done = cli("profile", str(export_file), "--out", str(schema_path), "--units", "age", "yrs",
               "--units", "hours_per_week", "hrs", "--missing-code", "age", "999", "--missing-code", "age", "refused")
    assert done.returncode == 0, done.stderr
    done = cli("check", str(export_file), "--schema", str(schema_path))
    assert done.returncode == 0, done.stdout
    assert "'999' (18), 'refused' (6)" in done.stdout          # named among the missing values that are dropped
    done = cli("apply", str(export_file), "--schema", str(schema_path), "--out", str(tmp_path / "clean.csv"))
    assert done.returncode == 0, done.stdout + done.stderr
    cleaned = pd.read_csv(tmp_path / "clean.csv")
    assert cleaned["age"].max() < 100 and pd.api.types.is_numeric_dtype(cleaned["hours_per_week"])
    assert set(cleaned["education"]) == {"Less than HS", "High school", "Post-secondary"}
    assert set(cleaned["town"]) == {"Montréal", "Laval", "Québec"}
