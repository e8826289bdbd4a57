"""Every release made from a data set, kept in the project database.

A session's memory ends when the page is reloaded; the privacy cost of what was released does not.
The book stores each release's spends (never its data) under the data set's key, so every later
statement composes all releases ever made from that data, whichever session made them. It uses the
project's SQLAlchemy engine (SQLite by default, PostgreSQL by URL); one transaction per release,
and recording the same release twice changes nothing.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

from sqlalchemy import Column, Integer, MetaData, String, Table, Text, UniqueConstraint, insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from core.contracts import DataRef
from core.privacy.ledger import BudgetLedger, ReleaseLog

_metadata = MetaData()
RELEASES = Table(
    "synthesis_releases", _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("data_key", String(200), nullable=False, index=True),
    Column("release_key", String(200), nullable=False),
    Column("label", String(200), nullable=False),
    Column("spends", Text, nullable=False),
    Column("created_utc", String(32), nullable=False),
    UniqueConstraint("data_key", "release_key"),
)
NOT_RECORDED = "The release could not be recorded in the release ledger"


def data_key(ref: DataRef) -> str:
    """The key releases of one data set share: its bundled name, or the upload's fingerprint."""
    return f"{ref.source}:{ref.fingerprint}" if ref.is_upload else ref.source


def _spends_json(ledger: BudgetLedger) -> str:
    return json.dumps([{"label": s.label, "amount": s.amount, "unit": s.unit, "composition": s.composition,
                        "group": s.group, "part": s.part, "measured": s.measured} for s in ledger.spends])


def _ledger_from(text: str) -> BudgetLedger:
    ledger = BudgetLedger()
    for s in json.loads(text):
        ledger.spend(s["label"], s["amount"], s["unit"], s["composition"], s["group"], s["measured"], s["part"])
    return ledger


class ReleaseBook:
    """Releases per data set in a database (``url`` or the project's default)."""

    def __init__(self, url: str | None = None) -> None:
        from core.fairness.store.engine import make_engine

        self.engine = make_engine(url)
        try:
            _metadata.create_all(self.engine)
        except SQLAlchemyError as exc:
            raise ValueError(f"The release ledger's database cannot be opened ({type(exc).__name__}).") from exc

    def record(self, ref: DataRef, release_key: str, label: str, ledger: BudgetLedger) -> bool:
        """Store one release's spends; False when this release was already recorded."""
        if not len(ledger):
            raise ValueError(f"Release {label!r} records no spends; a release always spends budget.")
        row = {"data_key": data_key(ref), "release_key": str(release_key), "label": str(label)[:200],
               "spends": _spends_json(ledger),
               "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(RELEASES).values(**row))
        except IntegrityError:
            return False
        except SQLAlchemyError as exc:
            raise ValueError(f"{NOT_RECORDED} ({type(exc).__name__}); do not share the data until it is.") from exc
        return True

    def log(self, ref: DataRef, name: str = "this data set") -> ReleaseLog:
        """Every release of this data set so far, oldest first, composed in one :class:`ReleaseLog`."""
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(select(RELEASES.c.release_key, RELEASES.c.label, RELEASES.c.spends)
                                    .where(RELEASES.c.data_key == data_key(ref))
                                    .order_by(RELEASES.c.id)).all()
        except SQLAlchemyError as exc:
            raise ValueError(f"The release ledger cannot be read ({type(exc).__name__}).") from exc
        out = ReleaseLog(name)
        for key, label, spends in rows:
            out.record(key, label, _ledger_from(spends))
        return out
