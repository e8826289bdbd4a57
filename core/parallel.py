"""Fan-out of independent items (trials, runs, chains, sweep points): joblib here, or a Dask cluster.

Each item that draws random numbers gets its own child generator spawned from the plan's seed
(``seed=``), so the numbers do not depend on how many workers run them, in what order, or on
which machine: in-process, on local joblib workers and on a Dask cluster the results are the
same bit for bit.

Where the work runs is decided by :mod:`core.cluster`: a scheduler named by ``scheduler=``,
``core.cluster.use_scheduler`` or ``DASHBOARD_DASK_SCHEDULER`` sends the items to that cluster;
otherwise (or when the scheduler cannot be reached, with a warning) joblib runs them locally.
"""
from __future__ import annotations

import logging
import re
import time
import uuid
import warnings
from typing import Callable, Sequence, TypeVar

from joblib import Parallel, delayed

from core.cluster import (ClusterUnavailable, Shipment, client_for, cluster_task, connect_timeout, default_n_jobs,
                          fill, inside_cluster_task, note_failure, opened, refs_in, scheduler_address, split_shared)
from core.contracts import Progress, SeedLike, spawn_rngs

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["default_n_jobs", "map_trials", "spawn_rngs"]

log = logging.getLogger(__name__)

HEARTBEAT = 0.5
"""Seconds between progress calls while cluster tasks are still running (lets Cancel act)."""
POLL = 0.02
"""Seconds between looks at the cluster's finished tasks."""


def map_trials(func: Callable[..., R], items: Sequence[T], *, seed: SeedLike | None = None,
               n_jobs: int | None = None, progress: Progress | None = None,
               label: str = "trials", scheduler: str | None = None) -> list[R]:
    """``[func(item) for item in items]``, or ``func(item, rng)`` with one child RNG per item when
    ``seed`` is given; reporting ``progress(done, total, label)`` as items finish.

    Results come back in the order of ``items``. ``n_jobs == 1`` always runs in-process (a caller's
    choice for work too small to ship); otherwise a configured Dask cluster (see
    :mod:`core.cluster`) runs the items, or joblib with ``n_jobs`` workers (default: all cores).
    Inside a cluster task a nested fan-out runs in-process. Raising ``Cancelled`` from ``progress`` stops
    the work (outstanding cluster tasks are cancelled).
    """
    items = list(items)
    total = len(items)
    rngs = spawn_rngs(seed, total) if seed is not None else None
    calls = [(item,) if rngs is None else (item, rng) for item, rng in zip(items, rngs or [None] * total)]
    if total == 0:
        return []
    if n_jobs == 1 or inside_cluster_task():
        return _map_local(func, calls, 1, progress, label)
    address = scheduler_address(scheduler)
    client = client_for(address) if address else None
    if client is not None:
        return _map_on_cluster(client, address, func, calls, n_jobs, progress, label)
    return _map_local(func, calls, default_n_jobs() if n_jobs is None else n_jobs, progress, label)


def _map_local(func, calls: list[tuple], n_jobs: int, progress: Progress | None, label: str,
               done_before: int = 0, total: int | None = None) -> list:
    """Run ``calls`` in order on this machine: in-process for one job, else joblib workers."""
    total = len(calls) if total is None else total
    if n_jobs <= 1 or len(calls) <= 1:
        results = (func(*args) for args in calls)
    else:
        results = Parallel(n_jobs=min(n_jobs, len(calls)), return_as="generator")(
            delayed(func)(*args) for args in calls)
    out = []
    try:
        for i, result in enumerate(results):
            out.append(result)
            if progress:
                progress(done_before + i + 1, total, label)
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()  # a cancelled run stops the joblib workers' outstanding items too
    return out


def run_task(task, shared: dict) -> Shipment:
    """One item on a Dask worker: put the scattered inputs back into the task ``(func skeleton,
    item skeleton, rng or None, seeded)``, call ``func(item[, rng])`` and pack the result."""
    func_skeleton, item_skeleton, rng, seeded = opened(task)
    shared = {k: opened(v, keep=True) for k, v in shared.items()}
    func = fill(func_skeleton, shared)
    item = fill(item_skeleton, shared)
    with cluster_task():
        return Shipment(func(item, rng) if seeded else func(item))


def _map_on_cluster(client, address: str, func, calls: list[tuple], n_jobs, progress, label: str) -> list:
    """Submit one small task per item; large shared inputs are scattered once (to every worker, so
    a lost worker loses no input); progress advances as futures finish, in any order."""
    from distributed import as_completed

    total = len(calls)
    seeded = len(calls[0]) == 2
    items = [args[0] for args in calls]
    func_skeleton, skeletons, shipments = split_shared(func, items)
    run_id = f"{re.sub(r'[^A-Za-z0-9_]+', '_', label)[:40]}-{uuid.uuid4().hex[:12]}"
    futures: list = []
    task_bytes: list[int] = []
    out: list = [None] * total
    finished_at: list[bool] = [False] * total
    done = 0
    lost_since: float | None = None
    task_failed = False
    last_beat = time.monotonic()
    try:
        shared_futures = client.scatter(shipments, broadcast=True, hash=False) if shipments else []
        for i, (skeleton, args) in enumerate(zip(skeletons, calls)):
            needed = {k: shared_futures[k] for k in set(refs_in(func_skeleton)) | set(refs_in(skeleton))}
            task = Shipment((func_skeleton, skeleton, args[1] if seeded else None, seeded))
            task_bytes.append(len(task.payload))
            futures.append(client.submit(run_task, task, needed, key=f"{run_id}-{i}", pure=False))
        position = {f.key: i for i, f in enumerate(futures)}
        log.info("%s: %d tasks to %s, largest %d bytes; %d shared inputs sent once, %d bytes", label, total,
                 address, max(task_bytes), len(shipments), sum(len(s.payload) for s in shipments))
        finished = as_completed(futures, loop=client.loop)
        while not finished.is_empty():
            ready = finished.next_batch(block=False)
            for future in ready:
                i = position[future.key]
                if future.status == "cancelled":        # not by us: the client lost its scheduler
                    raise ConnectionError(f"task {future.key} was dropped by the cluster")
                if future.status == "error":
                    task_failed = True  # the item's own exception, re-raised as it is
                out[i] = opened(future.result())
                finished_at[i] = True
                done += 1
                if progress:
                    progress(done, total, label)
            if ready:
                lost_since, last_beat = None, time.monotonic()
                continue
            if client.status != "running":
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > connect_timeout():
                    raise ConnectionError(f"the client is {client.status}")
            elif progress and time.monotonic() - last_beat >= HEARTBEAT:
                last_beat = time.monotonic()
                progress(done, total, label)  # heartbeat: a Cancel click is noticed while tasks run
            time.sleep(POLL)
    except (OSError, ConnectionError) as exc:
        if task_failed:
            _cancel_outstanding(client, futures)
            raise
        note_failure(address, f"lost during the run: {type(exc).__name__}: {exc}")
        left = [i for i in range(total) if not finished_at[i]]
        warnings.warn(ClusterUnavailable(
            f"Lost the Dask scheduler {address} ({type(exc).__name__}: {exc}); the remaining {len(left)} "
            f"of {total} {label} run on this machine."), stacklevel=2)
        jobs = default_n_jobs() if n_jobs is None else n_jobs
        rest = _map_local(func, [calls[i] for i in left], jobs, progress, label, done_before=done, total=total)
        for i, value in zip(left, rest):
            out[i] = value
        return out
    except BaseException:
        _cancel_outstanding(client, futures)
        raise
    return out


def _cancel_outstanding(client, futures: list) -> None:
    """Cancel the tasks still queued or running (quietly: the cluster may already be gone)."""
    try:
        client.cancel([f for f in futures if not f.done()])
    except Exception:  # the client lost its scheduler; nothing is left to cancel there
        pass
