"""A first look at a curator's table: per column, what it seems to be and what is wrong with it.

CURATOR-ONLY. A profile holds exact counts and real example values from the private data. It is
for the curator's own screen and never leaves it: it is not exported, not put in a report, a
ledger, a plan or a comparison, and :class:`Profile` deliberately has no ``to_report``. What a
curator decides after reading it goes into the public :class:`~core.intake.schema.DataSchema`.

Type guess, per column (``guess``), from the non-missing cells:

- ``"number"``: at least ``NUMBER_SHARE`` of them read as numbers (after removing thousands
  separators, currency and percent signs, or a unit word the values carry, such as ``yrs`` in
  ``"45 yrs"``: :func:`~core.intake.hints.unit_suggestions`) and they are not codes (below);
- ``"category"``: a column of plainly written whole numbers with at most ``NUMERIC_CATEGORY_MAX``
  distinct values (codes such as 1/2; a currency sign, separator, percent sign or decimal makes it a
  quantity), or a text column with at most ``CATEGORY_MAX`` distinct labels;
- ``"id"``: (almost) every value distinct (at least ``ID_SHARE`` of the non-missing cells, and at
  least ``ID_MIN_ROWS`` of them) and either text that is not a number, or whole numbers written plainly
  (no currency sign, separator or decimals) that look like codes: zero-padded to one width
  (``000123``), a near-contiguous run (spanning at most twice their count), or in a column named like
  an id (``id``, ``person_id``, ``key``, ...). An
  income such as ``"45,000"`` or ``52000`` with its spread is a number, not an id. A text column with
  more than ``CATEGORY_MAX`` labels whose name says id is an id too (people with several rows);
- ``"text"``: everything else (free text, wide label lists).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.intake.hints import unit_suggestions
from core.intake.schema import DEFAULT_MISSING_TOKENS
from core.intake.values import ColumnValues, read_values, require_table

__all__ = ["ColumnProfile", "GUESSES", "Profile", "guess_of", "profile"]

GUESSES = ("category", "number", "id", "text")
NUMBER_SHARE = 0.95
NUMERIC_CATEGORY_MAX = 10
CATEGORY_MAX = 50
ID_SHARE = 0.9
ID_MIN_ROWS = 20
EXAMPLES = 5
ID_NAME = re.compile(r"(^|[^a-z])(id|key|pid|uid|ssn|serial)($|[^a-z])|identifier|person_?no", re.IGNORECASE)


@dataclass(frozen=True)
class ColumnProfile:
    """What one column holds (curator-only: exact counts and real values).

    ``distinct``: distinct non-missing values after trimming spaces; ``case_variants``: how many of them
    differ from another only in letter case (``female`` beside ``Female``; None when not counted, for
    a column of more than 10,000 labels); ``missing``: cells that are blank or a missing token;
    ``numbers_as_text``: non-missing text cells that read as numbers only after removing thousands
    separators, currency or percent signs; ``numbers``: non-missing cells that read as numbers at all;
    ``percent``: cells written with a percent sign; ``examples``: the most frequent non-missing values.
    """

    name: str
    guess: str
    rows: int
    distinct: int
    missing: int
    numbers: int
    numbers_as_text: int
    percent: int
    case_variants: int | None
    examples: tuple[str, ...]

    @property
    def present(self) -> int:
        return self.rows - self.missing


@dataclass(frozen=True)
class Profile:
    """Per-column profiles of a table (curator-only; see the module docstring: never exported)."""

    rows: int
    columns: tuple[ColumnProfile, ...]
    missing_tokens: tuple[str, ...]

    def column(self, name: str) -> ColumnProfile:
        for col in self.columns:
            if col.name == name:
                return col
        raise ValueError(f"The profile has no column {name!r}; it has {[c.name for c in self.columns]}.")

    def as_frame(self) -> pd.DataFrame:
        """One row per column, for the curator's own screen."""
        return pd.DataFrame([{**vars(c), "examples": ", ".join(c.examples)} for c in self.columns])


def profile(frame: pd.DataFrame, missing_tokens: tuple[str, ...] = DEFAULT_MISSING_TOKENS) -> Profile:
    """Profile every column of ``frame`` (curator-only; vectorised over distinct values)."""
    require_table(frame, "profile")
    tokens = tuple(missing_tokens)
    cols = tuple(column_profile(str(name), read_values(frame[name], tokens)) for name in frame.columns)
    return Profile(len(frame), cols, tokens)


def column_profile(name: str, values: ColumnValues) -> ColumnProfile:
    """The profile of one column already read by :func:`~core.intake.values.read_values`."""
    _, per_label = values.labels
    top = _top(per_label, EXAMPLES)
    examples = values.text_of(values.label_first[top])
    is_number = ~values.missing & ~np.isnan(values.numbers)
    return ColumnProfile(
        name=name, guess=guess_of(name, values), rows=values.rows, distinct=int(len(per_label)),
        missing=values.missing_rows, numbers=values.rows_where(is_number),
        numbers_as_text=values.rows_where(is_number & values.formatted),
        percent=values.rows_where(values.percent), case_variants=values.case_variants(),
        examples=tuple(str(e) for e in examples))


def _top(rows: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest counts, largest first (ties in index order), in linear time."""
    if rows.size > k:
        cut = np.partition(rows, rows.size - k)[rows.size - k]
        candidates = np.flatnonzero(rows >= cut)
    else:
        candidates = np.arange(rows.size)
    return candidates[np.argsort(-rows[candidates], kind="stable")][:k]


def guess_of(name: str, values: ColumnValues) -> str:
    """The type guess of the module docstring."""
    present = ~values.missing
    n_present = values.rows_where(present)
    if n_present == 0:
        return "text"
    distinct = len(values.labels[1])
    is_number = present & ~np.isnan(values.numbers)
    number_share = values.rows_where(is_number) / n_present
    nearly_unique = n_present >= ID_MIN_ROWS and distinct >= ID_SHARE * n_present
    named_id = bool(ID_NAME.search(name))
    if number_share >= NUMBER_SHARE:
        nums = values.numbers[is_number]
        if nearly_unique and _code_like(values, is_number, named_id):
            return "id"
        codes = distinct <= NUMERIC_CATEGORY_MAX and not values.formatted[is_number].any() \
            and bool(np.all(np.mod(nums, 1) == 0))
        return "category" if codes else "number"
    if nearly_unique:
        return "id"
    if number_share + sum(n for _, n in unit_suggestions(values)) / n_present >= NUMBER_SHARE:
        return "number"      # numbers written with a unit ("45 yrs") are numbers too
    if distinct <= CATEGORY_MAX:
        return "category"
    return "id" if named_id else "text"


def _code_like(values: ColumnValues, is_number: np.ndarray, named_id: bool) -> bool:
    """Whole numbers written plainly that look like codes rather than quantities."""
    nums = values.numbers[is_number]
    if values.formatted[is_number].any() or not np.all(np.mod(nums, 1) == 0):
        return False
    if values.trimmed is not None:
        written = values.trimmed.filter(pa.array(is_number))
        padded = pc.any(pc.match_substring_regex(written, r"^[+-]?0\d")).as_py()
        if padded and pc.count_distinct(pc.binary_length(written)).as_py() == 1:
            return True
    span = float(nums.max() - nums.min()) + 1
    return named_id or span <= 2 * len(np.unique(nums))
