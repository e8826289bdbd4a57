"""Plotly figures for learning under elicited fairness constraints (no Streamlit here)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

HULL = "#4C78A8"
POINT = "#9D9D9D"
PICK = "#E45756"
WORST = "#F58518"


def frontier_figure(points: pd.DataFrame, best_constant: float, selected: float | None = None,
                    symbol: str = "γ", unfairness_label: str = "largest gap p_i − p_j over elicited pairs"
                    ) -> go.Figure:
    """Fitted (unfairness, error) points, their lower convex hull and the always-reachable line."""
    fig = go.Figure()
    close = np.r_[False, np.diff(points["unfairness"].to_numpy()) < 0.03]   # avoid stacked labels
    fig.add_scatter(x=points["unfairness"], y=points["error"], mode="markers+text",
                    text=["" if c else f"{symbol}={v:g}" for v, c in zip(points["target"], close)],
                    textposition="top right", customdata=points["target"],
                    marker=dict(color=POINT, size=9), name="fitted mixtures",
                    hovertemplate=f"{symbol}=%{{customdata}}<br>unfairness %{{x:.3f}}"
                                  "<br>error %{y:.4f}<extra></extra>")
    hull = points[points["on_hull"]].sort_values("unfairness")
    fig.add_scatter(x=hull["unfairness"], y=hull["error"], mode="lines+markers",
                    line=dict(color=HULL, width=3), marker=dict(size=10), name="frontier (lower convex hull)",
                    hovertemplate="unfairness %{x:.3f}<br>error %{y:.4f}<extra></extra>")
    top = points.loc[points["target"].idxmax()]
    fig.add_scatter(x=[0.0, top["unfairness"]], y=[best_constant, top["error"]], mode="lines",
                    line=dict(color=WORST, dash="dot"),
                    name="mixing the best constant with the least-constrained fit")
    held_x = "heldout_realized_gamma" if symbol == "γ" else "heldout_mean_excess"
    if "error_heldout" in points and points["error_heldout"].notna().any() and held_x in points:
        fig.add_scatter(x=points[held_x], y=points["error_heldout"], mode="markers",
                        marker=dict(symbol="x", color="#54A24B", size=8),
                        name="held-out individuals and pairs")
    if selected is not None:
        sel = points[np.isclose(points["target"], selected)]
        fig.add_scatter(x=sel["unfairness"], y=sel["error"], mode="markers",
                        marker=dict(color=PICK, size=18, symbol="circle-open", line=dict(width=3)),
                        name="operating point")
    fig.update_layout(title=dict(text="Accuracy against fairness to the elicited pairs", y=0.98,
                                 yanchor="top"),
                      xaxis_title=f"realised unfairness: {unfairness_label}",
                      yaxis_title="classification error", height=580,
                      # legend well below the x-axis title: long entries wrap onto several rows
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0),
                      margin=dict(t=50, b=170, l=50, r=10))
    return fig


def group_rates_figure(groups: pd.DataFrame, title: str) -> go.Figure:
    """False positive and false negative rates by race and sex with 95% intervals."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.72, 0.28], shared_yaxes=True,
                        subplot_titles=("by race", "by sex"))
    for col, attribute in enumerate(("race", "sex"), start=1):
        part = groups[groups["attribute"] == attribute]
        for rate, color in (("fpr", "#4C78A8"), ("fnr", "#F58518")):
            fig.add_bar(x=part["group"], y=part[rate], name=rate.upper(), marker_color=color,
                        legendgroup=rate, showlegend=col == 1,
                        customdata=part["n"], hovertemplate="%{x}: %{y:.3f} (n=%{customdata})<extra></extra>",
                        error_y=dict(type="data", symmetric=False,
                                     array=part[f"{rate}_high"] - part[rate],
                                     arrayminus=part[rate] - part[f"{rate}_low"]),
                        row=1, col=col)
    fig.update_layout(title=title, barmode="group", height=400, yaxis_title="rate",
                      yaxis_range=[0, 1], legend=dict(orientation="h", y=-0.2),
                      margin=dict(t=70, b=30, l=50, r=10))
    return fig


def fpr_gap_figure(gap: pd.DataFrame, points: pd.DataFrame, symbol: str, label: str) -> go.Figure:
    """FPR gap between two groups against realised unfairness along the sweep, with 95% intervals."""
    data = gap.merge(points[["target", "unfairness"]], on="target").sort_values("unfairness")
    fig = go.Figure()
    fig.add_scatter(x=data["unfairness"], y=data["fpr_gap"], mode="lines+markers",
                    customdata=data["target"],
                    hovertemplate=f"{symbol}=%{{customdata}}<br>unfairness %{{x:.3f}}"
                                  "<br>FPR gap %{y:.3f}<extra></extra>",
                    error_y=dict(type="data", symmetric=False, array=data["high"] - data["fpr_gap"],
                                 arrayminus=data["fpr_gap"] - data["low"]),
                    marker=dict(color=HULL), name="FPR gap")
    fig.add_hline(y=0, line=dict(color="#BBBBBB", dash="dot"))
    fig.update_layout(title=label, xaxis_title="realised unfairness to the elicited pairs",
                      yaxis_title="difference in false positive rate", height=340,
                      margin=dict(t=50, b=30, l=50, r=10), showlegend=False)
    return fig


def trajectory_figure(trajectories: pd.DataFrame, symbol: str = "γ") -> go.Figure:
    """Error and largest pair gap of the running average by round, one line per swept value."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("error of the running mixture",
                                                        "largest pair gap of the running mixture"))
    for value, part in trajectories.groupby("target"):
        if len(part) < 2:
            continue
        fig.add_scatter(x=part["round"], y=part["error"], mode="lines", name=f"{symbol}={value:g}",
                        legendgroup=str(value), row=1, col=1)
        fig.add_scatter(x=part["round"], y=part["max_violation"], mode="lines", name=f"{symbol}={value:g}",
                        legendgroup=str(value), showlegend=False, row=1, col=2)
    fig.update_layout(height=340, margin=dict(t=50, b=30, l=50, r=10), xaxis_title="round",
                      xaxis2_title="round")
    return fig


def roc_figure(roc: pd.DataFrame, target: dict | None, cutoff: float, soft: dict | None = None) -> go.Figure:
    """Group ROC curves of the calibrated score with the common operating point of the panel, or
    each group's rates under the soft trade-off."""
    fig = go.Figure()
    for group, part in roc.groupby("group"):
        fig.add_scatter(x=part["fpr"], y=part["tpr"], mode="lines+markers", name=f"ROC {group}",
                        marker=dict(size=5))
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#BBBBBB", dash="dot"),
                    name="chance", showlegend=False)
    if target:
        fig.add_scatter(x=[target["fpr"]], y=[target["tpr"]], mode="markers",
                        marker=dict(color=PICK, size=14, symbol="star"),
                        name=f"equal error rates (cut-off {cutoff:.2f})")
    if soft:
        groups = [g for g in soft if isinstance(soft[g], dict)]
        fig.add_scatter(x=[soft[g]["fpr"] for g in groups], y=[soft[g]["tpr"] for g in groups],
                        mode="markers+lines+text", text=groups, textposition="bottom right",
                        line=dict(color=WORST, dash="dot"), marker=dict(color=WORST, size=12, symbol="diamond"),
                        name="soft trade-off: each group's rates")
    fig.update_layout(title="Attainable error rates by group", xaxis_title="false positive rate",
                      yaxis_title="true positive rate", height=400, xaxis_range=[0, 1], yaxis_range=[0, 1],
                      legend=dict(orientation="h", y=-0.25), margin=dict(t=50, b=30, l=50, r=10))
    return fig


def calibration_figure(calibration: pd.DataFrame, after: str = "after: equal error rates") -> go.Figure:
    """Observed outcome rate against score, by group, before and after the post-processing."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=("before: learned score", after))
    colors = {}
    palette = ["#4C78A8", "#F58518", "#54A24B", "#B279A2"]
    for col, stage in enumerate(("before", "after"), start=1):
        part = calibration[calibration["stage"] == stage]
        for group, g in part.groupby("group"):
            color = colors.setdefault(group, palette[len(colors) % len(palette)])
            fig.add_scatter(x=g["score"], y=g["observed"], mode="markers+lines", name=str(group),
                            marker=dict(size=np.clip(np.sqrt(g["n"].to_numpy()), 4, 18), color=color),
                            legendgroup=str(group), showlegend=col == 1, row=1, col=col)
        fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#BBBBBB", dash="dot"),
                        showlegend=False, row=1, col=col)
    fig.update_layout(height=380, yaxis_title="observed reoffence rate", xaxis_title="score",
                      xaxis2_title="score", margin=dict(t=50, b=30, l=50, r=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig
