"""Bundled data: integrity against data/README.md, documented shapes, dtypes and contents."""
from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pandas as pd
import pytest

from core import datasets
from core.contracts import DataRef
from core.datasets import (COMPAS_POPULATIONS, DATA_DIR, DATASETS, compas_population, cps_domain,
                           load_adult, load_compas, load_cps, load_dataset, load_georgia_counties)

README_ROW = re.compile(r"^\| `([^`]+)` \| (\d+) \| (\d+) \| ([0-9a-f]{64}) \|$")


def readme_table() -> dict[str, tuple[int, int, str]]:
    rows = {}
    for line in (DATA_DIR / "README.md").read_text().splitlines():
        match = README_ROW.match(line.strip())
        if match:
            rows[match[1]] = (int(match[2]), int(match[3]), match[4])
    return rows


def test_readme_lists_every_bundled_file_with_matching_sha256():
    table = readme_table()
    on_disk = {p.name for p in DATA_DIR.iterdir() if p.is_file() and p.name != "README.md"}
    assert set(table) == on_disk
    for name, (_, _, digest) in table.items():
        assert hashlib.sha256((DATA_DIR / name).read_bytes()).hexdigest() == digest, name


def test_readme_states_licences_and_attribution():
    text = (DATA_DIR / "README.md").read_text()
    assert "CC BY 4.0" in text and "BSD-3" in text
    assert "Angwin" in text and "ProPublica" in text
    assert "Fotheringham" in text


@pytest.mark.parametrize("loader,rows,cols", [
    (load_cps, 50_000, 10), (load_adult, 48_842, 15), (load_compas, 7_214, 16),
    (load_georgia_counties, 159, 10),
])
def test_row_and_column_counts_match_readme_and_metadata(loader, rows, cols):
    frame = loader()
    assert frame.shape == (rows, cols)
    key = {load_cps: "cps", load_adult: "adult", load_compas: "compas",
           load_georgia_counties: "georgia"}[loader]
    assert (DATASETS[key].rows, DATASETS[key].columns) == (rows, cols)
    assert readme_table()[DATASETS[key].file][:2] == (rows, cols)


def test_georgia_population_crs_and_identifiers():
    gdf = load_georgia_counties()
    assert int(gdf["TotPop90"].sum()) == 6_478_216
    assert gdf.crs.to_epsg() == 4326
    assert gdf["TotPop90"].dtype == "int64"
    assert gdf["GEOID"].str.fullmatch(r"13\d{3}").all() and gdf["GEOID"].is_unique
    assert gdf.loc[gdf["GEOID"] == "13121", "NAME"].item() == "Fulton"
    assert set(gdf.geom_type) <= {"Polygon", "MultiPolygon"} and gdf.is_valid.all()
    minx, miny, maxx, maxy = gdf.total_bounds
    assert -85.7 < minx < maxx < -80.8 and 30.3 < miny < maxy < 35.1


def test_georgia_simplification_keeps_neighbours_touching():
    gdf = load_georgia_counties()
    fulton = gdf.loc[gdf["NAME"] == "Fulton"].geometry.item()
    touching = set(gdf.loc[gdf.geometry.intersects(fulton), "NAME"]) - {"Fulton"}
    # Fulton's ten neighbours on the 1990 map: simplification must not open gaps along borders.
    assert touching == {"Carroll", "Cherokee", "Clayton", "Cobb", "Coweta", "DeKalb", "Douglas",
                        "Fayette", "Forsyth", "Gwinnett"}
    left, right = gdf.sindex.query(gdf.geometry, predicate="intersects")
    assert int((left < right).sum()) == 431  # county pairs sharing a border or corner in the source


def test_compas_has_no_identifying_columns():
    compas = load_compas()
    identifying = {"id", "name", "first", "last", "dob", "c_case_number", "r_case_number",
                   "vr_case_number", "compas_screening_date", "c_jail_in", "c_jail_out",
                   "c_offense_date", "c_arrest_date", "screening_date"}
    assert not identifying & set(compas.columns)
    assert not [c for c in compas.columns if "name" in c or "case" in c or "date" in c or "dob" in c]
    assert compas["race"].value_counts()["African-American"] == 3_696
    assert compas["two_year_recid"].mean() == pytest.approx(0.45, abs=0.01)


def test_compas_populations_match_propublica_and_the_paper():
    """ProPublica's filter keeps 6,172 rows; dropping race 'Other' gives the elicitation paper's
    5,829 people with base rate 0.4606 (spec R1); 'full' is every row of the file."""
    compas = load_compas()
    assert str(compas["days_b_screening_arrest"].dtype) == "Int64"
    assert int(compas["days_b_screening_arrest"].isna().sum()) == 307
    paper, propublica, full = (compas_population(k) for k in ("paper", "propublica", "full"))
    assert (len(paper), len(propublica), len(full)) == (5_829, 6_172, 7_214)
    assert compas["two_year_recid"].to_numpy()[paper].mean() == pytest.approx(0.4606, abs=5e-5)
    kept = compas.iloc[paper]
    assert kept["days_b_screening_arrest"].abs().max() <= 30
    assert (kept["is_recid"] != -1).all() and (kept["c_charge_degree"] != "O").all()
    assert "Other" not in set(kept["race"].astype(str))
    assert np.all(np.diff(paper) > 0) and set(paper) <= set(propublica)
    assert set(COMPAS_POPULATIONS) == {"paper", "propublica", "full"}
    with pytest.raises(ValueError, match="population"):
        compas_population("everyone")


def test_cps_categories_equal_domain_and_peer_cell_sizes():
    cps, domain = load_cps(), cps_domain()
    assert list(cps.columns) == list(domain)
    for col, labels in domain.items():
        assert isinstance(cps[col].dtype, pd.CategoricalDtype)
        assert list(cps[col].cat.categories) == labels
        assert (cps[col].cat.codes >= 0).all()
    assert [len(domain[c]) for c in domain] == [8, 7, 7, 5, 2, 3, 5, 9, 8, 2]
    assert domain["race"] == ["Amer Indian Aleut or Eskimo", "Asian or Pacific Islander", "Black",
                              "Other", "White"]
    cells = cps.groupby(["sex", "race"], observed=True).size()
    assert cells[("Female", "White")] == 21_689 and cells[("Male", "Black")] == 2_316
    assert cells[("Male", "Amer Indian Aleut or Eskimo")] == 240


def test_cps_extract_is_byte_identical_to_the_peer_recipe():
    meta = json.loads((DATA_DIR / "cps_1994_domain.json").read_text())
    codes = load_cps().apply(lambda s: s.cat.codes)
    plain = codes.to_csv(index=False, lineterminator="\n").encode()
    assert len(plain) == 1_000_091
    assert hashlib.md5(plain).hexdigest() == "98be699a6c3e4efb6eecd96f0bd6b5fc" == meta["uncompressed_csv_md5"]
    assert meta["full_domain_size"] == 8_467_200 and meta["sample_seed"] == 20240601


def test_adult_dtypes_and_cleaning():
    adult = load_adult()
    numeric = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
    assert all(adult[c].dtype == "int64" for c in numeric)
    others = [c for c in adult.columns if c not in numeric]
    assert all(isinstance(adult[c].dtype, pd.CategoricalDtype) for c in others)
    assert list(adult["income"].cat.categories) == ["<=50K", ">50K"]
    assert adult["income"].value_counts()[">50K"] == 11_687
    assert "?" not in adult["workclass"].cat.categories and "Unknown" in adult["workclass"].cat.categories
    assert not any(str(v).startswith(" ") for c in others for v in adult[c].cat.categories)


def test_compas_dtypes():
    compas = load_compas()
    categorical = ["sex", "age_cat", "race", "c_charge_degree", "score_text"]
    assert all(isinstance(compas[c].dtype, pd.CategoricalDtype) for c in categorical)
    nullable = ["days_b_screening_arrest"]
    assert all(compas[c].dtype == "Int64" for c in nullable)
    assert all(compas[c].dtype == "int64" for c in compas.columns if c not in categorical + nullable)
    assert list(compas["score_text"].cat.categories) == ["Low", "Medium", "High"]


def test_loaders_return_independent_copies():
    first = load_cps()
    first["sex"] = first["sex"].cat.rename_categories(["F", "M"])
    assert list(load_cps()["sex"].cat.categories) == ["Female", "Male"]
    gdf = load_georgia_counties()
    gdf.loc[0, "TotPop90"] = -1
    assert int(load_georgia_counties()["TotPop90"].sum()) == 6_478_216


def test_load_dataset_rejects_unknown_key():
    with pytest.raises(ValueError, match="Unknown data set 'acs'"):
        load_dataset("acs")
    with pytest.raises(ValueError, match="Unknown data set 'acs'"):
        load_dataset(DataRef("acs"))


def test_registry_loads_what_a_plan_names():
    for key, info in DATASETS.items():
        frame = load_dataset(DataRef(key))
        assert frame.shape == (info.rows, info.columns) and info.label and info.provenance
        assert load_dataset(key).equals(frame)
    with pytest.raises(ValueError, match="uploaded data"):
        load_dataset(DataRef("upload", "ab" * 32))


def test_missing_file_names_the_build_script(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "DATA_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="build_data.py"):
        datasets._path(datasets.COMPAS_FILE)
