"""A data set too large to upload: a folder of Parquet parts on the machine that runs the tools.

A curator's large file never travels through a browser. It is named by its folder path and read
where it lives, part by part:

- :func:`list_folder` lists the parts (``*.parquet`` in name order). Anything else in the folder (a
  CSV left beside the parts, a ``.pq`` file, a subfolder) is refused with a ValueError naming it, since
  the counts would otherwise leave those rows out without a word; names starting with ``.`` or ``_``
  (``_SUCCESS``, ``_metadata``, ``.crc`` files written by Spark and Dask) are markers, not rows.
- :func:`sample_rows` reads a bounded sample, the first ``SAMPLE_ROWS`` rows in part order, with
  pyarrow (one batch at a time). Profiling and the schema draft see only that sample.
- :func:`check_folder` checks every part against the declared schema in one pass (the parts are
  handed out through :func:`core.parallel.map_trials`, so a Dask cluster reads them where they are
  when one is configured): per column, missing values, values outside the declared categories,
  unreadable numbers and parts that lack the column. Given the installation's secret, the same pass
  fingerprints every row (:mod:`core.intake.identity`) and keeps the folder's population sketches, so a
  folder is known by its rows, not its path: the same parts through a symlinked folder, under a new name
  or copied to another place are the same population. Exact counts never leave this module: a
  problem quotes its count as a size band (:func:`core.report.size_band`), like every other count
  of private rows the tools show. Progress counts parts ("part 7 of 20 checked"), and a folder whose
  listing changed while it was read is refused rather than reported on.
- :func:`folder_labels` is the public domain a synthesizer fits on: each column's declared
  categories (or its public bins), plus the fill label and ``MISSING_LABEL`` when its missing policy
  adds them. Nothing is read from the data.
- :func:`folder_work` sizes the work before it starts (parts, rows from the Parquet footers, declared
  columns): the check's time estimate (:class:`FolderCheckPlan`, registered with
  :data:`core.estimates.ESTIMATORS`) is one pass at a measured cost per cell, shared by the workers.
- :func:`part_codes` cleans one part by the schema (:func:`core.intake.check.apply`) and encodes it
  with :func:`folder_labels`; a count source built on it reads each part through the declaration.

A folder set is protected one row at a time: a person-id column would need every part at once to
bound a person's rows, so it is refused (leave it out).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from core.contracts import digest_of
from core.estimates import ESTIMATORS, Work, workers
from core.intake.check import Problem, apply
from core.intake.identity import column_terms, merge_sketches, sketches_for, sketches_from_terms
from core.intake.names import checked_names
from core.intake.schema import BLOCKS, DEFAULT_MISSING_TOKENS, MISSING_LABEL, WARNING, ColumnSchema, DataSchema
from core.intake.values import read_values
from core.parallel import map_trials
from core.report import size_band

__all__ = ["FOLDER_COSTS", "FOLDER_SUFFIX", "SAMPLE_ROWS", "FolderCheck", "FolderCheckPlan", "FolderListing",
           "FolderWork", "check_folder", "check_plan", "folder_costs", "folder_labels", "folder_rows", "folder_work",
           "list_folder", "part_codes", "part_progress", "parts_seconds", "rough", "sample_rows"]

FOLDER_SUFFIX = ".parquet"
SAMPLE_ROWS = 20_000
MAX_NAMED = 5      # file names quoted in one message


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:MAX_NAMED])
    return shown + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")


@dataclass(frozen=True)
class FolderListing:
    """The parts of a folder: ``parts`` are full paths in name order; ``fingerprint`` is the SHA-256 of
    every part's name, size and modification time (a part rewritten changes it; the data are not read)."""

    folder: str
    parts: tuple[str, ...]
    fingerprint: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(Path(p).name for p in self.parts)

    @property
    def n_parts(self) -> int:
        return len(self.parts)


def list_folder(folder) -> FolderListing:
    """The Parquet parts of ``folder`` (see the module docstring); ValueError saying what to change when
    the path is not a folder, holds no part, or holds files that are not parts."""
    text = str(folder or "").strip()
    if not text:
        raise ValueError("Give the path of the folder that holds the Parquet parts (on the machine running "
                         "the dashboard).")
    path = Path(text).expanduser()
    if not path.is_dir():
        raise ValueError(f"{text} is not a folder on this machine; give the folder that holds the Parquet parts.")
    parts, others, folders = [], [], []
    for entry in sorted(path.iterdir(), key=lambda p: p.name):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir():
            folders.append(entry.name + "/")
        elif entry.suffix.lower() == FOLDER_SUFFIX and entry.is_file():
            parts.append(entry)
        else:
            others.append(entry.name)
    if others or folders:
        raise ValueError(f"The folder {text} holds {_names(others + folders)}, which "
                         f"{'is' if len(others + folders) == 1 else 'are'} not a Parquet part (*.parquet); its "
                         "rows would be left out. Move it out of the folder, or write it as a .parquet part.")
    if not parts:
        raise ValueError(f"The folder {text} holds no .parquet files; write the table as Parquet parts "
                         "(e.g. dask.dataframe.to_parquet or pyarrow.dataset.write_dataset).")
    sha = hashlib.sha256()
    for p in parts:
        stat = p.stat()
        sha.update(f"{p.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8"))
    return FolderListing(str(path.resolve()), tuple(str(p.resolve()) for p in parts), sha.hexdigest())


def _open(path: str):
    import pyarrow.parquet as pq
    try:
        return pq.ParquetFile(path)
    except Exception as exc:   # pyarrow raises its own types for a damaged file
        raise ValueError(f"Part {Path(path).name} is not a readable Parquet file ({str(exc)[:160]}); replace "
                         "or remove it.") from None


def sample_rows(listing: FolderListing, n_rows: int = SAMPLE_ROWS) -> pd.DataFrame:
    """The first ``n_rows`` rows in part order (columns of the first part), read batch by batch with
    pyarrow: the bounded sample the profile and the schema draft see."""
    n_rows = int(n_rows)
    if n_rows < 1:
        raise ValueError("Sample at least one row.")
    columns = list(_open(listing.parts[0]).schema_arrow.names)
    batches, have = [], 0
    for path in listing.parts:
        handle = _open(path)
        present = [c for c in columns if c in handle.schema_arrow.names]
        for batch in handle.iter_batches(batch_size=min(n_rows, 65_536), columns=present):
            batches.append(batch.to_pandas())
            have += batch.num_rows
            if have >= n_rows:
                break
        if have >= n_rows:
            break
    frame = pd.concat(batches, ignore_index=True).head(n_rows) if batches else pd.DataFrame(columns=columns)
    frame.columns = checked_names([str(c) for c in frame.columns], fix=False, name_blanks=False)[0]
    return frame


# ------------------------------------------------------------------------------------------- the public domain

def _column_labels(col: ColumnSchema) -> list[str] | None:
    """The labels of ``col`` after cleaning, from its declaration alone; None when it has none yet."""
    if col.role == "category":
        if col.categories is None:
            return None
        labels = list(col.categories)
    elif col.role == "number":
        if col.bin_edges() is None:
            return None
        labels = list(col.bin_labels())
    else:
        return None
    if col.missing == "fill" and col.fill not in labels:
        labels.append(col.fill)
    if col.missing == "own_category":
        labels.append(MISSING_LABEL)
    return labels


def folder_labels(schema: DataSchema) -> dict[str, list[str]]:
    """Each used column's public labels in code order (module docstring); ValueError naming every column
    that has none yet, or a person id (a folder set is protected one row at a time)."""
    out, wrong = {}, []
    for col in schema.used_columns():
        if col.role == "person_id":
            wrong.append(f"{col.name!r} is a person id: a folder of parts is protected one row at a time; "
                         "leave it out")
            continue
        labels = _column_labels(col)
        if labels is None:
            wrong.append(f"{col.name!r} needs its public categories" if col.role == "category" else
                         f"{col.name!r} needs public bounds and bins")
            continue
        out[col.name] = labels
    if wrong:
        raise ValueError("The declaration cannot be synthesised from the parts yet: " + "; ".join(wrong) + ".")
    if not out:
        raise ValueError("Declare at least one category column (or a binned number) to synthesise.")
    return out


def part_codes(path: str, schema: DataSchema, labels: Mapping[str, Sequence[str]]) -> np.ndarray:
    """One part cleaned by ``schema`` (:func:`core.intake.check.apply`, which refuses a part with a
    blocking problem) as an (n, d) int64 array of codes into ``labels``."""
    columns = list(labels)
    handle = _open(path)
    lacking = [c for c in columns if c not in handle.schema_arrow.names]
    if lacking:
        raise ValueError(f"Part {Path(path).name} lacks the column(s) {lacking}; add them or move the part out.")
    frame = handle.read(columns=columns).to_pandas()
    cleaned = apply(frame, schema.replace(columns=tuple(schema.column(c) for c in columns), person_id=None,
                                          max_rows_per_person=1))
    out = np.empty((len(cleaned), len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        codes = pd.Categorical(cleaned[col], categories=list(labels[col])).codes.astype(np.int64)
        if codes.size and codes.min() < 0:
            raise ValueError(f"Column {col!r} of part {Path(path).name} holds a value outside its declared labels "
                             "after cleaning; declare it, merge it, or choose a missing policy.")
        out[:, j] = codes
    return out


# ------------------------------------------------------------------------------------------- work and progress

def folder_rows(listing: FolderListing) -> int:
    """Rows in every part, from the Parquet footers alone (no data page is read): what a check or a
    count pass will read, for the curator's own estimate of the work (never shown elsewhere)."""
    return int(sum(_open(p).metadata.num_rows for p in listing.parts))


FOLDER_COSTS = {"fixed": 1.0, "check": 0.0055, "count": 0.011, "write": 0.013}
"""CPU seconds per 100,000 cells (rows x columns) read and checked, read, cleaned and counted in one pass,
and drawn and written as synthetic parts, plus a fixed start; measured on this 2-core machine (load 5,
2,000,000 rows x 5 category columns in 10 parts, one worker). ``core/estimate_costs.json`` may override
them under "folder"."""


def rough(n: float) -> str:
    """A count in words at two significant figures: 19,874,301 -> "about 20,000,000"."""
    n = float(n)
    if n < 100:
        return f"{int(round(n)):,}"
    digits = int(np.floor(np.log10(n))) - 1
    return f"about {int(round(n, -digits)):,}"


@dataclass(frozen=True)
class FolderWork:
    """The size of the work on a folder set: its parts, its rows (from the footers), the declared columns
    read and their public category counts (empty when not all are declared yet). Curator-only."""

    n_parts: int
    rows: int
    columns: int
    dims: tuple[int, ...] = ()

    @property
    def cells(self) -> float:
        return float(self.rows) * max(int(self.columns), 1)

    def words(self) -> str:
        """'20 parts x about 20,000,000 rows x 5 columns'."""
        return (f"{self.n_parts:,} part{'s' if self.n_parts != 1 else ''} x {rough(self.rows)} rows x "
                f"{self.columns} column{'s' if self.columns != 1 else ''}")


def folder_work(listing: FolderListing, schema: DataSchema, rows: int | None = None) -> FolderWork:
    """:class:`FolderWork` of ``listing`` read through ``schema`` (``rows`` when already known)."""
    try:
        dims = tuple(len(v) for v in folder_labels(schema).values())
    except ValueError:
        dims = ()
    return FolderWork(listing.n_parts, folder_rows(listing) if rows is None else int(rows),
                      len(schema.used_columns()), dims)


def folder_costs(costs: Mapping) -> dict:
    return {**FOLDER_COSTS, **dict(costs.get("folder", {}) or {})}


def parts_seconds(work: FolderWork, per_cell: float, costs: Mapping, items: int | None = None) -> float:
    """Wall seconds of one pass over ``work``'s cells at ``per_cell`` CPU seconds per 100,000, its
    ``items`` (the parts) shared by the local workers at the fitted parallel efficiency (never slower
    than one worker)."""
    cpu = per_cell * work.cells / 1e5
    lanes = min(workers(), max(int(items if items is not None else work.n_parts), 1))
    efficiency = float(costs.get("synthesis", {}).get("parallel_efficiency", 0.8))
    return cpu / max(1.0, lanes * efficiency)


@dataclass(frozen=True)
class FolderCheckPlan:
    """The check of a folder set, as far as its key and its estimate go: the folder, its listing's
    fingerprint, the declaration's digest and the size of the work."""

    folder: str
    fingerprint: str
    schema_digest: str
    work: FolderWork

    def digest(self) -> str:
        return digest_of({"folder": self.folder, "fingerprint": self.fingerprint, "schema": self.schema_digest})


def check_plan(listing: FolderListing, schema: DataSchema, rows: int | None = None) -> FolderCheckPlan:
    return FolderCheckPlan(listing.folder, listing.fingerprint, schema.digest(), folder_work(listing, schema, rows))


def _estimate_check(plan: FolderCheckPlan, data, costs):
    """One pass reading and checking every cell of the declared columns."""
    c = folder_costs(costs)
    seconds = float(c["fixed"]) + parts_seconds(plan.work, float(c["check"]), costs)
    return Work(f"read and check {plan.work.words()} once", plan.work.n_parts, seconds)


if "FolderCheckPlan" not in set(ESTIMATORS):      # a module imported again registers once
    ESTIMATORS.register("FolderCheckPlan", "check of a folder set")(_estimate_check)


def part_progress(progress, what: str, before: str = ""):
    """``progress`` reporting parts as they finish: "part 7 of 20 checked", after ``before`` when given
    ("count pass 1: part 7 of 20 counted") (None stays None). The fan-out calls it where the parts are
    handed out (the job's process), once per finished part."""
    if progress is None:
        return None

    def report(done: int, total: int, message: str = "") -> None:
        progress(done, total, f"{before}part {done} of {total} {what}")
    return report


# ------------------------------------------------------------------------------------------- checking

COUNTS = ("missing", "outside", "unreadable", "clipped", "lacking")


def _column_counts(series: pd.Series, col: ColumnSchema, tokens: tuple[str, ...]) -> dict[str, int]:
    """Rows of one part's column that are missing, outside the public categories, unreadable as numbers
    or outside the public bounds (exact; they stay inside this module)."""
    values = read_values(series, col.missing_texts(tokens), col.units or ())
    out = dict.fromkeys(COUNTS, 0)
    out["missing"] = values.missing_rows
    if col.role == "category" and col.categories is not None:
        target = {v.lower(): c for v, c in col.merges}
        text = [target.get(str(t).lower(), t) for t in values.text]
        outside = ~values.missing & ~pd.Series(text, dtype=object).isin(col.categories).to_numpy()
        out["outside"] = values.rows_where(outside)
    elif col.role == "number":
        numbers = values.numbers.copy()
        if not col.parse_numbers:
            numbers[values.formatted] = np.nan
        out["unreadable"] = values.rows_where(~values.missing & np.isnan(numbers))
        if col.bounds is not None:
            low, high = col.bounds
            out["clipped"] = values.rows_where(~np.isnan(numbers) & ((numbers < low) | (numbers > high)))
    return out


def _part_sketches(frame: pd.DataFrame, secret: bytes, column_sets) -> list:
    """One part's population sketches: its own column sets and each of ``column_sets`` it covers."""
    terms = column_terms(frame, tuple(DEFAULT_MISSING_TOKENS), secret)
    return sketches_from_terms(terms, secret) + sketches_for(terms, column_sets, secret)


def _check_part(path: str, schema: DataSchema, secret: bytes | None = None, column_sets=()) -> dict:
    """Counts per used column of one part (and, with ``secret``, its population sketches), or the reason it
    cannot be read (runs where the part is read)."""
    try:
        handle = _open(path)
    except ValueError as exc:
        return {"unreadable": str(exc)}
    names = set(handle.schema_arrow.names)
    wanted = [c for c in schema.used_columns() if c.name in names]
    read = sorted(names) if secret is not None else [c.name for c in wanted]
    frame = handle.read(columns=read).to_pandas() if read else pd.DataFrame()
    counts = {c.name: _column_counts(frame[c.name], c, schema.missing_tokens) for c in wanted}
    for col in schema.used_columns():
        if col.name not in names:
            counts[col.name] = {**dict.fromkeys(COUNTS, 0), "lacking": 1}
    out = {"counts": counts, "columns": sorted(names)}
    if secret is not None:
        out["sketches"] = _part_sketches(frame, secret, column_sets)
    return out


@dataclass(frozen=True)
class FolderCheck:
    """Every problem of a folder under its schema (counts as size bands only), and which parts have which."""

    problems: tuple[Problem, ...]
    n_parts: int
    sketches: tuple = ()      # the folder's population sketches (core.intake.identity), when fingerprinted

    @property
    def blocking(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.blocks)

    def table(self) -> pd.DataFrame:
        rows = [{"column": p.column, "severity": p.severity, "what": p.what, "what to do": p.todo}
                for p in self.problems]
        return pd.DataFrame(rows, columns=["column", "severity", "what", "what to do"])

    def raise_if_blocked(self) -> None:
        """ValueError listing every blocking problem (nothing is counted while one remains)."""
        if self.blocking:
            raise ValueError("The folder cannot be used yet:\n" + "\n".join(p.line() for p in self.blocking))


def _problems(col: ColumnSchema, total: dict[str, int], lacking: list[str]) -> list[Problem]:
    name, out = col.name, []
    if lacking:
        out.append(Problem(name, BLOCKS, f"is missing from {len(lacking)} part(s): {_names(lacking)}.",
                           "Add the column to those parts, move them out of the folder, or leave the column out."))
    if col.role == "person_id":
        out.append(Problem(name, BLOCKS, "is a person id; a folder of parts is protected one row at a time.",
                           "Leave it out (each row is then one person)."))
        return out
    if total["missing"]:
        band = size_band(total["missing"])
        if col.missing is None:
            out.append(Problem(name, BLOCKS, f"has missing values (blank or a missing token; {band} rows) and no "
                                             "missing policy.", "Choose one: own_category, a public fill value "
                                                                "or drop_row."))
        elif col.missing == "drop_row":
            out.append(Problem(name, WARNING, f"has missing values ({band} rows); those rows will be dropped.",
                               "Keep it, or keep the rows as their own category or with a public fill value."))
    if col.role == "category":
        if col.categories is None:
            out.append(Problem(name, BLOCKS, "has no public category list; a folder's categories are never read "
                                             "from its parts.", "Declare the public categories."))
        elif total["outside"]:
            band = size_band(total["outside"])
            policy = col.missing
            out.append(Problem(name, BLOCKS if policy is None else WARNING,
                               f"has values outside the declared categories ({band} rows); "
                               + ("there is no missing policy." if policy is None
                                  else f"they will be treated as missing ({policy})."),
                               "Add them to the categories, merge them into one, or choose a missing policy."))
    elif col.role == "number":
        if total["unreadable"]:
            out.append(Problem(name, BLOCKS, f"has values that cannot be read as numbers "
                                             f"({size_band(total['unreadable'])} rows).",
                               "Correct them in the parts, add their text to the missing tokens, or make the "
                               "column a category."))
        if col.bin_edges() is None:
            out.append(Problem(name, BLOCKS, "has no public bounds and bins; a synthesizer needs its categories.",
                               "Declare public bounds and a number of bins, or leave the column out."))
        elif total["clipped"]:
            out.append(Problem(name, WARNING, f"has values outside the public bounds "
                                              f"({size_band(total['clipped'])} rows); they will be clipped.",
                               "Keep the bounds, or widen them if the public range is wider."))
    return out


def check_folder(listing: FolderListing, schema: DataSchema, secret: bytes | None = None, column_sets=(), *,
                 n_jobs: int | None = None, scheduler: str | None = None, progress=None) -> FolderCheck:
    """Every part checked against ``schema`` in one pass (module docstring): a :class:`FolderCheck` whose
    problems quote counts as size bands. With the installation's ``secret`` the pass also keeps the folder's
    population sketches, over its own column sets and each of ``column_sets`` (other data sets' columns)."""
    if not isinstance(schema, DataSchema):
        raise ValueError("check_folder takes a DataSchema; draft one from the sample first.")
    column_sets = tuple(tuple(c) for c in column_sets)
    results = map_trials(partial(_check_part, schema=schema, secret=secret, column_sets=column_sets),
                         list(listing.parts), n_jobs=n_jobs,
                         progress=part_progress(progress, "checked"), label="parts checked", scheduler=scheduler)
    if list_folder(listing.folder).fingerprint != listing.fingerprint:
        raise ValueError(f"The parts of {listing.folder} changed while they were checked (a part was written, "
                         "added or removed); check every part again once the folder is complete.")
    problems: list[Problem] = []
    broken = [Path(p).name for p, r in zip(listing.parts, results) if "unreadable" in r]
    if broken:
        problems.append(Problem("(parts)", BLOCKS, f"{len(broken)} part(s) cannot be read as Parquet: "
                                                   f"{_names(broken)}.", "Replace or remove them."))
    readable = [(Path(p).name, r) for p, r in zip(listing.parts, results) if "unreadable" not in r]
    for col in schema.used_columns():
        total = dict.fromkeys(COUNTS, 0)
        for _, r in readable:
            for k, v in r["counts"][col.name].items():
                total[k] += int(v)
        lacking = [name for name, r in readable if r["counts"][col.name]["lacking"]]
        problems += _problems(col, total, lacking)
    declared = {c.name for c in schema.columns}
    for name in sorted({c for _, r in readable for c in r["columns"]} - declared):
        problems.append(Problem(name, WARNING, "is in some parts but not declared; it will be left out.",
                                "Declare it (or mark it leave_out to silence this)."))
    sketches = ()
    if secret is not None:
        sketches = tuple(merge_sketches(r["sketches"] for _, r in readable))
    return FolderCheck(tuple(problems), listing.n_parts, sketches)
