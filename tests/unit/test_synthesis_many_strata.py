"""Stratified synthesis with many small strata: the work per stratum is bounded and shared (counted, never
timed), GEM's rows enter once through its marginal tables, results stay where they were meant to, and
round progress reaches the caller from worker processes too."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from core.contracts import Cancelled
from core.synthesis import StratifiedSynthesizer
from core.synthesis import gem as gem_module
from core.synthesis.gem import GEM, generator_rows, program_shapes, programs, row_buckets
from synthesis_toys import DOMAIN, correlated

STRATA = 36


def many_strata(n: int = 1800, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """The toy table split over 36 strata of very different sizes (a few large, most tiny, some empty)."""
    df = correlated(n, seed)
    weights = np.r_[np.full(4, 50.0), np.full(26, 1.0), np.zeros(STRATA - 30)]
    df["s"] = np.random.default_rng(seed + 1).choice(STRATA, size=n, p=weights / weights.sum())
    return df, {**DOMAIN, "s": STRATA}


def test_generator_rows_come_in_a_few_buckets_bounded_by_the_noisy_rows():
    assert row_buckets(1000) == (1000, 250, 62)
    assert row_buckets(128) == (128, 32, 16)
    assert row_buckets(10) == (10,)
    assert generator_rows(1000, 50_000) == 1000 and generator_rows(1000, 1000) == 1000
    assert generator_rows(1000, 999) == 250 and generator_rows(1000, 250) == 250
    assert generator_rows(1000, 100) == 62 and generator_rows(1000, 1.0) == 62
    assert generator_rows(1000, float("nan")) == 1000


HIDDEN = 13   # a shape no other test builds, so the programs counted below are these fits' alone


@pytest.fixture(scope="module")
def fitted_36():
    """One stratified GEM fit over 36 strata (DP counts, rounds scaled to the strata), then a sample."""
    df, dom = many_strata()
    make = lambda: GEM(rounds=12, steps=1, batch=64, hidden=HIDDEN, noise_dim=4, scale_rounds=True)  # noqa: E731
    wrapper = StratifiedSynthesizer(make, ["s"], size_policy="dp_count", count_share=0.1).fit(
        df, dom, 1.0, np.random.default_rng(0))
    wrapper.sample(500, np.random.default_rng(1))
    return wrapper


def test_compiled_programs_across_36_strata_are_bounded_by_the_buckets(fitted_36):
    assert len(fitted_36.models_) == STRATA
    used = {m.batch_ for m in fitted_36.models_.values()}
    assert used == set(row_buckets(64))             # large strata 64 generator rows a step, tiny ones 16
    built = [s for s in program_shapes() if s[0] == 3 and s[3] == HIDDEN]
    assert len(built) == len(row_buckets(64))       # one program set per bucket (the sampler uses the first)
    for shape in built:
        prog = programs(*shape)
        # each jitted step traced and compiled once for all 36 strata
        assert prog.train._cache_size() == 1 and prog.answers._cache_size() == 1


def test_small_strata_run_fewer_generator_rows_and_spend_the_whole_budget(fitted_36):
    sizes = dict(zip(fitted_36.strata_["stratum"], fitted_36.strata_["size_used"]))
    for key, model in fitted_36.models_.items():
        assert abs(model.ledger_.total("rho") - 0.9) <= 1e-9                      # every stratum, all of it
        assert model.batch_ == generator_rows(64, model.n_estimate_)              # from its own noisy total
        assert 10 <= len(model.rounds_) + 1 <= 12                                 # rounds bounded below and above
        if sizes[key] > 400:
            assert model.batch_ == 64
    assert abs(fitted_36.ledger_.total("rho") - 1.0) <= 1e-9


def test_merge_policy_fits_tiny_strata_as_one_model():
    df, dom = many_strata()
    make = lambda: GEM(rounds=2, steps=1, batch=64, hidden=HIDDEN, noise_dim=4)  # noqa: E731
    wrapper = StratifiedSynthesizer(make, ["s"], size_policy="dp_count", min_size=40, small_action="merge").fit(
        df, dom, 1.0, np.random.default_rng(0))
    small = wrapper.strata_["fate"] == "merged"
    assert small.sum() >= 26
    assert len(wrapper.models_) == STRATA - small.sum() + 1


class Recorder:
    """Wraps GEM's program builder: every array handed to a compiled step, by shape."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []
        self.train_calls = 0

    def wrap(self, real):
        def build(*key):
            prog = real(*key)

            def record(fn, is_train):
                def call(*args):
                    import jax
                    if is_train:
                        self.train_calls += 1
                    self.shapes += [tuple(np.shape(a)) for a in jax.tree.leaves(args)]
                    return fn(*args)
                return call
            return gem_module.Programs(probs=prog.probs, answers=record(prog.answers, False),
                                       train=record(prog.train, True), init_opt=prog.init_opt)
        return build


def test_gem_counts_rows_once_and_no_step_touches_them(monkeypatch):
    counted = []
    real_counts = gem_module.exact_marginals

    def counting(arr, sizes, pairs):
        counted.append(len(arr))
        return real_counts(arr, sizes, pairs)

    monkeypatch.setattr(gem_module, "exact_marginals", counting)
    calls = {}
    for n in (1237, 3 * 1237):
        rec = Recorder()
        monkeypatch.setattr(gem_module, "programs", rec.wrap(programs))
        GEM(rounds=6, steps=1, batch=64, hidden=HIDDEN, noise_dim=4).fit(correlated(n), DOMAIN, 1.0,
                                                                     np.random.default_rng(0))
        assert all(n not in shape for shape in rec.shapes)        # no step receives anything row-sized
        calls[n] = rec.train_calls
    assert counted == [1237, 3 * 1237]                            # one pass over the rows per fit
    assert calls[1237] == calls[3 * 1237] == 6                     # work per fit does not grow with rows


def test_fits_with_more_rows_than_the_batch_are_unchanged(monkeypatch):
    df = correlated(3000)
    model = GEM(rounds=4, steps=1, batch=64, hidden=HIDDEN, noise_dim=4)
    new = model.fit(df, DOMAIN, 1.0, np.random.default_rng(3)).sample(400, np.random.default_rng(4))
    assert model.batch_ == 64
    # the rule before generator rows were bounded: always the full batch
    monkeypatch.setattr(gem_module, "generator_rows", lambda batch, n: batch)
    old = GEM(rounds=4, steps=1, batch=64, hidden=HIDDEN, noise_dim=4).fit(
        df, DOMAIN, 1.0, np.random.default_rng(3)).sample(400, np.random.default_rng(4))
    pd.testing.assert_frame_equal(new, old)


def test_worker_processes_relay_their_rounds_and_cancel():
    df, dom = many_strata(600)
    df = df[df["s"] < 3].reset_index(drop=True)
    dom = {**DOMAIN, "s": 3}
    make = lambda: GEM(rounds=4, steps=1, batch=32, hidden=8, noise_dim=4)  # noqa: E731
    heard: list[tuple[int, int, str]] = []
    StratifiedSynthesizer(make, ["s"], n_jobs=2, progress=lambda *a: heard.append(a)).fit(
        df, dom, 1.0, np.random.default_rng(0))
    assert any("GEM round" in m for _, _, m in heard)            # rounds of fits on the workers
    done = [d for d, _, _ in heard]
    assert done == sorted(done) and heard[-1][0] == heard[-1][1]  # the bar only moves forward, to the end

    def stop(done, total, message):
        if "GEM round" in message:
            raise Cancelled("stopped")

    wrapper = StratifiedSynthesizer(lambda: GEM(rounds=400, steps=1, batch=32, hidden=8, noise_dim=4), ["s"],
                                    n_jobs=2)
    with pytest.raises(Cancelled):
        wrapper.fit(df, dom, 1.0, np.random.default_rng(0), progress=stop)
    assert not hasattr(wrapper, "models_")
    assert not [t for t in threading.enumerate() if t.name == "round relay"]   # nothing left listening


def test_a_sweep_on_worker_processes_relays_aim_rounds():
    from core.contracts import DataRef
    from core.datasets import load_dataset
    from core.synthesis import AIMParams, SweepPlan, SynthesisPlan
    from core.synthesis.sweep import run_sweep
    from core.synthesis.workflow import prepare

    columns = ("age_band", "education", "sex", "income")
    data = load_dataset("cps").head(2000)[list(columns)].reset_index(drop=True)
    plan = SynthesisPlan(data=DataRef("cps"), columns=columns, strata=("sex",), target=None, synthesizer="aim",
                         synth_params=AIMParams(max_rounds=3), sweep=SweepPlan(epsilons=(2.0,), seeds=(0,)))
    frame, _ = prepare(plan, data)
    heard: list[tuple[int, int, str]] = []
    result = run_sweep(plan, frame, lambda *a: heard.append(a), n_jobs=2)
    assert set(result.overall_metrics["method"]) == {"stratified", "pooled"}
    assert any(" - AIM round" in m for _, _, m in heard)          # rounds from inside the workers' fits
    assert heard[-1][0] == heard[-1][1]
