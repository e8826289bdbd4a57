"""Block-assignment plans as files: one row per block GEOID with its district number."""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.uploads import read_upload

MAX_DISTRICTS = 400


def plan_from_csv(file, geoids: np.ndarray, max_bytes: int = 50_000_000) -> np.ndarray:
    """Block-assignment CSV (columns GEOID, district) -> label per block in ``geoids`` order (0..k-1)."""
    table = read_upload(file, "assignment_csv", max_bytes=max_bytes)
    g, dist = table["GEOID"], table["district"]
    known = pd.Index(geoids)
    unknown = g[~g.isin(known)]
    if len(unknown):
        raise ValueError(f"{len(unknown)} GEOIDs in the plan are not blocks of this geography "
                         f"(first: {unknown.iloc[0]}).")
    missing = len(known) - len(g)
    if missing:
        raise ValueError(f"{missing} blocks of the geography have no district in the plan; assign every block.")
    codes, uniques = pd.factorize(dist, sort=True)
    if not 2 <= len(uniques) <= MAX_DISTRICTS:
        raise ValueError(f"The plan has {len(uniques):,} districts; a plan needs 2 to {MAX_DISTRICTS} districts.")
    labels = np.empty(len(known), dtype=np.int64)
    labels[known.get_indexer(g)] = codes
    return labels


def plan_to_frame(geoids: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """Block-assignment table (GEOID, district numbered from 1), the format plan_from_csv reads."""
    return pd.DataFrame({"GEOID": geoids, "district": np.asarray(labels) + 1})
