"""Views of a result for a map: the units to draw with their district's numbers, and district outlines.

Pure functions of a geography, one plan's labels and that plan's district table; nothing is recomputed.
"""
from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd

from core.geography.blocks import BlockGeography

DISPLAY_LEVELS = {"county": "counties", "tract": "tracts", "block group": "block groups", "block": "blocks"}


def display_values(geo: BlockGeography, level: str, labels: np.ndarray, table: pd.DataFrame,
                   block_error: np.ndarray, county: str | None = None) -> gpd.GeoDataFrame:
    """Units to draw (counties, tracts, or the blocks of one county) with their district and its numbers.

    A unit split between districts is drawn with the district that holds most of its population.
    """
    b = geo.blocks
    if level == "block":
        keep = np.ones(len(b), dtype=bool) if county is None else (b["county"].to_numpy() == county)
        units = b.loc[keep, ["GEOID", "total", "black", "geometry"]].reset_index(drop=True)
        units["district"] = labels[keep] + 1
        units["mean_block_error"] = block_error[keep]
        units["unit_id"] = units["GEOID"]
    else:
        leaf_unit = geo.leaf_unit_index(level)
        units = geo.units(level)
        n_u = len(units)
        k = int(labels.max()) + 1
        w = b["total"].to_numpy(dtype=float) + 1e-6  # empty units still get a district
        share = np.zeros((n_u, k))
        np.add.at(share, (leaf_unit, labels), w)
        col = {"county": "county", "tract": "tract", "block group": "block_group"}[level]
        units = units[[col, "total", "black", "geometry"]].rename(columns={col: "unit_id"}).copy()
        units["district"] = share.argmax(axis=1) + 1
        units["split"] = (share > 1e-3).sum(axis=1) > 1
        units["mean_block_error"] = np.bincount(leaf_unit, weights=block_error, minlength=n_u)
    units["black_share_pct"] = 100 * units["black"] / units["total"].where(units["total"] > 0)
    cols = ["district", "population", "deviation_pct", "mean_abs_error", "p95_abs_error", "empirical_sd",
            "analytic_toydown_sd", "balanced_on_noisy_max_abs_dev_pct", "fragmentation"]
    dist = table[cols].rename(columns={"population": "district_population", "deviation_pct": "district_deviation_pct",
                                       "fragmentation": "district_fragmentation"})
    return gpd.GeoDataFrame(units.merge(dist, on="district", how="left"), geometry="geometry", crs=b.crs)


def district_shapes(geo: BlockGeography, labels: np.ndarray, table: pd.DataFrame) -> gpd.GeoDataFrame:
    """District polygons (blocks dissolved by label) with the per-district table, EPSG:4326."""
    lab = np.asarray(labels)
    # dissolve the coarsest units the plan keeps whole (far fewer polygons than blocks)
    pieces = None
    for level in ("county", "tract", "block group"):
        lu = geo.leaf_unit_index(level)
        first = np.full(int(lu.max()) + 1, -1)
        first[lu] = lab
        if np.array_equal(first[lu], lab):
            pieces = geo.units(level)[["geometry"]].copy()
            pieces["district"] = first + 1
            break
    if pieces is None:
        pieces = geo.blocks[["geometry"]].copy()
        pieces["district"] = lab + 1
    shapes = pieces.dissolve(by="district").reset_index()  # units of different counties are not exactly noded
    return gpd.GeoDataFrame(shapes.merge(table, on="district"), geometry="geometry", crs=geo.blocks.crs)
