"""ToyDown variants against TopDown-lite, and the allocation's ledger."""
import numpy as np
import pytest

from core.census.algorithm_comparison import AlgorithmPlan, compare_algorithms, simulate_types
from core.census.allocation import Allocation
from core.geography.hierarchy import Hierarchy


def test_types_keep_leaf_populations():
    h = Hierarchy.homogeneous([3, 4, 5])
    counts = np.random.default_rng(0).poisson(20, h.n_leaves)
    typed = simulate_types(h, counts, 4, np.random.default_rng(1))
    assert typed.shape == (h.n_leaves, 4)
    assert np.array_equal(typed.sum(axis=1), counts)


def test_topdown_lite_keeps_total_and_toydown_plain_has_negatives():
    h = Hierarchy.homogeneous([4, 5, 6])
    counts = np.random.default_rng(2).poisson(3, h.n_leaves)
    df = compare_algorithms(h, counts, [0.1] * h.depth, AlgorithmPlan(runs=2))
    by = df.groupby("algorithm")
    assert (by.get_group("TopDown-lite")["total error"] == 0).all()
    assert by.get_group("TopDown-lite")["share of negative cells"].max() == 0
    assert by.get_group("ToyDown non-negative integer")["share of negative cells"].max() == 0
    assert by.get_group("ToyDown (negatives allowed)")["share of negative cells"].max() > 0
    exact = compare_algorithms(h, counts, [0.1] * h.depth, AlgorithmPlan(runs=1, exact_level=1))
    top = exact[(exact.algorithm == "TopDown-lite") & exact.level.isin([h.level_names[0], h.level_names[1]])]
    assert (top["MAE of unit totals"] == 0).all()


def test_allocation_ledger_adds_levels():
    alloc = Allocation(("state", "county", "block"), (0.2, 0.3, 0.5), "epsilon", "laplace")
    book = alloc.ledger()
    assert book.total("epsilon") == pytest.approx(1.0)
    assert len(book.to_frame()) == 3
    rho = Allocation(("state", "block"), (0.1, 0.2), "rho", "gaussian", 1.4, 1e-6).ledger()
    assert rho.total("rho") == pytest.approx(0.3)


def test_each_algorithm_draws_from_its_own_stream():
    """TopDown-lite's first run is the same whether one or three runs are asked for: the ToyDown runs listed
    before it no longer use up draws of a stream they shared."""
    h = Hierarchy.homogeneous([4, 5, 6])
    counts = np.random.default_rng(2).poisson(3, h.n_leaves)
    one = compare_algorithms(h, counts, [0.1] * h.depth, AlgorithmPlan(runs=1))
    three = compare_algorithms(h, counts, [0.1] * h.depth, AlgorithmPlan(runs=3))
    first = three[three["run"] == 0].reset_index(drop=True)
    for name in ("TopDown-lite", "ToyDown non-negative integer"):
        a = one[one["algorithm"] == name].reset_index(drop=True)
        b = first[first["algorithm"] == name].reset_index(drop=True)
        assert a.equals(b), name
