"""Block geographies for district studies: real Georgia counties with synthetic units below them.

Counties (boundaries and 1990 population) are real. Tracts, block groups and blocks are synthetic:
random points per county, Voronoi cells clipped to the county, populations from a smooth random
field scaled to the county's exact total, Black counts matching the county's % Black. Block ids
follow the TIGER pattern: county (5) + tract (6) + block group (1) + block (3) = 15 characters.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from scipy.spatial import cKDTree

from core.contracts import make_rng
from core.geography.hierarchy import Hierarchy, check_counts
from core.geography.adjacency import EQUAL_AREA_CRS, UnitAdjacency, connect_units, rook_adjacency
from core.geography.rounding import largest_remainder

LEVEL_NAMES = ("state", "county", "tract", "block group", "block")
LEVEL_COLUMNS = {"county": "county", "tract": "tract", "block group": "block_group", "block": "GEOID"}
_FORMAT_VERSION = 3  # 3: tracts and block groups made connected


@dataclass(frozen=True, eq=False)
class BlockGeography:
    """Blocks (one row per leaf, EPSG:4326) with their state > county > tract > block group > block tree."""

    blocks: gpd.GeoDataFrame
    hierarchy: Hierarchy
    counties: gpd.GeoDataFrame
    synthetic_below_county: bool = True
    name: str = "Georgia"
    _units: dict = field(default_factory=dict, repr=False)

    def units(self, level: str) -> gpd.GeoDataFrame:
        """Polygons and counts of every unit of ``level`` (county, tract, block group, block), EPSG:4326."""
        if level == "block":
            return self.blocks
        if level not in LEVEL_COLUMNS:
            raise ValueError(f"Unknown unit level {level!r}; choose one of {list(LEVEL_COLUMNS)}.")
        if level not in self._units:
            self._units[level] = dissolve_units(self.blocks, LEVEL_COLUMNS[level])
        return self._units[level]

    def leaf_unit_index(self, level: str) -> np.ndarray:
        """For every block, the row of its unit in ``units(level)``."""
        if level == "block":
            return np.arange(len(self.blocks))
        col = LEVEL_COLUMNS[level]
        ids = self.units(level)[col].to_numpy()
        return pd.Index(ids).get_indexer(self.blocks[col].to_numpy())


def dissolve_units(blocks: gpd.GeoDataFrame, column: str) -> gpd.GeoDataFrame:
    """Union of block polygons by ``column`` with summed counts (blocks tile each unit exactly)."""
    counts = [c for c in ("total", "black", "vap", "bvap") if c in blocks.columns]
    keep = [c for c in ("county", "tract", "block_group") if c in blocks.columns]
    # parent ids are constant within a unit, so the first value is the unit's parent
    parents = [c for c in keep if len(c) <= len(column) and c != column and _is_prefix_level(c, column)]
    agg = {c: "sum" for c in counts} | {c: "first" for c in parents}
    out = blocks.dissolve(by=column, aggfunc=agg, method="coverage").reset_index()
    return out[[column, *parents, *counts, "geometry"]]


def _is_prefix_level(parent: str, child: str) -> bool:
    order = ["county", "tract", "block_group", "GEOID"]
    return order.index(parent) < order.index(child)


def hierarchy_from_blocks(blocks: pd.DataFrame) -> Hierarchy:
    """The state > county > tract > block group > block tree, leaves in row order."""
    return Hierarchy.from_unit_ids([blocks["county"].to_numpy(), blocks["tract"].to_numpy(),
                                    blocks["block_group"].to_numpy(), blocks["GEOID"].to_numpy()],
                                   LEVEL_NAMES)


# ----------------------------------------------------------------------------- synthesis
def _sample_points(poly, n: int, rng: np.random.Generator) -> np.ndarray:
    """n uniform points inside a polygon by rejection from its bounding box."""
    x0, y0, x1, y1 = poly.bounds
    frac = max(poly.area / max((x1 - x0) * (y1 - y0), 1e-12), 0.05)
    out = np.empty((0, 2))
    shapely.prepare(poly)
    while out.shape[0] < n:
        m = int(1.5 * (n - out.shape[0]) / frac) + 16
        pts = np.column_stack([rng.uniform(x0, x1, m), rng.uniform(y0, y1, m)])
        out = np.vstack([out, pts[shapely.contains_xy(poly, pts[:, 0], pts[:, 1])]])
    return out[:n]


def _smooth_field(pts: np.ndarray, n_bumps: int, length: float, rng: np.random.Generator) -> np.ndarray:
    """A spatially correlated field: a sum of random Gaussian bumps centred on some of the points."""
    centres = pts[rng.choice(pts.shape[0], size=min(n_bumps, pts.shape[0]), replace=False)]
    amp = rng.normal(0.0, 1.0, centres.shape[0])
    d2 = ((pts[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return (amp[None, :] * np.exp(-d2 / (2.0 * length ** 2))).sum(axis=1)


def _county_blocks(poly, n_blocks: int, n_tracts: int, n_precincts: int, rng: np.random.Generator):
    """Points, clipped Voronoi cells, tract and precinct index, and two smooth fields for one county."""
    pts = _sample_points(poly, n_blocks, rng)
    cells = shapely.get_parts(shapely.voronoi_polygons(shapely.MultiPoint(pts), extend_to=poly, ordered=True))
    cells = shapely.intersection(cells, poly)
    # clipped cells can come back as collections with slivers: keep the polygonal part
    cells = shapely.make_valid(cells)
    tract = cKDTree(pts[:n_tracts]).query(pts)[1]
    precinct = cKDTree(pts[rng.permutation(n_blocks)[:n_precincts]]).query(pts)[1]
    length = np.sqrt(poly.area / 8.0)
    pop_field = 1.2 * _smooth_field(pts, 8, length, rng)
    group_field = 2.5 * _smooth_field(pts, 6, length, rng)
    return pts, cells, tract, precinct, pop_field, group_field


def synthesize_blocks(counties: gpd.GeoDataFrame, seed: int = 0, n_blocks: int = 30_000,
                      people_per_tract: int = 4_000, bgs_per_tract: int = 3, zero_share: float = 0.12,
                      progress=None, return_adjacency: bool = False):
    """Synthetic blocks nested in real counties (columns GEOID, county, tract, block_group, precinct,
    total, black, vap, bvap, geometry); county totals and Black totals match the county table exactly.
    Every tract and block group is connected. With ``return_adjacency``, also the blocks' rook adjacency."""
    need = {"GEOID", "TotPop90", "PctBlack", "geometry"}
    if not need <= set(counties.columns):
        raise ValueError(f"The county table needs columns {sorted(need)}; it has {list(counties.columns)}.")
    rng = make_rng(seed, what="the synthetic blocks")
    cty = counties.to_crs(EQUAL_AREA_CRS).reset_index(drop=True)
    pop = cty["TotPop90"].to_numpy(dtype=np.int64)
    share = pop / pop.sum()
    nb = np.maximum(40, np.round(share * n_blocks)).astype(int)
    nt = np.clip(np.round(pop / people_per_tract), 1, nb // 6).astype(int)
    npct = np.maximum(2, nb // 12)
    parts = []
    for i, poly in enumerate(cty.geometry.to_numpy()):
        pts, cells, tract, precinct, pf, gf = _county_blocks(poly, int(nb[i]), int(nt[i]), int(npct[i]), rng)
        parts.append((np.full(pts.shape[0], i), pts, cells, tract, precinct, pf, gf))
        if progress is not None:
            progress(i + 1, len(cty), "Subdividing counties")
    cidx, pts, cells, tract, precinct, pf, gf = (np.concatenate([p[k] for p in parts]) for k in range(7))
    n = cidx.shape[0]
    # nearest-seed tracts and angular block groups can come out in pieces: merge stray pieces into
    # the neighbouring unit of the same parent so every unit is connected on the rook graph
    adj = rook_adjacency(gpd.GeoDataFrame(geometry=cells, crs=EQUAL_AREA_CRS))
    tkey = connect_units(adj, cidx * 100_000 + tract, cidx)
    tract = tkey % 100_000
    # block groups: split each tract into angular sectors around the tract's mean point
    _, tinv = np.unique(tkey, return_inverse=True)
    tsize = np.bincount(tinv)
    cx = np.bincount(tinv, weights=pts[:, 0]) / tsize
    cy = np.bincount(tinv, weights=pts[:, 1]) / tsize
    ang = np.arctan2(pts[:, 1] - cy[tinv], pts[:, 0] - cx[tinv])
    order = np.lexsort((ang, tinv))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.searchsorted(tinv[order], tinv[order])
    nbg = np.clip(tsize // 8, 1, bgs_per_tract)[tinv]
    bg = rank * nbg // tsize[tinv]
    bkey = connect_units(adj, tkey * 10 + bg, tkey)
    bg = bkey % 10
    # block number within its block group
    order = np.lexsort((np.arange(n), bkey))
    brank = np.empty(n, dtype=np.int64)
    brank[order] = np.arange(n) - np.searchsorted(bkey[order], bkey[order])
    # populations: log-normal around a smooth field, some empty blocks, exact county totals
    weight = np.exp(pf + rng.normal(0.0, 0.6, n))
    weight[rng.random(n) < zero_share] = 0.0
    total = largest_remainder(weight, cidx, pop)
    # Black counts: logistic of a smooth field, shifted per county to hit its % Black
    target_black = np.round(cty["PctBlack"].to_numpy(dtype=float) / 100.0 * pop).astype(np.int64)
    shift = _solve_group_shift(total, gf, cidx, target_black)
    p_black = 1.0 / (1.0 + np.exp(-(shift[cidx] + gf)))
    black = np.minimum(largest_remainder(total * p_black, cidx, target_black), total)
    vap = rng.binomial(total, 0.75)
    bvap = rng.hypergeometric(black, total - black, vap)
    geoid_cty = cty["GEOID"].astype(str).to_numpy()[cidx]
    tract_id = pd.Series(geoid_cty).str.cat(pd.Series(tract + 1).map("{:04d}00".format))
    bg_id = tract_id.str.cat(pd.Series(bg + 1).astype(str))
    geoid = bg_id.str.cat(pd.Series(brank + 1).map("{:03d}".format))
    precinct_id = pd.Series(geoid_cty).str.cat(pd.Series(precinct + 1).map("P{:04d}".format))
    out = gpd.GeoDataFrame({"GEOID": geoid.to_numpy(), "county": geoid_cty, "tract": tract_id.to_numpy(),
                            "block_group": bg_id.to_numpy(), "precinct": precinct_id.to_numpy(),
                            "total": total, "black": black, "vap": vap, "bvap": bvap},
                           geometry=cells, crs=EQUAL_AREA_CRS)
    out["area_km2"] = out.geometry.area / 1e6
    out = out.sort_values("GEOID", kind="stable")
    perm = out.index.to_numpy()
    out = out.reset_index(drop=True).to_crs("EPSG:4326")
    if not return_adjacency:
        return out
    new_pos = np.empty(n, dtype=np.int64)
    new_pos[perm] = np.arange(n)
    return out, UnitAdjacency(np.sort(new_pos[adj.edges], axis=1), adj.shared, adj.area[perm], adj.perimeter[perm])


def _solve_group_shift(total: np.ndarray, field_values: np.ndarray, group: np.ndarray,
                       target: np.ndarray, iters: int = 60) -> np.ndarray:
    """Per-group shift a with sum total*logistic(a + field) = target, by bisection for all groups at once."""
    lo = np.full(target.shape[0], -30.0)
    hi = np.full(target.shape[0], 30.0)
    for _ in range(iters):
        mid = (lo + hi) / 2
        got = np.bincount(group, weights=total / (1.0 + np.exp(-(mid[group] + field_values))),
                          minlength=target.shape[0])
        low = got < target
        lo = np.where(low, mid, lo)
        hi = np.where(low, hi, mid)
    return (lo + hi) / 2


# ----------------------------------------------------------------------------- loading
def georgia_counties() -> gpd.GeoDataFrame:
    """The bundled real Georgia counties (1990)."""
    from core.datasets import load_georgia_counties

    return load_georgia_counties()


def _cache_path(seed: int, fingerprint: str) -> Path:
    from core.cache import cache_dir
    folder = Path(cache_dir()) / "districts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"georgia_blocks_v{_FORMAT_VERSION}_seed{seed}_{fingerprint}.parquet"


def geography_from_blocks(blocks: gpd.GeoDataFrame, counties: gpd.GeoDataFrame, synthetic: bool,
                          name: str) -> BlockGeography:
    """Wrap blocks (already sorted by GEOID) with their hierarchy, after checking there is at least one
    block and that its counts are finite, non-negative and fit in int64 when added up."""
    if len(blocks) == 0:
        raise ValueError("The geography has 0 blocks; give at least one block with its population.")
    for column in ("total", "vap", "black", "bvap"):
        if column in blocks:
            check_counts(blocks[column].to_numpy(), f"Block counts ({column})", nonnegative=True)
    return BlockGeography(blocks, hierarchy_from_blocks(blocks), counties, synthetic, name)


def georgia_cache_path(seed: int = 0, counties: gpd.GeoDataFrame | None = None, n_blocks: int = 30_000) -> Path:
    """The on-disk file of Georgia's blocks for this seed, counties and block count (it may not exist yet)."""
    from core.cache import data_fingerprint
    cty = georgia_counties() if counties is None else counties
    fp = data_fingerprint(pd.DataFrame({"g": cty["GEOID"].astype(str), "p": cty["TotPop90"],
                                        "b": cty["PctBlack"]}))[:12] + f"_{n_blocks}"
    return _cache_path(int(seed), fp)


def load_georgia_blocks(seed: int = 0, counties: gpd.GeoDataFrame | None = None,
                        n_blocks: int = 30_000, progress=None) -> BlockGeography:
    """Real Georgia counties subdivided into synthetic tracts, block groups and blocks; cached on disk by seed."""
    cty = georgia_counties() if counties is None else counties
    path = georgia_cache_path(seed, cty, n_blocks)
    if path.exists():
        blocks = gpd.read_parquet(path)
    else:
        blocks, adj = synthesize_blocks(cty, seed=int(seed), n_blocks=n_blocks, progress=progress,
                                        return_adjacency=True)
        npz = path.with_suffix(".adjacency.npz")
        np.savez(npz.with_suffix(".tmp.npz"), edges=adj.edges, shared=adj.shared, area=adj.area,
                 perimeter=adj.perimeter)
        npz.with_suffix(".tmp.npz").replace(npz)
        tmp = path.with_suffix(".tmp")
        blocks.to_parquet(tmp)
        tmp.replace(path)
    geo = geography_from_blocks(blocks, cty, True, "Georgia (synthetic below county)")
    geo._units["__cache_path__"] = path  # lets the block adjacency be cached next to the blocks
    return geo
