"""The geographies the budget page allocates over: stylised homogeneous trees and Georgia.

A stylised tree is given by its fan-outs (children per node at each level below the root); its
leaf populations are simulated as Poisson(50) from a seed. Georgia is the synthetic block geography
nested in the real counties that the District maps page studies too, from the one loader
``core.geography.sources.georgia_blocks`` (in memory and on disk). Stylised trees are kept in memory,
so a second visit does not rebuild them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from core.contracts import named_rng

from core.geography.hierarchy import Hierarchy, check_counts
from core.geography.sources import geographies, georgia_blocks, georgia_is_cached

__all__ = ["GEOGRAPHIES", "GeographyData", "Hierarchy", "check_fanouts", "georgia_geography", "georgia_is_cached",
           "load_geography", "parse_fanouts", "stylised_geography"]

STYLISED_NAMES = ("state", "county", "tract", "block group", "block")
GEOGRAPHIES = geographies("stylised", "georgia")
MAX_LEAVES = 2_000_000
MAX_FANOUT = 100_000
MAX_LEVELS = 6


@dataclass(frozen=True)
class GeographyData:
    """A hierarchy with its leaf populations and a description of where they come from."""

    hierarchy: Hierarchy
    leaf_counts: np.ndarray = field(repr=False)
    source: str
    leaf_ids: np.ndarray | None = field(default=None, repr=False)   # block GEOIDs, when the leaves have them

    def __post_init__(self) -> None:
        counts = check_counts(self.leaf_counts, "Leaf populations", nonnegative=True)
        if counts.shape[:1] != (self.hierarchy.n_leaves,):
            raise ValueError(f"Give one population per leaf ({self.hierarchy.n_leaves:,}); got {counts.shape[0]:,}.")


def check_fanouts(fanouts) -> tuple[int, ...]:
    """Fan-outs as whole numbers with a leaf count the page can hold; ValueError saying what to change.

    The leaf count is multiplied in Python integers, so huge fan-outs cannot wrap around (numpy's
    int64 product of 4294967296 x 4294967296 is 0).
    """
    try:
        fan = tuple(fanouts)
    except TypeError:
        raise ValueError("Fan-outs must be a list of whole numbers, e.g. 20, 10, 4, 12.") from None
    if not 1 <= len(fan) <= MAX_LEVELS:
        raise ValueError(f"Give between 1 and {MAX_LEVELS} fan-outs (levels below the root); got {len(fan)}.")
    out = []
    for f in fan:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer, float)) or not math.isfinite(f) \
                or int(f) != f or not 1 <= int(f) <= MAX_FANOUT:
            raise ValueError(f"Each fan-out must be a whole number from 1 to {MAX_FANOUT:,}; got {f!r}.")
        out.append(int(f))
    leaves = math.prod(out)
    if leaves > MAX_LEAVES:
        raise ValueError(f"These fan-outs make {leaves:,} leaves; keep the product under {MAX_LEAVES:,} "
                         "(use smaller fan-outs or fewer levels).")
    return tuple(out)


def parse_fanouts(text: str) -> tuple[int, ...]:
    """Fan-outs typed as '20, 10, 4, 12' (or '20 x 10 x 4 x 12')."""
    parts = [p.strip() for p in str(text).replace("x", ",").replace("X", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError("Give at least one fan-out, e.g. 20, 10, 4, 12.")
    if any(not p.isdigit() or len(p) > 12 for p in parts):
        raise ValueError("Fan-outs must be whole numbers separated by commas, e.g. 20, 10, 4, 12.")
    return check_fanouts(tuple(int(p) for p in parts))


def stylised_level_names(depth: int) -> tuple[str, ...]:
    """Census-like names for a stylised tree, read from the block upwards (three fan-outs give county >
    tract > block group > block, as on the district maps' grid county, so an allocation made here loads
    there); 'nation' tops six levels."""
    if depth <= 1:
        return ("block",)
    if depth <= len(STYLISED_NAMES):
        return STYLISED_NAMES[len(STYLISED_NAMES) - depth:]
    if depth == len(STYLISED_NAMES) + 1:
        return ("nation",) + STYLISED_NAMES
    return tuple(f"level {i}" for i in range(depth))


def stylised_geography(fanouts: tuple[int, ...], seed: int = 0) -> GeographyData:
    """Homogeneous tree with the given fan-outs; leaf populations Poisson(50) from the seed."""
    fan = check_fanouts(fanouts)
    h = Hierarchy.homogeneous(fan, stylised_level_names(len(fan) + 1))
    rng = named_rng(int(seed), "populations")
    counts = rng.poisson(50, h.n_leaves)
    return GeographyData(h, counts, f"stylised homogeneous tree {' x '.join(map(str, fan))} "
                                    f"({h.n_leaves:,} leaves, populations simulated as Poisson(50))")


def georgia_geography(seed: int = 0) -> GeographyData:
    """Georgia's blocks (the shared loader) as the budget page's hierarchy and leaf populations."""
    geo = georgia_blocks(int(seed))
    return GeographyData(geo.hierarchy, np.asarray(geo.blocks["total"], dtype=np.int64),
                         "Georgia: synthetic blocks nested in the real counties (state > county > tract > "
                         "block group > block)", geo.blocks["GEOID"].to_numpy())


_loaded: dict = {}


def load_geography(kind: str, fanouts: tuple[int, ...] = (), seed: int = 0) -> GeographyData:
    """The geography a plan names (stylised trees kept per process; Georgia from the shared loader)."""
    if kind == "georgia":
        return georgia_geography(int(seed))
    if kind != "stylised":
        raise ValueError(f"Unknown geography {kind!r}; choose one of {list(GEOGRAPHIES)}.")
    key = (check_fanouts(fanouts), int(seed))
    if key not in _loaded:
        if len(_loaded) >= 8:
            _loaded.pop(next(iter(_loaded)))
        _loaded[key] = stylised_geography(*key)
    return _loaded[key]
