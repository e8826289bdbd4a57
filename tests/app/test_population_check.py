"""The "same population?" question before a new declared data set is saved: it appears for an upload close to a
budgeted data set, names the candidates without any row count, returns None until answered, and records
the answer (same: the upload is filed under that data set; different: a fresh budget)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import bytes_fingerprint
from core.intake import draft_schema, read_table
from core.intake.store import DataSetStore
from core.privacy.population import PopulationAnswers
from core.privacy.project_ledger import Cap, ProjectLedger, declared_key

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"
RAW = FIXTURE.read_bytes()
RE_EXPORT = b"\n".join(RAW.split(b"\n")[:-40]).replace(b"\n", b"\r\n")   # CRLF, 39 rows fewer (of 3,500)
N_ROWS = 3500


@pytest.fixture()
def db(tmp_path, monkeypatch):
    """A project database holding "County survey" with a cap (its schema saved, its file in the session)."""
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    monkeypatch.setenv("DASHBOARD_DB_URL", url)
    schema = draft_schema(read_table(FIXTURE), "County survey")
    store = DataSetStore(url)
    store.save(schema)
    store.add_version("County survey", bytes_fingerprint(RAW), "messy_county.csv")
    ProjectLedger(url).set_cap(declared_key("County survey"), Cap(1.0))
    return url, schema


def script(new_name: str, raw: bytes, n_rows: int | None, with_session_file: bool):
    import streamlit as st

    from core.contracts import bytes_fingerprint
    from core.intake import draft_schema
    from dashboard.components.dataset_picker import read_table_data
    from dashboard.components.population_check import confirm_population, same_population_as

    frame = read_table_data(raw, "upload.csv")
    if with_session_file and "declared_data" not in st.session_state:
        from pathlib import Path
        path = Path.cwd() / "tests" / "fixtures" / "messy_county.csv"
        old = draft_schema(read_table_data(path.read_bytes(), "messy_county.csv"), "County survey")
        st.session_state["declared_data"] = {"County survey": {"schema": old, "raw": path.read_bytes(),
                                                               "file_name": "messy_county.csv"}}
    schema = draft_schema(frame, new_name)
    answer = confirm_population(schema, bytes_fingerprint(raw), tuple(frame.columns), n_rows=n_rows)
    st.session_state["answer"] = answer
    st.session_state["filed_under"] = same_population_as(schema, bytes_fingerprint(raw))


def _app(new_name="County survey 2025", raw=RE_EXPORT, n_rows=N_ROWS - 39, with_session_file=True) -> AppTest:
    at = AppTest.from_function(script, default_timeout=120, args=(new_name, raw, n_rows, with_session_file))
    at.run()
    assert not at.exception, at.exception
    return at


def _texts(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success")
                    for e in getattr(at, kind))


def _asked(at) -> bool:
    return any("Is this the same population" in w.value for w in at.warning)


def test_a_close_upload_is_asked_and_the_same_answer_is_recorded(db):
    url, _ = db
    at = _app()
    assert _asked(at) and at.session_state["answer"] is None and at.session_state["filed_under"] is None
    text = _texts(at)
    assert "County survey" in text and "the same column names, close in size" in text
    assert "3461" not in text and "3,461" not in text and "3500" not in text and "3,500" not in text
    assert at.button(key=f"population_{bytes_fingerprint(RE_EXPORT)[:16]}_record").disabled   # choose first
    assert PopulationAnswers(url).frame().empty
    key = f"population_{bytes_fingerprint(RE_EXPORT)[:16]}"
    at.radio(key=f"{key}_choice").set_value("County survey").run()
    at.button(key=f"{key}_record").click().run()
    assert not at.exception
    assert at.session_state["answer"] is True and at.session_state["filed_under"] == "County survey"
    frame = PopulationAnswers(url).frame()
    assert list(zip(frame["new_name"], frame["compared_name"], frame["answer"])) == [
        ("County survey 2025", "County survey", "same")]
    assert frame["fingerprint"].tolist() == [bytes_fingerprint(RE_EXPORT)]
    at.run()                                   # a rerun: the recorded answer stands, nothing is asked again
    assert not _asked(at) and at.session_state["answer"] is True
    assert len(PopulationAnswers(url).frame()) == 1


def test_a_different_population_is_recorded_and_starts_a_fresh_budget(db):
    url, _ = db
    at = _app(with_session_file=False)          # the candidate's file is not loaded: columns from the store
    assert _asked(at) and "size not compared" in _texts(at)
    key = f"population_{bytes_fingerprint(RE_EXPORT)[:16]}"
    at.radio(key=f"{key}_choice").set_value("__new_population__").run()
    at.button(key=f"{key}_record").click().run()
    assert not at.exception and at.session_state["answer"] is False and at.session_state["filed_under"] is None
    frame = PopulationAnswers(url).frame()
    assert list(zip(frame["compared_name"], frame["answer"])) == [("County survey", "different")]
    fresh = _app(with_session_file=False)       # a new session: the answer is read back from the database
    assert not _asked(fresh) and fresh.session_state["answer"] is False


def test_a_far_upload_is_not_asked_and_the_same_name_joins_its_data_set(db):
    url, _ = db
    lines = RAW.split(b"\n")
    half = b"\n".join(lines[:1500])                                        # far fewer rows: not close in size
    at = _app(raw=half, n_rows=1499)
    assert not _asked(at) and at.session_state["answer"] is False
    narrow = read_table(FIXTURE).iloc[:, :3].to_csv(index=False).encode()              # 3 of 10 columns
    at = _app(raw=narrow, n_rows=N_ROWS)
    assert not _asked(at) and at.session_state["answer"] is False
    same_name = _app(new_name="County survey")
    assert not _asked(same_name) and same_name.session_state["answer"] is True
    assert same_name.session_state["filed_under"] == "County survey"
    assert PopulationAnswers(url).frame().empty
