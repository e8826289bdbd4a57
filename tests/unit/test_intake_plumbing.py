"""A curator's declared data set reaches every run: bytes read by their file type, the schema's own
bounding seed, the one microdata loader (coherence, synthesis and the ranking run on the cleaned file,
and a report reruns with the same cleaning), the data-set store on SQLite and PostgreSQL, Excel files."""
from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.__main__ import main as cli
from core.contracts import DataRef, bytes_fingerprint, plan_from_dict, plan_to_dict
from core.intake.bounding import row_keys
from core.datasets import load_microdata
from core.intake import ColumnSchema, DataSchema, apply, clean, draft_schema, read_table, read_table_bytes
from core.intake.store import DataSetStore
from core.report import build_report, load_plan, report_json, run_plan, tables_match
from tests.unit.ledger_support import database_url

MESSY = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"

# The public information the draft leaves undeclared (needs_public_info), as a curator would state it.
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


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def raw() -> bytes:
    return MESSY.read_bytes()


@pytest.fixture(scope="module")
def schema(raw) -> DataSchema:
    """The draft schema of the messy file, with its public categories and bounds declared."""
    draft = draft_schema(read_table_bytes(raw, MESSY.name), "Messy county")
    columns = tuple(c.__class__(**{**{f: getattr(c, f) for f in c.__dataclass_fields__}, **PUBLIC.get(c.name, {})})
                    for c in draft.columns)
    return draft.replace(columns=columns, bounding_seed=7)


def _ref(raw: bytes, schema: DataSchema) -> DataRef:
    return DataRef("upload", bytes_fingerprint(raw), schema=schema)


# ------------------------------------------------------------------------------------- reading
def test_read_table_bytes_reads_by_the_file_names_suffix(tmp_path, raw):
    from_path = read_table(MESSY)
    pd.testing.assert_frame_equal(read_table_bytes(raw, "messy_county.csv"), from_path)
    pd.testing.assert_frame_equal(read_table_bytes(raw, ".CSV"), from_path)   # a bare suffix will do
    assert from_path.loc[2, "income"] == "89,800" and from_path.loc[0, "person_id"] == "P00001"   # as written
    path = tmp_path / "m.parquet"
    from_path.to_parquet(path)
    pd.testing.assert_frame_equal(read_table_bytes(path.read_bytes(), "m.parquet"), from_path)
    pd.testing.assert_frame_equal(read_table_bytes(raw, "messy.txt"), from_path)   # delimited text by any name
    with pytest.raises(ValueError, match="CSV .*Parquet or Excel"):
        read_table_bytes(raw, "messy.docx")
    with pytest.raises(ValueError, match="bytes"):
        read_table_bytes("a,b\n1,2\n", "x.csv")


def test_excel_workbooks_are_read_as_text_cells(tmp_path):
    frame = pd.DataFrame({"person_id": ["P1", "P2", "P3"], "age": [34, 51, 27], "sex": ["Female", "M", ""],
                          "income": ["45,000", "$12,000", "N/A"]})
    path = tmp_path / "extract.xlsx"
    frame.to_excel(path, index=False)
    back = read_table(path)
    assert list(back.columns) == list(frame.columns)
    assert back["age"].tolist() == ["34", "51", "27"] and back["sex"].tolist() == ["Female", "M", ""]
    assert back["income"].tolist() == ["45,000", "$12,000", "N/A"]
    pd.testing.assert_frame_equal(read_table_bytes(path.read_bytes(), "EXTRACT.XLSX"), back)
    # the same cleaning as from the CSV of the same cells
    csv_path = tmp_path / "extract.csv"
    frame.to_csv(csv_path, index=False)
    declared = DataSchema("x", (ColumnSchema("person_id", "person_id"), ColumnSchema("age", "number"),
                                ColumnSchema("sex", "category", merges=(("M", "Male"),), missing="own_category"),
                                ColumnSchema("income", "number", missing="drop_row")), person_id="person_id")
    pd.testing.assert_frame_equal(apply(back, declared), apply(read_table(csv_path), declared))


def test_damaged_excel_files_are_refused_with_a_message(tmp_path):
    with pytest.raises(ValueError, match="not a readable Excel workbook"):
        read_table_bytes(b"PK\x03\x04 truncated", "broken.xlsx")
    with pytest.raises(ValueError, match="not a readable Excel workbook"):
        read_table_bytes(b"person,age\nP1,3\n", "renamed.xlsx")
    buffer = io.BytesIO()   # a valid zip that is no workbook
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "hello")
    with pytest.raises(ValueError, match="not a readable Excel workbook"):
        read_table_bytes(buffer.getvalue(), "zip.xlsx")
    bomb = io.BytesIO()     # one part that inflates far beyond its compressed size
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", b"\x00" * 5_000_000)
    with pytest.raises(ValueError, match="zip bomb"):
        read_table_bytes(bomb.getvalue(), "bomb.xlsx")


# ------------------------------------------------------------------------------------- schema fields
def test_bounding_seed_and_file_suffix_are_validated_and_round_trip(schema):
    assert schema.bounding_seed == 7 and schema.file_suffix == ".csv"
    back = DataSchema.from_dict(json.loads(json.dumps(schema.to_dict())))
    assert back == schema and back.digest() == schema.digest()
    excel = schema.replace(file_suffix="XLSX", bounding_seed=2**40)
    assert excel.file_suffix == ".xlsx"
    assert DataSchema.from_dict(json.loads(json.dumps(excel.to_dict()))) == excel
    assert schema.replace(bounding_seed=8).digest() != schema.digest()
    for bad in (-1, 1.5, True, "3", 2**63):
        with pytest.raises(ValueError, match="bounding_seed"):
            schema.replace(bounding_seed=bad)
    for bad in (".docx", "", None, 3):
        with pytest.raises(ValueError, match="file_suffix"):
            schema.replace(file_suffix=bad)
    # a plan carrying the schema keeps both through its JSON
    ref = DataRef("upload", "a" * 64, schema=excel)
    from core.coherence import AuditPlan
    plan = AuditPlan(data=ref, lens=("sex", "county"), subgroup_columns=("race",))
    again = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
    assert again.data.schema.bounding_seed == 2**40 and again.data.schema.file_suffix == ".xlsx"


def test_schema_json_written_before_the_new_fields_still_loads(schema):
    old = schema.to_dict()
    del old["bounding_seed"], old["file_suffix"]
    back = DataSchema.from_dict(old)
    assert back.bounding_seed == 0 and back.file_suffix == ".csv"
    assert back == schema.replace(bounding_seed=0)


def test_apply_bounds_contributions_with_the_schemas_seed(raw, schema):
    frame = read_table_bytes(raw, MESSY.name)
    ids = schema.replace(columns=tuple(c for c in schema.columns if c.name in ("person_id", "sex")))
    kept = {seed: apply(frame, ids.replace(bounding_seed=seed)) for seed in (0, 7, 11)}
    # the default seed is the schema's; an explicit rng_seed still wins
    pd.testing.assert_frame_equal(apply(frame, ids.replace(bounding_seed=7)), apply(frame, ids, rng_seed=7))
    pd.testing.assert_frame_equal(apply(frame, ids.replace(bounding_seed=0), rng_seed=11), kept[11])
    pd.testing.assert_frame_equal(clean(frame, ids.replace(bounding_seed=11)).frame, kept[11])
    # one row per person always; which of P00007's four rows is kept follows the seed
    for out in kept.values():
        assert out["person_id"].is_unique and len(out) == frame["person_id"].nunique()
    every = clean(frame, ids.replace(max_rows_per_person=4)).frame      # all of P00007's rows, cleaned
    p7 = every[every["person_id"] == "P00007"]
    assert len(p7) == 4
    picks = set()
    for seed in range(8):
        key = row_keys(p7["person_id"].to_numpy(object), [p7["sex"]], seed)
        picks.add(int(np.argmin(key)))
        out = apply(frame, ids.replace(bounding_seed=seed))
        sex = out.loc[out["person_id"] == "P00007", "sex"].astype(str).item()
        assert sex == str(p7["sex"].iloc[int(np.argmin(key))])
    assert len(picks) > 1


# ------------------------------------------------------------------------------------- the one loader
def test_load_microdata_reads_cleans_and_checks_the_fingerprint(raw, schema):
    ref = _ref(raw, schema)
    table = load_microdata(ref, raw)
    pd.testing.assert_frame_equal(table, apply(read_table(MESSY), schema))
    assert list(table.columns) == [c.name for c in schema.used_columns()]
    assert table["person_id"].is_unique and str(table["age"].dtype) == "category"
    assert list(table["sex"].cat.categories) == ["Female", "Male"]
    assert table["income"].min() >= 0 and table["income"].max() <= 400_000
    with pytest.raises(ValueError, match="fingerprint differs"):
        load_microdata(ref, raw + b"\n")
    with pytest.raises(ValueError, match="give the same file's bytes"):
        load_microdata(ref, None)
    with pytest.raises(ValueError, match="takes no data file"):
        load_microdata(DataRef("cps"), raw)
    # without a schema: the plain microdata CSV reader, as before
    small = b"a,b\n" + b"".join(f"x{i % 3},{i}\n".encode() for i in range(12))
    plain = load_microdata(DataRef("upload", bytes_fingerprint(small)), small)
    assert len(plain) == 12 and plain["b"].tolist() == list(range(12))
    assert load_microdata(DataRef("cps")).shape == (50_000, 10)


@pytest.mark.slow
def test_an_excel_data_set_is_read_by_its_declared_suffix(tmp_path, raw, schema):
    path = tmp_path / "messy.xlsx"
    read_table(MESSY).to_excel(path, index=False)
    data = path.read_bytes()
    excel = schema.replace(file_suffix=".xlsx")
    pd.testing.assert_frame_equal(load_microdata(_ref(data, excel), data), load_microdata(_ref(raw, schema), raw))
    with pytest.raises(ValueError, match="CSV could not be parsed|binary|UTF-8"):
        load_microdata(_ref(data, schema), data)   # declared as CSV: the workbook is not read as one


def test_the_three_areas_load_through_the_one_loader(raw, schema):
    from core.coherence.run import load_frame
    from core.fairness.group_fairness_plan import GroupFairnessPlan, RankingPlan, ranking_table
    from core.fairness import MediatorRole
    from core.synthesis import SynthesisPlan
    from core.synthesis.workflow import load_raw
    ref = _ref(raw, schema)
    expected = load_microdata(ref, raw)
    synth = SynthesisPlan(data=ref, columns=("sex", "county", "employed"), strata=("sex",), target="employed",
                          domain_declared_public=True)
    rank = GroupFairnessPlan(data=ref, ranking=RankingPlan(attributes=("sex",), mediators=(
        MediatorRole("hours_per_week", ()),), outcome="income", ks=(50,)))
    for table in (load_frame(ref, raw), load_raw(synth, raw), ranking_table(rank, raw)):
        pd.testing.assert_frame_equal(table, expected)
    for load in (lambda d: load_frame(ref, d), lambda d: load_raw(synth, d), lambda d: ranking_table(rank, d)):
        with pytest.raises(ValueError, match="fingerprint differs"):
            load(raw[:-1])


def _plans(ref: DataRef):
    from core.coherence import AdversaryChoice, AuditPlan, RowSample
    from core.fairness import MediatorRole
    from core.fairness.group_fairness_plan import GroupFairnessPlan, RankingPlan
    from core.synthesis import ReleasePlan, SynthesisPlan
    audit = AuditPlan(data=ref, rows=RowSample(1500, 3), trials=3, lens=("sex", "county", "age"),
                      target="employed", positive="Yes",
                      subgroup_columns=("race",), subgroup_order=1, gamma=40,
                      adversaries=(AdversaryChoice("naive_bayes"),))
    synthesis = SynthesisPlan(data=ref, columns=("sex", "county", "employed", "age"), strata=("sex",),
                              target="employed", domain_declared_public=True, release=ReleasePlan(epsilon=2.0))
    ranking = GroupFairnessPlan(data=ref, lexifair=None, companion=None,
                                ranking=RankingPlan(attributes=("sex", "race"),
                                                    mediators=(MediatorRole("hours_per_week", ("sex",)),),
                                                    outcome="income", ascending=False, ks=(50, 200)))
    return {"audit": audit, "synthesis": synthesis, "ranking": ranking}


@pytest.mark.parametrize("area", ["audit", "synthesis", "ranking"])
def test_each_area_runs_on_the_declared_file_and_its_report_reruns_with_the_same_cleaning(
        area, tmp_path, raw, schema):
    plan = _plans(_ref(raw, schema))[area]
    result = run_plan(plan, raw)
    tables = result.tables()
    assert tables and all(len(t) for t in tables.values())
    report = build_report(result)
    assert load_plan(report).data.schema == schema        # the report carries the declaration
    # what ran is the cleaned table (contribution bounding dropped rows), not the file read as a plain CSV
    plain = load_microdata(DataRef("upload", bytes_fingerprint(raw)), raw)
    assert len(plain) == 3_500 and len(load_microdata(plan.data, raw)) < 3_500
    path, data = tmp_path / "report.json", tmp_path / "messy_county.csv"
    path.write_text(report_json(report))
    data.write_bytes(raw)
    assert cli(["reproduce", str(path), "--data", str(data)]) == 0       # checks only: nothing written
    assert cli(["reproduce", str(path), "--out", str(tmp_path / "out"), "--data", str(data)]) == 0
    assert set(report["tables"]) <= {p.stem for p in (tmp_path / "out").glob("*.csv")}
    assert tables_match(report, run_plan(load_plan(report), raw).tables()) == []
    # a file whose fingerprint differs is refused before anything runs
    edited = tmp_path / "edited.csv"
    edited.write_bytes(raw.replace(b"P00001,Male", b"P00001,Female", 1))
    assert cli(["reproduce", str(path), "--out", str(tmp_path / "o2"), "--data", str(edited)]) == 2


def test_a_different_bounding_seed_is_a_different_plan_and_keeps_other_rows(raw, schema):
    ref, other = _ref(raw, schema), _ref(raw, schema.replace(bounding_seed=8))
    a, b = load_microdata(ref, raw), load_microdata(other, raw)
    assert len(a) == len(b) and not a.equals(b)
    plans = _plans(ref)["audit"], _plans(other)["audit"]
    assert plans[0].digest() != plans[1].digest()


# ------------------------------------------------------------------------------------- the store
@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    gen = database_url(request.param, tmp_path)
    url = next(gen)
    s = DataSetStore(url)
    yield s
    s.dispose()
    for _ in gen:
        pass


def test_store_saves_schemas_as_json_by_name(store, schema):
    assert store.names() == [] and store.get("Messy county") is None
    assert store.save(schema) == "Messy county"
    assert store.get("Messy county") == schema and store.get("Messy county").digest() == schema.digest()
    assert store.save(schema) == "Messy county"          # the same declaration again: nothing changes
    changed = schema.replace(bounding_seed=9)
    with pytest.raises(ValueError, match="already saved"):
        store.save(changed)
    assert store.get("Messy county") == schema
    store.save(changed, replace=True)
    assert store.get("Messy county") == changed
    store.save(schema.replace(name="  Other  "))
    assert store.names() == ["Messy county", "Other"] and store.get("Other").name == "Other"
    with store.db.read_tx() as conn:
        text = conn.exec_driver_sql("SELECT schema_json FROM intake_data_sets WHERE name = 'Other'").scalar_one()
    assert DataSchema.from_dict(json.loads(text)) == schema.replace(name="Other")
    assert store.delete("Other") is True and store.delete("Other") is False and store.names() == ["Messy county"]
    with pytest.raises(ValueError, match="DataSchema"):
        store.save(schema.to_dict())


def test_store_keeps_the_files_of_each_data_set(store, schema):
    store.save(schema)
    store.save(schema.replace(name="Second"))
    a, b = hashlib.sha256(b"first file").hexdigest(), hashlib.sha256(b"second file").hexdigest()
    assert list(store.versions("Messy county").columns) == ["fingerprint", "file_name", "added_utc", "curator"]
    assert store.versions("Messy county").empty and store.find_by_fingerprint(a) is None
    store.add_version("Messy county", a, "county_2024.csv")
    store.add_version("Messy county", a, "county_2024.csv")     # idempotent
    store.add_version("Messy county", b, "county_2025.csv")
    store.add_version("Second", b, "copy.csv")
    versions = store.versions("Messy county")
    assert versions["fingerprint"].tolist() == [a, b]
    assert versions["file_name"].tolist() == ["county_2024.csv", "county_2025.csv"]
    assert versions["added_utc"].str.endswith("+00:00").all()
    assert store.find_by_fingerprint(a) == "Messy county" and store.find_by_fingerprint(b) == "Messy county"
    assert store.versions("Second")["fingerprint"].tolist() == [b]
    with pytest.raises(ValueError, match="save its schema first"):
        store.add_version("Nobody", a, "x.csv")
    with pytest.raises(ValueError, match="SHA-256"):
        store.add_version("Messy county", "not-a-digest", "x.csv")
    store.delete("Messy county")
    assert store.versions("Messy county").empty and store.find_by_fingerprint(a) is None
    assert store.find_by_fingerprint(b) == "Second"


def test_store_survives_reopening(tmp_path, schema):
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    first = DataSetStore(url)
    first.save(schema)
    first.add_version(schema.name, "b" * 64, "f.csv")
    first.dispose()
    again = DataSetStore(url)
    assert again.get(schema.name) == schema and again.versions(schema.name)["fingerprint"].tolist() == ["b" * 64]
    again.dispose()
