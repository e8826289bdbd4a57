"""Maps the pages and the command line's A/B report both draw (plotly only; nothing fetched: a white
background and no text layers)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

__all__ = ["difference_map"]


def difference_map(outlines, outline_geojson: dict, delta: pd.DataFrame, what: str) -> go.Figure:
    """Districts coloured by B − A of one district number (``delta``: district, A, B, change), on a
    diverging scale centred on 0; districts only one side has are drawn grey."""
    values = outlines[["district"]].merge(delta[["district", "A", "B", "change"]], on="district", how="left")
    change = values["change"].astype(float)
    m = float(np.nanmax(np.abs(change))) if change.notna().any() else 1.0
    bounds = outlines.total_bounds
    center = {"lon": float((bounds[0] + bounds[2]) / 2), "lat": float((bounds[1] + bounds[3]) / 2)}
    dx = max(bounds[2] - bounds[0], 1e-4)
    dy = max(bounds[3] - bounds[1], 1e-4) / np.cos(np.radians(center["lat"]))
    zoom = float(np.clip(min(np.log2(700 * 360 / (512 * dx)), np.log2(440 * 360 / (512 * dy))), 2, 16))
    ids = values["district"].astype(str)
    fig = go.Figure(go.Choroplethmap(
        geojson=outline_geojson, locations=ids, featureidkey="properties.district", z=change.fillna(0.0),
        zmin=-max(m, 1e-9), zmax=max(m, 1e-9), colorscale="RdBu_r", marker_opacity=0.85, marker_line_width=1.5,
        marker_line_color="#222", customdata=values[["A", "B"]].to_numpy(dtype=float),
        hovertemplate="<b>District %{location}</b><br>A: %{customdata[0]:.4g}<br>B: %{customdata[1]:.4g}<br>"
                      "B − A: %{z:+.4g}<extra></extra>",
        colorbar=dict(title=dict(text=f"B − A: {what}")), name=""))
    missing = change.isna().to_numpy()
    if missing.any():
        fig.add_trace(go.Choroplethmap(geojson=outline_geojson, locations=ids[missing],
                                       featureidkey="properties.district", z=np.zeros(int(missing.sum())),
                                       colorscale=[[0, "#bbbbbb"], [1, "#bbbbbb"]], showscale=False,
                                       hoverinfo="skip", name="only in B"))
    fig.update_layout(map=dict(style="white-bg", center=center, zoom=zoom), height=480,
                      title=f"Per-district difference, B − A: {what}", margin=dict(l=0, r=0, t=40, b=0))
    return fig
