"""A declared data set's spends and cap follow its name, not its file: a re-export uploaded into it (one byte
changed, other line endings, a row dropped) keeps them; bundled and schema-less keys are unchanged; a new
plain upload never makes a real release; the curator's "same population?" answers are recorded with who and how."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.contracts import DataRef, Plan, bytes_fingerprint
from core.intake import draft_schema, read_table
from core.privacy.ledger import Spend
from core.privacy.population import PopulationAnswers
from core.privacy.project_ledger import (KEY_LENGTH, Cap, CapExceeded, LedgerRelease, ProjectLedger,
                                         data_key, data_label, declared_key, declared_name)
from tests.unit.ledger_support import database_url

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    yield from database_url(request.param, tmp_path)


@pytest.fixture(scope="module")
def schema():
    return draft_schema(read_table(FIXTURE), "County survey")


def versions() -> dict[str, bytes]:
    """The fixture and three re-exports of the same population."""
    raw = FIXTURE.read_bytes()
    lines = raw.split(b"\n")
    one_byte = raw.replace(b"P00001,Male,36", b"P00001,Male,37", 1)
    return {"original": raw, "one byte changed": one_byte, "CRLF line endings": raw.replace(b"\n", b"\r\n"),
            "a row dropped": b"\n".join(lines[:5] + lines[6:])}


def spend(ref: DataRef, amount: float, tag: str) -> LedgerRelease:
    return LedgerRelease(data_key(ref), f"{tag}-{uuid.uuid4().hex[:8]}", "release", "Test page", "counts",
                         f"counts from {tag}", "d" * 64, (Spend("counts", amount, "epsilon"),), data_label(ref))


# ------------------------------------------------------------------------------------------- data_key

def test_bundled_and_schema_less_keys_are_unchanged(schema):
    assert data_key(DataRef("cps")) == "cps" and data_label(DataRef("cps")) == "cps"
    assert data_key(DataRef("upload", "a" * 64)) == "upload:" + "a" * 64
    assert data_key(DataRef("upload", "a" * 64, schema=schema)) == "dataset:County survey"
    assert data_label(DataRef("upload", "a" * 64, schema=schema)) == "County survey"
    assert declared_name("dataset:County survey") == "County survey" and declared_name("cps") is None


def test_a_long_name_keeps_its_own_key_within_the_column():
    a, b = "x" * 300 + "a", "x" * 300 + "b"
    assert len(declared_key(a)) == KEY_LENGTH and declared_key(a) != declared_key(b)
    assert declared_key("y" * (KEY_LENGTH - len("dataset:"))) == "dataset:" + "y" * (KEY_LENGTH - 8)


def test_every_re_export_has_its_own_fingerprint_and_the_same_key(schema):
    files = versions()
    prints = {bytes_fingerprint(raw) for raw in files.values()}
    assert len(prints) == len(files)
    assert {data_key(DataRef("upload", fp, schema=schema)) for fp in prints} == {"dataset:County survey"}


@dataclass(frozen=True)
class _Plan(Plan):
    data: DataRef


def test_a_page_release_of_a_declared_data_set_is_keyed_and_labelled_by_its_name(schema):
    from core.releases import release_entry
    from core.privacy.ledger import BudgetLedger
    book = BudgetLedger()
    book.spend("counts", 0.5, "epsilon")
    ref = DataRef("upload", bytes_fingerprint(FIXTURE.read_bytes()), schema=schema)
    rel = release_entry(_Plan(ref), "Test page", "counts", "counts", book, data_label="county.csv")
    assert (rel.data_key, rel.data_label) == ("dataset:County survey", "County survey")
    bare = release_entry(_Plan(DataRef("upload", "b" * 64)), "Test page", "counts", "counts", book,
                         data_label="county.csv")
    assert (bare.data_key, bare.data_label) == ("upload:" + "b" * 64, "county.csv")


# ------------------------------------------------------------------------------------------- re-exports

def test_a_re_export_uploaded_into_the_same_data_set_keeps_its_spends_and_cap(url, schema):
    ledger = ProjectLedger(url)
    refs = {what: DataRef("upload", bytes_fingerprint(raw), schema=schema) for what, raw in versions().items()}
    key = data_key(refs["original"])
    ledger.set_cap(key, Cap(1.0, "epsilon"))
    for what in ("original", "one byte changed", "CRLF line endings"):
        assert ledger.cap(data_key(refs[what])) == Cap(1.0, "epsilon")
        ledger.commit(ledger.reserve(spend(refs[what], 0.3, what)))
    # 0.3 + 0.3 + 0.3 = 0.9 spent across three file versions; the fourth version's 0.2 would make 1.1
    assert ledger.totals(key).epsilon == pytest.approx(0.9)
    assert ledger.totals(key).n_releases == 3
    with pytest.raises(CapExceeded, match="County survey"):
        ledger.reserve(spend(refs["a row dropped"], 0.2, "a row dropped"))
    ledger.commit(ledger.reserve(spend(refs["a row dropped"], 0.1, "a row dropped")))
    assert ledger.totals(key).epsilon == pytest.approx(1.0)
    assert list(ledger.data_sets()["data_key"]) == [key]
    assert list(ledger.data_sets()["data_label"]) == ["County survey"]
    # without its schema the same file is an upload of its own: nothing spent, and no real release on it
    loose = DataRef("upload", refs["CRLF line endings"].fingerprint)
    assert ledger.totals(data_key(loose)).n_releases == 0
    with pytest.raises(ValueError, match="declared data set"):
        ledger.reserve(spend(loose, 0.1, "schema-less"))
    ledger.db.dispose()


# ------------------------------------------------------------------------------------------- plain uploads

def test_a_plain_upload_can_only_simulate_never_release(url):
    """An undeclared upload is keyed by its bytes: one changed byte would be a fresh budget. So the ledger
    refuses to reserve a real release on it, whatever its cap, and still records its simulations."""
    ledger = ProjectLedger(url)
    loose = DataRef("upload", bytes_fingerprint(FIXTURE.read_bytes()))
    ledger.set_no_cap(data_key(loose))
    with pytest.raises(ValueError, match="declared data set"):
        ledger.reserve(spend(loose, 0.1, "loose"))
    assert ledger.releases(data_key(loose)) == ()
    sim = LedgerRelease(data_key(loose), "sim-1", "simulation", "Test page", "counts", "seeded preview", "d" * 64,
                        (Spend("counts", 0.1, "epsilon"),), "people.csv")
    assert ledger.reserve(sim) is not None
    ledger.db.dispose()


def test_answers_are_recorded_once_per_upload_and_read_back(url):
    answers = PopulationAnswers(url)
    assert answers.decision("New", "f1", ["Old", "Other"]) is None
    answers.record("New", "f1", "Old", ["Old", "Other"])
    answers.record("New", "f1", "Old", ["Old", "Other"])                       # a rerun records nothing more
    assert answers.decision("New", "f1", ["Old", "Other"]) == "Old"
    answers.record("New", "f2", None, ["Old", "Other"], relations={"Old": "subset", "Other": "overlap"},
                   curator="ana")
    assert answers.decision("New", "f2", ["Old", "Other"]) is False
    assert answers.decision("New", "f2", ["Old", "Other", "Third"]) is None   # a new candidate is asked about
    frame = answers.frame("New")
    assert list(zip(frame["compared_name"], frame["answer"], frame["fingerprint"])) == [
        ("Old", "same", "f1"), ("Old", "different", "f2"), ("Other", "different", "f2")]
    assert list(frame.columns) == ["new_name", "compared_name", "answer", "relation", "fingerprint", "curator",
                                   "answered_utc"]
    assert all(frame["answered_utc"].str.len() > 0)
    assert list(frame["curator"]) == ["local", "ana", "ana"]           # no login yet: the local curator
    different = answers.different()
    assert list(zip(different["compared_name"], different["relation"])) == [("Old", "subset"), ("Other", "overlap")]
    with pytest.raises(ValueError, match="not one of"):
        answers.record("New", "f3", "Elsewhere", ["Old"])
    answers.dispose()
