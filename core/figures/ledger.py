"""Plotly figure of a data set's cumulative privacy spend, from ``core.privacy.project_ledger`` tables
(no Streamlit here)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from core.privacy.project_ledger import Cap


def cumulative_figure(cumulative: pd.DataFrame, cap: Cap | None = None, unit: str = "epsilon",
                      delta: float | None = None) -> go.Figure:
    """Running total after each release (``cumulative_frame``), in ``unit``, with the cap as a line; an
    epsilon axis names the delta its zCDP part was converted at (``delta``)."""
    fig = go.Figure()
    values = cumulative[unit] if unit in cumulative else pd.Series(dtype=float)
    hover = [f"{label} ({page})" for label, page in zip(cumulative["label"], cumulative["page"])]
    # the total starts at nothing before the first release
    x = [0, *cumulative["release"]]
    values = [0.0, *values]
    hover = ["before any release", *hover]
    fig.add_scatter(x=x, y=values, mode="lines+markers", name=f"total {unit}",
                    line=dict(shape="hv", color="#4C78A8"), text=hover,
                    hovertemplate="release %{x}: %{text}<br>total " + unit + " %{y:.4g}<extra></extra>")
    if cap is not None and cap.unit == unit:
        fig.add_hline(y=cap.amount, line=dict(color="#E45756", dash="dash"),
                      annotation_text=f"cap {cap.amount:g}" + (f" at delta {cap.delta:.2g}" if unit == "epsilon"
                                                                 else ""), annotation_position="top left")
    title = "Total privacy spent after each release"
    axis = ("rho (zCDP, composed)" if unit != "epsilon" else
            "epsilon (composed)" if delta is None else f"epsilon at delta {delta:.2g} (composed)")
    fig.update_layout(title=title, xaxis_title="release (in the order made)", yaxis_title=axis, height=360,
                      margin=dict(t=50, b=40, l=60, r=10), showlegend=False)
    fig.update_xaxes(dtick=1, rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    return fig
