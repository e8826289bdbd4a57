"""The study layer the page calls: generators for ensembles, units drawn on the map, district shapes."""
import numpy as np
import pytest

from core.geography.grid import synthetic_grid
from core.districts.noise import NoiseConfig
from core.districts.study import (PlanConfig, display_values, district_shapes, district_table, ensemble_generators,
                                  ensemble_metrics, make_plans)


@pytest.fixture(scope="module")
def grid():
    return synthetic_grid((16, 4, 4), seed=8)


def test_ensemble_generators_on_a_grid(grid):
    cfg = PlanConfig("square", k=4)
    plans = make_plans(grid, cfg)
    gens, skipped = ensemble_generators(grid, cfg, plans, n_square=10, extra_units=("block group", "tract"))
    assert gens["Square tiling"] is plans
    assert gens["Greedy"].shape == (4, 256)
    assert gens["Square (random)"].shape == (256, 10) and (gens["Square (random)"].sum(axis=0) == 64).all()
    assert gens["ReCom (block groups)"].shape[1] == 256
    # 16 tracts into 4 districts within 5% rarely balance; if not, the reason is reported rather than raised
    assert ("ReCom (tracts)" in gens) != ("ReCom on tracts" in skipped)


def test_display_values_and_shapes(grid):
    labels = make_plans(grid, PlanConfig("greedy", k=4, steps=10, thin=10))[0]
    out = district_table(grid, labels, NoiseConfig((0.25,) * 4, runs=3))
    tracts = display_values(grid, "tract", labels, out.table, out.block_mean_error)
    assert len(tracts) == 16 and not tracts["split"].any()      # greedy from label 0 keeps tracts whole
    assert np.isclose(tracts["mean_block_error"].sum(), out.block_mean_error.sum())
    blocks = display_values(grid, "block", labels, out.table, out.block_mean_error)
    assert (blocks["district"].to_numpy() == labels + 1).all()
    shapes = district_shapes(grid, labels, out.table)
    assert sorted(shapes["district"]) == [1, 2, 3, 4]
    area = shapes.to_crs("EPSG:5070").area.sum()
    assert area == pytest.approx(grid.blocks.to_crs("EPSG:5070").area.sum(), rel=1e-6)
    summary = ensemble_metrics(grid, labels[None, :])
    assert summary.loc[0, "all_contiguous"] and summary.loc[0, "split_counties"] == 1


def test_disconn_districts_hit_the_target_and_fragment_more_on_blocks(grid):
    from core.census.analytic import fragmentation
    cfg = PlanConfig("square", k=4, tolerance=0.05, seed=3)
    gens, skipped = ensemble_generators(grid, cfg, make_plans(grid, cfg), disconn_units=("tract", "block"),
                                        n_disconn=12)
    assert not skipped
    pop = grid.blocks["total"].to_numpy()
    ideal = pop.sum() / 4
    for name in ("Disconn (tracts)", "Disconn (blocks)"):
        masks = gens[name]
        assert masks.shape == (256, 12)
        sizes = pop @ masks
        assert (np.abs(sizes / ideal - 1) <= 0.05 + 1e-12).all()
    # tract Disconn keeps whole tracts; block Disconn cuts the hierarchy far more (Thm 2's Frag)
    tract_of = grid.leaf_unit_index("tract")
    whole = [np.unique(tract_of[m]).size * 16 == m.sum() for m in gens["Disconn (tracts)"].T]
    assert all(whole)
    frag = {n: np.mean([fragmentation(grid.hierarchy, m) for m in gens[n].T]) for n in ("Disconn (tracts)", "Disconn (blocks)")}
    assert frag["Disconn (blocks)"] > 2 * frag["Disconn (tracts)"]


def test_disconn_reports_an_impossible_target():
    from core.districts.plans import disconn_district
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="No Disconn district"):
        disconn_district(np.array([100.0, 100.0, 100.0]), 150.0, 0.01, rng)
    with pytest.raises(ValueError, match="fewer people"):
        disconn_district(np.array([10.0, 10.0]), 100.0, 0.05, rng)
    picked = disconn_district(np.array([40.0, 60.0, 50.0, 50.0]), 100.0, 0.0, rng)
    assert np.isclose(np.array([40.0, 60.0, 50.0, 50.0])[picked].sum(), 100.0)
