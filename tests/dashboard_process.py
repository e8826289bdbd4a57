"""The dashboard as `make run` starts it, on a free loopback port, for the tests that drive a real server
(`tests/conftest.py`'s session server) and the benchmarks that measure one: `streamlit run
dashboard/server.py` (the pages plus the curator's sign-in), headless, no file watcher (an edit elsewhere
in the tree would show a 'File change' notice that reads as a page still running), no usage statistics."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the dashboard did not start within {timeout:.0f} s")


def curator_token(db_url: str | None = None, name: str = "bench curator") -> str:
    """A sign-in token (the cookie's value) of a curator made in the database at ``db_url`` (the
    project's default when None), for a browser or client that must see the curator's pages."""
    from core.access import CuratorKeys

    store = CuratorKeys(db_url)
    try:
        if name not in store.names():
            store.add(name)
        return store.open_session(name)
    finally:
        store.dispose()


@contextmanager
def dashboard(folder: Path, launcher: list[str] | None = None, **env: str) -> Iterator[str]:
    """The dashboard with `env` added to this process's environment; yields its URL. The server's
    output goes to folder/server.log, never to an unread pipe. `launcher` replaces `-m streamlit`
    (a profiling wrapper). The server gets a process group of its own, stopped as a whole at the
    end, so pool workers it started go with it."""
    port = free_port()
    command = [sys.executable, *(launcher or ["-m", "streamlit"]), "run", "dashboard/server.py",
               "--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port),
               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, **env), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
