"""Published census counts: non-negative integers, every parent the sum of its children, free of budget."""
import itertools

import numpy as np
import pytest

from core.census import Allocation, release_noisy_counts
from core.census.geography_data import Hierarchy, stylised_geography
from core.census.release import COUNT, MEASUREMENT, post_process, release_tables


def _children_sum_to_parents(h: Hierarchy, x: np.ndarray) -> bool:
    return all(np.array_equal(h.sum_children(x, lvl), x[h.level_slice(lvl)]) for lvl in range(h.depth - 1))


def test_post_processing_is_whole_non_negative_and_consistent_at_every_level():
    h = Hierarchy.homogeneous((3, 4, 5))
    rng = np.random.default_rng(0)
    true = h.aggregate(rng.integers(0, 4, h.n_leaves))
    noisy = true + rng.laplace(0.0, 6.0, h.n_nodes)          # many small counts pushed below zero
    assert (noisy < 0).any() and not np.allclose(noisy, np.rint(noisy))
    out = post_process(h, noisy)
    assert out.dtype == np.int64 and (out >= 0).all()
    assert out[0] == max(0, int(np.rint(noisy[0])))         # the root: nearest non-negative whole number
    assert _children_sum_to_parents(h, out)


def test_post_processing_is_exact_when_the_noise_is_zero():
    h = Hierarchy.homogeneous((2, 3, 4))
    true = h.aggregate(np.random.default_rng(1).integers(0, 50, h.n_leaves))
    np.testing.assert_array_equal(post_process(h, true.astype(float)), true)


def test_children_are_the_nearest_non_negative_integer_vector_with_the_parents_sum():
    """Brute force over every non-negative integer vector summing to the parent (one parent, three children)."""
    h = Hierarchy.homogeneous((3,))
    for noisy in ([7.4, 2.6, -1.2, 0.7], [10.0, 4.5, 4.5, 4.5], [3.2, -2.0, 0.4, 5.9], [0.4, 1.3, 1.3, -0.2]):
        out = post_process(h, np.array(noisy))
        total = out[0]
        assert total == max(0, round(noisy[0]))
        y = np.array(noisy[1:])
        best = min(np.sum((np.array(c) - y) ** 2) for c in itertools.product(range(total + 1), repeat=3)
                   if sum(c) == total)
        assert out[1:].sum() == total
        assert np.sum((out[1:] - y) ** 2) == pytest.approx(best)


def test_a_negative_root_measurement_publishes_zeros_everywhere():
    h = Hierarchy.homogeneous((2, 2))
    out = post_process(h, np.array([-3.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(out, np.zeros(7, dtype=np.int64))


def test_post_processing_refuses_a_wrong_length_or_nan():
    h = Hierarchy.homogeneous((2,))
    with pytest.raises(ValueError, match="one noisy measurement per node"):
        post_process(h, np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        post_process(h, np.array([1.0, np.nan, 0.0]))


def test_tables_list_levels_top_down_with_the_raw_measurements_beside():
    h = Hierarchy.homogeneous((2, 2), ("state", "county", "tract"))
    noisy = np.array([9.6, 5.2, 3.9, 2.2, 2.1, -0.4, 4.4])
    counts, raw = release_tables(h, noisy)
    assert list(dict.fromkeys(counts["level"])) == ["state", "county", "tract"]
    assert list(counts["unit"]) == list(raw["unit"])
    np.testing.assert_array_equal(raw[MEASUREMENT], noisy)           # the raw numbers, unchanged
    c = counts[COUNT].to_numpy()
    assert c[0] == 10 and c[1] + c[2] == 10 and c[3] + c[4] == c[1] and c[5] + c[6] == c[2]


@pytest.mark.parametrize("mechanism", ["laplace", "geometric"])
def test_a_release_publishes_consistent_counts_and_spends_exactly_its_allocation(mechanism):
    geo = stylised_geography((3, 4), seed=0)
    h = geo.hierarchy
    alloc = Allocation(h.level_names, (0.2, 0.3, 0.5), "epsilon", mechanism)
    out = release_noisy_counts(alloc, geo)
    c = out.counts[COUNT].to_numpy()
    assert c.dtype == np.int64 and (c >= 0).all() and _children_sum_to_parents(h, c)
    assert list(dict.fromkeys(out.counts["level"])) == list(h.level_names)
    # post-processing adds no spend: the ledger is the allocation's, entry for entry
    assert out.ledger().to_frame().equals(alloc.ledger().to_frame())
    assert out.ledger().total("epsilon") == pytest.approx(1.0)
