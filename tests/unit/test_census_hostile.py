"""Hostile numbers in the census, districts and geography areas: each is refused with a ValueError that
says what to change, before any array is allocated or any run starts (no MemoryError, ZeroDivisionError,
silent int64 wrap-around or NaN result)."""
from __future__ import annotations

import numpy as np
import pytest

from core.census.allocation import Allocation
from core.census.budget_plan import BudgetPlan, figure2_curves
from core.census.geography_data import GeographyData
from core.census.mechanism_comparison import MechanismSweepPlan
from core.census.public_info import WemPlan, wem_comparison
from core.census.toydown import check_budgets, topdown_lite, toydown
from core.districts.ecological import ecological_study
from core.districts.generators import GENERATORS
from core.districts.noise import NoiseConfig, ensemble_study
from core.districts.plans import disconn_masks, square_labels
from core.districts.workflow import DistrictPlan, EnsemblePlan
from core.geography.blocks import geography_from_blocks
from core.geography.grid import synthetic_grid
from core.geography.hierarchy import Hierarchy, check_counts
from core.privacy.mechanisms import AnalyticGaussianParams

TREE = Hierarchy.homogeneous([3, 4])                    # 12 leaves
ONES = np.ones(12)


@pytest.fixture(scope="module")
def grid():
    return synthetic_grid((4, 4, 4), seed=0)


def _with_nan(values, bad=np.nan):
    out = np.asarray(values, dtype=float).copy()
    out[0] = bad
    return out


# ------------------------------------------------------------- products of user integers overflow int64
@pytest.mark.parametrize("make, says", [
    # 2**32 x 2**32 is 0 in int64: the tree used to pass the leaf cap and then ask for 32 GiB
    (lambda: Hierarchy.homogeneous([2**32, 2**32]), "18,446,744,073,709,551,616 leaves"),
    (lambda: figure2_curves((2**40, 2**40)), "use smaller fan-outs"),
    (lambda: synthetic_grid((2**32, 2**32, 4)), "use smaller fan-outs"),
    (lambda: BudgetPlan(fanouts=(2**32, 2**32)), "from 1 to 100,000"),
    (lambda: DistrictPlan(grid_fanouts=(2**62, 2**62, 4)), "between 1 and 1,000"),
    # leaf counts whose total wraps around int64 (2**62 x 12 leaves)
    (lambda: TREE.aggregate(np.full(12, 2**62, dtype=np.int64)), "more than an int64 can hold"),
    (lambda: toydown(TREE, np.full(12, 2**62, dtype=np.int64), [1, 1, 1], rng=np.random.default_rng(0)),
     "more than an int64 can hold"),
    (lambda: wem_comparison(np.array([2**62, 2**62]), WemPlan()), "use smaller counts"),
])
def test_products_and_totals_that_overflow_int64_are_refused(make, says):
    with pytest.raises(ValueError, match=says):
        make()


# ------------------------------------------------------------- NaN or infinite counts reaching a run
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("make", [
    lambda bad: TREE.aggregate(_with_nan(ONES, bad)),
    lambda bad: toydown(TREE, _with_nan(ONES, bad), [1, 1, 1], rng=np.random.default_rng(0)),
    lambda bad: topdown_lite(TREE, _with_nan(ONES, bad)[:, None], [1, 1, 1], rng=np.random.default_rng(0)),
    lambda bad: GeographyData(TREE, _with_nan(ONES, bad), "a script's counts"),
    lambda bad: wem_comparison(_with_nan([3, 4], bad), WemPlan()),
    lambda bad: check_counts(_with_nan(ONES, bad), "Counts"),
], ids=["aggregate", "toydown", "topdown_lite", "geography", "wem", "check_counts"])
def test_nan_or_infinite_counts_are_refused_before_a_run(make, bad):
    with pytest.raises(ValueError, match="finite numbers.*Fill or drop them"):
        make(bad)


@pytest.mark.parametrize("column", ["total", "vap", "black", "bvap"])
@pytest.mark.parametrize("bad, says", [(np.nan, "must be finite numbers"), (np.inf, "must be finite numbers"),
                                       (-5, "must not be negative")])
def test_block_files_with_nan_infinite_or_negative_counts_are_refused(grid, column, bad, says):
    blocks = grid.blocks.copy()
    blocks[column] = blocks[column].astype(float)
    blocks.loc[0, column] = bad
    with pytest.raises(ValueError, match=f"Block counts \\({column}\\) {says}"):
        geography_from_blocks(blocks, grid.counties, True, "hostile blocks")


def test_nan_populations_never_reach_the_ensemble_or_the_regression(grid):
    pop = _with_nan(grid.blocks["total"].to_numpy())
    labels = np.zeros((1, len(grid.blocks)), dtype=np.int64)
    with pytest.raises(ValueError, match="Block populations must be finite"):
        ensemble_study(grid.hierarchy, pop, {"a": labels}, 1.0, ("equal",), 2)
    with pytest.raises(ValueError, match="Black voters' support must be a finite number"):
        ecological_study(grid.hierarchy, grid.blocks, NoiseConfig((0.25,) * 4, runs=2), 0, float("nan"), 0.5)


# ------------------------------------------------------------- budgets near the float maximum, absurd deltas
@pytest.mark.parametrize("make, says", [
    (lambda: BudgetPlan(total=1e308), "total budget must be a positive finite number"),
    (lambda: BudgetPlan(total=float("inf")), "total budget must be a positive finite number"),
    (lambda: BudgetPlan(sensitivity=1e308), "sensitivity must be a positive finite number"),
    (lambda: BudgetPlan(target_weights=(1e308, 1.0, 1.0, 1.0)), "at most 1,000,000"),
    (lambda: Allocation(("a", "b"), (1e308, 1.0), "epsilon", "laplace"), "at most 1e\\+06"),
    (lambda: NoiseConfig((1e308,) * 4), "up to 1e6"),
    (lambda: MechanismSweepPlan(epsilons=(1e308,)), "at most 100"),
    (lambda: WemPlan(epsilon=1e308), "at most 10"),
    # called from a script with epsilon 1e308 every scale underflows to 0 and the counts read as exact
    (lambda: check_budgets(TREE, [1e308, 1.0, 1.0]), "at most 1e\\+06"),
    (lambda: toydown(TREE, ONES, [1e308, 1e308, 1e308], rng=np.random.default_rng(0)), "at most 1e\\+06"),
    (lambda: figure2_curves((10, 10), total=1e308), "total budget must be a positive finite number"),
    (lambda: ensemble_study(TREE, ONES.astype(int), {"a": np.zeros((1, 12), dtype=int)}, 1e308, ("equal",), 2),
     "up to 1e6"),
])
def test_budgets_near_the_float_maximum_are_refused(make, says):
    with pytest.raises(ValueError, match=says):
        make()


@pytest.mark.parametrize("make", [
    lambda d: BudgetPlan(unit="rho", mechanism="gaussian", sensitivity=1.4142, delta=d),
    lambda d: BudgetPlan(mechanism="analytic_gaussian", mechanism_params=AnalyticGaussianParams(), delta=d),
    lambda d: Allocation(("a", "b"), (0.5, 0.5), "rho", "gaussian", 1.4142, d),
    lambda d: MechanismSweepPlan(delta=d),
], ids=["budget rho", "budget analytic gaussian", "allocation", "mechanism sweep"])
@pytest.mark.parametrize("delta", [1e-300, 0.0, -1e-6, 1.5, float("nan"), 1e308])
def test_absurd_deltas_are_refused(make, delta):
    with pytest.raises(ValueError, match="delta"):
        make(delta)


# ------------------------------------------------------------- zero-size simulation settings
@pytest.mark.parametrize("make, says", [
    (lambda g: NoiseConfig((0.25,) * 4, runs=0), "Runs must be a whole number between 2"),
    (lambda g: DistrictPlan(k=0), "Districts \\(k\\) must be between 2"),
    (lambda g: EnsemblePlan(runs=0), "Runs per split must be between 2"),
    (lambda g: EnsemblePlan(n_disconn=0), "Disconn districts must be between 1"),
    (lambda g: MechanismSweepPlan(k=0), "k \\(the number of overlapping queries\\)"),
    (lambda g: WemPlan(runs=0), "WEM runs"),
    (lambda g: BudgetPlan(fig2_fanouts=(0, 10)), "Figure 2 fan-out"),
    (lambda g: BudgetPlan(fanouts=(0, 4)), "from 1 to 100,000"),
    (lambda g: Hierarchy.homogeneous([0, 3]), "whole numbers of at least 1"),
    # 0 districts, blocks or trials handed straight to core (a script): no division by zero
    (lambda g: synthetic_grid((0, 4, 4)), "whole numbers of at least 1"),
    (lambda g: GENERATORS["greedy"].build()(g, 0, 0), "number of districts \\(k\\)"),
    (lambda g: GENERATORS["square"].build()(g, 0, 0), "number of districts \\(k\\)"),
    (lambda g: GENERATORS["disconn"].build()(g, 0, 0), "number of districts \\(k\\)"),
    (lambda g: GENERATORS["recom"].build()(g, 0, 0), "number of districts \\(k\\)"),
    (lambda g: square_labels(g.blocks["row"].to_numpy(), g.blocks["col"].to_numpy(), 16, 0, 5,
                             np.random.default_rng(0)), "Square districts per tiling"),
    (lambda g: square_labels(g.blocks["row"].to_numpy(), g.blocks["col"].to_numpy(), 16, 4, 0,
                             np.random.default_rng(0)), "number of Square districts"),
    (lambda g: disconn_masks(np.array([10, 20, 30]), np.array([0, 1, 2, 2]), 20.0, 0.05, 0,
                             np.random.default_rng(0)), "number of Disconn districts"),
    (lambda g: disconn_masks(np.array([0, 0, 0]), np.array([0, 1, 2, 2]), 0.0, 0.05, 3,
                             np.random.default_rng(0)), "holds no people"),
    (lambda g: geography_from_blocks(g.blocks.iloc[:0], g.counties, True, "empty"), "0 blocks"),
    (lambda g: ensemble_study(g.hierarchy, g.blocks["total"].to_numpy(), {}, 1.0, ("equal",), 2),
     "at least one generator"),
    (lambda g: wem_comparison(np.array([], dtype=np.int64), WemPlan()), "at least one count"),
])
def test_zero_size_settings_are_refused(grid, make, says):
    with pytest.raises(ValueError, match=says):
        make(grid)


def test_the_budget_page_may_still_skip_its_toydown_runs():
    """0 ToyDown runs is the page's documented way to skip the simulation, not a hostile zero."""
    assert BudgetPlan(runs=0).runs == 0
