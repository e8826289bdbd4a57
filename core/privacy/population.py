"""Is a new upload the same population as a data set that already has a privacy budget?

The ledger counts spends per declared data set (``project_ledger.data_key``: ``"dataset:" + name``), so a
curator who declares a re-export of a capped data set under a new name would start a fresh budget for the
same people. Before a new data set is saved, its column names and row count are compared with the declared
data sets that already have a cap or a release; when one is close, the curator is asked whether it is the
same population, and the answer is recorded in the project database (table ``population_answers``).

The closeness rule (:func:`similar_data_sets`), both parts needed:

* **columns**: the column names (trimmed, ignoring case) are the same, or the shared names are at least
  ``COLUMN_OVERLAP`` (80%) of the longer of the two lists: ``|A & B| / max(|A|, |B|) >= 0.8``;
* **size**: the row counts differ by at most ``ROW_TOLERANCE`` (10%) of the larger one:
  ``|n - m| <= 0.1 * max(n, m)``. A candidate whose row count is not at hand (its file is not loaded) is
  compared on its columns alone: asking once too often costs a click, missing a match would let a budget
  start again from zero.

Row counts are private numbers: they are used for this comparison only, in memory. Nothing here stores
or returns them; what leaves is the candidates' names and the words "close in size". The answers table
holds names, the answer, the upload's fingerprint and when.
"""
from __future__ import annotations

import operator
import random
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

import pandas as pd
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select
from sqlalchemy.exc import SQLAlchemyError

from core.database import Database, StoreUnavailable
from core.privacy.project_ledger import DECLARED, Cap, ProjectLedger, declared_name

COLUMN_OVERLAP = 0.8     # share of the longer column list that must be shared
ROW_TOLERANCE = 0.10     # largest difference in rows, as a share of the larger count
SAME, DIFFERENT = "same", "different"
WAIT_LIMIT = 60.0        # seconds a write keeps waiting behind other writers

metadata = MetaData()
answers_table = Table(
    "population_answers", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("new_name", String(200), nullable=False, index=True),
    Column("compared_name", String(200), nullable=False),
    Column("answer", String(12), nullable=False),
    Column("fingerprint", String(64), nullable=False, server_default=""),
    Column("answered_utc", String(32), nullable=False),
)


@dataclass(frozen=True)
class Candidate:
    """A declared data set a new upload is compared with: its name, its column names, and its row count
    when its file is at hand (None: compared on columns alone). The count stays in memory."""

    name: str
    columns: tuple[str, ...]
    n_rows: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "columns", _column_names(self.columns, f"the columns of {self.name!r}"))
        if self.n_rows is not None:
            object.__setattr__(self, "n_rows", _row_count(self.n_rows, f"the row count of {self.name!r}"))


def _column_names(columns, what: str) -> tuple[str, ...]:
    if isinstance(columns, str) or not isinstance(columns, (tuple, list)):
        raise ValueError(f"{what[0].upper()}{what[1:]} must be a list of column names; got {columns!r:.60}.")
    return tuple(str(c) for c in columns)


def _row_count(n, what: str) -> int:
    try:
        if isinstance(n, bool):
            raise TypeError
        n = operator.index(n)
    except TypeError:
        raise ValueError(f"{what[0].upper()}{what[1:]} must be a whole number of rows; got {n!r:.40}.") from None
    if n < 0:
        raise ValueError(f"{what[0].upper()}{what[1:]} cannot be negative; got {n}.")
    return n


def _normalised(columns: Iterable[str]) -> set[str]:
    return {str(c).strip().casefold() for c in columns if str(c).strip()}


def column_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """Shared column names (trimmed, ignoring case) as a share of the longer list: 1.0 for the same names
    in any order, 0.0 when either list is empty."""
    left, right = _normalised(a), _normalised(b)
    if not left or not right:
        return 0.0
    return len(left & right) / max(len(left), len(right))


def close_in_size(n: int, m: int) -> bool:
    """True when the row counts ``n`` and ``m`` differ by at most ROW_TOLERANCE of the larger one."""
    return abs(n - m) <= ROW_TOLERANCE * max(n, m)


def similar_data_sets(columns: tuple[str, ...], n_rows: int | None, candidates: Iterable[Candidate]) -> list[str]:
    """Names of the ``candidates`` close to an upload with ``columns`` and ``n_rows`` rows (the rule in the
    module's docstring), the largest column overlap first, then by name. ``n_rows`` None compares columns
    alone. Only names leave this function."""
    columns = _column_names(columns, "the upload's columns")
    n_rows = None if n_rows is None else _row_count(n_rows, "the upload's row count")
    close = []
    for cand in candidates:
        cand = cand if isinstance(cand, Candidate) else Candidate(*cand)
        overlap = column_overlap(columns, cand.columns)
        if overlap < COLUMN_OVERLAP - 1e-12:
            continue
        if n_rows is not None and cand.n_rows is not None and not close_in_size(n_rows, cand.n_rows):
            continue
        close.append((-overlap, cand.name))
    return [name for _, name in sorted(close)]


def budgeted_names(ledger: ProjectLedger) -> list[str]:
    """Declared data sets with a budget to protect: a cap, or at least one release, in the ledger."""
    names = []
    for key in ledger.data_sets()["data_key"]:
        name = declared_name(key)
        if name is None:
            continue
        if isinstance(ledger.cap_decision(key), Cap) or ledger.releases(key, "release"):
            names.append(name)
    return names


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class PopulationAnswers:
    """The curator's answers to "is this the same population?", in the project database.

    Append-only: every answer is a row (new data set name, the name it was compared with, "same" or
    "different", the upload's fingerprint, when); recording the answer already on file for the same
    upload and pair changes nothing, so a page that reruns does not repeat it.
    """

    def __init__(self, url: str | None = None):
        try:
            self.db = Database(url).create(metadata)
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The project database cannot be opened for population answers ({exc}).") from exc

    def _write(self, body) -> None:
        deadline = time.monotonic() + WAIT_LIMIT
        while True:
            try:
                with self.db.write_tx() as conn:
                    return body(conn)
            except StoreUnavailable as exc:
                if exc.retryable and time.monotonic() < deadline:
                    time.sleep(random.uniform(0.005, 0.05))
                    continue
                raise ValueError(f"The answer was not recorded ({exc}); answer again.") from exc
            except SQLAlchemyError as exc:
                raise ValueError(f"The answer was not recorded ({type(exc).__name__}); answer again.") from exc

    def _rows(self, where=None) -> list[dict]:
        query = select(answers_table).order_by(answers_table.c.id)
        if where is not None:
            query = query.where(where)
        try:
            with self.db.read_tx() as conn:
                return [dict(r) for r in conn.execute(query).mappings().all()]
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The population answers cannot be read ({exc}).") from exc

    def record(self, new_name: str, fingerprint: str, same_as: str | None, compared: Sequence[str]) -> None:
        """Record one answer in one transaction: ``same_as`` (one of ``compared``) is the same population
        (one "same" row), or None: a different population from every name in ``compared`` (one
        "different" row each)."""
        new_name, compared = str(new_name).strip(), [str(c) for c in compared]
        if not new_name:
            raise ValueError("Name the new data set before answering.")
        if not compared:
            raise ValueError("There is no data set to compare with, so there is nothing to answer.")
        if same_as is not None and same_as not in compared:
            raise ValueError(f"{same_as!r} is not one of the data sets asked about ({', '.join(compared)}); "
                             "choose one of them or answer 'different'.")
        pairs = [(same_as, SAME)] if same_as is not None else [(c, DIFFERENT) for c in compared]
        fp = str(fingerprint or "")[:64]
        c = answers_table.c

        def body(conn) -> None:
            for name, answer in pairs:
                last = conn.execute(select(c.answer).where(
                    (c.new_name == new_name[:200]) & (c.compared_name == name[:200]) & (c.fingerprint == fp))
                    .order_by(c.id.desc()).limit(1)).scalar()
                if last != answer:
                    conn.execute(insert(answers_table).values(new_name=new_name[:200], compared_name=name[:200],
                                                              answer=answer, fingerprint=fp, answered_utc=_now()))

        self._write(body)

    def decision(self, new_name: str, fingerprint: str, compared: Sequence[str]) -> str | bool | None:
        """What the curator answered for this upload: the name of the data set it is the same population
        as, False when answered "different" for every one of ``compared``, None while any is unanswered.
        The latest answer for a pair counts."""
        c = answers_table.c
        rows = self._rows((c.new_name == str(new_name).strip()[:200]) & (c.fingerprint == str(fingerprint)[:64]))
        latest = {r["compared_name"]: r["answer"] for r in rows}
        same = [r["compared_name"] for r in rows if latest.get(r["compared_name"]) == SAME]
        if same:
            return same[-1]
        if compared and all(latest.get(str(n)[:200]) == DIFFERENT for n in compared):
            return False
        return None

    def frame(self, new_name: str | None = None) -> pd.DataFrame:
        """Every recorded answer (of ``new_name`` when given), oldest first."""
        where = None if new_name is None else answers_table.c.new_name == str(new_name).strip()[:200]
        cols = ["new_name", "compared_name", "answer", "fingerprint", "answered_utc"]
        return pd.DataFrame([{k: r[k] for k in cols} for r in self._rows(where)], columns=cols)

    def dispose(self) -> None:
        self.db.dispose()


__all__ = ["COLUMN_OVERLAP", "Candidate", "DECLARED", "DIFFERENT", "PopulationAnswers", "ROW_TOLERANCE", "SAME",
           "budgeted_names", "close_in_size", "column_overlap", "similar_data_sets"]
