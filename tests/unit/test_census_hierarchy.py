"""Hierarchy construction and aggregation."""
import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import box

from core.geography.hierarchy import Hierarchy


def test_homogeneous_sizes_and_csr():
    h = Hierarchy.homogeneous([3, 4, 5])
    assert h.depth == 4
    assert h.level_sizes().tolist() == [1, 3, 12, 60]
    assert h.n_nodes == 76 and h.n_leaves == 60
    # children of every node are a contiguous block whose parent is that node
    for v in range(h.level_offsets[-2]):
        kids = np.arange(h.child_ptr[v], h.child_ptr[v + 1])
        assert np.all(h.parent[kids] == v)
    assert h.n_children[h.nodes_at(1)].tolist() == [4, 4, 4]
    assert np.all(h.level[h.leaf_nodes] == 3)


def test_aggregate_sums_every_level_and_columns():
    h = Hierarchy.homogeneous([2, 3])
    leaf = np.arange(12).reshape(6, 2)
    agg = h.aggregate(leaf)
    assert agg.shape == (9, 2)
    assert agg[0].tolist() == leaf.sum(axis=0).tolist()
    assert agg[1].tolist() == leaf[:3].sum(axis=0).tolist()
    assert agg[2].tolist() == leaf[3:].sum(axis=0).tolist()


def test_from_unit_ids_keeps_row_order_and_local_ids():
    # tract codes repeat across counties; rows are shuffled
    county = np.array(["13003", "13001", "13001", "13003", "13001"])
    tract = np.array(["000100", "000100", "000200", "000100", "000100"])
    block = np.array(["1001", "1002", "1001", "1002", "1001"])
    h = Hierarchy.from_unit_ids([county, tract, block], ["state", "county", "tract", "block"])
    assert h.depth == 4
    assert h.level_sizes().tolist() == [1, 2, 3, 5]
    counts = np.array([10, 20, 30, 40, 50])
    agg = h.aggregate(counts)
    assert agg[0] == 150
    # county 13001 holds rows 1, 2, 4; it sorts first
    assert agg[1] == 100 and agg[2] == 50
    assert h.label(h.leaf_nodes[1]) == "1002"
    assert np.all(agg[h.leaf_nodes] == counts)
    assert h.ancestors_at(1).tolist() == [2, 1, 1, 2, 1]


def test_from_unit_ids_rejects_duplicate_leaves_and_bad_names():
    with pytest.raises(ValueError, match="distinct"):
        Hierarchy.from_unit_ids([np.array(["a", "a"]), np.array(["x", "x"])])
    with pytest.raises(ValueError, match="level names"):
        Hierarchy.from_unit_ids([np.array(["a", "b"])], ["only", "too", "many"])


def test_from_geoids_reads_census_prefixes():
    geoids = ["130010001001001", "130010001002000", "130010001001000", "130030002001000", "010010201001000"]
    h = Hierarchy.from_geoids(geoids)
    assert h.level_names == ("nation", "state", "county", "tract", "block group", "block")
    # 2 states, 3 counties, 3 tracts, 4 block groups (first digit of the block code), 5 blocks
    assert h.level_sizes().tolist() == [1, 2, 3, 3, 4, 5]
    agg = h.aggregate(np.array([1, 2, 4, 8, 16]))
    assert agg[0] == 31
    assert agg[h.level_slice(1)].tolist() == [16, 15]        # Alabama sorts first
    assert agg[h.leaf_nodes].tolist() == [1, 2, 4, 8, 16]   # leaves keep the input order
    short = Hierarchy.from_geoids(["1300100", "1300101", "1300200"], cuts=(5, 7), level_names=["county", "tract"])
    assert short.level_sizes().tolist() == [1, 2, 3] and short.level_names[0] == "root"


def test_from_geoids_rejects_bad_input():
    with pytest.raises(ValueError, match="15 characters"):
        Hierarchy.from_geoids(["130010001001001", "13001000100100"])
    with pytest.raises(ValueError, match="increasing"):
        Hierarchy.from_geoids(["1300100"], cuts=(5, 5))
    with pytest.raises(ValueError, match="missing"):
        Hierarchy.from_geoids(["130010001001001", None])
    with pytest.raises(ValueError, match="distinct"):
        Hierarchy.from_geoids(["130010001001001", "130010001001001"])


def test_from_geodataframe():
    gdf = gpd.GeoDataFrame({"county": ["A", "A", "B"], "tract": ["1", "2", "1"], "pop": [5, 6, 7]},
                           geometry=[box(0, 0, 1, 1), box(1, 0, 2, 1), box(2, 0, 3, 1)], crs="EPSG:4326")
    h = Hierarchy.from_geodataframe(gdf, ["county", "tract"])
    assert h.level_names == ("root", "county", "tract")
    assert h.aggregate(gdf["pop"].to_numpy())[:3].tolist() == [18, 11, 7]
    with pytest.raises(ValueError, match="not in the table"):
        Hierarchy.from_geodataframe(pd.DataFrame({"a": [1]}), ["b"])
