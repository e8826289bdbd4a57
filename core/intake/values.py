"""How one column's cells are read: trimmed text, missing tokens, numbers written as text.

Every step works on the column's distinct values, never row by row: the column is dictionary-encoded
once (Arrow's hash table), and trimming, missing tokens and number parsing run as Arrow compute
kernels over the distinct values only. A million-row column with a few hundred distinct values
costs a few hundred string operations plus one integer gather. Profile, check and apply all read
cells through :func:`read_values`, so they agree on what is missing and what parses.

Case is ignored by lower-casing (``str.lower`` / Arrow's ``utf8_lower``), the same rule everywhere.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ColumnValues", "format_number", "observed_order", "parse_number_text", "read_values",
           "require_table", "strip_units"]

CURRENCY = "$€£¥"
CASE_LIMIT = 10_000
# After spaces and currency signs are removed: an optional sign, digits (thousands separated by
# commas in groups of three, or plain), an optional decimal part and exponent, an optional percent sign.
NUMBER_TEXT = r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d*)?(?:[eE][+-]?\d+)?%?$"
PLAIN_NUMBER = r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$"
# Text that may be a number: only signs, currency, spaces, digits, separators, dots, exponents and %.
NUMBER_CHARS = f"^[\\s{CURRENCY}+\\-]*[\\d.][\\d\\s{CURRENCY},.%eE+\\-]*$"


def parse_number_text(text: pa.Array, skip: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numbers written as (trimmed) text: ``(value, formatted, percent)`` per entry.

    ``value`` is NaN where the text is not a number once spaces, currency signs (``$ € £ ¥``), thousands
    separators and a trailing percent sign are removed (``"$45,000" -> 45000``, ``"12%" -> 12``;
    ``"1,2"`` and ``"12 years"`` stay NaN); ``formatted`` marks numbers that needed such a removal and
    ``percent`` numbers written with a percent sign. Entries marked in ``skip`` (missing) are NaN.
    Numbers written plainly are cast in one go; only the rest have signs and separators removed.
    """
    text = pa.array(text, type=pa.large_string()) if not isinstance(text, pa.Array) else text
    n = len(text)
    value = np.full(n, np.nan)
    formatted = np.zeros(n, dtype=bool)
    percent = np.zeros(n, dtype=bool)
    keep = np.ones(n, dtype=bool) if skip is None else ~np.asarray(skip, dtype=bool)
    maybe = np.flatnonzero(_flags(pc.match_substring_regex(text, NUMBER_CHARS)) & keep)
    if not maybe.size:
        return value, formatted, percent
    candidates = text.take(pa.array(maybe))
    plain = _flags(pc.match_substring_regex(candidates, PLAIN_NUMBER))
    if plain.any():   # written plainly: cast in one go
        value[maybe[plain]] = _cast(candidates.filter(pa.array(plain)))
    rest = np.flatnonzero(~plain)
    if not rest.size:
        value[~np.isfinite(value)] = np.nan
        return value, formatted, percent
    where = maybe[rest]
    candidates = candidates.take(pa.array(rest))
    squeezed = pc.replace_substring_regex(candidates, f"[\\s{CURRENCY}]", "")
    shaped = _flags(pc.match_substring_regex(squeezed, NUMBER_TEXT))
    bare = pc.replace_substring_regex(squeezed, "[,%]", "")
    numbers = np.full(len(where), np.nan)
    ok = np.flatnonzero(shaped)
    if ok.size:
        numbers[ok] = _cast(bare.take(pa.array(ok)))
    value[where] = numbers
    value[~np.isfinite(value)] = np.nan
    good = ~np.isnan(value[where])
    formatted[where] = good & (_flags(pc.not_equal(pc.binary_length(squeezed), pc.binary_length(candidates)))
                               | _flags(pc.match_substring_regex(squeezed, "[,%]")))
    percent[where] = good & _flags(pc.ends_with(squeezed, "%"))
    return value, formatted, percent


def _cast(text: pa.Array) -> np.ndarray:
    """Float values of text already matched as numbers (pandas reads the few Arrow refuses)."""
    try:
        return np.asarray(pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False), dtype="float64")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(pd.Series(text.to_pylist(), dtype=object), errors="coerce").to_numpy(dtype="float64")


def _flags(array) -> np.ndarray:
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)


def format_number(values: np.ndarray) -> np.ndarray:
    """Numbers as labels: whole numbers without a decimal point (``3`` not ``3.0``), others as Python writes them."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(np.asarray(values, dtype="float64")):
        out[i] = "" if np.isnan(v) else (str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(float(v)))
    return out


@dataclass(frozen=True, eq=False)
class ColumnValues:
    """One column read through the schema's rules, by distinct value.

    ``codes[i]`` is the index of row i's distinct value; ``counts``, ``missing``, ``numbers``,
    ``formatted`` and ``percent`` are per distinct value (a null cell is one more distinct value,
    marked missing). ``trimmed`` is the trimmed text of each distinct value (None for a numeric column).
    """

    codes: np.ndarray
    counts: np.ndarray
    missing: np.ndarray
    numbers: np.ndarray
    formatted: np.ndarray
    percent: np.ndarray
    trimmed: pa.Array | None
    trim_joins: bool = False

    @property
    def numeric_dtype(self) -> bool:
        return self.trimmed is None

    @cached_property
    def text(self) -> np.ndarray:
        """Trimmed text per distinct value as Python strings (numbers written as labels)."""
        if self.trimmed is None:
            return format_number(self.numbers)
        return np.asarray(self.trimmed.to_numpy(zero_copy_only=False), dtype=object)

    @cached_property
    def labels(self) -> tuple[np.ndarray, np.ndarray]:
        """``(label_of_value, rows_per_label)``: the index of each distinct value's trimmed label among the
        distinct non-missing labels (-1 when missing), and the rows of each label. ``"Female "`` and
        ``"Female"`` are one label."""
        present = ~self.missing
        if self.trimmed is None or not self.trim_joins:   # distinct values are distinct labels already
            codes = np.where(present, np.cumsum(present) - 1, -1)
        else:
            keys = pc.if_else(pa.array(present), self.trimmed, pa.scalar(None, self.trimmed.type))
            codes = pc.dictionary_encode(keys).indices
            codes = np.asarray(pc.fill_null(codes, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64)
        per_label = np.bincount(codes[codes >= 0], weights=self.counts[codes >= 0],
                                minlength=int(codes.max(initial=-1)) + 1).astype(np.int64)
        return codes, per_label

    @cached_property
    def label_first(self) -> np.ndarray:
        """For each label of :attr:`labels`, the index of its first distinct value."""
        label_of, per_label = self.labels
        first = np.zeros(len(per_label), dtype=np.int64)
        where = np.flatnonzero(label_of >= 0)
        first[label_of[where][::-1]] = where[::-1]
        return first

    @cached_property
    def label_names(self) -> np.ndarray:
        """The text of each label of :attr:`labels`, in label order (Python strings)."""
        return self.text_of(self.label_first)

    def case_variants(self) -> int | None:
        """How many labels differ from another only in letter case (distinct labels minus distinct
        lower-cased labels); 0 for a numeric column, None (not counted) beyond ``CASE_LIMIT`` labels:
        such a column is an id or free text, where spelling variants say nothing."""
        if self.trimmed is None or not len(self.label_first):
            return 0
        if len(self.label_first) > CASE_LIMIT:
            return None
        names = self.trimmed.take(pa.array(self.label_first))
        return len(names) - pc.count_distinct(pc.utf8_lower(names)).as_py()

    def text_of(self, index: np.ndarray) -> np.ndarray:
        """Trimmed text (numbers written as labels) of the distinct values at ``index``, as Python strings."""
        index = np.asarray(index, dtype=np.int64)
        if self.trimmed is None:
            return format_number(self.numbers[index])
        return np.asarray(self.trimmed.take(pa.array(index)).to_numpy(zero_copy_only=False), dtype=object)

    @property
    def rows(self) -> int:
        return int(self.codes.size)

    @property
    def missing_rows(self) -> int:
        return int(self.counts[self.missing].sum())

    def rows_where(self, mask: np.ndarray) -> int:
        """Rows whose distinct value satisfies ``mask`` (a bool per distinct value)."""
        return int(self.counts[np.asarray(mask, dtype=bool)].sum())


def read_values(series: pd.Series, missing_tokens: tuple[str, ...], units: tuple[str, ...] = ()) -> ColumnValues:
    """Read a column: distinct values, their row counts, which are missing and which are numbers.

    ``units`` are words a number may carry before or after it (``"45 yrs"`` with ``("yrs",)``): a value
    that is no number as written is read again with one of them removed (see :func:`strip_units`)."""
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        numbers = np.asarray(uniques, dtype="float64")
        numbers = np.where(np.isfinite(numbers), numbers, np.nan)
        coded = np.array([t for t in (_plain_float(x) for x in missing_tokens) if t is not None], dtype="float64")
        missing = np.isin(numbers, coded)     # a numeric code such as 999 names a missing value here too
        numbers[missing] = np.nan
        flags = np.zeros(len(numbers), dtype=bool)
        return _with_null(np.asarray(codes, dtype=np.int64), numbers, missing, flags, flags, None)
    if not (isinstance(series.dtype, pd.StringDtype) and series.dtype.storage == "pyarrow"):
        series = series.astype("str")
    arrow = pa.array(series.array)
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    encoded = pc.dictionary_encode(arrow)
    codes = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    trimmed = pc.utf8_trim_whitespace(encoded.dictionary)
    tokens = pa.array(sorted({t.strip().lower() for t in missing_tokens}), type=trimmed.type)
    missing = _flags(pc.is_in(pc.utf8_lower(trimmed), value_set=tokens))
    numbers, formatted, percent = parse_number_text(trimmed, skip=missing)
    if units:
        again = np.flatnonzero(~missing & np.isnan(numbers))
        if again.size:
            stripped = strip_units(trimmed.take(pa.array(again)), units)
            value, _, pct = parse_number_text(stripped)
            read = ~np.isnan(value)
            numbers[again[read]] = value[read]
            formatted[again[read]] = True
            percent[again[read]] = pct[read]
    numbers[missing] = np.nan
    joins = bool(pc.any(pc.not_equal(pc.binary_length(trimmed), pc.binary_length(encoded.dictionary))).as_py())
    return _with_null(codes, numbers, missing, formatted, percent, trimmed, joins)


def strip_units(text: pa.Array, units: tuple[str, ...]) -> pa.Array:
    """``text`` with one of ``units`` removed where it starts or ends the value (ignoring case, with
    any spaces beside it): ``"45 yrs" -> "45"``, ``"USD 52,000" -> "52,000"``. Longer units are tried
    first, so ``years`` is not read as ``year`` plus an ``s``."""
    words = sorted({u.strip() for u in units if u.strip()}, key=len, reverse=True)
    if not words:
        return text
    either = "|".join(re.escape(w) for w in words)
    out = pc.replace_substring_regex(text, f"(?i)^(?:{either})\\s*", "")
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(out, f"(?i)\\s*(?:{either})$", ""))


def _plain_float(text: str) -> float | None:
    """A missing token that is a plainly written number (``"999"``, ``"-1"``), else None."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def _with_null(codes, numbers, missing, formatted, percent, trimmed, joins=False) -> ColumnValues:
    """Null cells (code -1) become one more distinct value, marked missing."""
    k = len(numbers)
    nulls = codes < 0
    if nulls.any():
        codes = np.where(nulls, k, codes)
        numbers = np.append(numbers, np.nan)
        missing = np.append(missing, True)
        formatted = np.append(formatted, False)
        percent = np.append(percent, False)
        if trimmed is not None:
            trimmed = pa.concat_arrays([trimmed, pa.array([""], type=trimmed.type)])
    if trimmed is None:
        missing = missing | np.isnan(numbers)
    counts = np.bincount(codes, minlength=len(numbers)).astype(np.int64)
    return ColumnValues(codes, counts, missing, numbers, formatted, percent, trimmed, joins)


def observed_order(labels) -> list[str]:
    """Labels in a stable order: numerically when they all read as numbers, else alphabetically ignoring case."""
    labels = [str(x) for x in labels]
    as_numbers = pd.to_numeric(pd.Series(labels, dtype=object), errors="coerce")
    if len(labels) and not as_numbers.isna().any():
        return [labels[i] for i in np.argsort(as_numbers.to_numpy(dtype=float), kind="stable")]
    return sorted(labels, key=lambda s: (s.lower(), s))


def require_table(frame, what: str) -> None:
    """ValueError unless ``frame`` is a DataFrame with at least one column and distinct column names."""
    if not isinstance(frame, pd.DataFrame) or frame.shape[1] == 0:
        raise ValueError(f"{what} takes a table (pandas DataFrame) with at least one column; read the file first.")
    names = [str(c) for c in frame.columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"Column(s) {twice[:10]} appear more than once; give every column a distinct name.")
