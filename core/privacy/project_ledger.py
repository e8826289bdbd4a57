"""The project's privacy ledger: every release made from each data set, kept in the project database.

What one page's session remembers ends with the session; what was released does not. This ledger keeps,
per data set, every release's spends (never its data): unit (epsilon, rho, or epsilon with a delta), what
was measured, sequential or parallel composition, the page and action that made it, when, and the
digest of the plan it came from. Seeded simulations (previews drawn from a plan's seed) are kept apart
and never count toward a total.

What "one data set" is (:func:`data_key`): a bundled data set by its name; a data set the curator declared
(a DataRef carrying its schema) by the declared name, ``"dataset:" + name``, so every file version uploaded
into it spends from one budget under one cap; an upload without a declaration by its SHA-256, for seeded simulations only: a real release on
it is refused (:func:`refuse_plain_upload`). Whether a new declaration is really a new population is
decided by its rows and recorded in ``core.privacy.population``.

Composition of one data set's releases:

* releases compose one after another; inside a release, parallel groups stay parallel, so a group's
  parts (declared disjoint: the strata, the units of a geographic level) cost the largest part once;
* pure epsilon spends add up (basic composition); zCDP spends add up in rho, pure epsilon entering as
  epsilon^2 / 2 (Bun and Steinke 2016, Prop. 1.4), and the rho total becomes (epsilon, delta) with the
  tight conversion of Canonne, Kamath and Steinke (2020, Cor. 13) via ``core.privacy.accounting``;
* (epsilon, delta) spends (mechanisms that only have an approximate guarantee, such as the analytic
  Gaussian) add up by basic composition, epsilons and deltas separately, on top of the above.

Storage is the project database (``core.database``: ``DASHBOARD_DB_URL``, SQLite by default, PostgreSQL
by URL), shared with the elicitation store and saved scenarios; writes take its write lock and refuse a
database file deleted or replaced under the running dashboard. One transaction per recorded release;
recording the same release key twice changes nothing, so a page that reruns does not double count.

A real release goes reserve -> run -> commit (the protocol is ``core.releases``; this module keeps the
books). :meth:`ProjectLedger.reserve` is one write transaction that
checks the committed releases, the live reservations and the new release against the data set's cap and
stores the release as reserved, so two releases checked at the same time can never together pass the cap
(SQLite: ``BEGIN IMMEDIATE``, writers queue; PostgreSQL: a per-data-set lock row taken ``FOR UPDATE``).
A reservation counts until it is committed, cancelled, or its time runs out (a process that died between
reserve and commit holds its share only until then). Every data set needs a cap decision first: a cap,
or the explicit, recorded choice of no cap.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable

import pandas as pd
from sqlalchemy import (Column, Float, ForeignKey, Integer, MetaData, String, Table, UniqueConstraint, delete,
                        insert, inspect, select, text)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from core.contracts import DataRef
from core.database import LOCAL_CURATOR, Database, StoreUnavailable, lost_connection, open_database
from core.privacy.ledger import BudgetLedger, Spend

KINDS = ("release", "simulation")
DEFAULT_DELTA = 1e-6
NOT_RECORDED = "The release could not be recorded in the project's privacy ledger"
LEGACY_TABLE = "synthesis_releases"   # the synthesis page's earlier per-data-set book, folded in here
MAX_AMOUNT = 1e6        # largest spend or cap (epsilon or rho) the ledger accepts: beyond it nothing is private
DEFAULT_TTL = 6 * 3600  # seconds a reservation holds its budget unless committed or cancelled first
WAIT_LIMIT = 600.0      # seconds a write keeps waiting for its turn behind other writers before giving up
COMMITTED, RESERVED = "committed", "reserved"
NO_CAP = "none"

metadata = MetaData()
releases_table = Table(
    "ledger_releases", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("data_key", String(200), nullable=False, index=True),
    Column("data_label", String(200), nullable=False),
    Column("release_key", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("page", String(80), nullable=False),
    Column("action", String(80), nullable=False),
    Column("label", String(200), nullable=False),
    Column("plan_digest", String(64), nullable=False),
    Column("created_utc", String(32), nullable=False),
    Column("status", String(12), nullable=False, server_default=COMMITTED),
    Column("expires_at", Float(53)),           # reserved: seconds since the epoch when it stops counting
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),   # who reserved it
    UniqueConstraint("data_key", "release_key", name="uq_ledger_release"),
)
spends_table = Table(
    "ledger_spends", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("release_id", Integer, ForeignKey("ledger_releases.id"), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("label", String(200), nullable=False),
    Column("measured", String(300), nullable=False),
    Column("amount", Float(53), nullable=False),
    Column("unit", String(8), nullable=False),
    Column("delta", Float(53), nullable=False),
    Column("composition", String(12), nullable=False),
    Column("grp", String(200)),
    Column("part", String(200)),
)
caps_table = Table(
    "ledger_caps", metadata,
    Column("data_key", String(200), primary_key=True),
    Column("amount", Float(53), nullable=False),
    Column("unit", String(8), nullable=False),
    Column("delta", Float(53), nullable=False),
    Column("updated_utc", String(32), nullable=False),
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),
)
no_cap_table = Table(     # the curator's explicit choice of no cap for a data set, with when it was made
    "ledger_no_cap", metadata,
    Column("data_key", String(200), primary_key=True),
    Column("decided_utc", String(32), nullable=False),
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),
)
CURATOR_COLUMNS = ("ledger_releases", "ledger_caps", "ledger_no_cap")
"""Tables whose rows name the curator who made them (added to a ledger written before curators)."""
locks_table = Table(      # one row per data set; PostgreSQL writers take it FOR UPDATE to queue per data set
    "ledger_locks", metadata,
    Column("data_key", String(200), primary_key=True),
)


class CapExceeded(ValueError):
    """The release would take its data set past the cap; the message says spent, cap and what to change."""


class CapUndecided(ValueError):
    """No cap decision for the data set yet: neither a cap nor the explicit choice of no cap."""


class ReservationLost(ValueError):
    """The reservation is unknown, cancelled or expired, so the release it covered cannot be committed."""


class LedgerBusy(ValueError):
    """Another writer kept the ledger's database locked for longer than the caller chose to wait; nothing
    was reserved. A page offers to keep waiting in the background (``core.releases.release_when_free``)."""


def busy_message(waited: float) -> str:
    """Why a reservation gave up after ``waited`` seconds, and what the curator can do, in words."""
    return (f"The privacy ledger's database is locked by another writer (another release, a migration, or a "
            f"program holding the file), and it was still locked after {waited:.0f} seconds of waiting. Nothing "
            "was reserved and nothing was spent. Keep waiting in the background: the release then runs as a "
            "background job as soon as the lock is released; or try again later.")


@dataclass(frozen=True)
class Reservation:
    """A release stored as reserved: it counts toward the cap until committed, cancelled or expired."""

    id: int
    data_key: str
    release_key: str
    expires_utc: str


def _why(exc: BaseException) -> str:
    """What went wrong, for a message: the project database's own words, else the error's type."""
    return str(exc) if isinstance(exc, StoreUnavailable) else type(exc).__name__


DECLARED = "dataset:"   # the key prefix of a data set the curator declared (its schema's name follows)
KEY_LENGTH = 200        # the width of every data_key column


def declared_key(name: str) -> str:
    """The ledger key of the declared data set ``name``: "dataset:" + the name. A name too long for the key
    column keeps its start and gets the first 16 hex digits of its SHA-256, so two long names that share a
    start never share a budget."""
    key = DECLARED + str(name)
    if len(key) <= KEY_LENGTH:
        return key
    tail = "~" + hashlib.sha256(str(name).encode("utf-8")).hexdigest()[:16]
    return key[:KEY_LENGTH - len(tail)] + tail


def data_key(ref: DataRef) -> str:
    """The key one data set's releases share, so its spends and cap follow it.

    * a DataRef carrying the curator's schema: the declared data set, ``"dataset:" + schema.name``; every
      file version uploaded into it (a re-export with other line endings, a corrected cell, a row fewer)
      spends from one budget, whatever its fingerprint;
    * an upload without a schema: ``"upload:" + the file's SHA-256``;
    * bundled data: its name.
    """
    schema = getattr(ref, "schema", None)
    if schema is not None:
        return declared_key(schema.name)
    return f"{ref.source}:{ref.fingerprint}" if ref.is_upload else ref.source


def data_label(ref: DataRef) -> str:
    """The name people see for ``ref``'s data set: the declared data set's name, else its key."""
    schema = getattr(ref, "schema", None)
    return str(schema.name)[:KEY_LENGTH] if schema is not None else data_key(ref)


def declared_name(key: str) -> str | None:
    """The declared data set's name for a ledger key made by :func:`declared_key` (None for other keys;
    a shortened long name comes back shortened)."""
    return key[len(DECLARED):] if key.startswith(DECLARED) else None


def release_key(action: str, plan_digest: str, nonce: str = "") -> str:
    """Idempotency key: the action and the plan's digest (plus a per-press nonce for secure releases,
    each of which is a new release even with the same plan)."""
    return ":".join(p for p in (str(action), str(plan_digest), str(nonce)) if p)[:200]


def spends_of(ledger: BudgetLedger) -> tuple[Spend, ...]:
    """A page's ledger as storable spends; a ledger with a per-measurement delta (``level_delta``, as the
    budget allocation's for the analytic Gaussian) gives every spend that delta."""
    delta = float(getattr(ledger, "level_delta", None) or 0.0)
    return tuple(dataclasses.replace(s, delta=delta if s.unit == "epsilon" else 0.0) for s in ledger.spends)


def _spend_rows(spends: Iterable[Spend]) -> tuple:
    """Spends as the ledger stores them (text cut to the column widths, numbers as floats), for telling
    whether a release given again is the one already stored."""
    return tuple((s.label[:200], s.measured[:300], float(s.amount), s.unit, float(s.delta), s.composition,
                  None if s.group is None else s.group[:200], None if s.part is None else s.part[:200])
                 for s in spends)


def _amount(value, what: str, unit: str) -> float:
    """A spend or cap amount as a float in (0, MAX_AMOUNT], else a ValueError saying what to change."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number; got {value!r}.") from None
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{what} must be a positive finite {unit}; got {value!r}.")
    if x > MAX_AMOUNT:
        raise ValueError(f"{what} is {unit} {x:.4g}, above the largest the ledger accepts ({MAX_AMOUNT:.0g}); "
                         f"at that size nothing stays private. Enter the {unit} really spent (typically below 10).")
    return x


def check_release(rel: "LedgerRelease") -> "LedgerRelease":
    """``rel`` when every spend is a number the ledger can compose (amount in (0, MAX_AMOUNT], delta in
    [0, 1)); else a ValueError naming the spend and what to change."""
    for s in rel.spends:
        _amount(s.amount, f"The spend on {s.label!r}", s.unit)
        try:
            d = float(s.delta)
        except (TypeError, ValueError):
            raise ValueError(f"The delta of {s.label!r} must be a number; got {s.delta!r}.") from None
        if not (math.isfinite(d) and 0.0 <= d < 1.0):
            raise ValueError(f"The delta of {s.label!r} must be at least 0 and below 1; got {s.delta!r}.")
    return rel


def refuse_plain_upload(rel: "LedgerRelease") -> None:
    """A real release is made on a declared data set only: a file uploaded without a declaration (an
    ``"upload:"`` key) is keyed by its bytes, so one changed byte would give the same people a fresh budget.
    ValueError saying where to declare it; simulations pass."""
    if rel.kind == "release" and rel.data_key.startswith(f"{DataRef.UPLOAD}:"):
        raise ValueError("A real release needs a declared data set: declare this file on the Data step page "
                         "(its budget then follows its rows, whatever the file's name or bytes) and release "
                         "from it. A plain upload can only be used for seeded simulations.")


@dataclass(frozen=True)
class LedgerRelease:
    """One recorded release (or simulation) of one data set, with its spends."""

    data_key: str
    release_key: str
    kind: str
    page: str
    action: str
    label: str
    plan_digest: str
    spends: tuple[Spend, ...]
    data_label: str = ""
    created_utc: str = ""
    curator: str = LOCAL_CURATOR
    """Who made it: the signed-in curator's name (``LOCAL_CURATOR`` for scripts and older rows)."""

    def __post_init__(self):
        if not self.curator:
            object.__setattr__(self, "curator", LOCAL_CURATOR)
        if self.kind not in KINDS:
            raise ValueError(f"kind must be 'release' or 'simulation'; got {self.kind!r}.")
        if not self.spends:
            raise ValueError(f"{self.label!r} records no spends; a release always spends budget.")


@dataclass(frozen=True)
class Totals:
    """A data set's composed total. ``rho`` is None once an (epsilon, delta) spend is in (it has no rho);
    ``delta`` is 0 for a pure total, else the conversion delta plus the approximate spends' deltas."""

    epsilon: float
    delta: float
    rho: float | None
    pure: bool
    n_releases: int


def _pure_and_zcdp(releases: Iterable[LedgerRelease]) -> BudgetLedger:
    """Every exact (pure or zCDP) spend in one ledger; groups renamed per release so they never merge."""
    out = BudgetLedger()
    for i, rel in enumerate(releases, start=1):
        for s in rel.spends:
            if s.approximate:
                continue
            group = None if s.group is None else f"release {i}: {s.group}"
            out.spend(f"release {i}: {s.label}", s.amount, s.unit, s.composition, group, s.measured, s.part)
    return out


def _approximate(releases: Iterable[LedgerRelease]) -> tuple[float, float]:
    """(epsilon, delta) spends by basic composition: sequential ones add; a parallel group costs its
    largest part (epsilons and deltas each summed inside a part first)."""
    eps = dlt = 0.0
    for rel in releases:
        parts: dict[str, dict[str, list[Spend]]] = {}
        for s in rel.spends:
            if not s.approximate:
                continue
            if s.composition == "sequential":
                eps, dlt = eps + s.amount, dlt + s.delta
            else:
                parts.setdefault(s.group, {}).setdefault(s.part or s.label, []).append(s)
        for group in parts.values():
            eps += max(sum(s.amount for s in p) for p in group.values())
            dlt += max(sum(s.delta for s in p) for p in group.values())
    return eps, dlt


def compose(releases: Iterable[LedgerRelease], delta: float = DEFAULT_DELTA) -> Totals:
    """The composed total of ``releases`` (simulations are skipped). ``delta`` is what a zCDP part is
    converted at; the returned delta adds the approximate spends' deltas to it."""
    rels = [r for r in releases if r.kind == "release"]
    exact = _pure_and_zcdp(rels)
    approx_eps, approx_delta = _approximate(rels)
    has_approx = any(s.approximate for r in rels for s in r.spends)
    try:
        if not len(exact):
            eps, conv_delta = 0.0, 0.0
        elif exact.is_pure():
            eps, conv_delta = exact.total("epsilon"), 0.0
        else:
            eps, conv_delta = exact.total("epsilon", delta), float(delta)
    except OverflowError:   # a stored spend so large the sum overflows: report it as unbounded, never less
        eps, conv_delta = math.inf, (0.0 if exact.is_pure() else float(delta))
    try:
        rho = None if has_approx else (exact.total("rho") if len(exact) else 0.0)
    except OverflowError:
        rho = math.inf
    pure = not has_approx and (not len(exact) or exact.is_pure())
    return Totals(float(eps + approx_eps), float(conv_delta + approx_delta), rho, pure, len(rels))


def within_reservation(actual: LedgerRelease, reserved: LedgerRelease, decision: "Cap | str | None" = None) -> None:
    """Refuse (``ValueError``) spends that compose to more than what was reserved for them.

    Compared where the ledger states totals: epsilon and delta at the default delta, at the cap's delta
    and at 1e-9, and rho when both have one; a relative slack of 1e-9 absorbs rounding only.
    """
    deltas = {DEFAULT_DELTA, 1e-9} | ({decision.delta} if isinstance(decision, Cap) else set())
    for delta in sorted(deltas):
        a, r = compose([actual], delta), compose([reserved], delta)
        over_eps = a.epsilon > r.epsilon * (1 + 1e-9) + 1e-12
        over_delta = a.delta > r.delta * (1 + 1e-9) + 1e-15
        over_rho = a.rho is not None and r.rho is not None and a.rho > r.rho * (1 + 1e-9) + 1e-15
        if over_eps or over_delta or over_rho:
            raise ValueError(f"The computation spent more than was reserved for it in the ledger (epsilon "
                             f"{a.epsilon:.6g} against {r.epsilon:.6g} at delta {delta:.3g}); the result is not "
                             "published and nothing is committed. Report this to the maintainers.")


@dataclass(frozen=True)
class Cap:
    """The curator's budget cap for one data set: ``amount`` in ``unit``; an epsilon cap holds at ``delta``."""

    amount: float
    unit: str = "epsilon"
    delta: float = DEFAULT_DELTA

    def __post_init__(self):
        if self.unit not in ("epsilon", "rho"):
            raise ValueError(f"The cap's unit must be 'epsilon' or 'rho'; got {self.unit!r}.")
        object.__setattr__(self, "amount", _amount(self.amount, "The cap", self.unit))
        try:
            delta = float(self.delta)
        except (TypeError, ValueError):
            raise ValueError(f"The cap's delta must be a number; got {self.delta!r}.") from None
        if not (math.isfinite(delta) and 0.0 < delta < 1.0):
            raise ValueError(f"The cap's delta must be strictly between 0 and 1; got {self.delta}.")
        object.__setattr__(self, "delta", delta)


@dataclass(frozen=True)
class CapCheck:
    """Where a data set would stand against its cap: ``spent`` and ``cap`` in the cap's unit."""

    within: bool
    spent: float
    cap: float
    unit: str
    message: str


def check_cap(releases: Iterable[LedgerRelease], cap: Cap) -> CapCheck:
    """Whether ``releases`` (typically those made plus the one about to be made) stay within ``cap``.

    A rho cap cannot cover (epsilon, delta) spends (they have no rho), so it then reports as exceeded. An
    epsilon cap at delta D converts the zCDP part at D minus the approximate spends' deltas.
    """
    rels = [r for r in releases if r.kind == "release"]
    if cap.unit == "rho":
        totals = compose(rels)
        if totals.rho is None:
            return CapCheck(False, math.inf, cap.amount, "rho",
                            "These releases include (epsilon, delta) spends, which have no rho; set the cap in "
                            "epsilon to check them.")
        spent = totals.rho
    else:
        _, approx_delta = _approximate(rels)
        room = cap.delta - approx_delta
        if room <= 0:
            return CapCheck(False, math.inf, cap.amount, "epsilon",
                            f"The (epsilon, delta) spends already use delta {approx_delta:.3g}, at or above the "
                            f"cap's delta {cap.delta:.3g}.")
        spent = compose(rels, delta=room).epsilon
    within = spent <= cap.amount * (1 + 1e-12)
    word = "within" if within else "over"
    return CapCheck(within, float(spent), cap.amount, cap.unit,
                    f"{cap.unit} {spent:.4g} of the cap {cap.amount:.4g} ({word} the cap"
                    f"{f' at delta {cap.delta:.3g}' if cap.unit == 'epsilon' else ''}).")


def statement(releases: Iterable[LedgerRelease], delta: float = DEFAULT_DELTA, name: str = "this data set") -> str:
    """Plain words for every release of a data set so far (simulations left out), composed as above."""
    rels = [r for r in releases if r.kind == "release"]
    if not rels:
        return f"No release has been made from {name} yet."
    t = compose(rels, delta)
    head = f"{len(rels)} release{'s' if len(rels) != 1 else ''} from {name} so far, composed one after another: "
    if t.pure:
        return head + f"together pure differential privacy with epsilon = {t.epsilon:.4g}."
    tail = f"together (epsilon = {t.epsilon:.4g}, delta = {t.delta:.3g})-differential privacy"
    return head + tail + ("." if t.rho is None else f" (zero-concentrated DP with rho = {t.rho:.4g}).")


def cumulative_frame(releases: Iterable[LedgerRelease], delta: float = DEFAULT_DELTA) -> pd.DataFrame:
    """The running total after each release (simulations skipped): tidy, one row per release."""
    rels = [r for r in releases if r.kind == "release"]
    rows = []
    for i, rel in enumerate(rels, start=1):
        t = compose(rels[:i], delta)
        rows.append({"release": i, "label": rel.label, "page": rel.page, "created_utc": rel.created_utc,
                     "epsilon": t.epsilon, "delta": t.delta, "rho": t.rho})
    return pd.DataFrame(rows, columns=["release", "label", "page", "created_utc", "epsilon", "delta", "rho"])


def spends_frame(releases: Iterable[LedgerRelease]) -> pd.DataFrame:
    """One row per stored spend with its release's page, action, kind, time, curator and plan digest."""
    columns = ["release", "kind", "page", "action", "release_label", "created_utc", "curator", "plan_digest",
               "label", "measured", "amount", "unit", "delta", "composition", "group", "part"]
    rows = [{"release": i, "kind": r.kind, "page": r.page, "action": r.action, "release_label": r.label,
             "created_utc": r.created_utc, "curator": r.curator, "plan_digest": r.plan_digest, "label": s.label,
             "measured": s.measured,
             "amount": s.amount, "unit": s.unit, "delta": s.delta, "composition": s.composition,
             "group": s.group, "part": s.part}
            for i, r in enumerate(releases, start=1) for s in r.spends]
    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class ReleasePreview:
    """What a confirmation shows before a release: totals in the ledger's units at the cap's delta.

    ``before`` counts the committed releases and the live reservations of other releases; ``after`` adds
    this one. ``within`` is True when ``after`` stays within the cap or the curator chose no cap.
    """

    release: LedgerRelease
    before: Totals
    after: Totals
    cap: Cap | None
    no_cap: bool
    within: bool
    repeat_of: LedgerRelease | None
    message: str


def _now_iso(at: float | None = None) -> str:
    when = datetime.now(timezone.utc) if at is None else datetime.fromtimestamp(at, timezone.utc)
    return when.isoformat(timespec="seconds")


def _total_words(t: Totals, cap: Cap | None) -> str:
    """A total in the cap's unit (epsilon when there is no cap)."""
    if cap is not None and cap.unit == "rho":
        return "rho " + ("unbounded (it includes (epsilon, delta) spends)" if t.rho is None else f"{t.rho:.4g}")
    return f"epsilon {t.epsilon:.4g}"


@dataclass
class ProjectLedger:
    """The project ledger in the project database (``url``, or ``DASHBOARD_DB_URL``, or the default SQLite).

    ``clock`` gives the time (seconds since the epoch) reservations expire by; every process sharing a
    database must agree on it, as the hosts of one dashboard do.
    """

    url: str | None = None
    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    engine: object = field(init=False, repr=False)
    db: Database = field(init=False, repr=False)

    def __post_init__(self):
        self.db = open_database(self.url)
        self.engine = self.db.engine
        try:
            self.db.create(metadata)
            self._migrate()
            self._absorb_legacy()
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The privacy ledger's database cannot be opened ({_why(exc)}).") from exc

    # ------------------------------------------------------------------ schema

    def _migrate(self) -> None:
        """Give a ledger written before reservations its status and expiry columns (every row it already
        holds is a committed release or simulation), and one written before curators its curator columns
        (every row it already holds is the local curator's)."""
        self._add_curator_columns()
        if {"status", "expires_at"} <= {c["name"] for c in inspect(self.engine).get_columns("ledger_releases")}:
            return
        floating = "DOUBLE PRECISION" if self.engine.dialect.name == "postgresql" else "FLOAT"
        with self.db.write_tx() as conn:
            if self.db.is_sqlite:
                have = {row[1] for row in conn.exec_driver_sql("PRAGMA table_info(ledger_releases)")}
                if "status" not in have:
                    conn.exec_driver_sql("ALTER TABLE ledger_releases ADD COLUMN status VARCHAR(12) NOT NULL "
                                         f"DEFAULT '{COMMITTED}'")
                if "expires_at" not in have:
                    conn.exec_driver_sql(f"ALTER TABLE ledger_releases ADD COLUMN expires_at {floating}")
            else:
                conn.exec_driver_sql("ALTER TABLE ledger_releases ADD COLUMN IF NOT EXISTS status VARCHAR(12) "
                                     f"NOT NULL DEFAULT '{COMMITTED}'")
                conn.exec_driver_sql(f"ALTER TABLE ledger_releases ADD COLUMN IF NOT EXISTS expires_at {floating}")

    def _add_curator_columns(self) -> None:
        lacking = [t for t in CURATOR_COLUMNS
                   if "curator" not in {c["name"] for c in inspect(self.engine).get_columns(t)}]
        if not lacking:
            return
        guard = "" if self.db.is_sqlite else "IF NOT EXISTS "     # two servers may migrate at once
        with self.db.write_tx() as conn:
            for table in lacking:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {guard}curator VARCHAR(120) NOT NULL "
                                     f"DEFAULT '{LOCAL_CURATOR}'")

    def _absorb_legacy(self) -> None:
        """Move the synthesis page's earlier release book into this ledger once, then drop its table."""
        if LEGACY_TABLE not in inspect(self.engine).get_table_names():
            return
        with self.db.write_tx() as conn:
            rows = conn.execute(text(f"SELECT data_key, release_key, label, spends, created_utc FROM {LEGACY_TABLE} "
                                     "ORDER BY id")).all()
            for key, rkey, label, spends, created in rows:
                kind = "simulation" if str(label).startswith("seeded") else "release"
                rel = LedgerRelease(key, release_key("synthesis", rkey), kind, "Stratified synthesis",
                                    "synthetic release", label, "", tuple(Spend(
                                        s["label"], float(s["amount"]), s["unit"], s["composition"], s["group"],
                                        s["part"], s.get("measured", "")) for s in json.loads(spends)),
                                    key, created)
                if self._row(conn, rel.data_key, rel.release_key) is None:
                    self._insert(conn, rel)
            conn.execute(text(f"DROP TABLE {LEGACY_TABLE}"))

    # ------------------------------------------------------------------ transactions

    def _write(self, body: Callable, failure: str, *, wait: float | None = None,
               waiting: Callable[[], None] | None = None):
        """Run ``body(conn)`` in one write transaction and return its result.

        A writer that finds the database busy waits its turn and tries again (up to WAIT_LIMIT seconds);
        a connection the server dropped mid-transaction is retried once on a fresh one (the transaction
        was rolled back, and every body here is idempotent). Other faults become a ValueError starting
        with ``failure``; the ledger's own errors (CapExceeded, ...) pass through unchanged.

        ``wait`` (seconds) shortens the wait for a caller that must answer soon (a page): once it has
        passed, the next busy try raises :class:`LedgerBusy` instead (a try itself may block for the
        database's busy timeout). ``waiting()`` is called before each new try; it may raise to stop.
        """
        started = time.monotonic()
        deadline = started + WAIT_LIMIT
        dropped = clashes = tries = 0
        while True:
            if waiting is not None and tries:
                waiting()
            tries += 1
            try:
                with self.db.write_tx() as conn:
                    return body(conn)
            except IntegrityError as exc:   # a concurrent writer stored the same key first: look again
                clashes += 1
                if clashes < 3:
                    continue
                raise ValueError(f"{failure} ({_why(exc)}).") from exc
            except StoreUnavailable as exc:
                if exc.retryable and wait is not None and time.monotonic() >= started + wait:
                    raise LedgerBusy(busy_message(time.monotonic() - started)) from exc
                if exc.retryable and time.monotonic() < deadline:
                    time.sleep(random.uniform(0.005, 0.05))
                    continue
                if lost_connection(exc) and dropped < 1:
                    dropped += 1
                    continue
                raise ValueError(f"{failure} ({_why(exc)}).") from exc
            except SQLAlchemyError as exc:
                raise ValueError(f"{failure} ({_why(exc)}).") from exc

    def _read(self, body: Callable):
        try:
            with self.db.read_tx() as conn:
                return body(conn)
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The privacy ledger cannot be read ({_why(exc)}).") from exc

    def _lock(self, conn, key: str) -> None:
        """Queue behind every other writer of data set ``key`` until this transaction ends. SQLite's
        BEGIN IMMEDIATE already admits one writer at a time; PostgreSQL takes the data set's lock row."""
        if self.db.is_sqlite:
            return
        conn.execute(pg_insert(locks_table).values(data_key=key).on_conflict_do_nothing())
        conn.execute(select(locks_table.c.data_key).where(locks_table.c.data_key == key).with_for_update())

    @staticmethod
    def _row(conn, key: str, rkey: str):
        return conn.execute(select(releases_table.c.id, releases_table.c.status, releases_table.c.expires_at).where(
            (releases_table.c.data_key == key) & (releases_table.c.release_key == rkey))).mappings().first()

    @staticmethod
    def _insert(conn, rel: LedgerRelease, status: str = COMMITTED, expires_at: float | None = None) -> int:
        row = {"data_key": rel.data_key, "data_label": (rel.data_label or rel.data_key)[:200],
               "release_key": rel.release_key, "kind": rel.kind, "page": rel.page[:80],
               "action": rel.action[:80], "label": rel.label[:200], "plan_digest": rel.plan_digest[:64],
               "created_utc": rel.created_utc or _now_iso(), "status": status, "expires_at": expires_at,
               "curator": rel.curator[:120]}
        rid = conn.execute(insert(releases_table).values(**row)).inserted_primary_key[0]
        ProjectLedger._insert_spends(conn, rid, rel.spends)
        return rid

    @staticmethod
    def _insert_spends(conn, rid: int, spends: Iterable[Spend]) -> None:
        conn.execute(insert(spends_table), [
            {"release_id": rid, "position": i, "label": s.label[:200], "measured": s.measured[:300],
             "amount": float(s.amount), "unit": s.unit, "delta": float(s.delta), "composition": s.composition,
             "grp": None if s.group is None else s.group[:200], "part": None if s.part is None else s.part[:200]}
            for i, s in enumerate(spends)])

    @staticmethod
    def _drop(conn, where) -> None:
        ids = conn.execute(select(releases_table.c.id).where(where)).scalars().all()
        if ids:
            conn.execute(delete(spends_table).where(spends_table.c.release_id.in_(ids)))
            conn.execute(delete(releases_table).where(releases_table.c.id.in_(ids)))

    @staticmethod
    def _load(conn, where) -> list[tuple[dict, LedgerRelease]]:
        """Rows matching ``where`` with their spends, oldest first."""
        heads = conn.execute(select(releases_table).where(where).order_by(releases_table.c.id)).mappings().all()
        ids = [h["id"] for h in heads]
        spends = conn.execute(select(spends_table).where(spends_table.c.release_id.in_(ids))
                              .order_by(spends_table.c.release_id, spends_table.c.position)
                              ).mappings().all() if ids else []
        by_release: dict[int, list[Spend]] = {}
        for s in spends:
            by_release.setdefault(s["release_id"], []).append(Spend(
                s["label"], float(s["amount"]), s["unit"], s["composition"], s["grp"], s["part"], s["measured"],
                float(s["delta"])))
        return [(dict(h), LedgerRelease(h["data_key"], h["release_key"], h["kind"], h["page"], h["action"], h["label"],
                                        h["plan_digest"], tuple(by_release.get(h["id"], ())), h["data_label"],
                                        h["created_utc"], h["curator"])) for h in heads]

    def _live(self, key: str, now: float):
        """Committed rows, and reservations that have not expired at ``now``, of data set ``key``."""
        c = releases_table.c
        return (c.data_key == key) & ((c.status == COMMITTED) | ((c.status == RESERVED) & (c.expires_at > now)))

    @staticmethod
    def _decision(conn, key: str) -> Cap | str | None:
        row = conn.execute(select(caps_table).where(caps_table.c.data_key == key)).mappings().first()
        if row is not None:
            return Cap(float(row["amount"]), row["unit"], float(row["delta"]))
        chosen = conn.execute(select(no_cap_table.c.data_key).where(no_cap_table.c.data_key == key)).first()
        return NO_CAP if chosen is not None else None

    # ------------------------------------------------------------------ reserve -> run -> commit

    def reserve(self, rel: LedgerRelease, *, ttl_seconds: float = DEFAULT_TTL, wait: float | None = None,
                waiting: Callable[[], None] | None = None) -> Reservation:
        """Check ``rel`` against its data set's cap and store it as reserved, in one write transaction.

        Counted against the cap: the committed releases, the live reservations and ``rel``. A real release
        (kind "release") needs a cap decision (:class:`CapUndecided`) and must fit the cap
        (:class:`CapExceeded`). Reserving a release key again returns the reservation (or the committed
        release) it already has, so a retried call never counts twice; a key already stored with another
        plan digest, kind or spends is refused (``ValueError``), since returning the old reservation would
        let a different release run uncounted. Expired reservations of the data set are removed on the way.

        ``wait``: at most this many seconds behind another writer's lock, then :class:`LedgerBusy` (default:
        the ledger's long WAIT_LIMIT); ``waiting()`` is called before each new try (see :meth:`_write`).
        """
        check_release(rel)
        refuse_plain_upload(rel)
        try:
            ttl = float(ttl_seconds)
        except (TypeError, ValueError):
            raise ValueError(f"ttl_seconds must be a number of seconds; got {ttl_seconds!r}.") from None
        if not (math.isfinite(ttl) and 0 < ttl <= 30 * 24 * 3600):
            raise ValueError(f"ttl_seconds must be positive and at most 30 days; got {ttl_seconds!r}.")

        def body(conn) -> Reservation:
            now = float(self.clock())
            self._lock(conn, rel.data_key)
            c = releases_table.c
            self._drop(conn, (c.data_key == rel.data_key) & (c.status == RESERVED) & (c.expires_at <= now))
            have = self._row(conn, rel.data_key, rel.release_key)
            if have is not None:
                self._same_release(conn, have, rel)
                expires = "" if have["expires_at"] is None else _now_iso(have["expires_at"])
                return Reservation(int(have["id"]), rel.data_key, rel.release_key, expires)
            if rel.kind == "release":
                self._check_cap(conn, rel, now)
            expires_at = now + ttl
            rid = self._insert(conn, rel, RESERVED, expires_at)
            return Reservation(int(rid), rel.data_key, rel.release_key, _now_iso(expires_at))

        return self._write(body, f"{NOT_RECORDED}: the release was not reserved, so do not run it", wait=wait,
                           waiting=waiting)

    def _same_release(self, conn, have, rel: LedgerRelease) -> None:
        """Refuse (``ValueError``) a release key already stored for another release: a retried press may
        reuse its key, but only with the same plan digest, kind and spends. A committed release whose
        detailed spends replaced the reserved ones (``commit(res, spends)``) is the same release when
        ``rel``'s spends are exactly the committed ones, so a retry after the commit must send those."""
        stored = self._load(conn, releases_table.c.id == have["id"])[0][1]
        same = (stored.plan_digest == rel.plan_digest[:64] and stored.kind == rel.kind
                and _spend_rows(stored.spends) == _spend_rows(rel.spends))
        if not same:
            raise ValueError(f"The release key {rel.release_key!r} of {rel.data_label or rel.data_key} is already "
                             f"used by another release ({stored.label}: other plan digest or spends), so this one "
                             "was not reserved. Give this release its own key (a new press) instead of reusing it.")

    def _check_cap(self, conn, rel: LedgerRelease, now: float) -> None:
        decision = self._decision(conn, rel.data_key)
        name = rel.data_label or rel.data_key
        if decision is None:
            raise CapUndecided(f"No budget cap has been decided for {name}: set a cap for it on the privacy "
                               "ledger page, or record there that it has no cap, then release again.")
        if decision == NO_CAP:
            return
        counted = [r for _, r in self._load(conn, self._live(rel.data_key, now)) if r.kind == "release"]
        check = check_cap((*counted, rel), decision)
        if check.within:
            return
        before = check_cap(counted, decision)
        unit = decision.unit
        room = (f" (room left: {unit} {max(decision.amount - before.spent, 0.0):.4g})"
                if math.isfinite(before.spent) else "")
        raise CapExceeded(f"This release would bring {name} to {unit} {check.spent:.4g}, over its cap of "
                          f"{unit} {decision.amount:.4g}; {before.spent:.4g} is already spent or reserved{room}. "
                          "Spend less in this release, or raise the data set's cap on the privacy ledger page.")

    def commit(self, res: Reservation, spends: Iterable[Spend] | None = None) -> LedgerRelease:
        """Turn the reservation into a committed release and return it; committing it again returns the same
        release. :class:`ReservationLost` when it is unknown, cancelled or expired.

        ``spends`` (optional) are what the computation actually spent, in full detail (each round of an
        adaptive synthesizer, each stratum): they replace the reserved spends when they compose to no more
        than the reservation (:func:`within_reservation`); a computation that spent more is refused with a
        ``ValueError`` and nothing is committed, since its budget was never reserved.
        """
        actual = None if spends is None else tuple(spends)

        def body(conn) -> LedgerRelease:
            now = float(self.clock())
            self._lock(conn, res.data_key)
            have = self._row(conn, res.data_key, res.release_key)
            if have is None or int(have["id"]) != int(res.id) or (
                    have["status"] == RESERVED and (have["expires_at"] is None or have["expires_at"] <= now)):
                raise ReservationLost(
                    f"The reservation for release {res.release_key!r} of {res.data_key} was cancelled or has "
                    "expired, so its budget may be in use by another release: do not publish this result; "
                    "run the release again.")
            if have["status"] == RESERVED:
                if actual is not None:
                    reserved = self._load(conn, releases_table.c.id == have["id"])[0][1]
                    detailed = dataclasses.replace(reserved, spends=actual)
                    check_release(detailed)
                    within_reservation(detailed, reserved, self._decision(conn, res.data_key))
                    conn.execute(delete(spends_table).where(spends_table.c.release_id == have["id"]))
                    self._insert_spends(conn, have["id"], actual)
                conn.execute(releases_table.update().where(releases_table.c.id == have["id"]).values(
                    status=COMMITTED, expires_at=None, created_utc=_now_iso()))
            return self._load(conn, releases_table.c.id == have["id"])[0][1]

        return self._write(body, f"{NOT_RECORDED}: the release was not committed; do not publish until it is")

    def cancel(self, res: Reservation) -> None:
        """Drop the reservation (a committed release stays); cancelling twice changes nothing."""
        c = releases_table.c

        def body(conn) -> None:
            self._drop(conn, (c.id == res.id) & (c.data_key == res.data_key) & (c.release_key == res.release_key)
                       & (c.status == RESERVED))

        self._write(body, "The reservation could not be cancelled; it stops counting when it expires")

    def preview(self, rel: LedgerRelease) -> ReleasePreview:
        """Where ``rel``'s data set stands now and would stand after it (see :class:`ReleasePreview`)."""
        check_release(rel)
        now = float(self.clock())

        def body(conn):
            rows = self._load(conn, self._live(rel.data_key, now))
            return self._decision(conn, rel.data_key), rows

        decision, rows = self._read(body)
        cap = decision if isinstance(decision, Cap) else None
        no_cap = decision == NO_CAP
        others = [r for _, r in rows if r.kind == "release" and r.release_key != rel.release_key]
        delta = cap.delta if cap is not None else DEFAULT_DELTA
        before, after = compose(others, delta), compose((*others, rel), delta)
        repeat = [r for h, r in rows if h["status"] == COMMITTED and r.kind == "release"
                  and r.plan_digest == rel.plan_digest and r.release_key != rel.release_key]
        if rel.kind != "release":
            within = True
        elif cap is not None:
            within = check_cap((*others, rel), cap).within
        else:
            within = no_cap
        spend = _total_words(compose([rel], delta), cap)
        change = f"{_total_words(before, cap)} -> {_total_words(after, cap).split(' ', 1)[1]}"
        name = rel.data_label or rel.data_key
        if rel.kind != "release":
            limit = "a seeded simulation, which counts toward no total"
        elif cap is not None:
            limit = (f"cap {cap.unit} {cap.amount:.4g}" + (f" at delta {cap.delta:.3g}" if cap.unit == "epsilon"
                                                          else "") + ("" if within else ", which it would exceed"))
        else:
            limit = "no cap, as chosen for this data set" if no_cap else "no cap decided yet, so it cannot be released"
        message = f"Releasing {rel.label} from {name} spends {spend}: total {change} ({limit})."
        return ReleasePreview(rel, before, after, cap, no_cap, within, repeat[-1] if repeat else None, message)

    # ------------------------------------------------------------------ recording and reading

    def record(self, rel: LedgerRelease) -> bool:
        """Store one release and its spends, committed, in one transaction; False when its key was already
        recorded. Meant for seeded simulations; a real release goes through :meth:`reserve` and
        :meth:`commit`, which check the cap in the same transaction (this call stores without a check, as a
        release already made must be in the ledger)."""
        check_release(rel)
        if not rel.created_utc:
            rel = LedgerRelease(**{**rel.__dict__, "created_utc": _now_iso()})

        def body(conn) -> bool:
            self._lock(conn, rel.data_key)
            if self._row(conn, rel.data_key, rel.release_key) is not None:
                return False
            self._insert(conn, rel)
            return True

        return self._write(body, f"{NOT_RECORDED}; do not publish until it is")

    def releases(self, key: str, kind: str | None = None) -> tuple[LedgerRelease, ...]:
        """Everything committed for data set ``key``, oldest first (only ``kind`` when given); reservations
        are listed apart by :meth:`reservations`."""
        where = (releases_table.c.data_key == key) & (releases_table.c.status == COMMITTED)
        if kind is not None:
            where = where & (releases_table.c.kind == kind)
        return tuple(r for _, r in self._read(lambda conn: self._load(conn, where)))

    def reservations(self, key: str) -> tuple[tuple[Reservation, LedgerRelease], ...]:
        """The live (unexpired) reservations of data set ``key``, oldest first, each with its release."""
        c = releases_table.c
        where = (c.data_key == key) & (c.status == RESERVED) & (c.expires_at > float(self.clock()))
        rows = self._read(lambda conn: self._load(conn, where))
        return tuple((Reservation(int(h["id"]), key, r.release_key, _now_iso(h["expires_at"])), r) for h, r in rows)

    def data_sets(self, kind: str | None = None) -> pd.DataFrame:
        """Every data set with a committed release (or simulation), a live reservation or a cap decision:
        its key and label; with ``kind``, only data sets with an entry of that kind or a cap decision."""
        c = releases_table.c
        query = select(c.data_key, c.data_label).where(
            (c.status == COMMITTED) | (c.expires_at > float(self.clock()))).order_by(c.id)
        if kind is not None:
            query = query.where(c.kind == kind)

        def body(conn):
            return (conn.execute(query).all(), conn.execute(select(caps_table.c.data_key)).scalars().all(),
                    conn.execute(select(no_cap_table.c.data_key)).scalars().all())

        rows, capped, uncapped = self._read(body)
        labels = dict(rows)
        for key in (*capped, *uncapped):
            labels.setdefault(key, key)
        return pd.DataFrame({"data_key": list(labels), "data_label": list(labels.values())},
                            columns=["data_key", "data_label"])

    # ------------------------------------------------------------------ cap decisions

    def set_cap(self, key: str, cap: Cap | None, curator: str = LOCAL_CURATOR) -> None:
        """Set ``curator``'s cap for data set ``key`` (replacing a "no cap" choice), or with None remove the
        decision altogether (the data set is then undecided), in one transaction."""
        if cap is not None and not isinstance(cap, Cap):
            raise ValueError(f"A cap must be a Cap (amount, unit, delta) or None; got {cap!r}.")

        def body(conn) -> None:
            self._lock(conn, key)
            conn.execute(delete(caps_table).where(caps_table.c.data_key == key))
            conn.execute(delete(no_cap_table).where(no_cap_table.c.data_key == key))
            if cap is not None:
                conn.execute(insert(caps_table).values(data_key=key, amount=cap.amount, unit=cap.unit,
                                                       delta=cap.delta, updated_utc=_now_iso(),
                                                       curator=(curator or LOCAL_CURATOR)[:120]))

        self._write(body, "The cap could not be saved; try again")

    def set_no_cap(self, key: str, curator: str = LOCAL_CURATOR) -> None:
        """Record ``curator``'s explicit choice that data set ``key`` has no cap (and when it was made)."""

        def body(conn) -> None:
            self._lock(conn, key)
            conn.execute(delete(caps_table).where(caps_table.c.data_key == key))
            conn.execute(delete(no_cap_table).where(no_cap_table.c.data_key == key))
            conn.execute(insert(no_cap_table).values(data_key=key, decided_utc=_now_iso(),
                                                     curator=(curator or LOCAL_CURATOR)[:120]))

        self._write(body, "The choice of no cap could not be saved; try again")

    def cap_decision(self, key: str) -> Cap | str | None:
        """The data set's cap, "none" for the explicit choice of no cap, or None while undecided."""
        return self._read(lambda conn: self._decision(conn, key))

    def cap_decided_by(self, key: str) -> tuple[str, str] | None:
        """(curator, when) of data set ``key``'s cap decision, or None while undecided."""
        def body(conn):
            for table, when in ((caps_table, caps_table.c.updated_utc), (no_cap_table, no_cap_table.c.decided_utc)):
                row = conn.execute(select(table.c.curator, when).where(table.c.data_key == key)).first()
                if row is not None:
                    return str(row[0]), str(row[1])
            return None
        return self._read(body)

    def cap(self, key: str) -> Cap | None:
        """The data set's cap (None without one, whether undecided or by choice)."""
        decision = self.cap_decision(key)
        return decision if isinstance(decision, Cap) else None

    # ------------------------------------------------------------------ views of committed releases

    def totals(self, key: str, delta: float | None = None) -> Totals:
        """The composed total of data set ``key``'s committed releases (at the cap's delta, else ``delta``
        or the default)."""
        cap = self.cap(key)
        return compose(self.releases(key, "release"),
                       delta if delta is not None else (cap.delta if cap is not None else DEFAULT_DELTA))

    def projected(self, pending: LedgerRelease) -> CapCheck | None:
        """Where ``pending``'s data set would stand if it were released now (committed releases and live
        reservations of others count); None without a cap."""
        check_release(pending)
        cap = self.cap(pending.data_key)
        if cap is None:
            return None
        now = float(self.clock())
        rows = self._read(lambda conn: self._load(conn, self._live(pending.data_key, now)))
        made = [r for _, r in rows if r.kind == "release"]
        if any(r.release_key == pending.release_key for r in made):
            return check_cap(made, cap)
        return check_cap((*made, pending), cap)

    def export(self, key: str) -> dict:
        """What a report carries: the data set's key, totals, cap (and whether "no cap" was chosen), releases,
        simulations and live reservations apart (only spends, labels and digests: nothing from the data)."""
        rels = self.releases(key)
        decision = self.cap_decision(key)
        cap = decision if isinstance(decision, Cap) else None
        totals = compose(rels, cap.delta if cap is not None else DEFAULT_DELTA)

        def records(frame: pd.DataFrame) -> list[dict]:
            frame = frame.astype(object)
            return frame.where(frame.notna(), None).to_dict("records")

        frame = spends_frame(rels)
        return {"data_key": key, "totals": dict(totals.__dict__),
                "cap": None if cap is None else dict(cap.__dict__), "no_cap": decision == NO_CAP,
                "releases": records(frame[frame["kind"] == "release"]),
                "simulations": records(frame[frame["kind"] == "simulation"]),
                "reserved": records(spends_frame([r for _, r in self.reservations(key)]))}
