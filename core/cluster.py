"""Where fan-outs run: this machine's cores (joblib) or a Dask cluster named by its scheduler.

A scheduler is chosen, first match wins, by ``map_trials(..., scheduler=...)``, by
:func:`use_scheduler` around a call (a page or a script that names one), or by the
``DASHBOARD_DASK_SCHEDULER`` environment variable (e.g. ``tcp://scheduler-host:8786``). The
address is deliberately not part of any plan: results are identical wherever they are computed,
so a result computed on the cluster answers the same plan digest from the cache.

A scheduler that cannot be reached within ``DASHBOARD_DASK_TIMEOUT`` seconds (default 5) is
reported by a :class:`ClusterUnavailable` warning and the work runs locally; the failure is
remembered for a short while so a page does not wait on the same dead address at every rerun.
"""
from __future__ import annotations

import contextvars
import os
import threading
import time
import uuid
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from core.contracts import Cancelled

__all__ = ["Backend", "ChannelReporter", "ClusterChannel", "ClusterUnavailable", "LOCAL", "SCHEDULER_ENV",
           "SharedRef", "Shipment", "TIMEOUT_ENV", "backend_for", "buffer_bytes", "client_for", "close_clients", "cluster_slots", "cluster_task",
           "connect_timeout", "default_n_jobs", "describe_backend", "fill", "forget_failures", "inside_cluster_task",
           "last_failure", "note_failure", "opened", "refs_in", "scheduler_address", "split_shared",
           "use_scheduler"]

SCHEDULER_ENV = "DASHBOARD_DASK_SCHEDULER"
TIMEOUT_ENV = "DASHBOARD_DASK_TIMEOUT"
LOCAL = "local"
"""``scheduler="local"`` forces local execution even when the environment names a cluster."""

RETRY_AFTER = 30.0
"""Seconds during which an unreachable address is not tried again."""


class ClusterUnavailable(UserWarning):
    """The named Dask scheduler could not be reached; the work ran on this machine instead."""


_chosen: contextvars.ContextVar[str | None] = contextvars.ContextVar("dashboard_dask_scheduler", default=None)
_lock = threading.Lock()
_clients: dict[tuple[int, str], Any] = {}
_failures: dict[str, tuple[float, str]] = {}
_task_depth = threading.local()


@contextmanager
def use_scheduler(address: str | None) -> Iterator[None]:
    """Run the fan-outs inside the block on the Dask scheduler at ``address`` ("local": this machine)."""
    token = _chosen.set(address)
    try:
        yield
    finally:
        _chosen.reset(token)


def scheduler_address(explicit: str | None = None) -> str | None:
    """The scheduler to use (None: run locally), from the argument, :func:`use_scheduler` or the env."""
    for candidate in (explicit, _chosen.get(), os.environ.get(SCHEDULER_ENV, "")):
        if candidate:
            candidate = str(candidate).strip()
            return None if candidate.lower() == LOCAL else candidate
    return None


def connect_timeout() -> float:
    """Seconds to wait for a scheduler before running locally (``DASHBOARD_DASK_TIMEOUT``, default 5)."""
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else 5.0
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds; got {raw!r}.") from None
    if not value > 0:
        raise ValueError(f"{TIMEOUT_ENV} must be a positive number of seconds; got {raw!r}.")
    return value


def inside_cluster_task() -> bool:
    """True while a fan-out item runs on a Dask worker (nested fan-outs then run in-process)."""
    return getattr(_task_depth, "value", 0) > 0


@contextmanager
def cluster_task() -> Iterator[None]:
    """Mark the current thread as running one cluster task (see :func:`inside_cluster_task`)."""
    _task_depth.value = getattr(_task_depth, "value", 0) + 1
    try:
        yield
    finally:
        _task_depth.value -= 1


def _warn_unavailable(address: str, reason: str) -> None:
    warnings.warn(ClusterUnavailable(
        f"The Dask scheduler {address} could not be reached ({reason}); the work runs on this machine."),
        stacklevel=3)


def client_for(address: str, *, timeout: float | None = None):
    """A connected ``distributed.Client`` for ``address``, or None (with a :class:`ClusterUnavailable`
    warning) when the scheduler cannot be reached within the timeout. Clients are reused per process."""
    timeout = connect_timeout() if timeout is None else float(timeout)
    key = (os.getpid(), address)
    with _lock:
        client = _clients.get(key)
        if client is not None and client.status == "running":
            return client
        _clients.pop(key, None)
        failed = _failures.get(address)
        if failed and time.monotonic() - failed[0] < RETRY_AFTER:
            _warn_unavailable(address, failed[1])
            return None
        try:
            from distributed import Client
        except ImportError as exc:  # the requirement is missing from this environment
            _failures[address] = (time.monotonic(), f"dask.distributed is not installed: {exc}")
            _warn_unavailable(address, _failures[address][1])
            return None
        try:
            client = _connect_within(Client, address, timeout)
        except Exception as exc:  # refused, timed out, silent, bad address: all mean "not here"
            reason = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
            _failures[address] = (time.monotonic(), reason[:200])
            _warn_unavailable(address, _failures[address][1])
            return None
        _failures.pop(address, None)
        _clients[key] = client
        return client


def _connect_within(client_cls, address: str, timeout: float):
    """``client_cls(address)`` or ``TimeoutError`` after ``timeout`` seconds.

    Dask's own timeout covers opening the connection, not a scheduler that accepts it and then never
    answers the handshake; the attempt therefore runs on a daemon thread that is abandoned (and its
    client closed, should it connect after all) when the deadline passes.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def attempt() -> None:
        try:
            box["client"] = client_cls(address, timeout=timeout, set_as_default=False)
        except Exception as exc:  # reported to the caller below
            box["error"] = exc
        done.set()
        if box.get("abandoned") and "client" in box:
            try:
                box["client"].close(timeout=1)
            except Exception:  # already gone
                pass

    threading.Thread(target=attempt, name=f"dask-connect {address}", daemon=True).start()
    if not done.wait(timeout):
        box["abandoned"] = True
        if done.is_set() and "client" in box:  # connected in the instant between the two lines
            box["client"].close(timeout=1)
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["client"]


def note_failure(address: str, reason: str) -> None:
    """Remember that ``address`` failed (e.g. lost mid-run), so the next calls run locally at once."""
    with _lock:
        _failures[address] = (time.monotonic(), reason[:200])
        client = _clients.pop((os.getpid(), address), None)
    if client is not None:
        try:
            client.close(timeout=1)
        except Exception:  # already gone
            pass


def last_failure(address: str | None) -> str | None:
    """Why ``address`` could not be used, if it failed within the last :data:`RETRY_AFTER` seconds."""
    failed = _failures.get(address) if address else None
    if failed and time.monotonic() - failed[0] < RETRY_AFTER:
        return f"The Dask scheduler {address} could not be reached ({failed[1]}); the work runs on this machine."
    return None


def close_clients() -> None:
    """Close this process's cluster clients (e.g. before the scheduler they talk to shuts down)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        try:
            client.close(timeout=2)
        except Exception:  # already gone
            pass


def forget_failures() -> None:
    """Try unreachable addresses again at the next call (e.g. after starting the cluster)."""
    with _lock:
        _failures.clear()


@dataclass(frozen=True)
class Backend:
    """Where a fan-out runs: ``kind`` is "local" or "dask"; ``workers`` counts parallel slots."""

    kind: str
    workers: int
    address: str = ""

    def describe(self) -> str:
        if self.kind == "dask":
            unit = "worker" if self.workers == 1 else "workers"
            return f"Dask cluster {self.address}: {self.workers} {unit}"
        unit = "core" if self.workers == 1 else "cores"
        return f"{self.workers} local {unit}"


def default_n_jobs() -> int:
    """Worker count from ``DASHBOARD_N_JOBS`` (default: all cores)."""
    raw = os.environ.get("DASHBOARD_N_JOBS", "")
    try:
        return max(1, int(raw)) if raw else max(1, os.cpu_count() or 1)
    except ValueError:
        raise ValueError(f"DASHBOARD_N_JOBS must be a whole number of workers; got {raw!r}.") from None


def cluster_slots(client) -> int:
    """Parallel slots of a cluster: the threads of all its workers."""
    return int(sum(client.nthreads().values()))


def backend_for(n_jobs: int | None = None, scheduler: str | None = None) -> Backend:
    """Where a ``map_trials`` call with these arguments would run now (connecting if needed)."""
    address = None if n_jobs == 1 or inside_cluster_task() else scheduler_address(scheduler)
    if address:
        client = client_for(address)
        if client is not None:
            return Backend("dask", cluster_slots(client), address)
    jobs = default_n_jobs() if n_jobs is None else max(1, int(n_jobs))
    return Backend(LOCAL, jobs)


def describe_backend(n_jobs: int | None = None, scheduler: str | None = None) -> str:
    """A caption such as "2 local cores" or "Dask cluster tcp://host:8786: 4 workers"."""
    return backend_for(n_jobs, scheduler).describe()


# --------------------------------------------------------------------------------------------------
# Large inputs travel once: shared parts of the tasks are scattered, the tasks hold references
# --------------------------------------------------------------------------------------------------

SCATTER_BYTES = 128 * 1024
"""Inputs at least this large that several tasks share are scattered to the workers once per run."""


@dataclass(frozen=True)
class SharedRef:
    """Stands in a task for a scattered input; the worker puts the input back before calling."""

    index: int


def _slots(obj) -> list[tuple[Any, Any]]:
    """The shallow parts of a task argument: ``(slot, value)`` for tuples, lists, dicts, dataclass
    instances and ``functools.partial`` objects; nothing for anything else."""
    import dataclasses
    import functools

    if isinstance(obj, functools.partial):
        return [(("args", i), v) for i, v in enumerate(obj.args)] + \
            [(("kw", k), v) for k, v in obj.keywords.items()]
    if isinstance(obj, (tuple, list)) and type(obj) in (tuple, list):
        return list(enumerate(obj))
    if type(obj) is dict:
        return list(obj.items())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    return []


def _with_slots(obj, values: dict) -> Any:
    """A shallow copy of ``obj`` with the parts in ``values`` (slot -> value) replaced."""
    import copy
    import dataclasses
    import functools

    if not values:
        return obj
    if isinstance(obj, functools.partial):
        args = [values.get(("args", i), v) for i, v in enumerate(obj.args)]
        kw = {k: values.get(("kw", k), v) for k, v in obj.keywords.items()}
        return functools.partial(obj.func, *args, **kw)
    if isinstance(obj, (tuple, list)):
        return type(obj)(values.get(i, v) for i, v in enumerate(obj))
    if isinstance(obj, dict):
        return {k: values.get(k, v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj):
        clone = copy.copy(obj)
        for name, value in values.items():
            object.__setattr__(clone, name, value)
        return clone
    return obj


def _is_small_scalar(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, complex, str, bytes)) and \
        (not isinstance(value, (str, bytes)) or len(value) < SCATTER_BYTES)


def buffer_bytes(value) -> int | None:
    """Bytes of an array's or a table's buffers (None for other objects, which are measured by
    their pickle)."""
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        return int(value.memory_usage(index=True, deep=False).sum())
    nbytes = getattr(value, "nbytes", None)
    return int(nbytes) if isinstance(nbytes, int) and not isinstance(nbytes, bool) else None


def split_shared(func, items: list, threshold: int = SCATTER_BYTES):
    """Pull out the large inputs of a fan-out: the parts of ``func`` (a partial's bound arguments, or
    ``func`` itself) and the parts of items that several items hold (the same object), when they
    take at least ``threshold`` bytes.

    Returns ``(func_skeleton, item_skeletons, shipments)``: skeletons hold :class:`SharedRef`
    where a shared value was, ``shipments`` the packed values (each pickled once, here);
    :func:`fill` puts the opened values back.
    """
    seen: dict[int, int] = {}
    for item in items:
        for _, value in _slots(item):
            if not _is_small_scalar(value):
                seen[id(value)] = seen.get(id(value), 0) + 1
    shipments: list[Shipment] = []
    where: dict[int, int] = {}

    def ref_for(value) -> SharedRef | None:
        if _is_small_scalar(value):
            return None
        if id(value) not in where:
            size = buffer_bytes(value)
            shipment = None if size is not None and size < threshold else Shipment(value)
            if shipment is None or len(shipment.payload) < threshold:
                where[id(value)] = -1
            else:
                where[id(value)] = len(shipments)
                shipments.append(shipment)
        index = where[id(value)]
        return None if index < 0 else SharedRef(index)

    func_parts = _slots(func)
    if func_parts:
        func_skeleton = _with_slots(func, {slot: ref for slot, value in func_parts
                                           if (ref := ref_for(value)) is not None})
    else:
        ref = ref_for(func)
        func_skeleton = func if ref is None else ref
    skeletons = []
    for item in items:
        swaps = {slot: ref for slot, value in _slots(item)
                 if seen.get(id(value), 0) > 1 and (ref := ref_for(value)) is not None}
        skeletons.append(_with_slots(item, swaps))
    return func_skeleton, skeletons, shipments


def refs_in(skeleton) -> list[int]:
    """Indices of the shared values a skeleton refers to."""
    if isinstance(skeleton, SharedRef):
        return [skeleton.index]
    return [v.index for _, v in _slots(skeleton) if isinstance(v, SharedRef)]


def fill(skeleton, shared: dict[int, Any]):
    """Put the shared values back into a skeleton made by :func:`split_shared`."""
    if isinstance(skeleton, SharedRef):
        return shared[skeleton.index]
    return _with_slots(skeleton, {slot: shared[v.index] for slot, v in _slots(skeleton)
                                  if isinstance(v, SharedRef)})


class Shipment:
    """A value pickled in-band for the trip to or from a worker, opened where it is used.

    Dask sends array buffers out of band and rebuilds them wherever they land in its receive
    buffer, sometimes not even 8-byte aligned, and numpy sums misaligned float arrays in another
    order (the last bits differ). A shipment stays packed while Dask moves or replicates it; opening
    it unpickles in-band, which allocates fresh, aligned arrays, so a computation gives the same
    bits on a worker as in-process. A worker opens each shared shipment once (see :func:`opened`).
    """

    __slots__ = ("payload", "__weakref__")

    def __init__(self, value: Any = None, *, payload: bytes | None = None) -> None:
        if payload is None:
            import cloudpickle

            payload = cloudpickle.dumps(value, protocol=5)
        self.payload = payload

    def __reduce__(self):
        return packed, (self.payload,)


def packed(payload) -> Shipment:
    """Rebuild a :class:`Shipment` from its payload (the pickle's reconstructor)."""
    return Shipment(payload=payload)


_opened: "weakref.WeakKeyDictionary[Shipment, Any]" = weakref.WeakKeyDictionary()
_opened_lock = threading.Lock()


def opened(value: Any, *, keep: bool = False) -> Any:
    """``value``, unpickled if it is a :class:`Shipment`; with ``keep`` the opened value is
    remembered for as long as the shipment lives (shared inputs: opened once per worker)."""
    import pickle

    if not isinstance(value, Shipment):
        return value
    if not keep:
        return pickle.loads(value.payload)
    with _opened_lock:
        if value not in _opened:
            _opened[value] = pickle.loads(value.payload)
        return _opened[value]


# --------------------------------------------------------------------------------------------------
# Progress and stop between a caller and its tasks on the cluster
# --------------------------------------------------------------------------------------------------

REPORT_EVERY = 0.1
"""Least seconds between two progress reports of one task (the stop flag is looked at every call)."""


class ClusterChannel:
    """A run's line to its tasks on a Dask cluster: a ``distributed.Queue`` the tasks put their progress
    reports on, and a ``distributed.Event`` the caller sets to stop them. Both live on the scheduler under
    names drawn from this channel's name; only the name travels with a task, and each end opens them by
    name (the caller through its client, a task through its worker's client), so a task on any worker
    reaches the caller without a connection of its own."""

    def __init__(self, name: str | None = None, client=None) -> None:
        self.name = name or f"channel-{uuid.uuid4().hex}"
        self._client = client
        self._queue = self._event = None

    def __getstate__(self) -> dict:
        return {"name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"])

    def _parts(self):
        if self._queue is None:
            from distributed import Event, Queue

            queue = Queue(f"{self.name}-reports", client=self._client)
            self._event = Event(f"{self.name}-stop", client=self._client)
            self._queue = queue
        return self._queue, self._event

    def send(self, report: tuple) -> None:
        """Put one report (a tuple of plain values) on the line."""
        self._parts()[0].put(list(report))

    def take(self) -> list[tuple]:
        """Every report waiting, oldest first (none: an empty list); does not wait."""
        return [tuple(r) for r in self._parts()[0].get(batch=True)]

    def stop(self) -> None:
        """Ask the tasks to stop (each does at its next report)."""
        self._parts()[1].set()

    def stopped(self) -> bool:
        return bool(self._parts()[1].is_set())

    def close(self) -> None:
        """Free the queue and the stop flag on the scheduler (once no task of the run is left)."""
        try:
            queue, event = self._parts()
            event.clear()
            queue.close()
        except Exception:  # the cluster is gone: nothing left to free
            pass


class ChannelReporter:
    """The ``progress(done, total, message)`` a task on the cluster calls. Each call looks at the channel's
    stop flag (one round trip to the scheduler, well under a fit's round) and raises ``Cancelled`` when the
    caller has stopped the run; reports go out at most every ``every`` seconds, and always the last step.
    A task that cannot reach the scheduler (a fan-out that fell back to this machine's workers) goes on
    without reporting."""

    def __init__(self, channel: ClusterChannel, prefix: tuple = (), every: float | None = None) -> None:
        self.channel, self.prefix = channel, tuple(prefix)
        self.every = float(REPORT_EVERY if every is None else every)
        self._last = float("-inf")

    def __getstate__(self) -> dict:
        return {"channel": self.channel, "prefix": self.prefix, "every": self.every}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __call__(self, done: int, total: int, message: str = "") -> None:
        self.check()
        now = time.monotonic()
        if now - self._last < self.every and done < total:
            return
        self._last = now
        try:
            self.channel.send((*self.prefix, int(done), int(total), str(message or "")))
        except Exception:  # no scheduler within reach: the work goes on unreported
            pass

    def check(self) -> None:
        """Raise ``Cancelled`` when the caller has stopped the run."""
        try:
            stopped = self.channel.stopped()
        except Exception:  # no scheduler within reach: nobody there can stop it either
            return
        if stopped:
            raise Cancelled("Stopped by the caller.")
