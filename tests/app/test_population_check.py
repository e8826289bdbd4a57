"""The "same population?" question before a new declared data set is saved, decided by the rows: it appears for a
table whose rows are a declared data set's (re-encoded, a subset), names the data set and how without any count,
returns None until answered, and records the answer (same: filed under that data set; different: a fresh
budget, recorded with when and who). A table sharing no rows is not asked about."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import bytes_fingerprint
from core.intake import draft_schema, read_table
from core.intake.identity import frame_sketches
from core.intake.schema import DEFAULT_MISSING_TOKENS
from core.intake.store import DataSetStore
from core.privacy.population import PopulationAnswers

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"
RAW = FIXTURE.read_bytes()
FRAME = read_table(FIXTURE)
RE_EXPORT = FRAME.sample(frac=0.85, random_state=4)[list(reversed(FRAME.columns))].to_csv(index=False).encode()


@pytest.fixture()
def db(tmp_path, monkeypatch):
    """A project database holding "County survey" (no cap, no release: declared is enough to be protected)."""
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    monkeypatch.setenv("DASHBOARD_DB_URL", url)
    monkeypatch.setenv("DASHBOARD_DATA_DIR", str(tmp_path / "data"))
    store = DataSetStore(url)
    store.save(draft_schema(FRAME, "County survey"))
    store.save_sketches("County survey", bytes_fingerprint(RAW), frame_sketches(FRAME, tuple(DEFAULT_MISSING_TOKENS)))
    store.dispose()
    return url


def script(new_name: str, raw: bytes):
    import streamlit as st

    from core.contracts import bytes_fingerprint
    from core.intake import draft_schema
    from dashboard.components.dataset_picker import read_table_data
    from dashboard.components.population_check import confirm_population, same_population_as, upload_overlaps

    frame = read_table_data(raw, "upload.csv")
    schema = draft_schema(frame, new_name)
    fp = bytes_fingerprint(raw)
    st.session_state["answer"] = confirm_population(schema, fp, upload_overlaps(fp, frame), curator="ana")
    st.session_state["filed_under"] = same_population_as(schema, fp)


def _app(new_name="County survey 2025", raw=RE_EXPORT) -> AppTest:
    at = AppTest.from_function(script, default_timeout=120, args=(new_name, raw))
    at.run()
    assert not at.exception, at.exception
    return at


def _texts(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success")
                    for e in getattr(at, kind))


def _asked(at) -> bool:
    return any("Is this the same population" in w.value for w in at.warning)


KEY = f"population_{bytes_fingerprint(RE_EXPORT)[:16]}"


def test_a_subset_re_encoded_is_asked_about_and_the_same_answer_is_recorded(db):
    at = _app()
    assert _asked(at) and at.session_state["answer"] is None and at.session_state["filed_under"] is None
    text = _texts(at)
    assert "County survey" in text and "a subset" in text
    assert not any(str(n) in text for n in (len(FRAME), f"{len(FRAME):,}", 2975, "2,975", "85%"))   # no count
    assert at.button(key=f"{KEY}_record").disabled                                  # choose first
    assert PopulationAnswers(db).frame().empty
    at.radio(key=f"{KEY}_choice").set_value("County survey").run()
    at.button(key=f"{KEY}_record").click().run()
    assert not at.exception
    assert at.session_state["answer"] is True and at.session_state["filed_under"] == "County survey"
    frame = PopulationAnswers(db).frame()
    assert list(zip(frame["new_name"], frame["compared_name"], frame["answer"], frame["relation"],
                    frame["curator"])) == [("County survey 2025", "County survey", "same", "subset", "ana")]
    at.run()                                   # a rerun: the recorded answer stands, nothing is asked again
    assert not _asked(at) and at.session_state["answer"] is True
    assert len(PopulationAnswers(db).frame()) == 1


def test_a_different_population_answer_is_recorded_and_read_back_in_a_new_session(db):
    at = _app()
    at.radio(key=f"{KEY}_choice").set_value("__new_population__").run()
    at.button(key=f"{KEY}_record").click().run()
    assert not at.exception and at.session_state["answer"] is False and at.session_state["filed_under"] is None
    different = PopulationAnswers(db).different()
    assert list(zip(different["compared_name"], different["relation"])) == [("County survey", "subset")]
    assert different["answered_utc"].str.len().min() > 0
    fresh = _app()                              # a new session: the answer is read back from the database
    assert not _asked(fresh) and fresh.session_state["answer"] is False


def test_a_table_sharing_no_rows_is_not_asked_about(db):
    rng = np.random.default_rng(2)
    other = FRAME.copy()
    for column in other.columns:
        other[column] = other[column].to_numpy()[rng.permutation(len(other))]
    at = _app(raw=other.to_csv(index=False).encode())
    assert not _asked(at) and at.session_state["answer"] is False
    same_name = _app(new_name="County survey")  # its own name: nothing to ask, it is that data set
    assert not _asked(same_name) and same_name.session_state["answer"] is False
    assert PopulationAnswers(db).frame().empty
