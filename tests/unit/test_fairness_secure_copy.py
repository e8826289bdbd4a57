"""The synthetic copy stakeholders see is a release: OpenDP noise, a random id, stored and reloaded,
and a report of it reruns only where the database holding the copy is."""
import pandas as pd
import pytest

from core.fairness.private_pairs import (PrivatePairsPlan, copy_release, release_synthetic_people,
                                         synthetic_people)
from core.synthesis.noise import SecureNoise, SeededNoise


def test_a_release_draws_its_noise_from_opendp_and_two_copies_of_one_plan_differ(monkeypatch):
    secure, seeded = [], []
    real_secure, real_seeded = SecureNoise.gaussian, SeededNoise.gaussian
    monkeypatch.setattr(SecureNoise, "gaussian", lambda self, *a, **k: secure.append(a) or real_secure(self, *a, **k))
    monkeypatch.setattr(SeededNoise, "gaussian", lambda self, *a, **k: seeded.append(a) or real_seeded(self, *a, **k))
    plan = PrivatePairsPlan(population="paper", epsilon=1.0)
    a = release_synthetic_people(plan)
    calls = len(secure)
    b = release_synthetic_people(plan)
    assert calls > 0 and len(secure) == 2 * calls and not seeded    # every noise value from the secure sampler
    assert a.secure and b.secure and a.copy_id != b.copy_id
    assert not a.cards.equals(b.cards)             # nothing in the plan regenerates a copy
    assert a.plan.replace(copy_id="") == b.plan.replace(copy_id="") == plan
    # One ledger release per copy, keyed by its id.
    ka, kb = copy_release(a.plan).release_key, copy_release(b.plan).release_key
    assert ka != kb and ka.endswith(a.copy_id) and kb.endswith(b.copy_id)
    assert copy_release(a.plan).spends[0].amount == pytest.approx(plan.rho)


def test_a_made_copy_is_found_by_id_and_never_refitted(monkeypatch):
    copy = release_synthetic_people(PrivatePairsPlan(population="paper", epsilon=2.0))
    from core.fairness.private_pairs import remember_copy
    remember_copy(copy)
    monkeypatch.setattr(SecureNoise, "gaussian", lambda *a, **k: pytest.fail("a stored copy is never refitted"))
    again = synthetic_people(copy.plan)
    assert again is copy
    with pytest.raises(ValueError, match="population 'paper' at epsilon 2"):
        synthetic_people(copy.plan.replace(epsilon=1.5))


def test_reproducing_a_report_needs_the_database_that_holds_its_copy(tmp_path, monkeypatch, capsys):
    from sqlalchemy import delete

    from core.__main__ import main
    from core.fairness import private_pairs as pp
    from core.fairness.elicitation_plan import ElicitationPlan, run_elicitation
    from core.fairness.store import ElicitationStore
    from core.fairness.store.schema import synthetic_copies
    from core.report import build_report, report_json
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    url = f"sqlite:///{tmp_path / 'sessions.sqlite'}"
    monkeypatch.setenv("DASHBOARD_DB_URL", url)
    store = ElicitationStore(url)
    copy = release_synthetic_people(PrivatePairsPlan(population="paper", epsilon=0.9))
    store.save_copy(copy)
    plan = ElicitationPlan(pair_source="dp_synthetic", pair_epsilon=0.9, pair_copy=copy.copy_id, demo_stakeholders=3)
    report = build_report(run_elicitation.uncached(plan, copy), page="Fairness elicitation")
    assert copy.copy_id in report_json(report)
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    pp._COPIES.pop(copy.copy_id, None)             # a new process: only the database knows the copy
    assert main(["reproduce", str(path), "--out", str(tmp_path / "ok")]) == 0
    # Elsewhere (the copy not in the database, nothing cached) the rerun stops and names the copy.
    with store.engine.begin() as conn:
        conn.execute(delete(synthetic_copies))
    pp._COPIES.pop(copy.copy_id, None)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache2"))
    assert main(["reproduce", str(path), "--out", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert f"Synthetic copy {copy.copy_id} is not in this session database" in err
    store.dispose()


def test_the_stored_form_round_trips_and_refuses_tampering():
    from core.fairness.private_pairs import copy_from_json, copy_to_json
    copy = release_synthetic_people(PrivatePairsPlan(population="full", epsilon=0.5))
    data = copy_to_json(copy)
    back = copy_from_json(data)
    pd.testing.assert_frame_equal(back.cards, copy.cards)
    pd.testing.assert_frame_equal(back.people, copy.people)
    bad = {**data, "people": {**data["people"], "age": [0.0] * 2000}}
    with pytest.raises(ValueError, match="does not match its cards"):
        copy_from_json(bad)
    short = {**data, "cards": {**data["cards"], "sex": data["cards"]["sex"][:10]}}
    with pytest.raises(ValueError, match="must list 2000 people"):
        copy_from_json(short)
    with pytest.raises(ValueError, match="copy id"):
        copy_from_json({**data, "copy_id": "../../etc"})
    for odd in ("Other planet", None, ["Male"], {"a": 1}):        # unknown, missing, nested: refused plainly
        cards = {**data["cards"], "sex": [odd] + data["cards"]["sex"][1:]}
        with pytest.raises(ValueError, match="outside its public categories"):
            copy_from_json({**data, "cards": cards})
