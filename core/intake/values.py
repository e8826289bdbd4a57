"""How one column's cells are read: trimmed text, missing tokens, numbers written as text.

Every step works on the column's distinct values (``pandas.factorize``), never row by row, so a
million-row column with a few hundred distinct values costs a few hundred string operations plus
one integer gather. Profile, check and apply all read cells through :func:`read_values`, so they
agree on what is missing and what parses.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

__all__ = ["ColumnValues", "format_number", "parse_number_text", "observed_order", "read_values", "relabel", "require_table"]

CURRENCY = "$€£¥"
# After spaces and currency signs are removed: an optional sign, digits (thousands separated by
# commas in groups of three, or plain), an optional decimal part and exponent, an optional percent sign.
NUMBER_TEXT = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d*)?(?:[eE][+-]?\d+)?%?"


def parse_number_text(text: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numbers written as text: ``(value, formatted, percent)`` per entry.

    ``value`` is NaN where the text is not a number once spaces, currency signs (``$ € £ ¥``), thousands
    separators and a trailing percent sign are removed (``"$45,000" -> 45000``, ``"12%" -> 12``,
    ``"1,2"`` and ``"12 years"`` -> NaN); ``formatted`` marks text that needed such a removal and
    ``percent`` text that carried a percent sign.
    """
    text = pd.Series(text, dtype="str")
    squeezed = text.str.replace(f"[\\s{CURRENCY}]", "", regex=True)
    shaped = squeezed.str.fullmatch(NUMBER_TEXT).fillna(False) & squeezed.str.contains(r"\d", regex=True).fillna(False)
    percent = (squeezed.str.endswith("%").fillna(False) & shaped).to_numpy(dtype=bool)
    bare = squeezed.where(shaped).str.replace(r"[,%]", "", regex=True)
    value = pd.to_numeric(bare, errors="coerce").to_numpy(dtype="float64", na_value=np.nan).copy()
    value[~np.isfinite(value)] = np.nan
    marks = (squeezed != text.str.strip()) | squeezed.str.contains("[,%]", regex=True)
    formatted = (shaped & marks.fillna(False)).to_numpy(dtype=bool)
    return value, formatted & ~np.isnan(value), percent & ~np.isnan(value)


def format_number(values: np.ndarray) -> np.ndarray:
    """Numbers as labels: whole numbers without a decimal point (``3`` not ``3.0``), others as Python writes them."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(np.asarray(values, dtype="float64")):
        out[i] = "" if np.isnan(v) else (str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(float(v)))
    return out


@dataclass(frozen=True, eq=False)
class ColumnValues:
    """One column read through the schema's rules, by distinct value.

    ``codes[i]`` is the index of row i's distinct value; ``counts``, ``missing`` and ``numbers`` are per
    distinct value (a null cell is one more distinct value, marked missing). ``text`` is the trimmed
    text of each distinct value.
    """

    codes: np.ndarray
    counts: np.ndarray
    missing: np.ndarray
    numbers: np.ndarray
    formatted: np.ndarray
    percent: np.ndarray
    raw: np.ndarray
    numeric_dtype: bool

    @cached_property
    def text(self) -> np.ndarray:
        if self.numeric_dtype:
            return format_number(self.raw)
        return pd.Series(self.raw, dtype="str").str.strip().fillna("").to_numpy(dtype=object)

    @property
    def rows(self) -> int:
        return int(self.codes.size)

    @property
    def missing_rows(self) -> int:
        return int(self.counts[self.missing].sum())

    def rows_where(self, mask: np.ndarray) -> int:
        """Rows whose distinct value satisfies ``mask`` (a bool per distinct value)."""
        return int(self.counts[np.asarray(mask, dtype=bool)].sum())


def read_values(series: pd.Series, missing_tokens: tuple[str, ...]) -> ColumnValues:
    """Read a column: distinct values, their row counts, which are missing and which are numbers."""
    numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    codes = np.asarray(codes, dtype=np.int64)
    k = len(uniques)
    has_null = bool((codes < 0).any())
    if has_null:
        codes = np.where(codes < 0, k, codes)
    counts = np.bincount(codes, minlength=k + has_null).astype(np.int64)
    if numeric:
        raw = np.asarray(uniques, dtype="float64")
        numbers = np.where(np.isfinite(raw), raw, np.nan)
        missing = np.zeros(k, dtype=bool)
        formatted = percent = np.zeros(k, dtype=bool)
    else:
        raw = np.asarray(uniques.astype(str), dtype=object)
        stripped = pd.Series(raw, dtype="str").str.strip()
        tokens = [t.casefold() for t in missing_tokens]
        missing = stripped.str.casefold().isin(tokens).to_numpy(dtype=bool)
        numbers, formatted, percent = parse_number_text(stripped)
        numbers[missing] = np.nan
    if has_null:
        raw = np.append(raw, np.nan if numeric else None)
        numbers = np.append(numbers, np.nan)
        missing = np.append(missing, True)
        formatted = np.append(formatted, False)
        percent = np.append(percent, False)
    if numeric:
        missing = missing | np.isnan(raw.astype("float64"))
    return ColumnValues(codes, counts, missing, numbers, formatted, percent, raw, numeric)


def relabel(values: ColumnValues, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row codes of new labels given one label per distinct value (None drops to -1), and the labels.

    Distinct raw values that read the same (``"Female "`` and ``"Female"``) share one code.
    """
    codes, uniques = pd.factorize(pd.Series(labels, dtype=object), use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)[values.codes], np.asarray(uniques, dtype=object)


def observed_order(labels) -> list[str]:
    """Labels in a stable order: numerically when they all read as numbers, else alphabetically ignoring case."""
    labels = [str(x) for x in labels]
    as_numbers = pd.to_numeric(pd.Series(labels, dtype=object), errors="coerce")
    if len(labels) and not as_numbers.isna().any():
        return [labels[i] for i in np.argsort(as_numbers.to_numpy(dtype=float), kind="stable")]
    return sorted(labels, key=lambda s: (s.casefold(), s))


def require_table(frame, what: str) -> None:
    """ValueError unless ``frame`` is a DataFrame with at least one column and distinct column names."""
    if not isinstance(frame, pd.DataFrame) or frame.shape[1] == 0:
        raise ValueError(f"{what} takes a table (pandas DataFrame) with at least one column; read the file first.")
    names = [str(c) for c in frame.columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"Column(s) {twice[:10]} appear more than once; give every column a distinct name.")
