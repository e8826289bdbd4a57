"""Public information: exact log-space sensitivity, the WEM samplers and the price of invariants."""
import itertools
import math

import numpy as np
import pytest

from core.geography.hierarchy import Hierarchy
from core.census.public_info import (beta_equicorrelated, beta_noisy_public_mean, delta_z_dependent_count,
                                     delta_z_grid, dpz_statement, invariant_effects, wem_comparison,
                                     wem_congenial, wem_naive, WemPlan)

GRID10 = [[1, 3, 5, 6, 7, 8, 8], [5, 1, 2, 4, 5, 7, 8], [7, 4, 1, 1, 3, 5, 7], [8, 6, 3, 1, 1, 4, 6],
          [9, 7, 5, 3, 1, 2, 5], [10, 9, 7, 6, 4, 1, 3], [10, 10, 9, 8, 7, 5, 1]]
GRID100 = [[1, 36, 59, 72, 82, 91, 97], [38, 1, 28, 47, 62, 79, 91], [61, 30, 1, 20, 39, 62, 82],
           [74, 49, 22, 1, 20, 47, 72], [84, 64, 41, 22, 1, 28, 59], [93, 81, 64, 49, 30, 1, 36],
           [99, 93, 84, 74, 61, 38, 1]]


def test_example3_grids_exact():
    assert delta_z_grid(10).to_numpy().tolist() == GRID10
    assert delta_z_grid(100).to_numpy().tolist() == GRID100


@pytest.mark.parametrize("n,z1,z0,expected", [(200, .01, .1, 73), (200, .1, .01, 75), (200, .01, .99, 195),
                                              (200, .99, .01, 197), (500, .01, .1, 185), (1000, .01, .1, 370),
                                              (1000, .1, .01, 372)])
def test_example3_reference_values(n, z1, z0, expected):
    assert delta_z_dependent_count(n, z1, z0) == expected


def test_example2_weights():
    assert beta_equicorrelated(10, 0.0) == pytest.approx(0.1)
    assert beta_equicorrelated(10, 1.0) == pytest.approx(1.0)
    assert beta_noisy_public_mean(10, 1.0, 1e6) == pytest.approx(0.1, rel=1e-6)
    assert beta_noisy_public_mean(10, 1.0, 1e-6) < 1e-9


@pytest.mark.slow
def test_congenial_wem_matches_enumeration():
    x = np.array([3, 0, 2])
    s, eps, dz = 6, 1.0, 2.0
    kappa = eps / (2 * dz)
    support = [y for y in itertools.product(range(s + 1), repeat=3) if sum(y) == s]
    w = np.array([math.exp(-kappa * sum(abs(a - b) for a, b in zip(y, x))) for y in support])
    target = w / w.sum()
    rng = np.random.default_rng(0)
    n = 20000
    index = {y: i for i, y in enumerate(support)}
    counts = np.zeros(len(support))
    for _ in range(n):
        counts[index[tuple(wem_congenial(x, s, eps, dz, rng))]] += 1
    tv = 0.5 * np.abs(counts / n - target).sum()
    assert tv < 0.02
    # many draws at once share the forward pass and follow the same law
    batch = np.zeros(len(support))
    for y in wem_congenial(x, s, eps, dz, rng, size=n):
        batch[index[tuple(y)]] += 1
    assert 0.5 * np.abs(batch / n - target).sum() < 0.02


def test_congenial_wem_refuses_vectors_too_big_to_hold():
    rng = np.random.default_rng(0)
    big = np.full(1000, 20_000)                     # 1,000 cells, total 20 million: over every limit
    with pytest.raises(ValueError, match="Pick a smaller unit"):
        wem_congenial(big, int(big.sum()), 1.0, 2.0, rng)
    wide = np.full(1500, 10)                        # cells x (total + 1) = 22.5 million entries
    with pytest.raises(ValueError, match="cells x \\(total \\+ 1\\)"):
        wem_congenial(wide, int(wide.sum()), 1.0, 2.0, rng)
    draws = wem_congenial(np.array([5, 0, 7, 1]), 13, 0.5, 2.0, rng, size=50)
    assert draws.shape == (50, 4) and (draws >= 0).all() and (draws.sum(axis=1) == 13).all()


def test_naive_wem_is_discrete_laplace():
    rng = np.random.default_rng(1)
    draws = wem_naive(np.zeros(200000, dtype=int), 1.0, 2.0, rng)
    a = 0.5
    assert draws.var() == pytest.approx(2 * math.exp(-a) / (1 - math.exp(-a)) ** 2, rel=0.03)


def test_wem_comparison_respects_public_total():
    summary, cells = wem_comparison(np.array([5, 0, 1, 30, 2]), WemPlan(epsilon=0.5, runs=20))
    s = summary.set_index("method")
    assert s.loc["congenial WEM (sum = total, y >= 0)", "runs meeting the public total"] == 1.0
    assert s.loc["naive + projection", "runs with no negative cell"] == 1.0
    assert len(cells) == 15


def test_invariant_effects_remove_top_terms():
    h = Hierarchy.homogeneous([3, 4], ["root", "mid", "block"])
    counts = h.aggregate(np.array([0, 1, 5, 7, 1, 9, 9, 9, 9, 9, 9, 9]))
    eff = invariant_effects(h, counts, [0.5, 0.5, 0.5])
    none = eff[eff["exact through level"] == -1].set_index("level")
    root = eff[eff["exact through level"] == 0].set_index("level")
    assert none.loc["root", "sd (same budgets)"] == pytest.approx(math.sqrt(8 / 0.25))
    assert root.loc["root", "sd (same budgets)"] == 0.0
    assert root.loc["root", "budget freed"] == pytest.approx(0.5)
    # freed budget re-spent makes the remaining levels more accurate
    assert root.loc["block", "sd (freed budget re-spent)"] < none.loc["block", "sd (same budgets)"]
    leaves = eff[eff["exact through level"] == 2]
    assert leaves["units with exact count 0 or 1"].iloc[0] == 3   # blocks with 0, 1 and 1 people
    assert "relative to Z" in dpz_statement(1.0, "epsilon", ["the total"])


def test_wem_methods_draw_from_their_own_streams():
    """Each WEM method's draws come from its own stream of the seed: the naive and projected errors equal
    those of the method run alone, whatever the other methods drew before them."""
    from core.census.public_info import wem_naive, wem_postprocessed
    from core.contracts import named_rng
    x = np.array([5, 0, 1, 30, 2])
    _, cells = wem_comparison(x, WemPlan(epsilon=0.5, runs=1))
    by = {m: c["mean abs error"].to_numpy() for m, c in cells.groupby("method")}
    naive = np.abs(wem_naive(x, 0.5, 2.0, named_rng(0, "wem", "naive")) - x)
    projected = np.abs(wem_postprocessed(x, int(x.sum()), 0.5, 2.0, named_rng(0, "wem", "projection")) - x)
    assert np.array_equal(by["naive WEM (lattice)"], naive)
    assert np.array_equal(by["naive + projection"], projected)
