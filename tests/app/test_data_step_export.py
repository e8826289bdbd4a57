"""The Data step with AppTest on a county export: numbers written with units, missing codes (999, refused),
accent, spacing and hyphen variants and a misspelt region read on the page, every problem naming its values,
and fixed with the page's own controls, no edit outside the tool."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.intake import apply, check, read_table

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
STEP = "tools/data_step.py"
EXPORT = ROOT / "tests" / "fixtures" / "county_export.csv"
RAW = EXPORT.read_bytes()
NAME = "County export"


def _key(at, column: str, field: str) -> str:
    return f"ds{at.session_state['ds_state']['gen']}_{column}_{field}"


def _problems(at):
    return next(d.value for d in at.dataframe if "what to do" in d.value.columns)


def _what(at, column: str) -> str:
    table = _problems(at)
    return " ".join(table.loc[table["column"] == column, "what"])


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """The export uploaded once; both tests work on this page in turn (its own database and cache)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dse_cache"))
        mp.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path_factory.mktemp('dse') / 'project.sqlite'}")
        at = AppTest.from_file(APP, default_timeout=300).run()
        at.switch_page(STEP).run()
        at.file_uploader(key="ds_file").set_value(("county_export.csv", RAW, "text/csv"))
        yield at.run()


def test_every_problem_names_its_values_and_the_unreadable_ones_are_listed(opened):
    at = opened
    assert not at.exception, at.exception
    age = _what(at, "age")
    assert "cannot be read as numbers: 'refused' (6)" in age and "'yrs' (units) reads 103 of them" in age
    assert "look like missing codes: '999' (18)" in age
    assert "'hrs' (units) reads 127 of them" in _what(at, "hours_per_week")
    # the unreadable values of each number column, with their rows, as a plain table
    tables = [d.value for d in at.dataframe if list(d.value.columns) == ["value", "rows"]]
    assert any("refused" in set(t["value"]) for t in tables)
    assert sum(int(t["rows"].sum()) for t in tables) == 109 + 127
    # suggestions are offered with their rows, none taken
    codes = at.multiselect(key=_key(at, "age", "codes"))
    assert {"999 (18 rows)", "refused (6 rows)"} <= set(codes.options) and codes.value == []
    units = at.multiselect(key=_key(at, "age", "units"))
    assert "yrs (103 rows)" in units.options and units.value == []
    labels = {b.label for b in at.checkbox if "_merge_" in (b.key or "")}
    assert {"'post secondary' is 'Post\\-secondary'", "'montreal' is 'Montréal'",
            "'high\\-school' is 'High school'"} <= labels


def test_the_page_fixes_the_export_with_its_own_controls(opened):
    at = opened
    at.text_input(key="ds_name").input(NAME).run()
    at.multiselect(key=_key(at, "age", "units")).set_value(["yrs"])
    at.multiselect(key=_key(at, "age", "codes")).set_value(["999", "refused"])
    at.multiselect(key=_key(at, "hours_per_week", "units")).set_value(["hrs"]).run()
    at.selectbox(key=_key(at, "age", "missing")).select("drop_row").run()
    for box in at.checkbox:
        if "_merge_" in (box.key or ""):
            box.check()
    at.run()
    # a merge no suggestion proposed: the misspelt region into North, picked on the page
    at.multiselect(key=_key(at, "region", "categories")).set_value(["North", "South", "East", "West"]).run()
    assert "not public categories: 'Rgion X' (5)" in _what(at, "region")
    at.multiselect(key=_key(at, "region", "merge_from")).set_value(["Rgion X"])
    at.selectbox(key=_key(at, "region", "merge_to")).select("North").run()
    at.button(key=_key(at, "region", "merge_add")).click().run()
    assert not at.exception, at.exception
    added = [b for b in at.checkbox if (b.key or "").startswith(_key(at, "region", "merge_"))]
    assert [(b.label, b.value) for b in added] == [("'Rgion X' is 'North'", True)]
    # a token read as missing in every column, typed in
    tokens = at.multiselect(key=f"ds{at.session_state['ds_state']['gen']}_tokens")
    tokens.set_value([*tokens.value, "n.d."]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = _problems(at)
    assert not (table["severity"] == "blocks a run").any(), table
    assert not table["what"].str.contains("cannot be read|missing codes|not public|letter case").any()
    assert not [d for d in at.dataframe if list(d.value.columns) == ["value", "rows"]]
    at.button(key="ds_save").click().run()
    assert not at.exception
    schema = at.session_state["declared_data"][NAME]["schema"]
    age = schema.column("age")
    assert age.units == ("yrs",) and age.missing_codes == ("999", "refused") and age.missing == "drop_row"
    assert schema.column("hours_per_week").units == ("hrs",)
    assert ("Rgion X", "North") in schema.column("region").merges
    assert ("montreal", "Montréal") in schema.column("town").merges and "n.d." in schema.missing_tokens
    # the declaration cleans the file in core exactly as on the page: 999 and refused are missing, not ages
    frame = read_table(EXPORT)
    assert not [p for p in check(frame, schema) if p.blocks]
    cleaned = apply(frame, schema)
    assert cleaned["age"].max() < 100 and set(cleaned["region"]) == {"North", "South", "East", "West"}
