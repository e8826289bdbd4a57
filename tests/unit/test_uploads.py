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

from core.uploads import read_upload


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


class OneWayStream:
    """A file-like object that can only be read forward (a socket or pipe), counting what was read."""

    def __init__(self, data: bytes):
        self._data, self.consumed = data, 0

    def read(self, n: int = -1) -> bytes:
        n = len(self._data) - self.consumed if n < 0 else n
        chunk = self._data[self.consumed:self.consumed + n]
        self.consumed += len(chunk)
        return chunk


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
    ("header only", b"GEOID,pop\n", "counts_csv", "header but no rows"),
    ("block counts header only", b"GEOID,total,vap\n", "block_counts_csv", "header but no rows"),
    ("plan header only", b"GEOID,district\n\n", "assignment_csv", "header but no rows"),
    ("non-numeric", b"GEOID,pop\n1,2\n2,many\n", "counts_csv", "non-numeric value 'many' on line 3"),
    ("negative", b"GEOID,pop\n1,2\n2,-4\n", "counts_csv", "negative count \\(-4\\) on line 3"),
    ("fractional", b"GEOID,pop\n1,2.5\n", "counts_csv", "fractional count \\(2.5\\)"),
    ("blank count", b"GEOID,pop\n1,\n", "counts_csv", "blank on line 2"),
    ("infinite count", b"GEOID,pop\n1,2\n2,inf\n", "counts_csv", "impossible count \\('inf'\\) on line 3"),
    ("overflowing count", b"GEOID,pop\n1,2\n2,1e30\n", "counts_csv", "impossible count \\('1e\\+30'\\) on line 3"),
    ("extra field in first row", b"a,b\n1,2,3\n" + b"1,2\n" * 10, "microdata_csv", "more comma-separated fields"),
    ("duplicate GEOID", b"GEOID,pop\n13001,2\n13001,3\n13003,1\n", "counts_csv", "GEOIDs \\['13001'\\] appear more than once"),
    ("empty GEOID", b"GEOID,pop\n,2\n", "counts_csv", "GEOID is empty on line 2"),
    ("bad JSON", b'{"type": "FeatureCollection", "features": [', "geojson", "not valid JSON"),
    ("not a collection", b'{"type": "Feature", "geometry": null}', "geojson", "must be a FeatureCollection"),
    ("no features", b'{"type": "FeatureCollection", "features": []}', "geojson", "has no features"),
    ("missing geometry", b'{"type": "FeatureCollection", "features": [{"type": "Feature", '
                         b'"properties": {}, "geometry": null}]}', "geojson", "Feature 1 .*no geometry"),
    ("not a zip", b"this is plain text, not an archive", "shapefile_zip", "not a zip archive"),
]


@pytest.mark.parametrize("label,data,kind,message", BAD_TEXT_CASES, ids=[c[0] for c in BAD_TEXT_CASES])
def test_bad_file_gets_a_specific_message(label, data, kind, message):
    with pytest.raises(ValueError, match=message):
        read_upload(data, kind)


def test_too_large_is_refused_before_parsing(tmp_path):
    data = microdata_csv(rows=40)
    with pytest.raises(ValueError, match=rf"too large \({len(data)} bytes\); the limit is 100 bytes"):
        read_upload(data, "microdata_csv", max_bytes=100)
    # a seekable file tells its size before any byte is read
    with pytest.raises(ValueError, match=rf"too large \({len(data)} bytes\)"):
        read_upload(io.BytesIO(data), "microdata_csv", max_bytes=100)
    # a stream that cannot tell its size is read one byte past the limit, never more
    stream = OneWayStream(data)
    with pytest.raises(ValueError, match=r"too large \(more than 100 bytes\)"):
        read_upload(stream, "microdata_csv", max_bytes=100)
    assert stream.consumed == 101
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
    with pytest.raises(ValueError, match="exactly one .shp file; it holds none"):
        read_upload(zip_of({"readme.txt": b"hello"}), "shapefile_zip")


def test_zip_missing_prj_or_dbf(tmp_path):
    with pytest.raises(ValueError, match="no .prj file"):
        read_upload(shapefile_zip(tmp_path, squares(), drop=(".prj",)), "shapefile_zip")
    with pytest.raises(ValueError, match="missing its .dbf part \\(units.dbf\\)"):
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
    with pytest.raises(ValueError, match="exactly one .shp file; it holds 2"):
        read_upload(zip_of({"a.shp": b"x", "b.shp": b"y"}), "shapefile_zip")


# ----------------------------------------------------------------------------- hostile files
def _units_zip(tmp_path: Path, shp_payload: bytes | None = None) -> dict[str, bytes]:
    """The parts of a real three-square shapefile, the .shp optionally replaced."""
    squares().to_file(tmp_path / "units.shp")
    parts = {p.name: p.read_bytes() for p in sorted(tmp_path.glob("units.*"))}
    if shp_payload is not None:
        parts["units.shp"] = shp_payload
    return parts


def deflated_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return buffer.getvalue()


def refuse_inflating(monkeypatch) -> None:
    """Any attempt to open (inflate) a zip member fails the test."""
    def no_open(self, *args, **kwargs):
        raise AssertionError("a zip member was inflated before the archive was checked")
    monkeypatch.setattr(zipfile.ZipFile, "open", no_open)


def test_zip_bomb_is_refused_from_declared_sizes_before_extraction(tmp_path, monkeypatch):
    bomb = deflated_zip(_units_zip(tmp_path, shp_payload=bytes(40_000_000)))
    assert len(bomb) < 200_000  # 40 MB of zeros deflates to a few dozen kB
    refuse_inflating(monkeypatch)
    for kind in ("shapefile_zip", "block_shapefile_zip"):
        with pytest.raises(ValueError, match="would expand .* times .*zip bomb"):
            read_upload(bomb, kind)
    # the district maps page's block upload goes through the same reader
    from core.districts.uploads import read_block_shapefile
    with pytest.raises(ValueError, match="zip bomb"):
        read_block_shapefile(io.BytesIO(bomb))


def test_zip_whose_declared_total_exceeds_the_cap_is_refused_before_extraction(tmp_path, monkeypatch):
    # two-letter noise deflates about sevenfold: each member passes the ratio check, the total does not
    rng = np.random.default_rng(2)
    members = _units_zip(tmp_path)
    members.update({f"padding{i}.bin": rng.choice(np.frombuffer(b"ab", np.uint8), 300_000).tobytes()
                    for i in range(4)})
    archive = deflated_zip(members)
    assert len(archive) < 200_000
    refuse_inflating(monkeypatch)
    with pytest.raises(ValueError, match="expands to 1.2 MB, more than the 1.0 MB accepted"):
        read_upload(archive, "shapefile_zip", max_bytes=200_000)


def _lie_about_size(archive: bytes, member: str, declared: int) -> bytes:
    """Rewrite a member's uncompressed size in its local header and central directory entry."""
    import struct

    data = bytearray(archive)
    name = member.encode()
    local = data.find(b"PK\x03\x04")
    while local >= 0:
        name_len = struct.unpack_from("<H", data, local + 26)[0]
        if bytes(data[local + 30:local + 30 + name_len]) == name:
            struct.pack_into("<I", data, local + 22, declared)
        local = data.find(b"PK\x03\x04", local + 4)
    central = data.find(b"PK\x01\x02")
    while central >= 0:
        name_len = struct.unpack_from("<H", data, central + 28)[0]
        if bytes(data[central + 46:central + 46 + name_len]) == name:
            struct.pack_into("<I", data, central + 24, declared)
        central = data.find(b"PK\x01\x02", central + 4)
    return bytes(data)


def test_member_inflating_past_its_declared_size_is_stopped(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    payload = rng.integers(0, 256, 3_000_000, dtype=np.uint8).tobytes()  # does not compress
    archive = _lie_about_size(deflated_zip(_units_zip(tmp_path, shp_payload=payload)), "units.shp", 1_000)
    inflated: list[int] = []
    real_open = zipfile.ZipFile.open

    def counting_open(self, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        real_read = handle.read

        def read(n=-1):
            chunk = real_read(n)
            inflated.append(len(chunk))
            return chunk
        handle.read = read
        return handle
    monkeypatch.setattr(zipfile.ZipFile, "open", counting_open)
    with pytest.raises(ValueError, match="corrupted|declared size"):
        read_upload(archive, "shapefile_zip")
    assert sum(inflated) <= 1_000 + 1_000_000  # never much past the 1 kB it claimed


def test_zip_with_too_many_members_is_refused(monkeypatch):
    archive = zip_of({f"part{i}.txt": b"x" for i in range(100)})
    refuse_inflating(monkeypatch)
    with pytest.raises(ValueError, match="holds 100 entries; at most 64"):
        read_upload(archive, "shapefile_zip")


def test_million_column_header_is_refused_before_parsing(monkeypatch):
    import core.uploads

    header = ",".join(f"c{i}" for i in range(1_000_000))
    data = (header + "\n" + ",".join("1" for _ in range(1_000_000)) + "\n").encode()

    def no_parse(*args, **kwargs):
        raise AssertionError("pandas parsed a header that should have been refused")
    monkeypatch.setattr(core.uploads.pd, "read_csv", no_parse)
    for kind in ("microdata_csv", "counts_csv", "block_counts_csv", "assignment_csv"):
        with pytest.raises(ValueError, match="1,000,000 columns; at most 2,000"):
            read_upload(data, kind)


def test_duplicate_check_counts_names_once(monkeypatch):
    """Duplicates are found by one counting pass, not by list.count per name (quadratic)."""
    class NoCount(list):
        def count(self, value):
            raise AssertionError("list.count scans the header once per name")
    names = [f"c{i}" for i in range(1_999)] + ["c0"]
    import core.uploads
    real_reader = core.uploads.csv.reader
    monkeypatch.setattr(core.uploads.csv, "reader", lambda lines: (NoCount(r) for r in real_reader(lines)))
    with pytest.raises(ValueError, match=r"Duplicate column names \['c0'\]"):
        read_upload((",".join(names) + "\n" + "1," * 1_999 + "1\n").encode(), "microdata_csv")


def test_size_known_up_front_is_refused_without_reading():
    class Uploaded:
        size = 10_000_000

        def read(self, *args):
            raise AssertionError("read an upload already known to be too large")
    with pytest.raises(ValueError, match=r"too large \(10.0 MB\); the limit is 1.0 MB"):
        read_upload(Uploaded(), "microdata_csv", max_bytes=1_000_000)


NUMBER_CASES = [
    ("counts 1e20", b"GEOID,pop\n1,2\n2,1e20\n", "counts_csv", "impossible count \\('1e\\+20'\\) on line 3"),
    ("counts past int64", b"GEOID,pop\n1,2\n2,99999999999999999999999\n", "counts_csv", "impossible count"),
    ("counts NaN", b"GEOID,pop\n1,2\n2,NaN\n", "counts_csv", "blank on line 3"),
    ("block counts 1e20", b"GEOID,total,vap\n1,2,1\n2,1e20,1\n", "block_counts_csv", "impossible count"),
    ("block counts negative", b"geoid,TOTAL,vap\n1,-2,1\n", "block_counts_csv", "negative count"),
    ("microdata inf", b"a,b\n" + b"x,1\n" * 10 + b"x,inf\n", "microdata_csv", "'b' has an infinite value on line 12"),
    ("microdata NaN", b"a,b\n" + b"x,1\n" * 10 + b"x,\n", "microdata_csv", "'b' is blank or NaN on line 12"),
    ("microdata past int64", b"a,b\n" + b"x,1\n" * 10 + b"x,18446744073709551615\n", "microdata_csv",
     "'b' has a whole number beyond .* wrap"),
    ("microdata 1e300", b"a,b\n" + b"x,1\n" * 10 + b"x,1e300\n", "microdata_csv", "'b' has a value beyond"),
    ("json NaN", b'{"seed": NaN}', "json", "NaN, which is not a number"),
    ("json Infinity", b'{"epsilon": -Infinity}', "json", "-Infinity, which is not a number"),
    ("json 1e400", b'{"epsilon": 1e400}', "json", "too large to represent \\(1e400\\)"),
    ("json huge int", b'{"seed": 123456789012345678901234567890}', "json", "30 digits"),
    ("json past int64", b'{"seed": 9300000000000000000}', "json", "beyond \\+-9,223,372,036,854,775,807"),
    ("json deep", b"[" * 100_000 + b"]" * 100_000, "json", "nests more than 64 levels"),
    ("json not object", b"[1, 2]", "json", "holds a list, not an object"),
    ("geojson NaN", b'{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, '
                    b'"geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, NaN], [1, 0], [0, 0]]]}}]}',
     "geojson", "NaN, which is not a number"),
    ("assignment blank district", b"GEOID,district\n1,1\n2,\n", "assignment_csv", "district is empty on line 3"),
    ("assignment duplicate", b"GEOID,district\n1,1\n1,2\n", "assignment_csv", "GEOIDs \\['1'\\] appear more than once"),
    ("assignment columns", b"GEOID,plan\n1,1\n", "assignment_csv", "needs columns GEOID and district"),
]


@pytest.mark.parametrize("label,data,kind,message", NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES])
def test_numbers_that_would_wrap_get_named_errors(label, data, kind, message):
    test_bad_file_gets_a_specific_message(label, data, kind, message)


# ----------------------------------------------------------------------------- the other kinds
def test_block_files_and_assignment_and_json_and_session(tmp_path):
    blocks = squares().rename(columns={"GEOID": "GEOID20"})
    gdf = read_upload(shapefile_zip(tmp_path, blocks), "block_shapefile_zip")
    assert list(gdf.columns) == ["GEOID", "geometry"] and gdf.crs.to_epsg() == 4326
    counts = read_upload(b"Geoid,Total,VAP,black\n01,10,8,2\n02,0,0,0\n", "block_counts_csv")
    assert counts.columns.tolist() == ["GEOID", "total", "vap", "black"]
    assert counts["GEOID"].tolist() == ["01", "02"] and counts["total"].dtype == "int64"
    plan = read_upload(b"GEOID,district\n01, 3\n02,A\n", "assignment_csv")
    assert plan.to_dict("list") == {"GEOID": ["01", "02"], "district": ["3", "A"]}
    assert read_upload(b'{"schema": 2, "seed": 7, "epsilon": 0.5}', "json") == {
        "schema": 2, "seed": 7, "epsilon": 0.5}
    assert read_upload("# {}\na,b\n".encode(), "session") == "# {}\na,b\n"


@pytest.mark.parametrize("name", ["![x](https://example.invalid/p.png)", "<img src=x>", "a`b", "zero\u200bwidth",
                                  "rtl\u202eoverride"])
def test_column_names_that_could_act_as_markup_or_hide_are_refused(name):
    """Upload headers reach captions and error messages; an image link there would be fetched."""
    rows = "\n".join(f"{i % 3},{i % 2}" for i in range(20))
    text = f'"{name}",b\n{rows}\n'
    with pytest.raises(ValueError, match="plain names"):
        read_upload(text.encode(), "microdata_csv")


@pytest.mark.parametrize("crs", [[1, 2], "EPSG:4326", {"properties": []}, {"properties": {"name": 7}}])
def test_geojson_with_a_malformed_crs_member_is_a_value_error(crs):
    """The legacy ``crs`` member is a dict with a name in its properties; a list (or any other shape)
    used to escape as AttributeError."""
    import json

    doc = {"type": "FeatureCollection", "crs": crs, "features": [
        {"type": "Feature", "properties": {"GEOID": "1"},
         "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}}]}
    with pytest.raises(ValueError, match="crs"):
        read_upload(json.dumps(doc).encode(), "geojson")
