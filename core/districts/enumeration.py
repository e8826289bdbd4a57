"""Every balanced, contiguous plan of a tiny map, by exact enumeration.

For toy maps only (a few dozen units): the number of plans grows exponentially. Districts are
built one at a time around the lowest-numbered unassigned unit, so each partition is produced
once with canonical labels. The connected sets containing that unit are listed without repeats
by extending with exclusive neighbours (Wernicke 2006, ESU). A branch is cut as soon as a
leftover component can no longer be split into the districts that remain within the bounds.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np


def neighbour_sets(n: int, edges: np.ndarray) -> list[frozenset[int]]:
    """Adjacency as one frozenset per unit from an (m, 2) edge array."""
    out: list[set[int]] = [set() for _ in range(n)]
    for a, b in np.asarray(edges, dtype=np.int64).reshape(-1, 2):
        out[a].add(int(b))
        out[b].add(int(a))
    return [frozenset(s) for s in out]


def _connected_sets(root: int, free: frozenset[int], nbrs: list[frozenset[int]], weight: np.ndarray,
                    high: float) -> Iterator[tuple[frozenset[int], float]]:
    """Connected subsets of ``free`` containing ``root`` with weight at most ``high`` (each once)."""
    def extend(members: frozenset[int], total: float, ext: list[int], closed: frozenset[int]):
        yield members, total
        ext = list(ext)
        while ext:
            u = ext.pop()
            t = total + weight[u]
            if t > high:
                continue
            new = [x for x in nbrs[u] if x in free and x not in closed]
            yield from extend(members | {u}, t, ext + new, closed | nbrs[u] | {u})

    start = [x for x in nbrs[root] if x in free]
    yield from extend(frozenset([root]), float(weight[root]), start, nbrs[root] | {root})


def _components(units: frozenset[int], nbrs: list[frozenset[int]]) -> list[list[int]]:
    seen: set[int] = set()
    comps = []
    for s in units:
        if s in seen:
            continue
        stack, comp = [s], []
        seen.add(s)
        while stack:
            v = stack.pop()
            comp.append(v)
            for x in nbrs[v]:
                if x in units and x not in seen:
                    seen.add(x)
                    stack.append(x)
        comps.append(comp)
    return comps


def _can_split(units: frozenset[int], districts: int, nbrs, weight: np.ndarray, low: float, high: float) -> bool:
    """Whether the leftover could still hold ``districts`` districts: each component needs a whole
    number of districts within the bounds, and the numbers must add up."""
    if not units:
        return districts == 0
    fewest = most = 0
    for comp in _components(units, nbrs):
        w = float(weight[comp].sum())
        lo_d, hi_d = math.ceil(w / high - 1e-12), math.floor(w / low + 1e-12) if low > 0 else len(comp)
        if lo_d > hi_d or hi_d == 0:
            return False
        fewest, most = fewest + lo_d, most + hi_d
    return fewest <= districts <= most


def enumerate_plans(n_units: int, edges: np.ndarray, k: int, weight=None, low: float | None = None,
                    high: float | None = None, limit: int = 100_000) -> np.ndarray:
    """All partitions into ``k`` connected districts with weights in [low, high], as labels (n_plans, n_units).

    Defaults: unit weights and exactly equal districts. Raises ValueError when more than ``limit``
    plans exist (the enumeration stops there) or the map is too large to enumerate.
    """
    w = np.ones(n_units) if weight is None else np.asarray(weight, dtype=float)
    if len(w) != n_units or (w < 0).any():
        raise ValueError("Give one non-negative weight per unit.")
    if not 2 <= int(k) <= n_units:
        raise ValueError(f"k must lie between 2 and the number of units ({n_units}).")
    ideal = w.sum() / k
    low = ideal if low is None else float(low)
    high = ideal if high is None else float(high)
    if low > high:
        raise ValueError("The lower population bound exceeds the upper one.")
    nbrs = neighbour_sets(n_units, edges)
    labels = np.full(n_units, -1, dtype=np.int64)
    plans: list[np.ndarray] = []

    def place(district: int, free: frozenset[int]) -> None:
        if district == k:
            if not free:
                plans.append(labels.copy())
                if len(plans) > limit:
                    raise ValueError(f"More than {limit:,} plans: this map is too large to enumerate; "
                                     "use the ReCom ensemble instead.")
            return
        root = min(free)
        for members, total in _connected_sets(root, free, nbrs, w, high + 1e-9):
            if total < low - 1e-9:
                continue
            rest = free - members
            if not _can_split(rest, k - district - 1, nbrs, w, low, high):
                continue
            labels[list(members)] = district
            place(district + 1, rest)
            labels[list(members)] = -1

    if _can_split(frozenset(range(n_units)), k, nbrs, w, low, high):
        place(0, frozenset(range(n_units)))
    return np.array(plans, dtype=np.int64).reshape(-1, n_units)


def grid_edges(rows: int, cols: int) -> np.ndarray:
    """Rook edges of a rows x cols lattice numbered row by row."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    return np.vstack([np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
                      np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])])
