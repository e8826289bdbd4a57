"""Noise on districts: analytic and simulated sd agree, invariants of the per-district table, ensemble line."""
import numpy as np
import pytest

from core.census.analytic import preset_shares
from core.geography.grid import synthetic_grid
from core.districts.noise import NoiseConfig, ensemble_study, equal_split_line, sd_interval
from core.districts.plans import greedy_plan
from core.districts.generators import SquareParams, draw_square
from core.districts.plans import square_labels
from core.districts.workflow import district_tables, noisy_block_errors


def district_noise(geo, labels, config):
    """Per-district table and per-run errors of one plan, as the study's run computes them."""
    return district_tables(geo, np.asarray(labels)[None, :], noisy_block_errors(geo, config), config, 5.0)


def square_tiling(geo, k):
    return draw_square(SquareParams(), geo, k, 0)[0]


def random_squares(geo, k, n, seed):
    rows, cols = geo.blocks["row"].to_numpy(), geo.blocks["col"].to_numpy()
    return square_labels(rows, cols, int(rows.max()) + 1, k, n, np.random.default_rng(seed))


@pytest.fixture(scope="module")
def grid():
    return synthetic_grid((16, 4, 4), seed=4)


def test_analytic_and_simulated_sd_agree_within_interval(grid):
    labels = greedy_plan(grid.hierarchy, 8, np.random.default_rng(1))
    t, _ = district_noise(grid, labels, NoiseConfig((0.1, 0.2, 0.3, 0.4), runs=1500, seed=11))
    # pooled over the 8 districts (12,000 draws) the chi-square interval holds; per district the errors are
    # sums of few Laplace draws (heavy tails), for which that normal-theory interval is too narrow, so each
    # district is held to 10% instead
    pooled = np.sqrt(np.mean(t["empirical_sd"].to_numpy() ** 2))
    lo, hi = sd_interval(np.array([pooled]), 8 * 1500, level=0.999)
    assert lo[0] <= t["analytic_toydown_sd"].iloc[0] <= hi[0]
    assert np.allclose(t["empirical_sd"], t["analytic_toydown_sd"], rtol=0.1)
    # ToyDown is unbiased: the mean error is within 4 standard errors of zero in every district
    mean_err = t["mean_noisy_population"] - t["population"]
    assert (mean_err.abs() < 4 * t["analytic_toydown_sd"] / np.sqrt(1500)).all()


def test_equal_split_closed_form_for_whole_tract_quadrants(grid):
    """Quadrants of 4 whole tracts of 16: w1 = 1/4, Frag = 3, so Var = 8 d^2/eps^2 (1/16 + 3) = 392 at eps 1."""
    t, _ = district_noise(grid, square_tiling(grid, 4), NoiseConfig((0.25,) * 4, runs=4, seed=0))
    assert np.allclose(t["analytic_toydown_sd"], np.sqrt(392.0))
    assert equal_split_line(3.0, 1 / 16, 4, 1.0) == pytest.approx(392.0)


def test_balanced_on_noisy_deviation_averages_to_zero_and_topdown_keeps_state_total(grid):
    _, runs = district_noise(grid, square_tiling(grid, 4),
                             NoiseConfig((0.25,) * 4, algorithm="topdown_lite", runs=6, seed=3))
    # the true populations of a plan balanced on noisy counts still add up to the true total
    assert np.allclose(runs.groupby("run")["balanced_on_noisy_dev_pct"].sum(), 0.0, atol=1e-9)
    # TopDown-lite holds the top-level total exactly, so district errors cancel in every run
    assert np.allclose(runs.groupby("run")["error"].sum(), 0.0, atol=1e-6)
    assert (runs["noisy_population"] == np.round(runs["noisy_population"])).all()


def test_district_table_joins_metrics_and_group_share(grid):
    labels = square_tiling(grid, 4)
    config = NoiseConfig((0.25,) * 4, runs=3)
    errors = noisy_block_errors(grid, config)
    t, runs = district_tables(grid, labels[None, :], errors, config, 5.0)
    b = grid.blocks
    assert t["population"].sum() == b["total"].sum()
    black = np.bincount(labels, weights=b["black"].to_numpy())
    assert np.allclose(t["black_share_pct"], 100 * black / t["population"])
    assert errors.shape == (3, len(b))
    # a district's noisy population is the sum of its blocks' noisy counts, run by run
    per_run = np.stack([np.bincount(labels, weights=e, minlength=4) for e in errors])
    assert np.allclose(runs["error"].to_numpy().reshape(3, 4), per_run)


def test_ensemble_analytic_variance_is_the_equal_split_line(grid):
    h, pop = grid.hierarchy, grid.blocks["total"].to_numpy()
    gens = {"Greedy": np.vstack([greedy_plan(h, 4, np.random.default_rng(i)) for i in range(2)]),
            "Square": random_squares(grid, 4, 20, seed=1)}
    study = ensemble_study(h, pop, gens, 1.0, splits=("equal", "block-heavy"), runs=5, seed=2)
    assert set(study["generator"]) == {"Greedy", "Square"}
    assert len(study) == 2 * (8 + 20)
    eq = study[study["split"] == "equal"]
    line = equal_split_line(eq["fragmentation"].to_numpy(), eq["w1_squared"].to_numpy(), 4, 1.0)
    assert np.allclose(eq["analytic_variance"], line)
    # square districts cut across tracts more than greedy ones
    mean_frag = study.groupby("generator")["fragmentation"].mean()
    assert mean_frag["Square"] > mean_frag["Greedy"]
    assert np.allclose(preset_shares("equal", 4), 0.25)


def test_bad_noise_settings_raise(grid):
    with pytest.raises(ValueError, match="Unknown algorithm"):
        NoiseConfig((0.25,) * 4, algorithm="exact")
    with pytest.raises(ValueError, match="Runs must be a whole number between"):
        NoiseConfig((0.25,) * 4, runs=1)
    with pytest.raises(ValueError, match="one budget per level"):
        district_noise(grid, square_tiling(grid, 4), NoiseConfig((0.2,) * 5, runs=2))
    with pytest.raises(ValueError, match="budget must be a positive number"):
        district_noise(grid, square_tiling(grid, 4), NoiseConfig((0.5, 0.5, 0.0, 0.5), runs=2))


def test_a_splits_runs_do_not_depend_on_the_other_splits_studied(grid):
    """Each split's noisy runs are keyed by its name: studying block-heavy alone or after the equal split gives
    the same errors."""
    h, pop = grid.hierarchy, grid.blocks["total"].to_numpy()
    gens = {"Greedy": greedy_plan(h, 4, np.random.default_rng(0))[None, :]}
    both = ensemble_study(h, pop, gens, 1.0, splits=("equal", "block-heavy"), runs=3, seed=2)
    alone = ensemble_study(h, pop, gens, 1.0, splits=("block-heavy",), runs=3, seed=2)
    pick = both[both["split"] == "block-heavy"].reset_index(drop=True)
    assert np.array_equal(pick["mean_abs_error"].to_numpy(), alone["mean_abs_error"].to_numpy())


def test_noising_algorithms_and_generators_are_whole_plugins():
    """A noising algorithm is a registry Spec whose factory gives the noise function (no side label table),
    and a generator's need for the grid county is part of its Spec."""
    from core.districts import ALGORITHMS, GENERATORS
    from core.districts.generators import GRID_ONLY
    assert ALGORITHMS.labels()["topdown_lite"].startswith("TopDown-lite")
    with pytest.raises(ValueError, match="choose one of"):
        NoiseConfig((0.5, 0.5), algorithm="bogus")
    assert GRID_ONLY == tuple(k for k in GENERATORS if GENERATORS[k].grid_only) == ("greedy", "square")
