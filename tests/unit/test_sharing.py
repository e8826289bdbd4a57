"""The shared/confidential rule of core.sharing: one full report gives both, public data is unchanged, and the
command line keeps the audience of the file it is given."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest

from core.__main__ import main as core_main
from core.contracts import DataRef, bytes_fingerprint
from core.fairness.causal_ranking import MediatorRole
from core.fairness.group_fairness_plan import GroupFairnessPlan, RankingPlan, run_group_fairness
from core.report import build_report, report_json, tables_zip
from core.sharing import (CONFIDENTIAL, CONFIDENTIAL_MARK, WITHHELD_NOTE, confidential_geojson, is_private,
                          shared_copy, withholds)


def _upload() -> bytes:
    rng = np.random.default_rng(11)
    n = 233
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "experience": rng.integers(0, 30, n)})
    frame["income"] = 40_000 + 1_000 * frame["experience"] + rng.integers(0, 997, n)
    return frame.to_csv(index=False).encode()


def _plan(ref: DataRef) -> GroupFairnessPlan:
    rp = RankingPlan(attributes=("sex",), mediators=(MediatorRole("experience", ()),), outcome="income",
                     ascending=False, ks=(20,))
    return GroupFairnessPlan(data=ref, lexifair=None, companion=None, ranking=rp)


@pytest.fixture(scope="module")
def private_run():
    raw = _upload()
    return raw, run_group_fairness.uncached(_plan(DataRef("upload", bytes_fingerprint(raw))), raw)


def _same(a: dict, b: dict) -> bool:
    drop = ("created_utc",)
    return json.loads(report_json({k: v for k, v in a.items() if k not in drop})) == \
        json.loads(report_json({k: v for k, v in b.items() if k not in drop}))


def test_the_shared_report_is_the_shared_copy_of_the_confidential_one(private_run):
    _, result = private_run
    assert is_private(result.plan)
    full = build_report(result, page="Group fairness", audience=CONFIDENTIAL)
    shared = build_report(result, page="Group fairness")
    assert _same(shared_copy(full), shared) and withholds(shared) and not withholds(full)
    assert full["confidential"] == CONFIDENTIAL_MARK and full["tables"] and full["headline"]
    assert shared["plan"] == full["plan"] and shared["data"] == full["data"]        # settings stay
    assert shared["sharing"]["withheld_tables"] == list(full["tables"])
    with zipfile.ZipFile(io.BytesIO(tables_zip(result.tables(), shared))) as archive:
        assert sorted(archive.namelist()) == ["README.txt", "report.json"]
        assert archive.read("README.txt").decode().strip() == WITHHELD_NOTE


def test_bundled_data_shares_everything_unmarked():
    from core.fairness.causal_ranking import MediatorRole as Role
    rp = RankingPlan(attributes=("gender",), mediators=(Role("lifting", ("gender",)),), outcome="score",
                     ascending=False, ks=(20,), synthetic_rows=120)
    result = run_group_fairness.uncached(GroupFairnessPlan(data=DataRef("moving-company"), lexifair=None,
                                                           companion=None, ranking=rp))
    shared = build_report(result, page="Group fairness")
    full = build_report(result, page="Group fairness", audience=CONFIDENTIAL)
    assert shared["tables"] == full["tables"] and shared["headline"] == full["headline"]
    assert "confidential" not in full and not withholds(shared)
    with zipfile.ZipFile(io.BytesIO(tables_zip(result.tables(), shared))) as archive:
        assert "README.txt" not in archive.namelist() and len(archive.namelist()) == len(result.tables()) + 1


def test_the_command_line_keeps_the_audience(private_run, tmp_path):
    raw, result = private_run
    full = tmp_path / "full.json"
    full.write_text(report_json(build_report(result, page="Group fairness", audience=CONFIDENTIAL)))
    assert core_main(["report", str(full), "--html", str(tmp_path / "full.html")]) == 0
    marked = (tmp_path / "full.html").read_text()
    assert marked.count(CONFIDENTIAL_MARK) >= 3
    assert core_main(["report", str(full), "--shared", "--html", str(tmp_path / "shared.html")]) == 0
    shared = (tmp_path / "shared.html").read_text()
    assert CONFIDENTIAL_MARK not in shared and "What this shared report withholds" in shared
    # a shared report reruns on the curator's file; what it writes next to every table is confidential
    path, data = tmp_path / "shared.json", tmp_path / "data.csv"
    path.write_text(report_json(build_report(result, page="Group fairness")))
    data.write_bytes(raw)
    assert core_main(["reproduce", str(path), "--out", str(tmp_path / "out"), "--data", str(data)]) == 0
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["confidential"] == CONFIDENTIAL_MARK and written["tables"]


def test_a_confidential_geojson_carries_the_mark():
    text = json.dumps({"type": "FeatureCollection", "features": []})
    marked = json.loads(confidential_geojson(text))
    assert marked["confidential"] == CONFIDENTIAL_MARK and marked["type"] == "FeatureCollection"
