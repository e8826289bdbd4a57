"""Plotly figures for elicitation sessions: progress per stakeholder and agreement on pairs."""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go


def progress_figure(progress: pd.DataFrame) -> go.Figure:
    """Stacked bars per stakeholder: cards answered, skipped and still open."""
    fig = go.Figure()
    if progress.empty:
        fig.add_annotation(text="No stakeholder has joined yet", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        fig.update_layout(height=220, xaxis_visible=False, yaxis_visible=False)
        return fig
    # Pseudonyms are typed by people: plotly reads tags such as <a href> in labels, so escape them.
    names = progress["stakeholder"].astype(str).map(html.escape)
    judged = progress["answered"] - progress["skipped"]
    remaining = (progress["of"] - progress["answered"]).clip(lower=0)
    # Each part has its own fill pattern besides its colour, so the parts stay apart without colour vision
    # or in a grey print; the counts are in the progress table beside the chart.
    for label, values, color, pattern in (("answered", judged, "#2e7d32", ""),
                                          ("skipped", progress["skipped"], "#f9a825", "/"),
                                          ("open", remaining, "#cfd8dc", ".")):
        fig.add_bar(y=names, x=values, name=label, orientation="h", marker_color=color,
                    marker_pattern_shape=pattern, hovertemplate="%{y}: %{x} " + label + "<extra></extra>")
    fig.update_layout(barmode="stack", height=max(220, 28 * len(progress) + 90),
                      margin=dict(l=10, r=10, t=30, b=10), xaxis_title="cards",
                      legend=dict(orientation="h", y=1.08), yaxis=dict(autorange="reversed"))
    return fig


def agreement_figure(constraints: pd.DataFrame, min_judges: int = 2) -> go.Figure:
    """Share of judges asking for equal treatment on each pair seen by several judges."""
    seen = constraints[constraints["n_judges"] >= min_judges].copy()
    fig = go.Figure()
    if seen.empty:
        fig.add_annotation(text="No pair has been judged by two or more stakeholders yet", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_layout(height=220, xaxis_visible=False, yaxis_visible=False)
        return fig
    seen["share_same"] = seen["n_same"] / seen["n_judges"]
    seen = seen.sort_values("share_same")
    labels = [f"{i} & {j}" for i, j in zip(seen["i"], seen["j"])]
    fig.add_bar(x=labels, y=seen["share_same"], marker_color="#1565c0",
                customdata=seen[["n_judges", "n_same"]].to_numpy(),
                hovertemplate="pair %{x}<br>%{customdata[1]} of %{customdata[0]} say treat alike<extra></extra>")
    fig.add_hline(y=0.5, line_dash="dot", line_color="grey", annotation_text="half the judges",
                  annotation_position="top left")
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=30, b=10), yaxis=dict(range=[0, 1],
                      title="share saying 'same'"), xaxis_title="pair (row indices)")
    return fig
