"""Plans: the spec's Greedy and Square fixtures on the (484,4,25) grid, ReCom contiguity and tolerance, CSV plans."""
import io

import numpy as np
import pytest

from core.geography.adjacency import block_adjacency, unit_adjacency
from core.geography.grid import grid_hierarchy, grid_positions, synthetic_grid
from core.census.analytic import fragmentation
from core.districts.metrics import district_metrics
from core.districts.noise import ensemble_coefficients
from core.districts.plans import greedy_plan, recom_ensemble, square_district
from core.geography.assignments import plan_from_csv, plan_to_frame
from core.districts.generators import GENERATORS, GreedyParams, SquareParams, draw_square

DALLAS = (484, 4, 25)


@pytest.fixture(scope="module")
def dallas():
    return grid_hierarchy(DALLAS), *grid_positions(DALLAS)


@pytest.fixture(scope="module")
def small_grid():
    return synthetic_grid((16, 4, 4), seed=2)


def test_greedy_fragmentation_matches_paper_value(dallas):
    h, _, _, _ = dallas
    labels = greedy_plan(h, 4)
    assert np.bincount(labels).tolist() == [12_100] * 4
    assert np.allclose(fragmentation(h, leaf_labels=labels), 90.75)           # Cohen et al. 2021, §6
    rng = np.random.default_rng(7)
    frags = np.concatenate([fragmentation(h, leaf_labels=greedy_plan(h, 4, rng)) for _ in range(3)])
    assert frags.mean() <= 98                                               # Theorem 6 upper bound


def test_square_expected_fragmentation_is_exact_444_475(dallas):
    h, rows, cols, side = dallas
    assert side == 220
    s = 110
    # the tree is periodic with the 10-block tract side, so Frag depends on the offsets mod 10 only;
    # offsets 0..110 give residue 0 twelve times and every other residue eleven times
    res = np.arange(10)
    masks = np.column_stack([(rows >= r) & (rows < r + s) & (cols >= c) & (cols < c + s) for r in res for c in res])
    frag = ensemble_coefficients(h, masks)[1:].sum(axis=0).reshape(10, 10)
    weight = np.where(res == 0, 12, 11)
    expected = (weight[:, None] * weight[None, :] * frag).sum() / 111 ** 2
    assert expected == pytest.approx(444.475, abs=0.01)
    assert frag.min() == pytest.approx(90.75) and frag.max() == pytest.approx(619.29, abs=0.01)
    # the random generator places squares uniformly: its sample mean agrees with the exact value
    rng = np.random.default_rng(3)
    draws = np.column_stack([square_district(rows, cols, side, 4, rng) for _ in range(128)])
    f = ensemble_coefficients(h, draws)[1:].sum(axis=0)
    assert np.all(draws.sum(axis=0) == s * s)
    assert abs(f.mean() - 444.475) < 4 * f.std() / np.sqrt(f.shape[0])


def test_square_district_rejects_impossible_k(dallas):
    _, rows, cols, side = dallas
    with pytest.raises(ValueError, match="equal squares"):
        square_district(rows, cols, side, 3, np.random.default_rng(0))


def test_recom_plans_are_contiguous_and_within_tolerance(small_grid):
    geo = small_grid
    adj = unit_adjacency(geo, "block group")
    units = geo.units("block group")
    tol = 0.1
    plans = recom_ensemble(adj, units["total"].to_numpy(), 4, tol, steps=30, thin=10, seed=5, use_cache=False)
    assert plans.shape == (3, len(units))
    for unit_labels in plans:
        labels = unit_labels[geo.leaf_unit_index("block group")]
        m = district_metrics(geo.hierarchy, block_adjacency(geo), geo.blocks["total"].to_numpy(),
                             geo.blocks["county"].to_numpy(), labels)
        assert m["contiguous"].all()
        assert (m["deviation_pct"].abs() <= 100 * tol + 1e-9).all()
        assert m["population"].sum() == geo.blocks["total"].sum()
    # same seed, same chain
    again = recom_ensemble(adj, units["total"].to_numpy(), 4, tol, steps=30, thin=10, seed=5, use_cache=False)
    assert np.array_equal(plans, again)


def test_recom_refuses_bad_inputs(small_grid):
    adj = unit_adjacency(small_grid, "tract")
    pop = small_grid.units("tract")["total"].to_numpy()
    with pytest.raises(ValueError, match="at least 2 districts"):
        recom_ensemble(adj, pop, 1, use_cache=False)
    with pytest.raises(ValueError, match="tolerance"):
        recom_ensemble(adj, pop, 4, tolerance=0.7, use_cache=False)
    with pytest.raises(ValueError, match="more than a district may hold"):
        recom_ensemble(adj, pop, 15, tolerance=0.01, use_cache=False)
    with pytest.raises(ValueError, match="keep at most 200"):
        recom_ensemble(adj, pop, 4, tolerance=0.1, steps=20_000, thin=1, use_cache=False)


def square_tiling(geo, k):
    return draw_square(SquareParams(), geo, k, 0)[0]


def test_every_generator_of_the_registry(small_grid):
    geo = small_grid
    greedy = GENERATORS["greedy"].build(GreedyParams(2))(geo, 4, 0)
    assert greedy.shape == (2, 256) and all(np.bincount(p).tolist() == [64] * 4 for p in greedy)
    square = GENERATORS["square"].build()(geo, 4, 0)
    assert np.array_equal(square[0], square_tiling(geo, 4))
    assert np.bincount(square[0]).tolist() == [64] * 4
    # a 2x2 tiling of a 16x16 grid gives quadrants of 4 whole tracts (of 16): only the tract level
    # contributes, 4 (1 - 1/4)^2 + 12 (1/4)^2 = 3 = n_1 (k-1)/k^2 (Theorem 6's first term, attained)
    assert np.allclose(fragmentation(geo.hierarchy, leaf_labels=square[0]), 3.0)
    disconn = GENERATORS["disconn"].build()(geo, 4, 0)
    assert disconn.shape == (4, 256) and all(np.unique(p).size == 4 for p in disconn)
    with pytest.raises(ValueError, match="square number"):
        square_tiling(geo, 3)
    with pytest.raises(ValueError, match="Unknown districting generator"):
        GENERATORS["nope"]
    with pytest.raises(ValueError, match="Greedy plans"):
        GreedyParams(0)


def test_csv_plan_round_trip_and_bad_files(small_grid):
    geoids = small_grid.blocks["GEOID"].to_numpy()
    labels = square_tiling(small_grid, 4)
    text = plan_to_frame(geoids, labels).sample(frac=1, random_state=0).to_csv(index=False).encode()
    assert np.array_equal(plan_from_csv(io.BytesIO(text), geoids), labels)
    frame = plan_to_frame(geoids, labels)
    bad = {
        "columns GEOID and district": frame.rename(columns={"district": "zone"}),
        "more than once": frame.assign(GEOID=np.concatenate([geoids[:-1], geoids[:1]])),
        "not blocks of this geography": frame.assign(GEOID=np.concatenate([geoids[:-1], ["X" * 9]])),
        "have no district in the plan": frame.iloc[:-3],
    }
    for message, df in bad.items():
        with pytest.raises(ValueError, match=message):
            plan_from_csv(io.BytesIO(df.to_csv(index=False).encode()), geoids)
