"""A folder of Parquet parts declared by path: anything that is not a part is refused, every part is checked
in one pass with counts as size bands, nothing counted is lost, and the declared labels are the domain."""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from core.intake import ColumnSchema, DataSchema, MISSING_LABEL
from core.intake.folder import check_folder, folder_labels, list_folder, part_codes, sample_rows
from core.synthesis.folder_release import FolderCounts

SEX = ("Female", "Male")
REGION = ("North", "South", "East", "West")


def _part(n: int, start: int) -> pd.DataFrame:
    i = np.arange(start, start + n)
    return pd.DataFrame({"sex": np.array(SEX, dtype=object)[i % 2], "region": np.array(REGION, dtype=object)[i % 4],
                         "age": (20 + i % 50).astype(float)})


@pytest.fixture
def messy(tmp_path):
    """Four parts: clean; blanks and "N/A" in sex; a region outside the declared labels; no region column.
    Beside them a CSV left in the folder and a Spark marker."""
    folder = tmp_path / "parts"
    folder.mkdir()
    _part(30, 0).to_parquet(folder / "part-0.parquet", index=False)
    one = _part(20, 30)
    one.loc[[2, 5], "sex"] = ""
    one.loc[7, "sex"] = "N/A"
    one.to_parquet(folder / "part-1.parquet", index=False)
    two = _part(25, 50)
    two.loc[[1, 4, 9], "region"] = "Mars"
    two.to_parquet(folder / "part-2.parquet", index=False)
    _part(15, 75).drop(columns="region").to_parquet(folder / "part-3.parquet", index=False)
    (folder / "notes.csv").write_text("sex,region\nFemale,North\n")
    (folder / "_SUCCESS").write_text("")
    return folder


def _schema(sex_missing=None, region_missing=None, **more) -> DataSchema:
    return DataSchema("Regional file", (ColumnSchema("sex", "category", categories=SEX, missing=sex_missing),
                                        ColumnSchema("region", "category", categories=REGION, missing=region_missing),
                                        ColumnSchema("age", "leave_out")), file_suffix=".parquet", **more)


def test_a_file_that_is_not_a_part_is_refused_by_name_and_markers_are_skipped(messy):
    with pytest.raises(ValueError, match=r"notes.csv, which is not a Parquet part.*would be left out"):
        list_folder(messy)
    (messy / "notes.csv").unlink()
    (messy / "nested").mkdir()
    with pytest.raises(ValueError, match=r"nested/"):
        list_folder(messy)
    (messy / "nested").rmdir()
    listing = list_folder(messy)
    assert listing.names == ("part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet")
    with pytest.raises(ValueError, match="not a folder"):
        list_folder(messy / "nowhere")
    with pytest.raises(ValueError, match="Give the path"):
        list_folder("  ")


def test_the_sample_is_bounded_and_read_in_part_order(messy):
    (messy / "notes.csv").unlink()
    listing = list_folder(messy)
    sample = sample_rows(listing, 40)
    assert len(sample) == 40 and list(sample.columns) == ["sex", "region", "age"]
    pd.testing.assert_series_equal(sample["age"].head(30), _part(30, 0)["age"])   # part 0 first, then part 1


def test_every_problem_of_every_part_in_one_check_with_banded_counts(messy):
    (messy / "notes.csv").unlink()
    checked = check_folder(list_folder(messy), _schema(), n_jobs=1)
    table = checked.table()
    sex = table[table["column"] == "sex"]["what"].tolist()
    region = table[table["column"] == "region"]["what"].tolist()
    assert sex == ["has missing values (blank or a missing token; n < 10 rows) and no missing policy."]
    assert any("outside the declared categories (n < 10 rows); there is no missing policy" in w for w in region)
    assert any("missing from 1 part(s): part-3.parquet" in w for w in region)
    assert len(checked.blocking) == 3
    assert table[table["column"] == "age"]["severity"].tolist() == []          # declared leave_out: no warning
    extra = _schema().replace(columns=_schema().columns[:2])                   # age not declared at all
    assert check_folder(list_folder(messy), extra, n_jobs=1).table().query("column == 'age'")["what"].tolist() == [
        "is in some parts but not declared; it will be left out."]
    with pytest.raises(ValueError, match=r"(?s)cannot be used yet.*sex.*region.*region"):
        checked.raise_if_blocked()
    # counts are banded: the exact numbers (3 missing, 3 outside) are never written
    assert not table["what"].str.contains(r"(?<!part-)\b3\b").any()


def test_a_damaged_part_is_named(messy):
    (messy / "notes.csv").unlink()
    (messy / "part-9.parquet").write_bytes(b"not parquet at all")
    checked = check_folder(list_folder(messy), _schema("own_category", "own_category"), n_jobs=1)
    assert any("cannot be read as Parquet: part-9.parquet" in p.what for p in checked.blocking)


def test_declared_policies_lose_no_row_and_values_outside_go_to_the_missing_category(messy):
    (messy / "notes.csv").unlink()
    shutil.move(str(messy / "part-3.parquet"), str(messy.parent / "part-3.parquet"))   # the part lacking region
    schema = _schema("own_category", "own_category")
    checked = check_folder(list_folder(messy), schema, n_jobs=1)
    assert not checked.blocking
    assert any("treated as missing (own_category)" in p.what for p in checked.problems)
    counts = FolderCounts(messy, schema, n_jobs=1)
    assert counts.labels == {"sex": [*SEX, MISSING_LABEL], "region": [*REGION, MISSING_LABEL]}
    counts.count([("sex",), ("region",), ("sex", "region")])
    assert counts.passes == 1
    sex, region = counts.table(("sex",)), counts.table(("region",))
    assert sex.sum() == region.sum() == 30 + 20 + 25                 # every row of every part counted
    assert sex[2] == 3                                                # two blanks and one "N/A"
    assert region[4] == 3                                             # the three "Mars"
    np.testing.assert_array_equal(counts.table(("sex", "region")).sum(axis=1), sex)


def test_a_part_that_blocks_is_refused_when_it_is_read(messy):
    (messy / "notes.csv").unlink()
    schema = _schema()
    with pytest.raises(ValueError, match="cannot be cleaned yet"):
        part_codes(str(messy / "part-1.parquet"), schema, {"sex": list(SEX)})
    with pytest.raises(ValueError, match="lacks the column"):
        part_codes(str(messy / "part-3.parquet"), schema, {"region": list(REGION)})


def test_the_domain_comes_from_the_declaration_only():
    binned = DataSchema("x", (ColumnSchema("age", "number", bounds=(0.0, 100.0), bins=4, missing="own_category"),
                              ColumnSchema("sex", "category", categories=SEX, missing="fill", fill="Female")))
    labels = folder_labels(binned)
    assert len(labels["age"]) == 5 and labels["age"][-1] == MISSING_LABEL and labels["sex"] == list(SEX)
    with pytest.raises(ValueError, match=r"'sex' needs its public categories.*'age' needs public bounds and bins"):
        folder_labels(DataSchema("x", (ColumnSchema("sex", "category"), ColumnSchema("age", "number"))))
    with pytest.raises(ValueError, match="person id"):
        folder_labels(DataSchema("x", (ColumnSchema("pid", "person_id"), ColumnSchema("sex", "category",
                                                                                      categories=SEX)),
                                 person_id="pid"))


def test_the_store_keeps_a_folder_sets_path_beside_its_declaration(tmp_path):
    from core.intake.store import DataSetStore
    store = DataSetStore(f"sqlite:///{tmp_path / 'store.sqlite'}")
    schema = _schema("own_category", "own_category")
    with pytest.raises(ValueError, match="save its schema first"):
        store.save_folder(schema.name, str(tmp_path))
    store.save(schema)
    assert store.folder(schema.name) is None
    store.save_folder(schema.name, str(tmp_path / "a"))
    store.save_folder(schema.name, str(tmp_path / "b"))                 # a moved folder replaces the path
    assert store.folder(schema.name) == str(tmp_path / "b") and store.folder_names() == [schema.name]
    assert store.delete(schema.name) and store.folder(schema.name) is None
