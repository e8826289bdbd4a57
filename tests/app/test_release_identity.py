"""What a real release records and says about itself: the digest of what the release depends on (so a
change of a simulation-only setting leaves an identical release a repeat), one (epsilon, delta) figure in
its label, confirmation and ledger, and no release while the page's simulation is in error."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.privacy.accounting import rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import DEFAULT_DELTA, LedgerRelease, ProjectLedger, compose
from tests.release_steps import confirm_release, has_button

TOOLS = Path(__file__).resolve().parents[2] / "dashboard" / "tools"


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    """A project ledger of its own, no release yet."""
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    return ProjectLedger()


def _page(name: str) -> AppTest:
    at = AppTest.from_file(str(TOOLS / name), default_timeout=240)
    at.run()
    assert not at.exception
    return at


def _texts(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success")
                    for e in getattr(at, kind)).replace("\\", "")


def _is_a_repeat(at, button: str) -> bool:
    """Press ``button`` again: the confirmation opens; True when it calls the release a repeat."""
    at.button(key=button).click().run()
    assert not at.exception and has_button(at, f"{button}_confirm")
    return any("This is a repeat" in w.value for w in at.warning)


def _stated(rho: float, delta: float) -> str:
    """A zCDP spend as the confirmation states it (its own closed form, not the page's helper)."""
    t = compose([LedgerRelease("x", "x", "release", "p", "a", "l", "d", (BudgetLedger().spend("s", rho, "rho"),))],
                delta)
    return f"epsilon {t.epsilon:.4g} at delta {delta:.2g} (rho {rho:.4g})"


# ------------------------------------------------------------------ a simulation setting is not the release


def test_budget_counts_are_a_repeat_after_the_number_of_toydown_runs_changes(ledger):
    ledger.set_no_cap("stylised")
    at = _page("budget_allocation.py")
    at.session_state["ba_tab"] = "Export & release"
    at.run()
    confirm_release(at, "ba_release")
    assert not at.exception and len(ledger.releases("stylised", "release")) == 1
    at.slider(key="ba_runs").set_value(10).run()                 # seeded ToyDown runs only
    assert not at.exception
    assert _is_a_repeat(at, "ba_release")


def test_a_synthetic_release_is_a_repeat_after_the_simulation_seed_changes(ledger):
    ledger.set_no_cap("cps")
    at = _page("stratified_synthesis.py")
    at.selectbox(key="ss_synthesizer").set_value("independent").run()
    confirm_release(at, "ss_rel_secure")
    assert not at.exception and len(ledger.releases("cps", "release")) == 1
    at.number_input(key="ss_rel_seed").set_value(7).run()        # "Seed (simulation only)"
    assert _is_a_repeat(at, "ss_rel_secure")
    at.number_input(key="ss_rel_epsilon").set_value(2.0).run()    # a release at another epsilon is not
    assert not _is_a_repeat(at, "ss_rel_secure")


def test_a_coherence_publish_is_a_repeat_after_the_audit_seed_changes(ledger):
    ledger.set_no_cap("cps")
    at = _page("coherence_audit.py")
    at.number_input(key="coh_rows").set_value(3000)
    at.number_input(key="coh_trials").set_value(8)
    at.number_input(key="coh_alpha").set_value(0.3)
    at.button(key="coh_run").click().run()
    confirm_release(at, "coh_pub_run")
    assert not at.exception and len(ledger.releases("cps", "release")) == 1
    at.number_input(key="coh_seed").set_value(5)
    at.button(key="coh_run").click().run()                        # the audit again, under another seed
    assert not at.exception and not at.button(key="coh_pub_run").disabled
    assert _is_a_repeat(at, "coh_pub_run")


# ------------------------------------------------------------------ one release, one (epsilon, delta)


def test_a_synthetic_release_states_one_epsilon_at_the_caps_delta_everywhere(ledger):
    """The synthesizer's own delta (1e-9) converts the release's rho to epsilon 1; the ledger states it at
    the cap's delta. Heading, spend line and the stored label give the ledger's figure, and a cap decided
    at another delta in the confirmation restates all of them (the pending release is kept)."""
    at = _page("stratified_synthesis.py")
    at.selectbox(key="ss_synthesizer").set_value("independent").run()
    rho = rho_for_epsilon(1.0, 1e-9)
    at.button(key="ss_rel_secure").click().run()
    default = _stated(rho, DEFAULT_DELTA)
    heading = next(m.value for m in at.markdown if "Confirm a real release" in m.value).replace("\\", "")
    assert default in heading and f"Spend of this release: {default}" in _texts(at)
    assert "delta 1e-09" not in _texts(at)

    at.number_input(key="ss_rel_secure_cap_amount").set_value(5.0)
    at.number_input(key="ss_rel_secure_cap_delta").set_value(1e-5)
    at.button(key="ss_rel_secure_cap_save").click().run()
    assert not at.exception and has_button(at, "ss_rel_secure_confirm")   # the same release, restated
    capped = _stated(rho, 1e-5)
    heading = next(m.value for m in at.markdown if "Confirm a real release" in m.value).replace("\\", "")
    assert capped in heading and f"Spend of this release: {capped}" in _texts(at) and default not in _texts(at)
    at.button(key="ss_rel_secure_confirm").click().run()
    assert not at.exception and not at.error
    [made] = ledger.releases("cps", "release")
    assert capped in made.label
    assert f"epsilon {ledger.totals('cps').epsilon:.4g} at delta 1e-05" in capped


# ------------------------------------------------------------------ the simulation's error
# (a failed commit or run on the release component: tests/app/test_release_component.py)


def test_a_failed_simulation_run_disables_both_synthesis_releases(ledger, monkeypatch):
    import core.synthesis as synthesis

    def broken(*args, **kwargs):
        raise ValueError("The simulation could not run with these settings.")

    ledger.set_no_cap("cps")
    working = synthesis.run
    monkeypatch.setattr(synthesis, "run", broken)
    at = _page("stratified_synthesis.py")
    assert any("could not run" in e.value for e in at.error)
    assert at.button(key="ss_mr_release").disabled and at.button(key="ss_rel_secure").disabled
    assert any("Release disabled until the settings are fixed" in c.value for c in at.caption)
    monkeypatch.setattr(synthesis, "run", working)
    at.run()
    assert not at.exception and not at.button(key="ss_mr_release").disabled
    assert ledger.releases("cps", "release") == ()
