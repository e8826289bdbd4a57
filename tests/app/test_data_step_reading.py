"""The Data step reads county exports as they come, says how, lets the curator change it, and never renders
file content as markdown or HTML."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.county_exports import exports, people

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
STEP = "tools/data_step.py"
EXPORTS = {e.key: e for e in exports()}
IMAGE = "![x](http://e.invalid/x.png)"
HTML = "<img src=http://e.invalid/y.png>"


@pytest.fixture(autouse=True)
def _own_places(tmp_path, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ds_read_cache"))
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")


def _upload(name: str, data: bytes) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page(STEP).run()
    at.file_uploader(key="ds_file").set_value((name, data, "application/octet-stream"))
    return at.run()


def _how_read(at) -> str:
    return "\n".join(t.value for t in at.text)


def _profile_columns(at) -> list[str]:
    return next(d.value for d in at.dataframe if "looks like" in d.value.columns)["column"].tolist()


def _box(at, what: str):
    return next(s for s in at.selectbox if (s.key or "").startswith(f"ds_read_{what}_"))


def test_a_semicolon_windows_export_is_read_and_the_page_says_how():
    export = EXPORTS["semicolon_decimal_comma"]
    at = _upload(export.filename, export.data)
    assert not at.exception and not at.error
    said = _how_read(at)
    assert "Encoding: Windows-1252 (Western European)" in said and "Separator: semicolon (';')" in said
    assert _profile_columns(at) == list(people().columns)
    assert at.session_state["ds_state"]["read"].separator == ";" and at.session_state["ds_state"]["read"].decimal == ","
    profile = next(d.value for d in at.dataframe if "looks like" in d.value.columns).set_index("column")
    assert profile.loc["hours", "looks like"] == "number" and profile.loc["income", "looks like"] == "number"


def test_choosing_the_wrong_separator_reads_one_column_and_blocks():
    text = "id;age;sex\n" + "".join(f"P{i};{20 + i};{'F' if i % 2 else 'M'}\n" for i in range(30))
    at = _upload("plain.csv", text.encode())
    assert _profile_columns(at) == ["id", "age", "sex"]
    _box(at, "sep").set_value(",").run()
    assert not at.exception
    assert _profile_columns(at) == ["id;age;sex"]
    problems = next(d.value for d in at.dataframe if "what to do" in d.value.columns)
    blocking = problems[problems["severity"] == "blocks a run"]
    assert blocking["what"].str.contains("is the only column read").any()
    assert "Separator: comma (',') (chosen)" in _how_read(at)


def test_every_sheet_is_offered_and_the_chosen_one_is_read():
    export = EXPORTS["xlsx_title_two_sheets"]
    at = _upload(export.filename, export.data)
    assert not at.exception and not at.error
    assert _profile_columns(at) == list(people().columns)
    assert "Skipped row(s) 1 to 2 above the header." in _how_read(at)
    sheet = _box(at, "sheet")
    assert sheet.options == ["Detect", "People", "Notes"]
    sheet.set_value("Notes").run()
    assert not at.exception
    assert _profile_columns(at) == ["unknown", "not asked"]


def _rendered(at) -> list[str]:
    """Every body Streamlit renders as markdown: markdown, captions, alerts, widget and expander labels."""
    bodies = [e.value for e in (*at.markdown, *at.caption)]
    bodies += [e.value for e in (*at.error, *at.warning, *at.success, *at.info)]
    bodies += [e.label for e in (*at.expander, *at.checkbox, *at.selectbox, *at.multiselect, *at.text_input,
                                 *at.number_input)]
    return bodies


UNESCAPED = re.compile(r"(?<!\\)!(?<!\\)\[|(?<!\\)<img|(?<!\\)\]\(")


def test_file_content_never_reaches_markdown_unescaped():
    rows = "".join(f"P{i},{IMAGE if i % 2 else HTML},{20 + i}\n" for i in range(30))
    at = _upload("hostile.csv", f"id,label,age\n{rows}".encode())
    assert not at.exception
    for exp in at.expander:
        exp.proto.expanded = True
    at.run()
    bodies = _rendered(at)
    assert any(r"e\.invalid" in b for b in bodies)      # the values are shown (escaped), not dropped
    assert not [b for b in bodies if UNESCAPED.search(b)]


def test_a_hostile_column_name_is_refused_without_being_rendered():
    at = _upload("names.csv", f'id,"{IMAGE}"\nP1,3\nP2,4\n'.encode())
    assert not at.exception
    assert at.error and "markup" in at.error[0].value and "Column\\(s\\) \\[2\\]" in at.error[0].value
    assert not [b for b in _rendered(at) if UNESCAPED.search(b) or "invalid" in b]


def test_a_reopened_declaration_is_read_the_way_it_was_declared():
    from core.intake import DataSchema, ReadOptions, draft_schema, read_table_bytes
    export = EXPORTS["xlsx_title_two_sheets"]
    options = ReadOptions(sheet="Notes", header_row=2)
    schema = draft_schema(read_table_bytes(export.data, export.filename, options), "Codes").replace(
        file_suffix=".xlsx", read=options)
    assert isinstance(schema, DataSchema)
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.session_state["declared_data"] = {"Codes": {"schema": schema, "raw": export.data, "file_name": export.filename}}
    at.switch_page(STEP).run()
    at.selectbox(key="ds_reopen").set_value("Codes").run()
    assert not at.exception and not at.error
    assert _profile_columns(at) == ["unknown", "not asked"]
    assert _box(at, "sheet").value == "Notes"
    assert at.text_input(key="ds_name").value == "Codes" and at.session_state["ds_state"]["kind"] == "declared"
