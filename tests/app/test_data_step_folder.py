"""The Data step with a folder of Parquet parts named by its path: a sample drafted, every part checked, the
declaration and the folder saved, then a synthetic copy released through the one confirmation and recorded
once in the project ledger."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.release_steps import confirm_release

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
STEP = "tools/data_step.py"
FOLDER = "A folder of Parquet parts on this machine"
NAME = "Regional parts"
SEX = ["Female", "Male"]
REGION = ["North", "South", "East", "West"]


@pytest.fixture(autouse=True)
def _own_places(traced_queue, tmp_path, monkeypatch):
    """A fresh job queue (the check and the release run as job processes of their own), a project database
    of its own, and parts this small read in-process."""
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")
    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")


@pytest.fixture
def parts(tmp_path) -> Path:
    """Three parts; the second has a blank and an "N/A" sex, the third a region outside the public list."""
    out = tmp_path / "parts"
    out.mkdir()
    rng = np.random.default_rng(2)
    for i in range(3):
        frame = pd.DataFrame({"sex": rng.choice(SEX, 80), "region": rng.choice(REGION, 80)}).astype(object)
        if i == 1:
            frame.loc[[3, 8], "sex"] = ["", "N/A"]
        if i == 2:
            frame.loc[5, "region"] = "Atlantis"
        frame.to_parquet(out / f"part-{i}.parquet", index=False)
    return out


def _key(at, column: str, field: str) -> str:
    return f"ds{at.session_state['ds_state']['gen']}_{column}_{field}"


def _problems(at):
    return next(d.value for d in at.dataframe if "what to do" in d.value.columns)


def test_a_folder_set_is_declared_checked_saved_and_released_once(parts, tmp_path):
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page(STEP).run()
    at.radio(key="ds_source").set_value(FOLDER).run()
    assert not any(u.key == "ds_file" for u in at.get("file_uploader"))     # no upload in this mode
    at.text_input(key="ds_folder").input(str(parts)).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert any("3 parts: part-0.parquet, part-1.parquet, part-2.parquet" in c.value.replace("\\", "")
               for c in at.caption)     # the file names, escaped
    at.text_input(key="ds_name").input(NAME).run()
    at.multiselect(key=_key(at, "sex", "categories")).set_value(SEX)
    at.multiselect(key=_key(at, "region", "categories")).set_value(REGION)
    at.run()
    assert not any(b.key == "ds_folder_release" for b in at.button)          # nothing to release before saving
    # the sample saw the blank and "N/A" (own category drafted); the region outside the list has no policy
    at.button(key="ds_folder_check").click().run()
    table = _problems(at)
    blocking = table[table["severity"] == "blocks a run"]
    assert blocking["column"].tolist() == ["region"]
    assert blocking["what"].str.contains(r"outside the declared categories \(n < 10 rows\)").all()
    assert at.button(key="ds_folder_save").disabled
    at.selectbox(key=_key(at, "region", "missing")).set_value("own_category").run()
    assert at.button(key="ds_folder_save").disabled                          # a changed declaration needs a new check
    at.button(key="ds_folder_check").click().run()
    assert not (_problems(at)["severity"] == "blocks a run").any()
    at.button(key="ds_folder_save").click().run()
    assert not at.exception, at.exception
    from core.intake.store import DataSetStore
    store = DataSetStore()
    schema = store.get(NAME)
    assert schema is not None and store.folder(NAME) == str(parts.resolve())
    assert schema.column("region").categories == tuple(REGION) and schema.column("region").missing == "own_category"
    # the release: one confirmation (no cap recorded first), then the parts are written
    out = tmp_path / "synthetic"
    at.text_input(key="ds_folder_out").input(str(out)).run()
    at.number_input(key="ds_folder_parts").set_value(2).run()
    confirm_release(at, "ds_folder_release")
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert sorted(p.name for p in out.glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    summary = next(d.value for d in at.dataframe if "item" in d.value.columns)
    n_rows = int(dict(zip(summary["item"], summary["value"]))["synthetic rows (noisy total)"])
    assert sum(len(pd.read_parquet(p)) for p in out.glob("*.parquet")) == n_rows
    from core.jobs import DONE, LOCAL_WHERE, job_queue
    # both ran in a job process, whose progress came back part by part
    assert [(j.label, j.state, j.where) for j in job_queue().jobs()] == [
        ("Checking 3 parts", DONE, LOCAL_WHERE)] * 2 + [("Releasing a synthetic copy of the parts", DONE, LOCAL_WHERE)]
    assert [j.message for j in job_queue().jobs()] == ["part 3 of 3 checked"] * 2 + ["synthetic part 2 of 2 written"]
    from core.privacy.project_ledger import ProjectLedger, declared_key
    ledger = ProjectLedger()
    at.run()                                                                 # a rerun records nothing more
    released = ledger.releases(declared_key(NAME), "release")
    assert len(released) == 1 and released[0].data_label == NAME
    assert "240" not in released[0].label and all("240" not in s.measured for s in released[0].spends)
    # back later in a new session: the path opens the saved declaration, not a new draft
    again = AppTest.from_file(APP, default_timeout=300).run()
    again.switch_page(STEP).run()
    again.radio(key="ds_source").set_value(FOLDER).run()
    again.text_input(key="ds_folder").input(str(parts)).run()
    assert again.text_input(key="ds_name").value == NAME
    assert any("is saved as a folder set" in s.value for s in again.success)
    assert any(b.key == "ds_folder_release" for b in again.button)
