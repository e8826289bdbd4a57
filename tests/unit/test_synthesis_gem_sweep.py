"""GEM through the sweep: parity error and per-group metrics come out finite for both methods, and the
stratified run's ledger lists every stratum's GEM rounds in parallel (the AIM sweep test's twin)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.contracts import DataRef
from core.privacy.accounting import rho_for_epsilon
from core.synthesis import GEMParams, SweepPlan, SynthesisPlan
from core.synthesis.sweep import run_sweep


def correlated(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.8, a + rng.integers(0, 2, n), rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.7, (b > 0).astype(int), rng.integers(0, 2, n))
    return pd.DataFrame({"a": a, "b": b, "c": c})


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
