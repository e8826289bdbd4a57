"""AIM on tiny domains: exact accounting, recovery with a huge budget, staying within a tiny one,
parallel composition when stratified, progress and cancellation, and the sweep's metrics."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.contracts import Cancelled, DataRef, plan_from_dict
from core.synthesis import AIMParams, SweepPlan, SynthesisPlan, StratifiedSynthesizer, make_synthesizer
from core.synthesis.aim import AIM, candidate_weights, workload_cliques
from core.synthesis.metrics import two_way_tvd
from core.synthesis.sweep import run_sweep
from synthesis_toys import DOMAIN, correlated


def test_workload_respects_the_cell_cap_and_weights_overlap():
    dom = {"a": 2, "b": 3, "c": 50}
    assert workload_cliques(list(dom), dom, 2, 100) == [("a", "b"), ("a", "c")]
    w = candidate_weights(workload_cliques(list(dom), dom, 3, 1000))
    assert set(w) == {("a", "b", "c"), ("a", "b"), ("a", "c"), ("b", "c")}
    assert w[("a", "b", "c")] == 3 and w[("a", "b")] == 2


def test_huge_budget_recovers_the_workload_marginals():
    df = correlated()
    model = AIM(max_rounds=6, iters=300).fit(df, DOMAIN, 1e4, np.random.default_rng(1))
    for pair in [("a", "b"), ("a", "c"), ("b", "c")]:
        real = pd.crosstab(df[pair[0]], df[pair[1]]).to_numpy() / len(df)
        assert np.abs(model.model_table(pair) - real).sum() / 2 < 0.02
    synth = model.sample(len(df), np.random.default_rng(2))
    assert two_way_tvd(df, synth, DOMAIN)["tvd"].max() < 0.04
    assert math.isclose(model.ledger_.total("rho"), 1e4, rel_tol=0, abs_tol=1e-9 * 1e4)


def test_tiny_budget_stops_within_budget_and_records_every_round():
    rho = 1e-4
    model = AIM(max_rounds=8, iters=50).fit(correlated(), DOMAIN, rho, np.random.default_rng(3))
    spends = model.ledger_.spends
    assert abs(model.ledger_.total("rho") - rho) <= 1e-9
    assert math.fsum(s.amount for s in spends) <= rho + 1e-15
    assert len(spends) == 1 + 2 * len(model.rounds_)
    assert [s.label for s in spends[1:3]] == ["round 1: selection", "round 1: measurement"]
    assert model.sample(10, np.random.default_rng(0)).shape == (10, 3)


def test_stratified_aim_composes_in_parallel_over_strata():
    df = correlated(2000, 5)
    df["s"] = np.random.default_rng(6).integers(0, 2, len(df))
    dom = {**DOMAIN, "s": 2}
    rho = 0.5
    wrapper = StratifiedSynthesizer(lambda: AIM(max_rounds=3, iters=50), ["s"], size_policy="public")
    wrapper.fit(df, dom, rho, np.random.default_rng(7))
    assert abs(wrapper.ledger_.total("rho") - rho) <= 1e-9
    for model in wrapper.models_.values():
        assert abs(model.ledger_.total("rho") - rho) <= 1e-9
    assert len(wrapper.sample(100, np.random.default_rng(8))) == 100


def test_progress_reports_rounds_and_can_cancel():
    seen = []

    def progress(done, total, message):
        seen.append((done, total, message))
        raise Cancelled("stop")

    with pytest.raises(Cancelled):
        AIM(max_rounds=4, iters=20).fit(correlated(500), DOMAIN, 1.0, np.random.default_rng(0), progress=progress)
    assert seen[0][:2] == (1, 4) and "budget left" in seen[0][2]


def test_registry_and_plan_round_trip():
    params = AIMParams(degree=3, max_rounds=10)
    assert isinstance(make_synthesizer("aim", params), AIM)
    plan = SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income"), strata=("sex",),
                         synthesizer="aim", synth_params=params)
    assert plan_from_dict(plan.to_dict()) == plan
    with pytest.raises(ValueError):
        AIMParams(degree=4)


def test_parity_and_group_metrics_flow_through_the_sweep():
    df = correlated(1200, 9).astype(str).astype("category")
    df["sex"] = pd.Categorical(np.random.default_rng(1).choice(["F", "M"], len(df)))
    plan = SynthesisPlan(data=DataRef("cps"), columns=("a", "b", "c", "sex"), strata=("sex",), target="c",
                         synthesizer="aim", synth_params=AIMParams(max_rounds=3),
                         size_policy="public", sizes_declared_public=True,
                         sweep=SweepPlan(epsilons=(5.0,), seeds=(0,), n_trees=5))
    result = run_sweep(plan, df, n_jobs=1)
    overall = result.overall_metrics
    assert {"parity_error", "max_disparity", "tvd_2way", "accuracy"} <= set(overall["metric"])
    assert np.isfinite(overall["value"]).all()
    assert set(result.group_metrics["method"]) == {"stratified", "pooled"}
    assert np.isfinite(result.group_metrics["value"]).all()


@pytest.mark.slow
def test_fit_and_sample_never_import_jax():
    """The estimator on AIM's hot path is numpy: no JAX program is built (mbi is only a reference)."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "import numpy as np, pandas as pd\n"
        "from core.synthesis.aim import AIM\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.integers(0, 2, 800); b = (a + rng.integers(0, 2, 800)) % 3; c = rng.integers(0, 2, 800)\n"
        "df = pd.DataFrame({'a': a, 'b': b, 'c': c})\n"
        "m = AIM(max_rounds=3, iters=30).fit(df, {'a': 2, 'b': 3, 'c': 2}, 1.0, np.random.default_rng(1))\n"
        "m.sample(10, np.random.default_rng(2))\n"
        "assert len(m.rounds_) >= 1\n"
        "assert 'jax' not in sys.modules and 'mbi' not in sys.modules, 'jax imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], check=True)


def test_seeded_fit_is_reproducible():
    df = correlated(1500, 12)
    one = AIM(max_rounds=4, iters=60).fit(df, DOMAIN, 0.5, np.random.default_rng(21))
    two = AIM(max_rounds=4, iters=60).fit(df, DOMAIN, 0.5, np.random.default_rng(21))
    assert [r["marginal"] for r in one.rounds_] == [r["marginal"] for r in two.rounds_]
    assert np.array_equal(one.model_table(("a", "b")), two.model_table(("a", "b")))
    s1, s2 = one.sample(200, np.random.default_rng(5)), two.sample(200, np.random.default_rng(5))
    assert s1.equals(s2)


def test_a_model_size_cap_nothing_fits_spends_the_rest_on_one_way_marginals():
    from core.contracts import make_rng
    from core.synthesis.aim import AIM

    rng = make_rng(4)
    a = rng.integers(0, 6, 2000)
    df = pd.DataFrame({"a": a, "b": (a + rng.integers(0, 2, 2000)) % 6, "c": rng.integers(0, 6, 2000)})
    dom = {"a": 6, "b": 6, "c": 6}
    model = AIM(max_model_mb=1e-9, max_rounds=4, iters=20).fit(df, dom, 0.5, make_rng(5))
    assert abs(model.ledger_.total("rho") - 0.5) <= 1e-9                 # nothing left unspent
    assert all(len(cl) == 1 for cl in model.measured_)                  # no marginal broke the cap
    assert model.ledger_.spends[-1].label == "rest of the budget: one-way marginals"
