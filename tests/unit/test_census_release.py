"""The release action: OpenDP's samplers, one recorded spend per level, nothing exact in what leaves."""
import numpy as np
import pytest

from core.census import Allocation, release_noisy_counts
from core.census.geography_data import stylised_geography
from core.census.release import can_release


def _geo():
    return stylised_geography((3, 4), seed=0)


def test_release_draws_every_level_and_records_its_spends():
    geo = _geo()
    alloc = Allocation(geo.hierarchy.level_names, (0.3, 0.3, 0.4), "epsilon", "geometric")
    out = release_noisy_counts(alloc, geo)
    h = geo.hierarchy
    per_level = out.counts["level"].value_counts()
    assert [per_level[name] for name in h.level_names] == h.level_sizes().tolist()   # every unit of every level
    assert out.counts["count"].dtype == np.int64                              # published: whole people
    assert out.measurements["noisy measurement (raw)"].dtype == np.int64      # integer mechanism
    assert len(out.ledger()) == 3 and out.ledger().total("epsilon") == pytest.approx(1.0)
    assert "epsilon = 1" in out.statement()
    true = geo.hierarchy.aggregate(geo.leaf_counts)
    assert not np.array_equal(out.measurements["noisy measurement (raw)"].to_numpy(), true)   # noise was added
    assert set(out.counts.columns) == {"level", "unit", "count"}             # no exact counts leave
    assert set(out.measurements.columns) == {"level", "unit", "noisy measurement (raw)"}


def test_release_is_not_reproducible_by_seed_and_refuses_mechanisms_without_a_secure_sampler():
    geo = _geo()
    alloc = Allocation(geo.hierarchy.level_names, (0.3, 0.3, 0.4), "epsilon", "laplace")
    a = release_noisy_counts(alloc, geo).measurements["noisy measurement (raw)"].to_numpy()
    b = release_noisy_counts(alloc, geo).measurements["noisy measurement (raw)"].to_numpy()
    assert not np.array_equal(a, b)
    gg = Allocation(geo.hierarchy.level_names, (0.3, 0.3, 0.4), "epsilon", "generalized_gaussian", 2.0, 1e-6)
    assert not can_release(gg)
    with pytest.raises(ValueError, match="no secure sampler"):
        release_noisy_counts(gg, geo)
    other = Allocation(("a", "b"), (0.5, 0.5), "epsilon", "laplace")
    with pytest.raises(ValueError, match="other levels"):
        release_noisy_counts(other, geo)
