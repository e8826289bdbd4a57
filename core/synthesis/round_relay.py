"""Round progress of fits that run in worker processes, carried back to the caller's ``progress``.

A fit in the caller's process reports each round through ``progress(done, total, message)``. A fit on
a worker cannot reach that callback (a page's bar, a background job's pipe), so each item gets a small
picklable reporter that sends the item's rounds back to the caller's process. While the items run
(``core.parallel.map_trials`` on a helper thread), the calling thread takes what arrived and calls
``progress`` with the share of the whole fan-out done, each item counting ``UNITS`` steps split by its
own rounds, so the bar moves within a fit. No extra process is started.

How the rounds travel depends on where the fan-out runs. On this machine's joblib workers a
:class:`RoundReporter` sends them over a local socket (``multiprocessing.connection``, with a random key)
to a listener thread of the caller's process. On a Dask cluster, whose workers cannot reach that socket,
a :class:`core.cluster.ChannelReporter` puts them on a ``distributed.Queue`` the caller reads.

Cancel: when ``progress`` raises ``Cancelled`` the relay tells the workers to stop (locally: every later
report is answered "stop"; on a cluster: the channel's ``distributed.Event`` is set); the worker's
reporter then raises ``Cancelled`` inside its fit, so the fits stop within a round and the fan-out ends;
the caller sees its own ``Cancelled``.
"""
from __future__ import annotations

import functools
import math
import os
import queue as queue_module
import socket
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener
from typing import Any, Callable, Sequence

from core.cluster import LOCAL, ChannelReporter, ClusterChannel, client_for, inside_cluster_task, scheduler_address
from core.contracts import Cancelled, Progress
from core.parallel import map_trials

__all__ = ["UNITS", "RoundReporter", "relayed_map"]

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


def _wake(address) -> None:
    """Connect to the relay's socket and hang up at once, so a blocked ``accept`` returns. A plain socket,
    not an authenticated client: that would wait for the relay's challenge, which never comes while the
    accept thread is still answering a worker that hung mid-handshake (a test run hung here for 10 min)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family) as sock:
            sock.settimeout(2.0)
            sock.connect(address)
    except OSError:
        pass


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
        _wake(self.address)
        self.thread.join(timeout=5)
        self.listener.close()

    def reporter(self, index: int, every: float) -> RoundReporter:
        return RoundReporter(index, self.address, self.authkey, every)

    def take(self, share: list[float], message: str) -> str:
        return _drain(self.reports, share, message)

    def cancel(self) -> None:
        self.stop.set()


class _ClusterRelay:
    """The same relay for a fan-out on a Dask cluster: the items' rounds come over a
    :class:`core.cluster.ClusterChannel` (the scheduler's queue and event), read through ``client``."""

    def __init__(self, client) -> None:
        self.channel = ClusterChannel(client=client)

    def reporter(self, index: int, every: float) -> "_ItemReporter":
        return _ItemReporter(self.channel, (index,), every)

    def take(self, share: list[float], message: str) -> str:
        return _count(self.channel.take(), share, message)

    def cancel(self) -> None:
        self.channel.stop()

    def close(self) -> None:
        self.channel.close()


class _ItemReporter(ChannelReporter):
    """One item's :class:`core.cluster.ChannelReporter` (its prefix the item's index), with the ``finished``
    and ``close`` that :func:`call_reporting` calls."""

    def finished(self) -> None:
        """The item is done: its whole share counts."""
        try:
            self.channel.send((*self.prefix, 1, 1, ""))
        except Exception:  # no scheduler within reach: the result itself still counts
            pass

    def close(self) -> None:
        """Nothing to hang up: the channel lives on the scheduler."""


def _cluster_now() -> tuple[str, object] | tuple[None, None]:
    """The address and client of the Dask cluster a fan-out from here goes to now, or ``(None, None)``
    (it runs on this machine)."""
    address = None if inside_cluster_task() else scheduler_address(None)
    client = client_for(address) if address else None
    return (address, client) if client is not None else (None, None)


def relayed_map(func: Callable, items: Sequence, *, n_jobs: int | None, progress: Progress,
                label: str, every: float = EVERY, poll: float = 0.1) -> list:
    """``[func(item, progress=...) for item in items]`` on ``n_jobs`` local workers or on the configured
    Dask cluster, each item's rounds forwarded to ``progress`` (module docstring). Results come back in
    the order of ``items``."""
    items = list(items)
    if not items:
        return []
    address, client = _cluster_now()
    relay = _ClusterRelay(client) if client is not None else _Relay()
    try:
        pairs = [(item, relay.reporter(i, every)) for i, item in enumerate(items)]
        box: dict = {}

        def work() -> None:      # on its own thread, which does not see the caller's use_scheduler: named here
            try:
                box["out"] = map_trials(functools.partial(call_reporting, func), pairs, n_jobs=n_jobs, label=label,
                                        scheduler=address or LOCAL)
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
                message = relay.take(share, message)
                progress(int(math.fsum(share) * UNITS), len(items) * UNITS, message)
                if not alive:
                    break
        except BaseException:
            relay.cancel()            # the fits end within a round
            thread.join()
            raise
        if "error" in box:
            raise box["error"]
        return box["out"]
    finally:
        relay.close()


def _drain(q, share: list[float], message: str) -> str:
    """Take every report waiting on the queue into ``share``; the latest message (or ``message``)."""
    reports = []
    while True:
        try:
            reports.append(q.get_nowait())
        except queue_module.Empty:
            return _count(reports, share, message)


def _count(reports, share: list[float], message: str) -> str:
    """Each ``(index, done, total, text)`` report into its item's ``share`` of the whole (never going back);
    the latest message (or ``message``)."""
    for index, done, total, text in reports:
        share[index] = max(share[index], min(done / max(total, 1), 1.0))
        message = text or message
    return message
