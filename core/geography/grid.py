"""Synthetic square-tiling county (Cohen et al. 2021, §6): every level-l square splits into a sqrt(n_l) grid.

Blocks are ordered as in the tree (tract, then block group, then block), so label order is tree order.
Populations are log-normal around a smoothed Gaussian field with some empty blocks; the group share
is a second smooth field through a logistic, so the group is spatially segregated.
"""
from __future__ import annotations

import math
from typing import Sequence

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from scipy.ndimage import gaussian_filter

from core.contracts import make_rng
from core.geography.hierarchy import Hierarchy, check_fanouts_product
from core.geography.blocks import EQUAL_AREA_CRS, BlockGeography

GRID_LEVEL_NAMES = ("county", "tract", "block group", "block")
GRID_ORIGIN = (1_100_000.0, 1_100_000.0)  # EPSG:5070 metres, roughly central Georgia


def _side(n: int) -> int:
    s = int(round(np.sqrt(n)))
    if s * s != n:
        raise ValueError(f"Every fan-out of a square tiling must be a perfect square; got {n}.")
    return s


def grid_positions(fanouts: Sequence[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Row and column of every leaf (in tree order) and the grid side length."""
    fanouts = check_fanouts_product(fanouts, "A grid's fan-outs")
    sides = [_side(n) for n in fanouts]
    n_leaves = math.prod(fanouts)
    idx = np.arange(n_leaves)
    rows = np.zeros(n_leaves, dtype=np.int64)
    cols = np.zeros(n_leaves, dtype=np.int64)
    below = n_leaves
    for n, s in zip(fanouts, sides):
        below //= int(n)
        child = (idx // below) % int(n)
        rows = rows * s + child // s
        cols = cols * s + child % s
    return rows, cols, int(np.prod(sides))


def grid_hierarchy(fanouts: Sequence[int]) -> Hierarchy:
    """County > tract > block group > block tree with the given fan-outs (leaves in tree order)."""
    if len(fanouts) != 3:
        raise ValueError(f"A grid county needs three fan-outs (tracts, block groups, blocks); got {list(fanouts)}.")
    return Hierarchy.homogeneous([int(n) for n in fanouts], GRID_LEVEL_NAMES)


def standardised(field: np.ndarray) -> np.ndarray:
    """Field centred and divided by its sd (on tiny grids the smoothed noise is far from mean zero)."""
    centred = field - field.mean()
    sd = float(centred.std())
    return centred / sd if sd > 1e-9 else np.zeros_like(field)


def synthetic_grid(fanouts: Sequence[int] = (64, 4, 16), seed: int = 0, mean_pop: float = 30.0,
                   zero_share: float = 0.15, group_mean: float = 0.3, cell_m: float = 200.0,
                   precinct_side: int = 6) -> BlockGeography:
    """A square-grid county as a BlockGeography (blocks 200 m wide in EPSG:5070, shown in EPSG:4326)."""
    fan = [int(n) for n in fanouts]
    rows, cols, side = grid_positions(fan)
    rng = make_rng(seed, what="the synthetic blocks")
    h = grid_hierarchy(fan)
    smooth = gaussian_filter(rng.normal(size=(side, side)), sigma=max(side / 12, 1.0), mode="wrap")
    smooth = standardised(smooth)
    pop = rng.poisson(mean_pop * np.exp(0.8 * smooth[rows, cols] - 0.32 + rng.normal(0, 0.4, rows.shape[0])))
    pop[rng.random(rows.shape[0]) < zero_share] = 0
    gfield = gaussian_filter(rng.normal(size=(side, side)), sigma=max(side / 10, 1.0), mode="wrap")
    gfield = standardised(gfield)
    share = 1.0 / (1.0 + np.exp(-(np.log(group_mean / (1 - group_mean)) + 2.0 * gfield[rows, cols])))
    black = rng.binomial(pop, share)
    vap = rng.binomial(pop, 0.75)
    bvap = rng.hypergeometric(black, pop - black, vap)
    n2, n3 = fan[1], fan[2]
    idx = np.arange(rows.shape[0])
    t = idx // (n2 * n3)
    bg = (idx // n3) % n2
    b = idx % n3
    tract = pd.Series(t).map("T{:04d}".format)
    block_group = tract.str.cat(pd.Series(bg).astype(str))
    geoid = block_group.str.cat(pd.Series(b).map("{:03d}".format))
    # precincts straddle tract lines: squares offset by half their side
    off = precinct_side // 2
    prow, pcol = (rows + off) // precinct_side, (cols + off) // precinct_side
    precinct = pd.Series(prow * 10_000 + pcol).map("P{:08d}".format)
    x0, y0 = GRID_ORIGIN
    geom = shapely.box(x0 + cols * cell_m, y0 - (rows + 1) * cell_m, x0 + (cols + 1) * cell_m, y0 - rows * cell_m)
    blocks = gpd.GeoDataFrame({"GEOID": geoid.to_numpy(), "county": "G0001", "tract": tract.to_numpy(),
                               "block_group": block_group.to_numpy(), "precinct": precinct.to_numpy(),
                               "total": pop, "black": black, "vap": vap, "bvap": bvap,
                               "row": rows, "col": cols}, geometry=geom, crs=EQUAL_AREA_CRS)
    blocks["area_km2"] = (cell_m / 1000.0) ** 2
    blocks = blocks.to_crs("EPSG:4326")
    county = gpd.GeoDataFrame({"GEOID": ["G0001"], "NAME": ["Synthetic grid county"],
                               "TotPop90": [int(pop.sum())]},
                              geometry=[shapely.box(x0, y0 - side * cell_m, x0 + side * cell_m, y0)],
                              crs=EQUAL_AREA_CRS).to_crs("EPSG:4326")
    return BlockGeography(blocks, h, county, True, f"Synthetic grid {tuple(fan)}")
