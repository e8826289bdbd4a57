"""The Stratified synthesis plan -> run -> result: nothing confidential leaves, every release is
accounted for, plans validate, exports are guarded, and reports reproduce."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef, bytes_fingerprint
from core.privacy.accounting import rho_for_epsilon, rho_to_epsilon
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import LedgerRelease, compose, spends_of, statement
from core.report import build_report, guarded_csv, load_plan, report_json, tables_match, tables_zip
from core.synthesis import (MarginalsPlan, MeansPlan, ReleasePlan, SweepPlan, SynthesisPlan, parse_epsilons, run,
                            secure_release)
from core.synthesis.release import budget_statement_text
from core.synthesis.workflow import prepare
from core.synthesis.sweep import strata_overview

COLS = ("age_band", "education", "sex", "race", "income")
DELTA = 1e-9


def cps_plan(**kw) -> SynthesisPlan:
    base = dict(data=DataRef("cps"), columns=COLS, strata=("sex", "race"), target="income")
    base.update(kw)
    return SynthesisPlan(**base)


def exact_counts(plan: SynthesisPlan) -> set[int]:
    """Every exact stratum count of the private data (all rows, and the sweep's training rows), and
    the row count itself: none may appear in anything shared under DP counts."""
    frame, _ = prepare(plan)
    counts = set(strata_overview(frame, plan.strata)["real_rows"].astype(int))
    counts.add(len(frame))
    if plan.sweep is not None:
        from core.synthesis.encoding import encode_categories
        from core.synthesis.sweep import split_train_test

        from core.synthesis.encoding import decode_categories

        codes, domain, labels = encode_categories(frame)
        train, _ = split_train_test(codes, plan.sweep.test_fraction, plan.sweep.split_seed)
        counts |= set(strata_overview(decode_categories(train, labels), plan.strata)["real_rows"].astype(int))
        counts.add(len(train))
    return {c for c in counts if c >= 20}   # small numbers turn up in any text (epsilons, columns)


def mentions(text: str, counts: set[int]) -> list[int]:
    forms = {c: {str(c), f"{c:,}"} for c in counts}
    return sorted(c for c, spelled in forms.items()
                  if any(re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d.,]\d)", text) for f in spelled))


# --------------------------------------------------------------------------------------------------
# 1. No exact stratum size in any ledger, statement, export or caption under DP counts
# --------------------------------------------------------------------------------------------------

def as_release(key: str, ledger: BudgetLedger) -> LedgerRelease:
    """A synthetic release of CPS as the project ledger stores it."""
    return LedgerRelease("cps", key, "release", "Stratified synthesis", "test", key, "", spends_of(ledger))


def test_dp_count_release_shares_no_exact_stratum_size():
    plan = cps_plan(size_policy="dp_count", release=ReleasePlan(epsilon=1.0, method="stratified", seed=3))
    counts = exact_counts(plan)
    result = run.uncached(plan)
    rel = result.release
    shared = {
        "ledger": rel.ledger_table.to_csv(index=False),
        "statement": rel.statement,
        "budget statement": budget_statement_text(plan, rel, statement([as_release("a", rel.ledger)], DELTA, "CPS")),
        "report": report_json(build_report(result, page="Stratified synthesis")),
        "zip tables": "".join(guarded_csv(t) for t in result.tables().values()),
        "accounting caption": result.accounting,
    }
    for name, text in shared.items():
        assert mentions(text, counts) == [], f"the {name} states exact counts"
    # the release has the noisy total, not the real row count
    assert len(rel.data) != 50_000
    assert abs(len(rel.data) - 50_000) < 6 * 10 * math.sqrt(10 / (2 * 0.1 * rho_for_epsilon(1.0, DELTA)))


@pytest.mark.slow
def test_dp_count_sweep_export_keeps_exact_sizes_out_but_public_sizes_may_show():
    sweep = SweepPlan(epsilons=(1.0,), seeds=(0,), n_trees=5)
    plan = cps_plan(columns=("education", "sex", "race", "income"), sweep=sweep)
    counts = exact_counts(plan)
    result = run.uncached(plan)
    tables = result.tables()
    assert "real_rows" not in tables["group_metrics"] and "real_rows" not in tables["strata_fates"]
    assert list(tables["strata"].columns) == ["group"]
    assert mentions(report_json(build_report(result)), counts) == []
    # real shares and the mean-estimation closed forms (functions of the exact sizes) stay out too
    with_means = run.uncached(plan.replace(marginals=MarginalsPlan(1.0, 0), means=MeansPlan(runs=5)))
    shared = with_means.tables()
    assert "real" not in shared["marginal_shares"]
    assert not {"mean_curves", "mean_group_errors", "dirichlet"} & set(shared)
    assert "stratification cost multiplier" not in with_means.headline()
    public = run.uncached(plan.replace(size_policy="public", sizes_declared_public=True, means=MeansPlan(runs=5)))
    assert "real_rows" in public.tables()["strata"] and "dirichlet" in public.tables()


# --------------------------------------------------------------------------------------------------
# 2. Accounting that never under-reports
# --------------------------------------------------------------------------------------------------

def test_pooled_release_pays_for_its_row_count_by_hand():
    plan = cps_plan(size_policy="dp_count", count_share=0.2,
                    release=ReleasePlan(epsilon=0.5, method="pooled", seed=1))
    rel = run.uncached(plan).release
    rho = rho_for_epsilon(0.5, DELTA)
    frame = rel.ledger_table.set_index("label")
    assert frame.loc["row count (Gaussian count)", "amount"] == pytest.approx(0.2 * rho)
    assert rel.ledger.total("rho") == pytest.approx(rho)                 # 0.2 rho + 0.8 rho
    assert rel.ledger.total("epsilon", delta=DELTA) == pytest.approx(0.5, rel=1e-6)
    assert len(rel.data) != 50_000
    declared = run.uncached(plan.replace(size_policy="public", sizes_declared_public=True)).release
    assert len(declared.data) == 50_000 and len(declared.ledger) == 1
    assert declared.ledger.total("rho") == pytest.approx(rho)


def test_release_log_composes_every_release_of_the_same_data_by_hand():
    r1, r2 = rho_for_epsilon(1.0, DELTA), rho_for_epsilon(0.5, DELTA)
    plan = cps_plan(release=ReleasePlan(epsilon=1.0))
    one = run.uncached(plan).release
    two = run.uncached(plan.replace(release=ReleasePlan(epsilon=0.5, method="pooled"))).release
    log = [as_release("first", one.ledger), as_release("second", two.ledger)]
    # stratified: counts 0.1 r1 + strata 0.9 r1 (parallel, once) = r1; pooled r2; releases add up
    total = compose(log, DELTA)
    assert total.rho == pytest.approx(r1 + r2)
    assert total.epsilon == pytest.approx(rho_to_epsilon(r1 + r2, DELTA))
    assert total.epsilon > 1.0                    # more than either release alone
    assert "2 releases" in statement(log, DELTA, "CPS")
    # parallel groups of different releases never merge into one "counted once" group
    assert compose([as_release("a", one.ledger), as_release("b", one.ledger)]).rho == pytest.approx(2 * r1)
    with pytest.raises(ValueError, match="no spends"):
        as_release("empty", BudgetLedger())


def test_secure_release_uses_opendp_and_says_it_is_a_release(monkeypatch):
    calls = []
    import core.privacy.secure as secure

    real = secure.secure_noise

    def spy(name, scale, size):
        calls.append((name, scale))
        return real(name, scale, size)

    picks = []
    real_max = secure.secure_noisy_max

    def spy_max(scores, scale):
        picks.append(scale)
        return real_max(scores, scale)

    monkeypatch.setattr(secure, "secure_noise", spy)
    monkeypatch.setattr(secure, "secure_noisy_max", spy_max)
    plan = cps_plan(columns=("education", "sex", "income"), strata=("sex",), target=None,
                    release=ReleasePlan(epsilon=1.0, method="stratified"))
    rel = secure_release(plan)
    assert rel.secure and rel.statement.startswith("Release:")
    assert calls and {c[0] for c in calls} == {"gaussian"}
    assert len(picks) == 2          # MST's one tree edge per stratum is picked by OpenDP's noisy max
    assert rel.ledger.total("rho") == pytest.approx(rho_for_epsilon(1.0, DELTA))


# --------------------------------------------------------------------------------------------------
# Uploads: declared domains, public numeric ranges, identifiers, fingerprints
# --------------------------------------------------------------------------------------------------

def upload_bytes(n: int = 200) -> bytes:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"person_id": [f"p{i}" for i in range(n)], "age": rng.integers(18, 90, n),
                       "sex": rng.choice(["F", "M"], n), "job": rng.choice(["=cmd|' /C calc'!A0", "clerk", "+nurse"], n),
                       "income": rng.choice(["low", "high"], n)})
    return df.to_csv(index=False).encode()


def test_upload_needs_declared_domain_and_public_ranges_and_never_preselects_identifiers():
    raw = upload_bytes()
    ref = DataRef("upload", bytes_fingerprint(raw))
    with pytest.raises(ValueError, match="category lists would be read from the private rows"):
        SynthesisPlan(data=ref, columns=("sex", "job", "income"), strata=("sex",), target="income")
    plan = SynthesisPlan(data=ref, columns=("sex", "job", "income", "age"), strata=("sex",), target="income",
                         domain_declared_public=True)
    with pytest.raises(ValueError, match="give public bounds"):
        run.uncached(plan, raw)
    from core.synthesis.workflow import load_raw, prepared_view
    view, notes, ids = prepared_view(load_raw(plan, raw))
    assert ids == ["person_id"] and any("identifier" in n for n in notes)
    assert "age" not in view.columns and not any("18" in n or "89" in n for n in notes)
    bounded = plan.replace(numeric_bounds=(("age", 0.0, 120.0),), release=ReleasePlan(epsilon=2.0))
    result = run.uncached(bounded, raw)
    assert len(result.release.data.columns) == 4
    with pytest.raises(ValueError, match="fingerprint differs"):
        run.uncached(bounded, raw + b"\n")


def test_synthetic_csv_cells_are_guarded_against_formulas():
    raw = upload_bytes()
    plan = SynthesisPlan(data=DataRef("upload", bytes_fingerprint(raw)), columns=("sex", "job", "income"),
                         strata=("sex",), target="income", domain_declared_public=True,
                         release=ReleasePlan(epsilon=5.0))
    rel = run.uncached(plan, raw).release
    text = guarded_csv(rel.data)
    assert "'=cmd" in text and "\n=cmd" not in text and ",=cmd" not in text
    assert "'+nurse" in text and ",+nurse" not in text
    shares = tables_zip(run.uncached(plan, raw).tables())
    assert b",=cmd" not in shares


# --------------------------------------------------------------------------------------------------
# 4. Validation: every bad number is a ValueError that says what to change
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [
    lambda: parse_epsilons("nan"),
    lambda: parse_epsilons("0.1, inf"),
    lambda: parse_epsilons("1e400"),
    lambda: SweepPlan(epsilons=(float("nan"),)),
    lambda: ReleasePlan(epsilon=float("nan")),
    lambda: ReleasePlan(epsilon=-1.0),
    lambda: MarginalsPlan(epsilon=float("inf")),
    lambda: MeansPlan(R=float("nan")),
    lambda: MeansPlan(group_epsilon=float("nan")),
    lambda: MeansPlan(count_epsilon=0.0),
    lambda: cps_plan(delta=float("nan")),
    lambda: cps_plan(count_share=float("nan")),
    lambda: cps_plan(numeric_bounds=(("age", float("nan"), 1.0),)),
    lambda: cps_plan(synthesizer="gan"),
])
def test_non_finite_and_out_of_range_numbers_are_refused_with_a_value_error(build):
    with pytest.raises(ValueError) as info:
        build()
    assert "got" in str(info.value) or "choose" in str(info.value).lower() or "must" in str(info.value)


# --------------------------------------------------------------------------------------------------
# 10. Plan only, export/load/rerun, the CLI
# --------------------------------------------------------------------------------------------------

def page_default_plan() -> SynthesisPlan:
    """What the page builds on CPS when Run sweep is pressed with two small changes (one seed, eps 1);
    sizes declared public so that every table, the mean-estimation ones included, is exported."""
    return SynthesisPlan(data=DataRef("cps"), columns=COLS, strata=("sex", "race"), target="income",
                         size_policy="public", sizes_declared_public=True,
                         sweep=SweepPlan(epsilons=(1.0,), seeds=(0,)), marginals=MarginalsPlan(1.0, 0),
                         release=ReleasePlan(epsilon=1.0), means=MeansPlan(epsilons=(1.0,), runs=10))


@pytest.mark.slow
def test_report_reloads_and_reruns_bit_for_bit(tmp_path):
    plan = page_default_plan()
    result = run(plan)
    report = build_report(result, page="Stratified synthesis")
    again = load_plan(json.loads(report_json(report)))
    assert again == plan
    assert tables_match(report, run.uncached(again).tables()) == []
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    from core.__main__ import main

    assert main(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0


def test_changing_one_tab_does_not_recompute_the_others(monkeypatch):
    plan = page_default_plan()
    first = run(plan)
    import core.synthesis.sweep as sweep_module

    def refuse(*args, **kwargs):
        raise AssertionError("the sweep was recomputed")

    monkeypatch.setattr(sweep_module, "run_sweep", refuse)
    import core.synthesis.workflow as run_module
    monkeypatch.setattr(run_module, "run_sweep", refuse)
    changed = run(plan.replace(release=ReleasePlan(epsilon=1.0, seed=9)))
    pd.testing.assert_frame_equal(changed.sweep.group_metrics, first.sweep.group_metrics)
