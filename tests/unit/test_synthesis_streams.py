"""Each number of the synthesis results depends only on its own part of the plan: each stratum,
epsilon, seed and method draws from its own stream, so adding or removing one never moves another."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.synthesis.mean_study import run_means
from core.synthesis.plan import MeansPlan
from core.synthesis.stratified import StratifiedSynthesizer
from core.synthesis.synthesizers import IndependentMarginals

SIZES = {"s=0": 30, "s=1": 200, "s=2": 300}


def _toy() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    s = np.repeat([0, 1, 2], list(SIZES.values()))
    return pd.DataFrame({"s": s, "a": rng.integers(0, 3, s.size), "b": rng.integers(0, 4, s.size)})


def _rows(small_action: str) -> pd.DataFrame:
    df = _toy()
    model = StratifiedSynthesizer(IndependentMarginals, ("s",), size_policy="public", min_size=50,
                                  small_action=small_action, public_sizes=SIZES)
    model.fit(df, {"s": 3, "a": 3, "b": 4}, 1.0, np.random.default_rng(11))
    n = sum(SIZES.values()) - (SIZES["s=0"] if small_action == "drop" else 0)
    return model.sample(n, np.random.default_rng(12))


def test_dropping_a_small_stratum_leaves_the_other_strata_rows_where_they_were():
    kept, dropped = _rows("keep"), _rows("drop")
    assert (kept["s"] == 0).sum() == 30 and (dropped["s"] == 0).sum() == 0
    for stratum in (1, 2):
        def rows(out):
            return out[out["s"] == stratum].sort_values(["a", "b"]).reset_index(drop=True)
        assert len(rows(kept)) == SIZES[f"s={stratum}"]
        pd.testing.assert_frame_equal(rows(kept), rows(dropped))


def test_adding_an_epsilon_leaves_the_other_epsilons_mean_curves_where_they_were():
    sizes = (400, 250, 90)
    few = run_means(MeansPlan(epsilons=(1.0, 5.0), runs=5, coinpress_runs=2), sizes, 1e-9).curves
    more = run_means(MeansPlan(epsilons=(0.1, 1.0, 5.0), runs=5, coinpress_runs=2), sizes, 1e-9).curves
    more = more[more["epsilon"] != 0.1].reset_index(drop=True)
    pd.testing.assert_frame_equal(few, more)
    assert few.query("kind == 'simulated |error|'")["value"].nunique() > 2     # real draws, not constants


def test_each_fit_of_a_sweep_has_its_own_stream():
    """(seed, epsilon, method) keys the fit: the same key gives the same stream, any other key another."""
    from core.synthesis.sweep import fit_rng

    first = fit_rng(0, 1.0, "stratified").random(3)
    assert first.tolist() == pytest.approx(fit_rng(0, 1.0, "stratified").random(3).tolist())
    others = [fit_rng(1, 1.0, "stratified"), fit_rng(0, 5.0, "stratified"), fit_rng(0, 1.0, "pooled")]
    assert all(not np.allclose(first, r.random(3)) for r in others)


def test_a_seeded_noise_source_is_not_shared_between_strata():
    """The release path hands the wrapper a seeded noise source: each stratum still draws its privacy
    noise from its own stream, so keeping or dropping a small stratum leaves the others' models as they were."""
    from core.synthesis.noise import SeededNoise

    def fitted(small_action):
        rng = np.random.default_rng(11)
        model = StratifiedSynthesizer(IndependentMarginals, ("s",), size_policy="public", min_size=50,
                                      small_action=small_action, public_sizes=SIZES)
        return model.fit(_toy(), {"s": 3, "a": 3, "b": 4}, 1.0, rng, noise=SeededNoise(rng))

    kept, dropped = fitted("keep"), fitted("drop")
    assert "s=0" in kept.models_ and "s=0" not in dropped.models_
    for key in ("s=1", "s=2"):
        for col in ("a", "b"):
            assert kept.models_[key].marginals_[col].tolist() == pytest.approx(
                dropped.models_[key].marginals_[col].tolist())
