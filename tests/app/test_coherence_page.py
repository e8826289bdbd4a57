"""Coherence audit page end to end with Streamlit's AppTest: widgets -> plan -> run -> draw."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.coherence import ADVERSARIES, RELEASES, AuditPlan, Condition, CustomSubgroup, RowSample, run
from core.contracts import DataRef
from core.report import build_report, report_json
from tests.release_steps import confirm_release

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "dashboard" / "tools" / "coherence_audit.py")
APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "coh_cache"))


def _small(at, rows=3000, trials=8, alpha=0.3):
    at.number_input(key="coh_rows").set_value(rows)
    at.number_input(key="coh_trials").set_value(trials)
    at.number_input(key="coh_alpha").set_value(alpha)
    return at


def _table(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    import os
    os.environ["DASHBOARD_CACHE_DIR"] = str(tmp_path_factory.getbasetemp() / "coh_cache")
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert not at.exception
    _small(at).button(key="coh_run").click().run()
    assert not at.exception
    return at


def test_default_view_explains_verdicts_and_runs_the_calculator():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Coherence audit"
    assert any("Simulation, not a release" in c.value for c in at.caption)
    assert any("Run audit" in i.value for i in at.info)
    captions = " ".join(c.value for c in at.caption)
    assert "neither a pass nor a fail" in captions and "needs at least 59 trials" in captions
    assert "no privacy guarantee" in captions
    # theory calculator at its defaults reproduces the spec's first row (pure DP, eps 0.01, n 200,000)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["gamma, conservative"] == "2,503.6" and metrics["gamma, as printed"] == "625.9"
    theory = _table(at, "Subgroup size needed, gamma (people)")
    assert "gamma" not in theory.columns and "max_epsilon" not in theory.columns
    for mech in ("zeta", "k_records"):
        at.selectbox(key="coh_th_guarantee").select(mech).run()
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["largest epsilon at that size"] == "not a DP guarantee", mech
        assert _table(at, "Largest epsilon at that size")["Largest epsilon at that size"].isna().all()


def test_too_few_trials_are_flagged_before_running():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not any("no verdict can be PASS" in w.value for w in at.warning)
    assert at.number_input(key="coh_sweep_trials").value >= 59       # the sweep's default can decide
    at.number_input(key="coh_trials").set_value(20).run()
    assert any("With 20 trials no verdict can be PASS" in w.value for w in at.warning)
    at.number_input(key="coh_sweep_trials").set_value(20).run()
    assert any("every verdict of the sweep will be FAIL or INCONCLUSIVE" in w.value for w in at.warning)


def test_two_releases_show_two_verdict_cards_and_the_heat_map(ran):
    verdicts = {m.label: m.value for m in ran.metric if m.label.startswith("Verdict: ")}
    assert verdicts["Verdict: Half in the clear"] == "FAIL"
    assert verdicts["Verdict: Noisy table (Laplace) (epsilon=1.0)"] != "FAIL"
    charts = [json.loads(c.proto.spec) for c in ran.get("plotly_chart")]
    heat = [sp for sp in charts if sp["data"] and sp["data"][0]["type"] == "heatmap"]
    assert len(heat) == 1 and "Half in the clear" in heat[0]["data"][0]["x"]
    summary = _table(ran, "Failure rate (share of trials, W1 > alpha)")
    assert len(summary) == 2 * 3 and "beta_hat" not in summary.columns and "ci_low" not in summary.columns
    assert any(b.label.startswith("Download report") for b in ran.get("download_button"))


def test_page_numbers_are_the_plan_numbers(ran):
    """The same settings built in plain Python give the numbers the page shows."""
    plan = ran.session_state["coh_plan"]
    assert plan == AuditPlan(rows=RowSample(3000, 0), trials=8, alpha=0.3, compare=True,
                             theory=plan.theory)
    result = run(plan)
    shown = _table(ran, "Failure rate (share of trials, W1 > alpha)")
    expected = result.tables()["adversaries"]
    assert shown["Failure rate (share of trials, W1 > alpha)"].tolist() == expected["beta_hat"].tolist()
    assert shown["Verdict"].tolist() == expected["verdict"].tolist()


def test_changing_outputs_widgets_keeps_results(ran):
    ran.selectbox(key="coh_heat_adv").select("Nearest-neighbour matcher").run()
    ran.selectbox(key="coh_hist_group").select_index(2).run()
    ran.selectbox(key="coh_hist_release").select_index(1).run()
    assert not ran.exception
    assert len([m for m in ran.metric if m.label.startswith("Verdict: ")]) == 2
    subgroups = _table(ran, "Size (people, full sample)")
    assert "q_w1" not in subgroups.columns and len(subgroups) > 0


def test_user_error_is_shown_and_inputs_kept():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    _small(at)
    at.number_input(key="coh_gamma").set_value(1_000_000)
    at.button(key="coh_run").click().run()
    assert not at.exception
    assert any("gamma" in e.value for e in at.error)
    assert at.number_input(key="coh_gamma").value == 1_000_000


def test_epsilon_sweep_and_theory_modes():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.number_input(key="coh_rows").set_value(2000)
    at.multiselect(key="coh_sweep_epsilons").set_value([0.01, 10.0])
    at.number_input(key="coh_sweep_trials").set_value(3)
    at.button(key="coh_sweep_run").click().run()
    assert not at.exception and not at.error
    sweep = _table(at, "Release at epsilon")
    assert len(sweep) == 2 * 3
    at.selectbox(key="coh_th_guarantee").select("approx_dp").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["gamma, conservative"] != "" and not at.exception


def test_adult_with_a_synthesizer_and_suppression():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.selectbox(key="coh_dataset").select("adult").run()
    assert not at.exception
    assert at.selectbox(key="coh_target").value == "income"
    assert at.selectbox(key="coh_positive").value == ">50K"
    at.number_input(key="coh_rows").set_value(2000)
    at.number_input(key="coh_trials").set_value(3)
    at.multiselect(key="coh_releases").set_value(["suppression", "strat_mst"]).run()
    at.multiselect(key="coh_rel_strat_mst_strata").set_value(["sex"])
    at.number_input(key="coh_rel_suppression_k").set_value(3)
    at.button(key="coh_run").click().run()
    assert not at.exception and not at.error
    plan = at.session_state["coh_plan"]
    assert plan.releases[0].params.k == 3 and plan.releases[1].params.strata == ("sex",)
    cards = [m.label for m in at.metric if m.label.startswith("Verdict: ")]
    shown = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert any("stratified" in v for v in cards + [shown])


def test_custom_subgroup_add_remove_tables_and_null_splits():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    _small(at)
    at.number_input(key="coh_n_custom").set_value(1).run()
    at.text_input(key="coh_custom_name_0").set_value("older women")
    at.multiselect(key="coh_custom_cols_0").set_value(["sex", "age_band"]).run()
    at.multiselect(key="coh_custom_0_sex").set_value(["Female"])
    older = [v for v in at.multiselect(key="coh_custom_0_age_band").options if v.startswith(("65", "75"))]
    assert older, "expected CPS age bands of 65 and over"
    at.multiselect(key="coh_custom_0_age_band").set_value(older)
    at.radio(key="coh_rel_laplace_table_neighbour").set_value("add_remove")
    at.number_input(key="coh_null_splits").set_value(3)
    at.button(key="coh_run").click().run()
    assert not at.exception and not at.error
    verdicts = [m.label for m in at.metric if m.label.startswith("Verdict: ")]
    assert "Verdict: Noisy table (Laplace) (epsilon=1.0, neighbour=add_remove)" in verdicts
    assert "older women" in set(_table(at, "Size (people, full sample)")["Subgroup"])
    assert any("8 trials with 3 null split(s) each" in c.value for c in at.caption)


def test_saved_report_restores_every_widget_including_custom_subgroups():
    """Opening a saved report rebuilds its plan on the page: custom subgroups and every Params included."""
    from core.coherence import AdversaryChoice, ReleaseChoice, SweepPlan, TheoryPlan
    from core.coherence.releases import release_params
    plan = AuditPlan(rows=RowSample(2500, 4), seed=4, trials=5, alpha=0.35, gamma=70, null_splits=2,
                     lens=("age_band", "education", "sex"),
                     custom_subgroups=(CustomSubgroup("older women", (Condition("sex", ("Female",)),
                                                                      Condition("age_band", ("65-74", "75+")))),),
                     releases=(ReleaseChoice("suppression", release_params("suppression", k=4, generalise=("sex",))),
                               ReleaseChoice("gaussian_table", release_params("gaussian_table", epsilon=0.5))),
                     adversaries=(AdversaryChoice("naive_bayes"), AdversaryChoice(
                         "boosting", ADVERSARIES["boosting"].params(max_iter=12, learning_rate=0.1))),
                     sweep=SweepPlan(ReleaseChoice("laplace_table", release_params("laplace_table", epsilon=0.01,
                                                                                   neighbour="add_remove")),
                                     (0.01, 1.0), 4),
                     theory=TheoryPlan("approx_dp", epsilon=0.02, n=50_000, size=3000))
    report = report_json(build_report(run(plan), page="Coherence audit"))
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.file_uploader(key="coh__report_file").set_value(("audit.json", report.encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["coh_plan"] == plan
    assert at.multiselect(key="coh_custom_0_age_band").value == ["65-74", "75+"]
    assert at.text_input(key="coh_custom_name_0").value == "older women"
    # the restored plan's results are the saved ones (cached on the plan), with no stale-settings warning
    assert not any("settings changed" in w.value for w in at.warning)
    assert len([m for m in at.metric if m.label.startswith("Verdict: ")]) + \
        sum("Verdict: **" in m.value for m in at.markdown) == 2


def test_widgets_are_drawn_from_every_registered_params():
    """Every release's and adversary's settings come from its Params; building them gives the defaults."""
    def script():
        import streamlit as st
        from core.coherence import ADVERSARIES, RELEASES
        from dashboard.components.params_form import params_widgets
        built = {}
        for name, registry in (("rel", RELEASES), ("adv", ADVERSARIES)):
            for key, spec in registry.items():
                built[f"{name}:{key}"] = params_widgets(spec, f"t_{name}", columns=["race", "sex"],
                                                        lens=["race", "sex"], persist_state="session")
        st.session_state["built"] = built

    at = AppTest.from_function(script, default_timeout=60)
    at.run()
    assert not at.exception
    built = at.session_state["built"]
    for name, registry in (("rel", RELEASES), ("adv", ADVERSARIES)):
        for key, spec in registry.items():
            assert built[f"{name}:{key}"] == spec.default_params(), key
    # a field the page does not know by name still gets its widget and reaches the Params
    at.number_input(key="t_adv_boosting_max_iter").set_value(7).run()
    assert at.session_state["built"]["adv:boosting"].max_iter == 7
    at.number_input(key="t_rel_clear_sample_k").set_value(12).run()
    assert at.session_state["built"]["rel:clear_sample"].k == 12


def test_navigating_away_and_back_keeps_settings_and_results():
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("tools/coherence_audit.py").run()
    assert not at.exception
    _small(at, rows=2000, trials=4)
    at.number_input(key="coh_n_custom").set_value(1).run()
    at.multiselect(key="coh_custom_cols_0").set_value(["age_band"]).run()
    at.multiselect(key="coh_custom_0_age_band").set_value(["65-74", "75+"])
    at.button(key="coh_run").click().run()
    assert not at.exception and not at.error
    before = {m.label: m.value for m in at.metric if m.label.startswith("Verdict: ")}
    plan = at.session_state["coh_plan"]
    assert before and plan.custom_subgroups
    at.switch_page("home.py").run()
    assert not at.exception
    at.switch_page("tools/coherence_audit.py").run()
    assert not at.exception
    assert at.number_input(key="coh_rows").value == 2000
    assert at.multiselect(key="coh_custom_0_age_band").value == ["65-74", "75+"]
    assert at.session_state["coh_plan"] == plan
    assert {m.label: m.value for m in at.metric if m.label.startswith("Verdict: ")} == before
    assert not any("settings changed" in w.value for w in at.warning)


def test_saved_report_on_adult_restores_a_range_subgroup():
    plan = AuditPlan(data=DataRef("adult"),
                     rows=RowSample(2000, 1), seed=1, trials=3, positive=">50K",
                     lens=("education", "marital_status", "race", "sex", "relationship"),
                     custom_subgroups=(CustomSubgroup("prime age", (Condition("age", low=30.0, high=50.0),)),),
                     compare=True)
    report = report_json(build_report(run(plan), page="Coherence audit"))
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.file_uploader(key="coh__report_file").set_value(("adult.json", report.encode(), "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert at.slider(key="coh_custom_0_age").value == (30.0, 50.0)
    restored = at.session_state["coh_plan"]
    assert restored.replace(theory=None) == plan


def test_a_report_on_a_plain_upload_points_to_the_data_step():
    """One intake: a report made on a file uploaded without a declaration reopens on bundled data, with a
    pointer to declare that file on the Data step (no page-local upload is offered)."""
    from core.contracts import bytes_fingerprint
    from core.datasets import load_dataset
    other = load_dataset("cps").tail(700).to_csv(index=False).encode()
    plan = AuditPlan(data=DataRef("upload", bytes_fingerprint(other)), rows=RowSample(None, 0), trials=2, gamma=40,
                     compare=True)
    report = report_json(build_report(run(plan, other), page="Coherence audit"))
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert "upload" not in at.selectbox(key="coh_dataset").options
    at.file_uploader(key="coh__report_file").set_value(("r.json", report.encode(), "application/json"))
    at.run()
    assert not at.exception
    assert any("uploaded without a declaration" in i.value and "Data step" in i.value for i in at.info)


def test_audit_is_listed_as_a_simulation_and_release_is_recorded_once(tmp_path, monkeypatch):
    """An audit run adds one uncounted simulation; the release button adds one counted release, in epsilon."""
    from core.privacy.project_ledger import ProjectLedger, compose

    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger = ProjectLedger()
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert any("Run the audit first" in i.value for i in at.info)
    _small(at).button(key="coh_run").click().run()
    assert not at.exception and not at.error
    sims = ledger.releases("cps", "simulation")
    assert [s.label for s in sims] == ["audit of Noisy table (Laplace), 8 seeded trials (simulation)"]
    assert [(s.amount, s.unit) for s in sims[0].spends] == [(1.0, "epsilon")]
    assert compose(sims).epsilon == 0.0 and ledger.totals("cps").n_releases == 0
    at.run()                                                    # a rerun records nothing new
    assert len(ledger.releases("cps")) == 1

    names = at.selectbox(key="coh_pub_release").options
    assert "Laplace" in at.selectbox(key="coh_pub_release").value      # a private algorithm is offered first
    at.selectbox(key="coh_pub_release").select(next(n for n in names if "clear" in n)).run()
    assert any("cannot be released privately" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "coh_pub_run"]
    at.selectbox(key="coh_pub_release").select(next(n for n in names if "Laplace" in n)).run()
    confirm_release(at, "coh_pub_run")
    assert not at.exception and not at.error
    made = ledger.releases("cps", "release")
    assert len(made) == 1 and made[0].page == "Coherence audit"
    assert sum(s.amount for s in made[0].spends) == pytest.approx(1.0, rel=1e-9)
    assert ledger.totals("cps").epsilon == pytest.approx(1.0, rel=1e-9)
    assert any("Released at" in s.value and "OpenDP" in s.value for s in at.success)
    table = _table(at, "noisy count, income 50K+")
    assert len(table) == 20 and list(table.columns[:5]) == list(AuditPlan().lens)
    assert [d for d in at.get("download_button") if "release" in str(d.proto.label).lower()]
    assert len(ledger.releases("cps", "simulation")) == 1       # still one simulation, never counted


def test_saved_report_outside_what_the_page_offers_is_refused_with_the_reason():
    """A plan made in a script may hold values the page's widgets cannot show; opening its report says which."""
    from core.coherence import TheoryPlan
    plan = AuditPlan(compare=False, theory=TheoryPlan(epsilon=5.0))
    report = report_json(build_report(run(plan), page="Coherence audit"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.file_uploader(key="coh__report_file").set_value(("script.json", report.encode(), "application/json"))
    at.run()
    assert not at.exception
    assert any("epsilon" in e.value and "5.0" in e.value for e in at.error)
    assert at.number_input(key="coh_th_epsilon").value == 0.01            # the page's own settings are kept


def test_every_chart_has_its_numbers_in_reach(ran):
    """Each chart either has its table right under it (heat map, sweep) or a 'numbers behind' expander."""
    behind = [e.label for e in ran.expander if e.label.startswith("The numbers behind")]
    assert {"The numbers behind the histograms", "The numbers behind the failure-rate curves",
            "The numbers behind the scatter"} <= set(behind)
    charts = len(ran.get("plotly_chart"))
    with_table_beside = 1                       # the heat map, followed by its subgroup table
    assert len(behind) == charts - with_table_beside
    bins = next(d.value for d in ran.dataframe if "share held out" in d.value.columns)
    assert len(bins) == 40
    assert abs(bins["share held out"].sum() - 1.0) < 1e-9 and abs(bins["share in the release's half"].sum() - 1.0) < 1e-9
