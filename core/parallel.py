"""Fan-out of independent items (trials, runs, chains, sweep points) with joblib.

Each item that draws random numbers gets its own child generator spawned from the plan's seed
(``seed=``), so the numbers do not depend on how many workers run them or in what order.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence, TypeVar

from joblib import Parallel, delayed

from core.contracts import Progress, SeedLike, spawn_rngs

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["default_n_jobs", "map_trials", "spawn_rngs"]


def default_n_jobs() -> int:
    """Worker count from ``DASHBOARD_N_JOBS`` (default: all cores)."""
    raw = os.environ.get("DASHBOARD_N_JOBS", "")
    try:
        return max(1, int(raw)) if raw else max(1, os.cpu_count() or 1)
    except ValueError:
        raise ValueError(f"DASHBOARD_N_JOBS must be a whole number of workers; got {raw!r}.") from None


def map_trials(func: Callable[..., R], items: Sequence[T], *, seed: SeedLike | None = None,
               n_jobs: int | None = None, progress: Progress | None = None,
               label: str = "trials") -> list[R]:
    """``[func(item) for item in items]``, or ``func(item, rng)`` with one child RNG per item when
    ``seed`` is given; in parallel when ``n_jobs`` > 1, reporting progress as items finish.

    Results come back in the order of ``items``. With n_jobs == 1 it runs in-process.
    """
    items = list(items)
    total = len(items)
    rngs = spawn_rngs(seed, total) if seed is not None else None
    calls = [(item,) if rngs is None else (item, rng) for item, rng in zip(items, rngs or [None] * total)]
    n_jobs = default_n_jobs() if n_jobs is None else n_jobs
    out: list[R] = []
    if n_jobs <= 1 or total <= 1:
        results = (func(*args) for args in calls)
    else:
        results = Parallel(n_jobs=min(n_jobs, total), return_as="generator")(
            delayed(func)(*args) for args in calls)
    for i, result in enumerate(results):
        out.append(result)
        if progress:
            progress(i + 1, total, label)
    return out
