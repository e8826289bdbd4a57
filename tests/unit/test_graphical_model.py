"""Our numpy junction-tree estimator: agreement with mbi (the reference), exact recovery on a tree,
junction-tree validity, warm starts, monotone loss, bad input, and no JAX on the hot path."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from core.synthesis.graphical_model import (
    Measurement, estimate, junction_tree, minimum_variance_total, model_size_mb, use_estimator,
)
from tests.unit.graphical_support import DOM, correlated_rows

ROOT = Path(__file__).resolve().parents[2]


def sample_rows(n: int = 4000, seed: int = 0) -> dict[str, np.ndarray]:
    return correlated_rows(n, seed)


def counts(rows, clique, dom=DOM) -> np.ndarray:
    sizes = [dom[c] for c in clique]
    flat = np.ravel_multi_index([rows[c] for c in clique], sizes)
    return np.bincount(flat, minlength=int(np.prod(sizes))).astype(float)


def noisy(rows, cliques, sigma, seed=1):
    rng = np.random.default_rng(seed)
    return [Measurement(cl, counts(rows, cl) + rng.normal(0, sigma, counts(rows, cl).size), sigma)
            for cl in cliques]


@pytest.mark.slow
def test_matches_mbi_on_a_cycle_that_needs_triangulation():
    rows = sample_rows()
    # a-b-c-d-a is a 4-cycle (no chord measured), plus a 3-way clique and a pendant column
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("b", "c", "e"), ("e",)]
    meas = noisy(rows, cliques, 15.0)
    ours = estimate(DOM, meas, 2000)
    with use_estimator("mbi"):
        ref = estimate(DOM, meas, 2000)
    assert ours.total == pytest.approx(ref.total, rel=1e-12)
    for cl in cliques + [("a", "c"), ("a", "b", "c", "d")]:
        a, b = ours.project(cl), ref.project(cl)
        assert np.abs(a - b).sum() / 2 / ours.total < 1e-4, cl
    # and the fit is not trivial: the measured pair is far from independence and both reproduce it
    ab = ours.project(("a", "b"))
    indep = np.outer(ab.sum(1), ab.sum(0)) / ab.sum()
    assert np.abs(ab - indep).sum() / 2 / ab.sum() > 0.2


def test_exact_measurements_of_a_tree_are_recovered():
    rows = sample_rows(6000, 3)
    tree_edges = [("a", "b"), ("b", "c"), ("b", "e"), ("a", "d")]
    # make d depend on a only, so the data's own distribution is a tree model
    rng = np.random.default_rng(4)
    rows["d"] = (rows["a"] + (rng.random(6000) < 0.3)) % 3
    rows["c"] = ((rows["b"] > 1).astype(int) ^ (rng.random(6000) < 0.2)).astype(int)
    meas = [Measurement(cl, counts(rows, cl), 1.0) for cl in tree_edges]
    model = estimate(DOM, meas, 3000)
    assert model.total == pytest.approx(6000)
    for cl in tree_edges:
        got = model.project(cl).ravel()
        assert np.abs(got - counts(rows, cl)).sum() / 2 / 6000 < 1e-3, cl
    assert model.loss < 1e-4 * estimate(DOM, meas, 0).loss


def test_junction_tree_is_valid_and_triangulates_cycles():
    dom = {c: 3 for c in "abcdef"}
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("d", "e"), ("f",)]
    tree = junction_tree(dom, cliques)
    assert nx.is_forest(tree)
    nodes = list(tree.nodes)
    for cl in cliques:
        assert any(set(cl) <= set(n) for n in nodes)
    assert max(len(n) for n in nodes) == 3          # the 4-cycle needs one chord, never more
    # running intersection: the cliques holding any column form a connected subtree
    for col in dom:
        holding = [n for n in nodes if col in n]
        assert nx.is_connected(tree.subgraph(holding))
    assert model_size_mb(dom, cliques) == pytest.approx(sum(3 ** len(n) for n in nodes) * 8 / 2 ** 20)
    # a chordal graph keeps its own cliques (no fill)
    chain = junction_tree(dom, [("a", "b"), ("b", "c"), ("c", "d")])
    assert sorted(chain.nodes) == [("a", "b"), ("b", "c"), ("c", "d"), ("e",), ("f",)]


@pytest.mark.slow
def test_model_size_and_estimate_never_import_jax():
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from core.synthesis.graphical_model import Measurement, estimate, model_size_mb\n"
        "dom = {'a': 3, 'b': 2, 'c': 4}\n"
        "model_size_mb(dom, [('a', 'b'), ('b', 'c'), ('a', 'c')])\n"
        "m = estimate(dom, [Measurement(('a', 'b'), np.ones(6), 1.0), Measurement(('c',), np.ones(4), 1.0)], 20)\n"
        "m.sample(5, np.random.default_rng(0))\n"
        "assert 'jax' not in sys.modules and 'mbi' not in sys.modules, 'jax imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_loss_never_rises_with_more_steps_and_warm_start_continues():
    rows = sample_rows(3000, 5)
    meas = noisy(rows, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")], 10.0, seed=6)
    losses = [estimate(DOM, meas, k).loss for k in (0, 5, 30, 200)]
    assert all(b <= a + 1e-9 for a, b in zip(losses, losses[1:]))
    assert losses[-1] < 0.5 * losses[0]
    first = estimate(DOM, meas[:2], 300)
    # zero steps from a warm start keeps the previous distribution (the new clique starts flat)
    kept = estimate(DOM, meas, 0, warm_start=first)
    for cl in [("a", "b"), ("b", "c")]:
        p, q = first.project(cl), kept.project(cl)
        assert np.allclose(p / p.sum(), q / q.sum(), atol=1e-9)
    warm = estimate(DOM, meas, 30, warm_start=first)
    cold = estimate(DOM, meas, 30)
    assert warm.loss < cold.loss


def test_only_one_way_measurements_give_independent_columns():
    rows = sample_rows(2000, 7)
    meas = [Measurement((c,), counts(rows, (c,)), 0.5) for c in DOM]
    model = estimate(DOM, meas, 500)
    ab = model.project(("b", "a"))
    expect = np.outer(counts(rows, ("b",)), counts(rows, ("a",))) / 2000
    assert np.allclose(ab, expect, atol=0.5)
    assert minimum_variance_total(meas) == pytest.approx(2000)


def test_sampling_is_seeded_and_follows_the_model():
    rows = sample_rows(5000, 8)
    model = estimate(DOM, noisy(rows, [("a", "b"), ("b", "c", "e"), ("a", "d")], 2.0), 500)
    one = model.sample(20000, np.random.default_rng(3))
    two = model.sample(20000, np.random.default_rng(3))
    assert all(np.array_equal(one[c], two[c]) for c in DOM)
    emp = counts(one, ("b", "e")) / 20000
    fit = model.project(("b", "e")).ravel() / model.total
    assert np.abs(emp - fit).sum() / 2 < 0.03


@pytest.mark.parametrize("bad, words", [
    (Measurement(("a", "b"), np.ones(5), 1.0), "cells"),
    (Measurement(("a", "z"), np.ones(6), 1.0), "outside the domain"),
    (Measurement(("a",), np.ones(3), 0.0), "sigma"),
    (Measurement(("a",), np.array([1.0, np.nan, 2.0]), 1.0), "NaN"),
])
def test_bad_measurements_are_refused_clearly(bad, words):
    with pytest.raises(ValueError, match=words):
        estimate(DOM, [bad], 10)


def test_unknown_estimator_name_is_refused():
    with pytest.raises(ValueError, match="numpy"):
        with use_estimator("jax"):
            pass


def test_marginals_of_all_cliques_are_consistent_on_separators():
    rows = sample_rows(3000, 9)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("d", "e")]
    model = estimate(DOM, noisy(rows, cliques, 5.0), 300)
    tables = model.clique_tables
    for u, v in itertools.combinations(tables, 2):
        sep = tuple(c for c in u if c in v)
        if sep:
            assert np.allclose(model._reduce(u, tables[u], sep), model._reduce(v, tables[v], sep), atol=1e-6)
        assert tables[u].sum() == pytest.approx(model.total)


def test_dense_path_for_large_tables_gives_the_same_fit(monkeypatch):
    import core.synthesis.graphical_model as gm

    rows = sample_rows(3000, 11)
    meas = noisy(rows, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("e",), ("a",)], 8.0, seed=12)
    sparse_fit = estimate(DOM, meas, 150)
    monkeypatch.setattr(gm, "SPARSE_HOST_CELLS", 0)
    dense_fit = estimate(DOM, meas, 150)
    assert dense_fit.loss == pytest.approx(sparse_fit.loss, rel=1e-10)
    for node, table in sparse_fit.clique_tables.items():
        assert np.allclose(dense_fit.clique_tables[node], table, rtol=1e-9, atol=1e-9)


def test_repeated_measurements_of_a_clique_count_as_one_at_their_mean():
    rows = sample_rows(2000, 13)
    base = counts(rows, ("a", "b"))
    twice = [Measurement(("a", "b"), base + 4.0, 2.0), Measurement(("a", "b"), base - 4.0, 2.0)]
    once = [Measurement(("a", "b"), base, 2.0 / np.sqrt(2))]
    a, b = estimate(DOM, twice, 300), estimate(DOM, once, 300)
    assert np.allclose(a.project(("a", "b")), b.project(("a", "b")), atol=1e-6)
    # the loss still counts both: each is 4 away in every cell at the optimum
    assert a.loss == pytest.approx(b.loss + 2 * 0.5 * 12 * 16 / 4, rel=1e-3)


def test_empty_column_domain_is_refused():
    with pytest.raises(ValueError, match="at least one category"):
        estimate({"a": 3, "b": 0}, [Measurement(("a",), np.ones(3), 1.0)], 5)


def test_projections_of_many_cliques_equal_each_projection(monkeypatch):
    import core.synthesis.graphical_model as gm

    rows = sample_rows(3000, 14)
    pairs = list(itertools.combinations(DOM, 2))
    model = estimate(DOM, noisy(rows, pairs, 6.0, seed=15), 30)       # one junction-tree clique of all columns
    asked = [("b", "a"), ("c",), ("a", "b", "e"), ("e", "d"), ("b", "a")]
    for cells in (1 << 16, 0):          # the small-table path (one project each) and the shared sums
        monkeypatch.setattr(gm, "SPARSE_HOST_CELLS", cells)
        got = model.projections(asked)
        assert list(got) == list(dict.fromkeys(asked))
        for cl in asked:
            assert got[cl].shape == tuple(DOM[c] for c in cl)
            assert np.allclose(got[cl], model.project(cl), rtol=1e-12, atol=1e-9)
