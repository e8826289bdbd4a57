"""Synthetic Georgia-style block geography: nesting, exact totals, adjacency, determinism."""
import geopandas as gpd
import numpy as np
import pytest
import shapely

from core.geography.adjacency import block_adjacency, rook_adjacency, unit_adjacency
from core.geography.blocks import load_georgia_blocks, synthesize_blocks, geography_from_blocks
from core.geography.grid import grid_positions, synthetic_grid


def small_counties() -> gpd.GeoDataFrame:
    polys = [shapely.box(-84 + 0.3 * i, 33 + 0.3 * j, -84 + 0.3 * (i + 1), 33 + 0.3 * (j + 1))
             for j in range(2) for i in range(3)]
    return gpd.GeoDataFrame({"GEOID": [f"13{k:03d}" for k in range(1, 12, 2)], "NAME": list("abcdef"),
                             "TotPop90": [50_000, 12_000, 300_000, 8_000, 25_000, 70_001],
                             "PctBlack": [30.0, 5.0, 55.0, 0.0, 12.5, 40.0]}, geometry=polys, crs="EPSG:4326")


@pytest.fixture(scope="module")
def geo():
    cty = small_counties()
    return geography_from_blocks(synthesize_blocks(cty, seed=3, n_blocks=1500), cty, True, "test")


def test_block_totals_sum_exactly_to_county_populations(geo):
    b = geo.blocks
    by = b.groupby("county")[["total", "black"]].sum()
    cty = small_counties().set_index("GEOID")
    assert (by["total"] == cty["TotPop90"]).all()
    assert (by["black"] == np.round(cty["PctBlack"] / 100 * cty["TotPop90"]).astype(int)).all()
    assert (b["black"] <= b["total"]).all() and (b["vap"] <= b["total"]).all() and (b["bvap"] <= b["black"]).all()
    assert (b["total"] >= 0).all() and (b["total"] == 0).any()


def test_hierarchy_nests_exactly(geo):
    b, h = geo.blocks, geo.hierarchy
    assert h.level_names == ("state", "county", "tract", "block group", "block")
    assert h.n_leaves == len(b)
    assert (b["tract"].str[:5] == b["county"]).all()
    assert (b["block_group"].str[:11] == b["tract"]).all()
    assert (b["GEOID"].str[:12] == b["block_group"]).all() and (b["GEOID"].str.len() == 15).all()
    # each tract has one county parent, each block group one tract parent
    assert b.groupby("tract")["county"].nunique().max() == 1
    assert b.groupby("block_group")["tract"].nunique().max() == 1
    counts = h.aggregate(b["total"].to_numpy())
    assert counts[0] == small_counties()["TotPop90"].sum()
    assert sorted(counts[h.nodes_at(1)]) == sorted(small_counties()["TotPop90"])
    # blocks tile their counties: areas agree to a part in a million
    area_b = b.to_crs("EPSG:5070").groupby("county").geometry.apply(lambda s: s.area.sum())
    area_c = small_counties().to_crs("EPSG:5070").set_index("GEOID").area
    assert np.allclose(area_b.sort_index(), area_c.sort_index(), rtol=1e-6)


def test_graph_connected_and_tract_graph_matches_dissolved_tracts(geo):
    adj = block_adjacency(geo)
    assert adj.n_components() == 1
    tracts = unit_adjacency(geo, "tract")
    assert tracts.n_components() == 1
    # every tract and block group is one connected piece of the block graph
    for level in ("county", "tract", "block group"):
        assert (adj.n_components(geo.leaf_unit_index(level)) == 1).all(), level
    direct = rook_adjacency(geo.units("tract"))
    assert np.allclose(direct.area, tracts.area, rtol=1e-9)
    # snapping shared edges to a 1 cm grid moves perimeters by centimetres on tens of kilometres
    assert np.allclose(direct.perimeter, tracts.perimeter, rtol=1e-5)
    assert {tuple(e) for e in direct.edges} == {tuple(e) for e in tracts.edges}


def test_deterministic_by_seed_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path))
    cty = small_counties()
    a = load_georgia_blocks(seed=5, counties=cty, n_blocks=600)
    assert any((tmp_path / "districts").iterdir())
    b = load_georgia_blocks(seed=5, counties=cty, n_blocks=600)
    c = synthesize_blocks(cty, seed=5, n_blocks=600)
    d = synthesize_blocks(cty, seed=6, n_blocks=600)
    assert a.blocks["GEOID"].tolist() == b.blocks["GEOID"].tolist() == c["GEOID"].tolist()
    assert (a.blocks["total"].to_numpy() == c["total"].to_numpy()).all()
    assert a.blocks.geometry.geom_equals_exact(c.geometry, 1e-9).all()
    assert not np.array_equal(c["total"].to_numpy(), d["total"].to_numpy()[: len(c)]) or len(c) != len(d)
    assert a.synthetic_below_county is True


def test_grid_positions_follow_tree_order():
    rows, cols, side = grid_positions((4, 4, 4))
    assert side == 8
    # the first tract (16 blocks) is the top-left 4x4 square
    assert set(zip(rows[:16], cols[:16])) == {(r, c) for r in range(4) for c in range(4)}
    g = synthetic_grid((16, 4, 4), seed=1)
    assert len(g.blocks) == 256 and g.hierarchy.depth == 4
    assert block_adjacency(g).edges.shape[0] == 2 * 16 * 15
    assert block_adjacency(g).n_components() == 1
