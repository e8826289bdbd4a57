"""Read a curator's file as text cells: CSV (through the upload size cap), Parquet, Excel.

Every CSV cell is kept as text (``"007"``, ``"45,000"``, ``"N/A"`` stay as written) so the profile
sees exactly what the file says; nothing is read as missing by the parser: what counts as missing
is the schema's ``missing_tokens``. The file's size is checked by
:func:`core.uploads.read_bytes` before it is read, and the header is checked (column cap, blank
or repeated names) before pandas sees the rest. CSV is parsed by pyarrow where available (strings
stay in Arrow memory), else by pandas' C parser. Parquet keeps its stored types. Excel needs the
optional ``openpyxl`` package; without it an ``.xlsx`` file is refused with a message.
"""
from __future__ import annotations

import csv
import importlib.util
import io
from pathlib import Path

import pandas as pd

from core.uploads import DEFAULT_MAX_BYTES, MAX_COLUMNS, read_bytes

__all__ = ["TABLE_SUFFIXES", "read_table"]

TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".xlsx")


def read_table(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> pd.DataFrame:
    """The table in ``path`` (by its suffix); ValueError saying what to change when it cannot be read."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path.name}: read CSV, Parquet or Excel (.xlsx) files; save it as one of them.")
    data = read_bytes(path, max_bytes)
    if suffix == ".csv":
        return read_csv_text_cells(data)
    if suffix == ".xlsx":
        if importlib.util.find_spec("openpyxl") is None:
            raise ValueError(f"{path.name}: Excel files need the openpyxl package, which is not installed here. "
                             "Save the sheet as CSV (UTF-8) or Parquet and read that instead.")
        frame = pd.read_excel(io.BytesIO(data), dtype=str, keep_default_na=False)  # pragma: no cover
    else:
        try:
            frame = pd.read_parquet(io.BytesIO(data))
        except Exception as exc:  # pyarrow raises its own types for damaged files
            raise ValueError(f"{path.name}: not a readable Parquet file ({str(exc)[:200]}).") from None
    _check_names([str(c) for c in frame.columns])
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


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
