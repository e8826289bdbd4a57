"""Plotly figures for the group fairness and ranking page (no streamlit here)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22"]
MODEL_ORDER = ("ERM (plain accuracy)", "minimax (level 1)", "lexifair level 2", "lexifair level 3")
RANKING_LABELS = {"original": "original scores", "counterfactual": "counterfactual scores",
                  "quota": "quota (proportional) baseline"}

# Human column labels (with units) for the tables the page shows.
GROUP_COLUMNS = {"model": "Model", "group": "Group", "size": "People (count)",
                 "in_sample_error": "Training error (share)", "held_out_error": "Held-out error (share)",
                 "held_out_low": "Held-out error, 5% bootstrap", "held_out_high": "Held-out error, 95% bootstrap",
                 "rank_in_model": "Rank (1 = worst off: largest held-out error)"}
LEVEL_COLUMNS = {"level": "Level", "eta_hat": "eta-hat (sum of the worst j errors)", "B": "Multiplier bound B",
                 "nu": "Game gap nu", "realised_excess": "Realised excess over the bound's base",
                 "theory_bound": "Theory: allowed excess (j L + 2 nu) / B", "loss": "Loss"}
MEASURE_COLUMNS = {"ranking": "Ranking", "k": "k (top places)", "group": "Group",
                   "selection_rate": "Selection rate (1 = parity)",
                   "sensitivity": "Sensitivity vs observed top k (share)",
                   "utility_loss": "Utility loss (share of observed score)", "ap_at_k": "AP@k (0-1)"}


def ordered_models(models) -> list[str]:
    """ERM, minimax, then the lexifair levels, then anything else."""
    models = list(models)
    known = [m for m in MODEL_ORDER if m in set(models)]
    return known + [m for m in models if m not in known]


def worst_off_lines(view: pd.DataFrame) -> str:
    """Markdown list, one line per model (ERM first), from ``GroupFairnessResult.worst_off()``: the group,
    its held-out error to three decimals and the interval words the report uses."""
    view = view.set_index("model")
    return "\n".join(f"- {model}: {view.loc[model, 'group']}, **{view.loc[model, 'held_out_error']:.3f}** "
                     f"— {view.loc[model, 'interval']}" for model in ordered_models(view.index))


def group_error_figure(groups: pd.DataFrame) -> go.Figure:
    """Held-out error per group, worst first, one panel per model, with bootstrap intervals."""
    models = ordered_models(list(dict.fromkeys(groups["model"])))
    fig = make_subplots(rows=len(models), cols=1, subplot_titles=models, shared_xaxes=True,
                        vertical_spacing=0.06)
    for r, model in enumerate(models, start=1):
        g = groups[groups["model"] == model].sort_values("held_out_error")
        err_hi = (g["held_out_high"] - g["held_out_error"]).to_numpy()
        err_lo = (g["held_out_error"] - g["held_out_low"]).to_numpy()
        fig.add_trace(go.Bar(x=g["held_out_error"], y=g["group"], orientation="h", marker_color=PALETTE[r - 1],
                             error_x=dict(type="data", array=err_hi, arrayminus=err_lo, visible=True),
                             customdata=np.c_[g["in_sample_error"], g["size"]], name=model, showlegend=False,
                             hovertemplate="%{y}<br>held-out error %{x:.3f}<br>training error "
                                           "%{customdata[0]:.3f}<br>%{customdata[1]} people<extra></extra>"),
                      row=r, col=1)
    fig.update_xaxes(title_text="Held-out error (share misclassified; bars: 90% bootstrap interval)",
                     row=len(models), col=1, rangemode="tozero")
    fig.update_layout(height=230 * len(models) + 80, margin=dict(l=10, r=10, t=40, b=40))
    return fig


def eta_figure(trajectory: pd.DataFrame) -> go.Figure:
    """Running average of eta_j over the rounds, one line per level."""
    fig = go.Figure()
    for i, (level, t) in enumerate(trajectory.groupby("level")):
        fig.add_trace(go.Scatter(x=t["round"], y=t["eta_running_average"], name=f"level {level}",
                                 line=dict(color=PALETTE[i])))
    fig.update_layout(xaxis_title="Round", yaxis_title="eta-hat so far (sum of the worst j errors)",
                      height=320, margin=dict(l=10, r=10, t=30, b=40))
    return fig


def slope_figure(changes: pd.DataFrame, top: int) -> go.Figure:
    """Rank of each person near the top, original (left) to counterfactual (right), by group."""
    c = changes[(changes["original_rank"] <= top) | (changes["counterfactual_rank"] <= top)]
    fig = go.Figure()
    for i, (group, g) in enumerate(c.groupby("group")):
        n = len(g)
        xs = np.tile([0.0, 1.0, np.nan], n)
        ys = np.column_stack([g["original_rank"], g["counterfactual_rank"], np.full(n, np.nan)]).ravel()
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=group, opacity=0.55,
                                 line=dict(color=PALETTE[i % len(PALETTE)], width=1), marker=dict(size=4)))
    fig.add_hline(y=top + 0.5, line_dash="dot", line_color="grey")
    fig.update_yaxes(autorange="reversed", title_text="Rank (1 = first)", range=[min(2 * top, c[["original_rank", "counterfactual_rank"]].max().max()) + 1, 0])
    fig.update_xaxes(tickvals=[0, 1], ticktext=["original", "counterfactual"], range=[-0.1, 1.1])
    fig.update_layout(height=480, margin=dict(l=10, r=10, t=30, b=30), legend_title_text="Group")
    return fig


def selection_rate_figure(measures: pd.DataFrame) -> go.Figure:
    """Selection rate over k per intersectional group, one panel per ranking; 1 is parity."""
    rankings = [r for r in RANKING_LABELS if r in set(measures["ranking"])]
    fig = make_subplots(rows=1, cols=len(rankings), subplot_titles=[RANKING_LABELS[r] for r in rankings],
                        shared_yaxes=True)
    groups = list(dict.fromkeys(measures["group"]))
    for c, name in enumerate(rankings, start=1):
        m = measures[measures["ranking"] == name]
        for i, group in enumerate(groups):
            g = m[m["group"] == group]
            fig.add_trace(go.Scatter(x=g["k"], y=g["selection_rate"], mode="lines+markers", name=group,
                                     legendgroup=group, showlegend=c == 1,
                                     line=dict(color=PALETTE[i % len(PALETTE)])), row=1, col=c)
        fig.add_hline(y=1.0, line_dash="dot", line_color="grey", row=1, col=c)
        fig.update_xaxes(title_text="k (top places)", type="log", row=1, col=c)
    fig.update_yaxes(title_text="Selection rate (share in top k / share in input)", row=1, col=1, rangemode="tozero")
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=40, b=40), legend_title_text="Group")
    return fig
