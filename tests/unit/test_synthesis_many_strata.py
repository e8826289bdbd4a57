"""Stratified synthesis with many small strata: the work per stratum is bounded and shared (counted, never
timed), GEM's rows enter once through its marginal tables, results stay where they were meant to, and
round progress reaches the caller from worker processes too."""
from __future__ import annotations

import os
import threading

import numpy as np
import pandas as pd
import pytest

from core.contracts import Cancelled
from core.synthesis import StratifiedSynthesizer
from core.synthesis import gem as gem_module
from core.synthesis.gem import (GEM, MIN_FIT_ROUNDS, MIN_SIGNAL, fit_rounds, generator_rows, program_shapes,
                                programs, round_budget, row_buckets)
from synthesis_toys import DOMAIN, correlated
from tests.unit.sweep_support import small_aim_sweep

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick

STRATA = 36


def many_strata(n: int = 1800, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """The toy table split over 36 strata of very different sizes (a few large, most tiny, some empty)."""
    df = correlated(n, seed)
    weights = np.r_[np.full(4, 50.0), np.full(26, 1.0), np.zeros(STRATA - 30)]
    df["s"] = np.random.default_rng(seed + 1).choice(STRATA, size=n, p=weights / weights.sum())
    return df, {**DOMAIN, "s": STRATA}


def test_generator_rows_come_in_a_few_buckets_bounded_by_the_noisy_rows():
    assert row_buckets(1000) == (1000, 250, 62, 16)          # a fourth bucket for strata under 62 rows
    assert row_buckets(128) == (128, 32, 16)
    assert row_buckets(10) == (10,)
    assert generator_rows(1000, 50_000) == 1000 and generator_rows(1000, 1000) == 1000
    assert generator_rows(1000, 999) == 250 and generator_rows(1000, 250) == 250
    assert generator_rows(1000, 100) == 62 and generator_rows(1000, 62) == 62
    assert generator_rows(1000, 61) == 16 and generator_rows(1000, 1.0) == 16
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
        assert 10 <= model.rounds <= 12                                           # planned: share, at least 10
        # run: as many of those as the stratum's noisy total carries, at least MIN_FIT_ROUNDS
        assert len(model.rounds_) + 1 == model.rounds_run_ == fit_rounds(model.rounds, model.n_estimate_,
                                                                        0.9 - 0.9 / model.rounds)
        assert MIN_FIT_ROUNDS <= model.rounds_run_ <= model.rounds
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


def test_a_sweep_on_worker_processes_relays_aim_rounds(monkeypatch):
    import queue
    import types

    from core.synthesis import round_relay
    from core.synthesis.sweep import run_sweep

    plan, frame = small_aim_sweep()
    relayed: list[str] = []

    class Recorded(queue.Queue):
        """The relay's queue, remembering every report (the bar shows only the latest of each poll)."""

        def put(self, item, *args, **kwargs):
            relayed.append(item[3])
            super().put(item, *args, **kwargs)

    monkeypatch.setattr(round_relay, "queue_module", types.SimpleNamespace(Queue=Recorded, Empty=queue.Empty))
    heard: list[tuple[int, int, str]] = []
    result = run_sweep(plan, frame, lambda *a: heard.append(a), n_jobs=2)
    assert set(result.overall_metrics["method"]) == {"stratified", "pooled"}
    assert any(" - AIM round" in m for m in relayed)             # rounds from inside the workers' fits
    assert heard and heard[-1][0] == heard[-1][1]


C = round_budget(1.0)[1]   # the measuring share of a round's budget


def test_rounds_follow_the_noisy_total_and_budget_in_closed_form():
    # T - 1 <= n sqrt(2 c rho_rest) / Q, clipped to [MIN_FIT_ROUNDS, rounds]
    unit = MIN_SIGNAL ** 2 / (2 * C)                  # rho_rest at which sqrt(2 c rho_rest) / Q = 1
    assert fit_rounds(50, 11.5, unit) == 12           # 1 + floor(11.5)
    assert fit_rounds(50, 11, unit / 4) == 6          # a quarter of the budget: half the rounds, 1 + floor(5.5)
    assert fit_rounds(50, 200, unit) == 50            # 201 would fit: the planned rounds are the most
    assert fit_rounds(50, 1.5, unit) == MIN_FIT_ROUNDS  # 2 would fit: never fewer than the minimum
    assert fit_rounds(2, 1, 1e-9) == 2                # a fit planned that short keeps its rounds
    assert fit_rounds(50, float("nan"), unit) == 50
    # the curator-sized file (3,500 rows, epsilon 1 at delta 1e-9): 67 rounds instead of 100, its largest
    # stratum (964 rows, 28 planned) 18; the paper's 100 rounds on its 48,842 rows stand from epsilon 0.1 up
    from core.privacy.accounting import rho_for_epsilon
    for eps, n, share, planned, rounds in ((1.0, 3500, 1, 100, 67), (1.0, 964, 0.9, 28, 18),
                                           (1.0, 50_000, 1, 100, 100), (0.1, 48_842, 1, 100, 100),
                                           (1.0, 20, 1, 100, 3)):
        rho = rho_for_epsilon(eps, 1e-9) * share
        assert fit_rounds(planned, n, rho - rho / planned) == rounds


def test_a_small_fit_runs_fewer_rounds_and_still_spends_exactly_its_budget(monkeypatch):
    rho = 0.05
    rec = Recorder()
    monkeypatch.setattr(gem_module, "programs", rec.wrap(programs))
    model = GEM(rounds=20, steps=1, batch=64, hidden=HIDDEN, noise_dim=4, scale_rounds=True).fit(
        correlated(300), DOMAIN, rho, np.random.default_rng(0))
    run = fit_rounds(20, model.n_estimate_, rho - rho / 20)
    assert MIN_FIT_ROUNDS <= run < 20 and model.rounds_run_ == run
    assert rec.train_calls == run                                   # the work done is the rounds run
    spends = [s.amount for s in model.ledger_.spends]
    assert len(spends) == 1 + 2 * (run - 1) and len(model.rounds_) == run - 1
    assert spends[0] == pytest.approx(rho / 20, rel=1e-12)          # round 1 as planned
    later = [spends[k] + spends[k + 1] for k in range(1, len(spends), 2)]
    assert later == pytest.approx([(rho - rho / 20) / (run - 1)] * (run - 1), rel=1e-9)   # the rest shared evenly
    assert abs(model.ledger_.total("rho") - rho) <= 1e-12
    # without scale_rounds the same fit runs every planned round
    assert GEM(rounds=20, steps=1, batch=64, hidden=HIDDEN, noise_dim=4).fit(
        correlated(300), DOMAIN, rho, np.random.default_rng(0)).rounds_run_ == 20


def test_fits_whose_noisy_total_carries_every_round_are_unchanged():
    df = correlated(3000)
    make = lambda scaled: GEM(rounds=6, steps=1, batch=64, hidden=HIDDEN, noise_dim=4, scale_rounds=scaled)  # noqa: E731
    cut = make(True).fit(df, DOMAIN, 1.0, np.random.default_rng(3))
    assert cut.rounds_run_ == 6
    kept = make(False).fit(df, DOMAIN, 1.0, np.random.default_rng(3))
    pd.testing.assert_frame_equal(cut.sample(400, np.random.default_rng(4)), kept.sample(400, np.random.default_rng(4)))
    assert [s.amount for s in cut.ledger_.spends] == [s.amount for s in kept.ledger_.spends]


@pytest.mark.slow
def test_compiled_programs_are_kept_in_a_private_folder_of_the_cache(tmp_path):
    """In a fresh process (JAX takes its compilation cache folder once per process, so in this one an
    earlier test's cache folder may already hold it)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = ("import json, stat, jax\n"
              "from core.synthesis import gem\n"
              "folder = gem.persist_compilation(jax)\n"
              "from pathlib import Path\n"
              "print(json.dumps([str(folder), stat.S_IMODE(Path(folder).stat().st_mode),"
              " jax.config.jax_compilation_cache_dir]))\n")
    env = {**os.environ, "DASHBOARD_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=root,
                         timeout=300, check=True)
    folder, mode, configured = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(folder) == (tmp_path / "cache").absolute() / "jax"
    assert mode & 0o077 == 0                                   # nobody else can plant a program
    assert configured == folder
