"""The project database: engines, transactions and the file watch, shared by everything that persists.

Every store keeps its tables in one database: ``DASHBOARD_DB_URL``, or a SQLite file under data/sessions/
by default; a PostgreSQL URL goes through psycopg 3. The elicitation store (``core.fairness.store``), the
privacy ledger and its caps (``core.privacy.project_ledger``), population answers
(``core.privacy.population``), saved scenarios (``core.scenarios``), declared data sets
(``core.intake.store``) and curator keys (``core.access``) each open it with :func:`open_database`, which
hands every store of this process the same :class:`Database` for a URL: one engine (one connection pool),
one write lock (SQLite) and one file watch, so writers of different stores queue on one lock instead of
meeting in SQLite's busy handler.

A fault the page can do nothing about (disk full, a read-only file, the file deleted or replaced
under a running dashboard, a server that cannot be reached) becomes :class:`StoreUnavailable`, a
``ValueError`` whose message says what happened and that the last action was not saved.
"""
from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

#: How long a SQLite connection waits for another writer's lock before "database is locked" (ms).
SQLITE_BUSY_MS = 10_000

LOCAL_CURATOR = "local"   # who a row belongs to until curators log in (a login fills the curator columns)
DEFAULT_DB_FILE = Path(__file__).resolve().parents[1] / "data" / "sessions" / "elicitation.sqlite"


class StoreUnavailable(ValueError):
    """The session database could not store or read data; nothing from the last action was saved.

    `retryable` is True for momentary conditions (a busy database) worth one more try.
    """

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


NOT_SAVED = "Nothing from your last action was saved"


def describe_fault(err: BaseException) -> StoreUnavailable:
    """A database error in plain words (the technical detail stays in the chained exception)."""
    text = str(getattr(err, "orig", err) or err).lower()
    if isinstance(err, DataError):
        return StoreUnavailable(f"A value is too long or out of range for the session database. {NOT_SAVED}.")
    if "disk is full" in text or "no space left" in text or "disk full" in text:
        return StoreUnavailable(f"The session database's disk is full. {NOT_SAVED}; ask the operator to "
                                "free disk space, then try again.")
    if "readonly" in text or "read-only" in text or "read only" in text:
        return StoreUnavailable(f"The session database is read-only at the moment. {NOT_SAVED}; ask the "
                                "operator to make it writable again.")
    if "locked" in text or "busy" in text or "deadlock" in text or "could not serialize" in text:
        return StoreUnavailable(f"The session database is busy. {NOT_SAVED}; try again in a moment.",
                                retryable=True)
    if "unable to open" in text or "disk i/o" in text or "malformed" in text or "not a database" in text:
        return StoreUnavailable(f"The session database file cannot be read or written. {NOT_SAVED}; ask "
                                "the operator to check the file.")
    return StoreUnavailable(f"The session database cannot be reached. {NOT_SAVED}; try again later, and "
                            "tell the operator if it keeps happening.")


def lost_connection(err: BaseException) -> bool:
    """True when ``err`` (or what it was raised from) is a connection the server dropped mid-transaction;
    the transaction was then rolled back, and the pool opens a fresh connection for the next one."""
    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, DBAPIError) and err.connection_invalidated:
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


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


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL (None for in-memory databases and other backends)."""
    if not url.startswith("sqlite") or "///" not in url:
        return None
    path = url.split("///", 1)[1].split("?", 1)[0]
    return None if path in ("", ":memory:") else Path(path)


def make_engine(url: str | None = None) -> Engine:
    """An engine with SQLite tuned for many writers: WAL, busy timeout, BEGIN IMMEDIATE on writes."""
    url = normalise_url(url or default_db_url())
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=20)
    path = sqlite_file(url)
    if path is None:  # one shared connection, or every checkout sees an empty database
        engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool)
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreUnavailable(f"The folder for the session database ({path.parent.name}) cannot be "
                                   f"created: {err.strerror}. Ask the operator to check the path.") from err
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                               pool_size=32, max_overflow=32, pool_timeout=60)

    @event.listens_for(engine, "connect")
    def _sqlite_connect(dbapi_conn, _record):  # pragma: no cover - exercised through the store
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_MS)}")
        cur.execute("PRAGMA synchronous=FULL")  # an acknowledged answer survives power loss
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn):  # pragma: no cover - exercised through the store
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")
    return engine


class FileWatch:
    """Notices when the SQLite file a store opened is deleted or replaced while it runs.

    SQLite keeps writing to an open file after it is unlinked, so without this check answers
    would be acknowledged and then vanish with the orphaned file.
    """

    def __init__(self, path: Path | None):
        self.path = path
        self.identity = self._identity() if path is not None else None

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def changed(self) -> bool:
        """True once the file this watch took is gone or is another file (a fresh watch never says so)."""
        return self.path is not None and self.identity is not None and self._identity() != self.identity

    def check(self) -> None:
        if self.path is None:
            return
        if self.identity is None:  # created after the watch started (first open)
            self.identity = self._identity()
            return
        now = self._identity()
        if now != self.identity:
            what = "deleted" if now is None else "replaced by another file"
            raise StoreUnavailable(
                f"The session database file was {what} while the dashboard was running. {NOT_SAVED}, "
                "and answers cannot be stored until the operator restores the file and restarts the "
                "dashboard.")


class Tx:
    """Context manager: begin on enter, commit on success, roll back on error, always close.

    Database faults (other than integrity conflicts, which callers resolve) leave as
    :class:`StoreUnavailable`; the file watch runs before every transaction.
    """

    def __init__(self, connect: Callable[[], Connection], lock: threading.Lock | None = None,
                 watch: FileWatch | None = None, recheck: bool = False):
        self.connect, self.lock, self.watch, self.recheck = connect, lock, watch, recheck

    def __enter__(self) -> Connection:
        if self.watch is not None:
            self.watch.check()
        try:
            self.conn = self.connect()  # pool checkout outside the lock
        except SQLAlchemyError as err:
            raise describe_fault(err) from err
        if self.lock is not None:
            self.lock.acquire()
        try:
            self.tx = self.conn.begin()
        except BaseException as err:
            self.conn.close()
            if self.lock is not None:
                self.lock.release()
            if isinstance(err, SQLAlchemyError):
                raise describe_fault(err) from err
            raise
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> Any:
        try:
            try:
                if exc_type is None:
                    if self.recheck and self.watch is not None:
                        self._recheck()
                    self.tx.commit()
                else:
                    self.tx.rollback()
            except SQLAlchemyError as err:
                if isinstance(err, IntegrityError):
                    raise
                if exc is not None and not isinstance(exc, DBAPIError):
                    raise exc from err  # keep the caller's own error
                raise describe_fault(exc if isinstance(exc, DBAPIError) else err) from err
        finally:
            self.conn.close()
            if self.lock is not None:
                self.lock.release()
        if isinstance(exc, DBAPIError) and not isinstance(exc, IntegrityError):
            raise describe_fault(exc) from exc
        return False

    def _recheck(self) -> None:
        """The file watch once more just before a write commits: a file deleted while the transaction ran
        rolls it back instead of acknowledging writes that would vanish with the orphaned file."""
        try:
            self.watch.check()
        except StoreUnavailable:
            self.tx.rollback()
            raise


class Database:
    """One open project database: its engine, and on SQLite a write lock and a watch on the file.

    SQLite's busy handler backs off by sleeping, which starves some threads under load, so writers
    of this process queue on the lock instead (other processes still wait through busy_timeout).
    Every transaction first checks that the file is the one opened (see :class:`FileWatch`).
    """

    def __init__(self, url: str | None = None, engine: Engine | None = None):
        self.url = url
        self.engine = engine or make_engine(url)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.write_lock = threading.Lock() if self.is_sqlite else None
        self.watch = FileWatch(sqlite_file(normalise_url(str(self.engine.url))) if self.is_sqlite else None)
        self.pid = os.getpid()   # a forked child opens its own (pooled connections do not cross a fork)

    def create(self, metadata) -> "Database":
        """Create ``metadata``'s tables where missing, then check the file (whose identity the watch takes
        now if the file is new); a fault becomes :class:`StoreUnavailable` in plain words."""
        try:
            metadata.create_all(self.engine, checkfirst=True)
        except SQLAlchemyError as err:
            raise describe_fault(err) from err
        self.watch.check()
        return self

    def watch_file(self) -> None:
        """Take the file's identity again (call once the tables exist: a new file exists only then)."""
        self.watch = FileWatch(self.watch.path)

    def write_tx(self) -> Tx:
        """A transaction that takes the write lock up front (SQLite: BEGIN IMMEDIATE) and commits on exit;
        on SQLite the file watch runs again just before the commit."""
        if self.write_lock is not None:
            return Tx(lambda: self.engine.connect().execution_options(sqlite_begin="IMMEDIATE"),
                      self.write_lock, self.watch, recheck=True)
        return Tx(self.engine.connect, watch=self.watch)

    def read_tx(self) -> Tx:
        """A transaction for reading (it commits nothing the caller did not write)."""
        return Tx(self.engine.connect, watch=self.watch)

    def dispose(self) -> None:
        self.engine.dispose()


_open: "weakref.WeakValueDictionary[object, Database]" = weakref.WeakValueDictionary()
_open_lock = threading.Lock()
"""The open databases by URL (or by the id of an engine given), each kept while a store holds it."""


def open_database(url: str | None = None, engine: Engine | None = None) -> Database:
    """This process's one :class:`Database` for ``url`` (``DASHBOARD_DB_URL`` or the default file when None),
    or for ``engine`` when one is given: every store that opens the same database shares its engine, write
    lock and file watch.

    A database whose file was deleted or replaced stays refused to the stores that hold it; the next store
    opened on that URL gets a fresh one, as a restarted dashboard would. A forked child process opens its
    own. An in-memory SQLite URL names no shared database (each engine has its own), so each call makes a
    new one."""
    key: object = id(engine) if engine is not None else normalise_url(url or default_db_url())
    if engine is None and key.startswith("sqlite") and sqlite_file(key) is None:
        return Database(key)
    with _open_lock:
        db = _open.get(key)
        if db is None or db.pid != os.getpid() or db.watch.changed():
            db = _open[key] = Database(None if engine is not None else key, engine)
        return db


class TableStore:
    """A store whose tables (the class's ``metadata``) live in the project database at ``url`` (the
    default database when None) or on ``engine``; created where missing."""

    metadata = None

    def __init__(self, url: str | None = None, engine: Engine | None = None):
        self.db = open_database(url, engine).create(self.metadata)
        self.engine = self.db.engine

    def _write(self) -> Tx:
        return self.db.write_tx()

    def _read(self) -> Tx:
        return self.db.read_tx()

    def dispose(self) -> None:
        self.db.dispose()


__all__ = ["DEFAULT_DB_FILE", "LOCAL_CURATOR", "NOT_SAVED", "Database", "FileWatch", "StoreUnavailable", "TableStore", "Tx", "default_db_url",
           "describe_fault", "lost_connection", "make_engine", "normalise_url", "open_database", "sqlite_file"]
