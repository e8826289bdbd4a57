"""Fan-out of independent trials with joblib."""
from __future__ import annotations

import os
from typing import Callable, Iterable, Sequence, TypeVar

import numpy as np
from joblib import Parallel, delayed

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int, str], None]


def default_n_jobs() -> int:
    """Worker count from ``DASHBOARD_N_JOBS`` (default: all cores)."""
    return int(os.environ.get("DASHBOARD_N_JOBS", os.cpu_count() or 1))


def spawn_rngs(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """Independent child generators, one per trial, so results do not depend on scheduling."""
    return [np.random.default_rng(s) for s in rng.bit_generator.seed_seq.spawn(n)] \
        if hasattr(rng.bit_generator, "seed_seq") and rng.bit_generator.seed_seq is not None \
        else [np.random.default_rng(rng.integers(0, 2**63 - 1)) for _ in range(n)]


def map_trials(func: Callable[[T], R], items: Sequence[T], *, n_jobs: int | None = None,
               progress: Progress | None = None, label: str = "trials") -> list[R]:
    """Apply ``func`` to every item, in parallel when ``n_jobs`` > 1, reporting progress.

    Results come back in the order of ``items``. With n_jobs == 1 it runs in-process, which is
    what tests and small jobs want.
    """
    n_jobs = default_n_jobs() if n_jobs is None else n_jobs
    total = len(items)
    if n_jobs <= 1 or total <= 1:
        out = []
        for i, item in enumerate(items):
            out.append(func(item))
            if progress:
                progress(i + 1, total, label)
        return out
    out: list[R] = []
    runner = Parallel(n_jobs=n_jobs, return_as="generator")
    for i, result in enumerate(runner(delayed(func)(item) for item in items)):
        out.append(result)
        if progress:
            progress(i + 1, total, label)
    return out
