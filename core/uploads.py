"""Every upload the dashboard accepts goes through this one reader; each problem is a ValueError
saying what to change.

Inputs are bytes, a path, or a file-like object with ``.read()`` (a Streamlit UploadedFile
included). The checks run cheapest first and stay linear in the size of the file:

1. size: refused before reading when the size is known (path, ``.size``, seekable file), and
   never more than ``max_bytes + 1`` bytes are read otherwise;
2. zips: member count, every member's declared size and compression ratio, and the declared
   total are checked from the central directory before anything is extracted; extraction then
   streams each member to disk and stops as soon as more bytes come out than were declared;
3. CSV headers: the column count is capped and duplicates found with one counting pass before
   pandas sees the text;
4. numbers: NaN, infinities and values that would wrap a 64-bit integer are refused by name.

Nothing is ever unpickled, evaluated or executed; zip members are extracted by base name only.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import tempfile
import warnings
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Iterable

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

__all__ = [
    "CONTROL_CHARACTERS", "DEFAULT_MAX_BYTES", "HIDDEN_CHARACTERS", "MARKUP_CHARACTERS", "MAX_COLUMNS",
    "MAX_COUNT", "MAX_EXPANDED_BYTES", "MAX_ZIP_MEMBERS",
    "MAX_ZIP_RATIO", "UPLOAD_KINDS", "parse_json_text", "read_bytes", "read_json", "read_text",
    "read_upload",
]

DEFAULT_MAX_BYTES = 200 * 1024 * 1024          # Streamlit's own upload limit (server.maxUploadSize)
MIN_MICRODATA_ROWS = 10
MIN_MICRODATA_COLUMNS = 2
# Widest CSV accepted; a PL 94-171 segment has a few hundred fields, microdata a few dozen.
MAX_COLUMNS = 2_000
# Characters that would let a column name act as a link, image, HTML or code span when shown (markup), or
# hide itself or reorder the text around it (zero-width, direction marks and overrides, byte-order marks,
# soft hyphens), and control characters; as regular-expression class bodies, shared with core.intake.names.
MARKUP_CHARACTERS = r"\[\]<>`"
HIDDEN_CHARACTERS = "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
CONTROL_CHARACTERS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_ACTIVE_IN_NAMES = re.compile(f"[{MARKUP_CHARACTERS}{HIDDEN_CHARACTERS}{CONTROL_CHARACTERS}]")
# Zips: at most this many members, each expanding at most MAX_ZIP_RATIO times its compressed size,
# and all of them together at most MAX_EXPANDED_BYTES (checked on the declared sizes, then enforced
# on the bytes actually inflated).
MAX_ZIP_MEMBERS = 64
MAX_ZIP_RATIO = 200
MAX_EXPANDED_BYTES = 1_000_000_000
# Largest count accepted: whole numbers stay exact in float64 far beyond any population.
MAX_COUNT = 10**12
# Largest magnitude of a number in microdata or JSON: beyond 2**53 floats skip integers, and
# beyond 2**63 an int64 wraps around to a negative value.
MAX_EXACT = 2**53
MAX_INT64 = 2**63 - 1
MAX_JSON_DEPTH = 64
OTHER_DELIMITERS = {";": "semicolon", "\t": "tab", "|": "pipe"}
POLYGON_TYPES = {"Polygon", "MultiPolygon"}
BLOCK_ID_COLUMNS = ("GEOID", "GEOID20", "GEOID10", "BLOCKID10", "BLOCKID20")
BLOCK_COUNT_COLUMNS = ("total", "vap", "black", "bvap")
SHAPEFILE_PARTS = (".shp", ".shx", ".dbf", ".prj", ".cpg")
COPY_CHUNK = 1 << 20

UPLOAD_KINDS = (
    "microdata_csv",        # people x attributes -> DataFrame, text columns categorical
    "counts_csv",           # GEOID + whole-number counts -> DataFrame
    "geojson",              # FeatureCollection of polygons -> GeoDataFrame in EPSG:4326
    "shapefile_zip",        # zipped .shp/.shx/.dbf/.prj -> GeoDataFrame in EPSG:4326
    "block_shapefile_zip",  # zipped TIGER/Line blocks -> GeoDataFrame (GEOID, geometry)
    "block_counts_csv",     # PL 94-171 style GEOID, total, vap[, black, bvap] -> DataFrame
    "assignment_csv",       # block-assignment plan GEOID, district -> DataFrame of str
    "json",                 # a saved report, plan, allocation or session -> dict
    "session",              # a session export (JSON or the CSV with a settings line) -> str
)


# ------------------------------------------------------------------------------ bytes and text
def _known_size(file: Any) -> int | None:
    """Size of a file-like object without reading it, when it can be told."""
    size = getattr(file, "size", None)
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        return int(size)
    if hasattr(file, "seek") and hasattr(file, "tell"):
        try:
            file.seek(0, io.SEEK_END)
            size = file.tell()
            file.seek(0)
            return int(size)
        except (OSError, ValueError):
            return None
    return None


def read_bytes(file: bytes | bytearray | str | Path | BinaryIO, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Bytes of the upload, refusing empty and oversized input before reading more than needed."""
    if isinstance(file, (bytes, bytearray, memoryview)):
        if len(file) > max_bytes:
            raise ValueError(_too_large(len(file), max_bytes))
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
        size = _known_size(file)
        if size is not None and size > max_bytes:
            raise ValueError(_too_large(size, max_bytes))
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
    if n < 1_000_000:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.1f} MB" if n < 1_000_000_000 else f"{n / 1e9:.1f} GB"


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


def read_text(file: bytes | str | Path | BinaryIO, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """UTF-8 text of an upload, after the size, binary and encoding checks."""
    return _decode_text(read_bytes(file, max_bytes))


# ------------------------------------------------------------------------------ JSON
def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"The JSON has a number too large to represent ({text}); numbers must be finite.")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise ValueError(f"The JSON has a whole number with {len(text.lstrip('-'))} digits; "
                         f"whole numbers must lie within +-{MAX_INT64:,} (64 bits).")
    value = int(text)
    if abs(value) > MAX_INT64:
        raise ValueError(f"The JSON has the whole number {text}, beyond +-{MAX_INT64:,} (64 bits).")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"The JSON holds {name}, which is not a number; numbers must be finite.")


def _depth_ok(text: str) -> None:
    """Refuse nesting deeper than MAX_JSON_DEPTH in one linear pass (brackets outside strings)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"The JSON nests more than {MAX_JSON_DEPTH} levels deep; "
                                 "this is not a file the dashboard wrote.")
        elif ch in "]}":
            depth -= 1


def parse_json_text(text: str) -> Any:
    """JSON value of text, refusing NaN/Infinity, overflowing numbers and runaway nesting."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        _depth_ok(text)
    try:
        return json.loads(text, parse_float=_finite_float, parse_int=_bounded_int,
                          parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise ValueError(f"The file is not valid JSON ({err.msg} at line {err.lineno}, "
                         f"column {err.colno}).") from None
    except RecursionError:
        raise ValueError("The JSON nests too deeply; this is not a file the dashboard wrote.") from None


def read_json(file: bytes | str | Path | BinaryIO, max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """A JSON object (a saved report, plan, allocation or session) from an upload."""
    doc = parse_json_text(read_text(file, max_bytes))
    if not isinstance(doc, dict):
        raise ValueError(f"The JSON file holds a {type(doc).__name__}, not an object; "
                         "load a file exported by the dashboard.")
    return doc


# ------------------------------------------------------------------------------ CSV
def _first_line(text: str) -> str:
    """The first non-blank line, found without splitting the whole text."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end].rstrip("\r")
        if line.strip():
            return line
        start = end + 1
    return ""


def _header_names(header: str) -> list[str]:
    """Column names of the header line, refusing too many, empty or repeated names (linear)."""
    if header.count(",") + 1 > MAX_COLUMNS * 2:   # cheap bound before any parsing of a huge header
        raise ValueError(f"The header has {header.count(',') + 1:,} columns; at most {MAX_COLUMNS:,} "
                         "are accepted. Keep only the columns the tool needs.")
    names = [n.strip() for n in next(csv.reader([header]), [])]
    if len(names) > MAX_COLUMNS:
        raise ValueError(f"The header has {len(names):,} columns; at most {MAX_COLUMNS:,} are accepted. "
                         "Keep only the columns the tool needs.")
    while len(names) > 1 and names[-1] == "":   # trailing commas name no column
        names.pop()
    unnamed = [i + 1 for i, n in enumerate(names) if n == ""]
    if unnamed:
        raise ValueError(f"Column(s) {unnamed[:10]} have an empty header; name every column.")
    duplicates = sorted(n for n, k in Counter(names).items() if k > 1)
    if duplicates:
        raise ValueError(f"Duplicate column names {duplicates[:10]}; give every column a distinct name.")
    active = [i + 1 for i, n in enumerate(names) if _ACTIVE_IN_NAMES.search(n)]
    if active:  # names reach captions and messages; links, images and markup must not ride along
        raise ValueError(f"Column(s) {active[:10]} have a name with brackets, angle brackets, backticks or "
                         "invisible characters; use plain names (letters, digits, spaces, - _ . % / ( )).")
    return names


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
    names = _header_names(header)
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
    frame = frame.iloc[:, :len(names)]
    frame.columns = names
    return frame


def _require_columns(frame: pd.DataFrame, required: Iterable[str] | None) -> None:
    missing = [c for c in (required or []) if c not in frame.columns]
    if missing:
        raise ValueError(f"Missing required column(s) {missing}; the file has {list(frame.columns)[:20]}.")


def _first_line_of(mask: pd.Series | np.ndarray) -> int:
    """CSV line number (header is line 1) of the first True in a row mask."""
    return int(np.flatnonzero(np.asarray(mask))[0]) + 2


def _check_numeric_column(frame: pd.DataFrame, col: str) -> None:
    """A numeric microdata column holds finite values that fit exactly in int64/float64."""
    values = frame[col]
    if values.dtype == np.uint64:
        raise ValueError(f"Column {col!r} has a whole number beyond {MAX_EXACT:,} on line "
                         f"{_first_line_of(values > MAX_EXACT)}; it would wrap around. Use smaller values.")
    as_float = values.to_numpy(dtype="float64", na_value=np.nan)
    if np.isnan(as_float).any():
        raise ValueError(f"Column {col!r} is blank or NaN on line {_first_line_of(np.isnan(as_float))}; "
                         "fill in every value or drop the row.")
    if np.isinf(as_float).any():
        raise ValueError(f"Column {col!r} has an infinite value on line {_first_line_of(np.isinf(as_float))}; "
                         "values must be finite.")
    too_big = np.abs(as_float) > MAX_EXACT
    if too_big.any():
        raise ValueError(f"Column {col!r} has a value beyond {MAX_EXACT:,} in size on line "
                         f"{_first_line_of(too_big)}; such numbers lose precision or wrap around.")


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
        if pd.api.types.is_bool_dtype(frame[col]) or not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = frame[col].astype(str).str.strip().astype("category")
        else:
            _check_numeric_column(frame, col)
    return frame


def _whole_counts(values: pd.Series, raw: pd.Series, col: str) -> np.ndarray:
    """int64 counts of one column: numeric, filled, finite, at most MAX_COUNT, >= 0 and whole."""
    bad = values.isna() & raw.notna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"Column {col!r} has a non-numeric value {str(raw.iloc[i])!r} on line {i + 2}; "
                         "counts must be numbers.")
    if values.isna().any():
        raise ValueError(f"Column {col!r} is blank on line {_first_line_of(values.isna())}; "
                         "fill in every count (0 if none).")
    as_float = values.to_numpy(dtype="float64")
    impossible = ~np.isfinite(as_float) | (np.abs(as_float) > MAX_COUNT)
    if impossible.any():
        i = int(np.flatnonzero(impossible)[0])
        raise ValueError(f"Column {col!r} has an impossible count ({str(raw.iloc[i])!r}) on line {i + 2}; "
                         f"counts must be finite and at most {MAX_COUNT:,}.")
    if (as_float < 0).any():
        i = int(np.flatnonzero(as_float < 0)[0])
        raise ValueError(f"Column {col!r} has a negative count ({as_float[i]:g}) on line {i + 2}; "
                         "counts must be 0 or more (no negative counts).")
    if (as_float != np.round(as_float)).any():
        i = int(np.flatnonzero(as_float != np.round(as_float))[0])
        raise ValueError(f"Column {col!r} has a fractional count ({as_float[i]:g}) on line {i + 2}; "
                         "counts must be whole numbers.")
    return as_float.astype("int64")


def _with_rows(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """Refuse a table that has a header and no data rows (an export cut short, a wrong filter)."""
    if len(frame) == 0:
        raise ValueError(f"The {what} has a header but no rows; export it again with its data.")
    return frame


def _unique_ids(ids: pd.Series, name: str) -> pd.Series:
    """Stripped identifiers, refusing blanks and repeats."""
    ids = ids.astype("string").str.strip()
    empty = ids.isna() | (ids == "")
    if empty.any():
        raise ValueError(f"{name} is empty on line {_first_line_of(empty)}; every row needs an identifier.")
    duplicated = ids[ids.duplicated(keep=False)]
    if len(duplicated):
        examples = sorted(duplicated.unique())[:5]
        raise ValueError(f"{name}s {examples} appear more than once; each unit must appear on one row only.")
    return ids.astype(str)


def _counts(text: str, required: Iterable[str] | None) -> pd.DataFrame:
    """Table keyed by unique GEOID whose other columns are non-negative whole-number counts."""
    frame = _with_rows(_parse_csv(text, dtype={"GEOID": str}), "counts CSV")
    if "GEOID" not in frame.columns:
        raise ValueError(f"A counts table needs a GEOID column (unit identifiers); the file has "
                         f"{list(frame.columns)[:20]}.")
    _require_columns(frame, required)
    count_columns = list(required) if required else [c for c in frame.columns if c != "GEOID"]
    if not count_columns:
        raise ValueError("A counts table needs at least one count column besides GEOID.")
    out = pd.DataFrame({"GEOID": _unique_ids(frame["GEOID"], "GEOID").to_numpy()})
    for col in count_columns:
        out[col] = _whole_counts(pd.to_numeric(frame[col], errors="coerce"), frame[col], col)
    for col in (c for c in frame.columns if c not in out.columns):
        out[col] = frame[col].to_numpy()
    return out


def _block_counts(text: str) -> pd.DataFrame:
    """PL 94-171 style block table: GEOID, total, vap and optional black, bvap (any letter case)."""
    header = {n.lower(): n for n in _header_names(_first_line(text))}
    if "geoid" not in header:
        raise ValueError(f"The counts CSV needs a GEOID column; it has {list(header.values())[:20]}.")
    for need in ("total", "vap"):
        if need not in header:
            raise ValueError(f"The counts CSV needs a '{need}' column (total population and "
                             "voting-age population).")
    frame = _with_rows(_parse_csv(text, dtype={header["geoid"]: str}), "counts CSV")
    frame = frame.rename(columns={header["geoid"]: "GEOID"}
                         | {header[c]: c for c in BLOCK_COUNT_COLUMNS if c in header})
    out = pd.DataFrame({"GEOID": _unique_ids(frame["GEOID"], "GEOID").to_numpy()})
    for col in (c for c in BLOCK_COUNT_COLUMNS if c in frame.columns):
        out[col] = _whole_counts(pd.to_numeric(frame[col], errors="coerce"), frame[col], col)
    return out


def _assignment(text: str) -> pd.DataFrame:
    """Block-assignment plan: one row per GEOID with its district label, both as text."""
    header = {n.lower(): n for n in _header_names(_first_line(text))}
    if "geoid" not in header or "district" not in header:
        raise ValueError(f"The plan CSV needs columns GEOID and district; it has {list(header.values())[:20]}.")
    frame = _with_rows(_parse_csv(text, dtype=str), "plan CSV")
    district = frame[header["district"]].astype("string").str.strip()
    blank = district.isna() | (district == "")
    if blank.any():
        raise ValueError(f"The district is empty on line {_first_line_of(blank)}; assign every block.")
    return pd.DataFrame({"GEOID": _unique_ids(frame[header["geoid"]], "GEOID").to_numpy(),
                         "district": district.astype(str).to_numpy()})


# ------------------------------------------------------------------------------ geometry
def _polygons_in_wgs84(gdf: gpd.GeoDataFrame, source: str) -> gpd.GeoDataFrame:
    """Check geometries are present and polygonal, then return the frame in EPSG:4326."""
    if len(gdf) == 0:
        raise ValueError(f"The {source} has no features.")
    missing = gdf.geometry.isna() | gdf.geometry.is_empty
    if missing.any():
        raise ValueError(f"{int(missing.sum())} feature(s) of the {source} have no geometry (first: feature "
                         f"{int(np.flatnonzero(missing.to_numpy())[0]) + 1}); every feature needs a polygon.")
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
    if not np.isfinite([minx, miny, maxx, maxy]).all():
        raise ValueError(f"The {source} has coordinates that are not finite numbers; fix its geometry.")
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


def _legacy_crs(member) -> str:
    """The CRS a GeoJSON's legacy ``crs`` member names (``{"properties": {"name": ...}}``), else WGS84."""
    if member is None:
        return "EPSG:4326"
    properties = member.get("properties") if isinstance(member, dict) else None
    name = properties.get("name") if isinstance(properties, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise ValueError("The GeoJSON's 'crs' member must look like {\"type\": \"name\", \"properties\": "
                         "{\"name\": \"EPSG:...\"}}; remove it for longitude/latitude (WGS84) coordinates.")
    return name


def _geojson(text: str, required: Iterable[str] | None) -> gpd.GeoDataFrame:
    """GeoJSON FeatureCollection of polygons; a legacy 'crs' member is honoured and converted."""
    doc = parse_json_text(text)
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        found = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"GeoJSON must be a FeatureCollection; found {found!r}.")
    features = doc.get("features")
    if not isinstance(features, list) or not features:
        raise ValueError("The GeoJSON FeatureCollection has no features.")
    for i, feature in enumerate(features):
        if not isinstance(feature, dict) or not feature.get("geometry"):
            raise ValueError(f"Feature {i + 1} of the GeoJSON has no geometry; every feature needs a polygon.")
    crs = _legacy_crs(doc.get("crs"))
    try:
        gdf = gpd.GeoDataFrame.from_features(features, crs=crs)
    except Exception as err:  # malformed coordinates raise from shapely with varied types
        raise ValueError(f"The GeoJSON geometries could not be read: {err}") from None
    _require_columns(gdf, required)
    return _polygons_in_wgs84(gdf, "GeoJSON")


# ------------------------------------------------------------------------------ zips
def _checked_members(archive: zipfile.ZipFile, max_expanded: int) -> list[zipfile.ZipInfo]:
    """File members after checking, from the central directory alone (nothing is inflated yet):
    safe names, member count, each member's declared size and ratio, and the declared total."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_MEMBERS:
        raise ValueError(f"The zip holds {len(infos):,} entries; at most {MAX_ZIP_MEMBERS} are accepted. "
                         "Zip only the shapefile's parts.")
    total = 0
    for info in infos:
        parts = PurePosixPath(info.filename.replace("\\", "/"))
        if parts.is_absolute() or ".." in parts.parts or ":" in info.filename:
            raise ValueError(f"The zip contains an unsafe path {info.filename!r}; rebuild it with plain file names.")
        if info.flag_bits & 0x1:
            raise ValueError(f"The zip member {info.filename!r} is encrypted; zip the files without a password.")
        ratio = info.file_size / max(info.compress_size, 1)
        if ratio > MAX_ZIP_RATIO and info.file_size > COPY_CHUNK:
            raise ValueError(f"The zip member {info.filename!r} would expand {ratio:,.0f} times "
                             f"(to {_human_size(info.file_size)}); at most {MAX_ZIP_RATIO} times is accepted. "
                             "This looks like a zip bomb.")
        total += info.file_size
    if total > max_expanded:
        raise ValueError(f"The zip expands to {_human_size(total)}, more than the {_human_size(max_expanded)} "
                         "accepted; upload a smaller area.")
    return [info for info in infos if not info.is_dir()]


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> None:
    """Stream one member to disk, stopping as soon as it inflates past its declared size."""
    written = 0
    try:
        with archive.open(info) as source, open(target, "wb") as sink:
            while chunk := source.read(COPY_CHUNK):
                written += len(chunk)
                if written > info.file_size:
                    raise ValueError(f"The zip member {info.filename!r} inflates past its declared size "
                                     f"({_human_size(info.file_size)}); the archive is corrupted or hostile.")
                sink.write(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as err:
        raise ValueError(f"The zip is corrupted ({info.filename}: {err}).") from None


def _shapefile_members(infos: list[zipfile.ZipInfo]) -> dict[str, zipfile.ZipInfo]:
    """The one shapefile's parts by extension; .shp, .shx, .dbf and .prj are required."""
    names = [i.filename for i in infos]
    shps = [i for i in infos if i.filename.lower().endswith(".shp")
            and not PurePosixPath(i.filename).name.startswith("._")]
    if not shps:
        raise ValueError(f"The zip must hold exactly one .shp file; it holds none ({names[:8]}). "
                         "Zip the .shp, .shx, .dbf and .prj together.")
    if len(shps) > 1:
        raise ValueError(f"The zip must hold exactly one .shp file; it holds {len(shps)} "
                         f"{[i.filename for i in shps][:8]}. Upload one shapefile at a time.")
    stem = shps[0].filename[:-4]
    by_lower = {i.filename.lower(): i for i in infos}
    members = {}
    for ext in SHAPEFILE_PARTS:
        member = by_lower.get((stem + ext).lower())
        if member is None and ext in (".shx", ".dbf"):
            raise ValueError(f"The shapefile is missing its {ext} part ({PurePosixPath(stem).name}{ext}); "
                             "a shapefile needs .shp, .shx and .dbf together.")
        if member is None and ext == ".prj":
            raise ValueError("The zip has no .prj file, so the shapefile has no coordinate system; "
                             "include the .prj written with the shapefile.")
        if member is not None:
            members[ext] = member
    return members


def _shapefile_zip(data: bytes, required: Iterable[str] | None, max_bytes: int) -> gpd.GeoDataFrame:
    """Zipped shapefile read via pyogrio from a temporary folder, after the zip checks."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ValueError("The file is not a zip archive (corrupted or another format); zip the .shp, "
                         ".shx, .dbf and .prj together.") from None
    with archive, tempfile.TemporaryDirectory() as tmp:
        members = _shapefile_members(_checked_members(archive, min(MAX_EXPANDED_BYTES, 5 * max_bytes)))
        for ext, info in members.items():
            _extract(archive, info, Path(tmp) / f"upload{ext}")
        try:
            gdf = gpd.read_file(Path(tmp) / "upload.shp", engine="pyogrio")
        except Exception as err:  # pyogrio raises DataSourceError and friends
            raise ValueError(f"The shapefile could not be read: {err}") from None
        if len(gdf.columns) > MAX_COLUMNS:
            raise ValueError(f"The shapefile has {len(gdf.columns):,} attribute columns; at most "
                             f"{MAX_COLUMNS:,} are accepted.")
    _require_columns(gdf, required)
    return _polygons_in_wgs84(gdf, "shapefile")


def _block_shapefile(data: bytes, max_bytes: int) -> gpd.GeoDataFrame:
    """TIGER/Line block polygons: GEOID (from GEOID20, GEOID10, ... when named so) and geometry."""
    gdf = _shapefile_zip(data, None, max_bytes)
    col = next((c for c in BLOCK_ID_COLUMNS if c in gdf.columns), None)
    if col is None:
        raise ValueError(f"The shapefile has no block id column (one of {list(BLOCK_ID_COLUMNS)}); "
                         f"it has {[c for c in gdf.columns if c != 'geometry'][:20]}.")
    return gpd.GeoDataFrame({"GEOID": gdf[col].astype(str).str.strip().to_numpy()},
                            geometry=gdf.geometry.values, crs=gdf.crs)


# ------------------------------------------------------------------------------ entry point
def read_upload(
    file: bytes | str | Path | BinaryIO,
    kind: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    required_columns: Iterable[str] | None = None,
) -> pd.DataFrame | gpd.GeoDataFrame | dict | str:
    """Read and validate an uploaded file of one kind (see UPLOAD_KINDS).

    microdata_csv -> DataFrame (>= 2 columns, >= 10 rows, finite numbers); counts_csv -> DataFrame
    with str GEOID and int64 counts (all non-GEOID columns, or just `required_columns`); geojson /
    shapefile_zip -> GeoDataFrame of polygons in EPSG:4326; block_shapefile_zip -> GEOID + geometry;
    block_counts_csv -> GEOID, total, vap[, black, bvap] as int64; assignment_csv -> GEOID and
    district as text; json -> dict; session -> text. Raises ValueError explaining what to change.
    """
    if kind not in UPLOAD_KINDS:
        raise ValueError(f"Unknown upload kind {kind!r}; use one of {list(UPLOAD_KINDS)}.")
    required = list(required_columns) if required_columns is not None else None
    data = read_bytes(file, max_bytes)
    if kind == "shapefile_zip":
        return _shapefile_zip(data, required, max_bytes)
    if kind == "block_shapefile_zip":
        return _block_shapefile(data, max_bytes)
    text = _decode_text(data)
    if kind == "microdata_csv":
        return _microdata(text, required)
    if kind == "counts_csv":
        return _counts(text, required)
    if kind == "block_counts_csv":
        return _block_counts(text)
    if kind == "assignment_csv":
        return _assignment(text)
    if kind == "json":
        doc = parse_json_text(text)
        if not isinstance(doc, dict):
            raise ValueError(f"The JSON file holds a {type(doc).__name__}, not an object; "
                             "load a file exported by the dashboard.")
        return doc
    if kind == "session":
        return text
    return _geojson(text, required)
