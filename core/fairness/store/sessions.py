"""Sessions, stakeholders, assignments and judgment events, with per-role access checks.

Judgments are append-only events ordered by a database sequence; a position's live answer is its
latest event (a retraction empties it). Every click carries an event id minted when the card was
drawn; ids are unique per (session, stakeholder), so a rerun or a re-delivered click never writes
twice and another stakeholder's id can never swallow an answer. Keys, resume codes and device tokens
are random and only their SHA-256 digests are stored (``devices``). Wrong join codes, resume codes and
keys are logged: a browser session that guessed wrong too often is refused, and past the per-address or
overall limit wrong codes are answered slowly, so a code cannot be guessed by trying many, while a right
code, and above all a stakeholder's own `?me=` link, still opens whatever others have tried.
"""
from __future__ import annotations

import hmac
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from core.contracts import make_rng
from core.database import StoreUnavailable, Tx, describe_fault, open_database
from core.fairness.elicitation import (RESPONSE_MODES, RETRACT, SKIP, ElicitationPlan, core_pairs,
                                       population_rows, sample_assignment, self_agreement, stakeholder_seed)
from core.fairness.private_pairs import (SYNTHETIC_PEOPLE, PrivatePairsPlan, SyntheticPeople, check_copy_id,
                                         copy_clash, copy_from_json, copy_to_json, refuse_clash, remember_copy,
                                         same_copy)
import core.fairness.store.devices as devices
from core.fairness.store.checks import (CODE_ALPHABET, check_pseudonym, check_reason, check_secret,
                                        check_session_name, digest)
from core.fairness.store.schema import (synthetic_copies, assignments, failed_attempts, judgments, metadata, now_utc,
                                        schema_version, sessions, stakeholder_devices, stakeholders, upgrade)

JOIN_ALPHABET = CODE_ALPHABET
JOIN_CODE_LENGTH = 12          # 32**12 = 2**60 codes
LEGACY_CODE_LENGTH = 6         # sessions created before schema 3 keep their codes
ATTEMPT_WINDOW_S = 15 * 60
MAX_FAILURES_PER_CLIENT = 10     # wrong codes or keys from one browser session per window
MAX_FAILURES_PER_ADDRESS = 100   # from one network address, all its sessions together
MAX_FAILURES_TOTAL = 2000        # from everyone (a guesser spread over many addresses)
FAILURE_PAUSE_S = 2.0            # each wrong code past the address or overall limit waits this long
COMPAS_ROWS = 7214
MAX_LATENCY_MS = 1e10            # about 115 days on one card: anything longer is not a time someone took

# Statements on the answer path, built once (building them per call costs more than SQLite does).
Q_EVENT = select(judgments.c.seq).where(
    judgments.c.session_id == bindparam("sid"), judgments.c.stakeholder_id == bindparam("uid"),
    judgments.c.event_id == bindparam("event_id"))
Q_TOKEN = select(stakeholders).where(stakeholders.c.token_hash == bindparam("token_hash"))
Q_SESSION = select(sessions.c.status, sessions.c.config).where(sessions.c.session_id == bindparam("sid"))
Q_STATUS = select(sessions.c.status).where(sessions.c.session_id == bindparam("sid"))
Q_CARD_LOCK = select(assignments.c.position).where(
    assignments.c.session_id == bindparam("sid"), assignments.c.stakeholder_id == bindparam("uid"),
    assignments.c.position == bindparam("pos")).with_for_update()
Q_REVISION = select(func.coalesce(func.max(judgments.c.revision), 0)).where(
    judgments.c.session_id == bindparam("sid"), judgments.c.stakeholder_id == bindparam("uid"),
    judgments.c.position == bindparam("pos"))
INSERT_EVENT = insert(judgments)
Q_EVENTS_REVISION = select(func.max(judgments.c.seq), func.count()).where(judgments.c.session_id == bindparam("sid"))
Q_ROSTER_REVISION = select(func.count(), func.max(stakeholders.c.joined_at)).where(
    stakeholders.c.session_id == bindparam("sid"))


def _my_cards_query():
    """A stakeholder's cards in order, each with its latest event's response and revision when that
    event is not a retraction (NULLs otherwise): the page's read on every click."""
    mine = (judgments.c.session_id == bindparam("sid"), judgments.c.stakeholder_id == bindparam("uid"))
    latest = select(func.max(judgments.c.seq).label("seq")).where(*mine).group_by(judgments.c.position).subquery()
    live = (select(judgments.c.position, judgments.c.response, judgments.c.revision)
            .join(latest, latest.c.seq == judgments.c.seq)
            .where(judgments.c.response != bindparam("retract")).subquery())
    return (select(assignments.c.position, assignments.c.a, assignments.c.b, assignments.c.kind,
                   assignments.c.repeat_of, live.c.response, live.c.revision)
            .select_from(assignments.outerjoin(live, live.c.position == assignments.c.position))
            .where(assignments.c.session_id == bindparam("sid"), assignments.c.stakeholder_id == bindparam("uid"))
            .order_by(assignments.c.position))


Q_MY_CARDS = _my_cards_query()


class TooManyAttempts(ValueError):
    """Too many wrong codes or keys lately; the message says how long to wait."""


class LiveReads(NamedTuple):
    """A session's revision and the facilitator's two views of it, read together."""

    revision: tuple
    progress: pd.DataFrame
    judgments: pd.DataFrame


@dataclass(frozen=True)
class CreatedSession:
    """What the facilitator receives once: the key is never stored in clear and cannot be shown again."""

    session_id: str
    join_code: str
    facilitator_key: str


@dataclass(frozen=True)
class StakeholderLogin:
    """A stakeholder's handle: the resume code (``token``) is their credential on any device."""

    session_id: str
    stakeholder_id: str
    pseudonym: str
    token: str
    resumed: bool = False
    """True when the stakeholder had joined before (back through her device or her resume code)."""


def new_join_code() -> str:
    return "".join(secrets.choice(JOIN_ALPHABET) for _ in range(JOIN_CODE_LENGTH))


def normalise_code(join_code: Any) -> str:
    """A join code as typed (any case, spaces and dashes allowed) in its stored form."""
    if not isinstance(join_code, str) or not join_code.strip():
        raise ValueError("Enter the join code your facilitator gave you.")
    code = join_code.strip().upper().replace(" ", "").replace("-", "")
    if len(code) not in (JOIN_CODE_LENGTH, LEGACY_CODE_LENGTH) or any(c not in JOIN_ALPHABET for c in code):
        raise ValueError(f"A join code has {JOIN_CODE_LENGTH} letters and digits, e.g. 'K7QM-2XPA-R4TB'; "
                         f"got {join_code.strip()[:20]!r}.")
    return code


def format_code(code: str) -> str:
    """A join code in groups of four for reading aloud ('K7QM-2XPA-R4TB')."""
    return "-".join(code[k:k + 4] for k in range(0, len(code), 4))


def session_size(config: ElicitationPlan) -> int:
    """How many people a session's pair numbers can name: the file's rows, or the synthetic copy's
    people (a public constant, not the private row count)."""
    return SYNTHETIC_PEOPLE if config.synthetic else COMPAS_ROWS


def public_session(row) -> dict:
    return {"session_id": row["session_id"], "name": row["name"], "join_code": row["join_code"],
            "status": row["status"], "simulated": bool(row["simulated"]),
            "created_at": row["created_at"], "config": dict(row["config"]),
            "n_individuals": int(row["n_individuals"])}


def check_event_id(event_id: Any) -> str:
    if not isinstance(event_id, str) or not 8 <= len(event_id) <= 64:
        raise ValueError("Each answer needs an event id of 8 to 64 characters.")
    return event_id


def check_answer(options: tuple, cards: frozenset, position: Any, response: Any, confidence: Any,
                 latency_ms: Any, reason: Any = None) -> dict:
    """One answer's fields checked against the session mode and the stakeholder's cards."""
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
        if isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float, np.integer, np.floating)) \
                or not 0 <= latency_ms <= MAX_LATENCY_MS:
            raise ValueError(f"Latency must be a number of milliseconds from 0 to {MAX_LATENCY_MS:.0e}; "
                             f"got {latency_ms!r:.40}.")
        latency_ms = float(latency_ms)
    reason = check_reason(reason)
    if reason is not None and response == RETRACT:
        raise ValueError("An undo carries no reason; give it with the new answer instead.")
    return {"position": position, "response": response,
            "confidence": None if confidence is None else int(confidence), "latency_ms": latency_ms,
            "reason": reason}


class SessionStore:
    """Sessions, stakeholders, assignments and judgment events with per-role access checks.

    Stakeholder methods take the stakeholder's resume token and only ever touch that
    stakeholder's rows; facilitator methods take the session's facilitator key. Methods that
    take a code or key from a person also take `client` (who is trying: an address or browser
    id) for the guessing limit.
    """

    def __init__(self, url: str | None = None, engine: Engine | None = None):
        self.url = url
        self.db = open_database(url, engine)  # the project database, shared by every store: engine, lock, file watch
        self.engine = self.db.engine
        self.is_sqlite = self.db.is_sqlite
        self._memo: dict[str, tuple] = {}
        self._reads: dict[str, tuple] = {}     # session id -> (revision, progress, judgments)
        self.pause = time.sleep                 # how a wrong code over the address or overall limit waits
        self.failure_pause_s = FAILURE_PAUSE_S
        self._create_schema()
        self.db.watch.check()  # the file exists now: the watch has taken it

    # ------------------------------------------------------------------ plumbing
    def write_tx(self) -> Tx:
        """A transaction that takes the write lock up front (SQLite) and commits on exit."""
        return self.db.write_tx()

    def read_tx(self) -> Tx:
        return self.db.read_tx()

    def _create_schema(self) -> None:
        """Create missing tables, then bring an older database up to SCHEMA_VERSION in place."""
        for attempt in range(5):
            try:
                metadata.create_all(self.engine)
                with self.write_tx() as conn:
                    upgrade(conn)
                return
            except (SQLAlchemyError, StoreUnavailable) as err:
                if attempt == 4:
                    raise (err if isinstance(err, StoreUnavailable) else describe_fault(err)) from err
                time.sleep(0.2 * (attempt + 1))

    def schema_version(self) -> int:
        with self.read_tx() as conn:
            return int(conn.execute(select(func.max(schema_version.c.version))).scalar())

    def dispose(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ guessing limit
    @staticmethod
    def split_client(client: str | None) -> tuple[str, str]:
        """("address/session" or a bare name) -> (client, address); a bare name is its own address."""
        client = (str(client) if client else "anonymous")[:64]
        return client, client.split("/", 1)[0][:64]

    def _recent_failures(self, who: tuple[str, str]) -> tuple[int, int, int]:
        """Wrong codes or keys in the last window: (this browser session, its address, everyone)."""
        since = time.time() - ATTEMPT_WINDOW_S
        recent = failed_attempts.c.at > since
        with self.read_tx() as conn:
            mine = conn.execute(select(func.count()).where(failed_attempts.c.client == who[0], recent)).scalar()
            near = conn.execute(select(func.count()).where(failed_attempts.c.address == who[1], recent)).scalar()
            total = conn.execute(select(func.count()).where(recent)).scalar()
        return int(mine), int(near), int(total)

    def _guard_attempts(self, client: str | None, *, personal: bool = False) -> tuple[tuple[str, str], tuple]:
        """Refuse, before looking at the code, a browser session that has itself guessed wrong too often.

        Only that session's own failures can refuse it: a room behind one address (or behind a
        reverse proxy, where everyone shares the proxy's address) is never locked out by someone
        else's guesses. A personal resume code (`personal`, 144 random bits) is checked first even
        here: a valid `?me=` link is never refused.
        """
        who = self.split_client(client)
        counts = self._recent_failures(who)
        if not personal and counts[0] >= MAX_FAILURES_PER_CLIENT:
            raise TooManyAttempts(f"Too many wrong codes from this browser. Wait {ATTEMPT_WINDOW_S // 60} "
                                  "minutes, then check the code with your facilitator and try again.")
        return who, counts

    def _failed(self, who: tuple[str, str], counts: tuple, err: Exception) -> Exception:
        """Log one wrong code or key and say what to answer: the error itself, or TooManyAttempts after
        a pause once this browser session, its address or everyone together is over its limit.

        The address and overall limits only ever answer wrong codes (slowing a guesser spread over
        many sessions or addresses down to one try per `failure_pause_s`); a right code still opens.
        """
        self._log_failure(who)
        mine, near, total = counts
        minutes = ATTEMPT_WINDOW_S // 60
        if mine >= MAX_FAILURES_PER_CLIENT:
            return TooManyAttempts(f"Too many wrong codes from this browser. Wait {minutes} minutes, then "
                                   "check the code with your facilitator and try again.")
        if near >= MAX_FAILURES_PER_ADDRESS or total >= MAX_FAILURES_TOTAL:
            self.pause(self.failure_pause_s)
            where = "your network" if near >= MAX_FAILURES_PER_ADDRESS else "this dashboard"
            return TooManyAttempts(f"That code is not right, and many wrong codes have been tried from {where} "
                                   f"lately. Check the code with your facilitator; wrong codes are answered "
                                   f"slowly for up to {minutes} minutes.")
        return err

    def _log_failure(self, who: tuple[str, str]) -> None:
        now = time.time()
        with self.write_tx() as conn:
            conn.execute(insert(failed_attempts).values(client=who[0], address=who[1], at=now))
            conn.execute(delete(failed_attempts).where(failed_attempts.c.at < now - 4 * ATTEMPT_WINDOW_S))

    def _limited(self, client: str | None, attempt, *, personal: bool = False):
        """Run `attempt()`; a wrong code or key (ValueError or PermissionError) counts against the client."""
        who, counts = self._guard_attempts(client, personal=personal)
        try:
            return attempt()
        except StoreUnavailable:
            raise
        except (ValueError, PermissionError) as err:
            answer = self._failed(who, counts, err)
            if answer is err:
                raise
            raise answer from err

    # ------------------------------------------------------------------ synthetic copies
    @staticmethod
    def insert_copy(conn: Connection, copy: SyntheticPeople) -> bool:
        """Store a made copy inside the caller's transaction; False when that very copy is already stored.

        A stored copy never changes: other people under a stored id are refused (ValueError)."""
        if not copy.copy_id or copy.plan.simulated:
            raise ValueError("Only a released synthetic copy (made with secure noise) is stored.")
        refuse_clash(copy)
        stored = conn.execute(select(synthetic_copies)
                              .where(synthetic_copies.c.copy_id == copy.copy_id)).mappings().first()
        if stored is not None:
            if not same_copy(SessionStore.copy_from_row(stored), copy):
                raise copy_clash(copy.copy_id)
            return False
        data = copy_to_json(copy)
        conn.execute(insert(synthetic_copies).values(
            copy_id=copy.copy_id, data_key=data["data_key"], population=data["population"],
            epsilon=float(data["epsilon"]), delta=float(data["delta"]), created_at=data["created_at"] or now_utc(),
            people={"cards": data["cards"], "people": data["people"]}))
        return True

    def save_copy(self, copy: SyntheticPeople) -> bool:
        """Store a released copy (once per id) and keep it in this process's cache; False if already stored."""
        with self.write_tx() as conn:
            added = self.insert_copy(conn, copy)
        remember_copy(copy)
        return added

    @staticmethod
    def copy_from_row(row) -> SyntheticPeople:
        people = dict(row["people"])
        return copy_from_json({"copy_id": row["copy_id"], "data_key": row["data_key"],
                               "population": row["population"], "epsilon": row["epsilon"],
                               "delta": row["delta"], "created_at": row["created_at"], "secure": True,
                               "cards": people.get("cards"), "people": people.get("people")})

    def load_copy(self, copy_id: str) -> SyntheticPeople:
        """The stored copy with this id (cached in this process); ValueError naming it when missing."""
        copy_id = check_copy_id(copy_id)
        with self.read_tx() as conn:
            row = conn.execute(select(synthetic_copies)
                               .where(synthetic_copies.c.copy_id == copy_id)).mappings().first()
        if row is None:
            raise ValueError(f"Synthetic copy {copy_id} is not in this session database; open the database "
                             "that holds it, or import a session export that carries it.")
        return remember_copy(self.copy_from_row(row))

    def has_copy(self, copy_id: str) -> bool:
        with self.read_tx() as conn:
            return conn.execute(select(synthetic_copies.c.copy_id)
                                .where(synthetic_copies.c.copy_id == check_copy_id(copy_id))).first() is not None

    def find_copies(self, plan: PrivatePairsPlan) -> list[dict]:
        """Stored copies of the plan's data, population and epsilon, newest first (id and time only)."""
        with self.read_tx() as conn:
            rows = conn.execute(select(synthetic_copies.c.copy_id, synthetic_copies.c.created_at, synthetic_copies.c.epsilon)
                                .where(synthetic_copies.c.data_key == plan.data.source,
                                       synthetic_copies.c.population == plan.population)
                                .order_by(synthetic_copies.c.created_at.desc())).all()
        return [{"copy_id": r[0], "created_at": r[1]} for r in rows if float(r[2]) == plan.epsilon]

    # ------------------------------------------------------------------ facilitator
    def insert_session(self, conn: Connection, config: ElicitationPlan, name: str, *, simulated: bool,
                       n_individuals: int, core: list | None = None, status: str = "open") -> CreatedSession:
        """Add a session row inside the caller's transaction (a savepoint retries a code clash)."""
        key = secrets.token_urlsafe(24)
        core = core_pairs(config).tolist() if core is None else core
        for _ in range(20):
            session_id, code = uuid.uuid4().hex, new_join_code()
            clash = conn.execute(select(sessions.c.session_id).where(sessions.c.join_code == code)).first()
            if clash is not None:
                continue
            conn.execute(insert(sessions).values(
                session_id=session_id, name=name, join_code=code, facilitator_key_hash=digest(key),
                config=config.session_dict(), core_pairs=core, n_individuals=int(n_individuals), status=status,
                simulated=bool(simulated), created_at=now_utc()))
            return CreatedSession(session_id, code, key)
        raise StoreUnavailable("Could not draw a free join code; try again.")

    def create_session(self, config: ElicitationPlan, name: str = "", *, simulated: bool = False) -> CreatedSession:
        """Open a session; returns its join code and the facilitator key (shown once, stored hashed).

        Its pairs are drawn from the configuration's population; they name rows of the whole file,
        or for a synthetic-copy session positions among the copy's people (its public size is stored
        as the session's number of individuals)."""
        if not isinstance(config, ElicitationPlan):
            raise ValueError("create_session needs an ElicitationPlan (the session design).")
        name = check_session_name(name)
        if config.synthetic and not config.pair_copy:
            raise ValueError("A synthetic-copy session names its released copy: make and store the copy first.")
        if config.synthetic and not self.has_copy(config.pair_copy):
            raise ValueError(f"Synthetic copy {config.pair_copy} is not in this session database; store it first.")
        for attempt in range(3):
            try:
                with self.write_tx() as conn:
                    return self.insert_session(conn, config, name, simulated=simulated,
                                               n_individuals=session_size(config))
            except IntegrityError:  # a code drawn by another process at the same instant
                if attempt == 2:
                    raise StoreUnavailable("Could not draw a free join code; try again.") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def session_row(self, conn: Connection, session_id: str, facilitator_key: str):
        """The session's row if the key opens it, else PermissionError."""
        key = check_secret(facilitator_key, "facilitator key")
        row = conn.execute(select(sessions).where(sessions.c.session_id == str(session_id))).mappings().first()
        if row is None or not hmac.compare_digest(row["facilitator_key_hash"], digest(key)):
            raise PermissionError("This facilitator key does not open that session.")
        return row

    def open_session(self, join_code: str, facilitator_key: str, *, client: str | None = None) -> dict:
        """A facilitator reopens a session by join code and key; returns the session's record."""
        def attempt() -> dict:
            code = normalise_code(join_code)
            with self.read_tx() as conn:
                row = conn.execute(select(sessions.c.session_id).where(sessions.c.join_code == code)).first()
                if row is None:
                    raise PermissionError("This facilitator key does not open that session.")
                return public_session(self.session_row(conn, row[0], facilitator_key))
        return self._limited(client, attempt)

    def set_status(self, session_id: str, facilitator_key: str, status: str) -> None:
        """Close a session to new answers ("closed") or reopen it ("open")."""
        if status not in ("open", "closed"):
            raise ValueError("Status must be 'open' or 'closed'.")
        with self.write_tx() as conn:
            self.session_row(conn, session_id, facilitator_key)
            conn.execute(sessions.update().where(sessions.c.session_id == session_id).values(status=status))

    def session_info(self, join_code: str, *, client: str | None = None) -> dict:
        """What a stakeholder may see before joining: name, status and the card settings."""
        def attempt() -> dict:
            code = normalise_code(join_code)
            with self.read_tx() as conn:
                row = conn.execute(select(sessions).where(sessions.c.join_code == code)).mappings().first()
            if row is None:
                raise ValueError(f"No session has the join code {code!r}; check it with your facilitator.")
            info = public_session(row)
            return {k: info[k] for k in ("name", "join_code", "status", "simulated", "config")}
        return self._limited(client, attempt)

    # ------------------------------------------------------------------ stakeholders
    def join(self, join_code: str, pseudonym: str | None, *, resume_code: str | None = None,
             device: str | None = None, simulated: bool = False, client: str | None = None) -> StakeholderLogin:
        """Join a session under a pseudonym, or come back to one's own cards.

        A new name draws the assignment once and stores it (spec 4.3); the login's token is the new
        stakeholder's resume code. A name already taken opens that stakeholder's cards only for the
        browser she joined on (``device``, the device token bound to her) or with her resume code;
        anyone else is refused. A resume code given here reopens its owner's cards in this session
        whatever name is typed (wrong codes count against the guessing limit).
        """
        code = normalise_code(join_code)
        if resume_code is not None and str(resume_code).strip():
            return self._resume_in(code, resume_code, device, client)
        pseudonym = check_pseudonym(pseudonym)
        who, counts = self._guard_attempts(client)
        token = devices.new_resume_code()
        stakeholder_id = uuid.uuid4().hex
        with self.write_tx() as conn:
            row = conn.execute(select(sessions).where(sessions.c.join_code == code)).mappings().first()
            if row is not None:
                if row["status"] != "open":
                    raise ValueError("This session is closed to new answers.")
                taken = conn.execute(select(stakeholders.c.stakeholder_id).where(
                    stakeholders.c.session_id == row["session_id"], stakeholders.c.pseudonym == pseudonym)).first()
                if taken is not None:
                    mine = devices.device_code(conn, device, row["session_id"], taken[0])
                    if mine is None:
                        raise ValueError(f"The name {pseudonym!r} is already taken in this session. If it is "
                                         "yours, type your resume code (shown at the foot of your cards) "
                                         "below; otherwise choose another name.")
                    return StakeholderLogin(row["session_id"], taken[0], pseudonym, mine[1], resumed=True)
                config = ElicitationPlan.from_dict(dict(row["config"]))
                plan = sample_assignment(config, np.asarray(row["core_pairs"], dtype=np.int64).reshape(-1, 2),
                                         population_rows(config),
                                         make_rng(stakeholder_seed(config.seed, pseudonym)))
                conn.execute(insert(stakeholders).values(
                    stakeholder_id=stakeholder_id, session_id=row["session_id"], pseudonym=pseudonym,
                    token_hash=digest(token), simulated=bool(simulated), joined_at=now_utc()))
                records = plan.assign(session_id=row["session_id"], stakeholder_id=stakeholder_id)
                conn.execute(insert(assignments), [
                    {k: (int(v) if isinstance(v, (np.integer,)) else v) for k, v in r.items()}
                    for r in records[["session_id", "stakeholder_id", "position", "a", "b", "kind",
                                      "repeat_of"]].to_dict("records")])
        if row is None:
            wrong = ValueError(f"No session has the join code {code!r}; check it with your facilitator.")
            raise self._failed(who, counts, wrong)
        return StakeholderLogin(row["session_id"], stakeholder_id, pseudonym, token)

    def _resume_in(self, join_code: str, resume_code: str, device: str | None,
                   client: str | None) -> StakeholderLogin:
        """The stakeholder whose resume code this is, when she belongs to the session of ``join_code``; the
        device (when given) is bound to her. A wrong code is a failed attempt."""
        def attempt() -> StakeholderLogin:
            token = devices.normalise_resume_code(resume_code)
            with self.write_tx() as conn:
                me = self._stakeholder(conn, token)
                found = conn.execute(select(sessions.c.join_code)
                                     .where(sessions.c.session_id == me["session_id"])).scalar()
                if found != join_code:
                    raise PermissionError("This resume code is not valid in this session; check it (it is "
                                          "shown at the foot of your cards) and the join link.")
                if devices.check_device_token(device):
                    devices.bind(conn, device, me, token)
            return StakeholderLogin(me["session_id"], me["stakeholder_id"], me["pseudonym"], token, resumed=True)
        return self._limited(client, attempt, personal=True)

    def device_login(self, join_code: str, device: str | None) -> StakeholderLogin | None:
        """The stakeholder this browser joined the session of ``join_code`` as (its device token bound to
        her), or None: the join link opens her own cards again on the device she used."""
        if devices.check_device_token(device) is None:
            return None
        code = normalise_code(join_code)
        with self.read_tx() as conn:
            session_id = conn.execute(select(sessions.c.session_id).where(sessions.c.join_code == code)).scalar()
            found = None if session_id is None else devices.device_code(conn, device, session_id)
        if found is None:
            return None
        me, token = found
        return StakeholderLogin(me["session_id"], me["stakeholder_id"], me["pseudonym"], token, resumed=True)

    def bind_device(self, token: str, device: str) -> None:
        """Let this browser's device token reopen the stakeholder's cards from the join link."""
        if devices.check_device_token(device) is None:
            raise ValueError("A device token is 43 URL-safe characters.")
        token = devices.normalise_resume_code(token)
        with self.write_tx() as conn:
            devices.bind(conn, device, self._stakeholder(conn, token), token)

    def forget_device(self, token: str, device: str | None) -> None:
        """Sign out on a shared device: its token no longer opens the stakeholder's cards."""
        if devices.check_device_token(device) is None:
            return
        with self.write_tx() as conn:
            devices.forget(conn, device, self._stakeholder(conn, devices.normalise_resume_code(token)))

    def _stakeholder(self, conn: Connection, token: str):
        token = devices.normalise_resume_code(token)
        row = conn.execute(Q_TOKEN, {"token_hash": digest(token)}).mappings().first()
        if row is None or not hmac.compare_digest(row["token_hash"], digest(token)):
            raise PermissionError("This resume code is not valid; check it or join again.")
        return row

    def resume(self, token: str, *, client: str | None = None) -> StakeholderLogin:
        """Find the stakeholder behind a resume code (after a disconnect, a reload or in a new tab)."""
        def attempt() -> StakeholderLogin:
            with self.read_tx() as conn:
                row = self._stakeholder(conn, token)
            return StakeholderLogin(row["session_id"], row["stakeholder_id"], row["pseudonym"],
                                    devices.normalise_resume_code(token), resumed=True)
        return self._limited(client, attempt, personal=True)

    def my_session(self, token: str) -> dict:
        """The session a stakeholder belongs to: name, status and card settings (no keys)."""
        with self.read_tx() as conn:
            me = self._stakeholder(conn, token)
            row = conn.execute(select(sessions).where(sessions.c.session_id == me["session_id"])).mappings().first()
        info = public_session(row)
        return {k: info[k] for k in ("name", "join_code", "status", "simulated", "config")}

    def my_assignment(self, token: str) -> pd.DataFrame:
        """The stakeholder's own cards with their live answers (None where unanswered).

        Read on every click of a live session, so the cards and their latest events are joined in
        one query over this stakeholder's rows (the owner index) and the frame is built once, with
        no pandas merge: the same live answers as ``_live`` (latest event per card, a retraction
        leaving the card open), without reasons."""
        with self.read_tx() as conn:
            me = self._stakeholder(conn, token)
            rows = conn.execute(Q_MY_CARDS, {"sid": me["session_id"], "uid": me["stakeholder_id"],
                                             "retract": RETRACT}).all()
        plan = pd.DataFrame([row[:5] for row in rows], columns=["position", "a", "b", "kind", "repeat_of"])
        plan["response"] = pd.Series([row[5] for row in rows], dtype=object)
        plan["revision"] = pd.array([row[6] for row in rows], dtype="Int64")
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
        """Append one answer in its own transaction; False if this stakeholder stored this event id already.

        `response` is an option of the session's mode, "skip", or "retract" (undo). The card's
        row is locked (PostgreSQL) or the database write-locked (SQLite) before the revision is
        numbered, so tabs answering the same card at the same instant are serialised and every
        acknowledged click is stored. `reason` is optional free text (see check_reason).
        Database faults raise StoreUnavailable: the click is then not acknowledged.
        """
        event_id = check_event_id(event_id)
        attempts = 8
        for attempt in range(attempts):
            # Checks that only read run outside the write lock, from a per-token memo after the first.
            me, values = self._checked(token, position, response, confidence, latency_ms, reason)
            try:
                with self.write_tx() as conn:
                    self._insert(conn, me, event_id, values)
                return True
            except IntegrityError:
                # This stakeholder's event id stored already (a re-delivered click), or the
                # stakeholder withdrawn by another process: forget the memo, re-check and retry.
                self._memo.pop(digest(devices.normalise_resume_code(token)), None)
                with self.read_tx() as conn:
                    if conn.execute(Q_EVENT, {"sid": me["session_id"], "uid": me["stakeholder_id"],
                                              "event_id": event_id}).first():
                        return False
                if attempt == attempts - 1:
                    raise StoreUnavailable("Your answer could not be stored after several tries; "
                                           "click it again.") from None
            except StoreUnavailable as err:
                if not err.retryable or attempt == attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _checked(self, token: str, position: Any, response: Any, confidence: Any,
                 latency_ms: Any, reason: Any = None) -> tuple[dict, dict]:
        """Validate an answer; the stakeholder, their cards and the session mode are memoised per token."""
        token = devices.normalise_resume_code(token)
        key = digest(token)
        memo = self._memo.get(key)
        if memo is None:
            with self.read_tx() as conn:
                me = dict(self._stakeholder(conn, token))
                mode = conn.execute(Q_SESSION, {"sid": me["session_id"]}).mappings().first()["config"]["response_mode"]
                cards = {r[0] for r in conn.execute(select(assignments.c.position).where(
                    assignments.c.session_id == me["session_id"],
                    assignments.c.stakeholder_id == me["stakeholder_id"]))}
            memo = (me, RESPONSE_MODES[mode], frozenset(cards))
            if len(self._memo) > 10_000:
                self._memo.clear()
            self._memo[key] = memo
        me, options, cards = memo
        return me, check_answer(options, cards, position, response, confidence, latency_ms, reason)

    def record_answers(self, token: str, answers: pd.DataFrame) -> int:
        """Append many answers of one stakeholder in one transaction (demo panels, imports)."""
        need = {"position", "response"}
        if not need <= set(answers.columns):
            raise ValueError(f"Answers need columns {sorted(need)}.")
        rows = answers.to_dict("records")
        checked = [self._checked(token, r["position"], r["response"], r.get("confidence"), r.get("latency_ms"),
                                 optional(r.get("reason")))
                   for r in rows]
        me = checked[0][0] if checked else None
        checked = [values for _, values in checked]
        with self.write_tx() as conn:
            for r, values in zip(rows, checked):
                self._insert(conn, me, r.get("event_id") or uuid.uuid4().hex, values)
        return len(rows)

    def _insert(self, conn: Connection, me, event_id: str, values: dict) -> None:
        """The write: status re-checked, the card locked and its revision numbered in one transaction."""
        status = conn.execute(Q_STATUS, {"sid": me["session_id"]}).scalar()
        if status != "open":
            raise ValueError("This session is closed; answers can no longer be changed.")
        owner = {"sid": me["session_id"], "uid": me["stakeholder_id"], "pos": values["position"]}
        if not self.is_sqlite:  # SQLite's BEGIN IMMEDIATE already serialises every writer
            if conn.execute(Q_CARD_LOCK, owner).first() is None:
                raise PermissionError("This resume code is not valid any more; ask your facilitator.")
        revision = conn.execute(Q_REVISION, owner).scalar() + 1
        conn.execute(INSERT_EVENT, {"event_id": event_id, "session_id": me["session_id"],
                                    "stakeholder_id": me["stakeholder_id"], "revision": int(revision),
                                    "created_at": now_utc(), **values})

    def my_answers(self, token: str) -> pd.DataFrame:
        """The stakeholder's own live answers (position, pair and response)."""
        plan = self.my_assignment(token)
        return plan[plan["response"].notna()].reset_index(drop=True)

    # ------------------------------------------------------------------ facilitator reads
    @staticmethod
    def session_revision(conn: Connection, session_id: str) -> tuple:
        """What changes whenever a session's answers or roster change, read in the caller's transaction.

        Every stored answer takes a new, never reused sequence number (so the largest grows), and a
        withdrawal deletes events (so their count falls) and a stakeholder (so the roster's count falls);
        a join adds a stakeholder row with a later join time. Equal revisions therefore mean equal
        answers and roster, which lets the facilitator's reads be kept between refreshes."""
        events = conn.execute(Q_EVENTS_REVISION, {"sid": session_id}).one()
        people = conn.execute(Q_ROSTER_REVISION, {"sid": session_id}).one()
        return (events[0], int(events[1]), int(people[0]), people[1])

    def live_reads(self, session_id: str, facilitator_key: str) -> LiveReads:
        """The facilitator's progress table and live answers from one read of the session's answers.

        The key is checked on every call; the frames are built once per session revision
        (``session_revision``) in this process and handed out as copies, so a refresh with no new
        answer reads two counts instead of every event, and a refresh after new answers builds the
        answer table once for both views."""
        with self.read_tx() as conn:
            session = self.session_row(conn, session_id, facilitator_key)
            revision = self.session_revision(conn, session_id)
            kept = self._reads.get(session_id)
            if kept is None or kept[0] != revision:
                people = pd.DataFrame(conn.execute(
                    select(stakeholders.c.stakeholder_id, stakeholders.c.pseudonym, stakeholders.c.simulated,
                           stakeholders.c.joined_at).where(stakeholders.c.session_id == session_id)
                    .order_by(stakeholders.c.joined_at)).mappings().all(),
                    columns=["stakeholder_id", "pseudonym", "simulated", "joined_at"])
                frame = self.judgment_frame(conn, session_id)
                n_items = ElicitationPlan.from_dict(dict(session["config"])).n_items
                fav = int(session["config"]["favourable_label"])
                kept = (revision, self.progress_table(people, frame, n_items, fav), self.judged_table(frame))
                if len(self._reads) > 64:
                    self._reads.clear()
                self._reads[session_id] = kept
        return LiveReads(revision, kept[1].copy(), kept[2].copy())

    def progress(self, session_id: str, facilitator_key: str) -> pd.DataFrame:
        """Per stakeholder: cards, live answers, skips, share "same", self-agreement on repeats."""
        return self.live_reads(session_id, facilitator_key).progress

    @staticmethod
    def progress_table(people: pd.DataFrame, frame: pd.DataFrame, n_items: int, fav: int) -> pd.DataFrame:
        """The progress table from the roster and the live answers (``judgment_frame``)."""
        cols = ["stakeholder", "answered", "of", "skipped", "share_same", "self_agreement",
                "last_answer", "simulated"]
        if people.empty:
            return pd.DataFrame(columns=cols)
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

    def judgment_frame(self, conn: Connection, session_id: str) -> pd.DataFrame:
        """Live answers joined with their cards and pseudonyms (no access check: callers do it)."""
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
        return out.sort_values(["pseudonym", "position"]).reset_index(drop=True)

    def judgments(self, session_id: str, facilitator_key: str) -> pd.DataFrame:
        """Everyone's live answers with their pairs and reasons (facilitator only).

        The input of aggregate_constraints; the `reason` column is sensitive free text.
        """
        return self.live_reads(session_id, facilitator_key).judgments

    @staticmethod
    def judged_table(frame: pd.DataFrame) -> pd.DataFrame:
        """The facilitator's answer table from ``judgment_frame`` (pseudonyms as `stakeholder`)."""
        frame = frame.copy()
        frame["reason"] = frame["reason"].astype(object).where(frame["reason"].notna(), None)
        return frame.rename(columns={"pseudonym": "stakeholder"})[
            ["stakeholder", "position", "a", "b", "kind", "repeat_of", "response", "revision",
             "confidence", "latency_ms", "created_at", "reason"]]

    def event_log(self, session_id: str, facilitator_key: str) -> pd.DataFrame:
        """Every stored event in database order, retractions and earlier revisions included."""
        with self.read_tx() as conn:
            self.session_row(conn, session_id, facilitator_key)
            rows = conn.execute(select(judgments, stakeholders.c.pseudonym)
                                .join(stakeholders, stakeholders.c.stakeholder_id == judgments.c.stakeholder_id)
                                .where(judgments.c.session_id == session_id)
                                .order_by(judgments.c.seq)).mappings().all()
        return pd.DataFrame(rows)

    def config(self, session_id: str, facilitator_key: str) -> ElicitationPlan:
        with self.read_tx() as conn:
            row = self.session_row(conn, session_id, facilitator_key)
        return ElicitationPlan.from_dict(dict(row["config"]))

    def delete_stakeholder(self, session_id: str, facilitator_key: str, pseudonym: str) -> int:
        """Withdraw one stakeholder: delete their events, assignment and record; returns events removed."""
        with self.write_tx() as conn:
            self.session_row(conn, session_id, facilitator_key)
            row = conn.execute(select(stakeholders.c.stakeholder_id).where(
                stakeholders.c.session_id == session_id, stakeholders.c.pseudonym == pseudonym)).first()
            if row is None:
                raise ValueError(f"No stakeholder named {pseudonym!r} in this session.")
            n = conn.execute(judgments.delete().where(judgments.c.stakeholder_id == row[0])).rowcount
            conn.execute(stakeholder_devices.delete().where(stakeholder_devices.c.stakeholder_id == row[0]))
            conn.execute(assignments.delete().where(assignments.c.stakeholder_id == row[0]))
            conn.execute(stakeholders.delete().where(stakeholders.c.stakeholder_id == row[0]))
            self.supersede_runs_of(conn, session_id, pseudonym)
        self._memo.clear()
        return int(n)

    def supersede_runs_of(self, conn: Connection, session_id: str, pseudonym: str) -> None:
        """Hook for the fit-run log (a withdrawal supersedes the runs that pooled this stakeholder)."""


def optional(value: Any) -> Any:
    """None for missing values (None, NaN, inf) read from a file or a frame."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return None
    return value
