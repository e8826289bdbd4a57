"""Validation of user-uploaded tables and boundaries; every problem becomes a ValueError saying what to fix.

Accepted inputs are bytes, a path, or any file-like object with .read() (a Streamlit UploadedFile
included). Nothing is ever unpickled or evaluated; zip members are extracted by base name only.
"""

from __future__ import annotations

import io
import json
import tempfile
import warnings
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Iterable

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
UPLOAD_KINDS = ("microdata_csv", "counts_csv", "geojson", "shapefile_zip")
MIN_MICRODATA_ROWS = 10
MIN_MICRODATA_COLUMNS = 2
# A zip may expand to at most this multiple of the byte limit (guards against zip bombs).
MAX_ZIP_EXPANSION = 5
# Largest count accepted: whole numbers stay exact in float64 far beyond any population.
MAX_COUNT = 10**12
OTHER_DELIMITERS = {";": "semicolon", "\t": "tab", "|": "pipe"}
POLYGON_TYPES = {"Polygon", "MultiPolygon"}


def _read_bytes(file: bytes | bytearray | str | Path | BinaryIO, max_bytes: int) -> bytes:
    """Bytes of the upload, refusing empty and oversized input before reading more than needed."""
    if isinstance(file, (bytes, bytearray, memoryview)):
        data = bytes(file)
    elif isinstance(file, (str, Path)):
        path = Path(file)
        if not path.is_file():
            raise ValueError(f"File not found: {path}")
        size = path.stat().st_size
        if size > max_bytes:
            raise ValueError(_too_large(size, max_bytes))
        data = path.read_bytes()
    elif hasattr(file, "read"):
        if hasattr(file, "seek"):
            file.seek(0)
        data = file.read(max_bytes + 1)
        if isinstance(data, str):
            data = data.encode("utf-8")
    else:
        raise ValueError(f"Cannot read an upload of type {type(file).__name__}; pass bytes, a path or a file")
    if len(data) == 0:
        raise ValueError("The file is empty (0 bytes); choose a file with content.")
    if len(data) > max_bytes:
        raise ValueError(_too_large(len(data), max_bytes))
    return data


def _human_size(n: int) -> str:
    if n < 1_000:
        return f"{n} bytes"
    return f"{n / 1e3:.1f} kB" if n < 1_000_000 else f"{n / 1e6:.1f} MB"


def _too_large(size: int, max_bytes: int) -> str:
    # A file-like upload is read only up to one byte past the limit, so its size is a lower bound.
    shown = f"more than {_human_size(max_bytes)}" if size == max_bytes + 1 else _human_size(size)
    return (f"The file is too large ({shown}); the limit is {_human_size(max_bytes)}. "
            "Upload a smaller extract.")


def _decode_text(data: bytes) -> str:
    """UTF-8 text of the upload (a BOM is allowed); binary or other encodings are refused."""
    if b"\x00" in data[:65536]:
        raise ValueError("The file looks binary (it contains NUL bytes), not a UTF-8 text file. "
                         "Export it as CSV/GeoJSON text; Excel workbooks and archives are not accepted here.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"The file is not valid UTF-8 text (bad byte at position {err.start}). "
                         "Re-save it with UTF-8 encoding.") from None


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")


def _parse_csv(text: str, dtype: dict[str, Any] | None = None) -> pd.DataFrame:
    """Comma-separated table with a header row; other separators are reported by name."""
    if not text.strip():
        raise ValueError("The file contains only blank lines; it needs a header row and data rows.")
    header = _first_line(text)
    if "," not in header:
        for sep, name in OTHER_DELIMITERS.items():
            if sep in header:
                raise ValueError(f"The file seems to use a {name} ({sep!r}) as separator; "
                                 "save it as comma-separated CSV.")
    try:
        # index_col=False: without it pandas silently turns the first field into a row index when the
        # first data row is longer than the header, shifting every value one column to the right.
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(io.StringIO(text), dtype=dtype, skipinitialspace=True, index_col=False)
    except pd.errors.ParserWarning:
        raise ValueError("The first data row has more comma-separated fields than the header; every row "
                         "needs the same number of fields as the header.") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"The CSV could not be parsed: {str(err).strip()}. Check that every row has the same "
                         "number of comma-separated fields.") from None
    except pd.errors.EmptyDataError:
        raise ValueError("The CSV has no columns; it needs a header row.") from None
    names = [str(c).strip() for c in frame.columns]
    raw_names = [n.strip() for n in header.split(",")]
    duplicates = sorted({n for n in raw_names if raw_names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Duplicate column names {duplicates}; give every column a distinct name.")
    unnamed = [i + 1 for i, n in enumerate(raw_names) if n == ""]
    if unnamed:
        raise ValueError(f"Column(s) {unnamed} have an empty header; name every column.")
    frame.columns = names
    return frame


def _require_columns(frame: pd.DataFrame, required: Iterable[str] | None) -> None:
    missing = [c for c in (required or []) if c not in frame.columns]
    if missing:
        raise ValueError(f"Missing required column(s) {missing}; the file has {list(frame.columns)}.")


def _microdata(text: str, required: Iterable[str] | None) -> pd.DataFrame:
    """Any table with at least two columns and ten rows; text columns become categories."""
    frame = _parse_csv(text)
    if frame.shape[1] < MIN_MICRODATA_COLUMNS:
        raise ValueError(f"Microdata needs at least {MIN_MICRODATA_COLUMNS} columns; "
                         f"the file has {frame.shape[1]} ({list(frame.columns)}).")
    if len(frame) < MIN_MICRODATA_ROWS:
        raise ValueError(f"Microdata needs at least {MIN_MICRODATA_ROWS} rows; the file has {len(frame)}.")
    _require_columns(frame, required)
    for col in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = frame[col].astype(str).str.strip().astype("category")
    return frame


def _counts(text: str, required: Iterable[str] | None) -> pd.DataFrame:
    """Table keyed by unique GEOID whose other columns are non-negative whole-number counts."""
    frame = _parse_csv(text, dtype={"GEOID": str})
    if "GEOID" not in frame.columns:
        raise ValueError(f"A counts table needs a GEOID column (unit identifiers); the file has "
                         f"{list(frame.columns)}.")
    _require_columns(frame, required)
    count_columns = list(required) if required else [c for c in frame.columns if c != "GEOID"]
    if not count_columns:
        raise ValueError("A counts table needs at least one count column besides GEOID.")
    geoid = frame["GEOID"].astype("string").str.strip()
    if geoid.isna().any() or (geoid == "").any():
        row = int(np.flatnonzero((geoid.isna() | (geoid == "")).to_numpy())[0]) + 2
        raise ValueError(f"GEOID is empty on line {row}; every row needs an identifier.")
    duplicated = geoid[geoid.duplicated(keep=False)]
    if len(duplicated):
        examples = sorted(duplicated.unique())[:5]
        raise ValueError(f"Duplicate GEOIDs {examples}; each unit must appear on one row only.")
    out = pd.DataFrame({"GEOID": geoid.astype(str).to_numpy()})
    for col in count_columns:
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = values.isna() & frame[col].notna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"Column {col!r} has a non-numeric value {str(frame[col].iloc[i])!r} on line {i + 2}; "
                             "counts must be numbers.")
        if values.isna().any():
            i = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise ValueError(f"Column {col!r} is blank on line {i + 2}; fill in every count (0 if none).")
        if not np.isfinite(values).all() or (values.abs() > MAX_COUNT).any():
            i = int(np.flatnonzero((~np.isfinite(values) | (values.abs() > MAX_COUNT)).to_numpy())[0])
            raise ValueError(f"Column {col!r} has an impossible count ({str(frame[col].iloc[i])!r}) on line {i + 2}; "
                             f"counts must be finite and at most {MAX_COUNT:,}.")
        if (values < 0).any():
            i = int(np.flatnonzero((values < 0).to_numpy())[0])
            raise ValueError(f"Column {col!r} has a negative count ({values.iloc[i]:g}) on line {i + 2}; "
                             "counts must be 0 or more.")
        if (values != np.round(values)).any():
            i = int(np.flatnonzero((values != np.round(values)).to_numpy())[0])
            raise ValueError(f"Column {col!r} has a fractional count ({values.iloc[i]:g}) on line {i + 2}; "
                             "counts must be whole numbers.")
        out[col] = values.astype("int64").to_numpy()
    extra = [c for c in frame.columns if c not in out.columns]
    for col in extra:
        out[col] = frame[col].to_numpy()
    return out


def _polygons_in_wgs84(gdf: gpd.GeoDataFrame, source: str) -> gpd.GeoDataFrame:
    """Check geometries are present and polygonal, then return the frame in EPSG:4326."""
    if len(gdf) == 0:
        raise ValueError(f"The {source} has no features.")
    missing = gdf.geometry.isna() | gdf.geometry.is_empty
    if missing.any():
        raise ValueError(f"Feature {int(np.flatnonzero(missing.to_numpy())[0]) + 1} of the {source} has "
                         "no geometry; every feature needs a polygon.")
    kinds = set(gdf.geom_type)
    if not kinds <= POLYGON_TYPES:
        raise ValueError(f"The {source} contains {sorted(kinds - POLYGON_TYPES)} geometries; only "
                         "Polygon and MultiPolygon areas are accepted.")
    if gdf.crs is None:
        raise ValueError(f"The {source} has no coordinate reference system; add one (EPSG:4326 lon/lat).")
    if not gdf.crs.equals("EPSG:4326"):
        try:
            gdf = gdf.to_crs(4326)
        except Exception as err:  # pyproj raises several types for unusable CRSs
            raise ValueError(f"The {source}'s CRS ({gdf.crs}) cannot be converted to EPSG:4326: {err}") from None
    minx, miny, maxx, maxy = gdf.total_bounds
    if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
        raise ValueError(f"The {source} has coordinates outside longitude/latitude range "
                         f"(bounds {minx:.0f}, {miny:.0f}, {maxx:.0f}, {maxy:.0f}); they look projected "
                         "(metres). Reproject to EPSG:4326 or declare the CRS.")
    invalid = ~gdf.is_valid
    if invalid.any():
        repaired = shapely.make_valid(gdf.geometry.values[invalid.to_numpy()])
        gdf.loc[invalid, "geometry"] = repaired
        if not set(gdf.geom_type) <= POLYGON_TYPES:
            raise ValueError(f"Feature {int(np.flatnonzero(invalid.to_numpy())[0]) + 1} has an invalid "
                             "polygon that cannot be repaired; fix its boundary.")
    return gdf


def _geojson(text: str, required: Iterable[str] | None) -> gpd.GeoDataFrame:
    """GeoJSON FeatureCollection of polygons; a legacy 'crs' member is honoured and converted."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"The file is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}).") from None
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        found = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"GeoJSON must be a FeatureCollection; found {found!r}.")
    features = doc.get("features")
    if not isinstance(features, list) or not features:
        raise ValueError("The GeoJSON FeatureCollection has no features.")
    for i, feature in enumerate(features):
        if not isinstance(feature, dict) or not feature.get("geometry"):
            raise ValueError(f"Feature {i + 1} of the GeoJSON has no geometry; every feature needs a polygon.")
    crs = "EPSG:4326"
    named = ((doc.get("crs") or {}).get("properties") or {}).get("name")
    if named:
        crs = named
    try:
        gdf = gpd.GeoDataFrame.from_features(features, crs=crs)
    except Exception as err:  # malformed coordinates raise from shapely with varied types
        raise ValueError(f"The GeoJSON geometries could not be read: {err}") from None
    _require_columns(gdf, required)
    return _polygons_in_wgs84(gdf, "GeoJSON")


def _safe_member_names(archive: zipfile.ZipFile) -> list[str]:
    """Member names, refusing absolute paths and parent-directory escapes (zip-slip)."""
    names = []
    for info in archive.infolist():
        parts = PurePosixPath(info.filename.replace("\\", "/"))
        if parts.is_absolute() or ".." in parts.parts or ":" in info.filename:
            raise ValueError(f"The zip contains an unsafe path {info.filename!r}; rebuild it with plain file names.")
        if not info.is_dir():
            names.append(info.filename)
    return names


def _shapefile_zip(data: bytes, required: Iterable[str] | None, max_bytes: int) -> gpd.GeoDataFrame:
    """Zipped shapefile (.shp, .shx, .dbf and .prj required) read via pyogrio from a temp dir."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ValueError("The file is not a valid zip archive (corrupted or another format).") from None
    with archive:
        names = _safe_member_names(archive)
        expanded = sum(info.file_size for info in archive.infolist())
        if expanded > MAX_ZIP_EXPANSION * max_bytes:
            raise ValueError(f"The zip expands to {expanded / 1e6:.0f} MB, too large to process.")
        shps = [n for n in names if n.lower().endswith(".shp") and not PurePosixPath(n).name.startswith("._")]
        if not shps:
            raise ValueError(f"The zip has no .shp file (it holds {names[:8]}); zip the .shp, .shx, .dbf and .prj.")
        if len(shps) > 1:
            raise ValueError(f"The zip holds {len(shps)} shapefiles {shps}; upload one at a time.")
        stem = shps[0][:-4]
        by_lower = {n.lower(): n for n in names}
        members = {}
        for ext in (".shp", ".shx", ".dbf", ".prj", ".cpg"):
            member = by_lower.get((stem + ext).lower())
            if member is None and ext in (".shx", ".dbf"):
                raise ValueError(f"The zip is missing {PurePosixPath(stem).name}{ext}; a shapefile needs "
                                 ".shp, .shx and .dbf together.")
            if member is None and ext == ".prj":
                raise ValueError("The zip has no .prj file, so the coordinate system is unknown; "
                                 "include the .prj written with the shapefile.")
            if member is not None:
                members[ext] = member
        with tempfile.TemporaryDirectory() as tmp:
            for ext, member in members.items():
                try:
                    payload = archive.read(member)
                except (zipfile.BadZipFile, OSError, EOFError) as err:
                    raise ValueError(f"The zip is corrupted ({member}: {err}).") from None
                (Path(tmp) / f"upload{ext}").write_bytes(payload)
            try:
                gdf = gpd.read_file(Path(tmp) / "upload.shp")
            except Exception as err:  # pyogrio raises DataSourceError and friends
                raise ValueError(f"The shapefile could not be read: {err}") from None
    _require_columns(gdf, required)
    return _polygons_in_wgs84(gdf, "shapefile")


def read_upload(
    file: bytes | str | Path | BinaryIO,
    kind: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    required_columns: Iterable[str] | None = None,
) -> pd.DataFrame | gpd.GeoDataFrame:
    """Read and validate an uploaded file of one kind (see UPLOAD_KINDS).

    microdata_csv -> DataFrame (>= 2 columns, >= 10 rows); counts_csv -> DataFrame with str GEOID
    and int64 counts (all non-GEOID columns, or just `required_columns`); geojson / shapefile_zip ->
    GeoDataFrame of polygons in EPSG:4326. Raises ValueError explaining what to change.
    """
    if kind not in UPLOAD_KINDS:
        raise ValueError(f"Unknown upload kind {kind!r}; use one of {list(UPLOAD_KINDS)}.")
    required = list(required_columns) if required_columns is not None else None
    data = _read_bytes(file, max_bytes)
    if kind == "shapefile_zip":
        return _shapefile_zip(data, required, max_bytes)
    text = _decode_text(data)
    if kind == "microdata_csv":
        return _microdata(text, required)
    if kind == "counts_csv":
        return _counts(text, required)
    return _geojson(text, required)
