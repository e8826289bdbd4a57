"""Faults around a release: the database file deleted or made read-only, the PostgreSQL connection
terminated mid-release, the process killed between reserve and commit. Nothing acknowledged is lost,
nothing counts twice, and a dead process's reservation counts until it expires, then stops."""
from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, text

from core.database import normalise_url
from core.privacy.project_ledger import Cap, CapExceeded, ProjectLedger, ReservationLost
from tests.unit.ledger_support import database_url, release, reserve_then_die

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    yield from database_url(request.param, tmp_path)


@pytest.fixture
def pg_url(tmp_path):
    yield from database_url("postgresql", tmp_path)


def _files(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


def _stored(url: str) -> tuple[list[str], list[str]]:
    """What a new process sees: the committed release keys and the live reservations' keys."""
    ledger = ProjectLedger(url)
    try:
        return ([r.release_key for r in ledger.releases("cps")],
                [r.release_key for _, r in ledger.reservations("cps")])
    finally:
        ledger.db.dispose()


# ---------------------------------------------------------------- the SQLite file


def test_a_deleted_database_file_acknowledges_nothing_more(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = ProjectLedger(f"sqlite:///{path}")
    try:
        ledger.set_cap("cps", Cap(1.0))
        running = ledger.reserve(release(0.25, key="running"))
        for p in _files(path):
            p.unlink()
        with pytest.raises(ValueError, match="deleted"):
            ledger.commit(running)
        with pytest.raises(ValueError, match="deleted"):
            ledger.reserve(release(0.25, key="after"))
        with pytest.raises(ValueError, match="deleted"):
            ledger.record(release(0.25, key="simulated", kind="simulation"))
    finally:
        ledger.db.dispose()
    # a new process starts on an empty file, and none of the refused releases was acknowledged anywhere
    assert _stored(f"sqlite:///{path}") == ([], [])


def test_a_file_deleted_while_the_reservation_is_written_is_not_acknowledged(tmp_path, monkeypatch):
    path = tmp_path / "ledger.sqlite"
    ledger = ProjectLedger(f"sqlite:///{path}")
    try:
        ledger.set_cap("cps", Cap(1.0))
        check = ledger._check_cap

        def delete_then_check(conn, rel, now):   # the file goes after the transaction's own check
            for p in _files(path):
                p.unlink()
            return check(conn, rel, now)

        monkeypatch.setattr(ledger, "_check_cap", delete_then_check)
        with pytest.raises(ValueError, match="deleted"):
            ledger.reserve(release(0.25))
    finally:
        ledger.db.dispose()


def _read_only(files: list[Path], on: bool) -> None:
    """chmod the files; as root (whom chmod does not stop) also set the immutable attribute."""
    for p in files:
        if on:
            p.chmod(0o444)
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i" if on else "-i", str(p)], check=True)
        if not on:
            p.chmod(0o644)


def test_a_read_only_database_file_loses_nothing_acknowledged(tmp_path):
    if os.geteuid() == 0 and shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: a file cannot be made read-only for this process")
    path = tmp_path / "ledger.sqlite"
    url = f"sqlite:///{path}"
    ledger = ProjectLedger(url)
    acknowledged = []
    try:
        ledger.set_cap("cps", Cap(1.0))
        acknowledged.append(ledger.commit(ledger.reserve(release(0.25, key="before"))).release_key)
        running = ledger.reserve(release(0.25, key="running"))
        files = [p for p in _files(path) if not p.name.endswith("-shm")]   # SQLite's shared-memory index
        _read_only(files, True)                                            # stays, as on a read-only mount
        try:
            for attempt in (lambda: ledger.commit(running), lambda: ledger.reserve(release(0.25, key="after")),
                            lambda: ProjectLedger(url).reserve(release(0.25, key="new process"))):
                try:
                    got = attempt()
                except ValueError as exc:
                    assert "Nothing from your last action was saved" in str(exc)
                else:
                    acknowledged.append(got.release_key)
        finally:
            _read_only(files, False)
    finally:
        ledger.db.dispose()
    committed, reserved = _stored(url)
    assert committed == ["before"] == acknowledged     # nothing acknowledged while read-only, nothing lost
    assert reserved == ["running"]                     # the uncommitted one still holds its share
    again = ProjectLedger(url)
    try:
        again.commit(running)                          # writable again: it commits, once
        assert again.totals("cps").epsilon == pytest.approx(0.5)
    finally:
        again.db.dispose()


# ---------------------------------------------------------------- PostgreSQL connection terminated


class Terminator:
    """Terminates the ledger's server connection just before it runs a statement starting with ``prefix``,
    ``times`` times (pg_terminate_backend from a second connection, waiting until the backend is gone)."""

    def __init__(self, ledger: ProjectLedger, url: str, prefix: str, times: int):
        self.prefix, self.left, self.done = prefix, times, 0
        self.admin = create_engine(normalise_url(url), isolation_level="AUTOCOMMIT")
        event.listen(ledger.engine, "before_cursor_execute", self)

    def __call__(self, conn, cursor, statement, params, context, executemany):
        if self.left > 0 and statement.lstrip().upper().startswith(self.prefix):
            self.left -= 1
            pid = conn.connection.dbapi_connection.info.backend_pid
            with self.admin.connect() as admin:
                assert admin.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid}).scalar()
            self.done += 1


def test_a_connection_terminated_mid_reserve_or_commit_counts_the_release_once(pg_url):
    ledger = ProjectLedger(pg_url)
    try:
        ledger.set_cap("cps", Cap(1.0))
        cut = Terminator(ledger, pg_url, "INSERT INTO LEDGER_RELEASES", 1)
        res = ledger.reserve(release(0.5, key="k"))         # retried once on a fresh connection
        assert cut.done == 1
        assert [r.release_key for _, r in ledger.reservations("cps")] == ["k"]
        cut = Terminator(ledger, pg_url, "UPDATE LEDGER_RELEASES", 1)
        ledger.commit(res)
        assert cut.done == 1
        assert _stored(pg_url) == (["k"], [])
        assert ledger.totals("cps").epsilon == pytest.approx(0.5)
    finally:
        ledger.db.dispose()


def test_a_commit_whose_connection_keeps_dying_is_refused_and_can_be_retried(pg_url):
    ledger = ProjectLedger(pg_url)
    try:
        ledger.set_cap("cps", Cap(1.0))
        res = ledger.reserve(release(0.75, key="k"))
        cut = Terminator(ledger, pg_url, "UPDATE LEDGER_RELEASES", 2)
        with pytest.raises(ValueError, match="not committed"):
            ledger.commit(res)
        assert cut.done == 2
        assert _stored(pg_url) == ([], ["k"])              # not acknowledged, and still holding its share
        with pytest.raises(CapExceeded):
            ledger.reserve(release(0.5))
        ledger.commit(res)                                  # the server is back: committed once
        assert _stored(pg_url) == (["k"], [])
        assert ledger.totals("cps").epsilon == pytest.approx(0.75)
    finally:
        ledger.db.dispose()


# ---------------------------------------------------------------- a process killed between reserve and commit


def test_a_killed_process_reservation_counts_until_it_expires(url):
    """The orphan is reserved for an hour; this ledger's clock then moves past its expiry (the ledger takes
    the time from its ``clock``), so nothing here depends on how fast the machine is."""
    ahead = [0.0]
    ledger = ProjectLedger(url, clock=lambda: time.time() + ahead[0])
    try:
        ledger.set_cap("cps", Cap(1.0))
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        child = ctx.Process(target=reserve_then_die, args=(url, "cps", 3600.0, results))
        child.start()
        orphan = results.get(timeout=300)
        child.join(timeout=60)
        assert child.exitcode == 0

        assert _stored(url) == (["made-before-dying"], ["orphan"])
        with pytest.raises(CapExceeded):                    # 0.125 made + 0.75 reserved + 0.5 > 1
            ledger.reserve(release(0.5, key="blocked"))
        assert ledger.preview(release(0.5)).before.epsilon == pytest.approx(0.875)
        assert ledger.totals("cps").epsilon == pytest.approx(0.125)   # totals show committed releases

        ahead[0] = 3601.0                                   # an hour later: the orphan has expired
        assert ledger.preview(release(0.5)).before.epsilon == pytest.approx(0.125)
        ledger.commit(ledger.reserve(release(0.5, key="after expiry")))
        with pytest.raises(ReservationLost):
            ledger.commit(orphan)
        assert _stored(url) == (["made-before-dying", "after expiry"], [])
        assert ledger.totals("cps").epsilon == pytest.approx(0.625)
    finally:
        ledger.db.dispose()
