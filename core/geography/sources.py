"""Where a geography comes from: the one list of geography sources and the one Georgia loader.

``GEOGRAPHIES`` names every source a page can study (key -> label); each area accepts its own subset
(the Budget allocation page stylised trees and Georgia, the District maps page the grid county, Georgia
and uploaded blocks). :func:`georgia_blocks` is the only way Georgia is loaded: kept per process in
memory and on disk (the blocks' parquet file, see ``core.geography.blocks``), so both pages share one
copy and a second visit does not rebuild it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # geopandas loads only when Georgia is asked for
    from core.geography.blocks import BlockGeography

# Georgia's counties are real; its tracts, block groups and blocks are built from a seed, which the label
# says wherever Georgia is offered.
GEOGRAPHIES = {"stylised": "Stylised fan-outs", "grid": "Synthetic square-grid county",
               "georgia": "Georgia (real counties; synthetic below the county)",
               "upload": "My block files (TIGER/Line + PL 94-171)"}

_GEORGIA: dict[int, "BlockGeography"] = {}
_KEEP = 2   # Georgia geographies (seeds) held in memory at once


def geographies(*keys: str) -> dict[str, str]:
    """The labels of the given sources, in the order asked (an area's choices)."""
    unknown = [k for k in keys if k not in GEOGRAPHIES]
    if unknown:
        raise ValueError(f"Unknown geography {unknown[0]!r}; choose one of {list(GEOGRAPHIES)}.")
    return {k: GEOGRAPHIES[k] for k in keys}


def georgia_blocks(seed: int = 0) -> "BlockGeography":
    """Georgia: the real counties with synthetic tracts, block groups and blocks built from ``seed``."""
    from core.geography.blocks import load_georgia_blocks

    seed = int(seed)
    if seed not in _GEORGIA:
        if len(_GEORGIA) >= _KEEP:
            _GEORGIA.pop(next(iter(_GEORGIA)))
        _GEORGIA[seed] = load_georgia_blocks(seed=seed)
    return _GEORGIA[seed]


def georgia_is_cached(seed: int = 0) -> bool:
    """True when Georgia for ``seed`` loads without being built (in memory, or its blocks on disk): pages
    say when a first load will take a while."""
    if int(seed) in _GEORGIA:
        return True
    from core.geography.blocks import georgia_cache_path

    try:
        return georgia_cache_path(int(seed)).exists()
    except Exception:  # noqa: BLE001 - a cache probe never decides a number
        return False
