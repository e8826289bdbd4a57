"""The project's privacy ledger: every release made from each data set, kept in the project database.

What one page's session remembers ends with the session; what was released does not. This ledger keeps,
per data set, every release's spends (never its data): unit (epsilon, rho, or epsilon with a delta), what
was measured, sequential or parallel composition, the page and action that made it, when, and the
digest of the plan it came from. Seeded simulations (previews drawn from a plan's seed) are kept apart
and never count toward a total.

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
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable

import pandas as pd
from sqlalchemy import (Column, Float, ForeignKey, Integer, MetaData, String, Table, UniqueConstraint, delete,
                        insert, inspect, select, text)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from core.contracts import DataRef
from core.database import Database, StoreUnavailable
from core.privacy.ledger import BudgetLedger, Spend

KINDS = ("release", "simulation")
DEFAULT_DELTA = 1e-6
NOT_RECORDED = "The release could not be recorded in the project's privacy ledger"
LEGACY_TABLE = "synthesis_releases"   # the synthesis page's earlier per-data-set book, folded in here

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
)


def _why(exc: BaseException) -> str:
    """What went wrong, for a message: the project database's own words, else the error's type."""
    return str(exc) if isinstance(exc, StoreUnavailable) else type(exc).__name__


def data_key(ref: DataRef) -> str:
    """The key one data set's releases share: the bundled name, or "upload:" + the upload's SHA-256."""
    return f"{ref.source}:{ref.fingerprint}" if ref.is_upload else ref.source


def release_key(action: str, plan_digest: str, nonce: str = "") -> str:
    """Idempotency key: the action and the plan's digest (plus a per-press nonce for secure releases,
    each of which is a new release even with the same plan)."""
    return ":".join(p for p in (str(action), str(plan_digest), str(nonce)) if p)[:200]


def spends_of(ledger: BudgetLedger) -> tuple[Spend, ...]:
    """A page's ledger as storable spends; a ledger with a per-measurement delta (``level_delta``, as the
    budget allocation's for the analytic Gaussian) gives every spend that delta."""
    delta = float(getattr(ledger, "level_delta", None) or 0.0)
    return tuple(dataclasses.replace(s, delta=delta if s.unit == "epsilon" else 0.0) for s in ledger.spends)


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

    def __post_init__(self):
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
    if not len(exact):
        eps, conv_delta = 0.0, 0.0
    elif exact.is_pure():
        eps, conv_delta = exact.total("epsilon"), 0.0
    else:
        eps, conv_delta = exact.total("epsilon", delta), float(delta)
    rho = None if has_approx else (exact.total("rho") if len(exact) else 0.0)
    pure = not has_approx and (not len(exact) or exact.is_pure())
    return Totals(float(eps + approx_eps), float(conv_delta + approx_delta), rho, pure, len(rels))


@dataclass(frozen=True)
class Cap:
    """The curator's budget cap for one data set: ``amount`` in ``unit``; an epsilon cap holds at ``delta``."""

    amount: float
    unit: str = "epsilon"
    delta: float = DEFAULT_DELTA

    def __post_init__(self):
        if self.unit not in ("epsilon", "rho"):
            raise ValueError(f"The cap's unit must be 'epsilon' or 'rho'; got {self.unit!r}.")
        if not (math.isfinite(self.amount) and self.amount > 0):
            raise ValueError(f"The cap must be a positive finite {self.unit}; got {self.amount}.")
        if not (math.isfinite(self.delta) and 0.0 < self.delta < 1.0):
            raise ValueError(f"The cap's delta must be strictly between 0 and 1; got {self.delta}.")


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
    """One row per stored spend with its release's page, action, kind, time and plan digest."""
    columns = ["release", "kind", "page", "action", "release_label", "created_utc", "plan_digest", "label",
               "measured", "amount", "unit", "delta", "composition", "group", "part"]
    rows = [{"release": i, "kind": r.kind, "page": r.page, "action": r.action, "release_label": r.label,
             "created_utc": r.created_utc, "plan_digest": r.plan_digest, "label": s.label, "measured": s.measured,
             "amount": s.amount, "unit": s.unit, "delta": s.delta, "composition": s.composition,
             "group": s.group, "part": s.part}
            for i, r in enumerate(releases, start=1) for s in r.spends]
    return pd.DataFrame(rows, columns=columns)


@dataclass
class ProjectLedger:
    """The project ledger in the project database (``url``, or ``DASHBOARD_DB_URL``, or the default SQLite)."""

    url: str | None = None
    engine: object = field(init=False, repr=False)
    db: Database = field(init=False, repr=False)

    def __post_init__(self):
        self.db = Database(self.url)
        self.engine = self.db.engine
        try:
            metadata.create_all(self.engine)
            self.db.watch_file()
            self._absorb_legacy()
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The privacy ledger's database cannot be opened ({_why(exc)}).") from exc

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
                if not self._exists(conn, rel):
                    self._insert(conn, rel)
            conn.execute(text(f"DROP TABLE {LEGACY_TABLE}"))

    @staticmethod
    def _exists(conn, rel: LedgerRelease) -> bool:
        return conn.execute(select(releases_table.c.id).where(
            (releases_table.c.data_key == rel.data_key) & (releases_table.c.release_key == rel.release_key))
        ).first() is not None

    @staticmethod
    def _insert(conn, rel: LedgerRelease) -> None:
        row = {"data_key": rel.data_key, "data_label": (rel.data_label or rel.data_key)[:200],
               "release_key": rel.release_key, "kind": rel.kind, "page": rel.page[:80],
               "action": rel.action[:80], "label": rel.label[:200], "plan_digest": rel.plan_digest[:64],
               "created_utc": rel.created_utc or datetime.now(timezone.utc).isoformat(timespec="seconds")}
        rid = conn.execute(insert(releases_table).values(**row)).inserted_primary_key[0]
        conn.execute(insert(spends_table), [
            {"release_id": rid, "position": i, "label": s.label[:200], "measured": s.measured[:300],
             "amount": s.amount, "unit": s.unit, "delta": s.delta, "composition": s.composition,
             "grp": None if s.group is None else s.group[:200], "part": None if s.part is None else s.part[:200]}
            for i, s in enumerate(rel.spends)])

    def record(self, rel: LedgerRelease) -> bool:
        """Store one release and its spends in one transaction; False when its key was already recorded."""
        if not rel.created_utc:
            rel = LedgerRelease(**{**rel.__dict__,
                                   "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        try:
            with self.db.write_tx() as conn:
                if self._exists(conn, rel):
                    return False
                self._insert(conn, rel)
        except IntegrityError:
            return False    # a concurrent rerun stored the same key first
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"{NOT_RECORDED} ({_why(exc)}); do not publish until it is.") from exc
        return True

    def releases(self, key: str, kind: str | None = None) -> tuple[LedgerRelease, ...]:
        """Everything recorded for data set ``key``, oldest first (only ``kind`` when given)."""
        query = select(releases_table).where(releases_table.c.data_key == key).order_by(releases_table.c.id)
        if kind is not None:
            query = query.where(releases_table.c.kind == kind)
        try:
            with self.db.read_tx() as conn:
                heads = conn.execute(query).mappings().all()
                ids = [h["id"] for h in heads]
                spends = conn.execute(select(spends_table).where(spends_table.c.release_id.in_(ids))
                                      .order_by(spends_table.c.release_id, spends_table.c.position)
                                      ).mappings().all() if ids else []
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The privacy ledger cannot be read ({_why(exc)}).") from exc
        by_release: dict[int, list[Spend]] = {}
        for s in spends:
            by_release.setdefault(s["release_id"], []).append(Spend(
                s["label"], float(s["amount"]), s["unit"], s["composition"], s["grp"], s["part"], s["measured"],
                float(s["delta"])))
        return tuple(LedgerRelease(h["data_key"], h["release_key"], h["kind"], h["page"], h["action"], h["label"],
                                   h["plan_digest"], tuple(by_release.get(h["id"], ())), h["data_label"],
                                   h["created_utc"]) for h in heads)

    def data_sets(self, kind: str | None = None) -> pd.DataFrame:
        """Every data set with a recorded release (or simulation) or a cap: its key and label; with ``kind``,
        only data sets with an entry of that kind or a cap."""
        query = select(releases_table.c.data_key, releases_table.c.data_label).order_by(releases_table.c.id)
        if kind is not None:
            query = query.where(releases_table.c.kind == kind)
        try:
            with self.db.read_tx() as conn:
                rows = conn.execute(query).all()
                capped = conn.execute(select(caps_table.c.data_key)).scalars().all()
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The privacy ledger cannot be read ({_why(exc)}).") from exc
        labels = dict(rows)
        for key in capped:
            labels.setdefault(key, key)
        return pd.DataFrame({"data_key": list(labels), "data_label": list(labels.values())},
                            columns=["data_key", "data_label"])

    def set_cap(self, key: str, cap: Cap | None) -> None:
        """Set (or, with None, remove) the curator's cap for data set ``key``, in one transaction."""
        try:
            with self.db.write_tx() as conn:
                conn.execute(delete(caps_table).where(caps_table.c.data_key == key))
                if cap is not None:
                    conn.execute(insert(caps_table).values(
                        data_key=key, amount=cap.amount, unit=cap.unit, delta=cap.delta,
                        updated_utc=datetime.now(timezone.utc).isoformat(timespec="seconds")))
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The cap could not be saved ({_why(exc)}); try again.") from exc

    def cap(self, key: str) -> Cap | None:
        try:
            with self.db.read_tx() as conn:
                row = conn.execute(select(caps_table).where(caps_table.c.data_key == key)).mappings().first()
        except (SQLAlchemyError, StoreUnavailable) as exc:
            raise ValueError(f"The privacy ledger cannot be read ({_why(exc)}).") from exc
        return None if row is None else Cap(float(row["amount"]), row["unit"], float(row["delta"]))

    def totals(self, key: str, delta: float | None = None) -> Totals:
        """The composed total of data set ``key`` (at the cap's delta, else ``delta`` or the default)."""
        cap = self.cap(key)
        return compose(self.releases(key, "release"),
                       delta if delta is not None else (cap.delta if cap is not None else DEFAULT_DELTA))

    def projected(self, pending: LedgerRelease) -> CapCheck | None:
        """Where ``pending``'s data set would stand if it were released now; None without a cap."""
        cap = self.cap(pending.data_key)
        if cap is None:
            return None
        made = self.releases(pending.data_key, "release")
        if any(r.release_key == pending.release_key for r in made):
            return check_cap(made, cap)
        return check_cap((*made, pending), cap)

    def export(self, key: str) -> dict:
        """What a report carries: the data set's key, totals, cap, releases and simulations (only spends,
        labels and digests: nothing from the data)."""
        rels = self.releases(key)
        cap = self.cap(key)
        totals = compose(rels, cap.delta if cap is not None else DEFAULT_DELTA)
        frame = spends_frame(rels).astype(object)
        frame = frame.where(frame.notna(), None)
        return {"data_key": key, "totals": dict(totals.__dict__),
                "cap": None if cap is None else dict(cap.__dict__),
                "releases": frame[frame["kind"] == "release"].to_dict("records"),
                "simulations": frame[frame["kind"] == "simulation"].to_dict("records")}
