"""User block files: a zipped TIGER/Line block shapefile plus a PL 94-171 style CSV, joined on GEOID.

The hierarchy comes from GEOID prefixes: county = first 5 characters (state + county FIPS), tract =
first 11, block group = first 12, block = all 15. Every problem raises ValueError saying what to fix.
"""
from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd

from core.census.hierarchy import CENSUS_GEOID_CUTS
from core.districts.geography import BlockGeography, geography_from_blocks

MAX_BYTES = 200_000_000
GEOID_COLUMNS = ("GEOID", "GEOID20", "GEOID10", "BLOCKID10", "BLOCKID20")
COUNT_COLUMNS = ("total", "vap", "black", "bvap")


def _bytes(file) -> bytes:
    raw = file.read() if hasattr(file, "read") else Path(file).read_bytes()
    if len(raw) > MAX_BYTES:
        raise ValueError(f"The file is larger than {MAX_BYTES // 1_000_000} MB; upload one county at a time.")
    return raw


def read_block_shapefile(file) -> gpd.GeoDataFrame:
    """Block polygons (GEOID, geometry) from a zipped shapefile, in EPSG:4326."""
    raw = _bytes(file)
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise ValueError("The block file is not a zip archive; zip the .shp, .shx, .dbf and .prj together.") from None
    names = archive.namelist()
    shp = [n for n in names if n.lower().endswith(".shp")]
    if len(shp) != 1:
        raise ValueError(f"The zip must hold exactly one .shp file; it holds {len(shp)}.")
    stem = shp[0][:-4]
    missing = [ext for ext in (".shx", ".dbf") if stem + ext not in names and stem + ext.upper() not in names]
    if missing:
        raise ValueError(f"The shapefile is missing its {', '.join(missing)} part(s); zip all parts together.")
    if any(n.startswith("/") or ".." in Path(n).parts for n in names):
        raise ValueError("The zip contains unsafe paths; zip the shapefile parts without folders.")
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            if n.startswith(stem) and not n.endswith("/"):
                (Path(tmp) / Path(n).name).write_bytes(archive.read(n))
        try:
            gdf = gpd.read_file(Path(tmp) / Path(shp[0]).name, engine="pyogrio")
        except Exception as exc:
            raise ValueError(f"The shapefile could not be read ({exc}).") from None
    col = next((c for c in GEOID_COLUMNS if c in gdf.columns), None)
    if col is None:
        raise ValueError(f"The shapefile has no block id column (one of {list(GEOID_COLUMNS)}); "
                         f"it has {[c for c in gdf.columns if c != 'geometry']}.")
    if gdf.crs is None:
        raise ValueError("The shapefile has no coordinate system (.prj); include the .prj file in the zip.")
    out = gpd.GeoDataFrame({"GEOID": gdf[col].astype(str).str.strip()}, geometry=gdf.geometry, crs=gdf.crs)
    return out.to_crs("EPSG:4326")


def read_block_counts(file) -> pd.DataFrame:
    """PL 94-171 style table: GEOID, total, vap and optionally black and bvap (non-negative integers)."""
    raw = _bytes(file)
    try:
        df = pd.read_csv(io.BytesIO(raw), dtype={"GEOID": str})
    except Exception as exc:
        raise ValueError(f"The counts CSV could not be read ({exc}).") from None
    df.columns = [c.strip() for c in df.columns]
    lower = {c.lower(): c for c in df.columns}
    if "geoid" not in lower:
        raise ValueError(f"The counts CSV needs a GEOID column; it has {list(df.columns)}.")
    df = df.rename(columns={lower["geoid"]: "GEOID"} | {lower[c]: c for c in COUNT_COLUMNS if c in lower})
    for need in ("total", "vap"):
        if need not in df.columns:
            raise ValueError(f"The counts CSV needs a '{need}' column (total population and voting-age population).")
    for c in [c for c in COUNT_COLUMNS if c in df.columns]:
        vals = pd.to_numeric(df[c], errors="coerce")
        if vals.isna().any():
            raise ValueError(f"Column '{c}' has missing or non-numeric values (first at row {int(vals.isna().idxmax()) + 2}).")
        if (vals < 0).any():
            raise ValueError(f"Column '{c}' has negative counts (first GEOID {df.loc[vals < 0, 'GEOID'].iloc[0]}); "
                             "counts must be zero or more.")
        if (vals != np.floor(vals)).any():
            raise ValueError(f"Column '{c}' must hold whole numbers.")
        df[c] = vals.astype(np.int64)
    df["GEOID"] = df["GEOID"].astype(str).str.strip()
    return df


def join_blocks(shapes: gpd.GeoDataFrame, counts: pd.DataFrame) -> gpd.GeoDataFrame:
    """Join shapes and counts on GEOID, refusing duplicates, unknown or unmatched ids and missing geometry."""
    for name, df in (("shapefile", shapes), ("counts CSV", counts)):
        dup = df["GEOID"][df["GEOID"].duplicated()]
        if len(dup):
            raise ValueError(f"The {name} lists {len(dup)} GEOIDs more than once (first: {dup.iloc[0]}); "
                             "each block must appear once.")
    bad_len = shapes["GEOID"][shapes["GEOID"].str.len() != 15]
    if len(bad_len):
        raise ValueError(f"Block GEOIDs must have 15 characters (state 2, county 3, tract 6, block 4); "
                         f"got {bad_len.iloc[0]!r}.")
    unknown = counts["GEOID"][~counts["GEOID"].isin(shapes["GEOID"])]
    if len(unknown):
        raise ValueError(f"{len(unknown)} GEOIDs in the counts CSV have no block polygon (first: {unknown.iloc[0]}).")
    unmatched = shapes["GEOID"][~shapes["GEOID"].isin(counts["GEOID"])]
    if len(unmatched):
        raise ValueError(f"{len(unmatched)} blocks in the shapefile have no row in the counts CSV "
                         f"(first: {unmatched.iloc[0]}).")
    no_geom = shapes.geometry.isna() | shapes.geometry.is_empty
    if no_geom.any():
        raise ValueError(f"{int(no_geom.sum())} blocks have no geometry (first: {shapes['GEOID'][no_geom].iloc[0]}).")
    # a part never exceeds its whole: otherwise group shares above 100% reach the map and the regression
    for part, whole, what in (("vap", "total", "voting-age people than people"),
                              ("black", "total", "Black people than people"),
                              ("bvap", "vap", "Black voting-age people than voting-age people"),
                              ("bvap", "black", "Black voting-age people than Black people")):
        if part in counts and whole in counts:
            over = counts["GEOID"][counts[part] > counts[whole]]
            if len(over):
                raise ValueError(f"{len(over)} blocks have more {what} (first: {over.iloc[0]}); "
                                 f"check the {part} and {whole} columns.")
    merged = shapes.merge(counts, on="GEOID", how="inner")
    _, county, tract, block_group, _ = CENSUS_GEOID_CUTS      # prefix lengths of the census spine
    for column, cut in (("county", county), ("tract", tract), ("block_group", block_group)):
        merged[column] = merged["GEOID"].str[:cut]
    for c in ("black", "bvap"):
        if c not in merged:
            merged[c] = 0
    if "precinct" not in merged:
        merged["precinct"] = merged["block_group"]
    merged["area_km2"] = merged.to_crs("EPSG:5070").geometry.area / 1e6
    return merged.sort_values("GEOID").reset_index(drop=True)


def load_uploaded_blocks(shapefile_zip, counts_csv) -> BlockGeography:
    """A BlockGeography from the user's files (real units at every level; precincts = block groups)."""
    blocks = join_blocks(read_block_shapefile(shapefile_zip), read_block_counts(counts_csv))
    counties = blocks.dissolve(by="county", aggfunc={"total": "sum"}).reset_index().rename(
        columns={"county": "GEOID", "total": "TotPop90"})
    return geography_from_blocks(blocks, counties, False, "Uploaded blocks")
