"""Seeded previews of the Budget allocation and District maps pages are listed as simulations in the project
ledger: one entry per plan, with the allocation's spends, never counted toward a data set's total."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.privacy.project_ledger import ProjectLedger, compose

TOOLS = Path(__file__).resolve().parents[2] / "dashboard" / "tools"


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    return ProjectLedger()


def _sims(ledger: ProjectLedger, page: str):
    keys = list(ledger.data_sets()["data_key"])
    return [r for k in keys for r in ledger.releases(k) if r.page == page]


def test_budget_page_runs_record_one_simulation_per_plan(ledger):
    at = AppTest.from_file(str(TOOLS / "budget_allocation.py"), default_timeout=180)
    at.run()
    assert not at.exception and not at.error
    sims = _sims(ledger, "Budget allocation")
    assert len(sims) == 1 and sims[0].kind == "simulation"
    assert sims[0].label.endswith("(simulation)") and sims[0].label.startswith("ToyDown, 30 seeded runs;")
    # the default allocation: epsilon 1 split equally over five levels, each level's units in parallel
    assert sum(s.amount for s in sims[0].spends) == pytest.approx(1.0)
    assert {s.composition for s in sims[0].spends} == {"parallel"}
    assert compose(sims).epsilon == 0.0 and compose(sims).n_releases == 0
    at.run()
    assert len(_sims(ledger, "Budget allocation")) == 1          # the same plan is not listed twice


def test_district_page_noisy_runs_record_a_simulation(ledger):
    at = AppTest.from_file(str(TOOLS / "district_maps.py"), default_timeout=240)
    at.run()
    assert not at.exception and not at.error
    sims = _sims(ledger, "District maps")
    assert len(sims) == 1 and sims[0].kind == "simulation" and "16 seeded noisy runs" in sims[0].label
    assert all(s.amount > 0 for s in sims[0].spends) and compose(sims).n_releases == 0


def test_synthesis_sweep_records_one_simulation_with_a_spend_per_epsilon(ledger):
    from core.privacy.accounting import rho_for_epsilon

    at = AppTest.from_file(str(TOOLS / "stratified_synthesis.py"), default_timeout=240)
    at.run()
    at.multiselect(key="ss_columns_cps").set_value(["sex", "race", "income", "education"])
    at.text_input(key="ss_epsilons").input("0.5, 2").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    sims = _sims(ledger, "Stratified synthesis")
    assert len(sims) == 1 and sims[0].kind == "simulation" and sims[0].label.endswith("(simulation)")
    assert [s.amount for s in sims[0].spends] == pytest.approx([rho_for_epsilon(0.5, 1e-9), rho_for_epsilon(2.0, 1e-9)])
    assert compose(sims).n_releases == 0
    at.run()
    assert len(_sims(ledger, "Stratified synthesis")) == 1       # showing the same sweep again lists nothing new
