"""The synthesis page's simulation and reservation ledgers come from core, against closed forms."""
import pytest

from core.contracts import DataRef
from core.privacy.accounting import rho_for_epsilon
from core.synthesis import SweepPlan, SynthesisPlan
from core.synthesis.release import projected_release_ledger
from core.synthesis.workflow import SynthesisResult


def _plan(**kw):
    return SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income", "education"), **kw)


def test_a_sweep_lists_one_simulated_spend_per_epsilon_at_the_plans_delta():
    plan = _plan(sweep=SweepPlan(epsilons=(0.5, 2.0), seeds=(0, 1, 2)))
    result = SynthesisResult(plan=plan, overview=None, notes=(), noise=None, sweep=object())
    ledger = result.sweep_ledger()
    assert [s.amount for s in ledger.spends] == pytest.approx([rho_for_epsilon(e, plan.delta) for e in (0.5, 2.0)])
    assert all(s.unit == "rho" and "3 seeds" in s.measured for s in ledger.spends)
    assert SynthesisResult(plan=plan, overview=None, notes=(), noise=None).sweep_ledger() is None


def test_a_secure_release_reserves_rho_for_its_epsilon():
    plan = _plan()
    ledger = projected_release_ledger(plan, 1.5, "aim")
    assert ledger.total("rho") == pytest.approx(rho_for_epsilon(1.5, plan.delta))
    assert "aim" in ledger.spends[0].measured
