"""The Dask cluster the tests share: a scheduler and single-threaded worker processes, every port (the
dashboard's too) on 127.0.0.1. ``tests/conftest.py`` starts one per test process on first use
(``dask_cluster``, session-scoped) for tests that send it work and leave it whole (a test that kills a
worker waits until the nanny has replaced it); a test that closes the scheduler starts its own with
:func:`loopback_cluster`."""
from __future__ import annotations

import sys
import types


def loopback_cluster(n_workers: int):
    """Single-threaded worker processes and a scheduler; every port (dashboard too) on loopback.

    Worker processes are spawned, and spawning re-runs the parent's ``__main__`` file; an AppTest
    run earlier in the session leaves its page script there, so a bare module stands in meanwhile.
    """
    from distributed import LocalCluster

    real_main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                            dashboard_address="127.0.0.1:0", silence_logs=50)
    finally:
        sys.modules["__main__"] = real_main


def tasks_seen(cluster) -> int:
    """Task transitions the scheduler has made so far (grows only when work reaches the cluster)."""
    return cluster.scheduler.transition_counter
