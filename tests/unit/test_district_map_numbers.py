"""District numbers drawn on the map as strokes (no font fetched), one number per district at its point."""
import geopandas as gpd
import numpy as np
import shapely

from core.figures import districts as figs


def _outlines(n: int) -> gpd.GeoDataFrame:
    boxes = [shapely.box(-90 + 0.1 * i, 40, -90 + 0.1 * (i + 1), 40.1) for i in range(n)]
    return gpd.GeoDataFrame({"district": np.arange(1, n + 1)}, geometry=boxes, crs="EPSG:4326")


def test_seven_segment_strokes_spell_the_number():
    assert len(figs.number_strokes(1)) == 2
    assert len(figs.number_strokes(8)) == 7
    assert len(figs.number_strokes(12)) == 2 + 5
    xs = [x for seg in figs.number_strokes(20) for x, _ in seg]
    ys = [y for seg in figs.number_strokes(20) for _, y in seg]
    assert min(ys) == -0.5 and max(ys) == 0.5                       # one unit high, centred
    assert abs(min(xs) + max(xs)) < 1e-12                            # the two digit boxes centred


def test_plan_map_draws_every_district_number_inside_its_district():
    outlines = _outlines(12)
    units = outlines.assign(unit_id=outlines["district"].astype(str), district_population=1000.0)
    gj = figs.map_geojson(units, "unit_id", 1.0)
    ogj = figs.map_geojson(outlines.assign(district=outlines["district"]), "district", 1.0)
    fig = figs.plan_map(units, gj, outlines, ogj, "population", "t")
    numbers = next(t for t in fig.data if t.name == "district numbers")
    halo = next(t for t in fig.data if t.name == "district number halo")
    assert list(numbers.lon) == list(halo.lon)                       # a light halo under the dark strokes
    assert fig.data.index(halo) < fig.data.index(numbers)
    segments = [i for i, v in enumerate(numbers.lon) if v is None]
    expected = sum(len(figs.number_strokes(d)) for d in range(1, 13))
    assert len(segments) == expected
    # every stroke of district d lies inside district d's box
    pos = 0
    for d, box in zip(outlines["district"], outlines.geometry):
        for _ in figs.number_strokes(d):
            line = shapely.LineString([(numbers.lon[pos], numbers.lat[pos]), (numbers.lon[pos + 1], numbers.lat[pos + 1])])
            assert box.buffer(1e-9).contains(line)
            pos += 3
    hover = next(t for t in fig.data if t.name == "district")
    assert list(hover.hovertext) == [f"District {d}" for d in range(1, 13)]   # the number in words too


def test_two_maps_compared_share_one_colour_range():
    outlines = _outlines(4)
    small = outlines.assign(unit_id=outlines["district"].astype(str), district_population=[10.0, 20, 30, 40])
    large = small.assign(district_population=[100.0, 200, 300, 400])
    low, high = figs.colour_range([small, large], "population")
    assert low == 10.0 and high > 300
    gj = figs.map_geojson(small, "unit_id", 1.0)
    ogj = figs.map_geojson(outlines, "district", 1.0)
    maps = [figs.plan_map(u, gj, outlines, ogj, "population", "t", zrange=(low, high)) for u in (small, large)]
    assert {(m.data[0].zmin, m.data[0].zmax) for m in maps} == {(low, high)}
    alone = figs.plan_map(small, gj, outlines, ogj, "population", "t")
    assert alone.data[0].zmax < high                                  # on its own a map fits its own values
    diverging = figs.colour_range([small.assign(district_deviation_pct=[-3.0, 1, 2, 0])], "deviation")
    assert diverging[0] == -diverging[1]
    try:
        figs.colour_range([small], "rainbow")
    except ValueError as exc:
        assert "Colour by" in str(exc)
    else:
        raise AssertionError("an unknown colour choice must be refused")
