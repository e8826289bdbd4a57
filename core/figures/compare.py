"""Figures for comparing a pinned scenario (A) with another (B): headline changes and A/B overlays (no streamlit)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.areas import OverlaySpec

A_COLOUR, B_COLOUR = "#E69F00", "#0072B2"  # Okabe-Ito orange and blue: distinct for colour-blind readers
DIRECTION_COLOURS = {"higher": "#0072B2", "lower": "#D55E00", "same": "#999999", "n/a": "#cccccc"}


def headline_change_figure(delta: pd.DataFrame) -> go.Figure:
    """Horizontal bars of each headline number's change in percent of A (numbers without a
    percentage, such as changes from 0, are listed with no bar); hover shows A, B and the change."""
    d = delta.iloc[::-1]
    pct = d["change_pct"].astype(float)
    fig = go.Figure(go.Bar(
        x=pct.fillna(0.0), y=d["number"], orientation="h",
        marker_color=[DIRECTION_COLOURS.get(v, "#999999") for v in d["direction"]],
        customdata=np.column_stack([d["A"], d["B"], d["change"]]),
        hovertemplate="<b>%{y}</b><br>A: %{customdata[0]:.4g}<br>B: %{customdata[1]:.4g}<br>"
                      "B - A: %{customdata[2]:+.4g}<br>change: %{x:+.1f}% of A<extra></extra>"))
    fig.add_vline(x=0, line_color="#444", line_width=1)
    fig.update_layout(title="Headline numbers: change from A to B (% of A)", xaxis_title="change (% of A)",
                      height=max(220, 40 + 28 * len(d)), margin=dict(l=10, r=10, t=40, b=30), showlegend=False)
    return fig


def _numeric_x(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and values.nunique() > 8


def overlay_figure(a: pd.DataFrame, b: pd.DataFrame, spec: OverlaySpec) -> go.Figure:
    """The page's main figure with A (orange, dashed or hatched) and B (blue, solid) on one set of axes."""
    fig = go.Figure()
    a, b = spec.rows(a), spec.rows(b)
    numeric = _numeric_x(pd.concat([a[spec.x], b[spec.x]])) if spec.line is None else spec.line
    for label, rows, colour in (("A (pinned)", a, A_COLOUR), ("B (current)", b, B_COLOUR)):
        y = spec.y_column(rows)
        if y is None:
            continue
        groups = rows.groupby(spec.series, sort=False) if spec.series else [(None, rows)]
        for name, g in groups:
            trace_name = label if name is None else f"{label}: {name}"
            if numeric:
                g = g.sort_values(spec.x)
                fig.add_scatter(x=g[spec.x], y=g[y], mode="lines+markers", name=trace_name,
                                line=dict(color=colour, dash="dash" if label.startswith("A") else "solid"))
            else:
                fig.add_bar(x=g[spec.x].astype(str), y=g[y], name=trace_name, marker_color=colour,
                            marker_pattern_shape="/" if label.startswith("A") else "",
                            opacity=0.75 if label.startswith("A") else 1.0)
    fig.update_layout(title=spec.title, barmode="group", xaxis_title=spec.x, yaxis_title=spec.y_label or spec.y[0],
                      height=380, margin=dict(l=10, r=10, t=50, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.2))
    return fig


def headline_overlay_figure(delta: pd.DataFrame) -> go.Figure:
    """A and B headline numbers side by side (the main figure of pages without an overlay spec)."""
    fig = go.Figure()
    fig.add_bar(x=delta["number"], y=delta["A"], name="A (pinned)", marker_color=A_COLOUR,
                marker_pattern_shape="/", opacity=0.75)
    fig.add_bar(x=delta["number"], y=delta["B"], name="B (current)", marker_color=B_COLOUR)
    fig.update_layout(title="Headline numbers, A and B", barmode="group", height=380,
                      margin=dict(l=10, r=10, t=50, b=40), legend=dict(orientation="h", yanchor="top", y=-0.35))
    return fig
