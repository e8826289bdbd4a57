"""How much work the estimator does: closed-form fits take no step, the junction tree and its
schedule are built once per clique set, the noise-level stop ends a fit once every table is fitted
to within its noise, and the sum by matrix products equals numpy's."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import core.synthesis.graphical_model as gm
from core.synthesis.aim import AIM
from core.synthesis.graphical_model import WORK, Measurement, estimate, model_size_mb, model_size_with
from tests.unit.graphical_support import DOM, correlated_rows



def rows(n: int = 5000, seed: int = 0) -> dict[str, np.ndarray]:
    return correlated_rows(n, seed)


def counts(data, clique) -> np.ndarray:
    sizes = [DOM[c] for c in clique]
    return np.bincount(np.ravel_multi_index([data[c] for c in clique], sizes),
                       minlength=int(np.prod(sizes))).astype(float)


def clear_caches() -> None:
    gm._triangulation.cache_clear()
    gm._junction_tree_cached.cache_clear()
    gm._schedule.cache_clear()


def test_exact_measurements_on_a_junction_tree_are_fitted_in_closed_form_with_no_step():
    data = rows()
    # a tree a-b, b-c, b-e plus a one-way inside it and column d never measured
    cliques = [("a", "b"), ("b", "c"), ("b", "e"), ("b",)]
    meas = [Measurement(cl, counts(data, cl), 1.0) for cl in cliques]
    before = dict(WORK)
    model = estimate(DOM, meas, 500)
    assert model.iterations == 0
    assert WORK["closed_form"] == before.get("closed_form", 0) + 1
    assert WORK["steps"] == before.get("steps", 0)
    for cl in cliques:
        assert np.allclose(model.project(cl).ravel(), counts(data, cl), atol=1e-9)
    assert model.loss == pytest.approx(0.0, abs=1e-9)
    # the unmeasured column is uniform; the rest follows the tree factorisation p(ab) p(bc) / p(b)
    assert np.allclose(model.project(("d",)), 5000 / 3)
    abc = model.project(("a", "b", "c"))
    ab, bc, b = (counts(data, cl) for cl in [("a", "b"), ("b", "c"), ("b",)])
    expect = ab.reshape(3, 4, 1) * bc.reshape(1, 4, 2) / b.reshape(1, 4, 1)
    assert np.allclose(abc, expect, atol=1e-8)
    # its potentials are those of the same distribution: zero steps from them change nothing
    kept = estimate(DOM, meas, 0, warm_start=model)
    for cl in cliques:
        assert np.allclose(kept.project(cl), model.project(cl), atol=1e-6)


@pytest.mark.parametrize("case", ["tables disagree", "cycle"])
def test_no_closed_form_when_measurements_disagree_or_cliques_form_a_cycle(case):
    data = rows(3000, 2)
    if case == "cycle":     # exact counts, but a-b-c-a is not a junction tree of its own cliques
        meas = [Measurement(cl, counts(data, cl), 1.0) for cl in [("a", "b"), ("b", "c"), ("a", "c")]]
    else:                   # a tree, but b x c is off by one count in one cell: the tables disagree on b
        meas = [Measurement(("a", "b"), counts(data, ("a", "b")), 1.0),
                Measurement(("b", "c"), counts(data, ("b", "c")) + np.eye(1, 8).ravel(), 1.0)]
    model = estimate(DOM, meas, 40)
    assert model.iterations == 40


def test_the_junction_tree_and_its_schedule_are_built_once_per_clique_set():
    clear_caches()
    data = rows(2000, 3)
    rng = np.random.default_rng(4)
    first = [Measurement(cl, counts(data, cl) + rng.normal(0, 3, counts(data, cl).size), 3.0)
             for cl in [("a", "b"), ("b", "c"), ("c", "d")]]
    t0, s0 = WORK["triangulations"], WORK["schedules"]
    fit = estimate(DOM, first, 5)
    fit = estimate(DOM, first, 5, warm_start=fit)           # same cliques: nothing rebuilt
    again = [Measurement(m.clique, m.noisy + 1.0, m.sigma) for m in first] + [
        Measurement(("b",), counts(data, ("b",)), 2.0)]     # new values, a one-way inside: same set
    estimate(DOM, again, 5, warm_start=fit)
    assert (WORK["triangulations"] - t0, WORK["schedules"] - s0) == (1, 1)
    estimate(DOM, first + [Measurement(("d", "e"), counts(data, ("d", "e")), 3.0)], 5)
    assert (WORK["triangulations"] - t0, WORK["schedules"] - s0) == (2, 2)


def test_model_size_of_a_candidate_inside_the_tree_needs_no_new_triangulation():
    clear_caches()
    measured = [("a", "b"), ("b", "c"), ("a", "c"), ("d",)]   # a triangle: one clique a, b, c
    base = model_size_mb(DOM, measured)
    t0 = WORK["triangulations"]
    assert model_size_with(DOM, measured, ("a", "c")) == base
    assert model_size_with(DOM, measured, ("c", "a")) == base
    assert WORK["triangulations"] == t0
    grown = model_size_with(DOM, measured, ("c", "d"))
    assert grown == model_size_mb(DOM, measured + [("c", "d")]) and grown > base
    assert WORK["triangulations"] == t0 + 1


def test_noise_level_stop_ends_once_every_table_is_fitted_within_its_noise():
    data = rows(4000, 5)
    rng = np.random.default_rng(6)
    sigma = 20.0
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("e",)]
    meas = [Measurement(cl, counts(data, cl) + rng.normal(0, sigma, counts(data, cl).size), sigma)
            for cl in cliques]
    full = estimate(DOM, meas, 300)
    early = estimate(DOM, meas, 300, within_noise=1.5)
    assert 0 < early.iterations < 300
    for m in meas:
        r = early.project(m.clique).ravel() - m.noisy
        assert float(np.mean(r ** 2)) / sigma ** 2 <= 1.5 + 1e-9, m.clique
    # one step fewer and some table was still outside the level
    before = estimate(DOM, meas, early.iterations - 1, within_noise=1.5)
    worst = max(float(np.mean((before.project(m.clique).ravel() - m.noisy) ** 2)) / sigma ** 2 for m in meas)
    assert worst > 1.5
    assert early.loss >= full.loss - 1e-9      # stopping early never beats running on
    # a level no fit can miss: no step at all
    assert estimate(DOM, meas, 300, within_noise=1e12).iterations == 0


@pytest.mark.parametrize("shape, axes", [((8, 7, 7, 5, 9, 2), (5,)), ((8, 7, 7, 5, 5, 9), (2, 5)),
                                         ((40, 3, 60), (0, 2)), ((3, 4), (1,)), ((4, 5, 2, 3), (0, 1, 2, 3)),
                                         ((6, 1, 4), (1, 2)), ((5, 7), ())])
def test_sum_by_matrix_products_equals_numpys(shape, axes):
    x = np.random.default_rng(7).normal(size=shape)
    assert np.allclose(gm._sum(x, axes), x.sum(axis=axes, keepdims=True), rtol=1e-12)
    assert np.allclose(gm._sum(x.transpose(), axes), x.transpose().sum(axis=axes, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("part_shape", [(7, 5, 2, 3, 5, 1, 8), (1, 1, 1, 1, 5, 9, 1), (7, 5, 2, 3, 5, 9, 1),
                                        (1, 5, 1, 3, 1, 9, 8), (7, 5, 2, 3, 5, 9, 8), (1, 1, 1, 1, 1, 1, 1)])
def test_a_broadcast_table_repeated_out_gives_the_same_sums_bit_for_bit(part_shape):
    shape = (7, 5, 2, 3, 5, 9, 8)
    rng = np.random.default_rng(11)
    x, part = rng.normal(size=shape), rng.normal(size=part_shape)
    wide = gm._wide(part, shape)
    assert np.array_equal(np.broadcast_to(wide, shape), np.broadcast_to(part, shape))
    assert np.array_equal(x + wide, x + part)
    # what is still broadcast lies outside a run of at least _LONG_RUN cells (or nothing is)
    broadcast = [k for k in range(len(shape)) if wide.shape[k] == 1 and shape[k] > 1]
    if broadcast:
        assert math.prod(shape[broadcast[-1] + 1:]) >= gm._LONG_RUN
    assert wide.size <= math.prod(shape)


def test_aim_records_each_estimate_and_still_spends_exactly_its_budget():
    df = pd.DataFrame(rows(3000, 8))
    model = AIM(max_rounds=5, iters=40).fit(df, DOM, 0.5, np.random.default_rng(9))
    assert math.isclose(model.ledger_.total("rho"), 0.5, rel_tol=0, abs_tol=1e-9)
    assert len(model.estimates_) == len(model.rounds_) + 2      # the one-way fit, each round, the final fit
    assert all(0 <= e["steps"] <= 120 for e in model.estimates_)
    assert all(e["model_mb"] > 0 for e in model.estimates_)


def test_reduction_plan_reaches_every_target_with_three_passes_over_the_large_table():
    shape = (8, 7, 7, 5, 2, 3, 9, 8, 2)
    targets = [frozenset(p) for p in itertools.combinations(range(len(shape)), 2)] + [frozenset({0, 1, 2})]
    plan = gm._reduction_plan(shape, targets)
    held = [frozenset(range(len(shape)))]            # each entry's axes, from its parent's less the summed
    for parent, drop, at in plan[1:]:
        assert parent >= 0 and drop and not set(drop) - held[parent]
        held.append(held[parent] - set(drop))
    found = sorted(i for _, _, at in plan for i in at)
    assert found == list(range(len(targets)))       # every target exactly once ...
    assert all(held[k] == targets[i] for k, (_, _, at) in enumerate(plan) for i in at)   # ... where its axes are
    # 37 tables from the large one: 3 passes over it (not 37); the rest are sums of smaller tables
    assert sum(1 for parent, _, _ in plan if parent == 0) == 3


def test_a_large_host_is_summed_once_per_step_whatever_the_number_of_its_cliques(monkeypatch):
    dom = {c: 3 for c in "abcdefg"}
    rng = np.random.default_rng(10)
    data = {c: rng.integers(0, 3, 2000) for c in dom}
    data["b"] = (data["a"] + (rng.random(2000) < 0.2)) % 3
    pairs = list(itertools.combinations(dom, 2))       # 21 pairs: one junction-tree clique of all 7 columns

    def tables(cl):
        return np.bincount(np.ravel_multi_index([data[c] for c in cl], [3] * len(cl)), minlength=3 ** len(cl))
    meas = [Measurement(cl, tables(cl) + rng.normal(0, 5, 9), 5.0) for cl in pairs]
    sparse_fit = estimate(dom, meas, 12)
    monkeypatch.setattr(gm, "SPARSE_HOST_CELLS", 0)
    prob = gm._Problem(dom, meas)
    (lo, hi, shape, nodes), = prob.dense
    passes = sum(1 for parent, _, _ in nodes if parent == 0)
    assert passes <= 3 < len(pairs)
    before = WORK["host_passes"]
    dense_fit = estimate(dom, meas, 12)
    # the plan's first sums (``passes`` of them) are taken in one pass: one residual per step, one at the start
    assert WORK["host_passes"] - before == dense_fit.iterations + 1
    # the same fit as the sparse matrix's (the residual and gradient summed in another order)
    assert dense_fit.loss == pytest.approx(sparse_fit.loss, rel=1e-10)
    p = np.random.default_rng(11).random(prob.n_cells)
    monkeypatch.setattr(gm, "SPARSE_HOST_CELLS", 1 << 16)
    ref = gm._Problem(dom, meas)
    assert not ref.dense and ref.A.nnz == len(pairs) * 3 ** 7
    ans, loss, wd = prob.residual(p)
    ans_ref, loss_ref, wd_ref = ref.residual(p)
    assert np.allclose(ans, ans_ref, rtol=1e-12) and loss == pytest.approx(loss_ref, rel=1e-12)
    assert np.allclose(prob.gradient(wd), ref.gradient(wd_ref), rtol=1e-12)
    assert np.allclose(prob.gradient(wd, base=p), p + ref.gradient(wd_ref), rtol=1e-12)   # a step's base added
    # a warm start's potentials are added into the large host along the same plan, as into the matrix's host
    start = gm._expand(dom, sparse_fit.potentials, prob.maximal)
    assert np.abs(start[prob.maximal[0]]).max() > 0.1                  # a fitted start, not zeros
    assert np.allclose(prob.theta(start), ref.theta(start), rtol=1e-12, atol=1e-12)


def test_accelerated_descent_reaches_plain_descents_loss_in_fewer_steps_and_never_raises_it():
    data = rows(4000, 12)
    rng = np.random.default_rng(13)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("d", "e"), ("b", "e")]
    meas = [Measurement(cl, counts(data, cl) + rng.normal(0, 2.0, counts(data, cl).size), 2.0) for cl in cliques]
    plain = estimate(DOM, meas, 150)
    restarts = WORK["restarts"]
    fast = estimate(DOM, meas, 150, accelerate=True)
    assert fast.loss < plain.loss
    assert all(b <= a for a, b in zip(fast.history, fast.history[1:]))      # monotone: a rise restarts momentum
    assert WORK["restarts"] > restarts                                       # ... and it did restart here
    # plain descent's loss after 150 steps, reached by the accelerated one in fewer than half as many
    reached = next(k for k, loss in enumerate(fast.history) if loss <= plain.loss)
    assert reached < 75
    # the same steps from the same start give the same fit (deterministic)
    again = estimate(DOM, meas, 150, accelerate=True)
    assert again.history == fast.history
    # a warm start from the accelerated fit continues from its distribution
    kept = estimate(DOM, meas, 0, warm_start=fast)
    assert np.allclose(kept.project(("a", "b")), fast.project(("a", "b")), atol=1e-6)


def test_on_models_below_accelerate_mb_aim_accelerates_only_the_final_fit_so_the_path_is_unchanged():
    df = pd.DataFrame(rows(3000, 16))
    fits = {}
    for accelerate in (False, True):
        restarts = WORK["restarts"]
        model = AIM(max_rounds=6, iters=40, accelerate=accelerate).fit(df, DOM, 0.5, np.random.default_rng(17))
        fits[accelerate] = (model, WORK["restarts"] - restarts)
    plain, fast = fits[False][0], fits[True][0]
    assert [(s.label, s.amount) for s in plain.ledger_.spends] == [(s.label, s.amount) for s in fast.ledger_.spends]
    assert [r["marginal"] for r in plain.rounds_] == [r["marginal"] for r in fast.rounds_]
    assert [e["steps"] for e in plain.estimates_[:-1]] == [e["steps"] for e in fast.estimates_[:-1]]
    assert fits[False][1] == 0                                     # no momentum anywhere without it
    assert (plain.estimates_[-1]["steps"], fast.estimates_[-1]["steps"]) == (120, 60)
    assert fast.model_.loss <= plain.model_.loss                   # half the final steps, no worse a fit


def blocked(monkeypatch, cells: int) -> None:
    """Cut every table into blocks of at most ``cells`` cells from now on."""
    monkeypatch.setattr(gm, "BLOCK_CELLS", cells)
    gm._blocks.cache_clear()
    monkeypatch.setattr(gm, "_blocks", gm._blocks)


@pytest.mark.parametrize("shape", [(3, 4, 2, 3, 2), (5, 1, 7, 2), (11,), (2, 3)])
def test_blocks_cover_every_cell_once_and_sweeps_and_adds_equal_numpys(monkeypatch, shape):
    blocked(monkeypatch, 5)
    rng = np.random.default_rng(3)
    x = rng.random(shape)
    seen = np.zeros(shape, int)
    for idx in gm._blocks(shape):
        seen[idx] += 1
        assert x[idx].size <= max(5, shape[-1])
    assert (seen == 1).all()
    drops = [tuple(a for a in range(len(shape)) if a % 2 == k) for k in (0, 1)] + [(), tuple(range(len(shape)))]
    for got, d in zip(gm._sweep(shape, drops, x.__getitem__), drops):
        assert np.allclose(got, x.sum(axis=d, keepdims=True), rtol=1e-12)
    parts = [rng.random(tuple(n if a in d else 1 for a, n in enumerate(shape))) for d in drops[:2]]
    base, view = rng.random(shape), np.zeros(shape)
    gm._add_into(view, base, parts)
    assert np.allclose(view, base + parts[0] + parts[1], rtol=1e-12)
    gm._blocks.cache_clear()


def test_a_fit_swept_in_small_blocks_is_the_fit_in_one_block(monkeypatch):
    data = rows(3000, 21)
    rng = np.random.default_rng(22)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("d", "e"), ("b", "e")]   # a cycle: mirror descent
    meas = [Measurement(cl, counts(data, cl) + rng.normal(0, 3.0, counts(data, cl).size), 3.0) for cl in cliques]
    whole = estimate(DOM, meas, 40)
    blocked(monkeypatch, 7)
    parts = estimate(DOM, meas, 40)
    gm._blocks.cache_clear()
    assert parts.iterations == whole.iterations
    assert parts.loss == pytest.approx(whole.loss, rel=1e-10)
    for node, table in whole.clique_tables.items():
        assert np.allclose(parts.clique_tables[node], table, rtol=1e-9, atol=1e-9)


def test_a_stale_shift_that_would_overflow_is_replaced_and_the_marginals_are_unchanged():
    data = rows(2000, 23)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    meas = [Measurement(cl, counts(data, cl), 1.0) for cl in cliques]
    prob = gm._Problem(DOM, meas)
    theta = np.random.default_rng(24).normal(0, 1, prob.n_cells)
    fresh = prob.counts(theta, 2000.0)
    for jump in (2000.0, -2000.0):          # far above, then far below, the shifts kept from the last call
        moved = prob.counts(theta + jump, 2000.0)           # the same distribution: potentials moved by a constant
        assert np.isfinite(moved).all()
        assert np.allclose(moved, fresh, rtol=1e-9)
    for v, t in prob.views(fresh).items():
        assert t.sum() == pytest.approx(2000.0)


def test_a_large_root_left_unscaled_gives_the_same_answers_and_tables_once_scaled(monkeypatch):
    data = rows(2000, 25)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("d", "e")]
    meas = [Measurement(cl, counts(data, cl) + 1.0, 2.0) for cl in cliques]
    monkeypatch.setattr(gm, "SPARSE_HOST_CELLS", 4)           # every table "large": summed densely, root unscaled
    prob = gm._Problem(DOM, meas)
    theta = np.random.default_rng(26).normal(0, 1, prob.n_cells)
    scaled = prob.counts(theta, 2000.0)
    factors: dict = {}
    lazy = prob.counts(theta, 2000.0, factors=factors)
    assert set(factors) == set(prob.tree.roots) and all(c != 1.0 for c in factors.values())
    ans, loss, _ = prob.residual(scaled)
    lazy_ans, lazy_loss, _ = prob.residual(lazy, factors)
    assert np.allclose(lazy_ans, ans, rtol=1e-12) and lazy_loss == pytest.approx(loss, rel=1e-12)
    assert np.allclose(prob.scale(lazy, factors), scaled, rtol=1e-12)


def test_a_separator_cell_whose_sum_is_subnormal_keeps_its_mass_and_makes_no_nan():
    """A child clique whose potentials on one separator cell sit ~740 below the rest sums that cell to a
    subnormal number; the parent still gives the cell mass, and the quotient of the two overflows. The
    child's table must then split the parent's mass by the child's own shares (here all on c = 0, as
    exp(-746) underflows to 0), never 0 x inf = NaN, and agree with the parent on the separator."""
    domain = {"a": 5, "b": 2, "c": 2}
    tree = gm._schedule(*gm._key(domain, [("a", "b"), ("b", "c")]))
    assert tree.roots == [("a", "b")] and [e[0] for e in tree.edges] == [("b", "c")]
    theta = {("a", "b"): np.tile([740.0, 0.0], (5, 1)), ("b", "c"): np.array([[-740.0, -746.0], [0.0, 0.0]])}
    with np.errstate(all="raise"):
        tables = tree.marginals(theta, total=1000.0)
    child, parent = tables[("b", "c")], tables[("a", "b")]
    assert np.isfinite(child).all() and np.isfinite(parent).all()
    assert child.sum() == pytest.approx(1000.0) and parent.sum() == pytest.approx(1000.0)
    assert child.sum(axis=1) == pytest.approx(parent.sum(axis=0), rel=1e-9)
    assert child[0, 1] == 0.0 and child[0, 0] == pytest.approx(parent[:, 0].sum(), rel=1e-9)


def test_the_estimator_runs_blas_on_one_thread_and_gives_the_threads_back(monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    seen = []
    real = gm.minimum_variance_total
    monkeypatch.setattr(gm, "minimum_variance_total", lambda meas: (seen.append(blas_threads()), real(meas))[1])
    data = rows()
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        estimate(DOM, [Measurement(cl, counts(data, cl), 1.0) for cl in [("a", "b"), ("b", "c"), ("a", "c")]], 20)
        assert blas_threads() == before
    assert seen and all(n == 1 for threads in seen for n in threads)
