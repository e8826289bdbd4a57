"""The Privacy ledger page shows a declared data set once, by its name, with its spends from every file version
and the list of those versions under it."""
from __future__ import annotations

import uuid
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.contracts import DataRef, bytes_fingerprint
from core.intake import draft_schema, read_table
from core.intake.store import DataSetStore
from core.privacy.ledger import Spend
from core.privacy.project_ledger import Cap, LedgerRelease, ProjectLedger, data_key, data_label

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "messy_county.csv"


def test_a_declared_data_set_lists_its_file_versions_and_one_total(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    monkeypatch.setenv("DASHBOARD_DB_URL", url)
    name = f"County survey {uuid.uuid4().hex[:6]}"
    schema = draft_schema(read_table(FIXTURE), name)
    raw = FIXTURE.read_bytes()
    files = {"county.csv": raw, "county_crlf.csv": raw.replace(b"\n", b"\r\n")}
    store = DataSetStore(url)
    store.save(schema)
    ledger = ProjectLedger(url)
    for i, (file_name, data) in enumerate(files.items()):
        store.add_version(name, bytes_fingerprint(data), file_name)
        ref = DataRef("upload", bytes_fingerprint(data), schema=schema)
        ledger.record(LedgerRelease(data_key(ref), f"r{i}", "release", "Test page", "counts", f"counts {i}",
                                    "d" * 64, (Spend("counts", 0.25, "epsilon"),), data_label(ref)))
    key = data_key(DataRef("upload", bytes_fingerprint(raw), schema=schema))
    ledger.set_cap(key, Cap(1.0))

    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("tools/privacy_ledger.py").run()
    assert not at.exception
    box = at.selectbox(key="pl_data")
    assert [o for o in box.options if name in o] == [f"{name} (declared data set)"]   # one entry, by its name
    box.set_value(key).run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Releases"] == "2" and metrics["Total epsilon"] == "0.5"
    versions = next(d.value for d in at.dataframe if "file_name" in d.value.columns)
    assert versions["file_name"].tolist() == ["county.csv", "county_crlf.csv"]
    assert versions["fingerprint"].tolist() == [bytes_fingerprint(d) for d in files.values()]
    assert any("File versions of this data set" in h.value for h in at.subheader)
