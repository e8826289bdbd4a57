"""Read one sheet of an Excel workbook (.xlsx) as text cells, sized before anything is parsed.

1. The workbook is a zip: its central directory is checked first (member count, each member's
   declared size against its compressed size, the declared total), so a zip bomb is refused before
   anything is inflated.
2. The workbook is opened in openpyxl's read-only (streaming) mode, which reads each sheet's
   recorded size (its ``<dimension>`` element) without parsing a cell. Every sheet is listed with
   its size; the sheet read is the one chosen, else the first visible sheet that holds more than
   one cell. A sheet wider than :data:`MAX_COLUMNS` or larger than :data:`MAX_CELLS` is refused
   from its recorded size; its cells are then streamed one row at a time under the same caps, so a
   sheet whose recorded size lies is refused as soon as its cells pass them.
3. The header row is the chosen one, else the first of the top rows whose filled cells span most
   of the width and are mostly distinct text that is not a number; rows above it (titles, notes)
   are skipped. Blank or merged header cells are named by position; repeated names are refused.
4. Cells become text as a CSV would hold them (``34``, ``1.5``, ``2024-03-01``); blank rows are dropped.
"""
from __future__ import annotations

import datetime as dt
import io
import math
import zipfile
from dataclasses import dataclass

import pandas as pd

from core.intake.names import CONTROL, HIDDEN, clean_text
from core.uploads import MAX_COLUMNS, MAX_EXPANDED_BYTES, MAX_ZIP_RATIO

__all__ = ["HEADER_SCAN_ROWS", "MAX_CELLS", "MAX_WORKBOOK_MEMBERS", "Sheet", "WorkbookRead", "cell_text", "find_header",
           "frame_of", "read_sheet"]

MAX_WORKBOOK_MEMBERS = 1_000
MAX_CELLS = 5_000_000           # rows x columns of the sheet read; larger tables belong in CSV or Parquet
HEADER_SCAN_ROWS = 30


@dataclass(frozen=True)
class Sheet:
    """A sheet of the workbook and its recorded size (None when the file does not record it)."""

    name: str
    rows: int | None
    columns: int | None
    visible: bool

    def describe(self) -> str:
        size = "size not recorded" if self.rows is None else f"{self.rows:,} rows x {self.columns:,} columns"
        return f"'{self.name}' ({size}{'' if self.visible else ', hidden'})"


@dataclass(frozen=True)
class WorkbookRead:
    """The sheet read as a header and text rows, with every sheet of the workbook and the reasons."""

    header: list
    rows: list
    sheets: tuple[Sheet, ...]
    sheet: str
    sheet_why: str
    header_row: int
    header_why: str


def _damaged(name: str) -> str:
    return (f"{name}: not a readable Excel workbook (.xlsx); open it in Excel or LibreOffice and save it again as "
            ".xlsx, or save the sheet as CSV (UTF-8).")


def _check_zip(data: bytes, name: str) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ValueError(_damaged(name)) from None
    if len(infos) > MAX_WORKBOOK_MEMBERS:
        raise ValueError(f"{name}: the workbook holds {len(infos):,} parts; save the sheet on its own or as CSV.")
    total = 0
    for info in infos:
        if info.file_size / max(info.compress_size, 1) > MAX_ZIP_RATIO and info.file_size > 1_000_000:
            raise ValueError(f"{name}: a part of the workbook would expand more than {MAX_ZIP_RATIO} times; "
                             "this looks like a zip bomb. Save the sheet as CSV instead.")
        total += info.file_size
    if total > MAX_EXPANDED_BYTES:
        raise ValueError(f"{name}: the workbook expands to more than {MAX_EXPANDED_BYTES // 1_000_000:,} MB; "
                         "save the sheet as CSV or Parquet instead.")


def _open(data: bytes, name: str):
    import openpyxl   # in requirements.txt; an ImportError is an incomplete installation, not the file
    try:
        return openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception:  # openpyxl raises many types (KeyError, InvalidFileException, XML errors)
        raise ValueError(_damaged(name)) from None


def _size(ws) -> tuple[int | None, int | None]:
    try:
        rows, cols = ws.max_row, ws.max_column
    except Exception:   # a malformed <dimension> element
        return None, None
    if not rows or not cols or rows * cols == 1:    # some writers record "A1" whatever the sheet holds
        return None, None
    return int(rows), int(cols)


def _choose(sheets: tuple[Sheet, ...], wanted: str | None, name: str) -> tuple[str, str]:
    if wanted is not None:
        if wanted not in {s.name for s in sheets}:
            raise ValueError(f"{name}: there is no sheet {wanted!r}; the sheets are "
                             f"{', '.join(s.describe() for s in sheets)}.")
        return wanted, "chosen"
    for sheet in sheets:
        if sheet.visible and (sheet.rows is None or sheet.rows * sheet.columns > 1):
            first = sheet is sheets[0]
            return sheet.name, "the first sheet" if first else "the first visible sheet with data"
    return sheets[0].name, "the first sheet"


def _refuse_size(sheet: Sheet, name: str) -> None:
    if sheet.columns is not None and sheet.columns > MAX_COLUMNS:
        raise ValueError(f"{name}: sheet '{sheet.name}' reaches column {sheet.columns:,}; at most {MAX_COLUMNS:,} "
                         "columns are read. Delete the stray cells far to the right, or save the table as CSV.")
    if sheet.rows is not None and sheet.rows * sheet.columns > MAX_CELLS:
        raise ValueError(f"{name}: sheet '{sheet.name}' holds {sheet.rows:,} x {sheet.columns:,} cells; at most "
                         f"{MAX_CELLS:,} are read from a workbook. Save the table as CSV or Parquet.")


def _stream(ws, sheet: Sheet, name: str) -> list[list[str]]:
    """The sheet's rows as text, one row at a time, each as wide as its last cell. The recorded size is not
    trusted here (some writers record ``A1`` only): a cell right of MAX_COLUMNS, or more than MAX_CELLS cells
    by the widest row so far, is refused as soon as it is met, so a size that lies costs no more than the caps."""
    ws.reset_dimensions()        # stream every row the sheet holds, not only those its recorded size admits
    rows, widest = [], 1
    try:
        for values in ws.iter_rows(values_only=True):
            if len(values) > MAX_COLUMNS and any(v is not None for v in values[MAX_COLUMNS:]):
                raise ValueError(f"{name}: sheet '{sheet.name}' has a cell in column {len(values):,}; at most "
                                 f"{MAX_COLUMNS:,} columns are read. Delete the stray cells far to the right, or "
                                 "save the table as CSV.")
            widest = max(widest, min(len(values), MAX_COLUMNS))
            if (len(rows) + 1) * widest > MAX_CELLS:
                raise ValueError(f"{name}: sheet '{sheet.name}' holds more than {MAX_CELLS:,} cells; save the table "
                                 "as CSV or Parquet.")
            rows.append([cell_text(v) for v in values[:MAX_COLUMNS]])
    except ValueError:
        raise
    except Exception:   # malformed sheet XML
        raise ValueError(_damaged(name)) from None
    return rows


def cell_text(value) -> str:
    """A cell as text, as a CSV export writes it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value) if HIDDEN.search(value) or CONTROL.search(value) else value
    if isinstance(value, bool):
        return str(value).upper()
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def find_header(top: list[list[str]]) -> tuple[int, str]:
    """(0-based index, why) of the header among the top rows: the first whose filled cells span at least
    60% of the width and are at least 80% text that is no number and 90% distinct."""
    width = max((max((j + 1 for j, v in enumerate(row) if v), default=0) for row in top), default=0)
    for i, row in enumerate(top):
        filled = [v for v in row if v]
        if len(filled) < max(2, math.ceil(0.6 * width)):
            continue
        text = sum(not _is_number(v) for v in filled)
        if text >= 0.8 * len(filled) and len(set(filled)) >= 0.9 * len(filled):
            why = "the first row" if i == 0 else (
                f"the first row of distinct names across the table; row(s) 1 to {i} above it are skipped")
            return i, why
    first = next((i for i, row in enumerate(top) if any(row)), 0)
    return first, "the first row with content (no row looks like a row of names: check the header row)"


def read_sheet(data: bytes, name: str, sheet: str | None = None, header_row: int | None = None) -> WorkbookRead:
    """The chosen (else detected) sheet of a workbook, from its chosen (else detected) header row."""
    _check_zip(data, name)
    book = _open(data, name)
    try:
        sheets = tuple(Sheet(ws.title, *_size(ws), getattr(ws, "sheet_state", "visible") == "visible")
                       for ws in book.worksheets)
        if not sheets:
            raise ValueError(f"{name}: the workbook holds no sheet.")
        chosen, sheet_why = _choose(sheets, sheet, name)
        info = next(s for s in sheets if s.name == chosen)
        _refuse_size(info, name)
        rows = _stream(book[chosen], info, name)
    finally:
        book.close()
    if not any(any(r) for r in rows):
        raise ValueError(f"{name}: sheet '{chosen}' is empty; choose the sheet that holds the table "
                         f"({', '.join(s.describe() for s in sheets)}).")
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    if header_row is None:
        index, header_why = find_header(rows[:HEADER_SCAN_ROWS])
    else:
        if header_row > len(rows):
            raise ValueError(f"{name}: sheet '{chosen}' has {len(rows):,} rows; the header row {header_row} is past "
                             "its end.")
        index, header_why = header_row - 1, "chosen"
    header, body = rows[index], [r for r in rows[index + 1:] if any(r)]
    used = max([j + 1 for j, v in enumerate(header) if v] + [max((j + 1 for j, v in enumerate(r) if v), default=0)
                                                              for r in body] + [1])
    return WorkbookRead([v or None for v in header[:used]], [r[:used] for r in body], sheets, chosen, sheet_why,
                        index + 1, header_why)


def frame_of(read: WorkbookRead, names: list[str]) -> pd.DataFrame:
    """The sheet's rows under ``names``, every cell text."""
    if not read.rows:
        return pd.DataFrame({n: pd.Series([], dtype=str) for n in names})
    return pd.DataFrame(read.rows, columns=names, dtype=object).astype(str)   # text cells, as a CSV's
