"""Figures for the home page: the bundled Georgia counties as a choropleth (no streamlit here)."""
from __future__ import annotations

import geopandas as gpd
import plotly.express as px
import plotly.graph_objects as go

# What the map can be coloured by: column -> (colour-bar title, colour scale).
MAP_METRICS: dict[str, tuple[str, str]] = {
    "TotPop90": ("Population, 1990", "Blues"),
    "PctBlack": ("% Black, 1990", "Purples"),
}
GEORGIA_CENTER = {"lat": 32.68, "lon": -83.22}


def georgia_choropleth(counties: gpd.GeoDataFrame, geojson: dict, metric: str) -> go.Figure:
    """Choropleth of Georgia counties coloured by `metric`, offline (white background, no tiles).

    Population is strongly skewed (Fulton alone has 10% of the state), so its colour scale is
    capped at the 95th percentile; the hover always shows the exact values.
    """
    if metric not in MAP_METRICS:
        raise ValueError(f"metric must be one of {list(MAP_METRICS)}, not {metric!r}")
    title, scale = MAP_METRICS[metric]
    values = counties[metric]
    upper = float(values.quantile(0.95)) if metric == "TotPop90" else float(values.max())
    fig = px.choropleth_map(
        counties, geojson=geojson, locations="GEOID", featureidkey="properties.GEOID",
        color=metric, color_continuous_scale=scale, range_color=(0.0, upper),
        hover_name="NAME",
        hover_data={"GEOID": True, "TotPop90": ":,", "PctBlack": ":.1f", "PctRural": ":.1f"},
        labels={"TotPop90": "Population", "PctBlack": "% Black", "PctRural": "% rural",
                "GEOID": "FIPS"},
        map_style="white-bg", zoom=5.6, center=GEORGIA_CENTER, opacity=0.9,
    )
    capped = " (colours capped at 95th percentile)" if metric == "TotPop90" else ""
    fig.update_traces(marker_line_width=0.5, marker_line_color="white")
    fig.update_layout(
        height=560, margin={"l": 0, "r": 0, "t": 40, "b": 0},
        title=f"Georgia counties: {title.lower()}{capped}",
        coloraxis_colorbar={"title": {"text": title}},
    )
    return fig
