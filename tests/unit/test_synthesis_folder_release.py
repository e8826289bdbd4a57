"""A synthetic copy of a declared folder set: fitted from the parts' count tables, sized by the model's noisy
total, written in parts, and recorded once in the project ledger under the data set's name; a failed run
spends nothing; no exact row count reaches the statement or the ledger."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from core.intake import ColumnSchema, DataSchema
from core.privacy.project_ledger import ProjectLedger, declared_key
from core.releases import folder_copy_release, run_release
from core.synthesis.folder_release import FolderReleasePlan, release_folder

SEX = ("Female", "Male")
REGION = ("North", "South", "East", "West")
ROWS = (211, 187, 215)           # 613 rows in all: a number the statement and the ledger must never quote


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "parts"
    out.mkdir()
    rng = np.random.default_rng(4)
    for i, n in enumerate(ROWS):
        sex = rng.choice(SEX, n)
        region = np.where(sex == "Female", rng.choice(REGION, n, p=[.7, .1, .1, .1]), rng.choice(REGION, n))
        pd.DataFrame({"sex": sex, "region": region}).to_parquet(out / f"part-{i}.parquet", index=False)
    return out


SCHEMA = DataSchema("Regional file", (ColumnSchema("sex", "category", categories=SEX),
                                      ColumnSchema("region", "category", categories=REGION)), file_suffix=".parquet")


def _rows(paths) -> int:
    return sum(len(pd.read_parquet(p)) for p in paths)


def test_a_seeded_folder_release_is_sized_by_the_noisy_total_and_written_in_parts(folder, tmp_path):
    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(tmp_path / "out"), 3)
    result = release_folder(plan, SCHEMA, folder, secure=False, seed=7, n_jobs=1)
    again = release_folder(plan.replace(out_folder=str(tmp_path / "again")), SCHEMA, folder, secure=False, seed=7,
                           n_jobs=1)
    assert len(result.paths) == 3 and _rows(result.paths) == result.n_rows
    assert result.n_rows != sum(ROWS) and abs(result.n_rows - sum(ROWS)) < 0.2 * sum(ROWS)
    for a, b in zip(result.paths, again.paths):           # the same seed draws the same parts
        pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    first = pd.read_parquet(result.paths[0])
    assert set(first["sex"].astype(str)) <= set(SEX) and set(first["region"].astype(str)) <= set(REGION)
    table = dict(zip(result.summary["item"], result.summary["value"]))
    assert table["synthetic rows (noisy total)"] == str(result.n_rows) and table["parts written"] == "3"
    assert result.ledger.total("rho") == pytest.approx(plan.rho, rel=1e-9)
    assert "Simulation" in result.statement


def test_a_release_is_recorded_once_under_the_data_set_and_quotes_no_exact_count(folder, tmp_path):
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    key = declared_key(SCHEMA.name)
    ledger.set_no_cap(key)
    plan = FolderReleasePlan(SCHEMA.name, "aim", 1.0, 1e-6, str(tmp_path / "out"), 2, aim_rounds=3)
    result = run_release(folder_copy_release(plan, SCHEMA, folder, page="command line", n_jobs=1), ledger).value()
    assert len(result.paths) == 2 and _rows(result.paths) == result.n_rows
    released = ledger.releases(key, "release")
    assert len(released) == 1 and not ledger.reservations(key)
    rel = released[0]
    assert rel.data_label == SCHEMA.name and rel.action == "folder synthetic release"
    assert sum(s.rho for s in rel.spends) == pytest.approx(plan.rho, rel=1e-9)
    assert len(rel.spends) > 1                              # every round of AIM, not one summary line
    shared = json.dumps(ledger.export(key), default=str) + result.statement
    assert str(sum(ROWS)) not in shared and "Release:" in result.statement
    # a run that fails (the output folder already holds parts) spends nothing and leaves no reservation
    with pytest.raises(ValueError, match="already holds Parquet files"):
        run_release(folder_copy_release(plan, SCHEMA, folder, page="command line", n_jobs=1), ledger).value()
    assert len(ledger.releases(key, "release")) == 1 and not ledger.reservations(key)


def test_plans_and_folders_that_cannot_be_released_say_what_to_change(folder, tmp_path):
    with pytest.raises(ValueError, match="method must be one of"):
        FolderReleasePlan(SCHEMA.name, "gem", 1.0, 1e-6, str(tmp_path / "out"))
    with pytest.raises(ValueError, match="output folder"):
        FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, " ")
    with pytest.raises(ValueError, match="epsilon must be"):
        FolderReleasePlan(SCHEMA.name, "mst", 0.0, 1e-6, str(tmp_path / "out"))
    inside = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(folder / "synthetic"))
    with pytest.raises(ValueError, match="outside the private parts' folder"):
        release_folder(inside, SCHEMA, folder, secure=False, seed=1, n_jobs=1)
    other = FolderReleasePlan("Another set", "mst", 1.0, 1e-6, str(tmp_path / "out"))
    with pytest.raises(ValueError, match="declaration is 'Regional file'"):
        release_folder(other, SCHEMA, folder, secure=False, seed=1, n_jobs=1)


def test_the_command_line_checks_declares_and_releases_a_folder_set(folder, tmp_path, monkeypatch, capsys):
    from core.__main__ import main

    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")
    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")
    schema_file = tmp_path / "schema.json"
    narrow = SCHEMA.replace(columns=(SCHEMA.column("sex"), ColumnSchema("region", "category", categories=REGION[:3])))
    schema_file.write_text(json.dumps(narrow.to_dict()))
    assert main(["data", "check-folder", str(folder), "--schema", str(schema_file)]) == 1
    assert "outside the declared categories" in capsys.readouterr().out
    schema_file.write_text(json.dumps(SCHEMA.to_dict()))
    assert main(["data", "declare-folder", str(folder), "--schema", str(schema_file)]) == 0
    out = tmp_path / "synthetic"
    assert main(["data", "release-folder", SCHEMA.name, "--out", str(out), "--parts", "2"]) == 2   # no cap decided
    assert "No budget cap" in capsys.readouterr().err and not out.exists()
    ledger = ProjectLedger()
    ledger.set_no_cap(declared_key(SCHEMA.name))
    assert main(["data", "release-folder", SCHEMA.name, "--out", str(out), "--parts", "2"]) == 0
    printed = capsys.readouterr().out
    # the noisy total is drawn by the secure sampler and may land on the true one; every other line must not
    noisy_total = re.compile(r"^synthetic rows \(noisy total\): \d+$", re.MULTILINE)
    assert len(noisy_total.findall(printed)) == 1
    assert "parts written: 2" in printed and str(sum(ROWS)) not in noisy_total.sub("", printed)
    assert len(list(out.glob("*.parquet"))) == 2 and len(ledger.releases(declared_key(SCHEMA.name), "release")) == 1


def test_on_a_cluster_the_check_the_counts_and_the_synthetic_parts_are_the_same(folder, tmp_path, dask_cluster):
    from core.cluster import close_clients, use_scheduler
    from core.intake.folder import check_folder, list_folder

    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(tmp_path / "here"), 2)
    here = release_folder(plan, SCHEMA, folder, secure=False, seed=5, n_jobs=1)
    checked_here = check_folder(list_folder(folder), SCHEMA, n_jobs=1)
    try:
        with use_scheduler(dask_cluster.scheduler_address):
            there = release_folder(plan.replace(out_folder=str(tmp_path / "there")), SCHEMA, folder, secure=False,
                                   seed=5)
            checked_there = check_folder(list_folder(folder), SCHEMA)
    finally:
        close_clients()
    assert there.where == "a Dask cluster" and here.where == "this machine"
    assert checked_there == checked_here and there.n_rows == here.n_rows
    for a, b in zip(here.paths, there.paths):
        pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
