"""``python -m core release``: each of the seven release kinds made headless on small data, through the one
protocol of ``core.releases``, recorded once in the project ledger with the spends printed; bad input is
refused with what to change (exit 2) and nothing is reserved."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.__main__ import main as cli
from core.contracts import DataRef, bytes_fingerprint, plan_to_dict
from core.intake import ColumnSchema, DataSchema, draft_schema, read_table_bytes
from core.intake.store import DataSetStore
from core.privacy.project_ledger import ProjectLedger, data_key

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick

MESSY = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"
PUBLIC = {
    "sex": dict(categories=("Female", "Male")),
    "education": dict(categories=("Less than HS", "High school", "Some college", "Bachelor", "Graduate")),
    "county": dict(categories=("Adams", "Brown", "Clark", "Dane")),
    "employed": dict(categories=("Yes", "No")),
    "household_size": dict(categories=("1", "2", "3", "4", "5", "6")),
    "race": dict(categories=("White", "Black", "Asian", "Other")),
    "age": dict(bounds=(0.0, 100.0), bins=(0.0, 30.0, 50.0, 70.0, 100.0)),
    "income": dict(bounds=(0.0, 400_000.0)),
    "hours_per_week": dict(bounds=(0.0, 80.0)),
}


@pytest.fixture
def db(tmp_path, monkeypatch):
    """A project database of this test's own (ledger, declared data sets, elicitation store)."""
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    monkeypatch.setenv("DASHBOARD_DB_URL", url)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    return url


@pytest.fixture
def declared(db):
    """The messy county file declared (public categories and bounds) in the project database: (raw, ref)."""
    raw = MESSY.read_bytes()
    draft = draft_schema(read_table_bytes(raw, MESSY.name), "Messy county")
    columns = tuple(c.__class__(**{**{f: getattr(c, f) for f in c.__dataclass_fields__}, **PUBLIC.get(c.name, {})})
                    for c in draft.columns)
    schema = draft.replace(columns=columns, bounding_seed=7)
    DataSetStore(db).save(schema)
    return raw, DataRef("upload", bytes_fingerprint(raw), schema=schema)


def _release(tmp_path, body: dict, *extra: str) -> int:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    return cli(["release", str(path), *extra])


def _one_release(db, key: str, action: str):
    ledger = ProjectLedger(db)
    [made] = ledger.releases(key, "release")
    assert made.action == action and made.page == "command line" and not ledger.reservations(key)
    return made


def _printed(capsys, made) -> str:
    out = capsys.readouterr().out
    assert f"Ledger entry 1 ({made.release_key})" in out
    for s in made.spends:
        assert f"{s.label}: {s.amount:.6g} {s.unit}" in out
    return out


def test_census_noisy_counts_from_a_budget_plan(tmp_path, db, capsys):
    from core.census import BudgetPlan
    from core.report import run_plan

    plan = BudgetPlan()
    assert _release(tmp_path, plan_to_dict(plan), "--no-cap", "--out", str(tmp_path / "out")) == 0
    made = _one_release(db, "stylised", "noisy counts")
    planned = run_plan(plan.setup()).allocation.ledger()
    assert [s.amount for s in made.spends] == pytest.approx([s.amount for s in planned.spends])
    _printed(capsys, made)
    counts = pd.read_csv(tmp_path / "out" / "counts.csv")
    assert len(counts) and (counts["count"] >= 0).all()


def test_a_secure_synthetic_copy_of_a_declared_file(tmp_path, db, declared, capsys):
    from core.synthesis import ReleasePlan, SynthesisPlan

    raw, ref = declared
    plan = SynthesisPlan(data=ref, columns=("sex", "county", "employed"), strata=("sex",), target="employed",
                         domain_declared_public=True, release=ReleasePlan(epsilon=2.0))
    data = tmp_path / "people.csv"
    data.write_bytes(raw)
    assert _release(tmp_path, plan_to_dict(plan), "--data", str(data), "--cap", "5",
                    "--out", str(tmp_path / "out")) == 0
    made = _one_release(db, data_key(ref), "secure synthetic release")
    assert made.data_label == "Messy county" and sum(s.rho for s in made.spends) > 0
    _printed(capsys, made)
    assert set(pd.read_csv(tmp_path / "out" / "data.csv").columns) >= {"sex", "county", "employed"}


def test_a_stratified_mean_of_a_declared_file(tmp_path, db, declared, capsys):
    from core.synthesis import MeanReleasePlan

    raw, ref = declared
    plan = MeanReleasePlan(data=ref, column="hours_per_week", strata=("sex",), value_range=(0.0, 80.0),
                           numeric_bounds=(("hours_per_week", 0.0, 80.0),), domain_declared_public=True)
    data = tmp_path / "people.csv"
    data.write_bytes(raw)
    assert _release(tmp_path, plan_to_dict(plan), "--data", str(data), "--no-cap") == 0
    made = _one_release(db, data_key(ref), "stratified mean release")
    _printed(capsys, made)


def test_an_audited_algorithms_output_from_an_audit_plan(tmp_path, db, declared, capsys):
    from core.coherence import AuditPlan

    raw, ref = declared
    plan = AuditPlan(data=ref, lens=("sex", "county"), target="employed", positive="Yes")
    data = tmp_path / "people.csv"
    data.write_bytes(raw)
    assert _release(tmp_path, plan_to_dict(plan), "--data", str(data), "--no-cap") == 2     # which algorithm?
    assert "--choice" in capsys.readouterr().err
    assert not ProjectLedger(db).releases(data_key(ref))
    assert _release(tmp_path, plan_to_dict(plan), "--data", str(data), "--choice", "laplace_table",
                    "--no-cap") == 0
    made = _one_release(db, data_key(ref), "audited release")
    _printed(capsys, made)


def test_the_elicitations_synthetic_copy_is_stored_once_released(tmp_path, db, capsys):
    from core.fairness import ElicitationPlan
    from core.fairness.store import get_store

    design = ElicitationPlan(pair_source="dp_synthetic", pair_epsilon=1.0)
    plan = design.private_pairs_plan()
    assert _release(tmp_path, plan_to_dict(design), "--no-cap") == 0
    made = _one_release(db, data_key(plan.data), "synthetic pair people")
    _printed(capsys, made)
    [stored] = get_store(db).find_copies(plan)
    assert made.release_key.endswith(stored["copy_id"])


def test_a_synthetic_copy_of_a_declared_folder_set(tmp_path, db, capsys):
    parts = tmp_path / "parts"
    parts.mkdir()
    rng = np.random.default_rng(4)
    for i in range(2):
        pd.DataFrame({"sex": rng.choice(["Female", "Male"], 150),
                      "region": rng.choice(["North", "South"], 150)}).to_parquet(parts / f"p{i}.parquet")
    schema = DataSchema("Regional file", (ColumnSchema("sex", "category", categories=("Female", "Male")),
                                          ColumnSchema("region", "category", categories=("North", "South"))),
                        file_suffix=".parquet")
    store = DataSetStore(db)
    store.save(schema)
    store.save_folder(schema.name, str(parts))
    out = tmp_path / "synthetic"
    request = {"release": "folder synthetic copy", "name": schema.name, "out_folder": str(out), "out_parts": 2}
    assert _release(tmp_path, request, "--no-cap") == 0
    made = _one_release(db, "dataset:Regional file", "folder synthetic release")
    _printed(capsys, made)
    assert len(list(out.glob("*.parquet"))) == 2


def test_the_private_bounds_estimate_of_a_declared_column(tmp_path, db, declared, capsys):
    raw, ref = declared
    data = tmp_path / "people.csv"
    data.write_bytes(raw)
    request = {"release": "private estimate", "data_set": "Messy county", "column": "age", "what": "bounds",
               "epsilon": 1.0, "floor": 0, "ceiling": 130}
    assert _release(tmp_path, request, "--data", str(data), "--no-cap") == 1    # too few values at epsilon 1
    assert "needs at least" in capsys.readouterr().err
    ledger = ProjectLedger(db)
    assert not ledger.releases(data_key(ref)) and not ledger.reservations(data_key(ref))
    assert _release(tmp_path, {**request, "epsilon": 10.0}, "--data", str(data)) == 0     # the no-cap choice stays
    made = _one_release(db, data_key(ref), "private estimate of public information")
    out = _printed(capsys, made)
    assert "Estimate (public from now on):" in out


def test_bad_input_says_what_to_change_and_reserves_nothing(tmp_path, db, declared, capsys):
    from core.synthesis import ReleasePlan, SynthesisPlan

    raw, ref = declared
    undeclared = ref.replace(schema=None) if hasattr(ref, "replace") else DataRef("upload", ref.fingerprint)
    plan = SynthesisPlan(data=undeclared, columns=("sex", "county"), strata=("sex",), target=None,
                         domain_declared_public=True, release=ReleasePlan(epsilon=2.0))
    data = tmp_path / "people.csv"
    data.write_bytes(raw)
    assert _release(tmp_path, plan_to_dict(plan), "--data", str(data), "--no-cap") == 2
    assert "declared data sets only" in capsys.readouterr().err
    assert _release(tmp_path, {"release": "private estimate", "data_set": "nobody"}, "--data", str(data)) == 2
    assert "No data set named 'nobody' is declared" in capsys.readouterr().err
    over = SynthesisPlan(data=ref, columns=("sex", "county"), strata=("sex",), target=None,
                         domain_declared_public=True, release=ReleasePlan(epsilon=2.0))
    assert _release(tmp_path, plan_to_dict(over), "--data", str(data), "--cap", "0.5") == 1   # over the cap
    assert "over its cap" in capsys.readouterr().err
    ledger = ProjectLedger(db)
    assert not ledger.releases(data_key(ref)) and not ledger.reservations(data_key(ref))
