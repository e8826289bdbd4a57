"""A first draft of the schema, with the obvious cleaning already proposed.

:func:`draft_schema` reads the table once and proposes, for the curator to accept or edit:

- roles from the profile's type guess (:mod:`core.intake.profile`): ``number`` -> number (numbers
  written as text are parsed), ``category`` -> category, ``id`` -> the person id (the first id column
  whose name says id, else the first id column; any other id column and free text -> leave_out);
- label merges: spellings that differ only in letter case, accents, spacing or hyphens are merged into
  the most frequent spelling (``female``, ``FEMALE`` -> ``Female``; ``Post secondary`` ->
  ``Post-secondary``), and the one-letter aliases F/M and
  Y/N are merged into Female/Male and Yes/No only when that full label is present in the column;
- missing values: their own category in a category column, dropped rows in a number column (a
  number has no category to put them in; filling would need a public value only the curator knows),
  dropped rows for a person id; a column without missing values gets no policy;
- the unit of protection: the person-id column (if any) with at most one row per person.

Public information is NOT read from the data: category lists and numeric bounds are left unset, and
:func:`core.intake.check.check` then says, per column, "declare the public categories/bounds or
estimate them privately". :func:`needs_public_info` lists exactly those columns: it is the hook where
private estimation plugs in (a later step will fill them with differentially private estimates
that spend budget and are recorded in the ledger); nothing here estimates anything.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from core.intake.hints import fold_label, missing_code_suggestions, unit_suggestions
from core.intake.profile import ID_NAME, Profile, profile
from core.intake.schema import DEFAULT_MISSING_TOKENS, ColumnSchema, DataSchema
from core.intake.values import ColumnValues, read_values, require_table

__all__ = ["ALIASES", "Suggestions", "column_suggestions", "draft_schema", "label_merges", "needs_public_info"]

# One-letter alias -> the full label (compared ignoring case) it stands for.
ALIASES = {"f": "female", "m": "male", "y": "yes", "n": "no"}


def draft_schema(frame: pd.DataFrame, name: str, missing_tokens: tuple[str, ...] = DEFAULT_MISSING_TOKENS,
                 *, profiled: Profile | None = None) -> DataSchema:
    """A :class:`DataSchema` for ``frame`` with the suggestions of the module docstring taken.

    Pass ``profiled`` (the frame's :func:`~core.intake.profile.profile`, same missing tokens) to skip
    profiling again; only category columns are then read once more, for their label merges.
    """
    require_table(frame, "draft_schema")
    tokens = tuple(missing_tokens)
    if profiled is None:
        profiled = profile(frame, tokens)
    if [c.name for c in profiled.columns] != [str(c) for c in frame.columns] or profiled.missing_tokens != tokens:
        raise ValueError("The profile given is of another table (or other missing tokens); profile this one.")
    ids = [c.name for c in profiled.columns if c.guess == "id"]
    person = next((c for c in ids if ID_NAME.search(c)), ids[0] if ids else None)
    columns = []
    for source, prof in zip(frame.columns, profiled.columns):
        col, has_missing = prof.name, prof.missing > 0
        if col == person:
            columns.append(ColumnSchema(col, "person_id", missing="drop_row" if has_missing else None))
        elif prof.guess == "number":
            columns.append(ColumnSchema(col, "number", missing="drop_row" if has_missing else None))
        elif prof.guess == "category":
            merges = label_merges(read_values(frame[source], tokens))
            columns.append(ColumnSchema(col, "category", missing="own_category" if has_missing else None,
                                        merges=merges))
        else:
            columns.append(ColumnSchema(col, "leave_out"))
    return DataSchema(name, tuple(columns), person_id=person, missing_tokens=tokens)


def label_merges(values: ColumnValues) -> tuple[tuple[str, str], ...]:
    """``(variant, canonical)`` pairs: spelling variants (labels with the same :func:`fold_label` key:
    differing in letter case, accents, spacing or hyphens) into the group's most frequent spelling, and
    the aliases of :data:`ALIASES` into their full label when it is present. Merges match ignoring case,
    so one pair covers every casing of a variant; it is written lower-case unless that is the label."""
    _, rows = values.labels
    if not len(rows):
        return ()
    frame = pd.DataFrame({"label": values.label_names.astype(str), "rows": rows})
    frame["folded"] = frame["label"].map(fold_label)
    frame["lower"] = frame["label"].str.lower()
    frame = frame.sort_values(["folded", "rows", "label"], ascending=[True, False, True], kind="stable")
    canonical = frame.groupby("folded", sort=False)["label"].first()
    pairs = {}
    for folded, group in frame.groupby("folded", sort=True):
        label = str(canonical[folded])
        for lower, spellings in group.groupby("lower", sort=True):
            others = [s for s in spellings["label"] if s != label]
            if others:    # a pair per lower-cased spelling that is not the canonical label itself
                pairs[lower] = (lower if lower != label else others[0], label)
    lowered = frame.groupby("lower", sort=False)["label"].first()
    for alias, full in ALIASES.items():
        if alias in lowered.index and full in lowered.index:
            pairs[alias] = (str(lowered[alias]), str(canonical[fold_label(full)]))
    aliased = {pair[0].lower(): pair[1] for key, pair in pairs.items() if key in ALIASES}
    pairs = {key: (variant, aliased.get(label.lower(), label)) for key, (variant, label) in pairs.items()}
    return tuple(sorted(pairs.values(), key=lambda p: (p[1].lower(), p[0].lower())))


@dataclass(frozen=True)
class Suggestions:
    """What one column's values suggest (CURATOR-ONLY: texts and rows from the private data; taken into
    the schema only when the curator ticks or names them). ``missing_codes`` and ``units`` are
    ``(text, rows)``, most rows first; ``merges`` are ``(variant, canonical)`` pairs."""

    missing_codes: tuple[tuple[str, int], ...] = ()
    units: tuple[tuple[str, int], ...] = ()
    merges: tuple[tuple[str, str], ...] = ()


def column_suggestions(series: pd.Series, role: str, missing: tuple[str, ...]) -> Suggestions:
    """The suggestions for one column (``series``) declared with ``role``, read with the texts ``missing``
    (the schema's tokens and the column's codes: :meth:`~core.intake.schema.ColumnSchema.missing_texts`):
    missing codes not read as missing yet (:func:`~core.intake.hints.missing_code_suggestions`), units
    (number columns; a declared unit stays among them) and label merges (category columns)."""
    if role in ("person_id", "leave_out"):
        return Suggestions()
    values = read_values(series, tuple(missing))
    codes = missing_code_suggestions(values, tuple(missing))
    if role == "number":
        return Suggestions(codes, unit_suggestions(values))
    return Suggestions(codes, merges=label_merges(values))


def needs_public_info(schema: DataSchema) -> tuple[tuple[str, str], ...]:
    """``(column, what)`` for every used column whose public information is not declared yet:
    ``"categories"`` for a category column, ``"bounds"`` for a number column. A private estimator
    (to come) fills exactly these; until then :func:`core.intake.check.check` flags them."""
    out = []
    for col in schema.used_columns():
        if col.role == "category" and col.categories is None:
            out.append((col.name, "categories"))
        elif col.role == "number" and col.bounds is None:
            out.append((col.name, "bounds"))
    return tuple(out)

