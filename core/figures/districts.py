"""Plotly figures for the District maps page: plan map, district error bars, ensemble and ER panels (no streamlit)."""
from __future__ import annotations

import json
import re

import geopandas as gpd
import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import shapely

from core.geography.adjacency import EQUAL_AREA_CRS
from core.districts.noise import equal_split_line

SIMULATION_NOTE = "simulation, not a release"
# Okabe-Ito: eight hues that stay distinct for colour-blind readers (one purple only)
QUALITATIVE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
_DIGITS = re.compile(r"(-?\d+\.\d{5})\d+")
# colour choice -> (column of the display table, colour-bar title, scale, diverging?)
COLOUR_BY: dict[str, tuple[str, str, str, bool]] = {
    "error": ("mean_abs_error", "District's mean absolute population error (people)", "Reds", False),
    "population": ("district_population", "District population (people)", "Blues", False),
    "deviation": ("district_deviation_pct", "District's deviation from the ideal population (%)", "RdBu_r", True),
    "group share": ("black_share_pct", "Black share of the unit's population (%)", "Viridis", False),
    "block error": ("mean_block_error", "Mean noisy minus true count in the unit (people)", "RdBu_r", True),
}
HOVER = {"unit_id": True, "district": True, "district_population": ":,", "district_deviation_pct": ":.2f",
         "mean_abs_error": ":.1f", "p95_abs_error": ":.1f", "analytic_toydown_sd": ":.1f",
         "black_share_pct": ":.1f", "mean_block_error": ":.1f"}
LABELS = {"unit_id": "Unit", "district": "District", "district_population": "District population (people)",
          "district_deviation_pct": "District deviation from ideal (%)",
          "mean_abs_error": "District mean absolute error (people)",
          "p95_abs_error": "District 95th percentile absolute error (people)",
          "analytic_toydown_sd": "Closed-form ToyDown error sd (people)",
          "black_share_pct": "Black share of the unit (%)", "mean_block_error": "Mean count error in the unit (people)"}


def map_geojson(gdf: gpd.GeoDataFrame, id_col: str, tolerance_m: float) -> dict:
    """GeoJSON (EPSG:4326) of ``gdf`` keyed by ``id_col``, simplified by ``tolerance_m`` metres for the browser."""
    projected = gdf.geometry.to_crs(EQUAL_AREA_CRS)
    try:  # simplify the units as one coverage so neighbours keep a common edge (no slivers between them)
        simple = shapely.coverage_simplify(projected.to_numpy(), tolerance_m)
    except shapely.errors.GEOSException:
        simple = shapely.simplify(projected.to_numpy(), tolerance_m, preserve_topology=True)
    geom = gpd.GeoSeries(simple, crs=EQUAL_AREA_CRS).to_crs("EPSG:4326")
    slim = gpd.GeoDataFrame({id_col: gdf[id_col].astype(str).to_numpy()}, geometry=geom.to_numpy(), crs="EPSG:4326")
    # five decimals of a degree (about 1 m) are plenty on screen and halve the JSON sent to the browser
    return json.loads(_DIGITS.sub(r"\1", slim.to_json(drop_id=True)))


def fit_zoom(bounds, width_px: float, height_px: float) -> float:
    """Web-mercator zoom at which ``bounds`` (lon/lat min x, min y, max x, max y) fit inside a
    ``width_px`` x ``height_px`` box, with 8% spare on each axis (a tile is 512 px per 360 degrees at zoom 0;
    a degree of latitude is stretched by 1/cos(latitude) in the projection)."""
    lat = np.radians((bounds[1] + bounds[3]) / 2)
    dx = max(bounds[2] - bounds[0], 1e-4)
    dy = max(bounds[3] - bounds[1], 1e-4) / np.cos(lat)
    fill = 0.92
    return float(np.clip(min(np.log2(fill * width_px * 360 / (512 * dx)),
                             np.log2(fill * height_px * 360 / (512 * dy))), 1, 16))


# the map sits in three fifths of a wide page (about 600 px on a 1280 px screen with the sidebar open); the
# colour bar lies under it, so the width is the map's own
MAP_FIT_PX = (560, 480)


def colour_range(frames: list[pd.DataFrame], colour: str) -> tuple[float, float]:
    """One colour range for every map in ``frames`` (two plans side by side share it, so one colour means
    one value on both): symmetric around 0 for a diverging measure, else from the least value to the 98th
    percentile, over the values of all frames together."""
    if colour not in COLOUR_BY:
        raise ValueError(f"Colour by one of {list(COLOUR_BY)}, not {colour!r}.")
    col, _, _, diverging = COLOUR_BY[colour]
    vals = pd.concat([f[col] for f in frames], ignore_index=True).astype(float)
    if not vals.notna().any():
        return (-1.0, 1.0) if diverging else (0.0, 1.0)
    if diverging:
        m = max(float(np.nanpercentile(np.abs(vals), 98)), 1e-9)
        return -m, m
    low, high = float(np.nanmin(vals)), float(np.nanpercentile(vals, 98))
    return low, max(high, low + 1e-9)


def plan_map(units: gpd.GeoDataFrame, unit_geojson: dict, outlines: gpd.GeoDataFrame, outline_geojson: dict,
             colour: str, title: str, fit_px: tuple[int, int] = MAP_FIT_PX, height: int = 600,
             zrange: tuple[float, float] | None = None) -> go.Figure:
    """Choropleth of the display units coloured by ``colour``; district boundaries drawn on top. The zoom fits
    the whole area into ``fit_px`` pixels (the column the map is drawn in), so every district number shows.
    ``zrange`` fixes the colour range (two maps compared share one, from ``colour_range``)."""
    rng = colour_range([units], colour) if zrange is None else zrange     # checks the colour choice too
    if colour not in COLOUR_BY:
        raise ValueError(f"Colour by one of {list(COLOUR_BY)}, not {colour!r}.")
    col, bar, scale, _ = COLOUR_BY[colour]
    data = units.drop(columns="geometry").assign(unit_id=units["unit_id"].astype(str))
    vals = data[col].astype(float)
    bounds = units.total_bounds
    center = {"lon": float((bounds[0] + bounds[2]) / 2), "lat": float((bounds[1] + bounds[3]) / 2)}
    zoom = fit_zoom(bounds, *fit_px)
    hover_cols = [c for c in HOVER if c in data.columns and c != "unit_id"]
    fmt = {c: HOVER[c] if isinstance(HOVER[c], str) else "" for c in hover_cols}
    template = "<b>%{location}</b><br>" + "<br>".join(
        f"{LABELS.get(c, c)}: %{{customdata[{i}]{fmt[c].lstrip(':') and ':' + fmt[c].lstrip(':')}}}"
        for i, c in enumerate(hover_cols)) + "<extra></extra>"
    # graph_objects directly: plotly express spends most of a redraw re-validating the same data
    fig = go.Figure(go.Choroplethmap(
        geojson=unit_geojson, locations=data["unit_id"], featureidkey="properties.unit_id", z=vals,
        zmin=rng[0], zmax=rng[1], colorscale=scale, marker_opacity=0.85, marker_line_width=0.2,
        marker_line_color="rgba(255,255,255,0.6)", customdata=data[hover_cols].to_numpy(),
        hovertemplate=template, colorbar=dict(title=dict(text=bar, side="top"), orientation="h", y=-0.02, yanchor="top",
                                             thickness=12, len=0.9), name=""))
    fig.update_layout(map=dict(style="white-bg", center=center, zoom=zoom))
    ids = outlines["district"].astype(str)
    fig.add_trace(go.Choroplethmap(geojson=outline_geojson, locations=ids, featureidkey="properties.district",
                                   z=np.zeros(len(ids)), colorscale=[[0, "rgba(0,0,0,0)"], [1, "rgba(0,0,0,0)"]],
                                   showscale=False, marker_line_width=2.2, marker_line_color="#222",
                                   hoverinfo="skip", name="district boundaries"))
    # district numbers drawn as line strokes at a point inside each district: map text layers would fetch
    # font glyphs from the internet, and nothing on this page may leave the machine
    pts = outlines.geometry.to_crs(EQUAL_AREA_CRS).representative_point().to_crs("EPSG:4326")
    for trace in district_number_traces(outlines, pts):
        fig.add_trace(trace)
    fig.add_trace(go.Scattermap(lon=pts.x, lat=pts.y, mode="markers", marker=dict(size=7, color="#222", opacity=0.0),
                                hovertext=[f"District {i}" for i in ids], hoverinfo="text", showlegend=False,
                                name="district"))
    fig.update_layout(title=title, height=height, margin=dict(l=0, r=0, t=40, b=70))
    return fig


# seven-segment strokes in a digit box 0.5 wide and 1 high: a top, b upper right, c lower right, d bottom,
# e lower left, f upper left, g middle
_SEGMENTS = {"a": ((0, 1), (0.5, 1)), "b": ((0.5, 1), (0.5, 0.5)), "c": ((0.5, 0.5), (0.5, 0)),
             "d": ((0, 0), (0.5, 0)), "e": ((0, 0), (0, 0.5)), "f": ((0, 0.5), (0, 1)), "g": ((0, 0.5), (0.5, 0.5))}
_DIGIT_SEGMENTS = {"0": "abcdef", "1": "bc", "2": "abged", "3": "abgcd", "4": "fgbc", "5": "afgcd", "6": "afgedc",
                   "7": "abc", "8": "abcdefg", "9": "abcdfg"}


def number_strokes(number: int) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Line segments drawing ``number`` in seven-segment digits, centred on (0, 0), one unit high."""
    text = str(int(number))
    width = 0.8 * len(text) - 0.3
    out = []
    for i, ch in enumerate(text):
        x0 = 0.8 * i - width / 2
        out += [((x0 + a[0], a[1] - 0.5), (x0 + b[0], b[1] - 0.5)) for a, b in (_SEGMENTS[s] for s in
                                                                                 _DIGIT_SEGMENTS[ch])]
    return out


def district_number_traces(outlines: gpd.GeoDataFrame, points) -> list[go.Scattermap]:
    """Each district's number drawn as strokes at its representative point (dark on a white halo), sized to
    the district (at most 5% of the map's height): lines need no font, so nothing is fetched."""
    bounds = outlines.to_crs("EPSG:4326").geometry.bounds
    span = max(float(bounds["maxy"].max() - bounds["miny"].min()), 1e-4)
    own = (bounds["maxy"] - bounds["miny"]).to_numpy(dtype=float)
    heights = np.clip(0.35 * own, 0.012 * span, 0.05 * span)
    lon, lat = [], []
    for number, x, y, h in zip(outlines["district"], points.x, points.y, heights):
        sx = h / max(np.cos(np.radians(y)), 0.1)          # a degree of longitude is shorter away from the equator
        for (ax, ay), (bx, by) in number_strokes(int(number)):
            lon += [x + ax * sx, x + bx * sx, None]
            lat += [y + ay * h, y + by * h, None]
    common = dict(lon=lon, lat=lat, mode="lines", hoverinfo="skip", showlegend=False)
    return [go.Scattermap(line=dict(color="rgba(255,255,255,0.9)", width=6), name="district number halo", **common),
            go.Scattermap(line=dict(color="#111", width=2.5), name="district numbers", **common)]


def district_error_figure(table: pd.DataFrame) -> go.Figure:
    """Per district: empirical error sd with its 95% interval against the analytic ToyDown sd (Cor. 3)."""
    d = table.sort_values("district")
    x = d["district"].astype(int)
    fig = go.Figure()
    fig.add_bar(x=x, y=d["mean_abs_error"], name="mean absolute error", marker_color="#E69F00", opacity=0.6)
    fig.add_scatter(x=x, y=d["empirical_sd"], mode="markers", name=f"observed sd, 95% interval ({SIMULATION_NOTE})",
                    marker=dict(color="#D55E00", size=10, symbol="diamond"),
                    error_y=dict(type="data", symmetric=False, array=d["empirical_sd_high"] - d["empirical_sd"],
                                 arrayminus=d["empirical_sd"] - d["empirical_sd_low"]))
    fig.add_scatter(x=x, y=d["analytic_toydown_sd"], mode="markers", name="closed-form ToyDown sd",
                    marker=dict(color="#0072B2", size=10, symbol="line-ew-open", line=dict(width=3)))
    fig.update_xaxes(tickmode="linear", dtick=1 if len(d) <= 40 else 5, tickformat="d")
    fig.update_layout(title="District population error: observed vs closed form", xaxis_title="District",
                      yaxis_title="Error in the district population (people)", height=380, legend=dict(orientation="h", y=-0.25),
                      margin=dict(t=50, b=30, l=50, r=10))
    return fig


def ensemble_histogram(study: pd.DataFrame) -> go.Figure:
    """Figure 4 analogue: histogram of log10 mean |E_D| per district, by generator, one panel per split."""
    d = study.assign(log10_error=np.log10(study["mean_abs_error"].clip(lower=1e-3)))
    fig = px.histogram(d, x="log10_error", color="generator", facet_col="split", barmode="overlay",
                       opacity=0.6, nbins=30, color_discrete_sequence=QUALITATIVE,
                       labels={"generator": "Generator", "split": "Split"})
    fig.update_xaxes(title="Mean absolute district error, log10 of people")
    fig.update_layout(title=f"District error by generator and split ({SIMULATION_NOTE})", height=380,
                      legend=dict(orientation="h", y=-0.3), margin=dict(t=70, b=30, l=50, r=10))
    return fig


def fragmentation_histogram(study: pd.DataFrame) -> go.Figure:
    """Figure 6 analogue (left): fragmentation score of every district, by generator."""
    d = study.drop_duplicates(["generator", "district"])
    fig = px.histogram(d, x="fragmentation", color="generator", barmode="overlay", opacity=0.6, nbins=30,
                       color_discrete_sequence=QUALITATIVE,
                       labels={"fragmentation": "Fragmentation (Def. 5)", "generator": "Generator"})
    fig.update_layout(title="Fragmentation of the districts (Def. 5)", height=340,
                      legend=dict(orientation="h", y=-0.3), margin=dict(t=50, b=30, l=50, r=10))
    return fig


def fragmentation_variance_figure(study: pd.DataFrame, sensitivity: float, laplace: bool) -> go.Figure:
    """Figure 6 analogue (right): Frag against observed error variance under the equal split, with the line
    8 d^2 / eps^2 (w1^2 + Frag) (Cohen et al. 2021, §6) when the mechanism is Laplace."""
    d = study[study["split"] == "equal"]
    if d.empty:
        d = study[study["split"] == study["split"].iloc[0]]
    fig = px.scatter(d, x="fragmentation", y="empirical_variance", color="generator", opacity=0.7,
                     color_discrete_sequence=QUALITATIVE,
                     labels={"empirical_variance": "Observed variance of the district error (people²)",
                             "fragmentation": "Fragmentation (Def. 5)", "generator": "Generator"})
    if laplace and not d.empty and d["split"].iloc[0] == "equal":  # the line holds under the equal split only
        f = np.linspace(0, float(d["fragmentation"].max()) * 1.05, 100)
        w1 = float(d["w1_squared"].mean())
        line = equal_split_line(f, w1, int(d["depth"].iloc[0]), float(d["eps_equal_line"].iloc[0]), sensitivity)
        fig.add_scatter(x=f, y=line, mode="lines", name="8 d²/ε² (w1² + Frag)" if sensitivity == 2 else "2 s² d²/ε² (w1² + Frag)", line=dict(color="#222", dash="dash"))
    fig.update_layout(title=f"Fragmentation vs error variance, split {d['split'].iloc[0] if len(d) else ''}",
                      height=380, legend=dict(orientation="h", y=-0.3), margin=dict(t=50, b=30, l=60, r=10))
    return fig


def er_scatter(precincts: pd.DataFrame, estimates: pd.DataFrame, noisy_shares: pd.DataFrame, mode: str) -> go.Figure:
    """Group share against vote share per precinct (true counts), with the fitted line of the true counts and of
    a few noisy runs in the chosen mode."""
    p = precincts.dropna(subset=["group_share", "vote_share"])
    fig = go.Figure()
    size = np.clip(np.sqrt(p["votes"].to_numpy(dtype=float)) / 3, 2, 14)
    fig.add_scatter(x=p["group_share"], y=p["vote_share"], mode="markers", name="precincts (true counts)",
                      marker=dict(size=size, color="#0072B2", opacity=0.35))
    e = estimates[estimates["mode"] == mode]
    xs = np.array([0.0, 1.0])
    for _, row in e[e["source"] == "noisy counts"].head(8).iterrows():
        fig.add_scatter(x=xs, y=[row["complement_support"], row["group_support"]], mode="lines",
                        line=dict(color="#D55E00", width=1), opacity=0.6, showlegend=bool(row["run"] == 0),
                        name=f"noisy runs ({SIMULATION_NOTE})")
    t = e[e["run"] < 0]
    if not t.empty:
        fig.add_scatter(x=xs, y=[t["complement_support"].iloc[0], t["group_support"].iloc[0]], mode="lines",
                        line=dict(color="#222", width=3), name="fit on true counts")
    fig.update_layout(title=f"Ecological regression ({mode}): synthetic election on synthetic precincts",
                      xaxis_title="Black share of voting-age population", yaxis_title="candidate's share of votes",
                      xaxis_range=[-0.02, 1.02], yaxis_range=[-0.02, 1.02], height=420,
                      legend=dict(orientation="h", y=-0.25), margin=dict(t=50, b=30, l=50, r=10))
    return fig


def er_histogram(estimates: pd.DataFrame, truth: dict) -> go.Figure:
    """Point estimates per mode over the noisy runs and the naive Gaussian baseline (dots), beside the fit on true
    counts (black cross), for the group and the complement; each panel has its own scale."""
    noisy = estimates[estimates["run"] >= 0].melt(id_vars=["run", "mode", "source"],
                                                  value_vars=["group_support", "complement_support"],
                                                  var_name="estimate", value_name="support")
    cols = ["group_support", "complement_support"]
    fig = px.strip(noisy, x="mode", y="support", color="source", facet_col="estimate",
                   category_orders={"mode": ["all", "filtered", "weighted"], "estimate": cols,
                                    "source": ["noisy counts", "naive Gaussian"]},
                   color_discrete_sequence=QUALITATIVE,
                   labels={"mode": "Mode", "support": "Estimated support (share of votes)", "source": "Counts"})
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.for_each_annotation(lambda a: a.update(text={"estimate=group_support": "Black voters",
                                                     "estimate=complement_support": "Other voters"}
                                               .get(a.text, a.text)))
    true = estimates[estimates["run"] < 0]
    for c, col in enumerate(cols, start=1):
        fig.add_scatter(x=true["mode"], y=true[col], mode="markers", marker=dict(symbol="x", size=12, color="#111"),
                        name="fit on true counts", showlegend=c == 1, row=1, col=c)
    fig.update_layout(title=f"ER estimates over noisy runs ({SIMULATION_NOTE}; simulated truth "
                            f"{truth['group']:.2f} / {truth['complement']:.2f})", height=400,
                      legend=dict(orientation="h", y=-0.2), margin=dict(t=70, b=30, l=50, r=10))
    return fig
