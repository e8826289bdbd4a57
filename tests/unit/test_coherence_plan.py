"""The audit as a plan: JSON round trip, validation, keyed streams, export -> load -> rerun, the CLI."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from core.__main__ import main as cli
from core.coherence import (AdversaryChoice, AuditPlan, Condition, CustomSubgroup, ReleaseChoice, RowSample,
                            SweepPlan, TheoryPlan, min_trials_for_pass, run)
from core.coherence.releases import release_params
from core.coherence.run import sample_rows, load_frame
from core.contracts import DataRef, bytes_fingerprint, plan_from_dict
from core.report import build_report, load_plan, report_json, tables_match


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))


def _small(**changes) -> AuditPlan:
    base = AuditPlan(rows=RowSample(2000, 3), trials=4, lens=("age_band", "education", "sex"),
                     subgroup_columns=("sex", "race"), subgroup_order=1, gamma=60,
                     adversaries=(AdversaryChoice("naive_bayes"), AdversaryChoice("nearest_neighbour")))
    return base.replace(**changes)


def test_plan_round_trips_through_json_with_every_sub_plan():
    plan = _small(custom_subgroups=(CustomSubgroup("older women", (Condition("sex", ("Female",)),
                                                                   Condition("age_band", ("65-74", "75+")))),),
                  releases=(ReleaseChoice("suppression", release_params("suppression", k=3, generalise=("sex",))),
                            ReleaseChoice("strat_mst", release_params("strat_mst", epsilon=2.0, strata=("sex",)))),
                  adversaries=(AdversaryChoice("nearest_neighbour",
                                               AdversaryChoice("nearest_neighbour").params.__class__(tau=2.0)),),
                  sweep=SweepPlan(ReleaseChoice("gaussian_table"), (0.1, 1.0), 5), theory=TheoryPlan("approx_dp"))
    back = plan_from_dict(json.loads(json.dumps(plan.to_dict())))
    assert back == plan and back.digest() == plan.digest()


def test_plans_refuse_bad_input_with_guidance():
    with pytest.raises(ValueError, match="alpha"):
        _small(alpha=float("nan"))
    with pytest.raises(ValueError, match="trials"):
        _small(trials=0)
    with pytest.raises(ValueError, match="lens"):
        _small(lens=())
    with pytest.raises(ValueError, match="cannot also be a lens"):
        _small(lens=("income",))
    with pytest.raises(ValueError, match="listed twice"):
        _small(releases=(ReleaseChoice("clear_half"), ReleaseChoice("clear_half")))
    with pytest.raises(ValueError, match="not differentially private"):
        SweepPlan(ReleaseChoice("suppression"))
    with pytest.raises(ValueError, match="Unknown release"):
        ReleaseChoice("magic")
    with pytest.raises(ValueError, match="epsilon"):
        release_params("laplace_table", epsilon=-1.0)
    with pytest.raises(ValueError, match="bundled"):
        _small(data=DataRef("georgia"))


def test_row_sample_is_seeded_and_independent_of_the_audit_seed():
    frame = load_frame(DataRef("cps"))
    a = sample_rows(frame, RowSample(500, 1))
    assert a.equals(sample_rows(frame, RowSample(500, 1)))
    assert not a.equals(sample_rows(frame, RowSample(500, 2)))
    assert len(sample_rows(frame, RowSample(None, 0))) == len(frame)


def test_adding_a_release_or_adversary_changes_nothing_else():
    """Each release and adversary draws from its own stream of the plan's seed."""
    alone = run(_small(releases=(ReleaseChoice("laplace_table"),)))
    crowd = run(_small(releases=(ReleaseChoice("clear_sample"), ReleaseChoice("laplace_table"),
                                 ReleaseChoice("gaussian_table"))))
    label = "Noisy table (Laplace) (epsilon=1.0)"
    for name in ("maxima", "adversaries", "subgroups"):
        a = alone.tables()[name]
        b = crowd.tables()[name]
        b = b[b["release"] == label].reset_index(drop=True)
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b, check_exact=True)
    more = run(_small(releases=(ReleaseChoice("laplace_table"),),
                      adversaries=(AdversaryChoice("logistic"), AdversaryChoice("naive_bayes"),
                                   AdversaryChoice("nearest_neighbour"))))
    m = more.tables()["maxima"]
    m = m[m["adversary"] != "Logistic regression"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone.tables()["maxima"], m, check_exact=True)


@pytest.mark.slow
def test_export_load_rerun_is_bit_for_bit(tmp_path, monkeypatch):
    plan = _small(sweep=SweepPlan(ReleaseChoice("laplace_table"), (0.1, 10.0), 3), theory=TheoryPlan(),
                  custom_subgroups=(CustomSubgroup("", (Condition("race", ("White", "Black")),)),))
    result = run(plan)
    report = json.loads(report_json(build_report(result, page="Coherence audit")))
    again = load_plan(report)
    assert again == plan
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "fresh"))     # nothing cached: a real rerun
    rerun = run(again)
    assert tables_match(report, rerun.tables()) == []
    assert {"verdicts", "adversaries", "subgroups", "sweep_verdicts", "theory"} <= set(report["tables"])
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    assert cli(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "verdicts.csv").exists()


def test_uploaded_data_are_checked_by_fingerprint(tmp_path):
    frame = load_frame(DataRef("cps")).head(600)
    raw = frame.to_csv(index=False).encode()
    plan = _small(data=DataRef("upload", bytes_fingerprint(raw)), rows=RowSample(None, 0), gamma=40)
    result = run(plan, raw)
    assert result.n_rows == 600
    with pytest.raises(ValueError, match="fingerprint"):
        run(plan, raw + b"\n")
    path, data = tmp_path / "r.json", tmp_path / "data.csv"
    path.write_text(report_json(build_report(result)))
    data.write_bytes(raw)
    assert cli(["reproduce", str(path), "--out", str(tmp_path / "o"), "--data", str(data)]) == 0


def test_verdict_texts_and_pass_trials():
    from core.coherence import NOT_PRIVATE_PASS, VERDICT_MEANING, verdict_label
    assert set(VERDICT_MEANING) == {"PASS", "FAIL", "INCONCLUSIVE"}
    assert "neither a pass nor a fail" in VERDICT_MEANING["INCONCLUSIVE"]
    assert min_trials_for_pass(0.05) == 59 and min_trials_for_pass(0.01) == 299
    assert verdict_label("PASS", "none") == "PASS (not private)" and verdict_label("PASS", "pure_dp") == "PASS"
    assert "no privacy guarantee" in NOT_PRIVATE_PASS and "protects no one" in NOT_PRIVATE_PASS
    # the sweep's default trials can decide at the default beta
    assert SweepPlan().trials >= min_trials_for_pass(AuditPlan().beta)


def test_the_comparison_is_keyed_on_the_plan_without_its_sweep_and_calculator():
    """run() caches the comparison on plan.setup(): a sweep or a calculator added to a plan leaves that key
    (and so the comparison) as it was, while the sweep's own key keeps the sweep."""
    plan = _small(sweep=SweepPlan(ReleaseChoice("laplace_table"), (0.1, 1.0), 3), theory=TheoryPlan())
    assert plan.setup() == _small() and plan.setup().digest() == _small().digest()
    assert plan.for_sweep.sweep == plan.sweep and plan.for_sweep.releases == ()


def test_declared_fields_carry_their_page_offer_and_the_defaults_lie_inside_it():
    """Labels, bounds and menus the page draws live on the plans; every default is one the page can show."""
    from dashboard.components.params_form import check_shown
    for plan in (AuditPlan(), SweepPlan(), TheoryPlan()):
        check_shown(plan)
    declared = {f.name for f in dataclasses.fields(AuditPlan) if "label" in f.metadata}
    assert declared == {"target", "lens", "subgroup_columns", "subgroup_order", "alpha", "beta", "gamma", "trials",
                        "null_splits", "seed", "constants"}
    assert {f.name for f in dataclasses.fields(TheoryPlan)} == {
        f.name for f in dataclasses.fields(TheoryPlan) if "label" in f.metadata}
    with pytest.raises(ValueError, match="alpha"):
        check_shown(AuditPlan(alpha=0.005))        # a valid plan the page's widget cannot show
