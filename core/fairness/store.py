"""Elicitation sessions on disk: SQLAlchemy over SQLite (WAL) by default, PostgreSQL by URL.

Judgments are append-only events ordered by a database sequence; a position's live answer is its
latest event (a retraction empties it). Every click carries a unique event id minted when the
card was drawn, so a rerun or a re-delivered click never writes twice (spec 4.3 review notes).
Keys and resume tokens are random and only their SHA-256 digests are stored. An answer may carry
a free-text reason, which only the facilitator reads. Every run of the learner on a session's
pooled constraints is logged (fit runs) with the choices that led to it (spec 4.3).

Schema changes are numbered migrations applied in place when a store opens an older database.
"""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import secrets
import threading
import time
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from sqlalchemy import (JSON, Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String,
                        Table, UniqueConstraint, bindparam, create_engine, event, func, insert, select)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

from core.cache import code_digest, config_digest
from core.fairness.elicitation import (RESPONSE_MODES, RETRACT, SKIP, SessionConfig, core_pairs,
                                       sample_assignment, stakeholder_seed)

SCHEMA_VERSION = 2
EXPORT_FORMAT = "fairness-elicitation-session"
DEFAULT_DB_FILE = Path(__file__).resolve().parents[2] / "data" / "sessions" / "elicitation.sqlite"
JOIN_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I lookalikes
JOIN_CODE_LENGTH = 6
MAX_NAME_LENGTH = 60
MAX_REASON_LENGTH = 500
MAX_NOTE_LENGTH = 300
COMPAS_ROWS = 7214

metadata = MetaData()

schema_version = Table(
    "schema_version", metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", String(40), nullable=False),
)

sessions = Table(
    "sessions", metadata,
    Column("session_id", String(32), primary_key=True),
    Column("name", String(120), nullable=False),
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

judgments = Table(
    "judgments", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(64), nullable=False, unique=True),
    Column("session_id", String(32), ForeignKey("sessions.session_id"), nullable=False),
    Column("stakeholder_id", String(32), ForeignKey("stakeholders.stakeholder_id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("response", String(16), nullable=False),
    Column("confidence", Integer, nullable=True),
    Column("latency_ms", Float, nullable=True),
    Column("created_at", String(40), nullable=False),
    Column("reason", String(MAX_REASON_LENGTH), nullable=True),   # schema 2; sensitive free text
    UniqueConstraint("session_id", "stakeholder_id", "position", "revision", name="uq_revision"),
    Index("ix_judgments_owner", "session_id", "stakeholder_id", "position"),
    sqlite_autoincrement=True,
)

fit_runs = Table(  # schema 2: what led to each learning result (spec 4.3, audit log)
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


# Statements on the answer path, built once (building them per call costs more than SQLite does).
_Q_EVENT = select(judgments.c.seq).where(judgments.c.event_id == bindparam("event_id"))
_Q_TOKEN = select(stakeholders).where(stakeholders.c.token_hash == bindparam("token_hash"))
_Q_SESSION = select(sessions.c.status, sessions.c.config).where(sessions.c.session_id == bindparam("sid"))
_Q_STATUS = select(sessions.c.status).where(sessions.c.session_id == bindparam("sid"))
_Q_CARD = select(assignments.c.position).where(
    assignments.c.session_id == bindparam("sid"), assignments.c.stakeholder_id == bindparam("uid"),
    assignments.c.position == bindparam("pos"))
_Q_REVISION = select(func.coalesce(func.max(judgments.c.revision), 0)).where(
    judgments.c.session_id == bindparam("sid"), judgments.c.stakeholder_id == bindparam("uid"),
    judgments.c.position == bindparam("pos"))
_INSERT_EVENT = insert(judgments)


@dataclass(frozen=True)
class CreatedSession:
    """What the facilitator receives once: the key is never stored in clear and cannot be shown again."""

    session_id: str
    join_code: str
    facilitator_key: str


@dataclass(frozen=True)
class StakeholderLogin:
    """A stakeholder's handle: the resume token is their only credential."""

    session_id: str
    stakeholder_id: str
    pseudonym: str
    token: str


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _check_secret(secret: Any, what: str) -> str:
    if not isinstance(secret, str) or not secret.strip():
        raise ValueError(f"Enter the {what}.")
    if len(secret) > 200:
        raise ValueError(f"The {what} is too long to be valid.")
    return secret.strip()


_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_reason(reason: Any) -> str | None:
    """A stakeholder's optional reason: trimmed text of at most MAX_REASON_LENGTH characters.

    Blank means no reason (None). Line breaks and tabs are kept; other control characters and
    text-direction overrides are refused, since the facilitator reads the text as written.
    """
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise ValueError(f"A reason must be text, got {type(reason).__name__}.")
    reason = reason.replace("\r\n", "\n").strip()
    if not reason:
        return None
    if len(reason) > MAX_REASON_LENGTH:
        raise ValueError(f"Reasons are limited to {MAX_REASON_LENGTH} characters; this one has "
                         f"{len(reason)}.")
    for char in reason:
        if char in "\n\t":
            continue
        if unicodedata.category(char) == "Cc" or char in _BIDI_CONTROLS:
            raise ValueError(f"The reason contains a control character (U+{ord(char):04X}); "
                             "remove it and try again.")
    return reason


def default_db_url() -> str:
    """`DASHBOARD_DB_URL` if set, else the SQLite file under data/sessions/."""
    url = os.environ.get("DASHBOARD_DB_URL")
    if url:
        return url
    DEFAULT_DB_FILE.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DEFAULT_DB_FILE}"


def normalise_url(url: str) -> str:
    """A plain `postgresql://` (or Heroku-style `postgres://`) URL goes through psycopg 3, the driver we ship."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def make_engine(url: str | None = None) -> Engine:
    """An engine with SQLite tuned for many writers: WAL, busy timeout, BEGIN IMMEDIATE on writes."""
    url = normalise_url(url or default_db_url())
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        if path in ("", ":memory:"):  # one shared connection, or every checkout sees an empty database
            engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool)
        else:
            engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                                   pool_size=32, max_overflow=32, pool_timeout=60)

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record):  # pragma: no cover - exercised through the store
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.execute("PRAGMA synchronous=FULL")  # an acknowledged answer survives power loss
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # pragma: no cover - exercised through the store
            mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=20)
    return engine


def _migrate_to_2(conn: Connection) -> None:
    """Version 2: an optional reason on each judgment event, and the fit-run audit table."""
    conn.exec_driver_sql(f"ALTER TABLE judgments ADD COLUMN reason VARCHAR({MAX_REASON_LENGTH})")
    fit_runs.create(conn, checkfirst=True)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _migrate_to_2}


class ElicitationStore:
    """Sessions, stakeholders, assignments and judgment events with per-role access checks.

    Stakeholder methods take the stakeholder's resume token and only ever touch that
    stakeholder's rows; facilitator methods take the session's facilitator key.
    """

    def __init__(self, url: str | None = None, engine: Engine | None = None):
        self.engine = engine or make_engine(url)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        # SQLite's busy handler backs off by sleeping, which starves some threads under load;
        # writers of this process queue on a lock instead (other processes still use busy_timeout).
        self._write_lock = threading.Lock() if self.is_sqlite else None
        self._memo: dict[str, tuple] = {}
        self._create_schema()

    # ------------------------------------------------------------------ plumbing
    def _write(self) -> Any:
        """A connection whose transaction takes the write lock up front (SQLite) and commits on exit."""
        if self._write_lock is not None:
            return _Tx(lambda: self.engine.connect().execution_options(sqlite_begin="IMMEDIATE"),
                       self._write_lock)
        return _Tx(self.engine.connect)

    def _read(self) -> Any:
        return _Tx(self.engine.connect)

    def _create_schema(self) -> None:
        """Create missing tables, then bring an older database up to SCHEMA_VERSION in place."""
        for attempt in range(5):
            try:
                metadata.create_all(self.engine)
                with self._write() as conn:
                    self._upgrade(conn)
                return
            except OperationalError:
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def _upgrade(self, conn: Connection) -> None:
        """Apply the missing migrations in one transaction, appending one version row per step."""
        if not self.is_sqlite:  # SQLite holds the write lock already (BEGIN IMMEDIATE)
            conn.exec_driver_sql("LOCK TABLE schema_version IN EXCLUSIVE MODE")
        found = conn.execute(select(func.max(schema_version.c.version))).scalar()
        if found is None:  # a new database: create_all built the current schema
            conn.execute(insert(schema_version).values(version=SCHEMA_VERSION, applied_at=_now()))
            return
        if found > SCHEMA_VERSION:
            raise ValueError(f"The session database has schema version {found}, newer "
                             f"than this code ({SCHEMA_VERSION}); upgrade the dashboard.")
        for version in range(found + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[version](conn)
            conn.execute(insert(schema_version).values(version=version, applied_at=_now()))

    def schema_version(self) -> int:
        with self._read() as conn:
            return int(conn.execute(select(func.max(schema_version.c.version))).scalar())

    # ------------------------------------------------------------------ facilitator
    def create_session(self, config: SessionConfig, name: str = "", *, simulated: bool = False,
                       n_individuals: int = COMPAS_ROWS) -> CreatedSession:
        """Open a session; returns its join code and the facilitator key (shown once, stored hashed)."""
        if not isinstance(config, SessionConfig):
            raise ValueError("create_session needs a SessionConfig.")
        name = (name or "").strip() or "Untitled session"
        if len(name) > 120:
            raise ValueError("Session names are limited to 120 characters.")
        key = secrets.token_urlsafe(24)
        core = core_pairs(config, n_individuals).tolist()
        for _ in range(20):
            session_id = uuid.uuid4().hex
            code = "".join(secrets.choice(JOIN_ALPHABET) for _ in range(JOIN_CODE_LENGTH))
            try:
                with self._write() as conn:
                    conn.execute(insert(sessions).values(
                        session_id=session_id, name=name, join_code=code,
                        facilitator_key_hash=_digest(key), config=config.to_dict(), core_pairs=core,
                        n_individuals=int(n_individuals), status="open", simulated=bool(simulated),
                        created_at=_now()))
                return CreatedSession(session_id, code, key)
            except IntegrityError:  # join code collision: draw another
                continue
        raise RuntimeError("Could not draw a free join code.")

    def _session_by_key(self, conn: Connection, session_id: str, facilitator_key: str):
        key = _check_secret(facilitator_key, "facilitator key")
        row = conn.execute(select(sessions).where(sessions.c.session_id == str(session_id))).mappings().first()
        if row is None or not hmac.compare_digest(row["facilitator_key_hash"], _digest(key)):
            raise PermissionError("This facilitator key does not open that session.")
        return row

    def open_session(self, join_code: str, facilitator_key: str) -> dict:
        """A facilitator reopens a session by join code and key; returns the session's record."""
        code = self._normalise_code(join_code)
        with self._read() as conn:
            row = conn.execute(select(sessions.c.session_id).where(sessions.c.join_code == code)).first()
            if row is None:
                raise PermissionError("This facilitator key does not open that session.")
            record = self._session_by_key(conn, row[0], facilitator_key)
        return self._public_session(record)

    @staticmethod
    def _public_session(row) -> dict:
        return {"session_id": row["session_id"], "name": row["name"], "join_code": row["join_code"],
                "status": row["status"], "simulated": bool(row["simulated"]),
                "created_at": row["created_at"], "config": dict(row["config"]),
                "n_individuals": int(row["n_individuals"])}

    def set_status(self, session_id: str, facilitator_key: str, status: str) -> None:
        """Close a session to new answers ("closed") or reopen it ("open")."""
        if status not in ("open", "closed"):
            raise ValueError("Status must be 'open' or 'closed'.")
        with self._write() as conn:
            self._session_by_key(conn, session_id, facilitator_key)
            conn.execute(sessions.update().where(sessions.c.session_id == session_id).values(status=status))

    def session_info(self, join_code: str) -> dict:
        """What a stakeholder may see before joining: name, status and the card settings."""
        code = self._normalise_code(join_code)
        with self._read() as conn:
            row = conn.execute(select(sessions).where(sessions.c.join_code == code)).mappings().first()
        if row is None:
            raise ValueError(f"No session has the join code {code!r}; check it with your facilitator.")
        info = self._public_session(row)
        return {k: info[k] for k in ("name", "join_code", "status", "simulated", "config")}

    # ------------------------------------------------------------------ stakeholders
    @staticmethod
    def _normalise_code(join_code: Any) -> str:
        if not isinstance(join_code, str) or not join_code.strip():
            raise ValueError("Enter the join code your facilitator gave you.")
        code = join_code.strip().upper().replace(" ", "").replace("-", "")
        if len(code) != JOIN_CODE_LENGTH or any(c not in JOIN_ALPHABET for c in code):
            raise ValueError(f"A join code has {JOIN_CODE_LENGTH} letters and digits, e.g. 'K7QM2X'; "
                             f"got {join_code.strip()[:20]!r}.")
        return code

    def join(self, join_code: str, pseudonym: str, *, simulated: bool = False) -> StakeholderLogin:
        """Join a session under a pseudonym; the assignment is drawn once and stored (spec 4.3)."""
        code = self._normalise_code(join_code)
        if not isinstance(pseudonym, str) or not pseudonym.strip():
            raise ValueError("Enter a name or nickname (a pseudonym is fine).")
        pseudonym = " ".join(pseudonym.split())
        if len(pseudonym) > MAX_NAME_LENGTH:
            raise ValueError(f"Names are limited to {MAX_NAME_LENGTH} characters.")
        token = secrets.token_urlsafe(18)
        stakeholder_id = uuid.uuid4().hex
        with self._write() as conn:
            row = conn.execute(select(sessions).where(sessions.c.join_code == code)).mappings().first()
            if row is None:
                raise ValueError(f"No session has the join code {code!r}; check it with your facilitator.")
            if row["status"] != "open":
                raise ValueError("This session is closed to new answers.")
            taken = conn.execute(select(stakeholders.c.stakeholder_id).where(
                stakeholders.c.session_id == row["session_id"], stakeholders.c.pseudonym == pseudonym)).first()
            if taken is not None:
                raise ValueError(f"The name {pseudonym!r} is already taken in this session. Choose "
                                 "another, or resume with your resume code.")
            config = SessionConfig.from_dict(dict(row["config"]))
            plan = sample_assignment(config, np.asarray(row["core_pairs"], dtype=np.int64).reshape(-1, 2),
                                     int(row["n_individuals"]),
                                     np.random.default_rng(stakeholder_seed(config.seed, pseudonym)))
            conn.execute(insert(stakeholders).values(
                stakeholder_id=stakeholder_id, session_id=row["session_id"], pseudonym=pseudonym,
                token_hash=_digest(token), simulated=bool(simulated), joined_at=_now()))
            records = plan.assign(session_id=row["session_id"], stakeholder_id=stakeholder_id)
            conn.execute(insert(assignments), [
                {k: (int(v) if isinstance(v, (np.integer,)) else v) for k, v in r.items()}
                for r in records[["session_id", "stakeholder_id", "position", "a", "b", "kind",
                                  "repeat_of"]].to_dict("records")])
        return StakeholderLogin(row["session_id"], stakeholder_id, pseudonym, token)

    def _stakeholder(self, conn: Connection, token: str):
        token = _check_secret(token, "resume code")
        row = conn.execute(_Q_TOKEN, {"token_hash": _digest(token)}).mappings().first()
        if row is None or not hmac.compare_digest(row["token_hash"], _digest(token)):
            raise PermissionError("This resume code is not valid; check it or join again.")
        return row

    def resume(self, token: str) -> StakeholderLogin:
        """Find the stakeholder behind a resume token (after a disconnect or in a new tab)."""
        with self._read() as conn:
            row = self._stakeholder(conn, token)
        return StakeholderLogin(row["session_id"], row["stakeholder_id"], row["pseudonym"], token.strip())

    def my_session(self, token: str) -> dict:
        """The session a stakeholder belongs to: name, status and card settings (no keys)."""
        with self._read() as conn:
            me = self._stakeholder(conn, token)
            row = conn.execute(select(sessions).where(sessions.c.session_id == me["session_id"])).mappings().first()
        info = self._public_session(row)
        return {k: info[k] for k in ("name", "join_code", "status", "simulated", "config")}

    def my_assignment(self, token: str) -> pd.DataFrame:
        """The stakeholder's own cards with their live answers (None where unanswered)."""
        with self._read() as conn:
            me = self._stakeholder(conn, token)
            plan = pd.DataFrame(conn.execute(
                select(assignments.c.position, assignments.c.a, assignments.c.b, assignments.c.kind,
                       assignments.c.repeat_of)
                .where(assignments.c.session_id == me["session_id"],
                       assignments.c.stakeholder_id == me["stakeholder_id"])
                .order_by(assignments.c.position)).mappings().all())
            live = self._live(conn, me["session_id"], me["stakeholder_id"])
        plan = plan.merge(live[["position", "response", "revision"]], on="position", how="left")  # no reasons
        plan["response"] = plan["response"].astype(object).where(plan["response"].notna(), None)
        plan["revision"] = plan["revision"].astype("Int64")
        return plan

    def _live(self, conn: Connection, session_id: str, stakeholder_id: str | None = None) -> pd.DataFrame:
        """Latest event per (stakeholder, position); retractions leave the position unanswered."""
        cond = [judgments.c.session_id == session_id]
        if stakeholder_id is not None:
            cond.append(judgments.c.stakeholder_id == stakeholder_id)
        latest = (select(func.max(judgments.c.seq).label("seq")).where(*cond)
                  .group_by(judgments.c.stakeholder_id, judgments.c.position).subquery())
        rows = conn.execute(select(judgments.c.stakeholder_id, judgments.c.position, judgments.c.response,
                                   judgments.c.revision, judgments.c.confidence, judgments.c.latency_ms,
                                   judgments.c.created_at, judgments.c.reason, judgments.c.seq)
                            .join(latest, latest.c.seq == judgments.c.seq)).mappings().all()
        frame = pd.DataFrame(rows, columns=["stakeholder_id", "position", "response", "revision",
                                            "confidence", "latency_ms", "created_at", "reason", "seq"])
        return frame[frame["response"] != RETRACT].reset_index(drop=True)

    def next_position(self, token: str) -> int | None:
        """Where to resume: the first card without a live answer (None when all are answered)."""
        plan = self.my_assignment(token)
        open_ = plan.loc[plan["response"].isna(), "position"]
        return None if open_.empty else int(open_.iloc[0])

    def record_answer(self, token: str, position: int, response: str, event_id: str, *,
                      confidence: int | None = None, latency_ms: float | None = None,
                      reason: str | None = None) -> bool:
        """Append one answer in its own transaction; False if this event id was already stored.

        `response` is an option of the session's mode, "skip", or "retract" (undo). The revision
        is computed inside the write transaction, so concurrent tabs cannot collide. `reason` is
        optional free text (see check_reason); an undo carries none.
        """
        event_id = self._check_event(event_id)
        for attempt in range(3):
            # Checks that only read run outside the write lock, from a per-token memo after the first.
            me, values = self._checked(token, position, response, confidence, latency_ms, reason)
            try:
                with self._write() as conn:
                    self._insert(conn, me, event_id, values)
                return True
            except IntegrityError:
                # The same event id stored already (a re-delivered click), a revision clash on
                # PostgreSQL, or the stakeholder withdrawn by another process: re-check and retry.
                self._memo.pop(_digest(token.strip()), None)
                with self._read() as conn:
                    if conn.execute(_Q_EVENT, {"event_id": event_id}).first():
                        return False
                if attempt == 2:
                    raise
            except OperationalError:
                if attempt == 2:
                    raise
                time.sleep(0.05 * (attempt + 1))
        return False  # pragma: no cover

    def _checked(self, token: str, position: Any, response: Any, confidence: Any,
                 latency_ms: Any, reason: Any = None) -> tuple[dict, dict]:
        """Validate an answer; the stakeholder, their cards and the session mode are memoised per token."""
        token = _check_secret(token, "resume code")
        key = _digest(token)
        memo = self._memo.get(key)
        if memo is None:
            with self._read() as conn:
                me = dict(self._stakeholder(conn, token))
                mode = conn.execute(_Q_SESSION, {"sid": me["session_id"]}).mappings().first()["config"]["response_mode"]
                cards = {r[0] for r in conn.execute(select(assignments.c.position).where(
                    assignments.c.session_id == me["session_id"],
                    assignments.c.stakeholder_id == me["stakeholder_id"]))}
            memo = (me, RESPONSE_MODES[mode], frozenset(cards))
            if len(self._memo) > 10_000:
                self._memo.clear()
            self._memo[key] = memo
        me, options, cards = memo
        return me, self._check_values(options, cards, position, response, confidence, latency_ms, reason)

    @staticmethod
    def _check_values(options: tuple, cards: frozenset, position: Any, response: Any, confidence: Any,
                      latency_ms: Any, reason: Any = None) -> dict:
        if response not in (*options, SKIP, RETRACT):
            raise ValueError(f"Unknown answer {response!r}; this session accepts {list(options)}, "
                             f"'{SKIP}' or '{RETRACT}'.")
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise ValueError(f"Card position must be a whole number, got {position!r}.")
        position = int(position)
        if position not in cards:
            raise ValueError(f"Card {position} is not in your assignment.")
        if confidence is not None and not (isinstance(confidence, (int, np.integer)) and 1 <= confidence <= 5):
            raise ValueError("Confidence must be a whole number from 1 to 5.")
        if latency_ms is not None:
            latency_ms = float(latency_ms)
            if not np.isfinite(latency_ms) or latency_ms < 0:
                raise ValueError("Latency must be a non-negative number of milliseconds.")
        reason = check_reason(reason)
        if reason is not None and response == RETRACT:
            raise ValueError("An undo carries no reason; give it with the new answer instead.")
        return {"position": position, "response": response,
                "confidence": None if confidence is None else int(confidence), "latency_ms": latency_ms,
                "reason": reason}

    def record_answers(self, token: str, answers: pd.DataFrame) -> int:
        """Append many answers of one stakeholder in one transaction (demo panels, imports)."""
        need = {"position", "response"}
        if not need <= set(answers.columns):
            raise ValueError(f"Answers need columns {sorted(need)}.")
        rows = answers.to_dict("records")
        checked = [self._checked(token, r["position"], r["response"], r.get("confidence"), r.get("latency_ms"),
                                 _opt(r.get("reason")))
                   for r in rows]
        me = checked[0][0] if checked else None
        checked = [values for _, values in checked]
        with self._write() as conn:
            for r, values in zip(rows, checked):
                self._insert(conn, me, r.get("event_id") or uuid.uuid4().hex, values)
        return len(rows)

    @staticmethod
    def _check_event(event_id: Any) -> str:
        if not isinstance(event_id, str) or not 8 <= len(event_id) <= 64:
            raise ValueError("Each answer needs an event id of 8 to 64 characters.")
        return event_id

    def _insert(self, conn: Connection, me, event_id: str, values: dict) -> None:
        """The write: status re-checked and the revision computed inside the same transaction."""
        status = conn.execute(_Q_STATUS, {"sid": me["session_id"]}).scalar()
        if status != "open":
            raise ValueError("This session is closed; answers can no longer be changed.")
        revision = conn.execute(_Q_REVISION, {"sid": me["session_id"], "uid": me["stakeholder_id"],
                                              "pos": values["position"]}).scalar() + 1
        conn.execute(_INSERT_EVENT, {"event_id": event_id, "session_id": me["session_id"],
                                     "stakeholder_id": me["stakeholder_id"], "revision": int(revision),
                                     "created_at": _now(), **values})

    def my_answers(self, token: str) -> pd.DataFrame:
        """The stakeholder's own live answers (position, pair and response)."""
        plan = self.my_assignment(token)
        return plan[plan["response"].notna()].reset_index(drop=True)

    # ------------------------------------------------------------------ facilitator reads
    def progress(self, session_id: str, facilitator_key: str) -> pd.DataFrame:
        """Per stakeholder: cards, live answers, skips, share "same", self-agreement on repeats."""
        from core.fairness.elicitation import self_agreement
        with self._read() as conn:
            session = self._session_by_key(conn, session_id, facilitator_key)
            people = pd.DataFrame(conn.execute(
                select(stakeholders.c.stakeholder_id, stakeholders.c.pseudonym, stakeholders.c.simulated,
                       stakeholders.c.joined_at).where(stakeholders.c.session_id == session_id)
                .order_by(stakeholders.c.joined_at)).mappings().all(),
                columns=["stakeholder_id", "pseudonym", "simulated", "joined_at"])
            frame = self._judgment_frame(conn, session_id)
            n_items = SessionConfig.from_dict(dict(session["config"])).n_items
        cols = ["stakeholder", "answered", "of", "skipped", "share_same", "self_agreement",
                "last_answer", "simulated"]
        if people.empty:
            return pd.DataFrame(columns=cols)
        fav = int(session["config"]["favourable_label"])
        f = frame.assign(is_skip=frame["response"].eq(SKIP), is_same=frame["response"].eq("same"))
        per = f.groupby("stakeholder_id").agg(answered=("response", "size"), skipped=("is_skip", "sum"),
                                               n_same=("is_same", "sum"), last=("created_at", "max"))
        out = people.set_index("stakeholder_id").join(per, how="left")
        out["answered"] = out["answered"].fillna(0).astype(int)
        out["skipped"] = out["skipped"].fillna(0).astype(int)
        judged = (out["answered"] - out["skipped"]).replace(0, np.nan)
        out["share_same"] = out["n_same"] / judged
        sa = self_agreement(frame.rename(columns={"stakeholder_id": "stakeholder"}), fav) if len(frame) else None
        out["self_agreement"] = np.nan
        if sa is not None and len(sa):
            out.loc[sa["stakeholder"], "self_agreement"] = sa["self_agreement"].to_numpy()
        out = out.reset_index()
        return pd.DataFrame({"stakeholder": out["pseudonym"], "answered": out["answered"], "of": n_items,
                             "skipped": out["skipped"], "share_same": out["share_same"].astype(float),
                             "self_agreement": out["self_agreement"].astype(float),
                             "last_answer": out["last"], "simulated": out["simulated"].astype(bool)})

    def _judgment_frame(self, conn: Connection, session_id: str) -> pd.DataFrame:
        live = self._live(conn, session_id)
        plan = pd.DataFrame(conn.execute(
            select(assignments.c.stakeholder_id, assignments.c.position, assignments.c.a, assignments.c.b,
                   assignments.c.kind, assignments.c.repeat_of)
            .where(assignments.c.session_id == session_id)).mappings().all(),
            columns=["stakeholder_id", "position", "a", "b", "kind", "repeat_of"])
        names = pd.DataFrame(conn.execute(
            select(stakeholders.c.stakeholder_id, stakeholders.c.pseudonym)
            .where(stakeholders.c.session_id == session_id)).mappings().all(),
            columns=["stakeholder_id", "pseudonym"])
        out = live.merge(plan, on=["stakeholder_id", "position"], how="inner").merge(names, on="stakeholder_id")
        out = out.sort_values(["pseudonym", "position"]).reset_index(drop=True)
        return out

    def judgments(self, session_id: str, facilitator_key: str) -> pd.DataFrame:
        """Everyone's live answers with their pairs and reasons (facilitator only).

        The input of aggregate_constraints; the `reason` column is sensitive free text.
        """
        with self._read() as conn:
            self._session_by_key(conn, session_id, facilitator_key)
            frame = self._judgment_frame(conn, session_id)
        frame["reason"] = frame["reason"].astype(object).where(frame["reason"].notna(), None)
        return frame.rename(columns={"pseudonym": "stakeholder"})[
            ["stakeholder", "position", "a", "b", "kind", "repeat_of", "response", "revision",
             "confidence", "latency_ms", "created_at", "reason"]]

    def event_log(self, session_id: str, facilitator_key: str) -> pd.DataFrame:
        """Every stored event in database order, retractions and earlier revisions included."""
        with self._read() as conn:
            self._session_by_key(conn, session_id, facilitator_key)
            rows = conn.execute(select(judgments, stakeholders.c.pseudonym)
                                .join(stakeholders, stakeholders.c.stakeholder_id == judgments.c.stakeholder_id)
                                .where(judgments.c.session_id == session_id)
                                .order_by(judgments.c.seq)).mappings().all()
        return pd.DataFrame(rows)

    def config(self, session_id: str, facilitator_key: str) -> SessionConfig:
        with self._read() as conn:
            row = self._session_by_key(conn, session_id, facilitator_key)
        return SessionConfig.from_dict(dict(row["config"]))

    # ------------------------------------------------------------------ export / import
    def export_session(self, session_id: str, facilitator_key: str) -> dict:
        """The whole session as plain data: settings, pseudonyms, assignments and all events.

        Keys and tokens are left out; an import gets fresh ones.
        """
        with self._read() as conn:
            s = self._session_by_key(conn, session_id, facilitator_key)
            people = conn.execute(select(stakeholders.c.stakeholder_id, stakeholders.c.pseudonym,
                                         stakeholders.c.simulated, stakeholders.c.joined_at)
                                  .where(stakeholders.c.session_id == session_id)).mappings().all()
            plan = conn.execute(select(assignments.c.stakeholder_id, assignments.c.position, assignments.c.a,
                                       assignments.c.b, assignments.c.kind, assignments.c.repeat_of)
                                .where(assignments.c.session_id == session_id)
                                .order_by(assignments.c.stakeholder_id, assignments.c.position)).mappings().all()
            events = conn.execute(select(judgments.c.seq, judgments.c.event_id, judgments.c.stakeholder_id,
                                         judgments.c.position, judgments.c.revision, judgments.c.response,
                                         judgments.c.confidence, judgments.c.latency_ms, judgments.c.created_at,
                                         judgments.c.reason)
                                  .where(judgments.c.session_id == session_id)
                                  .order_by(judgments.c.seq)).mappings().all()
            runs = [_public_run(r) for r in self._runs(conn, session_id)]
        alias = {p["stakeholder_id"]: f"s{n + 1:03d}" for n, p in enumerate(people)}
        return {
            "format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION,
            "session": {"name": s["name"], "created_at": s["created_at"], "status": s["status"],
                        "simulated": bool(s["simulated"]), "config": dict(s["config"]),
                        "core_pairs": [list(map(int, p)) for p in s["core_pairs"]],
                        "n_individuals": int(s["n_individuals"])},
            "stakeholders": [{"id": alias[p["stakeholder_id"]], "pseudonym": p["pseudonym"],
                              "simulated": bool(p["simulated"]), "joined_at": p["joined_at"]} for p in people],
            "assignments": [{"stakeholder": alias[r["stakeholder_id"]], "position": r["position"], "a": r["a"],
                             "b": r["b"], "kind": r["kind"], "repeat_of": r["repeat_of"]} for r in plan],
            "events": [{"stakeholder": alias[e["stakeholder_id"]], "event_id": e["event_id"],
                        "position": e["position"], "revision": e["revision"], "response": e["response"],
                        "confidence": e["confidence"], "latency_ms": e["latency_ms"],
                        "created_at": e["created_at"], "reason": e["reason"]} for e in events],
            "fit_runs": runs,
        }

    def export_json(self, session_id: str, facilitator_key: str) -> str:
        return json.dumps(self.export_session(session_id, facilitator_key), indent=1, sort_keys=True)

    def export_csv(self, session_id: str, facilitator_key: str) -> str:
        """One CSV row per event with its pair; the settings ride along in a leading comment line.

        Fit runs are left out (they are in the JSON export).
        """
        data = self.export_session(session_id, facilitator_key)
        events = pd.DataFrame(data["events"], columns=["stakeholder", "event_id", "position", "revision",
                                                       "response", "confidence", "latency_ms", "created_at",
                                                       "reason"])
        plan = pd.DataFrame(data["assignments"], columns=["stakeholder", "position", "a", "b", "kind", "repeat_of"])
        people = pd.DataFrame(data["stakeholders"], columns=["id", "pseudonym", "simulated", "joined_at"])
        # Assignments without events still need a row so the import can rebuild every card.
        rows = plan.merge(events, on=["stakeholder", "position"], how="left")
        rows = rows.merge(people.rename(columns={"id": "stakeholder"}), on="stakeholder", how="left")
        header = json.dumps({"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION,
                             "session": data["session"]}, sort_keys=True)
        for col in FREE_TEXT_COLUMNS:
            rows[col] = rows[col].map(_guard_formula)
        buf = io.StringIO()
        buf.write("# " + header + "\n")
        rows.to_csv(buf, index=False)
        return buf.getvalue()

    def import_session(self, payload: str | bytes | dict, *, name: str | None = None) -> CreatedSession:
        """Load an exported session (JSON text/dict or CSV text) as a new session with new keys."""
        data = parse_export(payload)
        s = data["session"]
        config = SessionConfig.from_dict(s["config"])
        created = self.create_session(config, name or f"{s['name']} (imported)",
                                      simulated=bool(s.get("simulated", False)),
                                      n_individuals=int(s["n_individuals"]))
        sid = created.session_id
        ids = {p["id"]: uuid.uuid4().hex for p in data["stakeholders"]}
        with self._write() as conn:
            conn.execute(sessions.update().where(sessions.c.session_id == sid)
                         .values(core_pairs=s["core_pairs"], status=s.get("status", "open")))
            if ids:
                conn.execute(insert(stakeholders), [
                    {"stakeholder_id": ids[p["id"]], "session_id": sid, "pseudonym": p["pseudonym"],
                     "token_hash": _digest(secrets.token_urlsafe(18)), "simulated": bool(p["simulated"]),
                     "joined_at": p["joined_at"]} for p in data["stakeholders"]])
            if data["assignments"]:
                conn.execute(insert(assignments), [
                    {"session_id": sid, "stakeholder_id": ids[r["stakeholder"]], "position": r["position"],
                     "a": r["a"], "b": r["b"], "kind": r["kind"], "repeat_of": r["repeat_of"]}
                    for r in data["assignments"]])
            if data["events"]:
                conn.execute(insert(judgments), [
                    {"event_id": uuid.uuid4().hex, "session_id": sid, "stakeholder_id": ids[e["stakeholder"]],
                     "position": e["position"], "revision": e["revision"], "response": e["response"],
                     "confidence": e["confidence"], "latency_ms": e["latency_ms"], "created_at": e["created_at"],
                     "reason": e["reason"]}
                    for e in data["events"]])
            if data["fit_runs"]:
                conn.execute(insert(fit_runs), [{**run, "run_id": uuid.uuid4().hex, "session_id": sid}
                                                for run in data["fit_runs"]])
        return created

    def delete_stakeholder(self, session_id: str, facilitator_key: str, pseudonym: str) -> int:
        """Withdraw one stakeholder: delete their events, assignment and record; returns events removed."""
        with self._write() as conn:
            self._session_by_key(conn, session_id, facilitator_key)
            row = conn.execute(select(stakeholders.c.stakeholder_id).where(
                stakeholders.c.session_id == session_id, stakeholders.c.pseudonym == pseudonym)).first()
            if row is None:
                raise ValueError(f"No stakeholder named {pseudonym!r} in this session.")
            n = conn.execute(judgments.delete().where(judgments.c.stakeholder_id == row[0])).rowcount
            conn.execute(assignments.delete().where(assignments.c.stakeholder_id == row[0]))
            conn.execute(stakeholders.delete().where(stakeholders.c.stakeholder_id == row[0]))
            self._supersede_runs_of(conn, session_id, pseudonym)
        self._memo.clear()
        return int(n)

    # ------------------------------------------------------------------ fit runs (audit log)
    def record_fit_run(self, session_id: str, facilitator_key: str, *, constraint_hash: str,
                       aggregation: dict, learner: dict, summary: dict,
                       code_version: str | None = None) -> tuple[str, bool]:
        """Log one learner run on the session's pooled constraints (facilitator only).

        Idempotent: the same constraint-set hash with the same aggregation and learner settings
        maps to one row. Returns (run id, whether a row was written now).
        """
        values = _check_run(constraint_hash, aggregation, learner, summary, code_version)
        settings_hash = config_digest({"aggregation": values["aggregation"], "learner": values["learner"]})
        where = (fit_runs.c.session_id == session_id, fit_runs.c.constraint_hash == values["constraint_hash"],
                 fit_runs.c.settings_hash == settings_hash)
        try:
            with self._write() as conn:
                self._session_by_key(conn, session_id, facilitator_key)
                found = conn.execute(select(fit_runs.c.run_id).where(*where)).scalar()
                if found is not None:
                    return found, False
                run_id = uuid.uuid4().hex
                conn.execute(insert(fit_runs).values(run_id=run_id, session_id=session_id, created_at=_now(),
                                                     settings_hash=settings_hash, superseded=False,
                                                     note=None, **values))
                return run_id, True
        except IntegrityError:  # another tab or process logged the same run first
            with self._read() as conn:
                found = conn.execute(select(fit_runs.c.run_id).where(*where)).scalar()
            if found is None:
                raise
            return found, False

    def fit_runs(self, session_id: str, facilitator_key: str) -> list[dict]:
        """The session's logged learner runs, oldest first, as plain data (facilitator only)."""
        with self._read() as conn:
            self._session_by_key(conn, session_id, facilitator_key)
            return [_public_run(r) | {"run_id": r["run_id"]} for r in self._runs(conn, session_id)]

    @staticmethod
    def _runs(conn: Connection, session_id: str) -> list:
        return conn.execute(select(fit_runs).where(fit_runs.c.session_id == session_id)
                            .order_by(fit_runs.c.created_at, fit_runs.c.run_id)).mappings().all()

    def _supersede_runs_of(self, conn: Connection, session_id: str, pseudonym: str) -> None:
        """Withdrawal: runs that pooled this stakeholder are superseded and forget their name."""
        note = (f"Superseded on {_now()[:10]}: a pooled stakeholder was withdrawn; "
                "refit on the remaining answers.")
        for run in self._runs(conn, session_id):
            pooled = list(run["aggregation"].get("stakeholders") or [])
            if pseudonym not in pooled:
                continue
            aggregation = {**run["aggregation"],
                           "stakeholders": [WITHDRAWN if p == pseudonym else p for p in pooled]}
            update = {"aggregation": aggregation}
            if not run["superseded"]:
                update.update(superseded=True, note=note)
            conn.execute(fit_runs.update().where(fit_runs.c.run_id == run["run_id"]).values(**update))

    def dispose(self) -> None:
        self.engine.dispose()


class _Tx:
    """Context manager: begin on enter, commit on success, roll back on error, always close."""

    def __init__(self, connect, lock: threading.Lock | None = None):
        self.connect, self.lock = connect, lock

    def __enter__(self) -> Connection:
        self.conn = self.connect()  # pool checkout outside the lock
        if self.lock is not None:
            self.lock.acquire()
        try:
            self.tx = self.conn.begin()
        except BaseException:
            self.conn.close()
            if self.lock is not None:
                self.lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.tx.commit()
            else:
                self.tx.rollback()
        finally:
            self.conn.close()
            if self.lock is not None:
                self.lock.release()


# ---------------------------------------------------------------------- fit runs

WITHDRAWN = "(withdrawn stakeholder)"
_RUN_FIELDS = ("created_at", "constraint_hash", "aggregation", "learner", "code_version", "n_constraints",
               "unconstrained_error", "frontier", "superseded", "note")


def constraint_set_hash(constraints: pd.DataFrame) -> str:
    """SHA-256 of a constraint frame's pairs and weights, independent of row order and dtypes."""
    cols = [c for c in ("i", "j", "weight", "w_ij", "w_ji") if c in constraints.columns]
    if not {"i", "j"} <= set(cols):
        raise ValueError("The constraint table needs columns i and j.")
    frame = constraints[cols].sort_values(["i", "j"], kind="stable")
    rows = [[int(r[0]), int(r[1]), *(round(float(v), 12) for v in r[2:])]
            for r in frame.itertuples(index=False)]
    return config_digest({"columns": cols, "rows": rows})


def code_version() -> str:
    """The dashboard's version for the audit log: `DASHBOARD_CODE_VERSION`, else the digest of core's
    source (the one the result cache is namespaced by), which needs no git checkout."""
    return os.environ.get("DASHBOARD_CODE_VERSION", "")[:64] or f"core-{code_digest()}"


def frontier_summary(points: pd.DataFrame, n_constraints: int) -> dict:
    """The metrics a fit run logs: constraint count, least-constrained error, each frontier point."""
    need = {"target", "error", "unfairness"}
    if not need <= set(points.columns) or points.empty:
        raise ValueError(f"A frontier needs rows with columns {sorted(need)}.")
    rows = points.sort_values("target")
    frontier = [{"target": float(r["target"]), "error": float(r["error"]), "unfairness": float(r["unfairness"]),
                 "on_hull": bool(r.get("on_hull", False))} for _, r in rows.iterrows()]
    return {"n_constraints": int(n_constraints), "unconstrained_error": frontier[-1]["error"],
            "frontier": frontier}


def _finite(value: Any, what: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}.") from None
    if not np.isfinite(f):
        raise ValueError(f"{what} must be finite, got {value!r}.")
    return f


def _check_run(constraint_hash: Any, aggregation: Any, learner: Any, summary: Any,
               code_version_: Any) -> dict:
    """Validate a fit run's fields; returns the columns to store (plain JSON-able data)."""
    if not isinstance(constraint_hash, str) or not 8 <= len(constraint_hash) <= 64:
        raise ValueError("A fit run needs the constraint-set hash (8 to 64 characters).")
    for part, value in (("aggregation", aggregation), ("learner", learner), ("summary", summary)):
        if not isinstance(value, dict):
            raise ValueError(f"A fit run's {part} must be a dictionary of settings.")
    try:
        aggregation = json.loads(json.dumps(aggregation, allow_nan=False))
        learner = json.loads(json.dumps(learner, allow_nan=False))
    except (TypeError, ValueError):
        raise ValueError("A fit run's settings must be plain JSON values (finite numbers, text, lists).") from None
    frontier = summary.get("frontier")
    if not isinstance(frontier, list) or not all(isinstance(p, dict) for p in frontier):
        raise ValueError("A fit run's frontier must be a list of points.")
    points = [{"target": _finite(p.get("target"), "target"), "error": _finite(p.get("error"), "error"),
               "unfairness": _finite(p.get("unfairness"), "unfairness"), "on_hull": bool(p.get("on_hull"))}
              for p in frontier]
    n = _int(summary.get("n_constraints"), "n_constraints")
    if n < 0:
        raise ValueError("n_constraints must be >= 0.")
    error = _opt(summary.get("unconstrained_error"))
    if code_version_ is not None and (not isinstance(code_version_, str) or len(code_version_) > 64):
        raise ValueError("The code version must be text of at most 64 characters.")
    return {"constraint_hash": constraint_hash, "aggregation": aggregation, "learner": learner,
            "code_version": code_version_, "n_constraints": n,
            "unconstrained_error": None if error is None else _finite(error, "unconstrained_error"),
            "frontier": points}


def _public_run(row) -> dict:
    """A stored run as exported: everything but the internal ids."""
    return {k: (bool(row[k]) if k == "superseded" else row[k]) for k in _RUN_FIELDS}


def _imported_run(run: Any) -> dict:
    """A fit run read from an export, validated like a new one."""
    if not isinstance(run, dict):
        raise ValueError("Every fit run must be an object.")
    values = _check_run(run.get("constraint_hash"), run.get("aggregation"), run.get("learner"), run,
                        _opt(run.get("code_version")))
    note = _opt(run.get("note"))
    return {**values, "settings_hash": config_digest({"aggregation": values["aggregation"],
                                                     "learner": values["learner"]}),
            "created_at": str(run.get("created_at") or _now())[:40],
            "superseded": bool(run.get("superseded", False)),
            "note": None if note is None else str(note)[:MAX_NOTE_LENGTH]}


# ---------------------------------------------------------------------- parsing exports

_EVENT_RESPONSES = {"same", "differ", "a_at_least_b", "b_at_least_a", "none", SKIP, RETRACT}


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a whole number, got {value!r}.")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a whole number, got {value!r}.") from None
    if not np.isfinite(f) or f != int(f):
        raise ValueError(f"{what} must be a whole number, got {value!r}.")
    return int(f)


def _opt(value: Any) -> Any:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return None
    return value


def parse_export(payload: str | bytes | dict) -> dict:
    """Validate an exported session (JSON or CSV) and return it as plain data; ValueError if malformed."""
    if isinstance(payload, bytes):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("The session file is not UTF-8 text.") from None
    if isinstance(payload, str):
        if len(payload) > 50_000_000:
            raise ValueError("The session file is larger than 50 MB.")
        stripped = payload.lstrip()
        if stripped.startswith("{"):
            try:
                payload = json.loads(stripped)
            except json.JSONDecodeError as err:
                raise ValueError(f"The session file is not valid JSON: {err.msg} (line {err.lineno}).") from None
        elif stripped.startswith("# {"):
            payload = _parse_csv_export(stripped)
        else:
            raise ValueError("Not a session export: expected the JSON or CSV written by 'Export session'.")
    if not isinstance(payload, dict) or payload.get("format") != EXPORT_FORMAT:
        raise ValueError("Not a session export: the 'format' field is missing or wrong.")
    if _int(payload.get("schema_version"), "schema_version") > SCHEMA_VERSION:
        raise ValueError("The export comes from a newer version of the dashboard.")
    for part in ("session", "stakeholders", "assignments", "events"):
        if part not in payload:
            raise ValueError(f"The session export has no {part!r} section.")
    s = payload["session"]
    if not isinstance(s, dict) or "config" not in s:
        raise ValueError("The session export has no session settings.")
    config = SessionConfig.from_dict(s["config"])
    n = _int(s.get("n_individuals", COMPAS_ROWS), "n_individuals")
    core = s.get("core_pairs", [])
    if not isinstance(core, list) or any(not isinstance(p, list) or len(p) != 2 for p in core):
        raise ValueError("core_pairs must be a list of [i, j] pairs.")
    s = {**s, "core_pairs": [[_int(p[0], "core pair"), _int(p[1], "core pair")] for p in core],
         "name": str(s.get("name", "Imported session"))[:100], "n_individuals": n,
         "status": s.get("status", "open") if s.get("status") in ("open", "closed") else "open"}
    people, seen = [], set()
    for p in payload["stakeholders"]:
        if not isinstance(p, dict) or not isinstance(p.get("id"), str) or not isinstance(p.get("pseudonym"), str):
            raise ValueError("Every stakeholder needs a text 'id' and 'pseudonym'.")
        if p["id"] in seen:
            raise ValueError(f"Stakeholder id {p['id']!r} appears twice.")
        if not p["pseudonym"].strip() or len(p["pseudonym"]) > MAX_NAME_LENGTH:
            raise ValueError(f"Stakeholder {p['id']!r} has an empty or over-long pseudonym.")
        seen.add(p["id"])
        people.append({"id": p["id"], "pseudonym": p["pseudonym"], "simulated": bool(p.get("simulated", False)),
                       "joined_at": str(p.get("joined_at") or _now())})
    if len({p["pseudonym"] for p in people}) != len(people):
        raise ValueError("Two stakeholders share a pseudonym.")
    plan, slots = [], set()
    for r in payload["assignments"]:
        if not isinstance(r, dict) or r.get("stakeholder") not in seen:
            raise ValueError("An assignment refers to an unknown stakeholder.")
        a, b, pos = _int(r.get("a"), "a"), _int(r.get("b"), "b"), _int(r.get("position"), "position")
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise ValueError(f"Assignment pair ({a}, {b}) is not two different individuals in 0..{n - 1}.")
        if r.get("kind") not in ("core", "random", "repeat"):
            raise ValueError(f"Assignment kind must be core, random or repeat, got {r.get('kind')!r}.")
        key = (r["stakeholder"], pos)
        if key in slots:
            raise ValueError(f"Stakeholder {r['stakeholder']!r} has card {pos} twice.")
        slots.add(key)
        plan.append({"stakeholder": r["stakeholder"], "position": pos, "a": a, "b": b, "kind": r["kind"],
                     "repeat_of": _int(r.get("repeat_of", -1), "repeat_of")})
    options = set(RESPONSE_MODES[config.response_mode]) | {SKIP, RETRACT}
    events, revs = [], set()
    for e in payload["events"]:
        if not isinstance(e, dict):
            raise ValueError("Every event must be an object.")
        key = (e.get("stakeholder"), _int(e.get("position"), "position"))
        if key not in slots:
            raise ValueError(f"An event refers to card {key[1]} of {key[0]!r}, which is not assigned.")
        if e.get("response") not in options:
            raise ValueError(f"Event response {e.get('response')!r} is not allowed in this session.")
        rev = _int(e.get("revision"), "revision")
        if rev < 1 or (*key, rev) in revs:
            raise ValueError(f"Revision {rev} of card {key[1]} of {key[0]!r} is invalid or repeated.")
        revs.add((*key, rev))
        conf = _opt(e.get("confidence"))
        lat = _opt(e.get("latency_ms"))
        events.append({"stakeholder": key[0], "position": key[1], "revision": rev, "response": e["response"],
                       "confidence": None if conf is None else _int(conf, "confidence"),
                       "latency_ms": None if lat is None else float(lat),
                       "created_at": str(e.get("created_at") or _now()),
                       "reason": _imported_reason(e.get("reason"), key)})
    # Replay order: by revision within a card, keeping the file order otherwise.
    events.sort(key=lambda ev: (ev["revision"]))
    runs = payload.get("fit_runs") or []  # absent from CSV exports and from schema-1 files
    if not isinstance(runs, list):
        raise ValueError("fit_runs must be a list of runs.")
    runs = [_imported_run(run) for run in runs]
    if len({(r["constraint_hash"], r["settings_hash"]) for r in runs}) != len(runs):
        raise ValueError("A fit run appears twice in the export.")
    return {"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION, "session": s,
            "stakeholders": people, "assignments": plan, "events": events, "fit_runs": runs}


def _imported_reason(value: Any, card: tuple) -> str | None:
    """A reason read from an export (missing in older files); errors name the card."""
    try:
        return check_reason(_opt(value))
    except ValueError as err:
        raise ValueError(f"Card {card[1]} of {card[0]!r}: {err}") from None


FREE_TEXT_COLUMNS = ("reason", "pseudonym")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


def _guard_formula(value):
    """Free text that a spreadsheet would run as a formula gets a leading apostrophe (so does text that
    already starts with one, which makes the import's removal of one apostrophe exact)."""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def _unguard_formula(value):
    return value[1:] if isinstance(value, str) and value.startswith("'") else value


def _parse_csv_export(text_: str) -> dict:
    first, _, body = text_.partition("\n")
    try:
        header = json.loads(first[2:])
    except json.JSONDecodeError:
        raise ValueError("The CSV export's first line is not the settings comment.") from None
    try:
        # Only empty cells are missing: a reason such as "NA" or "None" stays text.
        rows = pd.read_csv(io.StringIO(body), keep_default_na=False, na_values=[""],
                           dtype={"stakeholder": str, "event_id": str, "response": str,
                                  "pseudonym": str, "kind": str, "reason": str})
    except Exception as err:  # pandas raises several parser error types
        raise ValueError(f"The CSV export could not be read: {err}") from None
    for col in FREE_TEXT_COLUMNS:
        if col in rows:
            rows[col] = rows[col].map(_unguard_formula)
    need = {"stakeholder", "position", "a", "b", "kind", "repeat_of", "revision", "response", "pseudonym"}
    missing = need - set(rows.columns)
    if missing:
        raise ValueError(f"The CSV export lacks columns {sorted(missing)}.")
    people = rows.drop_duplicates("stakeholder")
    plan = rows.drop_duplicates(["stakeholder", "position"])
    ev = rows[rows["response"].notna()]
    none_if_nan = lambda v: None if pd.isna(v) else v  # noqa: E731
    return {**header,
            "stakeholders": [{"id": r["stakeholder"], "pseudonym": r["pseudonym"],
                              "simulated": str(r.get("simulated", "False")) == "True",
                              "joined_at": none_if_nan(r.get("joined_at"))} for r in people.to_dict("records")],
            "assignments": plan[["stakeholder", "position", "a", "b", "kind", "repeat_of"]].to_dict("records"),
            "events": [{"stakeholder": r["stakeholder"], "position": r["position"], "revision": r["revision"],
                        "response": r["response"], "confidence": none_if_nan(r.get("confidence")),
                        "latency_ms": none_if_nan(r.get("latency_ms")),
                        "created_at": none_if_nan(r.get("created_at")),
                        "reason": none_if_nan(r.get("reason"))} for r in ev.to_dict("records")]}


_STORES: dict[str, ElicitationStore] = {}


def get_store(url: str | None = None) -> ElicitationStore:
    """One store per database URL in this process (Streamlit sessions share it; connections do not)."""
    url = url or default_db_url()
    if url not in _STORES:
        _STORES[url] = ElicitationStore(url)
    return _STORES[url]
