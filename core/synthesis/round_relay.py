"""Round progress of fits that run in worker processes, carried back to the caller's ``progress``.

A fit in the caller's process reports each round through ``progress(done, total, message)``. A fit on
a joblib worker cannot reach that callback (a page's bar, a background job's pipe), so each item gets
a :class:`RoundReporter`: a small picklable callable that sends the item's rounds over a local socket
(``multiprocessing.connection``, with a random key) to a listener thread of the caller's process. While
the items run (``core.parallel.map_trials`` on a helper thread), the calling thread takes what arrived
and calls ``progress`` with the share of the whole fan-out done, each item counting ``UNITS`` steps
split by its own rounds, so the bar moves within a fit. No extra process is started.

Cancel: when ``progress`` raises ``Cancelled`` the relay answers every later report with "stop"; the
worker's reporter then raises ``Cancelled`` inside its fit, so the fits stop within a round and the
fan-out ends; the caller sees its own ``Cancelled``.

Only local workers are relayed: a Dask cluster's workers cannot reach this machine's socket, so there
the fan-out reports finished items only.
"""
from __future__ import annotations

import functools
import math
import os
import queue as queue_module
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener
from typing import Any, Callable, Sequence

from core.contracts import Cancelled, Progress
from core.parallel import map_trials

__all__ = ["UNITS", "RoundReporter", "relay_available", "relayed_map"]

UNITS = 1000
"""Progress steps each item counts for (its rounds split them)."""
EVERY = 0.1
"""Least seconds between two reports (and so two looks at "stop") of one fit on a worker."""


class RoundReporter:
    """The ``progress`` a fit on a worker calls: sends ``(index, done, total, message)`` to the relay
    (at most every ``every`` seconds, and always the last round) and raises ``Cancelled`` when the relay
    answers that the caller has cancelled."""

    def __init__(self, index: int, address, authkey: bytes, every: float = EVERY) -> None:
        self.index = int(index)
        self.address = address
        self.authkey = bytes(authkey)
        self.every = float(every)
        self._last = -math.inf
        self._conn = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_last", "_conn")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._last, self._conn = -math.inf, None

    def _send(self, report: tuple) -> bool:
        """Send one report; True when the caller has cancelled."""
        if self._conn is None:
            self._conn = Client(self.address, authkey=self.authkey)
        self._conn.send(report)
        return bool(self._conn.recv())

    def __call__(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last < self.every and done < total:
            return
        self._last = now
        if self._send((self.index, int(done), max(int(total), 1), str(message))):
            raise Cancelled("Stopped by the caller.")

    def finished(self) -> None:
        """The item is done: its whole share counts."""
        self._send((self.index, 1, 1, ""))
        self.close()

    def close(self) -> None:
        """Hang up (the relay's thread for this item ends)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def call_reporting(func: Callable, pair: tuple) -> Any:
    """``func(item, progress=reporter)`` for one ``(item, reporter)`` pair, then the item's share in full."""
    item, reporter = pair
    try:
        out = func(item, progress=reporter)
    except BaseException:
        reporter.close()
        raise
    reporter.finished()
    return out


class _Relay:
    """The listening end: one thread accepts workers' connections, one thread per connection answers."""

    def __init__(self) -> None:
        self.authkey = os.urandom(32)
        self.listener = Listener(authkey=self.authkey)
        self.reports: queue_module.Queue = queue_module.Queue()
        self.stop = threading.Event()
        self.closed = False
        self.thread = threading.Thread(target=self._accept, name="round relay", daemon=True)
        self.thread.start()

    @property
    def address(self):
        return self.listener.address

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn = self.listener.accept()
            except (OSError, EOFError, AuthenticationError):     # a peer without the key, or closed
                continue
            if self.closed:                    # the wake-up call of ``close``
                conn.close()
                return
            threading.Thread(target=self._serve, args=(conn,), name="round relay peer", daemon=True).start()

    def _serve(self, conn) -> None:
        with conn:
            while True:
                try:
                    report = conn.recv()
                except (EOFError, OSError):
                    return
                self.reports.put(report)
                try:
                    conn.send(self.stop.is_set())
                except OSError:
                    return

    def close(self) -> None:
        """Stop listening: a blocked ``accept`` is woken by one last connection, then the socket goes."""
        self.closed = True
        try:
            Client(self.address, authkey=self.authkey).close()
        except OSError:
            pass
        self.thread.join(timeout=5)
        self.listener.close()


def relay_available() -> bool:
    """Whether fan-outs run on this machine's workers (no Dask scheduler configured)."""
    from core.cluster import scheduler_address

    try:
        return not scheduler_address(None)
    except Exception:  # a malformed setting is the fan-out's to report, not ours
        return False


def relayed_map(func: Callable, items: Sequence, *, n_jobs: int | None, progress: Progress,
                label: str, every: float = EVERY, poll: float = 0.1) -> list:
    """``[func(item, progress=...) for item in items]`` on ``n_jobs`` local workers, each item's rounds
    forwarded to ``progress`` (module docstring). Results come back in the order of ``items``."""
    items = list(items)
    if not items:
        return []
    relay = _Relay()
    try:
        pairs = [(item, RoundReporter(i, relay.address, relay.authkey, every)) for i, item in enumerate(items)]
        box: dict = {}

        def work() -> None:
            try:
                box["out"] = map_trials(functools.partial(call_reporting, func), pairs, n_jobs=n_jobs, label=label)
            except BaseException as exc:   # handed to the calling thread
                box["error"] = exc

        thread = threading.Thread(target=work, name=f"{label} relay", daemon=True)
        thread.start()
        share = [0.0] * len(items)
        message = label
        try:
            while True:
                thread.join(poll)
                alive = thread.is_alive()
                message = _drain(relay.reports, share, message)
                progress(int(math.fsum(share) * UNITS), len(items) * UNITS, message)
                if not alive:
                    break
        except BaseException:
            relay.stop.set()          # every later report is answered "stop": the fits end within a round
            thread.join()
            raise
        if "error" in box:
            raise box["error"]
        return box["out"]
    finally:
        relay.close()


def _drain(q, share: list[float], message: str) -> str:
    """Take every report waiting on the queue into ``share``; the latest message (or ``message``)."""
    while True:
        try:
            index, done, total, text = q.get_nowait()
        except queue_module.Empty:
            return message
        share[index] = max(share[index], min(done / total, 1.0))
        message = text or message
