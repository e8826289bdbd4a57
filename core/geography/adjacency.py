"""Rook adjacency of polygon units, with shared boundary lengths in an equal-area projection."""
from __future__ import annotations

from dataclasses import dataclass

import geopandas as gpd
import networkx as nx
import numpy as np
import pandas as pd
import shapely
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


EQUAL_AREA_CRS = "EPSG:5070"  # CONUS Albers equal-area: areas and Polsby-Popper are computed here


@dataclass(frozen=True, eq=False)
class UnitAdjacency:
    """Rook edges (i < j) between units, shared boundary length (m), unit area (m^2) and perimeter (m)."""

    edges: np.ndarray
    shared: np.ndarray
    area: np.ndarray
    perimeter: np.ndarray

    @property
    def n_units(self) -> int:
        return int(self.area.shape[0])

    def n_components(self, labels: np.ndarray | None = None) -> np.ndarray | int:
        """Connected components of the whole graph, or per label of the subgraph induced by each label."""
        n = self.n_units
        e = self.edges
        if labels is not None:
            lab = np.asarray(labels)
            e = e[lab[e[:, 0]] == lab[e[:, 1]]]
        m = coo_matrix((np.ones(e.shape[0]), (e[:, 0], e[:, 1])), shape=(n, n))
        _, comp = connected_components(m, directed=False)
        if labels is None:
            return int(comp.max() + 1)
        pairs = np.unique(np.column_stack([lab, comp]), axis=0)
        return np.bincount(pairs[:, 0].astype(np.int64))


def rook_adjacency(units: gpd.GeoDataFrame, min_shared_m: float = 1.0, grid_m: float = 0.01) -> UnitAdjacency:
    """Units that share a boundary of positive length (corner-only contacts dropped), in EPSG:5070."""
    if units.geometry.isna().any() or units.geometry.is_empty.any():
        raise ValueError("Some units have no geometry; every unit needs a polygon to build adjacency.")
    projected = units.to_crs(EQUAL_AREA_CRS)
    geoms = projected.geometry.to_numpy()
    # reprojection leaves gaps and overlaps of ~1e-9 m along shared edges: search within a small
    # distance and intersect on a snapping grid so collinear edges are recognised as shared
    left, right = projected.sindex.query(geoms, predicate="dwithin", distance=grid_m)
    keep = left < right
    left, right = left[keep], right[keep]
    bounds = shapely.set_precision(shapely.boundary(geoms), grid_m)
    shared = shapely.length(shapely.intersection(bounds[left], bounds[right], grid_size=grid_m))
    rook = shared > min_shared_m
    return UnitAdjacency(np.column_stack([left[rook], right[rook]]).astype(np.int64), shared[rook],
                         shapely.area(geoms), shapely.length(geoms))


def grid_adjacency(n_rows: int, n_cols: int, cell: float = 1.0) -> UnitAdjacency:
    """Rook adjacency of a row-major grid of square cells of side ``cell``."""
    idx = np.arange(n_rows * n_cols).reshape(n_rows, n_cols)
    horiz = np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()])
    vert = np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])
    edges = np.vstack([horiz, vert])
    n = n_rows * n_cols
    return UnitAdjacency(edges, np.full(edges.shape[0], cell), np.full(n, cell * cell), np.full(n, 4 * cell))


def relabel(adj: UnitAdjacency, leaf_unit: np.ndarray, n_units: int) -> UnitAdjacency:
    """Adjacency of coarser units (each leaf maps to unit ``leaf_unit[i]``): summed areas and shared lengths."""
    u = leaf_unit[adj.edges]
    cross = u[:, 0] != u[:, 1]
    a, b = np.sort(u[cross], axis=1).T
    key = a * n_units + b
    ukey, inv = np.unique(key, return_inverse=True)
    shared = np.bincount(inv, weights=adj.shared[cross])
    area = np.bincount(leaf_unit, weights=adj.area, minlength=n_units)
    inner = np.bincount(leaf_unit[adj.edges[~cross, 0]], weights=adj.shared[~cross], minlength=n_units)
    perimeter = np.bincount(leaf_unit, weights=adj.perimeter, minlength=n_units) - 2 * inner
    return UnitAdjacency(np.column_stack([ukey // n_units, ukey % n_units]), shared, area, perimeter)


def to_gerrychain(adj: UnitAdjacency, node_data: dict[str, np.ndarray]):
    """A gerrychain Graph (nodes 0..n-1 with the given attributes, edges with shared_perim)."""
    from gerrychain import Graph
    g = nx.Graph()
    n = adj.n_units
    cols = {k: np.asarray(v) for k, v in node_data.items()}
    g.add_nodes_from((i, {k: v[i].item() for k, v in cols.items()} | {"area": float(adj.area[i])})
                     for i in range(n))
    g.add_edges_from((int(i), int(j), {"shared_perim": float(s)}) for (i, j), s in zip(adj.edges, adj.shared))
    return Graph.from_networkx(g)


def block_adjacency(geo) -> UnitAdjacency:
    """Rook adjacency of a BlockGeography's blocks (grid geometry computed exactly), memoised on ``geo``."""
    key = "__block_adjacency__"
    if key not in geo._units:
        b = geo.blocks
        if {"row", "col"} <= set(b.columns):
            rows, cols = b["row"].to_numpy(), b["col"].to_numpy()
            n_r, n_c = int(rows.max()) + 1, int(cols.max()) + 1
            grid = grid_adjacency(n_r, n_c, cell=float(np.sqrt(b["area_km2"].iloc[0]) * 1000.0))
            pos_to_leaf = np.empty(n_r * n_c, dtype=np.int64)
            pos_to_leaf[rows * n_c + cols] = np.arange(len(b))
            geo._units[key] = UnitAdjacency(np.sort(pos_to_leaf[grid.edges], axis=1), grid.shared,
                                            grid.area, grid.perimeter)
        else:
            geo._units[key] = _cached_rook_adjacency(b, geo._units.get("__cache_path__"))
    return geo._units[key]


def _cached_rook_adjacency(blocks: gpd.GeoDataFrame, path) -> UnitAdjacency:
    """Rook adjacency, read from / written to an .npz next to the cached geography when there is one."""
    if path is None:
        return rook_adjacency(blocks)
    from pathlib import Path
    npz = Path(path).with_suffix(".adjacency.npz")
    if npz.exists():
        with np.load(npz) as z:
            if z["area"].shape[0] == len(blocks):
                return UnitAdjacency(z["edges"], z["shared"], z["area"], z["perimeter"])
    adj = rook_adjacency(blocks)
    tmp = npz.with_suffix(".tmp.npz")
    np.savez(tmp, edges=adj.edges, shared=adj.shared, area=adj.area, perimeter=adj.perimeter)
    tmp.replace(npz)
    return adj


def unit_adjacency(geo, level: str) -> UnitAdjacency:
    """Adjacency of the units of ``level`` built from block adjacency (exact nesting, summed lengths)."""
    key = f"__adjacency_{level}__"
    if key not in geo._units:
        blocks = block_adjacency(geo)
        if level == "block":
            geo._units[key] = blocks
        else:
            lu = geo.leaf_unit_index(level)
            geo._units[key] = relabel(blocks, lu, int(lu.max()) + 1)
    return geo._units[key]


def connect_units(adj: UnitAdjacency, labels: np.ndarray, groups: np.ndarray, max_rounds: int = 30) -> np.ndarray:
    """Relabel leaves (returning values from ``labels``) so every unit is one connected piece of the leaf graph.

    Every piece of a unit other than its largest joins the neighbouring unit (within the same ``groups``
    value, e.g. the same county) with which it shares the longest boundary. Pieces with no such
    neighbour (islands) keep their label.
    """
    codes, uniques = pd.factorize(np.asarray(labels))
    lab = codes.astype(np.int64)
    grp = np.asarray(groups)
    e = adj.edges
    n = adj.n_units
    for _ in range(max_rounds):
        same = lab[e[:, 0]] == lab[e[:, 1]]
        m = coo_matrix((np.ones(int(same.sum())), (e[same, 0], e[same, 1])), shape=(n, n))
        _, comp = connected_components(m, directed=False)
        size = np.bincount(comp)
        # the largest piece of each unit stays; the others are orphans
        order = np.lexsort((-size[comp], lab))
        main = np.full(lab.max() + 1, -1)
        first = np.r_[True, lab[order][1:] != lab[order][:-1]]
        main[lab[order][first]] = comp[order][first]
        orphan_piece = comp != main[lab]
        if not orphan_piece.any():
            break
        # boundary between an orphan piece and a different unit of the same group, both directions
        a = np.concatenate([e[:, 0], e[:, 1]])
        b = np.concatenate([e[:, 1], e[:, 0]])
        length = np.concatenate([adj.shared, adj.shared])
        ok = orphan_piece[a] & (lab[a] != lab[b]) & (grp[a] == grp[b])
        if not ok.any():
            break
        cand = pd.DataFrame({"piece": comp[a[ok]], "to": lab[b[ok]], "length": length[ok]})
        best = cand.groupby(["piece", "to"], as_index=False)["length"].sum().sort_values(
            ["piece", "length"], ascending=[True, False]).drop_duplicates("piece")
        target = pd.Series(best["to"].to_numpy(), index=best["piece"].to_numpy())
        moved = orphan_piece & np.isin(comp, target.index.to_numpy())
        lab[moved] = target.loc[comp[moved]].to_numpy()
    return np.asarray(uniques)[lab]
