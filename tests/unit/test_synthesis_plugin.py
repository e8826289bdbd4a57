"""A synthesizer is one class plus one Spec line: registered that way, it runs every part of a
synthesis plan (sweep, marginals, release) with no other table to teach, and the noise table reads
the budget split it states itself."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef, Spec
from core.datasets import load_cps
from core.privacy.accounting import gaussian_sigma, rho_for_epsilon
from core.synthesis import SYNTHESIZERS, MarginalsPlan, ReleasePlan, SweepPlan, SynthesisPlan, run
from core.synthesis.noise import noise_source


@dataclass(frozen=True)
class HalfAndHalfParams:
    """No settings."""


class HalfAndHalf:
    """Noisy one-way marginals measured twice, each time with half the budget, averaged; columns drawn
    independently. Each measurement is d histograms at once: L2 sensitivity sqrt(d)."""

    def planned_sds(self, d: int, rho: float) -> tuple[float, float]:
        # the average of two draws of sd gaussian_sigma(sqrt d, rho / 2) has that sd over sqrt 2
        return gaussian_sigma(math.sqrt(max(d, 1)), rho / 2) / math.sqrt(2), math.nan

    def fit(self, df: pd.DataFrame, domain, rho: float, rng: np.random.Generator, noise=None) -> "HalfAndHalf":
        noise = noise_source(rng, noise)
        d = len(df.columns)
        self.columns_, self.probs_ = list(df.columns), {}
        for col in self.columns_:
            counts = np.bincount(df[col].to_numpy(np.int64), minlength=domain[col]).astype(float)
            draws = [noise.gaussian(math.sqrt(d), rho / 2, domain[col])[0] for _ in range(2)]
            noisy = np.maximum(counts + (draws[0] + draws[1]) / 2, 0.0)
            self.probs_[col] = noisy / noisy.sum() if noisy.sum() > 0 else np.full(noisy.size, 1 / noisy.size)
        return self

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        return pd.DataFrame({c: rng.choice(p.size, int(n), p=p) for c, p in self.probs_.items()})


@pytest.fixture
def plugin(monkeypatch):
    """The throwaway synthesizer in the registry for this test only (worker processes would import the
    registry afresh without it, so the fits stay in this process)."""
    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")
    monkeypatch.setattr(SYNTHESIZERS, "_specs", dict(SYNTHESIZERS._specs))
    SYNTHESIZERS.register(Spec("half", "Half and half", lambda p: HalfAndHalf(), HalfAndHalfParams))
    return "half"


def test_a_synthesizer_added_with_one_spec_line_runs_a_whole_plan(plugin):
    cols = ("education", "marital", "sex", "race", "income")
    frame = load_cps().sample(2000, random_state=1).reset_index(drop=True)[list(cols)]
    plan = SynthesisPlan(data=DataRef("cps"), columns=cols, synthesizer=plugin,
                         sweep=SweepPlan(epsilons=(0.5, 2.0), seeds=(0,), n_trees=5),
                         marginals=MarginalsPlan(2.0, 0), release=ReleasePlan(epsilon=1.0))
    result = run(plan, frame)
    # the noise table follows the synthesizer's own statement of its split
    noise = result.noise.set_index("epsilon")
    rho = rho_for_epsilon(2.0, plan.delta)
    d = len(cols) - len(plan.strata)
    assert noise.loc[2.0, "stratum one-way cell sd"] == pytest.approx(
        gaussian_sigma(math.sqrt(d), 0.9 * rho / 2) / math.sqrt(2))
    assert noise.loc[2.0, "pooled one-way cell sd"] == pytest.approx(
        gaussian_sigma(math.sqrt(len(cols)), rho / 2) / math.sqrt(2))
    assert noise["stratum two-way cell sd"].isna().all()
    # every tab ran on it
    assert set(result.sweep.overall_metrics["method"]) == {"stratified", "pooled"}
    assert result.sweep.main_measure == "tvd_2way"
    assert len(result.marginals[1]) > 0
    assert len(result.release.data) > 0
    head = result.headline()
    assert "worst-group two-way TVD, stratified, epsilon 2" in head and "release rho" in head
    assert head["release rho"] == pytest.approx(rho_for_epsilon(1.0, plan.delta))


def test_a_synthesizer_that_states_no_plan_leaves_its_noise_unknown(monkeypatch):
    """Without ``planned_sds`` the noise table says nothing (NaN) rather than refusing the run."""
    monkeypatch.setattr(SYNTHESIZERS, "_specs", dict(SYNTHESIZERS._specs))

    class Silent(HalfAndHalf):
        planned_sds = None

    SYNTHESIZERS.register(Spec("silent", "Silent", lambda p: Silent(), HalfAndHalfParams))
    from core.synthesis.sweep import noise_table

    plan = SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "income"), strata=("sex",),
                         synthesizer="silent")
    table = noise_table(plan, (1.0,))
    assert table[["stratum one-way cell sd", "stratum two-way cell sd", "pooled one-way cell sd"]].isna().all().all()
