"""A declared data set's spends and cap follow its name, not its file: a re-export uploaded into it (one byte
changed, other line endings, a row dropped) keeps them; bundled and schema-less keys are unchanged; a new
upload close to a budgeted data set is compared by the documented rule and the answer is recorded."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.contracts import DataRef, Plan, bytes_fingerprint
from core.intake import draft_schema, read_table
from core.privacy.ledger import Spend
from core.privacy.population import (Candidate, PopulationAnswers, budgeted_names, close_in_size, column_overlap,
                                     similar_data_sets)
from core.privacy.project_ledger import (KEY_LENGTH, Cap, CapExceeded, CapUndecided, LedgerRelease, ProjectLedger,
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
    # without its schema the same file is an upload of its own: no cap decided, nothing spent
    loose = DataRef("upload", refs["CRLF line endings"].fingerprint)
    assert ledger.totals(data_key(loose)).n_releases == 0
    with pytest.raises(CapUndecided):
        ledger.reserve(spend(loose, 0.1, "schema-less"))
    ledger.db.dispose()


# ------------------------------------------------------------------------------------------- closeness

def test_column_overlap_is_the_shared_share_of_the_longer_list():
    assert column_overlap(("a", "b", "c"), (" C", "B", "a")) == 1.0          # order, case and spaces ignored
    assert column_overlap(tuple("abcde"), tuple("abcd")) == pytest.approx(4 / 5)
    assert column_overlap(tuple("abcd"), tuple("abcx")) == pytest.approx(3 / 4)
    assert column_overlap((), ("a",)) == 0.0


def test_close_in_size_allows_ten_percent_of_the_larger_count():
    assert close_in_size(1000, 900) and close_in_size(900, 1000)             # 100 <= 0.1 * 1000
    assert not close_in_size(1000, 899)                                       # 101 > 100
    assert close_in_size(3500, 3499)


def test_similar_data_sets_needs_both_columns_and_size():
    cols = tuple("abcde")
    pool = [Candidate("same", tuple("edcba"), 3499), Candidate("four of five", tuple("abcd"), 3500),
            Candidate("three of four", tuple("abcx"), 3500), Candidate("too small", cols, 3000),
            Candidate("unknown size", cols, None), Candidate("extra column", tuple("abcdef"), 3600)]
    # "extra column": 5 of 6 shared (0.83), 100 rows apart (<= 360); "too small": 500 > 350 apart
    assert similar_data_sets(cols, 3500, pool) == ["same", "unknown size", "extra column", "four of five"]
    assert similar_data_sets(cols, None, pool) == ["same", "too small", "unknown size", "extra column",
                                                   "four of five"]
    assert similar_data_sets(cols, 3500, [("tuple form", cols, 3400)]) == ["tuple form"]
    with pytest.raises(ValueError, match="whole number"):
        similar_data_sets(cols, 3.5, pool)
    with pytest.raises(ValueError, match="negative"):
        similar_data_sets(cols, -1, pool)


def test_budgeted_names_are_declared_data_sets_with_a_cap_or_a_release(url, schema):
    ledger = ProjectLedger(url)
    ledger.set_cap(declared_key("capped"), Cap(2.0))
    ledger.set_no_cap(declared_key("no cap, nothing spent"))
    ledger.set_no_cap(declared_key("no cap, spent"))
    ref = DataRef("upload", "c" * 64, schema=draft_schema(read_table(FIXTURE), "no cap, spent"))
    ledger.commit(ledger.reserve(spend(ref, 0.5, "v1")))
    ledger.set_cap("cps", Cap(1.0))
    assert sorted(budgeted_names(ledger)) == ["capped", "no cap, spent"]
    ledger.db.dispose()


def test_answers_are_recorded_once_per_upload_and_read_back(url):
    answers = PopulationAnswers(url)
    assert answers.decision("New", "f1", ["Old", "Other"]) is None
    answers.record("New", "f1", "Old", ["Old", "Other"])
    answers.record("New", "f1", "Old", ["Old", "Other"])                       # a rerun records nothing more
    assert answers.decision("New", "f1", ["Old", "Other"]) == "Old"
    answers.record("New", "f2", None, ["Old", "Other"])
    assert answers.decision("New", "f2", ["Old", "Other"]) is False
    assert answers.decision("New", "f2", ["Old", "Other", "Third"]) is None   # a new candidate is asked about
    frame = answers.frame("New")
    assert list(zip(frame["compared_name"], frame["answer"], frame["fingerprint"])) == [
        ("Old", "same", "f1"), ("Old", "different", "f2"), ("Other", "different", "f2")]
    assert list(frame.columns) == ["new_name", "compared_name", "answer", "fingerprint", "answered_utc"]
    assert all(frame["answered_utc"].str.len() > 0)
    with pytest.raises(ValueError, match="not one of"):
        answers.record("New", "f3", "Elsewhere", ["Old"])
    answers.dispose()
