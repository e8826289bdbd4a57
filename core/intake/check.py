"""Check a table against its schema (every problem at once) and apply the declared cleaning.

CURATOR-ONLY. Problems and the cleaning report hold exact counts of the private data (how many
values fall outside the public categories, how many rows were dropped). They are for the curator's
own screen and command line: never exported, put in a report, a plan or a ledger. Values
themselves are not quoted, only counted (the profile shows examples).

:func:`check` lists every problem of every column in one pass, each with its column, severity
(``"blocks a run"`` or ``"warning"``), what is wrong and what to do. :func:`apply` refuses a table
with a blocking problem (the message lists them all) and otherwise returns the cleaned table:

1. every declared column is read by the schema's rules (:mod:`core.intake.schema`): trimmed,
   missing tokens, merges, numbers written as text parsed;
2. category values that are not public categories are treated as missing; numbers are clipped to
   the public bounds, then binned when bins are declared (labels in the column's units);
3. missing values follow each column's policy: their own category ``MISSING_LABEL``, the public fill
   value, or the row is dropped;
4. contribution bounding: each person keeps at most ``max_rows_per_person`` rows, those with the
   smallest keys, where a row's key is a keyed hash of its person id and its cleaned content under the
   seed (the seed given, else the schema's ``bounding_seed``; :mod:`core.intake.bounding`). The kept
   rows depend on the person's own rows and the seed only, never on other people or the row order, so
   one person added or removed moves no other person's rows and no count by more than the limit;
5. left-out and undeclared columns are dropped; categories become ``pandas.Categorical`` over the
   public categories (or, until they are declared, the labels found, in a stable order).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.intake.bounding import keep_per_person, row_keys
from core.intake.schema import BLOCKS, MISSING_LABEL, WARNING, ColumnSchema, DataSchema
from core.intake.values import ColumnValues, observed_order, read_values, require_table

__all__ = ["Cleaned", "CleaningReport", "Problem", "apply", "check", "clean"]

MAX_PAGE_CATEGORIES = 40    # the widest category column the synthesis and audit pages take as is


@dataclass(frozen=True)
class Problem:
    """One problem of one column (curator-only): ``severity`` is ``"blocks a run"`` or ``"warning"``."""

    column: str
    severity: str
    what: str
    todo: str

    @property
    def blocks(self) -> bool:
        return self.severity == BLOCKS

    def line(self) -> str:
        return f"{self.column}: [{self.severity}] {self.what} {self.todo}"


@dataclass(frozen=True)
class CleaningReport:
    """Counts of what the cleaning did (curator-only; never exported). Per-column counts are
    ``(column, rows)`` pairs for columns where the count is not zero; a row missing in two
    drop_row columns is counted under both."""

    rows_in: int
    rows_out: int
    dropped_missing: tuple[tuple[str, int], ...] = ()
    dropped_over_limit: int = 0
    merged: tuple[tuple[str, int], ...] = ()
    parsed_text: tuple[tuple[str, int], ...] = ()
    clipped: tuple[tuple[str, int], ...] = ()
    filled: tuple[tuple[str, int], ...] = ()
    own_category: tuple[tuple[str, int], ...] = ()
    outside_categories: tuple[tuple[str, int], ...] = ()
    left_out: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = [f"{self.rows_in:,} rows in, {self.rows_out:,} rows out."]
        for label, pairs in (("rows dropped for a missing value", self.dropped_missing),
                             ("labels merged", self.merged), ("numbers read from text", self.parsed_text),
                             ("numbers clipped to the public bounds", self.clipped),
                             ("missing values filled", self.filled),
                             ("missing values kept as their own category", self.own_category),
                             ("values outside the public categories (treated as missing)", self.outside_categories)):
            out += [f"{col}: {n:,} {label}" for col, n in pairs]
        if self.dropped_over_limit:
            out.append(f"{self.dropped_over_limit:,} rows dropped to keep each person within the row limit")
        if self.left_out:
            out.append(f"left out: {', '.join(self.left_out)}")
        return out


@dataclass(frozen=True)
class Cleaned:
    """The cleaned table and its (curator-only) report."""

    frame: pd.DataFrame = field(repr=False)
    report: CleaningReport


# ---------------------------------------------------------------------------------- reading
@dataclass(frozen=True, eq=False)
class _Read:
    """One declared column read through its declaration, per distinct value."""

    col: ColumnSchema
    values: ColumnValues
    label: np.ndarray | None = None        # category: label per distinct value (None = missing)
    number: np.ndarray | None = None       # number: value per distinct value (NaN = missing or unreadable)
    unreadable: np.ndarray | None = None   # number: present but not a number
    outside: np.ndarray | None = None      # category: present but not a public category
    merged: np.ndarray | None = None       # category: changed by a merge

    @property
    def missing(self) -> np.ndarray:
        if self.outside is not None:
            return self.values.missing | self.outside
        return self.values.missing


def _read(frame: pd.DataFrame, col: ColumnSchema, tokens: tuple[str, ...]) -> _Read:
    values = read_values(frame[col.name], tokens)
    if col.role == "number":
        numbers = values.numbers.copy()
        if not col.parse_numbers:
            numbers[values.formatted] = np.nan
        unreadable = ~values.missing & np.isnan(numbers)
        return _Read(col, values, number=numbers, unreadable=unreadable)
    if col.role == "person_id":
        return _Read(col, values)
    text = values.text
    target = {v.lower(): c for v, c in col.merges}
    merged_text = np.array([target.get(t.lower(), t) for t in text], dtype=object) if target else text
    merged = (merged_text != text) & ~values.missing
    outside = np.zeros(len(text), dtype=bool)
    if col.categories is not None:
        outside = ~values.missing & ~pd.Series(merged_text, dtype=object).isin(col.categories).to_numpy()
    label = np.where(values.missing | outside, None, merged_text)
    return _Read(col, values, label=label, outside=outside, merged=merged)


# ---------------------------------------------------------------------------------- check
def check(frame: pd.DataFrame, schema: DataSchema) -> tuple[Problem, ...]:
    """Every problem of ``frame`` under ``schema``, in the schema's column order, then the file's
    undeclared columns (curator-only counts; see the module docstring)."""
    require_table(frame, "check")
    if not isinstance(schema, DataSchema):
        raise ValueError("check takes a DataSchema; draft one with core.intake.draft_schema.")
    problems: list[Problem] = []
    for col in schema.used_columns():
        if col.name not in frame.columns:
            problems.append(Problem(col.name, BLOCKS, "is declared but not in the file.",
                                    f"Rename it in the schema to one of the file's columns "
                                    f"({', '.join(map(str, list(frame.columns)[:8]))}...), or remove it."))
            continue
        problems += _column_problems(_read(frame, col, schema.missing_tokens), schema)
    declared = {c.name for c in schema.columns}
    for name in frame.columns:
        if str(name) not in declared:
            problems.append(Problem(str(name), WARNING, "is in the file but not declared; it will be left out.",
                                    "Declare it in the schema (or mark it leave_out to silence this)."))
    return tuple(problems)


def _column_problems(read: _Read, schema: DataSchema) -> list[Problem]:
    col, values = read.col, read.values
    out = []
    name = col.name
    missing = values.missing_rows
    if missing and col.missing is None:
        out.append(Problem(name, BLOCKS, f"has {missing:,} missing values (blank or a missing token) and no "
                                         "missing policy.",
                           "Choose one: drop_row" + ("" if col.role == "person_id" else
                                                     ", fill with a public value" +
                                                     (", own_category" if col.role == "category" or col.bins else ""))
                           + "."))
    elif missing and col.missing == "drop_row":
        out.append(Problem(name, WARNING, f"has {missing:,} missing values; those rows will be dropped.",
                           "Keep it, or choose own_category or a public fill value to keep the rows."))
    if col.role == "category":
        out += _category_problems(read)
    elif col.role == "number":
        out += _number_problems(read)
    elif col.role == "person_id":
        out += _person_problems(read, schema.max_rows_per_person)
    return out


def _category_problems(read: _Read) -> list[Problem]:
    col, values = read.col, read.values
    out = []
    labels = {x for x in read.label if x is not None}
    if col.categories is None:
        out.append(Problem(col.name, WARNING,
                           f"has no public category list; the {len(labels):,} labels found would be used, and that "
                           "list itself comes from the private data.",
                           "Declare the public categories, or estimate them privately."))
        if len(labels) > MAX_PAGE_CATEGORIES:
            out.append(Problem(col.name, WARNING, f"has {len(labels):,} distinct labels; the synthesis and audit "
                                                  f"pages take at most {MAX_PAGE_CATEGORIES}.",
                               "Merge labels into fewer categories, or leave the column out."))
    outside = values.rows_where(read.outside)
    if outside:
        policy = col.missing
        sev = BLOCKS if policy is None else WARNING
        fate = "and there is no missing policy" if policy is None else f"they will be treated as missing ({policy})"
        out.append(Problem(col.name, sev, f"has {outside:,} values ({int(read.outside.sum()):,} distinct labels) that "
                                          f"are not public categories; {fate}.",
                           "Add them to the categories, merge them into one, or choose a missing policy."))
    folded = pd.Series(sorted(labels), dtype="str").str.lower()
    near = int((folded.value_counts() > 1).sum())
    if near:
        out.append(Problem(col.name, WARNING, f"has {near:,} labels that differ from another only in letter case; "
                                              "they would be separate categories.",
                           "Merge each variant into one label (merges)."))
    return out


def _number_problems(read: _Read) -> list[Problem]:
    col, values = read.col, read.values
    out = []
    bad = values.rows_where(read.unreadable)
    if bad:
        formatted = values.rows_where(read.unreadable & values.formatted)
        hint = (f" {formatted:,} of them are numbers with separators, currency or percent signs: turn "
                "parse_numbers on." if formatted else "")
        out.append(Problem(col.name, BLOCKS, f"has {bad:,} values that cannot be read as numbers.{hint}",
                           "Correct them in the file, add their text to missing_tokens, or make the column a "
                           "category."))
    readable = ~values.missing & ~np.isnan(read.number)
    percent = values.rows_where(values.percent & readable)
    if percent and percent < values.rows_where(readable):
        out.append(Problem(col.name, WARNING, f"has {percent:,} values written with a percent sign among plain "
                                              "numbers; they are read as plain numbers (12% -> 12).",
                           "Check they are in the column's units; correct them in the file if not."))
    if col.bounds is None:
        out.append(Problem(col.name, WARNING, "has no public bounds; its values are not clipped, and pages that "
                                              "need a range leave it out.",
                           "Declare public bounds or estimate them privately."))
    else:
        low, high = col.bounds
        outside = values.rows_where(readable & ((read.number < low) | (read.number > high)))
        if outside:
            out.append(Problem(col.name, WARNING, f"has {outside:,} values outside the public bounds "
                                                  f"[{low:g}, {high:g}]; they will be clipped.",
                               "Keep the bounds (clipping is part of the protection), or widen them if the "
                               "public range is wider."))
    return out


def _person_problems(read: _Read, limit: int) -> list[Problem]:
    _, per_person = read.values.labels
    over = per_person > limit
    if not over.any():
        return []
    extra = int((per_person[over] - limit).sum())
    return [Problem(read.col.name, WARNING,
                    f"has {int(over.sum()):,} people with more than {limit} row{'s' if limit > 1 else ''} "
                    f"({extra:,} rows over the limit); contribution bounding keeps {limit} per person, chosen "
                    "by a seeded hash of each row (the same rows whatever else the file holds).",
                    "Keep it, or raise max_rows_per_person if every row of a person must count (the privacy "
                    "guarantee then covers that many rows).")]


# ---------------------------------------------------------------------------------- apply
def apply(frame: pd.DataFrame, schema: DataSchema, rng_seed: int | None = None) -> pd.DataFrame:
    """The cleaned table (see the module docstring); ValueError listing every blocking problem.
    Contribution bounding is keyed by ``rng_seed`` (a whole number), by default the schema's ``bounding_seed``."""
    return clean(frame, schema, rng_seed).frame


def clean(frame: pd.DataFrame, schema: DataSchema, rng_seed: int | None = None) -> Cleaned:
    """:func:`apply` plus its :class:`CleaningReport` (curator-only counts)."""
    blocking = [p for p in check(frame, schema) if p.blocks]
    if blocking:
        raise ValueError("The table cannot be cleaned yet:\n" + "\n".join(p.line() for p in blocking))
    n = len(frame)
    drop = np.zeros(n, dtype=bool)
    columns: dict[str, pd.Series | pd.Categorical | np.ndarray] = {}
    counts: dict[str, list[tuple[str, int]]] = {k: [] for k in
                                                ("dropped_missing", "merged", "parsed_text", "clipped", "filled",
                                                 "own_category", "outside_categories")}
    person_codes = person_col = None

    def note(kind: str, column: str, rows: int) -> None:
        if rows:
            counts[kind].append((column, int(rows)))

    for col in schema.used_columns():
        read = _read(frame, col, schema.missing_tokens)
        values = read.values
        missing_rows = values.rows_where(read.missing) if col.role != "number" else values.missing_rows
        if col.missing == "drop_row":
            drop |= read.missing[values.codes]
            note("dropped_missing", col.name, missing_rows)
        elif col.missing == "fill":
            note("filled", col.name, missing_rows)
        elif col.missing == "own_category":
            note("own_category", col.name, missing_rows)
        if col.role == "person_id":
            person_codes, person_col = values.labels[0][values.codes], col.name
            columns[col.name] = values.label_names[np.maximum(person_codes, 0)]
        elif col.role == "category":
            note("merged", col.name, values.rows_where(read.merged))
            note("outside_categories", col.name, values.rows_where(read.outside))
            columns[col.name] = _category_column(read)
        else:
            note("parsed_text", col.name, values.rows_where(values.formatted & ~np.isnan(read.number)))
            columns[col.name], clipped = _number_column(read)
            note("clipped", col.name, clipped)
    keep = ~drop
    over = 0
    if person_codes is not None:
        seed = schema.bounding_seed if rng_seed is None else rng_seed
        keys = row_keys(columns[person_col], [v for c, v in columns.items() if c != person_col], seed)
        bounded = keep_per_person(person_codes, keep, keys, schema.max_rows_per_person)
        over = int(keep.sum() - bounded.sum())
        keep = bounded
    index = np.flatnonzero(keep)
    out = pd.DataFrame({name: _whole(values[index]) for name, values in columns.items()})
    left_out = tuple(c.name for c in schema.columns if c.role == "leave_out" and c.name in frame.columns) + \
        tuple(str(c) for c in frame.columns if str(c) not in {d.name for d in schema.columns})
    report = CleaningReport(rows_in=n, rows_out=len(out), dropped_over_limit=over, left_out=left_out,
                            **{k: tuple(v) for k, v in counts.items()})
    return Cleaned(out, report)


def _whole(values):
    """Float numbers that are all whole (and exact in float64) as int64, so ages print as 34, not 34.0."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.size \
            and np.all(np.isfinite(values)) and np.all(np.mod(values, 1) == 0) and np.all(np.abs(values) <= 2**53):
        return values.astype(np.int64)
    return values


def _category_column(read: _Read) -> pd.Categorical:
    col = read.col
    label = read.label.copy()
    missing = read.missing
    if col.missing == "fill":
        label[missing] = col.fill
    elif col.missing == "own_category":
        label[missing] = MISSING_LABEL
    categories = list(col.categories) if col.categories is not None else \
        observed_order({x for x in label if x is not None and x != MISSING_LABEL})
    if col.missing == "fill" and col.fill not in categories:
        categories.append(col.fill)
    if col.missing == "own_category":
        categories.append(MISSING_LABEL)
    lookup = {c: i for i, c in enumerate(categories)}
    code_of_value = np.array([lookup.get(x, -1) if x is not None else -1 for x in label], dtype=np.int64)
    return pd.Categorical.from_codes(code_of_value[read.values.codes], categories=categories)


def _number_column(read: _Read) -> tuple[np.ndarray | pd.Categorical, int]:
    """Numbers per row (filled, clipped) or their bins, and how many rows were clipped."""
    col, values = read.col, read.values
    number = read.number.copy()
    if col.missing == "fill":
        number[values.missing] = col.fill
    clipped = 0
    if col.bounds is not None:
        low, high = col.bounds
        clipped = values.rows_where(~np.isnan(number) & ((number < low) | (number > high)))
        number = np.clip(number, low, high)
    edges = col.bin_edges()
    if edges is not None:
        labels = list(col.bin_labels())
        codes = np.clip(np.searchsorted(np.asarray(edges), number, side="right") - 1, 0, len(labels) - 1)
        codes = np.where(np.isnan(number), -1, codes)
        if col.missing == "own_category":
            labels.append(MISSING_LABEL)
            codes = np.where(np.isnan(number), len(labels) - 1, codes)
        return pd.Categorical.from_codes(codes[values.codes], categories=labels), clipped
    return number[values.codes], clipped

