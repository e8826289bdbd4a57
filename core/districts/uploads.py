"""User block files: a zipped TIGER/Line block shapefile plus a PL 94-171 style CSV, joined on GEOID.

The hierarchy comes from GEOID prefixes: county = first 5 characters (state + county FIPS), tract =
first 11, block group = first 12, block = all 15. Every problem raises ValueError saying what to fix.
"""
from __future__ import annotations

import geopandas as gpd
import pandas as pd

from core.geography.hierarchy import CENSUS_GEOID_CUTS
from core.geography.blocks import BlockGeography, geography_from_blocks
from core.uploads import read_upload

MAX_BYTES = 200_000_000


def read_block_shapefile(file) -> gpd.GeoDataFrame:
    """Block polygons (GEOID, geometry) from a zipped TIGER/Line shapefile, in EPSG:4326."""
    return read_upload(file, "block_shapefile_zip", max_bytes=MAX_BYTES)


def read_block_counts(file) -> pd.DataFrame:
    """PL 94-171 style table: GEOID, total, vap and optionally black and bvap (non-negative integers)."""
    return read_upload(file, "block_counts_csv", max_bytes=MAX_BYTES)


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
    if int(counts["total"].sum()) <= 0:
        raise ValueError("Every block has a total population of 0; districts need people to balance.")
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
