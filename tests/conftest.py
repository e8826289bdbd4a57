"""Shared fixtures: no test may reach the network, and caches go to a temporary folder."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# run-time estimates from fixed coefficients: a page's "Start anyway" never depends on this machine's load
os.environ.setdefault("DASHBOARD_ESTIMATE_COSTS", str(REPO_ROOT / "tests" / "fixtures" / "estimate_costs.json"))
# ... and finished runs do not correct them either (one test's slow run would lengthen the next's estimate)
os.environ.setdefault("DASHBOARD_OBSERVE_RUNS", "0")

_LOOPBACK_HOSTS = {None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0"}


def _is_loopback(host) -> bool:
    host = "" if host is None else str(host)
    return host in _LOOPBACK_HOSTS or host.startswith("127.") or host.startswith("::ffff:127.")


_PYTEST_MAIN = sys.modules["__main__"]


@pytest.fixture(autouse=True)
def main_module_of_pytest():
    """Each test starts with pytest's own ``__main__``. An AppTest run leaves its page script there, and a
    process started later with "spawn" runs ``__main__`` again: a page script, or (after
    ``AppTest.from_function``) a temporary file already deleted, so the child died before its work and
    the parent waited for it."""
    sys.modules["__main__"] = _PYTEST_MAIN
    yield
    sys.modules["__main__"] = _PYTEST_MAIN


@pytest.fixture(autouse=True)
def network_guard(monkeypatch):
    """Fail any connection or DNS lookup that leaves the loopback interface."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_getaddrinfo = socket.getaddrinfo

    def check(address) -> None:
        if isinstance(address, tuple) and not _is_loopback(address[0]):
            raise OSError(f"network blocked in tests: {address!r}")

    def guarded_connect(self, address, *args, **kwargs):
        check(address)
        return real_connect(self, address, *args, **kwargs)

    def guarded_connect_ex(self, address, *args, **kwargs):
        check(address)
        return real_connect_ex(self, address, *args, **kwargs)

    def guarded_sendto(self, data, *args):
        check(args[-1] if args else None)
        return real_sendto(self, data, *args)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if not _is_loopback(host):
            raise OSError(f"DNS blocked in tests: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket.socket, "sendto", guarded_sendto)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    yield


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Point the result cache, the session database and the curator's data folder (kept files, the
    installation's key) at per-run temporary folders."""
    root = tmp_path_factory.mktemp("dashboard")
    os.environ["DASHBOARD_CACHE_DIR"] = str(root / "cache")
    os.environ.setdefault("DASHBOARD_DB_URL", f"sqlite:///{root / 'sessions.sqlite'}")
    os.environ.setdefault("DASHBOARD_DATA_DIR", str(root / "curator"))
    yield root


SLOW_FIXTURES = {"session_server", "dask_cluster", "traced_queue", "processes"}
"""Fixtures that start a server, a cluster or job processes: a test that asks for one is ``slow``."""


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every test that asks for a fixture of :data:`SLOW_FIXTURES` (``make test-quick`` leaves
    them out), so a new test of that kind cannot slip into the edit loop unmarked."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def session_server(tmp_path_factory):
    """The one dashboard server of this test process, for every test that drives a real one (the browser
    tests, the protocol tests): (URL, database URL). It has a project database, a result cache and a
    curator's data folder of its own (not the test process's), and its log beside the database. Each test
    makes what it needs in it (its own elicitation session, curator key or declared data set), so none
    depends on another's leftovers; starting the server is paid once."""
    from tests.browser.dashboard_server import dashboard

    folder = tmp_path_factory.mktemp("dashboard_server")
    db_url = f"sqlite:///{folder / 'project.sqlite'}"
    with dashboard(folder, DASHBOARD_DB_URL=db_url, DASHBOARD_DATA_DIR=str(folder / "curator")) as url:
        yield url, db_url


@pytest.fixture(scope="session")
def dask_cluster():
    """One Dask cluster of two single-threaded worker processes on loopback for this test process, started on
    first use, for tests that send it work and leave it whole (``tests/dask_cluster.py``)."""
    from core.cluster import close_clients
    from tests.dask_cluster import loopback_cluster

    local = loopback_cluster(2)
    yield local
    close_clients()
    local.close()


@pytest.fixture(scope="session", autouse=True)
def postgres_database():
    """Drop this process's PostgreSQL test database at the end, if a test made one (``tests/postgres.py``)."""
    yield
    made = sys.modules.get("tests.postgres")
    if made is not None:
        made.drop_session_database()


@pytest.fixture
def traced_queue(tmp_path, monkeypatch):
    """A fresh background job queue with one slot in place of the server's, a result cache of its own
    (nothing answered from disk) and a trace file where each job process writes a line as it starts
    (``tmp_path / "trace"``: tests count computations by it)."""
    from core.jobs import JobQueue, set_job_queue

    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DASHBOARD_JOB_TRACE", str(tmp_path / "trace"))
    fresh = JobQueue(slots=1)
    old = set_job_queue(fresh)
    yield fresh
    set_job_queue(old)


@pytest.fixture
def short_busy_timeout(monkeypatch):
    """SQLite's wait for another writer's lock cut from 10 s to 1 s, for tests that wait it out on purpose."""
    import core.database
    monkeypatch.setattr(core.database, "SQLITE_BUSY_MS", 1000)


@pytest.fixture
def batch_runs(monkeypatch):
    """Every page run goes to the job queue, whatever its estimate (a test of the job path on a plan small
    enough to keep the test short)."""
    monkeypatch.setenv("DASHBOARD_INTERACTIVE_SECONDS", "0")


@pytest.fixture
def thread_queue():
    """A fresh background job queue in place of the server's, with one slot, whose jobs run on threads of
    this process (so a test's job can be a closure that waits for the test's own gate)."""
    from core.jobs import JobQueue, ThreadExecutor, set_job_queue

    fresh = JobQueue(ThreadExecutor(), slots=1, cores=2)
    old = set_job_queue(fresh)
    yield fresh
    set_job_queue(old)
