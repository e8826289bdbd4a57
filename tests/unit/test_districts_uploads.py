"""User block files: a zipped TIGER/Line-style shapefile plus a PL-style CSV, good and bad."""
import io
import zipfile

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from core.geography.adjacency import block_adjacency
from core.districts.uploads import load_uploaded_blocks, read_block_counts, read_block_shapefile

# 2 counties x 2 tracts x 2 block groups x 2 blocks, laid out on a 4 x 4 grid of boxes
GEOIDS = [f"13{c:03d}{t:06d}{g}{b:03d}" for c in (1, 3) for t in (100, 200) for g in (1, 2) for b in (1, 2)]


def _shapes() -> gpd.GeoDataFrame:
    boxes = [shapely.box(-84 + 0.01 * (i % 4), 33 + 0.01 * (i // 4), -84 + 0.01 * (i % 4 + 1),
                         33 + 0.01 * (i // 4 + 1)) for i in range(16)]
    return gpd.GeoDataFrame({"GEOID20": GEOIDS}, geometry=boxes, crs="EPSG:4269")


def _zip(gdf: gpd.GeoDataFrame, tmp_path, drop: tuple[str, ...] = ()) -> bytes:
    folder = tmp_path / "shp"
    folder.mkdir(exist_ok=True)
    gdf.to_file(folder / "tl_blocks.shp", engine="pyogrio")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in folder.iterdir():
            if f.suffix not in drop:
                z.write(f, f.name)
    return buf.getvalue()


def _counts() -> pd.DataFrame:
    total = np.arange(16) * 10 + 5
    return pd.DataFrame({"GEOID": GEOIDS, "total": total, "vap": total - 3, "black": total // 3, "bvap": total // 4})


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def test_good_files_build_a_nested_geography(tmp_path):
    geo = load_uploaded_blocks(io.BytesIO(_zip(_shapes(), tmp_path)), io.BytesIO(_csv(_counts())))
    b = geo.blocks
    assert len(b) == 16 and geo.synthetic_below_county is False
    assert b["county"].nunique() == 2 and b["tract"].nunique() == 4 and b["block_group"].nunique() == 8
    assert geo.hierarchy.level_names == ("state", "county", "tract", "block group", "block")
    assert geo.hierarchy.aggregate(b["total"].to_numpy())[0] == _counts()["total"].sum()
    assert str(b.crs) == "EPSG:4326"
    adj = block_adjacency(geo)
    assert adj.n_components() == 1 and adj.edges.shape[0] == 24     # rook only: corners are dropped


@pytest.mark.parametrize("drop, message", [((".dbf",), "missing its .dbf"), ((".prj",), "no coordinate system"),
                                           ((".shp",), "exactly one .shp")])
def test_incomplete_zip(tmp_path, drop, message):
    with pytest.raises(ValueError, match=message):
        read_block_shapefile(io.BytesIO(_zip(_shapes(), tmp_path, drop)))


def test_not_a_zip_and_no_id_column(tmp_path):
    with pytest.raises(ValueError, match="not a zip archive"):
        read_block_shapefile(io.BytesIO(b"GEOID,total\n1,2\n"))
    with pytest.raises(ValueError, match="no block id column"):
        read_block_shapefile(io.BytesIO(_zip(_shapes().rename(columns={"GEOID20": "NAME"}), tmp_path)))


def _load(tmp_path, shapes=None, counts=None):
    return load_uploaded_blocks(io.BytesIO(_zip(_shapes() if shapes is None else shapes, tmp_path)),
                                io.BytesIO(_csv(_counts() if counts is None else counts)))


def test_bad_joins_each_say_what_to_fix(tmp_path):
    c = _counts()
    with pytest.raises(ValueError, match="more than once"):
        _load(tmp_path, counts=pd.concat([c, c.iloc[:1]]))
    with pytest.raises(ValueError, match="have no block polygon"):
        _load(tmp_path, counts=c.assign(GEOID=GEOIDS[:-1] + ["139990000000001"]))
    with pytest.raises(ValueError, match="have no row in the counts CSV"):
        _load(tmp_path, counts=c.iloc[:-1])
    with pytest.raises(ValueError, match="more voting-age people than people"):
        _load(tmp_path, counts=c.assign(vap=c["total"] + 1))
    with pytest.raises(ValueError, match="more Black people than people"):
        _load(tmp_path, counts=c.assign(black=c["total"] + 1))
    with pytest.raises(ValueError, match="more Black voting-age people than voting-age people"):
        _load(tmp_path, counts=c.assign(bvap=c["vap"] + 1, black=c["total"]))
    with pytest.raises(ValueError, match="more Black voting-age people than Black people"):
        _load(tmp_path, counts=c.assign(bvap=c["black"] + 1))
    s = _shapes()
    s.loc[3, "geometry"] = None
    with pytest.raises(ValueError, match="have no geometry"):
        _load(tmp_path, shapes=s)
    with pytest.raises(ValueError, match="15 characters"):
        _load(tmp_path, shapes=_shapes().assign(GEOID20=[g[1:] for g in GEOIDS]),
              counts=c.assign(GEOID=[g[1:] for g in GEOIDS]))


def test_bad_count_tables():
    c = _counts()
    with pytest.raises(ValueError, match="negative counts"):
        read_block_counts(io.BytesIO(_csv(c.assign(total=-c["total"]))))
    with pytest.raises(ValueError, match="needs a 'vap' column"):
        read_block_counts(io.BytesIO(_csv(c.drop(columns="vap"))))
    with pytest.raises(ValueError, match="needs a GEOID column"):
        read_block_counts(io.BytesIO(_csv(c.rename(columns={"GEOID": "block"}))))
    with pytest.raises(ValueError, match="non-numeric"):
        read_block_counts(io.BytesIO(_csv(c.astype({"total": object}).assign(total=["x"] * 16))))
    with pytest.raises(ValueError, match="whole numbers"):
        read_block_counts(io.BytesIO(_csv(c.assign(total=c["total"] + 0.5))))
    # leading zeros of GEOIDs survive the CSV read
    assert read_block_counts(io.BytesIO(_csv(c)))["GEOID"].str.len().eq(15).all()


# ------------------------------------------------------------------------------------- hostile input
def test_huge_and_impossible_counts_are_refused_not_wrapped():
    c = _counts()
    for bad in ("1e20", "inf", "nan", "-1", "99999999999999999999"):
        frame = c.astype({"total": object})
        frame.loc[3, "total"] = bad
        with pytest.raises(ValueError, match="total"):
            read_block_counts(io.BytesIO(_csv(frame)))


def test_all_zero_population_is_refused(tmp_path):
    c = _counts().assign(total=0, vap=0, black=0, bvap=0)
    with pytest.raises(ValueError, match="population of 0"):
        load_uploaded_blocks(io.BytesIO(_zip(_shapes(), tmp_path)), io.BytesIO(_csv(c)))


def test_zip_bomb_is_refused_before_inflating(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("tl_blocks.shp", b"\0" * 50_000_000)        # 50 MB of zeros deflate to about 50 KB
        for ext in (".shx", ".dbf", ".prj"):
            z.writestr(f"tl_blocks{ext}", b"x")
    assert len(buf.getvalue()) < 200_000
    with pytest.raises(ValueError, match="zip bomb|expands"):
        read_block_shapefile(io.BytesIO(buf.getvalue()))


def test_zip_slip_and_oversized_files_are_refused(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("../../etc/tl_blocks.shp", b"x")
    with pytest.raises(ValueError, match="unsafe path"):
        read_block_shapefile(io.BytesIO(buf.getvalue()))
    from core.uploads import read_upload
    with pytest.raises(ValueError, match="larger|too large|MB|bytes"):
        read_upload(io.BytesIO(b"GEOID,total,vap\n" + b"1" * 2000), "block_counts_csv", max_bytes=1000)


def test_plans_with_impossible_settings_raise_value_errors():
    from core.contracts import DataRef
    from core.districts import DistrictPlan, NoiseConfig, ReComParams, run
    from core.geography.assignments import plan_from_csv
    bad = [dict(grid_fanouts=(1000, 1000, 1000)), dict(grid_fanouts=(64, 4)), dict(k=10**9), dict(k=1.5),
           dict(balance_tolerance_pct=float("nan")), dict(generator="square", data=DataRef("georgia")),
           dict(generator="nope"), dict(generator="recom", params=ReComParams(tolerance_pct=5.0, steps=40),
                                        k=True)]
    for kwargs in bad:
        with pytest.raises(ValueError):
            DistrictPlan(**kwargs)
    for budgets in ((float("nan"),) * 4, (float("inf"),) * 4, (1e400,) * 4, (-1.0,) * 4, ()):
        with pytest.raises(ValueError):
            NoiseConfig(budgets)
    with pytest.raises(ValueError):
        ReComParams(tolerance_pct=float("inf"))
    with pytest.raises(ValueError, match="too many to hold"):
        run.uncached(DistrictPlan(grid_fanouts=(484, 4, 25), noise=NoiseConfig((0.25,) * 4, runs=5000)))
    with pytest.raises(ValueError, match="cannot be drawn"):
        run.uncached(DistrictPlan(grid_fanouts=(16, 4, 4), k=300))
    geoids = np.array(GEOIDS)
    many = pd.DataFrame({"GEOID": GEOIDS, "district": np.arange(16)})
    assert plan_from_csv(io.BytesIO(_csv(many)), geoids).max() == 15
    one = many.assign(district=1)
    with pytest.raises(ValueError, match="2 to 400 districts"):
        plan_from_csv(io.BytesIO(_csv(one)), geoids)


def test_uploaded_files_must_match_the_plans_fingerprint(tmp_path):
    from core.contracts import DataRef, bytes_fingerprint
    from core.districts import DistrictPlan, NoiseConfig, ReComParams, run
    zipped, counts = _zip(_shapes(), tmp_path), _csv(_counts())
    plan = DistrictPlan(data=DataRef("upload", bytes_fingerprint(zipped, counts)), generator="recom",
                        params=ReComParams("block group", 40.0, 4, 2), k=2,
                        noise=NoiseConfig((0.2,) * 5, runs=3))
    result = run.uncached(plan, (zipped, counts))
    assert result.plan_districts(1)["population"].sum() == _counts()["total"].sum()
    with pytest.raises(ValueError, match="fingerprint"):
        run.uncached(plan, (zipped, _csv(_counts().assign(total=_counts()["total"] + 1))))
    with pytest.raises(ValueError, match="needs 2 uploaded"):
        run.uncached(plan, (zipped,))
