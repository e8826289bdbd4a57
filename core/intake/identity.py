"""Which people a table holds, by content: keyed row fingerprints and a bounded sketch of them.

A privacy budget belongs to a population, not to a name, a path or a file's bytes. Two files hold the same
population when they hold the same rows, however they are written. So each row is fingerprinted from its
cell values read the way every intake step reads them (:func:`core.intake.values.read_values`):

* a cell is its trimmed, lower-cased text, or, when it reads as a number (``"45,000"``, ``"$45,000"``,
  ``45000``, ``45000.0``), that number; missing tokens and empty cells are one "missing" value. So CSV and
  Parquet copies, re-typed numbers, other line endings, quoting or spacing give the same cells;
* each distinct cell value is hashed with SipHash-2-4 (``pandas.util.hash_pandas_object``) under a key
  derived from the installation's secret (:func:`installation_secret`), and mixed with a keyed tag of its
  column's name (trimmed, lower-cased), so a value in another column is another value;
* a row is the SplitMix64 finaliser of the wrapping sum of its cells' mixed hashes: a sum does not depend on
  the order of the columns, and leaving one column out is the sum minus its term (so a table with a column
  dropped is measured in one pass);
* a row seen ``r`` times before in the same table is mixed with ``r``: identical rows count as many times as
  they occur (a multiset), and shuffling the rows changes nothing.

What is kept (:class:`PopulationSketch`) is the ``K`` smallest of those row values (a bottom-k sketch,
Broder 1997; Cohen and Kaplan 2007), for the table's whole set of column names and for each set with one
column left out. Nothing in it can be read back into a cell without the installation's secret, and it has
at most ``K`` values whatever the table's size; row counts are not stored.

Overlap (:func:`overlap`) compares two sketches of the same column set: below the smaller of their two
``K``-th values every row value of either table is present in its sketch, so the values under that
threshold are uniform samples of both tables, and the share of each sample found in the other estimates
the share of each table's rows that the other holds (containment). :func:`relation` names the result:
``same``, ``subset`` (the new table's rows are mostly the other's), ``superset``, ``overlap`` or
``different``. A table with columns added is compared on the other's columns; one with a column removed,
on the other's sketch without that column.
"""
from __future__ import annotations

import base64
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.intake.values import read_values

__all__ = ["CONTAINED", "K", "MAX_LEFT_OUT", "OVERLAP", "Overlap", "PopulationSketch", "column_terms", "compare",
           "covered_set", "covered_sets", "data_folder", "frame_sketches", "installation_secret", "match", "merge_sketches", "overlap",
           "relation", "sketches_for", "sketches_from_terms"]

K = 512                  # row values kept per column set
MAX_LEFT_OUT = 64        # tables with more columns keep only the whole-row sketch
CONTAINED = 0.9          # share of a table's rows found in the other for "subset"/"superset"/"same"
OVERLAP = 0.05           # share above which two tables are said to share rows
SECRET_ENV = "DASHBOARD_IDENTITY_SECRET"
DATA_ENV = "DASHBOARD_DATA_DIR"
SECRET_FILE = "installation.key"
MISSING_CELL = "\x00missing"


def data_folder() -> Path:
    """The project's data folder on the server (``DASHBOARD_DATA_DIR``, else ``data/curator`` in the project),
    created when missing: kept files and the installation's secret live there."""
    folder = os.environ.get(DATA_ENV) or str(Path(__file__).resolve().parents[2] / "data" / "curator")
    path = Path(folder).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def installation_secret() -> bytes:
    """The installation's secret key (32 bytes): ``DASHBOARD_IDENTITY_SECRET`` (hex) when set, so several
    servers sharing one database agree; else a file in :func:`data_folder`, made once, readable by its owner
    only."""
    given = os.environ.get(SECRET_ENV, "").strip()
    if given:
        try:
            key = bytes.fromhex(given)
        except ValueError:
            raise ValueError(f"{SECRET_ENV} must be hexadecimal (e.g. 64 hex digits); fix or unset it.") from None
        if len(key) < 16:
            raise ValueError(f"{SECRET_ENV} must hold at least 16 bytes (32 hex digits).")
        return key
    path = data_folder() / SECRET_FILE
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:     # another process made it first
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))
    key = bytes.fromhex(path.read_text().strip())
    if len(key) < 16:
        raise ValueError(f"The installation key {path} is damaged; remove it only if no data set is declared yet.")
    return key


def _derive(secret: bytes, what: str, size: int) -> bytes:
    return hashlib.blake2b(what.encode("utf-8"), key=secret[:64], digest_size=size).digest()


def _sip_key(secret: bytes) -> str:
    """16 ASCII characters (96 bits) for pandas' SipHash key."""
    return base64.urlsafe_b64encode(_derive(secret, "cell", 12)).decode("ascii")


def _tag(secret: bytes, name: str) -> np.uint64:
    return np.frombuffer(_derive(secret, "column:" + name, 8), dtype=np.uint64)[0]


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea and Flood 2014), elementwise on uint64 (wrapping)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _name(column) -> str:
    return str(column).strip().casefold()


def _cell_tokens(series: pd.Series, tokens: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(codes per row, token per distinct value): numbers by value, other text trimmed and lower-cased."""
    values = read_values(series, tokens)
    numbers = values.numbers
    is_number = ~values.missing & ~np.isnan(numbers)
    out = np.empty(len(numbers), dtype=object)
    out[:] = MISSING_CELL
    if is_number.any():
        out[is_number] = "n" + pd.Series(numbers[is_number]).astype(str).to_numpy(dtype=object)
    text = ~values.missing & ~is_number
    if text.any():
        out[text] = "t" + pd.Series(values.text_of(np.flatnonzero(text))).str.lower().to_numpy(dtype=object)
    return values.codes, out


def column_terms(frame: pd.DataFrame, tokens: tuple[str, ...], secret: bytes) -> dict[str, np.ndarray]:
    """Each column's keyed cell hash per row (uint64), by normalised column name (the first of two columns
    whose names differ only in case or spaces). Vectorised: one SipHash per distinct value."""
    key = _sip_key(secret)
    out: dict[str, np.ndarray] = {}
    for column in frame.columns:
        name = _name(column)
        if not name or name in out:
            continue
        codes, distinct = _cell_tokens(frame[column], tokens)
        hashed = pd.util.hash_pandas_object(pd.Series(distinct, dtype=object), index=False,
                                            hash_key=key).to_numpy(dtype=np.uint64)
        out[name] = _mix(hashed[codes] ^ _tag(secret, name))
    return out


def _bottom(values: np.ndarray, k: int = K) -> np.ndarray:
    """The ``k`` smallest values, ascending (a partial sort: row values are distinct but for 64-bit collisions)."""
    values = np.asarray(values, dtype=np.uint64)
    if values.size > k:
        values = np.partition(values, k - 1)[:k]
    return np.unique(values)


def _rows(total: np.ndarray, secret: bytes) -> np.ndarray:
    """Row values from the summed cell terms: duplicates numbered by occurrence (multiset), then mixed."""
    row = _mix(total ^ _tag(secret, "row"))
    rank = pd.Series(row).groupby(row, sort=False).cumcount().to_numpy(dtype=np.uint64)
    with np.errstate(over="ignore"):
        return _mix(row + rank * np.uint64(0x9E3779B97F4A7C15))


@dataclass(frozen=True)
class PopulationSketch:
    """The ``K`` smallest keyed row values of a table over ``columns`` (sorted normalised names), ascending.
    ``hashes`` holds fewer than ``K`` values only when the table has fewer distinct rows."""

    columns: tuple[str, ...]
    hashes: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(sorted(self.columns)))
        object.__setattr__(self, "hashes", np.unique(np.asarray(self.hashes, dtype=np.uint64))[:K])

    def to_bytes(self) -> bytes:
        return self.hashes.astype("<u8").tobytes()

    @classmethod
    def from_bytes(cls, columns: Sequence[str], data: bytes) -> "PopulationSketch":
        return cls(tuple(columns), np.frombuffer(data, dtype="<u8").astype(np.uint64))


def sketches_from_terms(terms: Mapping[str, np.ndarray], secret: bytes, *,
                        left_out: bool = True) -> list[PopulationSketch]:
    """The whole-row sketch and (``left_out``, up to ``MAX_LEFT_OUT`` columns) one per column left out."""
    names = sorted(terms)
    if not names:
        return []
    with np.errstate(over="ignore"):
        total = np.zeros(len(terms[names[0]]), dtype=np.uint64)
        for name in names:
            total += terms[name]
        out = [PopulationSketch(tuple(names), _bottom(_rows(total, secret)))]
        if left_out and 1 < len(names) <= MAX_LEFT_OUT:
            for name in names:
                out.append(PopulationSketch(tuple(n for n in names if n != name),
                                            _bottom(_rows(total - terms[name], secret))))
    return out


def sketches_for(terms: Mapping[str, np.ndarray], column_sets: Iterable[Sequence[str]],
                 secret: bytes) -> list[PopulationSketch]:
    """Sketches of the table over each of ``column_sets`` that its columns cover (how a table with columns
    added or one left out is measured on another table's columns)."""
    out, seen = [], set()
    for columns in column_sets:
        columns = tuple(sorted(columns))
        if columns in seen or not columns or not set(columns) <= set(terms):
            continue
        seen.add(columns)
        with np.errstate(over="ignore"):
            total = np.zeros(len(terms[columns[0]]), dtype=np.uint64)
            for name in columns:
                total += terms[name]
        out.append(PopulationSketch(columns, _bottom(_rows(total, secret))))
    return out


def frame_sketches(frame: pd.DataFrame, tokens: tuple[str, ...], secret: bytes | None = None, *,
                   left_out: bool = True) -> list[PopulationSketch]:
    """A table's sketches (module docstring); ``secret`` defaults to the installation's."""
    secret = installation_secret() if secret is None else secret
    return sketches_from_terms(column_terms(frame, tokens, secret), secret, left_out=left_out)


def merge_sketches(groups: Iterable[Sequence[PopulationSketch]]) -> list[PopulationSketch]:
    """One table's sketches from the sketches of its parts (the ``K`` smallest of the union per column set)."""
    by_columns: dict[tuple[str, ...], list[np.ndarray]] = {}
    for group in groups:
        for sketch in group:
            by_columns.setdefault(sketch.columns, []).append(sketch.hashes)
    return [PopulationSketch(cols, np.concatenate(parts)) for cols, parts in by_columns.items()]


@dataclass(frozen=True)
class Overlap:
    """Estimated shares: ``new_in_old`` of the new table's rows that the old one holds, ``old_in_new`` the
    reverse; ``columns`` the column set compared on."""

    new_in_old: float
    old_in_new: float
    columns: tuple[str, ...]

    @property
    def relation(self) -> str:
        return relation(self.new_in_old, self.old_in_new)


def overlap(new: PopulationSketch, old: PopulationSketch) -> Overlap:
    """Containment both ways from two sketches of the same column set (module docstring)."""
    if new.columns != old.columns:
        raise ValueError("Sketches of different column sets cannot be compared.")
    if not new.hashes.size or not old.hashes.size:
        return Overlap(0.0, 0.0, new.columns)
    top = np.iinfo(np.uint64).max
    t_new = new.hashes[-1] if new.hashes.size >= K else np.uint64(top)
    t_old = old.hashes[-1] if old.hashes.size >= K else np.uint64(top)
    threshold = min(t_new, t_old)
    a, b = new.hashes[new.hashes <= threshold], old.hashes[old.hashes <= threshold]
    shared = np.intersect1d(a, b, assume_unique=True).size
    return Overlap(shared / max(a.size, 1), shared / max(b.size, 1), new.columns)


def relation(new_in_old: float, old_in_new: float) -> str:
    """``same`` when each holds at least CONTAINED of the other's rows; ``subset`` when the new table's rows
    are (at least CONTAINED) in the old one; ``superset`` the reverse; ``overlap`` when either share is at
    least OVERLAP; else ``different``."""
    if new_in_old >= CONTAINED and old_in_new >= CONTAINED:
        return "same"
    if new_in_old >= CONTAINED:
        return "subset"
    if old_in_new >= CONTAINED:
        return "superset"
    if max(new_in_old, old_in_new) >= OVERLAP:
        return "overlap"
    return "different"


def compare(new: Sequence[PopulationSketch], old: Sequence[PopulationSketch]) -> Overlap | None:
    """How a new table stands to an old one: on the old table's whole column set when the new one has it (a
    table with columns added), else on a column set both keep (a column left out of one of them); None when
    they share no sketched column set."""
    mine = {s.columns: s for s in new}
    found = [overlap(mine[s.columns], s) for s in old if s.columns in mine]
    if not found:
        return None
    return max(found, key=lambda o: (max(o.new_in_old, o.old_in_new), len(o.columns)))


def covered_set(old: Sequence[PopulationSketch], names: Iterable[str]) -> tuple[str, ...] | None:
    """The largest of ``old``'s column sets that ``names`` covers (its whole set first), or None."""
    fits = covered_sets(old, names)
    return max(fits, key=len) if fits else None


def covered_sets(old: Sequence[PopulationSketch], names: Iterable[str]) -> list[tuple[str, ...]]:
    """Every one of ``old``'s column sets that ``names`` covers: the whole set, and each set with one column
    left out, so a table whose one column was recoded ("M" for "Male") still meets the old rows on the others."""
    have = set(names)
    return [s.columns for s in old if set(s.columns) <= have]


def match(terms: Mapping[str, np.ndarray], stored: Mapping[str, Sequence[PopulationSketch]],
          secret: bytes) -> dict[str, Overlap]:
    """How a table in memory (its :func:`column_terms`) stands to each stored table, by name: the closest of the
    comparisons on every column set both can be measured on (:func:`covered_sets`; each set sketched once for
    all stored tables); a stored table with no such set is left out (nothing to compare on)."""
    wanted = sorted({cols for old in stored.values() for cols in covered_sets(old, terms)})
    if not wanted:
        return {}
    mine = sketches_for(terms, wanted, secret)
    out = {}
    for name, old in stored.items():
        found = compare(mine, old)
        if found is not None:
            out[name] = found
    return out
