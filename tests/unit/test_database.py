"""The project database (core.database) is the one engine module: the elicitation store, the privacy
ledger and saved scenarios open it alike, and each refuses writes to a database file deleted under it."""
from pathlib import Path

import pytest

from core.contracts import DataRef
from core.database import Database, StoreUnavailable
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import LedgerRelease, ProjectLedger, data_key, spends_of
from tests.unit.test_import_graph import import_graph

AREAS = ("core.census", "core.districts", "core.synthesis", "core.coherence", "core.fairness")


def _release(key: str = "r1") -> LedgerRelease:
    ledger = BudgetLedger()
    ledger.spend("count", 0.5, "epsilon")
    return LedgerRelease(data_key(DataRef("compas")), key, "release", "Test", "test", "a test release", "d" * 64,
                         spends_of(ledger))


def test_privacy_imports_no_area_package():
    graph = import_graph()
    up = sorted((m, d) for m, deps in graph.items() if m.startswith("core.privacy") for d in deps
                if d.startswith(AREAS))
    assert up == []


def test_store_ledger_and_scenarios_open_the_database_through_core_database(tmp_path):
    from core.fairness.store import ElicitationStore
    from core.scenarios import ScenarioStore
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    users = [ElicitationStore(url), ProjectLedger(url), ScenarioStore(url)]
    try:
        assert all(isinstance(u.db, Database) for u in users)
        assert {u.db.watch.path for u in users} == {tmp_path / "project.sqlite"}
    finally:
        for u in users:
            u.db.dispose()


def test_the_ledger_refuses_to_record_into_a_deleted_database_file(tmp_path):
    path = tmp_path / "project.sqlite"
    ledger = ProjectLedger(f"sqlite:///{path}")
    try:
        assert ledger.record(_release("before"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        with pytest.raises(ValueError, match="deleted"):
            ledger.record(_release("after"))
    finally:
        ledger.db.dispose()


def test_a_replaced_file_refuses_writes_and_reads_on_any_database(tmp_path):
    path = tmp_path / "other.sqlite"
    db = Database(f"sqlite:///{path}")
    try:
        with db.write_tx() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        db.watch_file()
        path.unlink()
        path.write_bytes(b"")            # another file under the same name
        with pytest.raises(StoreUnavailable, match="replaced"):
            with db.write_tx():
                pass
    finally:
        db.dispose()


def test_a_file_deleted_during_a_write_rolls_it_back_instead_of_committing(tmp_path):
    path = tmp_path / "during.sqlite"
    db = Database(f"sqlite:///{path}")
    try:
        with db.write_tx() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        db.watch_file()
        with pytest.raises(StoreUnavailable, match="deleted"):
            with db.write_tx() as conn:
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
        assert not db.write_lock.locked()          # the lock is free for the next writer
    finally:
        db.dispose()
