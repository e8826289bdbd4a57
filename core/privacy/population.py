"""Is a new table the same population as a data set already declared? Decided by content, not by name.

The ledger counts spends per declared data set (``project_ledger.data_key``: ``"dataset:" + name``). A
re-export, a subset, a copy with columns added or another encoding of the same rows, declared under a new
name, would otherwise start a fresh budget for the same people. So before a new data set is saved its rows
are compared with every declared data set's population sketch (``core.intake.identity``: keyed row
fingerprints, a bounded sample of them kept per data set), and each data set it shares rows with is named
with how (:data:`RELATION_WORDS`: the same rows, a subset, a superset, some rows in common). The curator
files the table under one of them (its spends and cap go on) or answers, on the record, that it is a
different population. Every answer is kept in the project database (table ``population_answers``) with
when and who, and the privacy ledger page lists the "different population" answers and exports them.

Nothing private leaves: the answers hold names, the relation's word, the file's fingerprint, when and the
curator; never a row count or a share of rows.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping, Sequence

import pandas as pd
from sqlalchemy import Column, Integer, MetaData, String, Table, inspect, insert, select
from sqlalchemy.exc import SQLAlchemyError

from core.database import LOCAL_CURATOR, StoreUnavailable, open_database

SAME, DIFFERENT = "same", "different"
WAIT_LIMIT = 60.0        # seconds a write keeps waiting behind other writers
RELATION_WORDS = {"same": "the same rows",
                  "subset": "its rows are among that data set's rows (a subset)",
                  "superset": "it holds that data set's rows and more (a superset)",
                  "overlap": "it shares a part of its rows with that data set"}
ANSWER_COLUMNS = ["new_name", "compared_name", "answer", "relation", "fingerprint", "curator", "answered_utc"]

metadata = MetaData()
answers_table = Table(
    "population_answers", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("new_name", String(200), nullable=False, index=True),
    Column("compared_name", String(200), nullable=False),
    Column("answer", String(12), nullable=False),
    Column("fingerprint", String(64), nullable=False, server_default=""),
    Column("answered_utc", String(32), nullable=False),
    Column("relation", String(12), nullable=False, server_default=""),
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),
)


@dataclass(frozen=True)
class Match:
    """A declared data set a new table shares rows with, and how (a key of :data:`RELATION_WORDS`)."""

    name: str
    relation: str

    @property
    def words(self) -> str:
        return RELATION_WORDS[self.relation]


STRENGTH = {"same": 0, "subset": 1, "superset": 2, "overlap": 3}


def related(overlaps: Mapping[str, object], *, exclude: str | None = None) -> list[Match]:
    """The data sets among ``overlaps`` (name -> ``core.intake.identity.Overlap``) that share rows with the new
    table, the closest relation first, then by name; ``exclude`` (the new table's own name) is left out."""
    found = [Match(name, o.relation) for name, o in overlaps.items()
             if o.relation in STRENGTH and name != exclude]
    return sorted(found, key=lambda m: (STRENGTH[m.relation], m.name))


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
            self.db = open_database(url).create(metadata)
            self._migrate()
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The project database cannot be opened for population answers ({exc}).") from exc

    def _migrate(self) -> None:
        """Give an answers table written before relations and curators those columns."""
        have = {c["name"] for c in inspect(self.db.engine).get_columns("population_answers")}
        added = {"relation": "VARCHAR(12) NOT NULL DEFAULT ''",
                 "curator": f"VARCHAR(120) NOT NULL DEFAULT '{LOCAL_CURATOR}'"}
        missing = [name for name in added if name not in have]
        if missing:
            with self.db.write_tx() as conn:
                for name in missing:
                    conn.exec_driver_sql(f"ALTER TABLE population_answers ADD COLUMN {name} {added[name]}")

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

    def record(self, new_name: str, fingerprint: str, same_as: str | None, compared: Sequence[str], *,
               relations: Mapping[str, str] | None = None, curator: str = LOCAL_CURATOR) -> None:
        """Record one answer in one transaction: ``same_as`` (one of ``compared``) is the same population
        (one "same" row), or None: a different population from every name in ``compared`` (one
        "different" row each). ``relations`` (name -> relation word key) and ``curator`` are kept with it."""
        new_name, compared = str(new_name).strip(), [str(c) for c in compared]
        relations = dict(relations or {})
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
                    conn.execute(insert(answers_table).values(
                        new_name=new_name[:200], compared_name=name[:200], answer=answer, fingerprint=fp,
                        answered_utc=_now(), relation=str(relations.get(name, ""))[:12],
                        curator=str(curator or LOCAL_CURATOR)[:120]))

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
        return pd.DataFrame([{k: r[k] for k in ANSWER_COLUMNS} for r in self._rows(where)], columns=ANSWER_COLUMNS)

    def different(self) -> pd.DataFrame:
        """Every "different population" answer, oldest first: which data set was declared apart from which,
        how their rows relate, when and by whom (the ledger page lists and exports it)."""
        frame = self.frame()
        return frame[frame["answer"] == DIFFERENT].reset_index(drop=True)

    def dispose(self) -> None:
        self.db.dispose()


__all__ = ["ANSWER_COLUMNS", "DIFFERENT", "Match", "PopulationAnswers", "RELATION_WORDS",
           "SAME", "related"]
