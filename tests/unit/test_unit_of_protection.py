"""The unit of protection: with up to k rows per person (contribution bounding) every release and every
simulation calibrates its noise to a whole person, and its ledger states the per-person amount.

Three kinds of check: (1) group privacy closed forms; (2) contribution bounding: on neighbouring data
sets that differ by one WHOLE person, every exact statistic the mechanisms measure moves by at most the
sensitivity the code calibrates with (and the bound is reached, so it is not loose by accident);
(3) the noise at k is the noise at one row per person with the budget divided, and the ledgers keep the
per-person amount and say the unit.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from core.coherence.publish import PublishPlan, publish, trial_ledger
from core.coherence.plan import ReleaseChoice
from core.coherence.releases import (AuditSchema, GaussianTable, LaplaceTable, SynthesizerRelease, release_params,
                                     table_counts)
from core.contracts import DataRef, bytes_fingerprint
from core.intake import ColumnSchema, DataSchema, apply
from core.privacy.accounting import gaussian_sigma, per_person_budget, per_row_budget, rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.privacy.protection import ProtectionUnit
from core.synthesis import ReleasePlan, SweepPlan, SynthesisPlan, run
from core.synthesis.mean_release import MeanReleasePlan, projected_ledger, release_stratified_mean
from core.synthesis.sweep import measurement_sds, noise_table

K = 3
UNIT_WORDS = "per person, up to 3 rows each"


# ------------------------------------------------------------------ 1. group privacy closed forms
@pytest.mark.parametrize("amount,unit,k,expected", [
    (1.0, "epsilon", 1, 1.0), (1.0, "epsilon", 4, 0.25), (0.3, "epsilon", 3, 0.1),
    (0.5, "rho", 1, 0.5), (0.5, "rho", 3, 0.5 / 9), (2.0, "rho", 10, 0.02),
])
def test_per_row_budget_is_epsilon_over_k_and_rho_over_k_squared(amount, unit, k, expected):
    assert per_row_budget(amount, unit, k) == pytest.approx(expected, rel=1e-15)
    assert per_person_budget(per_row_budget(amount, unit, k), unit, k) == pytest.approx(amount, rel=1e-14)


def test_per_row_budget_in_rho_matches_gaussian_sensitivity_scaled_by_k():
    # sigma = Delta / sqrt(2 rho): running at rho / k^2 is the same as sensitivity k Delta at rho
    rho = 0.37
    assert gaussian_sigma(1.0, per_row_budget(rho, "rho", K)) == pytest.approx(gaussian_sigma(K * 1.0, rho))


@pytest.mark.parametrize("args", [(1.0, "epsilon", 0), (1.0, "epsilon", 1.5), (1.0, "delta", 2),
                                  (0.0, "rho", 2), (1.0, "rho", True)])
def test_per_row_budget_refuses_bad_input(args):
    with pytest.raises(ValueError):
        per_row_budget(*args)


def test_unit_of_a_data_reference():
    assert ProtectionUnit.of(DataRef("cps")).words == "per row"
    ref = DataRef("upload", "f" * 64, schema=schema_of(K))
    unit = ProtectionUnit.of(ref)
    assert unit.rows_per_person == K and unit.grouped and unit.words == UNIT_WORDS
    assert ProtectionUnit.of(DataRef("upload", "f" * 64, schema=schema_of(1))).words == "per person (one row each)"
    with pytest.raises(ValueError, match="person-id"):
        ProtectionUnit(2, person_id=False)


# ------------------------------------------------------------------ shared data
def schema_of(k: int) -> DataSchema:
    return DataSchema("toy", (ColumnSchema("pid", "person_id"), ColumnSchema("sex", categories=("F", "M")),
                              ColumnSchema("job", categories=("a", "b", "c")),
                              ColumnSchema("income", categories=("high", "low")),
                              ColumnSchema("hours", "number", bounds=(0.0, 80.0))),
                      person_id="pid", max_rows_per_person=k)


def raw_frame(n_people: int = 200, seed: int = 0) -> pd.DataFrame:
    """People with 1 to 5 rows each (some over the limit); person 0 has five rows that all look alike,
    so after bounding to k they fall in one cell of every table (the worst case for L2)."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 6, n_people)
    pid = np.repeat(np.arange(n_people), rows)
    n = pid.size
    frame = pd.DataFrame({"pid": [f"p{i}" for i in pid], "sex": rng.choice(["F", "M"], n),
                          "job": rng.choice(["a", "b", "c"], n), "income": rng.choice(["low", "high"], n),
                          "hours": rng.uniform(-10.0, 95.0, n).round(1)})
    first = pid == 0
    frame.loc[first, ["sex", "job", "income", "hours"]] = ["F", "a", "high", 90.0]
    return frame


@pytest.fixture(scope="module")
def bounded() -> pd.DataFrame:
    """The cleaned table: every person keeps at most K rows (core.intake.apply's contribution bounding)."""
    frame = apply(raw_frame().astype(str), schema_of(K), rng_seed=0)
    assert frame.groupby("pid").size().max() == K
    return frame


def without_each_person(frame: pd.DataFrame):
    for person in frame["pid"].unique():
        yield person, frame[frame["pid"] != person]


def codes(frame: pd.DataFrame, col: str) -> np.ndarray:
    cats = {"sex": ["F", "M"], "job": ["a", "b", "c"], "income": ["high", "low"]}[col]
    return pd.Categorical(frame[col].astype(str), categories=cats).codes.astype(np.int64)


# ------------------------------------------------------------------ 2. contribution bounding
def stratum_counts(frame):
    return np.bincount(codes(frame, "sex"), minlength=2).astype(float)


def clipped_sums(frame, lo=0.0, hi=80.0):
    x = np.clip(frame["hours"].to_numpy(float), lo, hi) - (lo + hi) / 2
    return np.bincount(codes(frame, "sex"), weights=x, minlength=2)


def two_way(frame):
    return np.bincount(codes(frame, "job") * 2 + codes(frame, "income"), minlength=6).astype(float)


def one_way(frame):
    return np.bincount(codes(frame, "job"), minlength=3).astype(float)


@pytest.mark.parametrize("statistic,per_row", [
    (stratum_counts, 1.0),          # the strata's counts (synthesis, stratified means)
    (clipped_sums, 40.0),           # clipped, centred sums: h = (80 - 0) / 2 per row
    (one_way, 1.0),                 # a one-way marginal a synthesizer measures
    (two_way, 1.0),                 # a two-way marginal a synthesizer measures
])
@pytest.mark.slow
def test_one_whole_person_moves_each_statistic_by_at_most_its_stated_sensitivity(bounded, statistic, per_row):
    stated = ProtectionUnit(K, person_id=True).sensitivity(per_row)
    assert stated == K * per_row
    full = statistic(bounded)
    l1 = [np.abs(full - statistic(rest)).sum() for _, rest in without_each_person(bounded)]
    l2 = [np.sqrt(((full - statistic(rest)) ** 2).sum()) for _, rest in without_each_person(bounded)]
    assert max(l1) <= stated + 1e-9 and max(l2) <= stated + 1e-9
    # person 0 keeps K rows in one cell: the bound is reached, so a per-row sensitivity would understate it
    assert max(l2) == pytest.approx(stated) and max(l2) > per_row


def test_audit_table_replacing_one_whole_person_stays_within_the_tables_sensitivities(bounded):
    frame = bounded.reset_index(drop=True)
    codes_df = pd.DataFrame({c: codes(frame, c) for c in ("sex", "job", "income")})
    schema = AuditSchema({"sex": 2, "job": 3, "income": 2}, {"sex": ["F", "M"], "job": ["a", "b", "c"],
                                                            "income": ["high", "low"]},
                         ("sex", "job"), "income", 0, ProtectionUnit(K, person_id=True))
    table = LaplaceTable(1.0).bind(schema)
    gauss = GaussianTable(1.0).bind(schema)
    full = table_counts(codes_df, schema)
    worst_l1 = worst_l2 = 0.0
    for person in frame["pid"].unique()[:40]:
        mine = (frame["pid"] == person).to_numpy()
        # replace-one: the person's rows replaced by K rows of one other cell
        replaced = pd.concat([codes_df[~mine], pd.DataFrame({"sex": [1] * K, "job": [2] * K, "income": [1] * K})])
        diff = full - table_counts(replaced, schema)
        worst_l1, worst_l2 = max(worst_l1, np.abs(diff).sum()), max(worst_l2, np.sqrt((diff ** 2).sum()))
    assert table.l1_sensitivity == 2 * K and gauss.l2_sensitivity == pytest.approx(math.sqrt(2) * K)
    assert worst_l1 <= table.l1_sensitivity and worst_l2 <= gauss.l2_sensitivity + 1e-9
    assert worst_l1 == 2 * K            # person 0 (K rows in one cell) moved to another: reached


# ------------------------------------------------------------------ 3. noise at k = noise at 1 with the budget divided
def bind(release, k: int):
    unit = ProtectionUnit(k, person_id=True)
    schema = AuditSchema({"sex": 2, "income": 2}, {"sex": ["F", "M"], "income": ["high", "low"]}, ("sex",),
                         "income", 0, unit)
    return release.bind(schema)


def test_audit_tables_noise_at_k_equals_noise_at_one_with_epsilon_over_k():
    eps = 0.9
    lap_k, lap_1 = bind(LaplaceTable(eps), K), bind(LaplaceTable(eps / K), 1)
    assert lap_k.secure_noise[1] == pytest.approx(lap_1.secure_noise[1])          # scale 2k / eps
    assert lap_k.secure_noise[1] == pytest.approx(2 * K / eps)
    # zCDP epsilon / k is rho / k^2: the same sigma
    g_k, g_1 = bind(GaussianTable(eps), K), bind(GaussianTable(eps / K), 1)
    assert g_k.sigma == pytest.approx(g_1.sigma) == pytest.approx(K * bind(GaussianTable(eps), 1).sigma)
    assert UNIT_WORDS in g_k.privacy.statement and "per person" not in bind(GaussianTable(eps), 1).privacy.statement
    # the stated guarantee stays the per-person one
    assert g_k.privacy.rho == pytest.approx(eps ** 2 / 2) and lap_k.privacy.epsilon == eps


def test_audited_synthesizer_fits_at_rho_over_k_squared():
    rel = SynthesizerRelease("independent", epsilon=1.2)
    assert bind(rel, K).fit_rho == pytest.approx(rel.rho / K ** 2)
    assert bind(SynthesizerRelease("independent", epsilon=1.2), 1).fit_rho == rel.rho


def synthesis_plan(k: int, raw: bytes, **kw) -> SynthesisPlan:
    base = dict(data=DataRef("upload", bytes_fingerprint(raw), schema=schema_of(k)), columns=("sex", "job", "income"),
                strata=("sex",), target="income", synthesizer="independent", domain_declared_public=True,
                release=ReleasePlan(epsilon=1.0, method="pooled"), sweep=None, delta=1e-9)
    base.update(kw)
    return SynthesisPlan(**base)


@pytest.fixture(scope="module")
def raw_bytes() -> bytes:
    return raw_frame(120, seed=3).to_csv(index=False).encode()


def sigma_in(measured: str) -> float:
    return float(re.search(r"sigma ([0-9.e+-]+)", measured).group(1))


def test_synthesis_noise_table_at_k_is_the_table_at_rho_over_k_squared(raw_bytes):
    plan_k, plan_1 = synthesis_plan(K, raw_bytes), synthesis_plan(1, raw_bytes)
    at_k, at_1 = noise_table(plan_k, (1.0,)), noise_table(plan_1, (1.0,))
    rho = rho_for_epsilon(1.0, 1e-9)
    assert at_k["rho"].iloc[0] == pytest.approx(rho)                         # the per-person budget shown
    expected = measurement_sds("independent", None, 2, 0.9 * rho / K ** 2)[0]
    assert at_k["stratum one-way cell sd"].iloc[0] == pytest.approx(expected)
    # Gaussian sd scales as 1 / sqrt(rho): k times the sd at one row per person
    for col in ("stratum one-way cell sd", "pooled one-way cell sd", "stratum count sd"):
        assert at_k[col].iloc[0] == pytest.approx(K * at_1[col].iloc[0])


def test_synthetic_release_spends_per_person_and_its_noise_covers_k_rows(raw_bytes):
    rel_k = run.uncached(synthesis_plan(K, raw_bytes), raw_bytes).release
    rel_1 = run.uncached(synthesis_plan(1, raw_bytes), raw_bytes).release
    rho = rho_for_epsilon(1.0, 1e-9)
    # the ledger keeps the per-person amounts: the same as at one row per person, and the plan's rho
    assert rel_k.ledger.total("rho") == pytest.approx(rho) == pytest.approx(rel_1.ledger.total("rho"))
    assert [s.amount for s in rel_k.ledger.spends] == pytest.approx([s.amount for s in rel_1.ledger.spends])
    assert all(UNIT_WORDS in m for m in rel_k.ledger_table["measured"])
    assert not any("per person, up to" in m for m in rel_1.ledger_table["measured"])
    # the row count's noise ran at the per-row budget: sigma k times larger
    count_k = sigma_in(rel_k.ledger.spends[0].measured)
    assert count_k == pytest.approx(gaussian_sigma(1.0, 0.1 * rho / K ** 2), rel=6e-3)
    assert count_k == pytest.approx(K * sigma_in(rel_1.ledger.spends[0].measured), rel=6e-3)
    assert "Unit of protection: " + UNIT_WORDS in rel_k.statement
    assert "Unit of protection: per person (one row each" in rel_1.statement


def test_stratified_release_and_sweep_state_per_person_amounts(raw_bytes):
    plan = synthesis_plan(K, raw_bytes, release=ReleasePlan(epsilon=1.0, method="stratified"),
                          sweep=SweepPlan(epsilons=(1.0,), seeds=(0,), n_trees=5))
    result = run.uncached(plan, raw_bytes)
    rho = rho_for_epsilon(1.0, 1e-9)
    assert result.release.ledger.total("rho") == pytest.approx(rho)
    counts = [s for s in result.release.ledger.spends if s.label.startswith("stratum sizes")][0]
    assert sigma_in(counts.measured) == pytest.approx(gaussian_sigma(1.0, 0.1 * rho / K ** 2), rel=6e-3)
    assert all(UNIT_WORDS in m for m in result.sweep.ledger["measured"])
    assert result.sweep.ledger.loc[result.sweep.ledger["charged"], "rho_equivalent"].sum() == pytest.approx(rho)
    assert UNIT_WORDS in result.sweep.budget_statement


def mean_plan(k: int, raw: bytes, epsilon: float = 1.0) -> MeanReleasePlan:
    return MeanReleasePlan(data=DataRef("upload", bytes_fingerprint(raw), schema=schema_of(k)), column="hours",
                           strata=("sex",), epsilon=epsilon, noise="laplace", value_range=(0.0, 80.0),
                           size_policy="public", sizes_declared_public=True, domain_declared_public=True)


def test_stratified_mean_noise_at_k_is_the_noise_at_one_with_epsilon_over_k(raw_bytes):
    at_k = release_stratified_mean(mean_plan(K, raw_bytes), raw_bytes)
    at_1 = release_stratified_mean(mean_plan(1, raw_bytes), raw_bytes)
    divided = release_stratified_mean(mean_plan(1, raw_bytes, epsilon=1.0 / K), raw_bytes)
    # Laplace with public sizes: se x size = sqrt(2) b with b = k h / epsilon_sums: exactly k times (the
    # sizes differ: bounding keeps up to k rows of a person at k, one at 1)
    def noise_sd(rel):
        return (rel.strata["se"] * rel.strata["size"]).to_numpy()
    h, eps_sums = 40.0, 0.8 * 1.0          # half the public range; the strata's share of epsilon
    assert noise_sd(at_k) == pytest.approx(np.full(2, math.sqrt(2) * K * h / eps_sums))
    assert noise_sd(at_k) == pytest.approx(K * noise_sd(at_1))
    assert noise_sd(at_k) == pytest.approx(noise_sd(divided))
    # the ledger keeps the per-person epsilon and says the unit; the reservation says it too
    assert at_k.budget.total("epsilon") == pytest.approx(1.0) == pytest.approx(at_1.budget.total("epsilon"))
    assert all(UNIT_WORDS in s.measured for s in at_k.budget.spends)
    assert all(UNIT_WORDS in s.measured for s in projected_ledger(mean_plan(K, raw_bytes)).spends)
    assert projected_ledger(mean_plan(K, raw_bytes)).total("epsilon") == pytest.approx(1.0)
    assert "Unit of protection: " + UNIT_WORDS in at_k.statement


def test_published_table_spends_per_person_with_noise_for_k_rows(raw_bytes):
    def plan(k):
        return PublishPlan(data=DataRef("upload", bytes_fingerprint(raw_bytes), schema=schema_of(k)),
                           target="income", positive="high", lens=("sex", "job"),
                           release=ReleaseChoice("gaussian_table", release_params("gaussian_table", epsilon=1.0)),
                           seed=0)
    at_k, at_1 = publish(plan(K), raw_bytes, secure=False), publish(plan(1), raw_bytes, secure=False)
    assert at_k.budget.total("rho") == pytest.approx(0.5) == pytest.approx(at_1.budget.total("rho"))
    assert all(UNIT_WORDS in s.measured for s in at_k.budget.spends)
    assert UNIT_WORDS in at_k.statement and "Unit of protection" in at_1.statement
    # the noise of every cell: k times the sigma (L2 sensitivity sqrt 2 k at rho 0.5)
    assert sigma_in(at_k.statement) == pytest.approx(gaussian_sigma(math.sqrt(2) * K, 0.5), rel=6e-3)
    assert sigma_in(at_k.statement) == pytest.approx(K * sigma_in(at_1.statement), rel=6e-3)
    line = trial_ledger(ReleaseChoice("gaussian_table"), protection=ProtectionUnit(K, person_id=True))
    assert line.total("rho") == pytest.approx(0.5) and UNIT_WORDS in line.spends[0].measured


def test_published_synthesizer_spends_per_person(raw_bytes):
    choice = ReleaseChoice("synth_independent", release_params("synth_independent", epsilon=1.0))
    plan = PublishPlan(data=DataRef("upload", bytes_fingerprint(raw_bytes), schema=schema_of(K)), target="income",
                       positive="high", lens=("sex", "job"), release=choice, seed=0)
    out = publish(plan, raw_bytes, secure=False)
    assert out.budget.total("rho") == pytest.approx(0.5)
    count = out.budget.spends[0]
    assert count.label.startswith("row count")
    assert sigma_in(count.measured) == pytest.approx(gaussian_sigma(1.0, 0.1 * 0.5 / K ** 2), rel=6e-3)
    assert all(UNIT_WORDS in s.measured for s in out.budget.spends)


def test_person_ledger_scales_every_line_and_keeps_composition():
    ledger = BudgetLedger()
    ledger.spend("a", 0.1, "epsilon")
    ledger.spend("b", 0.02, "rho", "parallel", "strata", "x", part="s1")
    ledger.spend("c", 0.03, "rho", "parallel", "strata", "y", part="s2")
    unit = ProtectionUnit(K, person_id=True)
    person = unit.person_ledger(ledger)
    assert [s.amount for s in person.spends] == pytest.approx([0.1 * K, 0.02 * K * K, 0.03 * K * K])
    assert person.total("rho") == pytest.approx(K * K * ledger.total("rho"))
    assert [s.part for s in person.spends] == [None, "s1", "s2"]
    assert ProtectionUnit().person_ledger(ledger) is ledger
