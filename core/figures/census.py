"""Plotly figures for the Budget allocation page, built from core.census tables (no Streamlit here)."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from core.figures.axes import tidy_log_axes

SIMULATION_NOTE = "simulation, not a release"
METRIC_NAMES = {"MAE": "mean |error| per query", "RMSE": "RMSE per query",
                "E max error": "expected largest error over the k queries",
                "95th pct of max error": "95th percentile of the largest error"}


#: The census levels from the top down; a geography's other level names keep the order they come in.
TOP_DOWN = ("nation", "state", "county", "tract", "block group", "block")


def top_down(levels) -> list[str]:
    """Level names in top-down order: the census ones by TOP_DOWN, any others after them as first seen."""
    seen = list(dict.fromkeys(str(v) for v in levels))
    known = [lv for lv in TOP_DOWN if lv in seen]
    return known + [lv for lv in seen if lv not in TOP_DOWN] if known else seen


def _levels_top_down(fig: go.Figure, levels) -> go.Figure:
    """Pin every x axis of a by-level chart to the top-down order, whatever order the rows come in."""
    fig.update_xaxes(categoryorder="array", categoryarray=top_down(levels))
    return fig


def budget_shares_figure(levels: pd.DataFrame, unit: str) -> go.Figure:
    """Bar chart of the budget given to each level."""
    col = f"budget ({unit})"
    fig = px.bar(levels, x="level", y=col, text=levels["share"].map(lambda s: f"{100 * s:.1f}%"))
    fig.update_layout(title="Budget per level", yaxis_title=f"budget ({unit})", height=320,
                      margin=dict(t=50, b=30, l=40, r=10))
    return tidy_log_axes(_levels_top_down(fig, levels["level"]))


def target_error_figure(targets: pd.DataFrame) -> go.Figure:
    """Analytic error sd of each target (bars) with the seeded ToyDown estimate and its 95% interval."""
    fig = go.Figure()
    fig.add_bar(x=targets["target"], y=targets["analytic sd"], name="analytic (Cor. 3)",
                marker_color="#4C78A8", opacity=0.8)
    sim = targets.dropna(subset=["simulated sd"])
    if not sim.empty:
        fig.add_scatter(x=sim["target"], y=sim["simulated sd"], mode="markers", name=f"ToyDown Monte Carlo ({SIMULATION_NOTE})",
                        marker=dict(color="#E45756", size=11, symbol="diamond"),
                        error_y=dict(type="data", symmetric=False,
                                     array=sim["sd 95% high"] - sim["simulated sd"],
                                     arrayminus=sim["simulated sd"] - sim["sd 95% low"]))
    fig.update_layout(title="Error sd of each target: closed form vs simulated ToyDown", yaxis_type="log",
                      yaxis_title="standard deviation of the error (people)", height=420,
                      legend=dict(orientation="h", y=-0.2), margin=dict(t=50, b=30, l=50, r=10))
    return tidy_log_axes(fig)


def figure2_figure(curves: pd.DataFrame, optimum: pd.DataFrame) -> go.Figure:
    """Leaf variance against the top level's share of the upper budget, one line per bottom share, optimum marked."""
    data = curves.assign(**{"bottom share": curves["bottom share"].map(lambda b: f"{b:.2f}")})
    fig = px.line(data, x="top share of upper levels", y="leaf variance", color="bottom share")
    fig.add_scatter(x=optimum["top share of upper levels"], y=optimum["leaf variance"], mode="markers+text",
                    marker=dict(size=14, symbol="star", color="black"), name="optimum",
                    text=["optimum (" + ", ".join(f"{x:.3g}" for x in b) + ")" for b in optimum["budgets"]], textposition="top center")
    fig.update_layout(title="Leaf variance vs split of the upper levels (three-level tree)", yaxis_type="log",
                      xaxis_title="top level's share of the two upper levels' budget", yaxis_title="variance of one leaf's error",
                      height=420, margin=dict(t=50, b=30, l=50, r=10))
    return tidy_log_axes(fig)


def presets_figure(table: pd.DataFrame, by: str) -> go.Figure:
    """Grouped bars of error sd per split, for each level (by='level') or target (by='target')."""
    fig = px.bar(table, x=by, y="sd", color="split", barmode="group", log_y=True)
    what = "whole units at each level" if by == "level" else "each target"
    fig.update_layout(title=f"Error sd of {what} under each split", yaxis_title="error sd (people, log scale)",
                      height=400, margin=dict(t=50, b=30, l=50, r=10))
    return tidy_log_axes(_levels_top_down(fig, table["level"]) if by == "level" else fig)


def mechanism_figure(sweep: pd.DataFrame, show_bound: bool = True) -> go.Figure:
    """Error against epsilon on log-log axes, one panel per metric, one line per mechanism and calibration."""
    data = sweep if show_bound else sweep[sweep["calibration"] != "proven bound"]
    data = data.assign(curve=data["label"] + data["calibration"].map(
        lambda c: " (proven bound)" if c == "proven bound" else ""))
    fig = px.line(data, x="epsilon", y="value", color="curve", facet_col="metric", facet_col_wrap=2,
                  log_x=True, log_y=True, markers=True, line_dash="calibration",
                  category_orders={"metric": ["MAE", "RMSE", "E max error", "95th pct of max error"]})
    fig.update_yaxes(matches=None, showticklabels=True, title_text="")
    fig.update_yaxes(title_text="error (counts)", col=1)
    fig.update_xaxes(title_text="")
    fig.update_xaxes(title_text="epsilon", row=1)          # bottom row only: the top row's would hit the titles
    fig.for_each_annotation(lambda a: a.update(text=METRIC_NAMES.get(a.text.split("=")[-1], a.text.split("=")[-1])))
    fig.update_layout(title="Error of k overlapping counting queries against epsilon", height=680,
                      legend=dict(orientation="h", y=-0.12, title_text=""), margin=dict(t=60, b=30, l=50, r=10))
    return tidy_log_axes(fig)


def invariant_figure(effects: pd.DataFrame, column: str) -> go.Figure:
    """Whole-unit error sd per level for each choice of invariant levels."""
    fig = px.bar(effects, x="level", y=column, color="invariant", barmode="group")
    fig.update_layout(title=f"Whole-unit error sd per level with invariants ({column})",
                      yaxis_title="error sd (people)", height=380, margin=dict(t=50, b=30, l=50, r=10))
    return tidy_log_axes(_levels_top_down(fig, effects["level"]))


def delta_z_heatmap(cells: pd.DataFrame, n: int) -> go.Figure:
    """Heatmap of the count's sensitivity Delta_z over the dependence parameters (tidy z1, z0, Delta_z)."""
    grid = cells.pivot(index="z1", columns="z0", values="Delta_z")
    fig = px.imshow(grid.to_numpy(), x=[f"{z:g}" for z in grid.columns], y=[f"{z:g}" for z in grid.index],
                    text_auto=True, color_continuous_scale="Viridis", aspect="auto",
                    labels=dict(x="z0 (others are 1 given X_j = 0)", y="z1 (others are 1 given X_j = 1)",
                                color="Delta_z"))
    fig.update_layout(title=f"Sensitivity of a count of n = {n} records under dependence", height=420,
                      margin=dict(t=50, b=30, l=50, r=10))
    return tidy_log_axes(fig)


def wem_cells_figure(cells: pd.DataFrame) -> go.Figure:
    """Mean absolute error per cell against its true count, for each WEM variant."""
    fig = px.scatter(cells, x="true count", y="mean abs error", color="method", log_x=False)
    fig.update_layout(title=f"Per-cell error of the count vector with a public total ({SIMULATION_NOTE})",
                      height=380, margin=dict(t=50, b=30, l=50, r=10), legend=dict(orientation="h", y=-0.25))
    return tidy_log_axes(fig)


def algorithm_figure(errors: pd.DataFrame) -> go.Figure:
    """Mean absolute error of unit totals per level for each algorithm (mean over runs)."""
    mean = errors.groupby(["algorithm", "level"], sort=False, as_index=False)["MAE of unit totals"].mean()
    fig = px.bar(mean, x="level", y="MAE of unit totals", color="algorithm", barmode="group", log_y=True)
    fig.update_layout(title=f"Error of unit totals: ToyDown vs TopDown-lite ({SIMULATION_NOTE})",
                      yaxis_title="mean |error| of a unit's total (people)", height=400,
                      margin=dict(t=50, b=30, l=50, r=10))
    # A level held exact has zero error, which a log axis cannot draw: say so under the level's name.
    exact = mean[mean["MAE of unit totals"] == 0].groupby("level", sort=False)["algorithm"].agg(", ".join)
    levels = top_down(mean["level"])
    _levels_top_down(fig, levels)
    if len(exact):
        fig.update_xaxes(tickvals=levels, ticktext=[f"{lv}<br><sub>exact: {exact[lv]}</sub>" if lv in exact.index
                                                    else lv for lv in levels])
    return tidy_log_axes(fig)
