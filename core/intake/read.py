"""Read a curator's file as text cells: CSV (through the upload size cap), Parquet, Excel.

Every CSV cell is kept as text (``"007"``, ``"45,000"``, ``"N/A"`` stay as written) so the profile
sees exactly what the file says; nothing is read as missing by the parser: what counts as missing
is the schema's ``missing_tokens``. The file's size is checked by
:func:`core.uploads.read_bytes` before it is read, and the header is checked (column cap, blank
or repeated names) before pandas sees the rest. CSV is parsed by pyarrow where available (strings
stay in Arrow memory), else by pandas' C parser. Parquet keeps its stored types. Excel (``.xlsx``,
read by ``openpyxl``): the first sheet, every cell as text; the workbook's zip is checked from its
central directory (declared sizes and compression ratios) before anything is inflated.

:func:`read_table_bytes` reads bytes already in memory (an upload, or the file a report is rerun
on) by the suffix of their file name; :func:`read_table` reads a path.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import zipfile
from pathlib import Path

import pandas as pd

from core.intake.schema import FILE_SUFFIXES
from core.uploads import DEFAULT_MAX_BYTES, MAX_COLUMNS, MAX_EXPANDED_BYTES, MAX_ZIP_RATIO, read_bytes

__all__ = ["TABLE_SUFFIXES", "read_csv_text_cells", "read_table", "read_table_bytes", "table_suffix"]

TABLE_SUFFIXES = FILE_SUFFIXES
MAX_WORKBOOK_MEMBERS = 1_000


def table_suffix(filename: str) -> str:
    """The lower-case suffix of ``filename`` (or a bare suffix such as ``".csv"``) if it is one this
    module reads; ValueError naming the file types read otherwise."""
    name = str(filename or "").strip()
    suffix = name.lower() if name.startswith(".") and "." not in name[1:] else Path(name).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{name or 'The file'}: read CSV, Parquet or Excel (.xlsx) files; save it as one of them.")
    return suffix


def read_table(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> pd.DataFrame:
    """The table in ``path`` (by its suffix); ValueError saying what to change when it cannot be read."""
    path = Path(path)
    table_suffix(path.name)
    return read_table_bytes(read_bytes(path, max_bytes), path.name)


def read_table_bytes(data: bytes, filename: str) -> pd.DataFrame:
    """The table in ``data``, read by the suffix of ``filename`` (CSV, Parquet or Excel; a bare suffix
    such as ``".xlsx"`` will do); cells as text as in :func:`read_table`. The caller has already
    capped the size (:func:`core.uploads.read_bytes`)."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"read_table_bytes takes the file's bytes, not {type(data).__name__}.")
    suffix = table_suffix(filename)
    name = Path(str(filename)).name
    data = bytes(data)
    if suffix == ".csv":
        return read_csv_text_cells(data)
    frame = read_workbook(data, name) if suffix == ".xlsx" else _read_parquet(data, name)
    _check_names([str(c) for c in frame.columns])
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _read_parquet(data: bytes, name: str) -> pd.DataFrame:
    try:
        return pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises its own types for damaged files
        raise ValueError(f"{name}: not a readable Parquet file ({str(exc)[:200]}).") from None


def read_workbook(data: bytes, name: str = "workbook.xlsx") -> pd.DataFrame:
    """The first sheet of an Excel workbook, every cell as text (empty cells are empty text).

    The workbook is a zip: its central directory is checked first (member count, each member's
    declared size against its compressed size, the declared total), so a zip bomb is refused before
    anything is inflated. A damaged or non-Excel file is a ValueError saying so."""
    damaged = (f"{name}: not a readable Excel workbook (.xlsx); open it in Excel or LibreOffice and save it "
               "again as .xlsx, or save the sheet as CSV (UTF-8).")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ValueError(damaged) from None
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
    try:
        frame = pd.read_excel(io.BytesIO(data), sheet_name=0, dtype=str, keep_default_na=False,
                              engine="openpyxl")
    except ImportError:  # an incomplete installation (openpyxl is in requirements.txt), not the file
        raise
    except Exception:  # openpyxl raises many types (KeyError, InvalidFileException, XML errors)
        raise ValueError(damaged) from None
    return frame.fillna("")


def read_csv_text_cells(data: bytes) -> pd.DataFrame:
    """A CSV's cells as text (blank cells are empty text), after the header checks."""
    if b"\x00" in data[:65536]:
        raise ValueError("The file looks binary (it contains NUL bytes), not a CSV; an Excel workbook must "
                         "end in .xlsx, other files must be saved as CSV.")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    newline = data.find(b"\n")
    head = data[: newline if newline >= 0 else len(data)]
    try:
        header = head.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        raise ValueError("The file is not UTF-8 text; re-save it with UTF-8 encoding.") from None
    names = [n.strip() for n in next(csv.reader([header]), [])]
    _check_names(names)
    engine = "pyarrow" if importlib.util.find_spec("pyarrow") is not None else "c"
    try:
        frame = pd.read_csv(io.BytesIO(data), engine=engine, dtype=str, keep_default_na=False,
                            na_filter=False if engine == "c" else True)
    except UnicodeDecodeError:
        raise ValueError("The file is not valid UTF-8 text; re-save it with UTF-8 encoding.") from None
    except Exception as exc:  # the pyarrow and C parsers raise their own types for ragged rows
        raise ValueError(f"The CSV could not be parsed ({str(exc).strip()[:200]}); check that every row has as "
                         "many comma-separated fields as the header.") from None
    frame.columns = names
    return frame


def _check_names(names: list[str]) -> None:
    if len(names) > MAX_COLUMNS:
        raise ValueError(f"The table has {len(names):,} columns; at most {MAX_COLUMNS:,} are accepted.")
    if not names or all(n.strip() == "" for n in names):
        raise ValueError("The file has no header row; its first line must name the columns.")
    blank = [i + 1 for i, n in enumerate(names) if not n.strip()]
    if blank:
        raise ValueError(f"Column(s) {blank[:10]} have an empty header; name every column.")
    stripped = [n.strip() for n in names]
    twice = sorted({n for n in stripped if stripped.count(n) > 1})
    if twice:
        raise ValueError(f"Duplicate column names {twice[:10]}; give every column a distinct name.")
