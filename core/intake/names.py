"""Column names and cell text made safe to show, at read time.

A column name reaches widget labels, messages and the command line, so it must be plain text:

- characters that hide themselves or reorder text (zero-width, direction marks and overrides,
  byte-order marks, soft hyphens) are removed, and control characters (NUL, tab, line breaks, as a
  header cell wrapped in Excel holds) become a space; each change is reported with the column's
  position;
- a name that still holds markup (``[ ] < > `` and backticks: links, images, HTML, code spans) is
  refused, naming its position; so is a name longer than :data:`MAX_NAME`;
- a blank name (a blank or merged header cell) becomes ``column_<position>`` when the caller allows
  it, and is refused otherwise; two columns with the same name are refused, naming them (never
  silently ``age`` and ``age.1``).

Cell text keeps its markup (``<18`` is a real label) but loses hiding and control characters the
same way (:func:`clean_cells`); the page shows every piece of file content as plain text.
Every check is one pass over the names (linear).
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from core.uploads import CONTROL_CHARACTERS, HIDDEN_CHARACTERS, MARKUP_CHARACTERS, MAX_COLUMNS

__all__ = ["CONTROL", "HIDDEN", "MARKUP", "MAX_NAME", "checked_names", "clean_cells", "clean_text"]

MAX_NAME = 200
HIDDEN = re.compile(f"[{HIDDEN_CHARACTERS}]")
CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
MARKUP = re.compile(f"[{MARKUP_CHARACTERS}]")


def clean_text(text: str) -> str:
    """``text`` without hiding characters and trimmed; control characters become spaces, and where there were
    any, runs of spaces become one."""
    text = HIDDEN.sub("", text)
    return " ".join(CONTROL.sub(" ", text).split()) if CONTROL.search(text) else text.strip()


def checked_names(names: list, *, fix: bool = True, name_blanks: bool = True) -> tuple[list[str], list[str]]:
    """(names, notes): the names made safe, and one note per change. ``fix=False`` refuses hiding and
    control characters instead of removing them (a name that must match a stored file exactly, as a
    Parquet part's); ``name_blanks=False`` refuses blank names. ValueError naming the columns' positions."""
    if len(names) > MAX_COLUMNS:
        raise ValueError(f"The table has {len(names):,} columns; at most {MAX_COLUMNS:,} are accepted. Keep only the "
                         "columns the tool needs.")
    if not names:
        raise ValueError("The file has no header row; its first line must name the columns.")
    out, notes, changed, marked, long = [], [], [], [], []
    for i, raw in enumerate(names, start=1):
        text = "" if raw is None else str(raw)
        name = clean_text(text)
        if name != text.strip():
            changed.append(i)
        if MARKUP.search(name):
            marked.append(i)
        if len(name) > MAX_NAME:
            long.append(i)
        out.append(name)
    if changed and not fix:
        raise ValueError(f"Column(s) {changed[:10]} have a name with invisible or control characters (line breaks, "
                         "zero-width or direction marks); rename them with plain text.")
    if marked:
        raise ValueError(f"Column(s) {marked[:10]} have a name with brackets, angle brackets or backticks (markup); "
                         "rename them with plain text (letters, digits, spaces, - _ . % / ( )).")
    if long:
        raise ValueError(f"Column(s) {long[:10]} have a name longer than {MAX_NAME} characters; shorten them.")
    if changed:
        notes.append(f"Invisible or control characters removed from the name of column(s) {changed[:10]}.")
    if all(n == "" for n in out):
        raise ValueError("The header row names no column; its first line must name the columns (or choose the "
                         "header row).")
    blank = [i for i, n in enumerate(out, start=1) if n == ""]
    if blank and not name_blanks:
        raise ValueError(f"Column(s) {blank[:10]} have an empty header; name every column.")
    for i in blank:
        out[i - 1] = f"column_{i}"
    if blank:
        notes.append(f"Column(s) {blank[:10]} had a blank (or merged) header cell; named "
                     f"{', '.join(out[i - 1] for i in blank[:10])}.")
    counts = Counter(out)
    twice = sorted(n for n, k in counts.items() if k > 1)
    if twice:
        where = {n: [i for i, m in enumerate(out, start=1) if m == n] for n in twice[:10]}
        raise ValueError("Duplicate column names: " + "; ".join(f"{n!r} in columns {p}" for n, p in where.items())
                         + ". Give every column a distinct name.")
    return out, notes


def clean_cells(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(frame, notes): text cells without hiding characters, control characters as spaces (line breaks inside a
    cell too). Only the columns that hold one are rewritten."""
    pattern = f"{HIDDEN.pattern}|{CONTROL.pattern}"
    touched = []
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object and not pd.api.types.is_string_dtype(column.dtype):
            continue
        text = column.astype("string")
        hit = text.str.contains(pattern, regex=True, na=False).to_numpy()
        if not hit.any():
            continue
        fixed = column.astype(object).copy()
        fixed[hit] = [clean_text(v) for v in text[hit].to_numpy()]
        frame[name] = fixed.astype(column.dtype) if column.dtype != object else fixed
        touched.append(f"{name} ({int(np.count_nonzero(hit)):,} cells)")
    notes = [f"Invisible or control characters removed from cells of {', '.join(touched[:10])}."] if touched else []
    return frame, notes
