"""Coherence audit page end to end with Streamlit's AppTest."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "coherence_audit.py")


def _small(at):
    at.number_input(key="coh_rows").set_value(3000)
    at.number_input(key="coh_trials").set_value(8)
    return at


@pytest.fixture(scope="module")
def ran():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    assert not at.exception
    _small(at).button(key="coh_run").click().run()
    assert not at.exception
    return at


def test_default_view_is_fast_and_honest():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Coherence audit"
    assert any("Simulation, not a release" in c.value for c in at.caption)
    assert any("Run audit" in i.value for i in at.info)
    assert any("covers *only the adversaries tested*" in i.value for i in at.info)
    # theory calculator at its defaults reproduces the spec's first row (pure DP, eps 0.01, n 200,000)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["gamma, conservative"] == "2,503.6" and metrics["gamma, as printed"] == "625.9"
    # a zeta or k-records guarantee has no epsilon: no epsilon bound may be read off it
    for mech in ("max-information zeta (Thm 6)", "k records in the clear (derived)"):
        at.selectbox(key="coh_th_mech").select(mech).run()
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["largest epsilon at that size"] == "not a DP guarantee", mech
        table = next(d.value for d in at.dataframe if "max_epsilon_at_size" in d.value.columns)
        assert table["max_epsilon_at_size"].isna().all()


def test_two_releases_show_two_verdict_cards_and_the_heat_map(ran):
    verdicts = [m for m in ran.metric if m.label.startswith("Verdict: ")]
    assert len(verdicts) == 2
    labels = {m.label: m.value for m in verdicts}
    assert labels["Verdict: Half in the clear"] == "FAIL"
    assert labels["Verdict: Noisy table (Laplace) (epsilon=1.0)"] != "FAIL"
    charts = ran.get("plotly_chart")
    assert len(charts) >= 4
    specs = [json.loads(c.proto.spec) for c in charts]
    heat = [sp for sp in specs if sp["data"] and sp["data"][0]["type"] == "heatmap"]
    assert len(heat) == 1
    assert len(heat[0]["data"][0]["x"]) == 2 and "Half in the clear" in heat[0]["data"][0]["x"]
    summary = next(d.value for d in ran.dataframe if "beta_hat" in d.value.columns)
    assert len(summary) == 2 * 3
    assert set(summary["verdict"]) <= {"FAIL", "PASS", "INCONCLUSIVE"}
    assert any(b.label.startswith("Download report") for b in ran.get("download_button"))


def test_changing_outputs_widgets_keeps_results(ran):
    ran.selectbox(key="coh_heat_adv").select("Nearest-neighbour matcher").run()
    ran.selectbox(key="coh_hist_group").select_index(2).run()
    ran.selectbox(key="coh_hist_release").select_index(1).run()
    assert not ran.exception
    assert len([m for m in ran.metric if m.label.startswith("Verdict: ")]) == 2
    subgroups = next(d.value for d in ran.dataframe if "q_w1" in d.value.columns)
    assert set(subgroups["adversary"]) == {"Nearest-neighbour matcher"}


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
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.number_input(key="coh_rows").set_value(2000)
    at.multiselect(key="coh_sweep_eps").set_value([0.01, 10.0])
    at.number_input(key="coh_sweep_trials").set_value(3)
    at.button(key="coh_sweep_run").click().run()
    assert not at.exception and not at.error
    sweep = next(d.value for d in at.dataframe if "alpha_hat_null" in d.value.columns)
    assert len(sweep) == 2 * 3
    at.selectbox(key="coh_th_mech").select("approximate DP (Thm 8)").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["gamma, conservative"] != "" and not at.exception


def test_adult_with_a_synthesizer_and_suppression():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.selectbox(key="coh_dataset").select("adult").run()
    assert not at.exception
    assert at.selectbox(key="coh_target").value == "income"
    assert at.selectbox(key="coh_positive").value == ">50K"
    at.number_input(key="coh_rows").set_value(2000)
    at.number_input(key="coh_trials").set_value(3)
    at.multiselect(key="coh_releases").set_value(["suppression", "strat_mst"]).run()
    at.multiselect(key="coh_param_strat_mst_strata").set_value(["sex"])
    at.button(key="coh_run").click().run()
    assert not at.exception and not at.error
    verdicts = [m.label for m in at.metric if m.label.startswith("Verdict: ")]
    assert len(verdicts) == 2 and any("stratified" in v for v in verdicts)


def test_custom_subgroup_add_remove_tables_and_null_splits():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    _small(at)
    at.number_input(key="coh_n_custom").set_value(1).run()
    at.text_input(key="coh_custom_name_0").set_value("older women")
    at.multiselect(key="coh_custom_cols_0").set_value(["sex", "age_band"]).run()
    at.multiselect(key="coh_custom_0_sex").set_value(["Female"])
    older = [v for v in at.multiselect(key="coh_custom_0_age_band").options if v.startswith(("65", "75"))]
    assert older, "expected CPS age bands of 65 and over"
    at.multiselect(key="coh_custom_0_age_band").set_value(older)
    at.radio(key="coh_param_laplace_table_neighbour").set_value("add_remove")
    at.number_input(key="coh_null_splits").set_value(3)
    at.button(key="coh_run").click().run()
    assert not at.exception and not at.error
    verdicts = [m.label for m in at.metric if m.label.startswith("Verdict: ")]
    assert "Verdict: Noisy table (Laplace) (epsilon=1.0, neighbour=add_remove)" in verdicts
    subgroups = next(d.value for d in at.dataframe if "q_w1" in d.value.columns)
    assert "older women" in set(subgroups["subgroup"])
    assert any("8 trials with 3 null split(s) each" in c.value for c in at.caption)


def test_epsilon_sweep_of_a_stratified_synthesizer_uses_its_own_strata():
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.run()
    at.number_input(key="coh_rows").set_value(2000)
    at.multiselect(key="coh_groups").set_value([]).run()          # no subgroup columns at all
    at.selectbox(key="coh_sweep_release").select("strat_mst").run()
    assert at.multiselect(key="coh_sweep_strata").value == ["age_band"]
    at.multiselect(key="coh_sweep_strata").set_value(["sex"])
    at.multiselect(key="coh_sweep_eps").set_value([0.1, 10.0])
    at.number_input(key="coh_sweep_trials").set_value(2)
    at.button(key="coh_sweep_run").click().run()
    assert not at.exception and not at.error
    sweep = next(d.value for d in at.dataframe if "alpha_hat_null" in d.value.columns)
    assert sweep["release"].str.contains("strata=\\('sex',\\)").all()
