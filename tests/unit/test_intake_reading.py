"""County exports are read on the first try, say how they were read, and are read the same way on every rerun;
hostile files are refused or made plain at read time."""
from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from core.contracts import DataRef, bytes_fingerprint, digest_of, plan_from_dict, plan_to_dict
from core.datasets import load_microdata
from core.intake import (ColumnSchema, DataSchema, ReadOptions, apply, check, draft_schema, read_file,
                         read_table_bytes)
from core.intake.folder import list_folder, sample_rows
from core.intake.workbook import MAX_CELLS
from core.uploads import MAX_COLUMNS
from tests.core_command import core_command
from tests.fixtures.county_exports import (duplicate_header_workbook, expected_cells, exports, merged_header_workbook,
                                           people, wide_dimension_workbook, workbook_with_title)

REPO = Path(__file__).resolve().parents[2]
EXPORTS = {e.key: e for e in exports()}


# ------------------------------------------------------------------------------------------- every form
@pytest.mark.parametrize("key", list(EXPORTS))
def test_each_county_export_is_read_with_what_was_detected(key):
    export = EXPORTS[key]
    read = read_file(export.data, export.filename)
    used = read.report.options
    assert (used.encoding, used.separator, used.header_row, used.sheet, used.decimal) == \
        (export.encoding, export.separator, export.header_row, export.sheet, export.decimal)
    pd.testing.assert_frame_equal(read.frame.reset_index(drop=True), expected_cells(export), check_dtype=False)
    # read again by the options it reported, it gives the same cells
    again = read_table_bytes(export.data, export.filename, used)
    pd.testing.assert_frame_equal(again, read.frame)


def test_the_report_names_what_was_detected_and_why():
    lines = "\n".join(read_file(EXPORTS["semicolon_decimal_comma"].data, "x.csv").report.lines())
    assert "Encoding: Windows-1252" in lines
    assert re.search(r"byte 0x[89A-F][0-9A-F] at position [0-9,]+ is not UTF-8", lines)
    assert "semicolon (';')" in lines and "Line endings: CRLF" in lines
    assert "Decimal mark: comma (',') (numbers such as 3,5 in hours, and no decimal point)." in lines
    assert "Numbers written with a decimal comma rewritten with a point in income, hours." in lines
    plain = "\n".join(read_file(EXPORTS["utf8"].data, "x.csv").report.lines())
    assert "Decimal mark: point ('.') (the file is comma-separated)" in plain and "rewritten" not in plain
    quoted = read_file(b'id,hours\nP1,"3,5"\nP2,"4,25"\n', "q.csv")
    assert quoted.frame["hours"].tolist() == ["3,5", "4,25"] and quoted.report.options.decimal == "."
    titled = read_file(EXPORTS["title_lines"].data, "t.csv").report
    assert "Skipped line(s) 1 to 2 above the header." in titled.notes
    book = read_file(EXPORTS["xlsx_title_two_sheets"].data, "p.xlsx").report
    assert "Sheet: 'People'" in "\n".join(book.lines()) and len(book.sheets) == 2
    assert any("Other sheets, not read: 'Notes' (3 rows x 2 columns)" in n for n in book.notes)
    cr = read_file(EXPORTS["cr_only"].data, "m.csv").report
    assert ("Line endings", "CR", "old Mac, read as line breaks") in cr.why


# ------------------------------------------------------------------------------------------- overrides
def test_overrides_are_used_instead_of_detection():
    semi = EXPORTS["semicolon_decimal_comma"]
    by_commas = read_file(semi.data, semi.filename, ReadOptions(separator="comma"))
    assert by_commas.report.why[1][2] == "chosen" and len(by_commas.frame.columns) == 2   # split at the decimals
    # rows split unevenly by the chosen separator: refused, naming it
    with pytest.raises(ValueError, match=r"with the comma \(','\) as separator.*choose another separator"):
        read_file(b"a,b\n1,5\n3,4,5\n", "ragged.csv", ReadOptions(separator="comma"))
    as_written = read_file(semi.data, semi.filename, ReadOptions(decimal="point")).frame
    assert as_written["hours"].str.contains(",").all() and as_written["income"].str.contains(r"\.").any()
    tab = EXPORTS["tab"]
    assert read_file(tab.data, tab.filename, ReadOptions(separator="tab")).report.why[1][2] == "chosen"
    with pytest.raises(ValueError, match="cannot be read as UTF-8: byte 0x.. at position"):
        read_file(semi.data, semi.filename, ReadOptions(encoding="utf-8"))
    book = EXPORTS["xlsx_title_two_sheets"]
    notes = read_file(book.data, book.filename, ReadOptions(sheet="Notes"))
    assert list(notes.frame.columns) == ["unknown", "not asked"] and notes.frame.iloc[0].tolist() == ["N/A", "refused"]
    assert notes.report.options.header_row == 2     # "Codes" alone spans half the width: a title
    first = read_file(book.data, book.filename, ReadOptions(header_row=1))
    title = "Adams County: people export, March 2026"
    assert list(first.frame.columns) == [title, *(f"column_{i}" for i in range(2, 8))]
    with pytest.raises(ValueError, match="no sheet 'Missing'.*'People'.*'Notes'"):
        read_file(book.data, book.filename, ReadOptions(sheet="Missing"))
    titled = EXPORTS["title_lines"]
    chosen = read_file(titled.data, "t.csv", ReadOptions(header_row=3)).frame
    assert chosen.equals(read_file(titled.data, "t.csv").frame)


def test_a_file_read_as_one_column_while_it_holds_separators_blocks_a_run():
    text = "id;age;sex\n" + "".join(f"P{i};{20 + i};F\n" for i in range(12))   # no comma anywhere
    frame = read_table_bytes(text.encode(), "semi.csv", ReadOptions(separator=","))
    assert list(frame.columns) == ["id;age;sex"]
    schema = draft_schema(frame, "wrong separator")
    blocking = [p for p in check(frame, schema) if p.blocks]
    assert blocking and "semicolon (';': in the header, 12 rows)" in blocking[0].what
    with pytest.raises(ValueError, match="only column read"):
        apply(frame, schema)
    detected = read_table_bytes(text.encode(), "semi.csv")
    assert list(detected.columns) == ["id", "age", "sex"]
    assert not [p for p in check(detected, draft_schema(detected, "right")) if "only column" in p.what]


def test_read_options_validate_and_accept_names():
    assert ReadOptions(encoding="Windows-1252", separator="tab").separator == "\t"
    assert ReadOptions(encoding="latin1").encoding == "latin-1"
    assert ReadOptions(decimal="comma").decimal == ","
    for bad in (dict(encoding="ebcdic"), dict(separator="#"), dict(header_row=0), dict(sheet=" "), dict(decimal=";")):
        with pytest.raises(ValueError):
            ReadOptions(**bad)


# ------------------------------------------------------------------------------------------- options travel
def _declared(export):
    read = read_file(export.data, export.filename)
    schema = draft_schema(read.frame, "Brown").replace(file_suffix=Path(export.filename).suffix,
                                                       read=read.report.options)
    return read, schema


def test_the_read_options_travel_with_the_declaration_and_reruns_read_the_same_way():
    export = EXPORTS["semicolon_decimal_comma"]
    read, schema = _declared(export)
    assert DataSchema.from_dict(schema.to_dict()) == schema
    ref = DataRef(DataRef.UPLOAD, bytes_fingerprint(export.data), schema=schema)
    back = plan_from_dict(plan_to_dict(_plan_on(ref))).data
    assert back.schema.read == ReadOptions("cp1252", ";", None, 1, ",")
    pd.testing.assert_frame_equal(load_microdata(back, export.data), apply(read.frame, schema))
    # the same file declared with another separator is read that way, and refused
    wrong = schema.replace(read=ReadOptions("cp1252", ",", None, 1, ","))
    with pytest.raises(ValueError):
        load_microdata(DataRef(DataRef.UPLOAD, ref.fingerprint, schema=wrong), export.data)


def test_schemas_saved_before_read_options_load_and_keep_their_digest():
    schema = DataSchema("old", (ColumnSchema("a"),))
    body = schema.to_dict()
    assert "read" not in body and DataSchema.from_dict(body).read is None
    assert digest_of(schema) == digest_of(DataSchema.from_dict(body))
    assert "read" not in plan_to_dict(_plan_on(DataRef(DataRef.UPLOAD, "0" * 64, schema=schema)))["data"]["schema"]
    with pytest.raises(ValueError, match="no field"):
        DataSchema.from_dict({**body, "read": {"encoding": "utf-8", "colour": "red"}})


def _plan_on(ref: DataRef):
    """A plan that carries ``ref`` (any area's plan will do)."""
    from core.coherence import AuditPlan
    return AuditPlan(data=ref, lens=("sex", "county"))


# ------------------------------------------------------------------------------------------- workbooks
def test_blank_and_merged_header_cells_are_named_and_empty_columns_dropped():
    read = read_file(merged_header_workbook(), "merged.xlsx")
    assert list(read.frame.columns) == ["id", "Address", "column_3", "age"]
    assert read.frame["column_3"].tolist() == ["Springfield", "Shelbyville"]
    assert any("column_3" in n for n in read.report.notes)


def test_repeated_header_names_are_refused_by_name_never_suffixed():
    with pytest.raises(ValueError, match=r"'age' in columns \[2, 4\]"):
        read_file(duplicate_header_workbook(), "dup.xlsx")
    with pytest.raises(ValueError, match=r"'age' in columns \[2, 3\]"):
        read_file(b"id,age,age\nP1,3,4\n", "dup.csv")


def test_a_workbook_is_sized_from_its_dimension_before_any_cell_is_parsed(monkeypatch):
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

    def no_cells(*args, **kwargs):
        raise AssertionError("cells parsed before the size check")

    monkeypatch.setattr(ReadOnlyWorksheet, "_cells_by_row", no_cells)
    with pytest.raises(ValueError, match=f"reaches column 16,384; at most {MAX_COLUMNS:,}"):
        read_file(wide_dimension_workbook(), "wide.xlsx")


def _with_dimension(data: bytes, ref: str) -> bytes:
    """The workbook with its first sheet's recorded size replaced by ``ref``."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                body = re.sub(rb'<dimension ref="[^"]*"', f'<dimension ref="{ref}"'.encode(), body)
            dst.writestr(info.filename, body)
    return out.getvalue()


def test_a_sheet_whose_recorded_size_lies_is_held_to_the_caps_while_streamed():
    with pytest.raises(ValueError, match=f"a cell in column 16,384; at most {MAX_COLUMNS:,}"):
        read_file(_with_dimension(wide_dimension_workbook(), "A1:B2"), "lying.xlsx")
    # a writer that records "A1" only: the table is read whole
    honest = read_file(_with_dimension(workbook_with_title(), "A1"), "a1.xlsx")
    pd.testing.assert_frame_equal(honest.frame, expected_cells(EXPORTS["xlsx_title_two_sheets"]))
    rows = MAX_CELLS // 2 + 1
    with pytest.raises(ValueError, match=f"{rows:,} x 2 cells"):
        read_file(_with_dimension(workbook_with_title(), f"A1:B{rows}"), "huge.xlsx")


# ------------------------------------------------------------------------------------------- hostile names
@pytest.mark.parametrize("name", ["![x](http://e/x.png)", "<img src=http://e/x.png>", "`code`", "[link](http://e)"])
def test_markup_in_a_column_name_is_refused_naming_its_position(name, tmp_path):
    csv = f'id,"{name}"\nP1,3\n'.encode()
    with pytest.raises(ValueError, match=r"Column\(s\) \[2\].*markup"):
        read_file(csv, "x.csv")
    frame = pd.DataFrame({"id": ["P1"], name: ["3"]})
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    with pytest.raises(ValueError, match=r"Column\(s\) \[2\]"):
        read_file(buffer.getvalue(), "x.parquet")
    import openpyxl
    book = openpyxl.Workbook()
    book.active.append(["id", name])
    book.active.append(["P1", 3])
    book.active.append(["P2", 4])
    out = io.BytesIO()
    book.save(out)
    with pytest.raises(ValueError, match=r"Column\(s\) \[2\]"):
        read_file(out.getvalue(), "x.xlsx")
    (tmp_path / "parts").mkdir()
    frame.to_parquet(tmp_path / "parts" / "part-0.parquet")
    with pytest.raises(ValueError, match=r"Column\(s\) \[2\]"):
        sample_rows(list_folder(str(tmp_path / "parts")))


def test_invisible_and_control_characters_are_removed_from_names_and_cells():
    text = ('id,"Date of\nbirth",se\u200bx,\u202eage\n'
            'P1,2001,F\u200b,3\u202e4\n'
            'P2,1999,M,41\n').encode()
    read = read_file(text, "x.csv")
    assert list(read.frame.columns) == ["id", "Date of birth", "sex", "age"]
    assert read.frame["sex"].tolist() == ["F", "M"] and read.frame["age"].tolist() == ["34", "41"]
    assert any("column(s) [2, 3, 4]" in n for n in read.report.notes)
    with pytest.raises(ValueError, match="binary"):
        read_file(b"id,a\x00ge\nP1,3\n", "nul.csv")
    frame = pd.DataFrame({"id": ["P1"], "se\u200bx": ["F"]})
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    with pytest.raises(ValueError, match=r"Column\(s\) \[2\] have a name with invisible"):
        sample_rows_of(buffer.getvalue())


def sample_rows_of(parquet: bytes):
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "part-0.parquet").write_bytes(parquet)
        return sample_rows(list_folder(folder))


# ------------------------------------------------------------------------------------------- schema checks
def test_many_categories_load_and_repeats_are_named():
    many = tuple(f"c{i}" for i in range(25_000))
    col = ColumnSchema("code", categories=many)
    assert len(col.categories) == 25_000
    with pytest.raises(ValueError, match=r"\['C7', 'c7'\] are listed twice"):
        ColumnSchema("code", categories=many + ("C7",))


def test_bins_are_capped_and_edges_finite_bounded_and_distinct():
    with pytest.raises(ValueError, match="5,000 bin edges are given; at most 1,001"):
        ColumnSchema("age", "number", bounds=(0.0, 4999.0), bins=tuple(float(i) for i in range(5_000)))
    with pytest.raises(ValueError, match=r"within \+-1e\+15"):
        ColumnSchema("income", "number", bounds=(-1e308, 1e308), bins=10)
    with pytest.raises(ValueError, match="narrower than a number can tell apart"):
        ColumnSchema("x", "number", bounds=(1e15 - 1, 1e15), bins=1000)
    with pytest.raises(ValueError, match="same label"):
        ColumnSchema("x", "number", bounds=(1.0, 1.0000004), bins=(1.0, 1.0000001, 1.0000002, 1.0000004))
    # what the schema accepts, apply can cut
    col = ColumnSchema("x", "number", bounds=(-1e15, 1e15), bins=1000, missing="drop_row")
    schema = DataSchema("t", (col,))
    frame = pd.DataFrame({"x": ["-1e15", "0", "999999999999999"]})
    assert not [p for p in check(frame, schema) if p.blocks]
    assert apply(frame, schema)["x"].notna().all()


# ------------------------------------------------------------------------------------------- command line
def _cli(*args: str) -> subprocess.CompletedProcess:
    return core_command("data", *args)


def test_command_line_detects_says_and_overrides(tmp_path):
    semi = EXPORTS["semicolon_decimal_comma"]
    path, schema_path = tmp_path / semi.filename, tmp_path / "schema.json"
    path.write_bytes(semi.data)
    done = _cli("profile", str(path), "--out", str(schema_path))
    assert done.returncode == 0, done.stderr
    assert "read: Separator: semicolon (';')" in done.stderr and "Windows-1252" in done.stderr
    schema = DataSchema.from_dict(json.loads(schema_path.read_text()))
    assert schema.read == ReadOptions("cp1252", ";", None, 1, ",")
    assert [c.name for c in schema.columns] == list(people().columns)
    done = _cli("check", str(path), "--schema", str(schema_path), "--sep", "comma")
    assert done.returncode == 2 and "with the comma (',') as separator" in done.stderr
    plain = tmp_path / "plain.csv"
    plain.write_text("id;age;sex\n" + "".join(f"P{i};{20 + i};F\n" for i in range(12)))
    assert _cli("profile", str(plain), "--out", str(schema_path)).returncode == 0
    done = _cli("check", str(plain), "--schema", str(schema_path), "--sep", "comma")
    assert done.returncode == 1 and "Separator: comma (',') (chosen)" in done.stderr
    assert "is the only column read" in done.stdout
    book = tmp_path / "people.xlsx"
    book.write_bytes(EXPORTS["xlsx_title_two_sheets"].data)
    done = _cli("profile", str(book), "--out", str(tmp_path / "b.json"), "--sheet", "Notes", "--header-row", "1")
    assert done.returncode == 0, done.stderr
    assert "read: Sheet: 'Notes' (chosen)" in done.stderr and "read: Header row: row 1 (chosen)" in done.stderr
