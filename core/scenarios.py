"""Saved scenarios: pins kept under a name in the project database, to reopen and compare later.

A scenario is a report (:func:`core.report.build_report`) saved with a name for one page. The
database is the project's (``DASHBOARD_DB_URL``, SQLite by default), opened through
``core.database`` like the elicitation store and the privacy ledger, so database faults reach the page
as plain-language ``ValueError`` s and a deleted or replaced database file refuses writes. Saving under
a name the page already uses never replaces the earlier scenario silently: it raises
:class:`ScenarioExists` unless the caller passes ``replace=True`` (saving the very same report again
is a no-op, so a rerun saves once).
"""
from __future__ import annotations

import json
import threading
import unicodedata
from datetime import datetime, timezone

import pandas as pd
from sqlalchemy import (Column, Integer, MetaData, String, Table, Text, UniqueConstraint, delete, insert, inspect,
                        select)
from sqlalchemy.exc import IntegrityError

from core.compare import Snapshot, snapshot_of_report
from core.database import LOCAL_CURATOR, TableStore, default_db_url
from core.report import report_json

MAX_SCENARIO_NAME = 80
MAX_PAGE_NAME = 80

metadata = MetaData()

saved_scenarios = Table(
    "saved_scenarios", metadata,
    Column("scenario_id", Integer, primary_key=True, autoincrement=True),
    Column("page", String(MAX_PAGE_NAME), nullable=False),
    Column("name", String(MAX_SCENARIO_NAME), nullable=False),
    Column("plan_class", String(120), nullable=False),
    Column("plan_digest", String(64), nullable=False),
    Column("report", Text, nullable=False),
    Column("saved_at", String(40), nullable=False),
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),   # who saved it
    UniqueConstraint("page", "name", name="uq_scenario_page_name"),
)


def check_scenario_name(name: str) -> str:
    """A scenario name trimmed; ``ValueError`` when empty, too long or holding control characters."""
    name = unicodedata.normalize("NFC", str(name or "")).strip()
    if not name:
        raise ValueError("Give the scenario a name.")
    if len(name) > MAX_SCENARIO_NAME:
        raise ValueError(f"Scenario names are at most {MAX_SCENARIO_NAME} characters; shorten it.")
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        raise ValueError("A scenario name cannot hold control or invisible characters; use plain text.")
    return name


def same_report(a: str, b: str) -> bool:
    """Two saved report texts say the same thing (they may differ only in when they were made)."""
    def content(text: str) -> dict:
        data = json.loads(text)
        return {k: v for k, v in data.items() if k != "created_utc"} if isinstance(data, dict) else {"": data}
    return a == b or content(a) == content(b)


class ScenarioExists(ValueError):
    """A scenario of this name is already saved on the page; ``name`` is the name asked for."""

    def __init__(self, name: str):
        super().__init__(f"A scenario named {name!r} is already saved for this page. Choose another name, "
                         "or confirm that it should replace the saved one (replace=True).")
        self.name = name


class ScenarioStore(TableStore):
    """Named scenarios per page in one database."""

    metadata = metadata

    def __init__(self, url: str | None = None, engine=None):
        super().__init__(url, engine)
        have = {c["name"] for c in inspect(self.engine).get_columns("saved_scenarios")}
        if "curator" not in have:         # a table saved before curators: its rows are the local curator's
            guard = "" if self.db.is_sqlite else "IF NOT EXISTS "
            with self._write() as conn:
                conn.exec_driver_sql(f"ALTER TABLE saved_scenarios ADD COLUMN {guard}curator VARCHAR(120) "
                                     f"NOT NULL DEFAULT '{LOCAL_CURATOR}'")

    def save(self, name: str, snapshot: Snapshot, *, replace: bool = False, curator: str = LOCAL_CURATOR) -> str:
        """Save ``snapshot`` under ``name`` on its page; returns the name.

        When the page already has a scenario of that name, the same report again is left as it is,
        and a different one raises :class:`ScenarioExists` unless ``replace`` is True.
        """
        name = check_scenario_name(name)
        page = str(snapshot.page or "")[:MAX_PAGE_NAME]
        row = {"page": page, "name": name, "plan_class": snapshot.plan_class[:120],
               "plan_digest": snapshot.plan_digest[:64], "report": report_json(snapshot.report),
               "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "curator": (curator or LOCAL_CURATOR)[:120]}
        same_name = (saved_scenarios.c.page == page) & (saved_scenarios.c.name == name)
        try:
            with self._write() as conn:
                earlier = conn.execute(select(saved_scenarios.c.report).where(same_name)).scalar_one_or_none()
                if earlier is not None and same_report(earlier, row["report"]):
                    return name
                if earlier is not None and not replace:
                    raise ScenarioExists(name)
                conn.execute(delete(saved_scenarios).where(same_name))
                conn.execute(insert(saved_scenarios).values(**row))
        except IntegrityError as err:   # another tab saved the name between our read and insert
            raise ScenarioExists(name) from err
        return name

    def listing(self, page: str, plan_class: str | None = None) -> pd.DataFrame:
        """The page's saved scenarios (of one plan class when given), newest first: name, saved_at,
        plan_digest, curator (who saved it)."""
        query = select(saved_scenarios.c.name, saved_scenarios.c.saved_at, saved_scenarios.c.plan_digest,
                       saved_scenarios.c.curator).where(saved_scenarios.c.page == page)
        if plan_class:
            query = query.where(saved_scenarios.c.plan_class == plan_class)
        query = query.order_by(saved_scenarios.c.saved_at.desc(), saved_scenarios.c.scenario_id.desc())
        with self._read() as conn:
            rows = conn.execute(query).all()
        return pd.DataFrame(rows, columns=["name", "saved_at", "plan_digest", "curator"])

    def load(self, page: str, name: str, label: str = "A") -> Snapshot:
        """The scenario saved as ``name`` on ``page`` (``ValueError`` if there is none)."""
        query = select(saved_scenarios.c.report).where(saved_scenarios.c.page == page,
                                                       saved_scenarios.c.name == name)
        with self._read() as conn:
            text = conn.execute(query).scalar_one_or_none()
        if text is None:
            raise ValueError(f"No scenario named {name!r} is saved for this page; pick one from the list.")
        return snapshot_of_report(text, label)

    def remove(self, page: str, name: str) -> bool:
        """Delete a saved scenario; True if there was one."""
        with self._write() as conn:
            gone = conn.execute(delete(saved_scenarios).where(saved_scenarios.c.page == page,
                                                              saved_scenarios.c.name == name)).rowcount
        return bool(gone)


_STORES: dict[str, ScenarioStore] = {}
_LOCK = threading.Lock()


def get_scenario_store(url: str | None = None) -> ScenarioStore:
    """One store per database URL in this process."""
    url = url or default_db_url()
    with _LOCK:
        if url not in _STORES:
            _STORES[url] = ScenarioStore(url)
        return _STORES[url]


__all__ = ["MAX_SCENARIO_NAME", "ScenarioExists", "ScenarioStore", "check_scenario_name", "get_scenario_store", "saved_scenarios"]
