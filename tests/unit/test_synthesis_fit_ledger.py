"""Every spend of a fit reaches the release's ledger (and the project ledger), totals stay the budget,
strata compose in parallel, and the noise table follows each synthesizer's own split."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef
from core.privacy.accounting import rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import LedgerRelease, compose, spends_of
from core.synthesis import StratifiedSynthesizer, SynthesisPlan
from core.synthesis.aim import AIM
from core.synthesis.fit_ledger import record_fit
from core.synthesis.plan import ReleasePlan
from core.synthesis.registry import AIMParams, GEMParams, MSTParams
from core.synthesis.release import make_release
from core.synthesis.sweep import measurement_sds, noise_table, readable_ledger

DOMAIN = {"a": 2, "b": 3, "c": 2, "s": 2}


def frame(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.8, a + rng.integers(0, 2, n), rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.7, (b > 0).astype(int), rng.integers(0, 2, n))
    s = rng.integers(0, 2, n)
    return pd.DataFrame({"a": a, "b": b, "c": c, "s": s})


def categories(n: int = 1500) -> pd.DataFrame:
    codes = frame(n)
    names = {"a": ["no", "yes"], "b": ["low", "mid", "high"], "c": ["off", "on"], "s": ["Female", "Male"]}
    return pd.DataFrame({c: pd.Categorical.from_codes(codes[c], names[c]) for c in codes.columns})


class _Fitted:
    def __init__(self, *amounts):
        self.ledger_ = BudgetLedger()
        for i, a in enumerate(amounts):
            self.ledger_.spend(f"round {i + 1}: measurement", a, "rho", measured=f"table {i}, sigma 3")


def test_record_fit_copies_every_line_and_keeps_the_total():
    led = BudgetLedger()
    assert record_fit(led, _Fitted(0.1, 0.2, 0.3), 0.6, "AIM on all rows") == 3
    assert [s.label for s in led.spends] == [f"AIM on all rows: round {i}: measurement" for i in (1, 2, 3)]
    assert [s.measured for s in led.spends] == ["table 0, sigma 3", "table 1, sigma 3", "table 2, sigma 3"]
    assert led.total("rho") == pytest.approx(0.6, abs=1e-12)
    # rounding dust of the fit's split is folded into its last line: never below the budget given
    dust = BudgetLedger()
    record_fit(dust, _Fitted(0.2, 0.2), 0.4 + 1e-13, "x")
    assert len(dust) == 2 and dust.total("rho") >= 0.4 + 1e-13 - 1e-17
    # a share the fit left unspent is still counted, on a line of its own
    rest = BudgetLedger()
    assert record_fit(rest, _Fitted(0.1, 0.1), 0.5, "x") == 3
    assert rest.total("rho") == pytest.approx(0.5, abs=1e-12) and "not spent" in rest.spends[-1].label
    # a synthesizer without its own ledger: one summary line for the whole budget
    bare = BudgetLedger()
    assert record_fit(bare, object(), 0.5, "MST on all rows") == 1
    assert bare.spends[0].label == "MST on all rows" and bare.spends[0].amount == 0.5
    with pytest.raises(ValueError):
        record_fit(BudgetLedger(), object(), 0.0, "x")


def _aim_plan(method: str, **kw) -> SynthesisPlan:
    return SynthesisPlan(data=DataRef("cps"), columns=("a", "b", "c", "s"), strata=("s",), target="c",
                         synthesizer="aim", synth_params=AIMParams(max_rounds=4),
                         release=ReleasePlan(epsilon=2.0, method=method), **kw)


def test_pooled_aim_release_lists_every_round_and_the_project_ledger_keeps_them():
    plan = _aim_plan("pooled", size_policy="dp_count", count_share=0.1)
    rel = make_release(plan, categories())
    rho = rho_for_epsilon(2.0, plan.delta)
    labels = [s.label for s in rel.ledger.spends]
    rounds = {int(m.group(1)) for lab in labels if (m := re.search(r"round (\d+): selection", lab))}
    measured = {int(m.group(1)) for lab in labels if (m := re.search(r"round (\d+): measurement", lab))}
    assert rounds and rounds == measured
    assert labels[0] == "row count (Gaussian count)"
    assert labels[1] == "AIM (adaptive, workload-aware) on all rows: one-way marginals"
    assert len(rel.ledger) == 2 + 2 * len(rounds)
    assert abs(rel.ledger.total("rho") - rho) <= 1e-9
    assert len(rel.ledger_table) == len(rel.ledger)
    assert f"{len(rel.ledger)} measurements" in rel.statement
    stored = LedgerRelease("data", "r1", "release", "page", "release", "AIM", "digest", spends_of(rel.ledger))
    assert [s.label for s in stored.spends] == labels
    assert compose([stored]).rho == pytest.approx(rho, abs=1e-9)


def test_stratified_aim_composes_in_parallel_with_readable_strata():
    plan = _aim_plan("stratified", size_policy="dp_count", count_share=0.2)
    rel = make_release(plan, categories())
    rho = rho_for_epsilon(2.0, plan.delta)
    spends = rel.ledger.spends
    strata = [s for s in spends if s.composition == "parallel"]
    assert {s.group for s in strata} == {"strata"} and {s.part for s in strata} == {"s=0", "s=1"}
    for part, name in (("s=0", "Female"), ("s=1", "Male")):
        own = [s for s in strata if s.part == part]
        assert own[0].label == f"stratum {name}: one-way marginals"
        assert any(s.label == f"stratum {name}: round 1: selection" for s in own)
        assert any(s.label == f"stratum {name}: round 1: measurement" for s in own)
        # each stratum's lines add up to its full share of the budget
        assert sum(s.amount for s in own) == pytest.approx(0.8 * rho, abs=1e-9)
    # parallel across strata, sequential within one: one stratum's rho plus the count share
    assert abs(rel.ledger.total("rho") - rho) <= 1e-9
    assert rel.ledger_table["part"].isin(["Female", "Male"]).sum() == len(strata)
    # no stratum's exact size anywhere in the labels or what they measured
    sizes = categories()["s"].value_counts()
    text = " ".join(s.label + " " + s.measured for s in spends)
    assert not any(re.search(rf"\b{int(v)}\b", text) for v in sizes)


def test_stratified_wrapper_without_labels_keeps_keys_and_the_page_table_reads_them():
    df = frame()
    w = StratifiedSynthesizer(lambda: AIM(max_rounds=3, iters=30), ["s"]).fit(df, DOMAIN, 1.0,
                                                                                np.random.default_rng(1))
    labels = [s.label for s in w.ledger_.spends]
    assert "stratum s=1: one-way marginals" in labels and "stratum s=0: round 1: selection" in labels
    assert w.ledger_.total("rho") == pytest.approx(1.0, abs=1e-9)   # public sizes: the stratum's rho only
    for key, model in w.models_.items():
        assert len([s for s in w.ledger_.spends if s.part == key]) == len(model.ledger_)
    table = readable_ledger(w.ledger_.to_frame(), ["s"], {"s": ["Female", "Male"]}, {"s": 2})
    assert "stratum Male: one-way marginals" in set(table["label"]) and set(table["part"]) == {"Female", "Male"}


def test_readable_ledger_replaces_whole_keys_only():
    led = BudgetLedger()
    led.spend("stratum g=1: round 1: selection", 0.1, "rho", "parallel", "strata", part="g=1")
    led.spend("stratum g=10: round 1: selection", 0.1, "rho", "parallel", "strata", part="g=10")
    names = {"g": [f"v{i}" for i in range(11)]}
    out = readable_ledger(led.to_frame(), ["g"], names, {"g": 11})
    assert out["label"].tolist() == ["stratum v1: round 1: selection", "stratum v10: round 1: selection"]
    assert out["part"].tolist() == ["v1", "v10"]


def _sigma(measured: str) -> float:
    return float(re.search(r"sigma ([0-9.e+-]+)", measured).group(1))


def test_aim_noise_table_matches_a_real_fit():
    df = frame()
    plan = _aim_plan("stratified", size_policy="public", sizes_declared_public=True)
    row = noise_table(plan, (2.0,)).iloc[0]
    rho = row["rho"]
    model = AIM(max_rounds=4, iters=30).fit(df[["a", "b", "c"]], DOMAIN, rho, np.random.default_rng(0))
    first, second = model.ledger_.spends[0], model.ledger_.spends[2]
    assert first.label == "one-way marginals" and second.label == "round 1: measurement"
    assert row["stratum one-way cell sd"] == pytest.approx(_sigma(first.measured), rel=2e-3)
    assert row["stratum two-way cell sd"] == pytest.approx(_sigma(second.measured), rel=2e-3)
    # default rounds (16 per column) plan a far smaller per-round share: noisier two-way cells
    loose = noise_table(plan.replace(synth_params=AIMParams()), (2.0,)).iloc[0]
    assert loose["stratum two-way cell sd"] > 3 * row["stratum two-way cell sd"]


@pytest.mark.slow
def test_gem_noise_table_matches_a_real_fit():
    from core.synthesis.gem import GEM
    df = frame(600)
    plan = SynthesisPlan(data=DataRef("cps"), columns=("a", "b", "c", "s"), strata=("s",), target="c",
                         synthesizer="gem", synth_params=GEMParams(rounds=4),
                         size_policy="public", sizes_declared_public=True)
    row = noise_table(plan, (1.0,)).iloc[0]
    model = GEM(rounds=4, steps=5, batch=64, hidden=16, noise_dim=4).fit(df[["a", "b", "c"]], DOMAIN, row["rho"],
                                                                         np.random.default_rng(0))
    spends = model.ledger_.spends
    assert spends[0].label == "round 1: one-way marginals" and spends[2].label == "round 2: measurement"
    assert row["stratum one-way cell sd"] == pytest.approx(_sigma(spends[0].measured), rel=2e-3)
    assert row["stratum two-way cell sd"] == pytest.approx(_sigma(spends[2].measured), rel=2e-3)


def test_measurement_sds_follow_each_split_and_refuse_unknown_keys():
    rho = 0.5
    one, two = measurement_sds("mst", MSTParams(), 4, rho)
    assert one == pytest.approx(np.sqrt(4 / (2 * rho / 3))) and two == pytest.approx(np.sqrt(3 / (2 * rho / 3)))
    one, two = measurement_sds("independent", None, 4, rho)
    assert one == pytest.approx(np.sqrt(4 / (2 * rho))) and np.isnan(two)
    # AIM with the paper's 16 d rounds: two-way cells are measured with 0.9 rho / 64
    one, two = measurement_sds("aim", AIMParams(), 4, rho)
    assert two == pytest.approx(np.sqrt(1 / (2 * 0.9 * rho / 64)))
    assert one == pytest.approx(np.sqrt(4 / (2 * 4 * 0.9 * rho / 64)))
    with pytest.raises(ValueError, match="No noise calibration"):
        measurement_sds("nope", None, 4, rho)
