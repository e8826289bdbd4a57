"""The project database (core.database) is the one engine module: every store of a process opens the same
database for a URL (one engine, one write lock, one file watch), and each refuses writes to a database file
deleted under it."""
from pathlib import Path

import pytest

from core.contracts import DataRef
from core.database import Database, StoreUnavailable, open_database
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


def _every_store(url: str) -> list:
    from core.access import CuratorKeys
    from core.fairness.store import ElicitationStore
    from core.intake.store import DataSetStore
    from core.privacy.population import PopulationAnswers
    from core.scenarios import ScenarioStore
    return [ElicitationStore(url), ProjectLedger(url), ScenarioStore(url), DataSetStore(url), CuratorKeys(url),
            PopulationAnswers(url)]


def test_every_store_on_one_url_shares_one_engine_and_one_write_lock(tmp_path):
    """Six stores on one file: one Database, so one connection pool and one lock that every writer of this
    process queues on; another file has its own."""
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    stores = _every_store(url)
    other = ProjectLedger(f"sqlite:///{tmp_path / 'other.sqlite'}")
    try:
        assert len({id(s.db) for s in stores}) == 1
        assert len({id(s.db.engine) for s in stores}) == 1 and stores[0].db.write_lock is not None
        assert open_database(url) is stores[0].db
        assert other.db is not stores[0].db and other.db.write_lock is not stores[0].db.write_lock
    finally:
        stores[0].db.dispose()
        other.db.dispose()


def test_writers_of_different_stores_take_turns_on_the_shared_lock(tmp_path):
    """While one store holds the write lock, a write through another store on the same file waits for it
    (it does not race into SQLite's busy handler), then goes through."""
    import threading
    from core.scenarios import ScenarioStore
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    ledger, scenarios = ProjectLedger(url), ScenarioStore(url)
    started, order = threading.Event(), []

    def other_writer():
        started.set()
        with scenarios._write() as conn:
            order.append("scenarios")
            conn.exec_driver_sql("SELECT 1")

    try:
        with ledger.db.write_tx():
            thread = threading.Thread(target=other_writer)
            thread.start()
            started.wait()
            assert scenarios.db.write_lock.locked()     # the ledger's write holds the scenarios' lock too
            order.append("ledger")
        thread.join()
        assert order == ["ledger", "scenarios"]
        assert ledger.record(_release("after both"))
    finally:
        ledger.db.dispose()


def test_after_the_file_is_deleted_old_stores_refuse_and_a_store_opened_anew_starts_fresh(tmp_path):
    """A deleted file refuses writes to every store that had it open; a store opened afterwards (as after a
    restart) gets a new database on the new file, not the refused one."""
    from core.scenarios import ScenarioStore
    path = tmp_path / "project.sqlite"
    url = f"sqlite:///{path}"
    ledger, scenarios = ProjectLedger(url), ScenarioStore(url)
    try:
        assert ledger.record(_release("before"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        with pytest.raises(ValueError, match="deleted"):
            ledger.record(_release("after"))
        with pytest.raises(StoreUnavailable, match="deleted"):
            with scenarios._write():
                pass
        fresh = ProjectLedger(url)
        assert fresh.db is not ledger.db
        assert fresh.record(_release("after a restart"))
        fresh.db.dispose()
    finally:
        ledger.db.dispose()


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
