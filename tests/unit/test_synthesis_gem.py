"""GEM on tiny domains: the stated total is spent exactly (no per-round inflation), recovery with
a huge budget, staying within a tiny one, seeded reproducibility and parallel composition."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.contracts import Cancelled, DataRef, plan_from_dict
from core.privacy.accounting import rho_for_epsilon, rho_to_epsilon
from core.synthesis import GEMParams, StratifiedSynthesizer, SweepPlan, SynthesisPlan, make_synthesizer
from core.synthesis.gem import GEM, SELECT_SHARE, fit_rounds, round_budget
from core.synthesis.metrics import two_way_tvd
from core.synthesis.sweep import run_sweep
from synthesis_toys import DOMAIN, correlated


def small(**kw) -> GEM:
    return GEM(**{"rounds": 5, "steps": 30, "batch": 128, "hidden": 32, "noise_dim": 8, **kw})


def test_round_budget_splits_epsilon0_as_the_paper_and_sums_to_the_round():
    sel, meas = round_budget(0.01)
    eps0 = math.sqrt(8 * sel) / SELECT_SHARE
    assert math.isclose(meas, ((1 - SELECT_SHARE) * eps0) ** 2 / 2, rel_tol=1e-12)
    assert math.isclose(sel + meas, 0.01, rel_tol=1e-12)


def test_the_published_accounting_would_have_spent_far_more():
    # the authors' wrapper used the nominal epsilon as every round's epsilon0 (T = 100)
    per_round = 0.1 ** 2 * (SELECT_SHARE ** 2 / 8 + (1 - SELECT_SHARE) ** 2 / 2)
    effective = rho_to_epsilon(100 * per_round, 1e-9)
    assert 2.8 < effective < 3.4
    assert rho_to_epsilon(rho_for_epsilon(0.1, 1e-9), 1e-9) == pytest.approx(0.1)


@pytest.mark.slow
def test_ledger_sums_to_the_stated_total_with_every_round():
    rho = 1e-4
    model = small().fit(correlated(), DOMAIN, rho, np.random.default_rng(0))
    assert abs(model.ledger_.total("rho") - rho) <= 1e-9
    labels = [s.label for s in model.ledger_.spends]
    assert labels[0] == "round 1: one-way marginals"
    assert len(labels) == 1 + 2 * (5 - 1) and len(model.rounds_) == 4


@pytest.mark.slow
def test_huge_budget_recovers_the_workload_marginals():
    df = correlated()
    model = GEM(rounds=4, steps=400, batch=256, hidden=64, noise_dim=16, learning_rate=3e-3).fit(
        df, DOMAIN, 1e4, np.random.default_rng(1))
    synth = model.sample(20_000, np.random.default_rng(2))
    assert two_way_tvd(df, synth, DOMAIN)["tvd"].max() < 0.05


def test_seeded_runs_are_reproducible():
    df = correlated(800)
    one = small().fit(df, DOMAIN, 0.5, np.random.default_rng(4)).sample(200, np.random.default_rng(5))
    two = small().fit(df, DOMAIN, 0.5, np.random.default_rng(4)).sample(200, np.random.default_rng(5))
    pd.testing.assert_frame_equal(one, two)


def test_stratified_gem_composes_in_parallel_over_strata():
    df = correlated(1000, 5)
    df["s"] = np.random.default_rng(6).integers(0, 2, len(df))
    wrapper = StratifiedSynthesizer(lambda: small(rounds=3), ["s"], size_policy="public")
    wrapper.fit(df, {**DOMAIN, "s": 2}, 0.5, np.random.default_rng(7))
    assert abs(wrapper.ledger_.total("rho") - 0.5) <= 1e-9
    for model in wrapper.models_.values():
        assert abs(model.ledger_.total("rho") - 0.5) <= 1e-9


def test_progress_can_cancel_and_registry_round_trips():
    def stop(done, total, message):
        raise Cancelled(message)

    with pytest.raises(Cancelled):
        small().fit(correlated(300), DOMAIN, 1.0, np.random.default_rng(0), progress=stop)
    assert isinstance(make_synthesizer("gem", GEMParams(rounds=10)), GEM)
    plan = SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income"), strata=("sex",),
                         synthesizer="gem", synth_params=GEMParams(rounds=10))
    assert plan_from_dict(plan.to_dict()) == plan


def strata_frame(n: int = 1200, seed: int = 5) -> tuple[pd.DataFrame, dict]:
    df = correlated(n, seed)
    df["s"] = np.random.default_rng(seed + 1).integers(0, 3, len(df))
    return df, {**DOMAIN, "s": 3}


@pytest.mark.slow
def test_tiny_budget_stops_within_it_and_records_every_round():
    rho = 1e-7
    model = small(rounds=6).fit(correlated(500), DOMAIN, rho, np.random.default_rng(3))
    amounts = [s.amount for s in model.ledger_.spends]
    assert len(amounts) == 1 + 2 * 5 and all(a > 0 for a in amounts)
    assert model.ledger_.total("rho") <= rho + 1e-15
    assert abs(model.ledger_.total("rho") - rho) <= 1e-12
    # the noise is scaled to that budget: the recorded sigma of a measurement is huge
    assert all(r["sigma"] > 100 for r in model.rounds_)


def test_stratified_ledger_is_one_stratum_budget_plus_the_size_share():
    df, dom = strata_frame()
    rho, share = 0.5, 0.2
    wrapper = StratifiedSynthesizer(lambda: small(rounds=3), ["s"], size_policy="dp_count", count_share=share)
    wrapper.fit(df, dom, rho, np.random.default_rng(7))
    per_stratum = (1 - share) * rho
    assert len(wrapper.models_) == 3
    for model in wrapper.models_.values():
        assert abs(model.ledger_.total("rho") - per_stratum) <= 1e-9
        assert len(model.ledger_) == 1 + 2 * (3 - 1)
    led = wrapper.ledger_.to_frame()
    strata_lines = led[led["group"] == "strata"]
    assert len(strata_lines) == sum(len(m.ledger_) for m in wrapper.models_.values())   # every round's line
    assert (strata_lines["composition"] == "parallel").all()
    assert abs(wrapper.ledger_.total("rho") - (per_stratum + share * rho)) <= 1e-9


def test_seeded_stratified_runs_are_reproducible():
    df, dom = strata_frame(900)

    def run():
        w = StratifiedSynthesizer(lambda: small(rounds=3), ["s"]).fit(df, dom, 0.5, np.random.default_rng(11))
        return w.sample(300, np.random.default_rng(12))
    pd.testing.assert_frame_equal(run(), run())


class Compiles:
    """Counts XLA compilations inside a ``with`` block (JAX's public monitoring events)."""

    def __enter__(self):
        import jax.monitoring

        self.count = 0

        def heard(name, seconds, **kw):
            if name == "/jax/core/compile/backend_compile_duration":
                self.count += 1
        self._listener = heard
        jax.monitoring.register_event_duration_secs_listener(heard)
        return self

    def __exit__(self, *exc):
        import jax.monitoring

        jax.monitoring.unregister_event_duration_listener(self._listener)


@pytest.mark.slow
def test_strata_share_one_compiled_program():
    from core.synthesis.gem import programs

    df, dom = strata_frame(900)
    make = lambda: small(rounds=3, hidden=24)  # noqa: E731  (a shape no other test compiles)
    model = make()
    shape = (3, 3, model.noise_dim, model.hidden, model.batch, model.steps, model.learning_rate, model.ema)
    assert programs(*shape) is programs(*shape)                  # built once per process and shape
    assert programs(4, 3, *shape[2:]) is not programs(*shape)
    with Compiles() as first:
        StratifiedSynthesizer(make, ["s"]).fit(df, dom, 0.5, np.random.default_rng(1)).sample(
            500, np.random.default_rng(2))
    with Compiles() as lone:
        make().fit(df[df["s"] == 0].drop(columns="s"), DOMAIN, 0.5, np.random.default_rng(3))
    with Compiles() as again:
        # the same shape with other rows, seed and budget: nothing new to compile, stratified or not
        StratifiedSynthesizer(make, ["s"]).fit(df.sample(frac=1.0, random_state=3), dom, 0.3,
                                               np.random.default_rng(4)).sample(700, np.random.default_rng(5))
    assert first.count > 0 and lone.count == 0 and again.count == 0
    assert programs(*shape).train._cache_size() == 1


def test_cancel_on_round_two_stops_a_stratified_fit_and_names_the_stratum():
    df, dom = strata_frame(900)
    heard: list[tuple[int, int, str]] = []

    def watch(done, total, message):
        heard.append((done, total, message))
        if done >= 2 and "round 2" in message:
            raise Cancelled("stopped")

    wrapper = StratifiedSynthesizer(lambda: small(rounds=5), ["s"])
    with pytest.raises(Cancelled):
        wrapper.fit(df, dom, 0.5, np.random.default_rng(0), progress=watch)
    assert not hasattr(wrapper, "models_")
    assert heard and heard[0][2].startswith("stratum 1 of 3 (s=0): GEM round 2 of 5")
    assert "of the budget left" in heard[0][2]
    with pytest.raises(ValueError, match="before sampling"):
        wrapper.sample(10, np.random.default_rng(0))
    # without cancelling, every stratum reports every round
    heard.clear()
    StratifiedSynthesizer(lambda: small(rounds=3), ["s"], progress=lambda *a: heard.append(a)).fit(
        df, dom, 0.5, np.random.default_rng(0))
    assert {m.split(":")[0] for _, _, m in heard} == {f"stratum {s} of 3 (s={s - 1})" for s in (1, 2, 3)}
    # one bar over all strata: stratum s's round t is step 3 (s - 1) + t of 9
    assert [(d, t) for d, t, _ in heard] == [(2, 9), (3, 9), (5, 9), (6, 9), (8, 9), (9, 9)]


def test_sampling_any_size_reuses_one_program_and_keeps_the_domain():
    model = small(rounds=2).fit(correlated(400), DOMAIN, 1.0, np.random.default_rng(0))
    sizes = {}
    for n in (0, 1, 17, 5000):
        out = model.sample(n, np.random.default_rng(n))
        assert len(out) == n and list(out.columns) == list(DOMAIN)
        for c, k in DOMAIN.items():
            assert out[c].between(0, k - 1).all()
        with Compiles() as compiled:
            model.sample(n + 1, np.random.default_rng(n))
        sizes[n] = compiled.count
    assert set(sizes.values()) == {0}
    with pytest.raises(ValueError, match="zero or more"):
        model.sample(-1, np.random.default_rng(0))


@pytest.mark.slow
def test_stratum_rounds_follow_the_share_of_rows_and_each_stratum_spends_its_budget():
    df, dom = strata_frame(2000)
    df["s"] = np.repeat([0, 1, 2], [1500, 400, 100])      # public sizes: 75%, 20%, 5% of the rows
    rho = 0.4
    wrapper = StratifiedSynthesizer(lambda: small(rounds=40, steps=2, scale_rounds=True), ["s"],
                                    size_policy="public")
    wrapper.fit(df, dom, rho, np.random.default_rng(2))
    rounds = {key: m.rounds for key, m in wrapper.models_.items()}
    assert sorted(rounds.values()) == [10, 10, 30]          # ceil(40 x share), at least 10
    for model in wrapper.models_.values():
        assert abs(model.ledger_.total("rho") - rho) <= 1e-9
        # every round run is recorded; with scale_rounds a fit also runs no more than its noisy total carries
        assert model.rounds_run_ == fit_rounds(model.rounds, model.n_estimate_, rho - rho / model.rounds)
        assert len(model.ledger_) == 1 + 2 * (model.rounds_run_ - 1)
    unscaled = StratifiedSynthesizer(lambda: small(rounds=40, steps=2), ["s"], size_policy="public")
    assert {m.rounds for m in unscaled.fit(df, dom, rho, np.random.default_rng(2)).models_.values()} == {40}
    assert small(rounds=40, scale_rounds=True).for_stratum(float("nan")).rounds == 40


class FixedNoise:
    """Seeded one-way noise, then fixed two-way draws and reported sigmas, one pair per call in order."""

    secure = False

    def __init__(self, draws, sigmas):
        from core.synthesis.noise import SeededNoise

        self.seeded = SeededNoise(np.random.default_rng(0))
        self.draws, self.sigmas, self.calls = list(draws), list(sigmas), 0

    def gaussian(self, sensitivity, rho, size):
        self.calls += 1
        if self.calls <= 2:                    # round 1: the two one-way tables
            return self.seeded.gaussian(sensitivity, rho, size)
        k = self.calls - 3
        return np.full(size, self.draws[k], float), self.sigmas[k]

    def choose(self, scores, epsilon):
        return 0


@pytest.mark.slow
def test_a_marginal_measured_twice_keeps_both_at_their_inverse_variance_mean():
    df = correlated(600)[["a", "b"]]                 # one pair: every later round measures a x b
    dom = {"a": 2, "b": 3}
    exact = pd.crosstab(df["a"], df["b"]).reindex(index=range(2), columns=range(3), fill_value=0).to_numpy(float)
    noise = FixedNoise(draws=[10.0, -20.0], sigmas=[1.0, 3.0])
    model = small(rounds=3).fit(df, dom, 0.5, np.random.default_rng(0), noise=noise)
    y, sigma = model.measurements_[("a", "b")]
    want = exact + (10.0 / 1.0 + -20.0 / 9.0) / (1.0 + 1.0 / 9.0)
    np.testing.assert_allclose(y, want)
    assert sigma == pytest.approx(math.sqrt(1.0 / (1.0 + 1.0 / 9.0)))
    # neither the last draw alone (overwritten) nor the plain mean
    assert not np.allclose(y, exact - 20.0) and not np.allclose(y, exact - 5.0)
    assert [r["times_measured"] for r in model.rounds_] == [1, 2]
    # the ledger still records both paid measurements, and the second says it was averaged in
    meas = [s for s in model.ledger_.spends if s.label.endswith("measurement")]
    assert len(meas) == 2 and all(s.amount > 0 for s in meas)
    assert "averaged with 1 earlier" in meas[1].measured and "earlier" not in meas[0].measured
    assert abs(model.ledger_.total("rho") - 0.5) <= 1e-9


def test_repeated_measurements_raise_the_loss_weight_by_their_precision():
    from core.synthesis.gem import Measurements

    m = Measurements()
    y, s = m.add("x", np.array([4.0, 0.0]), 2.0)
    assert s == pytest.approx(2.0) and np.allclose(y, [4.0, 0.0])
    y, s = m.add("x", np.array([0.0, 4.0]), 2.0)      # equal sigmas: the plain mean, variance halved
    assert np.allclose(y, [2.0, 2.0]) and s == pytest.approx(math.sqrt(2.0))
    assert m.count["x"] == 2
    with pytest.raises(ValueError, match="positive finite sigma"):
        m.add("x", np.zeros(2), 0.0)
    with pytest.raises(ValueError, match="share a shape"):
        m.add("x", np.zeros(3), 1.0)
    assert m.count["x"] == 2 and np.allclose(m.get("x")[0], [2.0, 2.0])   # nothing lost on bad input
    # in a fit, a pair measured k times at the round's sigma has about k times the precision
    df = correlated(600)[["a", "b"]]
    model = small(rounds=4).fit(df, {"a": 2, "b": 3}, 0.5, np.random.default_rng(1))
    last = model.rounds_[-1]
    assert last["times_measured"] == 3
    assert last["combined_sigma"] == pytest.approx(last["sigma"] / math.sqrt(3), rel=1e-6)


def test_seeded_runs_with_repeated_marginals_are_reproducible():
    df = correlated(600)[["a", "b"]]

    def run():
        m = small(rounds=4).fit(df, {"a": 2, "b": 3}, 0.5, np.random.default_rng(8))
        return m.sample(300, np.random.default_rng(9)), m.measurements_[("a", "b")][0]
    (one, y1), (two, y2) = run(), run()
    pd.testing.assert_frame_equal(one, two)
    np.testing.assert_array_equal(y1, y2)


@pytest.mark.slow
def test_parity_and_group_metrics_flow_through_the_sweep():
    df = correlated(1200, 9).astype(str).astype("category")
    df["sex"] = pd.Categorical(np.random.default_rng(1).choice(["F", "M"], len(df)))
    plan = SynthesisPlan(data=DataRef("cps"), columns=("a", "b", "c", "sex"), strata=("sex",), target="c",
                         synthesizer="gem", synth_params=GEMParams(rounds=3, steps=5, batch=64, scale_rounds=False),
                         size_policy="public", sizes_declared_public=True,
                         sweep=SweepPlan(epsilons=(5.0,), seeds=(0,), n_trees=5))
    result = run_sweep(plan, df, n_jobs=1)
    overall = result.overall_metrics
    assert {"parity_error", "max_disparity", "tvd_2way", "accuracy"} <= set(overall["metric"])
    assert np.isfinite(overall["value"]).all()
    assert set(result.group_metrics["method"]) == {"stratified", "pooled"}
    assert np.isfinite(result.group_metrics["value"]).all()
    # the stratified fit's ledger: every stratum's one-way marginals and rounds 2..3, by category name
    led = result.ledger
    for name in ("F", "M"):
        own = led[led["part"] == name]
        assert own["label"].tolist() == [f"stratum {name}: round 1: one-way marginals",
                                         f"stratum {name}: round 2: selection", f"stratum {name}: round 2: measurement",
                                         f"stratum {name}: round 3: selection", f"stratum {name}: round 3: measurement"]
        assert abs(own["rho_equivalent"].sum() - rho_for_epsilon(5.0, plan.delta)) <= 1e-9
    assert (led["composition"] == "parallel").all() and "2 disjoint parts" in result.budget_statement


def planned_ledger(rho: float, planned: int, run: int, d: int, chosen: list[str]) -> list[tuple[str, float, str]]:
    """(label, rho, what was measured) of every spend a GEM fit plans, from the closed forms: round 1 costs
    rho / planned on the d one-way tables (L2 sensitivity sqrt(d)); the ``run`` - 1 later rounds share the
    rest evenly, each split alpha : 1 - alpha of epsilon0 between the exponential mechanism
    (epsilon0^2 alpha^2 / 8) and a two-way Gaussian (the round's remainder). ``chosen``: the marginal each
    later round measured (the mechanism's adaptive choice, read from the fit)."""
    first = rho / planned
    later = (rho - first) / (run - 1)
    eps0_sq = later / (SELECT_SHARE ** 2 / 8 + (1 - SELECT_SHARE) ** 2 / 2)
    select = SELECT_SHARE ** 2 * eps0_sq / 8
    measure = later - select
    pairs = d * (d - 1) // 2
    rows = [("round 1: one-way marginals", first,
             f"{d} one-way count tables, sigma {math.sqrt(d) / math.sqrt(2 * first):.3g} each")]
    for t, name in enumerate(chosen, start=2):
        before = chosen[:t - 2].count(name)
        rows += [(f"round {t}: selection", select,
                  f"exponential mechanism over {pairs} marginals, epsilon {math.sqrt(8 * select):.3g}"),
                 (f"round {t}: measurement", measure, f"Gaussian counts of {name}, sigma {1 / math.sqrt(2 * measure):.3g}"
                  + (f"; averaged with {before} earlier measurement(s) of it" if before else ""))]
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("n, scale_rounds", [(3000, False), (300, True)])
def test_the_ledger_is_the_planned_rounds_and_spends(n, scale_rounds):
    """How the generator is trained (rows per step, program shapes, steps) never changes what a fit spends:
    its ledger is the planned rounds and spends, line for line. With ``scale_rounds`` a small file runs
    only the rounds its noisy total carries (``fit_rounds``), the later ones sharing what round 1 left."""
    df = correlated(n, 4)
    df["d"] = np.random.default_rng(5).integers(0, 4, n)
    dom = {**DOMAIN, "d": 4}
    rho, planned = 0.005, 8
    model = small(rounds=planned, scale_rounds=scale_rounds).fit(df, dom, rho, np.random.default_rng(6))
    run = fit_rounds(planned, model.n_estimate_, rho - rho / planned) if scale_rounds else planned
    assert model.rounds_run_ == run and (run < planned) == scale_rounds
    want = planned_ledger(rho, planned, run, len(dom), [r["marginal"] for r in model.rounds_])
    got = [(s.label, s.amount, s.measured) for s in model.ledger_.spends]
    assert [(label, text) for label, _, text in got] == [(label, text) for label, _, text in want]
    np.testing.assert_allclose([a for _, a, _ in got], [a for _, a, _ in want], rtol=1e-12, atol=0)
    assert all(s.unit == "rho" and s.composition == "sequential" for s in model.ledger_.spends)
    assert math.fsum(a for _, a, _ in got) == pytest.approx(rho, rel=1e-12)


@pytest.mark.slow
def test_a_seeded_fit_spends_the_same_whatever_the_network_and_training_settings():
    """The rounds a fit runs depend on its noisy total (round 1); the generator's size and training settings
    (width, noise input, rows per step, steps, learning rate) must not move that noise, so a seed's ledger
    amounts, its noisy total and its rounds stay the same when only how the generator trains changes."""
    df = correlated(300, 4)
    rho = 0.005

    def fit(**kw):
        return small(rounds=8, scale_rounds=True, **kw).fit(df, DOMAIN, rho, np.random.default_rng(6))

    base = fit()
    for other in (fit(hidden=48, noise_dim=12, batch=64, steps=7, learning_rate=3e-3), fit(hidden=16, batch=256)):
        assert other.n_estimate_ == base.n_estimate_
        assert other.rounds_run_ == base.rounds_run_ < 8                  # cut to the noisy total, identically
        assert ([(s.label, s.amount) for s in other.ledger_.spends]
                == [(s.label, s.amount) for s in base.ledger_.spends])


def test_layout_places_each_pair_in_its_block_of_real_cells_and_back():
    from core.synthesis.gem import Layout

    layout = Layout([2, 3, 1])                     # C = 6 real cells of a padded (3, 3) table
    assert layout.C == 6 and layout.one_way(np.arange(9.0).reshape(3, 3)).tolist() == [0, 1, 3, 4, 5, 6]
    cells = np.arange(36.0).reshape(6, 6)
    pairs = layout.pairs(cells)                    # pairs (0, 1), (0, 2), (1, 2), padded to 3 x 3
    np.testing.assert_array_equal(pairs[0], [[2, 3, 4], [8, 9, 10], [0, 0, 0]])
    np.testing.assert_array_equal(pairs[1], [[5, 0, 0], [11, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(pairs[2], [[17, 0, 0], [23, 0, 0], [29, 0, 0]])
    for k, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)]):
        np.testing.assert_array_equal(cells[layout.block(i, j)], pairs[k, :[2, 3, 1][i], :[2, 3, 1][j]])
    rows = np.arange(12.0).reshape(2, 6)
    np.testing.assert_array_equal(layout.padded(rows)[1], [[6, 7, 0], [8, 9, 10], [11, 0, 0]])


def test_generator_rows_are_a_softmax_per_column_and_the_answers_their_averaged_products():
    """Closed form: with the hidden layers' weights zero the logits are the output bias, so every row
    is the per-column softmax of the bias; columns whose logits lie hundreds apart (beyond float32's
    exp range) still give finite probabilities summing to 1 per column."""
    import jax
    import jax.numpy as jnp

    from core.synthesis.gem import Layout, programs

    sizes = [3, 1, 2]
    layout = Layout(sizes)
    prog = programs(3, 3, 4, 5, 8, 1, 1e-3, 0.9)
    bias = np.array([300.0, 301.0, 299.0, -400.0, 0.5, -0.5], np.float32)
    params = {"l1": {"w": np.zeros((4, 5), np.float32), "b": np.zeros(5, np.float32)},
              "l2": {"w": np.zeros((5, 5), np.float32), "b": np.zeros(5, np.float32)},
              "out": {"w": np.zeros((5, 6), np.float32), "b": bias}}
    params = jax.tree.map(jnp.asarray, params)
    z = jnp.asarray(np.random.default_rng(0).normal(size=(7, 4)), jnp.float32)
    p = np.asarray(prog.probs(params, z, layout.device()), float)
    want = np.concatenate([np.exp(b - b.max()) / np.exp(b - b.max()).sum()
                           for b in np.split(bias.astype(float), np.cumsum(sizes)[:-1])])
    np.testing.assert_allclose(p, np.broadcast_to(want, p.shape), rtol=1e-6, atol=1e-7)
    answers = np.asarray(prog.answers(params, z, layout.device()), float)
    np.testing.assert_allclose(answers, np.outer(want, want), rtol=1e-5, atol=1e-7)
