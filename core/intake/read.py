"""Read a curator's file as text cells: CSV and other delimited text, Parquet, Excel.

Every text cell is kept as written (``"007"``, ``"45,000"``, ``"N/A"`` stay as they are) so the
profile sees exactly what the file says; nothing is read as missing by the parser: what counts as
missing is the schema's ``missing_tokens``. How the file is read is a
:class:`core.intake.options.ReadOptions` (encoding, separator, sheet, header row); what it leaves
None is detected, and :func:`read_file` returns a :class:`ReadReport` saying what was used and why,
which the page and ``python -m core data`` show.

- Delimited text (``.csv``, also ``.txt`` and ``.tsv``): encoding, line endings, separator and
  header line as in :mod:`core.intake.sniff`; parsed by pyarrow where available (strings stay in
  Arrow memory), else by pandas' C parser.
- Excel (``.xlsx``): :mod:`core.intake.workbook` (every sheet listed, sized before parsing, the
  header row found past title rows).
- Parquet: its stored types are kept.

Names are made safe at read time (:mod:`core.intake.names`): hiding and control characters removed,
markup refused, blank header cells named, repeated names refused; cells lose hiding and control
characters. The file's size is capped by :func:`core.uploads.read_bytes` before it is read.
"""
from __future__ import annotations

import importlib.util
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from core.intake.names import HIDDEN, checked_names, clean_cells
from core.intake.options import DECIMALS, ENCODINGS, SEPARATORS, ReadOptions
from core.intake.schema import FILE_SUFFIXES
from core.intake.sniff import decode, layout, line_endings
from core.intake.workbook import frame_of, read_sheet
from core.uploads import DEFAULT_MAX_BYTES, read_bytes

__all__ = ["ReadReport", "TABLE_SUFFIXES", "TableRead", "read_file", "read_table", "read_table_bytes",
           "table_suffix"]

TABLE_SUFFIXES = FILE_SUFFIXES
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
# Control characters other than tab and line breaks (those separate fields and rows).
_STRAY_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class ReadReport:
    """How a file was read: ``options`` every choice made (the ones to save with the declaration), ``why``
    one ``(what, value, reason)`` per choice, ``sheets`` the names of a workbook's sheets, ``notes`` what was changed
    on the way (skipped title rows, named or cleaned columns). Curator-only: notes may count cells."""

    kind: str
    options: ReadOptions
    why: tuple[tuple[str, str, str], ...] = ()
    sheets: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The report as sentences: one per choice, then the sheets and the notes."""
        out = [f"{what}: {value} ({reason})." for what, value, reason in self.why]
        if len(self.sheets) > 1:
            out.append(f"Sheets: {', '.join(map(repr, self.sheets))}.")
        return out + list(self.notes)


@dataclass(frozen=True)
class TableRead:
    """A file read: its cells as a frame, and the report of how."""

    frame: pd.DataFrame = field(repr=False)
    report: ReadReport


def table_suffix(filename: str) -> str:
    """The lower-case suffix of ``filename`` (or a bare suffix such as ``".csv"``) if it is one this
    module reads; ValueError naming the file types read otherwise."""
    name = str(filename or "").strip()
    suffix = name.lower() if name.startswith(".") and "." not in name[1:] else Path(name).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{name or 'The file'}: read CSV (or .tsv, .txt delimited text), Parquet or Excel (.xlsx) "
                         "files; save it as one of them.")
    return suffix


def read_table(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES,
               options: ReadOptions | None = None) -> pd.DataFrame:
    """The table in ``path`` (by its suffix); ValueError saying what to change when it cannot be read."""
    path = Path(path)
    table_suffix(path.name)
    return read_table_bytes(read_bytes(path, max_bytes), path.name, options)


def read_table_bytes(data: bytes, filename: str, options: ReadOptions | None = None) -> pd.DataFrame:
    """The table in ``data``, read by the suffix of ``filename`` (a bare suffix such as ``".xlsx"`` will do)
    and ``options`` (None: detect everything); cells as text. The caller has already capped the size
    (:func:`core.uploads.read_bytes`)."""
    return read_file(data, filename, options).frame


def read_file(data: bytes, filename: str, options: ReadOptions | None = None) -> TableRead:
    """:func:`read_table_bytes` with the :class:`ReadReport` of how the file was read."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"read_table_bytes takes the file's bytes, not {type(data).__name__}.")
    if options is not None and not isinstance(options, ReadOptions):
        raise ValueError(f"Read options are a ReadOptions, not {type(options).__name__}.")
    options = options or ReadOptions()
    suffix = table_suffix(filename)
    name = Path(str(filename)).name
    data = bytes(data)
    if suffix in TEXT_SUFFIXES:
        return _read_text(data, options)
    if suffix == ".xlsx":
        return _read_workbook(data, name, options)
    return _read_parquet(data, name)


# ------------------------------------------------------------------------------------------- text
def _read_text(data: bytes, options: ReadOptions) -> TableRead:
    text, encoding, enc_why = decode(data, options.encoding)
    endings = line_endings(text)
    if endings in ("CR", "mixed"):
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    found = layout(text, options)
    if found.header_row > 1:
        text = _drop_lines(text, found.header_row - 1)
    header, frame = _parse(text, found.separator)
    frame, notes = _named(frame, header)
    if HIDDEN.search(text) or _STRAY_CONTROL.search(text):
        frame, more = clean_cells(frame)
        notes += more
    if found.header_row > 1:
        notes.insert(0, f"Skipped line(s) 1 to {found.header_row - 1} above the header.")
    decimal, decimal_why = _decimal_mark(frame, options.decimal, found.separator)
    if decimal == ",":
        frame, more = _with_points(frame)
        notes += more
    used = ReadOptions(encoding, found.separator, None, found.header_row, decimal)
    why = (("Encoding", ENCODINGS[encoding], enc_why),
           ("Separator", f"{SEPARATORS[found.separator]} ({found.separator!r})", found.separator_why),
           ("Header row", f"line {found.header_row}", found.header_why),
           ("Line endings", endings, _ENDINGS[endings]),
           ("Decimal mark", f"{DECIMALS[decimal]} ({decimal!r})", decimal_why))
    return TableRead(frame, ReadReport("text", used, why, notes=tuple(notes)))


def _named(frame: pd.DataFrame, header: list) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` under its checked names; columns with neither a name nor a value (trailing separators, blank
    spacer columns) are dropped first."""
    blank = [str(h or "").strip() == "" for h in header]
    if any(blank):
        empty = [b and not frame.iloc[:, j].astype(str).str.strip().astype(bool).any() for j, b in enumerate(blank)]
        if any(empty) and not all(empty):
            keep = [j for j, e in enumerate(empty) if not e]
            frame, header = frame.iloc[:, keep], [header[j] for j in keep]
    names, notes = checked_names(list(header))
    frame = frame.copy()
    frame.columns = names
    return frame.reset_index(drop=True), notes


# Numbers that can only be written with a decimal comma, or only with a decimal point (a fraction of other
# than three digits: "1,500" and "1.500" are ambiguous, "3,5" and "3.25" are not).
_DECIMAL_COMMA = r"[+-]?\d+,(?:\d{1,2}|\d{4,})"
_DECIMAL_POINT = r"[+-]?\d+\.(?:\d{1,2}|\d{4,})"
# A number written with a decimal comma and optional thousands dots: "3,5", "1.250,75", "1.250".
_COMMA_NUMBER = r"[+-]?(?:\d{1,3}(?:\.\d{3})+|\d+)(?:,\d+)?"


def _columns_matching(frame: pd.DataFrame, pattern: str, rows: int = 1_000) -> list[str]:
    head = frame.head(rows)
    return [str(c) for c in head.columns if head[c].astype(str).str.fullmatch(pattern).any()]


def _decimal_mark(frame: pd.DataFrame, chosen: str | None, separator: str) -> tuple[str, str]:
    """(mark, why): the chosen one, else a point in a comma-separated file (a decimal comma there would need
    quotes; "1,500" is a thousands separator), else a comma when the first rows hold numbers only a decimal
    comma writes and none only a decimal point writes, else a point."""
    if chosen is not None:
        return chosen, "chosen"
    if separator == ",":
        return ".", "the file is comma-separated"
    commas = _columns_matching(frame, _DECIMAL_COMMA)
    if not commas:
        return ".", "no number written with a decimal comma"
    points = _columns_matching(frame, _DECIMAL_POINT)
    if points:
        return ".", (f"decimal points in {', '.join(points[:5])} (decimal commas in {', '.join(commas[:5])} are "
                     "left as written)")
    return ",", f"numbers such as 3,5 in {', '.join(commas[:5])}, and no decimal point"


def _with_points(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Cells that are numbers written with a decimal comma, rewritten with a point and without thousands dots."""
    touched = []
    for name in frame.columns:
        text = frame[name].astype(str)
        hit = text.str.fullmatch(_COMMA_NUMBER) & text.str.contains(r"[.,]")
        if hit.any():
            frame[name] = text.where(~hit, text.str.replace(".", "", regex=False).str.replace(",", ".", regex=False))
            touched.append(str(name))
    notes = ([f"Numbers written with a decimal comma rewritten with a point in {', '.join(touched[:10])}."]
             if touched else [])
    return frame, notes


_ENDINGS = {"LF": "Unix", "CRLF": "Windows", "CR": "old Mac, read as line breaks",
            "mixed": "several kinds, all read as line breaks"}


def _drop_lines(text: str, n: int) -> str:
    start = 0
    for _ in range(n):
        end = text.find("\n", start)
        if end < 0:
            raise ValueError(f"The file has fewer than {n + 1} lines; choose an earlier header row.")
        start = end + 1
    return text[start:]


def _parse(text: str, sep: str) -> tuple[list, pd.DataFrame]:
    """(header, rows) of delimited text whose first line is the header, every cell as text."""
    if not text.strip():
        raise ValueError("The file contains only blank lines; it needs a header row and data rows.")
    engine = "pyarrow" if importlib.util.find_spec("pyarrow") is not None else "c"
    raw = text.encode("utf-8")
    try:
        frame = pd.read_csv(io.BytesIO(raw), sep=sep, engine=engine, dtype=str, keep_default_na=False,
                            na_filter=False if engine == "c" else True, header=None)
    except Exception as exc:  # the pyarrow and C parsers raise their own types for ragged rows
        name = SEPARATORS[sep]
        raise ValueError(f"The file could not be parsed with the {name} ({sep!r}) as separator "
                         f"({str(exc).strip()[:200]}); check that every row has as many {name}-separated fields "
                         "as the header, or choose another separator.") from None
    return frame.iloc[0].tolist(), frame.iloc[1:]


# ------------------------------------------------------------------------------------------- others
def _read_workbook(data: bytes, name: str, options: ReadOptions) -> TableRead:
    sheet = read_sheet(data, name, options.sheet, options.header_row)
    frame, notes = _named(frame_of(sheet, [f"c{j}" for j in range(len(sheet.header))]), sheet.header)
    if sheet.header_row > 1:
        notes.insert(0, f"Skipped row(s) 1 to {sheet.header_row - 1} above the header.")
    others = [s.describe() for s in sheet.sheets if s.name != sheet.sheet]
    if others:
        notes.append(f"Other sheets, not read: {'; '.join(others)}. Choose another sheet to read it.")
    used = ReadOptions(None, None, sheet.sheet, sheet.header_row)
    why = (("Sheet", repr(sheet.sheet), sheet.sheet_why), ("Header row", f"row {sheet.header_row}", sheet.header_why))
    return TableRead(frame, ReadReport("workbook", used, why, tuple(s.name for s in sheet.sheets),
                                       tuple(notes)))


def _read_parquet(data: bytes, name: str) -> TableRead:
    try:
        frame = pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises its own types for damaged files
        raise ValueError(f"{name}: not a readable Parquet file ({str(exc)[:200]}).") from None
    names, notes = checked_names([str(c) for c in frame.columns], name_blanks=False)
    frame.columns = names
    frame, more = clean_cells(frame)
    return TableRead(frame, ReadReport("parquet", ReadOptions(), (), notes=tuple(notes + more)))
