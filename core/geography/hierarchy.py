"""Geographic hierarchy stored as flat integer arrays (Cohen et al. 2021, §2 data model).

Nodes are numbered level by level (root = 0); the children of every node occupy one contiguous
range of node ids, so the CSR index ``child_ptr`` is all that is needed to find them and a level's
sums are one ``np.add.reduceat`` call. Every leaf sits on the bottom level. ``leaf_nodes[i]`` is
the node id of input row i, so leaves keep the order of the rows they were built from.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

DEFAULT_LEVEL_NAMES = ("nation", "state", "county", "tract", "block group", "block")
MAX_TREE_LEAVES = 50_000_000
MAX_INT64 = 2**63 - 1
# Prefix lengths of a census block GEOID: state, county, tract, block group, block.
CENSUS_GEOID_CUTS = (2, 5, 11, 12, 15)


def check_fanouts_product(fanouts: Sequence, what: str = "The fan-outs") -> list[int]:
    """Fan-outs as whole numbers of at least 1 whose product (the leaf count) is at most
    ``MAX_TREE_LEAVES``; ValueError saying what to change. The product is taken in Python integers, so
    fan-outs whose int64 product wraps around (2**32 x 2**32 is 0 in int64) are refused, not drawn."""
    out = []
    for f in fanouts:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer, float, np.floating)) \
                or not np.isfinite(f) or int(f) != f or f < 1:
            raise ValueError(f"{what} must be whole numbers of at least 1, one per level below the root; "
                             f"got {list(fanouts)!r:.80}.")
        out.append(int(f))
    if not out:
        raise ValueError(f"{what} need at least one level below the root.")
    leaves = math.prod(out)
    if leaves > MAX_TREE_LEAVES:
        raise ValueError(f"{what} make a tree of {leaves:,} leaves; use smaller fan-outs or fewer levels "
                         f"(at most {MAX_TREE_LEAVES:,} leaves).")
    return out


def check_counts(values, what: str = "Counts", *, nonnegative: bool = False) -> np.ndarray:
    """``values`` as a numeric array after refusing NaN, infinities (and, with ``nonnegative``, negative
    counts) and counts whose total cannot be held in int64: summed as int64 they would wrap around
    silently. ValueError saying what to change."""
    arr = np.asarray(values)
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{what} must be numbers; got values of type {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        raise ValueError(f"{what} must be finite numbers; {int((~np.isfinite(arr)).sum()):,} value(s) are NaN or "
                         "infinite. Fill or drop them before the run.")
    if nonnegative and arr.size and arr.min() < 0:
        raise ValueError(f"{what} must not be negative; got {arr.min().item()!r}.")
    if float(np.abs(arr).sum(dtype=np.float64)) > MAX_INT64:
        raise ValueError(f"{what} add up to more than an int64 can hold ({MAX_INT64:,}); use smaller counts.")
    return arr


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A rooted tree with all leaves on the bottom level; arrays are read-only views."""

    parent: np.ndarray          # (n_nodes,) parent id, -1 at the root
    level: np.ndarray           # (n_nodes,) level index, 0 at the root
    level_offsets: np.ndarray   # (depth + 1,) nodes of level l are level_offsets[l]:level_offsets[l+1]
    child_ptr: np.ndarray       # (n_nodes + 1,) children of v are child_ptr[v]:child_ptr[v+1]
    leaf_nodes: np.ndarray      # (n_leaves,) node id of each input row
    level_names: tuple[str, ...]
    node_labels: np.ndarray | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_nodes.shape[0])

    @property
    def depth(self) -> int:
        """Number of levels, the root level included."""
        return int(self.level_offsets.shape[0] - 1)

    @property
    def children(self) -> np.ndarray:
        """CSR column array of children (node ids 1..n_nodes-1, contiguous per parent)."""
        return np.arange(1, self.n_nodes)

    @property
    def n_children(self) -> np.ndarray:
        """Number of children of every node (0 for leaves)."""
        return np.diff(self.child_ptr)

    def level_sizes(self) -> np.ndarray:
        """Number of nodes at every level."""
        return np.diff(self.level_offsets)

    def nodes_at(self, level: int) -> np.ndarray:
        """Node ids of one level, in storage order."""
        if not 0 <= level < self.depth:
            raise ValueError(f"Level {level} does not exist; this hierarchy has levels 0..{self.depth - 1}.")
        return np.arange(self.level_offsets[level], self.level_offsets[level + 1])

    def level_slice(self, level: int) -> slice:
        return slice(int(self.level_offsets[level]), int(self.level_offsets[level + 1]))

    def mean_fanouts(self) -> np.ndarray:
        """Average number of children per node at each non-leaf level."""
        sizes = self.level_sizes()
        return sizes[1:] / sizes[:-1]

    def ancestors_at(self, level: int) -> np.ndarray:
        """For every input row (leaf), the node id of its ancestor at ``level``."""
        nodes = self.leaf_nodes.copy()
        for _ in range(self.depth - 1 - level):
            nodes = self.parent[nodes]
        return nodes

    def label(self, node: int) -> str:
        """Human-readable label of a node (its id at its level, or level:index)."""
        if self.node_labels is not None:
            return str(self.node_labels[node])
        lvl = int(self.level[node])
        return f"{self.level_names[lvl]} {node - int(self.level_offsets[lvl])}"

    # ------------------------------------------------------------- aggregation
    def aggregate(self, leaf_counts) -> np.ndarray:
        """Counts for every node from leaf counts in input-row order; shape (n_nodes,) or (n_nodes, k)."""
        leaf = check_counts(leaf_counts, "Leaf counts")
        if leaf.ndim not in (1, 2) or leaf.shape[0] != self.n_leaves:
            raise ValueError(f"Leaf counts must have {self.n_leaves} rows (one per leaf); got shape {leaf.shape}.")
        dtype = np.int64 if np.issubdtype(leaf.dtype, np.integer) or leaf.dtype == bool else np.float64
        out = np.zeros((self.n_nodes,) + leaf.shape[1:], dtype=dtype)
        out[self.leaf_nodes] = leaf
        for lvl in range(self.depth - 2, -1, -1):
            self.sum_children_into(out, lvl)
        return out

    def sum_children_into(self, values: np.ndarray, level: int) -> None:
        """Overwrite the nodes of ``level`` with the sums of their children (in place)."""
        values[self.level_slice(level)] = self.sum_children(values, level)

    def sum_children(self, values: np.ndarray, level: int) -> np.ndarray:
        """Sums over the children of every node of ``level`` (rows of ``values`` indexed by node id)."""
        child = values[self.level_slice(level + 1)]
        starts = self.child_ptr[self.level_slice(level)] - self.level_offsets[level + 1]
        return np.add.reduceat(child, starts, axis=0)

    # ----------------------------------------------------------- constructors
    @classmethod
    def homogeneous(cls, fanouts: Sequence[int], level_names: Sequence[str] | None = None) -> "Hierarchy":
        """Root plus one level per fan-out; every node of level l has fanouts[l] children."""
        fan = check_fanouts_product(fanouts, "Fan-outs")
        sizes = np.cumprod([1] + fan)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        n_nodes = int(offsets[-1])
        parent = np.empty(n_nodes, dtype=np.int64)
        level = np.empty(n_nodes, dtype=np.int64)
        parent[0] = -1
        level[0] = 0
        for lvl in range(1, len(sizes)):
            idx = np.arange(sizes[lvl], dtype=np.int64)
            parent[offsets[lvl]:offsets[lvl + 1]] = offsets[lvl - 1] + idx // fan[lvl - 1]
            level[offsets[lvl]:offsets[lvl + 1]] = lvl
        n_child = np.zeros(n_nodes, dtype=np.int64)
        for lvl in range(len(fan)):
            n_child[offsets[lvl]:offsets[lvl + 1]] = fan[lvl]
        child_ptr = np.concatenate([[1], 1 + np.cumsum(n_child)])
        leaf_nodes = np.arange(offsets[-2], offsets[-1], dtype=np.int64)
        return cls(parent, level, offsets.astype(np.int64), child_ptr.astype(np.int64), leaf_nodes,
                   _names(level_names, len(sizes)))

    @classmethod
    def from_unit_ids(cls, level_ids: Sequence, level_names: Sequence[str] | None = None) -> "Hierarchy":
        """Tree from nested unit ids: level_ids[k][i] is the id of row i's ancestor at level k+1.

        The root is implicit. Ids need only be unique within their parent (a tract code may repeat
        across counties); rows are the leaves and must have distinct paths.
        """
        if len(level_ids) == 0:
            raise ValueError("Give at least one level of unit ids below the root.")
        cols = [np.asarray(ids) for ids in level_ids]
        n = cols[0].shape[0]
        if n == 0:
            raise ValueError("There are no units (rows) to build a hierarchy from.")
        if any(c.ndim != 1 or c.shape[0] != n for c in cols):
            raise ValueError("Every level of unit ids must be a 1-D array with one entry per row.")
        parents = [np.array([-1], dtype=np.int64)]
        labels = [np.array(["root"], dtype=object)]
        code_prev = np.zeros(n, dtype=np.int64)  # index of each row's ancestor within the previous level
        offsets = [0, 1]
        for col in cols:
            if pd.isna(pd.Series(col)).any():
                raise ValueError("Unit ids contain missing values; every row needs an id at every level.")
            own, uniques = pd.factorize(pd.Series(col), sort=True)
            key = code_prev * (len(uniques) + 1) + own
            ukeys, inverse = np.unique(key, return_inverse=True)
            parents.append(offsets[-2] + ukeys // (len(uniques) + 1))
            labels.append(np.asarray(uniques, dtype=object)[ukeys % (len(uniques) + 1)])
            code_prev = inverse.astype(np.int64)
            offsets.append(offsets[-1] + len(ukeys))
        if offsets[-1] - offsets[-2] != n:
            raise ValueError("Two rows share the same unit id path; every row must be a distinct leaf.")
        parent = np.concatenate(parents)
        level = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        n_child = np.bincount(parent[1:], minlength=parent.shape[0])
        child_ptr = np.concatenate([[1], 1 + np.cumsum(n_child)])
        leaf_nodes = offsets[-2] + code_prev
        return cls(parent.astype(np.int64), level.astype(np.int64), np.asarray(offsets, dtype=np.int64),
                   child_ptr.astype(np.int64), leaf_nodes.astype(np.int64),
                   _names(level_names, len(cols) + 1), np.concatenate(labels))

    @classmethod
    def from_geoids(cls, geoids, cuts: Sequence[int] = CENSUS_GEOID_CUTS,
                    level_names: Sequence[str] | None = None) -> "Hierarchy":
        """Tree from block GEOIDs read as nested prefixes: level k's unit is the first ``cuts[k]`` characters.

        The default cuts are the census spine of a 15-character block GEOID: state (2), county (5),
        tract (11), block group (12, the first digit of the block code) and block (15), under a
        nation root. Leaves keep the order of ``geoids``.
        """
        ids = pd.Series(np.asarray(geoids, dtype=object).reshape(-1))
        if ids.isna().any():
            raise ValueError("Some GEOIDs are missing; every row needs one.")
        ids = ids.astype(str).str.strip()
        cut = [int(c) for c in cuts]
        if not cut or cut[0] < 1 or any(b <= a for a, b in zip(cut, cut[1:])):
            raise ValueError(f"Cuts must be increasing prefix lengths of at least 1; got {list(cuts)}.")
        lengths = ids.str.len()
        if len(ids) and (lengths != cut[-1]).any():
            bad = ids[lengths != cut[-1]].iloc[0]
            raise ValueError(f"Every GEOID must have {cut[-1]} characters for these cuts; {bad!r} has {len(bad)}.")
        if level_names is None and tuple(cut) == CENSUS_GEOID_CUTS:
            level_names = DEFAULT_LEVEL_NAMES
        return cls.from_unit_ids([ids.str.slice(0, c).to_numpy() for c in cut], level_names)

    @classmethod
    def from_geodataframe(cls, gdf, level_columns: Sequence[str],
                          level_names: Sequence[str] | None = None) -> "Hierarchy":
        """Tree from a (Geo)DataFrame with one id column per level below the root, leaves = rows."""
        missing = [c for c in level_columns if c not in gdf.columns]
        if missing:
            raise ValueError(f"Columns {missing} are not in the table; available: {list(gdf.columns)}.")
        return cls.from_unit_ids([gdf[c].to_numpy() for c in level_columns],
                                 level_names if level_names is not None else ["root", *level_columns])


def _names(level_names: Sequence[str] | None, depth: int) -> tuple[str, ...]:
    """Level names for a tree of ``depth`` levels; a list one short gets 'root' prepended."""
    if level_names is None:
        if depth <= len(DEFAULT_LEVEL_NAMES):
            return tuple(DEFAULT_LEVEL_NAMES[len(DEFAULT_LEVEL_NAMES) - depth:]) if depth > 1 else ("root",)
        return tuple(f"level {i}" for i in range(depth))
    names = tuple(str(n) for n in level_names)
    if len(names) == depth - 1:
        names = ("root",) + names
    if len(names) != depth:
        raise ValueError(f"Give {depth} level names (root first) or {depth - 1} (below the root); got {len(names)}.")
    return names
