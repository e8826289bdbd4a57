"""Shared pieces of the project ledger's reservation and fault tests: a database per test on SQLite (a file)
or PostgreSQL (a schema), releases of a given spend, and the writers run in threads and spawned processes."""
from __future__ import annotations

import os
import uuid

from core.privacy.ledger import Spend
from core.privacy.project_ledger import CapExceeded, LedgerRelease, ProjectLedger
from tests.postgres import schema_url


def database_url(kind: str, tmp_path, sqlite_file: str = "ledger.sqlite"):
    """A fresh database of ``kind``: the SQLite file ``sqlite_file`` under ``tmp_path``, or a schema of its own
    in this test process's PostgreSQL database (``tests/postgres.py``), dropped afterwards; yields its URL."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / sqlite_file}"
        return
    with schema_url() as url:
        yield url


def release(amount: float, *, key: str | None = None, data: str = "cps", kind: str = "release",
            unit: str = "epsilon", digest: str = "d" * 64, delta: float = 0.0) -> LedgerRelease:
    return LedgerRelease(data, key or uuid.uuid4().hex, kind, "Test page", "test action", f"spend {amount}",
                         digest, (Spend("count", amount, unit, delta=delta),))


def reserve_and_commit(url: str, data: str, amount: float, n: int, tag: str) -> dict:
    """``n`` releases of ``amount`` each, reserved then committed; what was acknowledged, what was refused
    for the cap, and any other error (by message)."""
    ledger = ProjectLedger(url)
    out = {"committed": [], "over_cap": 0, "errors": []}
    try:
        for i in range(n):
            rel = release(amount, key=f"{tag}-{i}", data=data)
            try:
                res = ledger.reserve(rel, ttl_seconds=3600)
            except CapExceeded:
                out["over_cap"] += 1
                continue
            except ValueError as exc:
                out["errors"].append(str(exc))
                continue
            try:
                out["committed"].append(ledger.commit(res).release_key)
            except ValueError as exc:
                out["errors"].append(str(exc))
    finally:
        ledger.db.dispose()
    return out


def record_simulations(url: str, data: str, n: int, tag: str) -> dict:
    """``n`` seeded simulations recorded one by one (the writes pages make on every preview)."""
    ledger = ProjectLedger(url)
    out = {"recorded": [], "errors": []}
    try:
        for i in range(n):
            try:
                if ledger.record(release(0.5, key=f"{tag}-{i}", data=data, kind="simulation")):
                    out["recorded"].append(f"{tag}-{i}")
            except ValueError as exc:
                out["errors"].append(str(exc))
    finally:
        ledger.db.dispose()
    return out


def race_worker(url: str, data: str, amount: float, n: int, tag: str, start, results) -> None:
    """A spawned process: import and connect first, then wait for the others, then race them."""
    ProjectLedger(url).db.dispose()
    start.wait(timeout=300)
    results.put(reserve_and_commit(url, data, amount, n, tag))


def reserve_then_die(url: str, data: str, ttl: float, results) -> None:
    """A spawned process that commits one release, reserves a second, hands the reservation back and is
    killed before it can commit or cancel it (os._exit skips every cleanup, as a crash would)."""
    ledger = ProjectLedger(url)
    ledger.commit(ledger.reserve(release(0.125, key="made-before-dying", data=data), ttl_seconds=3600))
    results.put(ledger.reserve(release(0.75, key="orphan", data=data), ttl_seconds=ttl))
    results.close()
    results.join_thread()
    os._exit(0)
