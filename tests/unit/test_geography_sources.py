"""One list of geography sources and one Georgia loader, shared by the census and districts areas."""
import pytest

from core.census import geography_data
from core.districts import workflow
from core.geography import sources


def test_each_area_offers_a_subset_of_the_one_list_with_the_same_labels():
    for area in (geography_data.GEOGRAPHIES, workflow.GEOGRAPHIES):
        assert all(sources.GEOGRAPHIES[key] == label for key, label in area.items())
    assert list(geography_data.GEOGRAPHIES) == ["stylised", "georgia"]
    assert list(workflow.GEOGRAPHIES) == ["grid", "georgia", "upload"]


@pytest.mark.slow
def test_both_pages_read_the_same_georgia_and_know_it_is_cached():
    sources._GEORGIA.clear()            # an earlier test may hold one built under another cache folder
    blocks = workflow.build_geography("georgia", (), 0)
    assert sources.georgia_is_cached(0)
    census = geography_data.load_geography("georgia", (), 0)
    assert census.hierarchy is blocks.hierarchy                   # one copy, not a second cache
    assert (census.leaf_ids == blocks.blocks["GEOID"].to_numpy()).all()
    assert census.leaf_counts.sum() == int(blocks.blocks["total"].sum())
    sources._GEORGIA.clear()                                      # a new process: the blocks are on disk
    assert sources.georgia_is_cached(0)
    assert geography_data.georgia_is_cached(0) and geography_data.load_geography("georgia", (), 0).hierarchy.n_leaves \
        == blocks.hierarchy.n_leaves


def test_georgia_says_it_is_synthetic_below_the_county_on_both_pages():
    for area in (geography_data.GEOGRAPHIES, workflow.GEOGRAPHIES):
        assert "synthetic below the county" in area["georgia"]
