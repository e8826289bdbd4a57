"""Every real release on every page goes through one confirmation and the ledger's reserve -> run -> commit:
nothing is released on the first press, nothing while the page's settings are in error, a repeated release
asks again and says it is a repeat, and a data set's first release asks for its cap decision first."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import DataRef
from core.privacy.accounting import rho_for_epsilon, rho_to_epsilon
from core.privacy.project_ledger import DEFAULT_DELTA, Cap, ProjectLedger, data_key
from tests.release_steps import decide_cap, has_button

TOOLS = Path(__file__).resolve().parents[2] / "dashboard" / "tools"
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    """A project ledger of its own: no cap decision and no release for any data set yet."""
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    return ProjectLedger()


def _texts(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success")
                    for e in getattr(at, kind))


def _released(ledger: ProjectLedger, key: str) -> int:
    return len(ledger.releases(key, "release"))


def _first_release_asks_for_a_cap(at, ledger: ProjectLedger, button: str, key: str) -> None:
    """Press: nothing released; the confirmation states the spend, totals and cap, and asks the cap first."""
    at.button(key=button).click().run()
    assert not at.exception
    assert _released(ledger, key) == 0 and not ledger.reservations(key)
    text = _texts(at)
    assert "Confirm a real release" in text and "Spend of this release" in text and "Total after" in text
    assert "Cap: not decided yet" in text
    assert has_button(at, f"{button}_cap_save") and not has_button(at, f"{button}_confirm")   # decide first
    assert "Suggested: epsilon" in text and "differentially private" in text                  # what a cap means


def _repeat_asks_again(at, ledger: ProjectLedger, button: str, key: str) -> None:
    """A second release of the same: asks again, says it is a repeat; Cancel spends nothing."""
    made = _released(ledger, key)
    at.button(key=button).click().run()
    assert not at.exception and _released(ledger, key) == made
    assert any("This is a repeat" in w.value for w in at.warning)
    at.button(key=f"{button}_cancel").click().run()
    assert not at.exception and _released(ledger, key) == made and not ledger.reservations(key)
    assert any("nothing was spent" in i.value for i in at.info)
    assert not has_button(at, f"{button}_confirm")


# ------------------------------------------------------------------------------------------ Budget allocation

def _budget(ledger) -> AppTest:
    at = AppTest.from_file(str(TOOLS / "budget_allocation.py"), default_timeout=240)
    at.run()
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    assert not at.exception
    return at


def test_budget_release_asks_for_a_cap_then_confirms_once_and_a_repeat_asks_again(ledger):
    at = _budget(ledger)
    _first_release_asks_for_a_cap(at, ledger, "ba_release", "stylised")
    decide_cap(at, "ba_release")                                          # the explicit "no cap"
    assert ledger.cap_decision("stylised") == "none"
    assert "Cap: no cap (the curator's recorded choice)" in _texts(at)
    assert _released(ledger, "stylised") == 0                             # deciding the cap released nothing
    at.button(key="ba_release_confirm").click().run()
    assert not at.exception and not at.error
    [made] = ledger.releases("stylised", "release")
    assert made.page == "Budget allocation" and not ledger.reservations("stylised")
    assert at.session_state["ba_release_result"] is not None
    _repeat_asks_again(at, ledger, "ba_release", "stylised")


def test_a_cap_chosen_at_the_first_release_is_saved_with_its_delta(ledger):
    at = _budget(ledger)
    at.button(key="ba_release").click().run()
    decide_cap(at, "ba_release", cap=3.0)
    assert ledger.cap_decision("stylised") == Cap(3.0, "epsilon", DEFAULT_DELTA)
    assert f"Cap: epsilon 3 at delta {DEFAULT_DELTA:.2g}" in _texts(at)
    at.button(key="ba_release_confirm").click().run()
    assert _released(ledger, "stylised") == 1


def test_budget_release_is_not_offered_while_the_settings_are_in_error(ledger):
    ledger.set_no_cap("stylised")
    at = _budget(ledger)
    [targets] = [g for g in at.get("button_group") if str(g.key).startswith("ba_targets_")]
    targets.set_value([]).run()                                        # no target: the page's red error
    assert not at.exception and any("Pick at least one target" in e.value for e in at.error)
    assert not has_button(at, "ba_release") and _released(ledger, "stylised") == 0


# ------------------------------------------------------------------------------------------ Stratified synthesis

def _synthesis() -> AppTest:
    at = AppTest.from_file(str(TOOLS / "stratified_synthesis.py"), default_timeout=240)
    at.run()
    assert not at.exception
    return at


def test_stratified_mean_asks_for_a_cap_confirms_and_a_repeat_asks_again(ledger):
    at = _synthesis()
    _first_release_asks_for_a_cap(at, ledger, "ss_mr_release", "cps")
    assert "stratified share income = 50K+, epsilon 1" in _texts(at).replace("\\", "")   # what is released
    decide_cap(at, "ss_mr_release")
    at.button(key="ss_mr_release_confirm").click().run()
    assert not at.exception and not at.error
    assert _released(ledger, "cps") == 1
    _repeat_asks_again(at, ledger, "ss_mr_release", "cps")


def test_synthetic_release_asks_for_a_cap_and_states_its_delta(ledger):
    at = _synthesis()
    at.selectbox(key="ss_synthesizer").set_value("independent").run()
    _first_release_asks_for_a_cap(at, ledger, "ss_rel_secure", "cps")
    # one release, one figure: its rho (epsilon 1 at the synthesizer's delta 1e-9) is stated at the ledger's
    # delta in the page's label, the heading and the spend line alike
    rho = rho_for_epsilon(1.0, 1e-9)
    stated = f"epsilon {rho_to_epsilon(rho, DEFAULT_DELTA):.4g} at delta {DEFAULT_DELTA:.2g} (rho {rho:.4g})"
    assert f"secure stratified, {stated} from" in _texts(at).replace("\\", "")
    assert f"Spend of this release: {stated}" in _texts(at) and "delta 1e-09" not in _texts(at)
    decide_cap(at, "ss_rel_secure")
    at.button(key="ss_rel_secure_confirm").click().run()
    assert not at.exception and not at.error
    assert _released(ledger, "cps") == 1
    _repeat_asks_again(at, ledger, "ss_rel_secure", "cps")


def test_synthesis_releases_are_disabled_while_the_settings_are_in_error(ledger):
    ledger.set_no_cap("cps")
    at = _synthesis()
    at.text_input(key="ss_epsilons").input("0.1, abc").run()
    assert not at.exception and at.error                               # the red settings error is on screen
    for button in ("ss_mr_release", "ss_rel_secure"):
        assert at.button(key=button).disabled                          # AppTest, like a browser, cannot press it
    assert any("Release disabled until the settings are fixed" in c.value for c in at.caption)
    assert not has_button(at, "ss_mr_release_confirm") and not has_button(at, "ss_rel_secure_confirm")
    assert _released(ledger, "cps") == 0


def test_a_bad_public_range_with_a_plan_still_built_disables_both_releases(ledger):
    """The red error of the numeric ranges leaves a plan without those ranges: releasing it would release
    what the curator did not ask for, so both buttons wait for the error to be fixed."""
    ledger.set_no_cap("adult")
    at = _synthesis()
    at.selectbox(key="ss_dataset").set_value("adult").run()
    at.number_input(key="ss_lo_adult_age").set_value(90).run()
    at.number_input(key="ss_hi_adult_age").set_value(10).run()       # high below low
    assert not at.exception and at.error
    assert at.button(key="ss_mr_release").disabled and at.button(key="ss_rel_secure").disabled
    at.number_input(key="ss_lo_adult_age").set_value(None).run()
    at.number_input(key="ss_hi_adult_age").set_value(None).run()
    assert not at.button(key="ss_mr_release").disabled


def test_a_settings_error_after_the_press_drops_the_pending_release(ledger):
    ledger.set_no_cap("cps")
    at = _synthesis()
    at.button(key="ss_mr_release").click().run()
    assert has_button(at, "ss_mr_release_confirm")
    at.text_input(key="ss_epsilons").input("abc").run()
    assert at.button(key="ss_mr_release").disabled and not has_button(at, "ss_mr_release_confirm")
    at.text_input(key="ss_epsilons").input("0.1, 1, 5").run()
    assert not has_button(at, "ss_mr_release_confirm")                 # a fixed error does not revive it
    assert _released(ledger, "cps") == 0


def test_changed_settings_after_the_press_need_a_new_press(ledger):
    ledger.set_no_cap("cps")
    at = _synthesis()
    at.button(key="ss_mr_release").click().run()
    at.number_input(key="ss_mr_epsilon").set_value(0.5).run()
    assert not has_button(at, "ss_mr_release_confirm")
    assert any("settings changed after the release button was pressed" in i.value for i in at.info)
    assert _released(ledger, "cps") == 0


# ------------------------------------------------------------------------------------------ Coherence audit

def _audited(ledger) -> AppTest:
    at = AppTest.from_file(str(TOOLS / "coherence_audit.py"), default_timeout=240)
    at.run()
    at.number_input(key="coh_rows").set_value(3000)
    at.number_input(key="coh_trials").set_value(8)
    at.number_input(key="coh_alpha").set_value(0.3)
    at.button(key="coh_run").click().run()
    assert not at.exception and not at.error
    return at


def test_coherence_publish_asks_for_a_cap_confirms_and_a_repeat_asks_again(ledger):
    at = _audited(ledger)
    _first_release_asks_for_a_cap(at, ledger, "coh_pub_run", "cps")
    decide_cap(at, "coh_pub_run")
    at.button(key="coh_pub_run_confirm").click().run()
    assert not at.exception and not at.error
    assert _released(ledger, "cps") == 1
    _repeat_asks_again(at, ledger, "coh_pub_run", "cps")


def test_coherence_publish_is_disabled_once_the_settings_differ_from_the_audit(ledger):
    at = _audited(ledger)
    target = at.selectbox(key="coh_target")
    target.set_value(next(o for o in target.options if o != target.value)).run()
    assert not at.exception
    assert at.button(key="coh_pub_run").disabled
    assert any("run the audit again" in c.value for c in at.caption)
    assert _released(ledger, "cps") == 0


# ------------------------------------------------------------------------------------------ Fairness elicitation

def _fairness_synthetic() -> AppTest:
    at = AppTest.from_file(str(TOOLS / "fairness_elicitation.py"), default_timeout=240)
    at.run()
    at.radio(key="fe_pair_source").set_value("dp_synthetic").run()
    assert not at.exception
    return at


def test_a_synthetic_copy_asks_for_a_cap_confirms_and_a_second_copy_is_called_a_repeat(ledger):
    key = data_key(DataRef("compas"))
    at = _fairness_synthetic()
    _first_release_asks_for_a_cap(at, ledger, "fe_create", key)
    assert "fe_fac" not in at.session_state                            # no session before the release
    decide_cap(at, "fe_create")
    at.button(key="fe_create_confirm").click().run()
    assert not at.exception and not at.error
    assert _released(ledger, key) == 1 and at.session_state["fe_fac"]
    at.button(key="fe_leave").click().run()
    at.checkbox(key="fe_reuse_copy").uncheck().run()                   # a new copy of the same people
    _repeat_asks_again(at, ledger, "fe_create", key)


def test_a_synthetic_copy_is_not_made_while_the_design_is_in_error(ledger):
    key = data_key(DataRef("compas"))
    ledger.set_no_cap(key)
    at = _fairness_synthetic()
    at.multiselect(key="fe_features").set_value([]).run()              # no feature on the cards
    assert not at.exception
    assert at.button(key="fe_create").disabled
    assert any("Release disabled until the settings are fixed" in c.value for c in at.caption)
    assert _released(ledger, key) == 0


# ------------------------------------------------------------------------------------------ Privacy ledger page

def test_the_ledger_page_opens_on_the_data_set_in_use_with_an_empty_cap(ledger):
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.switch_page("tools/privacy_ledger.py").run()
    assert not at.exception
    assert at.selectbox(key="pl_data").value == "__all__"             # nothing used yet: the summary
    at.switch_page("tools/stratified_synthesis.py").run()
    assert not at.exception
    at.switch_page("tools/privacy_ledger.py").run()
    assert not at.exception and at.selectbox(key="pl_data").value == "cps"
    assert at.number_input(key="pl_cap_amount_cps").value is None      # no cap saved: the field is empty
    assert any("No budget cap has been decided" in i.value for i in at.info)
    at.button(key="pl_no_cap").click().run()
    assert ledger.cap_decision("cps") == "none"
    assert any("No cap, by the curator's recorded choice" in i.value for i in at.info)
    assert "no cap (recorded choice)" in _texts(at)


# ------------------------------------------------------------------------------------------ what is reserved

def test_a_first_cap_suggestion_leaves_room_for_the_release_and_as_much_again():
    from dashboard.components.release_confirm import suggested_cap
    assert [suggested_cap(e) for e in (0.0, 0.3, 1.0, 1.2, 4.0, 30.0, 1e9)] == [0.5, 1.0, 2.0, 3.0, 8.0, 100.0, 100.0]
