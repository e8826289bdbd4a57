"""Publishing an audited release on the whole file: ledgers in the algorithm's unit, refusals, shapes, seeds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.coherence import AuditPlan, ReleaseChoice
from core.coherence.publish import PublishPlan, publish, simulation_label, sweep_ledger, trial_ledger
from core.coherence.releases import release_params
from core.contracts import DataRef, bytes_fingerprint
from core.datasets import load_dataset
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import LedgerRelease, compose, spends_of

LENS = ("race", "sex")


def _choice(key, **values):
    return ReleaseChoice(key, release_params(key, **values))


def test_laplace_table_ledger_is_its_epsilon_and_the_table_covers_every_cell():
    plan = PublishPlan(lens=LENS, release=_choice("laplace_table", epsilon=0.7))
    res = publish(plan, secure=True)
    frame = load_dataset("cps")
    cells = frame["race"].astype("category").cat.categories.size * frame["sex"].astype("category").cat.categories.size
    assert res.table.shape == (cells, len(LENS) + 2)
    assert res.budget.is_pure() and res.budget.total("epsilon") == pytest.approx(0.7, rel=1e-9)
    assert res.ledger() is res.budget and res.secure and res.kind == "table"
    # released cells sit near the true counts but are not them (continuous noise of scale 2/0.7)
    truth = frame.groupby(["race", "sex"], observed=False)["income"].apply(lambda s: (s == "50K+").sum())
    released = res.table.set_index(["race", "sex"])["noisy count, income 50K+"]
    diff = (released - truth.reindex(released.index)).to_numpy()
    assert np.all(diff != 0) and np.abs(diff).max() < 60
    assert "Release" in res.statement and "OpenDP" in res.statement


def test_gaussian_table_ledger_is_rho_eps_squared_over_two():
    res = publish(PublishPlan(lens=LENS, release=_choice("gaussian_table", epsilon=0.5)), secure=True)
    assert [s.unit for s in res.budget.spends] == ["rho"]
    assert res.budget.total("rho") == pytest.approx(0.5 ** 2 / 2, rel=1e-9)


@pytest.mark.parametrize("key, epsilon", [("synth_mst", 0.8), ("strat_independent", 0.6)])
def test_synthesizer_ledger_totals_rho_of_its_epsilon(key, epsilon):
    extra = {"strata": ("sex",)} if key.startswith("strat_") else {}
    plan = PublishPlan(lens=LENS, release=_choice(key, epsilon=epsilon, **extra))
    res = publish(plan, secure=True)
    assert res.budget.total("rho") == pytest.approx(epsilon ** 2 / 2, rel=1e-9)
    assert list(res.table.columns) == [*LENS, "income"]
    assert res.kind == "microdata" and len(res.table) > 1000
    assert set(res.table["sex"].astype(str)) <= {"Female", "Male"}
    if key.startswith("synth_"):       # a pooled release pays for a noisy row count
        assert any("row count" in s.label for s in res.budget.spends)
    text = res.statement + " ".join(s.label + s.measured for s in res.budget.spends)
    assert str(len(load_dataset("cps"))) not in text.replace(",", "")


@pytest.mark.parametrize("key", ["clear_half", "clear_sample", "suppression"])
def test_non_private_algorithms_are_refused(key):
    with pytest.raises(ValueError, match="no differential privacy guarantee"):
        PublishPlan(release=ReleaseChoice(key))
    assert trial_ledger(ReleaseChoice(key)) is None


def test_seeded_simulation_reproduces_and_secure_release_does_not():
    plan = PublishPlan(lens=LENS, release=_choice("laplace_table", epsilon=1.0), seed=7)
    a, b = publish(plan, secure=False), publish(plan, secure=False)
    pd.testing.assert_frame_equal(a.table, b.table)
    assert a.ledger() is None and "Simulation" in a.statement
    other = publish(plan.replace(seed=8), secure=False)
    assert not np.allclose(a.table.iloc[:, -1], other.table.iloc[:, -1])
    s1, s2 = publish(plan, secure=True), publish(plan, secure=True)
    assert not np.allclose(s1.table.iloc[:, -1], s2.table.iloc[:, -1])


@pytest.mark.slow
def test_seeded_synthesizer_simulation_reproduces():
    plan = PublishPlan(lens=LENS, release=_choice("synth_independent", epsilon=1.0), seed=3)
    pd.testing.assert_frame_equal(publish(plan, secure=False).table, publish(plan, secure=False).table)


def test_upload_needs_its_bytes_and_bad_plans_are_refused():
    raw = load_dataset("cps").head(400).to_csv(index=False).encode()
    ref = DataRef("upload", bytes_fingerprint(raw))
    plan = PublishPlan(data=ref, lens=LENS)
    assert publish(plan, raw, secure=False).table.shape[1] == 4
    with pytest.raises(ValueError, match="give the same file's bytes"):
        publish(plan, secure=False)
    with pytest.raises(ValueError, match="cannot also be a lens"):
        PublishPlan(lens=("income",))
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        PublishPlan(count_share=1.0)


def test_from_audit_and_the_simulation_entries_compose_to_nothing():
    audit = AuditPlan(releases=(ReleaseChoice("clear_half"), _choice("laplace_table", epsilon=2.0)), trials=100)
    plan = PublishPlan.from_audit(audit, audit.releases[1])
    assert plan.lens == audit.lens and plan.release == audit.releases[1]
    one = trial_ledger(audit.releases[1])
    assert one.total("epsilon") == 2.0
    assert simulation_label(audit.releases[1], 100) == "audit of Noisy table (Laplace), 100 seeded trials (simulation)"
    sweep = sweep_ledger([_choice("gaussian_table", epsilon=e) for e in (0.1, 1.0)])
    assert isinstance(sweep, BudgetLedger) and sweep.total("rho") == pytest.approx(0.1 ** 2 / 2 + 0.5)
    sim = LedgerRelease("cps", "sim", "simulation", "Coherence audit", "audit", "x", "d" * 64, spends_of(one))
    assert compose([sim]).epsilon == 0.0 and compose([sim]).n_releases == 0


@pytest.mark.parametrize("key", ["synth_aim", "strat_aim"])
def test_aim_publish_ledger_lists_every_round_and_totals_rho(key):
    extra = {"strata": ("sex",)} if key.startswith("strat_") else {}
    plan = PublishPlan(lens=LENS, release=_choice(key, epsilon=1.0, max_rounds=3, **extra), seed=2)
    res = publish(plan, secure=False)
    labels = [s.label for s in res.budget.spends]
    prefixes = ["stratum Female", "stratum Male"] if extra else ["AIM (adaptive, workload-aware), pooled on all rows"]
    for prefix in prefixes:
        assert f"{prefix}: one-way marginals" in labels
        assert f"{prefix}: round 1: selection" in labels and f"{prefix}: round 1: measurement" in labels
    assert res.budget.total("rho") == pytest.approx(0.5, abs=1e-9)
    if extra:   # strata compose in parallel: each stratum's own lines add up to the whole rho
        parallel = [s for s in res.budget.spends if s.composition == "parallel"]
        assert len(parallel) == len(labels) and {s.part for s in parallel} == {"sex=0", "sex=1"}
    else:       # the row count's share plus every spend of the fit
        assert labels[0] == "row count (Gaussian count)" and len(labels) == 4
    stored = LedgerRelease("d", "r", "simulation", "page", "publish", "AIM", "digest", spends_of(res.budget))
    assert [s.label for s in stored.spends] == labels
    text = res.statement + " ".join(s.label + s.measured for s in res.budget.spends)
    assert str(len(load_dataset("cps"))) not in text.replace(",", "")


@pytest.mark.parametrize("key", ["synth_aim", "strat_aim"])
def test_a_synthesizer_release_reports_its_rounds_and_can_be_cancelled(key):
    from core.contracts import Cancelled

    extra = {"strata": ("sex",)} if key.startswith("strat_") else {}
    plan = PublishPlan(lens=LENS, release=_choice(key, epsilon=1.0, max_rounds=4, **extra), seed=2)
    heard = []

    def progress(done, total, message=""):
        heard.append(message)
        if len(heard) == 2:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        publish(plan, secure=False, progress=progress)
    assert any("AIM round" in m for m in heard)
