"""Tables of the elicitation store and the numbered migrations that bring older databases up to date.

Schema history:
1. sessions, stakeholders, assignments, judgment events.
2. an optional reason on each judgment event; the fit-run audit table.
3. idempotency keys scoped to (session, stakeholder); a log of failed code and key attempts.
4. every session's settings name the population its pairs come from; older sessions, which drew
   from every row of the file, are marked "full".
5. the synthetic copies sessions show: each copy (a DP release, made with secure noise and not
   reproducible) is stored once by its random id, with its population, budget and people.
6. the devices a stakeholder joined or resumed on: a browser's device token (kept in an HttpOnly cookie)
   stored as its digest, with the stakeholder's resume code sealed under that token.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from sqlalchemy import (JSON, Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table,
                        UniqueConstraint, func, insert, select, update)
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from core.fairness.elicitation import LEGACY_POPULATION

SCHEMA_VERSION = 6
MAX_NAME_LENGTH = 60
MAX_SESSION_NAME_LENGTH = 120
MAX_REASON_LENGTH = 500
MAX_NOTE_LENGTH = 300

metadata = MetaData()

schema_version = Table(
    "schema_version", metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", String(40), nullable=False),
)

sessions = Table(
    "sessions", metadata,
    Column("session_id", String(32), primary_key=True),
    Column("name", String(MAX_SESSION_NAME_LENGTH), nullable=False),
    Column("join_code", String(16), nullable=False, unique=True),
    Column("facilitator_key_hash", String(64), nullable=False),
    Column("config", JSON, nullable=False),
    Column("core_pairs", JSON, nullable=False),
    Column("n_individuals", Integer, nullable=False),
    Column("status", String(16), nullable=False, default="open"),
    Column("simulated", Boolean, nullable=False, default=False),
    Column("created_at", String(40), nullable=False),
)

stakeholders = Table(
    "stakeholders", metadata,
    Column("stakeholder_id", String(32), primary_key=True),
    Column("session_id", String(32), ForeignKey("sessions.session_id"), nullable=False),
    Column("pseudonym", String(MAX_NAME_LENGTH), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("simulated", Boolean, nullable=False, default=False),
    Column("joined_at", String(40), nullable=False),
    UniqueConstraint("session_id", "pseudonym", name="uq_stakeholder_name"),
)

assignments = Table(
    "assignments", metadata,
    Column("session_id", String(32), ForeignKey("sessions.session_id"), nullable=False),
    Column("stakeholder_id", String(32), ForeignKey("stakeholders.stakeholder_id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("a", Integer, nullable=False),
    Column("b", Integer, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("repeat_of", Integer, nullable=False),
    UniqueConstraint("session_id", "stakeholder_id", "position", name="uq_assignment"),
)


def _judgment_columns() -> list:
    return [
        Column("seq", Integer, primary_key=True, autoincrement=True),
        Column("event_id", String(64), nullable=False),
        Column("session_id", String(32), ForeignKey("sessions.session_id"), nullable=False),
        Column("stakeholder_id", String(32), ForeignKey("stakeholders.stakeholder_id"), nullable=False),
        Column("position", Integer, nullable=False),
        Column("revision", Integer, nullable=False),
        Column("response", String(16), nullable=False),
        Column("confidence", Integer, nullable=True),
        Column("latency_ms", Float, nullable=True),
        Column("created_at", String(40), nullable=False),
        Column("reason", String(MAX_REASON_LENGTH), nullable=True),   # sensitive free text
        UniqueConstraint("session_id", "stakeholder_id", "position", "revision", name="uq_revision"),
        UniqueConstraint("session_id", "stakeholder_id", "event_id", name="uq_event"),
    ]


judgments = Table("judgments", metadata, *_judgment_columns(),
                  Index("ix_judgments_owner", "session_id", "stakeholder_id", "position"),
                  sqlite_autoincrement=True)

fit_runs = Table(  # what led to each learning result (spec 4.3, audit log)
    "fit_runs", metadata,
    Column("run_id", String(32), primary_key=True),
    Column("session_id", String(32), ForeignKey("sessions.session_id"), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("constraint_hash", String(64), nullable=False),
    Column("settings_hash", String(64), nullable=False),
    Column("aggregation", JSON, nullable=False),
    Column("learner", JSON, nullable=False),
    Column("code_version", String(64), nullable=True),
    Column("n_constraints", Integer, nullable=False),
    Column("unconstrained_error", Float, nullable=True),
    Column("frontier", JSON, nullable=False),
    Column("superseded", Boolean, nullable=False, default=False),
    Column("note", String(MAX_NOTE_LENGTH), nullable=True),
    UniqueConstraint("session_id", "constraint_hash", "settings_hash", name="uq_fit_run"),
)

failed_attempts = Table(  # schema 3: wrong join codes, resume codes and facilitator keys
    "failed_attempts", metadata,
    Column("attempt_id", Integer, primary_key=True, autoincrement=True),
    Column("client", String(64), nullable=False),     # one browser session
    Column("address", String(64), nullable=False),    # the network address it came from
    Column("at", Float, nullable=False),
    Index("ix_failed_attempts_at", "at"),
)


synthetic_copies = Table(  # schema 5: released synthetic copies (DP output: safe to store and export)
    "synthetic_copies", metadata,
    Column("copy_id", String(40), primary_key=True),
    Column("data_key", String(64), nullable=False),
    Column("population", String(32), nullable=False),
    Column("epsilon", Float, nullable=False),
    Column("delta", Float, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("people", JSON, nullable=False),     # {"cards": {column: [...]}, "people": {column: [...]}}
    Index("ix_synthetic_copies_budget", "data_key", "population", "epsilon"),
)


stakeholder_devices = Table(  # schema 6: the browsers that reopen a stakeholder's cards from the join link
    "stakeholder_devices", metadata,
    Column("session_id", String(32), ForeignKey("sessions.session_id"), nullable=False),
    Column("stakeholder_id", String(32), ForeignKey("stakeholders.stakeholder_id"), nullable=False),
    Column("device_hash", String(64), nullable=False),    # SHA-256 of the browser's device token
    Column("sealed_code", String(128), nullable=False),   # the resume code, readable only with that token
    Column("bound_at", String(40), nullable=False),
    UniqueConstraint("session_id", "device_hash", name="uq_session_device"),
    Index("ix_stakeholder_devices_owner", "stakeholder_id"),
)


def now_utc() -> str:
    """The timestamp format of every stored row: ISO 8601, UTC, milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def migrate_to_2(conn: Connection) -> None:
    """Version 2: an optional reason on each judgment event, and the fit-run audit table."""
    conn.exec_driver_sql(f"ALTER TABLE judgments ADD COLUMN reason VARCHAR({MAX_REASON_LENGTH})")
    fit_runs.create(conn, checkfirst=True)


def migrate_to_3(conn: Connection) -> None:
    """Version 3: event ids unique per (session, stakeholder) rather than across the database,
    and the failed-attempt log behind the guessing limit.

    SQLite cannot drop a column constraint, so the judgment table is rebuilt and its rows copied
    (sequence numbers kept); PostgreSQL swaps the constraint in place.
    """
    if conn.dialect.name == "sqlite":
        ddl = str(CreateTable(judgments).compile(conn))
        conn.exec_driver_sql(ddl.replace("CREATE TABLE judgments", "CREATE TABLE judgments_v3", 1))
        names = ", ".join(c.name for c in judgments.columns)
        conn.exec_driver_sql(f"INSERT INTO judgments_v3 ({names}) SELECT {names} FROM judgments")
        conn.exec_driver_sql("DROP TABLE judgments")
        conn.exec_driver_sql("ALTER TABLE judgments_v3 RENAME TO judgments")
        conn.exec_driver_sql("CREATE INDEX ix_judgments_owner ON judgments (session_id, stakeholder_id, position)")
    else:
        conn.exec_driver_sql("ALTER TABLE judgments DROP CONSTRAINT IF EXISTS judgments_event_id_key")
        conn.exec_driver_sql("ALTER TABLE judgments ADD CONSTRAINT uq_event "
                             "UNIQUE (session_id, stakeholder_id, event_id)")
    failed_attempts.create(conn, checkfirst=True)


def migrate_to_4(conn: Connection) -> None:
    """Version 4: sessions name their population. Those stored before drew pairs from all rows of
    the file, so their settings get population "full" (rewritten in Python: the JSON functions of
    SQLite and PostgreSQL differ, and session rows are few)."""
    rows = conn.execute(select(sessions.c.session_id, sessions.c.config)).all()
    for session_id, config in rows:
        config = dict(config)
        if "population" not in config:
            config["population"] = LEGACY_POPULATION
            conn.execute(update(sessions).where(sessions.c.session_id == session_id).values(config=config))


def migrate_to_5(conn: Connection) -> None:
    """Version 5: the table of released synthetic copies (the same DDL on SQLite and PostgreSQL)."""
    synthetic_copies.create(conn, checkfirst=True)


def migrate_to_6(conn: Connection) -> None:
    """Version 6: the table of stakeholders' devices (the same DDL on SQLite and PostgreSQL)."""
    stakeholder_devices.create(conn, checkfirst=True)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: migrate_to_2, 3: migrate_to_3, 4: migrate_to_4,
                                                       5: migrate_to_5, 6: migrate_to_6}


def upgrade(conn: Connection) -> None:
    """Apply the missing migrations in one transaction, appending one version row per step.

    The caller holds the write lock (SQLite: BEGIN IMMEDIATE); PostgreSQL locks the version table.
    """
    if conn.dialect.name != "sqlite":
        conn.exec_driver_sql("LOCK TABLE schema_version IN EXCLUSIVE MODE")
    found = conn.execute(select(func.max(schema_version.c.version))).scalar()
    if found is None:  # a new database: create_all built the current schema
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION, applied_at=now_utc()))
        return
    if found > SCHEMA_VERSION:
        raise ValueError(f"The session database has schema version {found}, newer "
                         f"than this code ({SCHEMA_VERSION}); upgrade the dashboard.")
    for version in range(found + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version](conn)
        conn.execute(insert(schema_version).values(version=version, applied_at=now_utc()))
