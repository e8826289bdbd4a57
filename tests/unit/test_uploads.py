"""Upload validation: good files of every kind are read; each kind of bad file gets its own message."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import Point, box

from core.datasets import read_upload


# ----------------------------------------------------------------------------- builders
def microdata_csv(rows: int = 12) -> bytes:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], rows), "age": rng.integers(0, 90, rows),
                          "race": rng.choice(["A", "B", "C"], rows)})
    frame.loc[0, "sex"] = "F"  # both labels present whatever the draw
    return frame.to_csv(index=False).encode()


def counts_csv(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def squares(n: int = 3, crs: str | int = 4326) -> gpd.GeoDataFrame:
    origin, size = ((-84.0, 33.0), 0.1) if crs == 4326 else ((700_000.0, 3_600_000.0), 10_000.0)
    geoms = [box(origin[0] + i * size, origin[1], origin[0] + (i + 1) * size, origin[1] + size)
             for i in range(n)]
    return gpd.GeoDataFrame({"GEOID": [f"1300{i}" for i in range(n)], "pop": [10, 20, 30]},
                            geometry=geoms, crs=crs)


def geojson_bytes(gdf: gpd.GeoDataFrame) -> bytes:
    return gdf.to_json().encode()


def shapefile_zip(tmp_path: Path, gdf: gpd.GeoDataFrame, drop: tuple[str, ...] = (),
                  folder: str = "") -> bytes:
    gdf.to_file(tmp_path / "units.shp")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for part in sorted(tmp_path.glob("units.*")):
            if part.suffix not in drop:
                archive.write(part, folder + part.name)
    return buffer.getvalue()


def zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- good files
def test_microdata_from_bytes_file_object_and_path(tmp_path):
    data = microdata_csv()
    path = tmp_path / "people.csv"
    path.write_bytes(data)
    handle = io.BytesIO(data)
    handle.read(5)  # a partly consumed upload is rewound
    for source in (data, handle, path, str(path)):
        frame = read_upload(source, "microdata_csv")
        assert frame.shape == (12, 3)
        assert isinstance(frame["sex"].dtype, pd.CategoricalDtype)
        assert frame["age"].dtype == "int64"


def test_microdata_with_utf8_bom_and_spaces_after_commas():
    frame = read_upload(b"\xef\xbb\xbfa, b\n" + b"x, 1\n" * 10, "microdata_csv")
    assert list(frame.columns) == ["a", "b"] and list(frame["a"].cat.categories) == ["x"]


def test_counts_keep_leading_zeros_and_integer_counts():
    frame = read_upload(counts_csv(["GEOID,pop,black", "01001,10,2", "01003,0,0"]), "counts_csv",
                        required_columns=["pop"])
    assert frame["GEOID"].tolist() == ["01001", "01003"]
    assert frame["pop"].dtype == "int64" and frame["pop"].tolist() == [10, 0]
    assert frame["black"].tolist() == [2, 0]  # other columns are kept as they are


def test_trailing_commas_do_not_shift_columns():
    out = read_upload(b"GEOID,pop\n1,2,\n2,3,\n", "counts_csv")
    assert out["GEOID"].tolist() == ["1", "2"] and out["pop"].tolist() == [2, 3]


def test_counts_accept_whole_floats():
    frame = read_upload(counts_csv(["GEOID,pop", "a,3.0", "b,4"]), "counts_csv")
    assert frame["pop"].tolist() == [3, 4] and frame["pop"].dtype == "int64"


def test_geojson_in_lon_lat_is_accepted():
    gdf = read_upload(geojson_bytes(squares()), "geojson", required_columns=["GEOID"])
    assert len(gdf) == 3 and gdf.crs.to_epsg() == 4326
    assert gdf.total_bounds == pytest.approx([-84.0, 33.0, -83.7, 33.1])


def test_geojson_with_legacy_projected_crs_is_reprojected():
    doc = json.loads(squares(crs=26916).to_json())
    doc["crs"] = {"type": "name", "properties": {"name": "EPSG:26916"}}
    gdf = read_upload(json.dumps(doc).encode(), "geojson")
    assert gdf.crs.to_epsg() == 4326
    minx, miny, maxx, maxy = gdf.total_bounds
    assert -85.0 < minx < maxx < -82.0 and 32.0 < miny < maxy < 33.0


def test_shapefile_zip_with_prj_is_reprojected(tmp_path):
    data = shapefile_zip(tmp_path, squares(crs=26916), folder="nested/")
    gdf = read_upload(data, "shapefile_zip", required_columns=["GEOID", "pop"])
    assert len(gdf) == 3 and gdf.crs.to_epsg() == 4326
    assert gdf["pop"].tolist() == [10, 20, 30]
    assert gdf.total_bounds[0] == pytest.approx(-84.8, abs=0.1)


def test_geojson_self_intersecting_polygon_is_repaired():
    bowtie = {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}
    doc = {"type": "FeatureCollection",
           "features": [{"type": "Feature", "properties": {"GEOID": "1"}, "geometry": bowtie}]}
    gdf = read_upload(json.dumps(doc).encode(), "geojson")
    assert gdf.is_valid.all() and gdf.geometry.values[0].area == pytest.approx(0.5)


# ----------------------------------------------------------------------------- bad files
BAD_TEXT_CASES = [
    ("empty", b"", "microdata_csv", "empty"),
    ("blank lines", b"\n\n  \n", "microdata_csv", "only blank lines"),
    ("semicolons", b"a;b;c\n" + b"1;2;3\n" * 10, "microdata_csv", "semicolon"),
    ("tabs", b"GEOID\tpop\n1\t2\n", "counts_csv", "tab"),
    ("binary", b"PK\x03\x04\x00\x00garbage\x00\x01", "microdata_csv", "looks binary"),
    ("latin-1", "name,city\nJos\u00e9,Z\u00fcrich\n".encode("latin-1") * 10, "microdata_csv", "not valid UTF-8"),
    ("ragged rows", b"a,b\n1,2\n1,2,3\n" + b"1,2\n" * 10, "microdata_csv", "could not be parsed"),
    ("duplicate headers", b"a,a\n" + b"1,2\n" * 10, "microdata_csv", "Duplicate column names"),
    ("one column", b"a\n" + b"1\n" * 20, "microdata_csv", "at least 2 columns"),
    ("few rows", b"a,b\n1,2\n3,4\n", "microdata_csv", "at least 10 rows"),
    ("no GEOID", b"id,pop\n1,2\n", "counts_csv", "needs a GEOID column"),
    ("non-numeric", b"GEOID,pop\n1,2\n2,many\n", "counts_csv", "non-numeric value 'many' on line 3"),
    ("negative", b"GEOID,pop\n1,2\n2,-4\n", "counts_csv", "negative count \\(-4\\) on line 3"),
    ("fractional", b"GEOID,pop\n1,2.5\n", "counts_csv", "fractional count \\(2.5\\)"),
    ("blank count", b"GEOID,pop\n1,\n", "counts_csv", "blank on line 2"),
    ("infinite count", b"GEOID,pop\n1,2\n2,inf\n", "counts_csv", "impossible count \\('inf'\\) on line 3"),
    ("overflowing count", b"GEOID,pop\n1,2\n2,1e30\n", "counts_csv", "impossible count \\('1e\\+30'\\) on line 3"),
    ("extra field in first row", b"a,b\n1,2,3\n" + b"1,2\n" * 10, "microdata_csv", "more comma-separated fields"),
    ("duplicate GEOID", b"GEOID,pop\n13001,2\n13001,3\n13003,1\n", "counts_csv", "Duplicate GEOIDs \\['13001'\\]"),
    ("empty GEOID", b"GEOID,pop\n,2\n", "counts_csv", "GEOID is empty on line 2"),
    ("bad JSON", b'{"type": "FeatureCollection", "features": [', "geojson", "not valid JSON"),
    ("not a collection", b'{"type": "Feature", "geometry": null}', "geojson", "must be a FeatureCollection"),
    ("no features", b'{"type": "FeatureCollection", "features": []}', "geojson", "has no features"),
    ("missing geometry", b'{"type": "FeatureCollection", "features": [{"type": "Feature", '
                         b'"properties": {}, "geometry": null}]}', "geojson", "Feature 1 .*no geometry"),
    ("not a zip", b"this is plain text, not an archive", "shapefile_zip", "not a valid zip"),
]


@pytest.mark.parametrize("label,data,kind,message", BAD_TEXT_CASES, ids=[c[0] for c in BAD_TEXT_CASES])
def test_bad_file_gets_a_specific_message(label, data, kind, message):
    with pytest.raises(ValueError, match=message):
        read_upload(data, kind)


def test_too_large_is_refused_before_parsing(tmp_path):
    data = microdata_csv(rows=40)
    with pytest.raises(ValueError, match=rf"too large \({len(data)} bytes\); the limit is 100 bytes"):
        read_upload(data, "microdata_csv", max_bytes=100)
    with pytest.raises(ValueError, match=r"too large \(more than 100 bytes\)"):
        read_upload(io.BytesIO(data), "microdata_csv", max_bytes=100)
    path = tmp_path / "big.csv"
    path.write_bytes(microdata_csv(rows=40))
    with pytest.raises(ValueError, match="too large"):
        read_upload(path, "microdata_csv", max_bytes=100)


def test_unknown_kind_and_missing_required_column():
    with pytest.raises(ValueError, match="Unknown upload kind 'xlsx'"):
        read_upload(microdata_csv(), "xlsx")
    with pytest.raises(ValueError, match=r"Missing required column\(s\) \['income'\]"):
        read_upload(microdata_csv(), "microdata_csv", required_columns=["income"])
    with pytest.raises(ValueError, match=r"Missing required column\(s\) \['vap'\]"):
        read_upload(b"GEOID,pop\n1,2\n", "counts_csv", required_columns=["vap"])


def test_points_are_not_areas():
    points = gpd.GeoDataFrame({"GEOID": ["1"]}, geometry=[Point(-84, 33)], crs=4326)
    with pytest.raises(ValueError, match=r"\['Point'\] geometries"):
        read_upload(geojson_bytes(points), "geojson")


def test_projected_coordinates_without_crs_are_refused():
    doc = json.loads(squares(crs=26916).to_json())
    doc.pop("crs", None)  # metres with no CRS member: GeoJSON would claim lon/lat
    with pytest.raises(ValueError, match="look projected"):
        read_upload(json.dumps(doc).encode(), "geojson")


def test_zip_without_shp(tmp_path):
    with pytest.raises(ValueError, match="no .shp file"):
        read_upload(zip_of({"readme.txt": b"hello"}), "shapefile_zip")


def test_zip_missing_prj_or_dbf(tmp_path):
    with pytest.raises(ValueError, match="no .prj file"):
        read_upload(shapefile_zip(tmp_path, squares(), drop=(".prj",)), "shapefile_zip")
    with pytest.raises(ValueError, match="missing units.dbf"):
        read_upload(shapefile_zip(tmp_path, squares(), drop=(".dbf",)), "shapefile_zip")


def test_zip_slip_paths_are_refused():
    with pytest.raises(ValueError, match="unsafe path '../evil.shp'"):
        read_upload(zip_of({"../evil.shp": b"x", "evil.shx": b"x"}), "shapefile_zip")
    with pytest.raises(ValueError, match="unsafe path '/etc/units.shp'"):
        read_upload(zip_of({"/etc/units.shp": b"x"}), "shapefile_zip")


def test_corrupted_zip_member(tmp_path):
    data = bytearray(shapefile_zip(tmp_path, squares()))
    start = data.find(b"units.shp") + len(b"units.shp")  # first local header's name, then payload
    data[start + 10:start + 60] = b"\xff" * 50
    with pytest.raises(ValueError, match="corrupted|could not be read"):
        read_upload(bytes(data), "shapefile_zip")


def test_two_shapefiles_in_one_zip(tmp_path):
    with pytest.raises(ValueError, match="holds 2 shapefiles"):
        read_upload(zip_of({"a.shp": b"x", "b.shp": b"y"}), "shapefile_zip")
