"""Plotly figures for the Stratified synthesis page, built from core.synthesis tables (no Streamlit here)."""
from __future__ import annotations

import pandas as pd
import plotly.colors as pcolors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures.axes import tidy_log_axes

METHOD_COLORS = {"stratified": "#E45756", "pooled": "#4C78A8"}
METRIC_LABELS = {
    "tvd_2way": "two-way marginal TVD (lower is better)",
    "tvd_1way": "one-way marginal TVD (lower is better)",
    "workload_3way": "three-way workload error, mean L1 (lower is better)",
    "accuracy": "TSTR accuracy on real held-out rows (higher is better)",
    "parity_error": "parity error on category proportions (lower is better)",
    "max_disparity": "max disparity over groups and columns, category proportions (lower is better)",
    "parity_error_codes": "paper's parity error on means of integer codes (lower is better)",
    "max_disparity_codes": "paper's max disparity on means of integer codes (lower is better)",
    "fpr_gap": "false-positive-rate gap between groups",
    "fnr_gap": "false-negative-rate gap between groups",
}


def _rgba(color: str, alpha: float) -> str:
    r, g, b = pcolors.hex_to_rgb(color) if color.startswith("#") else pcolors.unlabel_rgb(color)
    return f"rgba({int(r)}, {int(g)}, {int(b)}, {alpha})"


def _band(fig: go.Figure, x, lo, hi, color: str, group: str, row=None, col=None) -> None:
    """Filled band between ``lo`` and ``hi`` (min and max over seeds)."""
    kw = dict(row=row, col=col) if row else {}
    fig.add_scatter(x=list(x) + list(x)[::-1], y=list(hi) + list(lo)[::-1], fill="toself", mode="lines",
                    line=dict(width=0), fillcolor=_rgba(color, 0.15), hoverinfo="skip", showlegend=False,
                    legendgroup=group, **kw)


#: Up to this many groups every line is drawn in its own colour (about what one categorical palette keeps
#: apart); beyond it only the highlighted ones are.
ALL_COLOURED = 10
#: Thin grey for the groups that are not highlighted (drawn first, under the coloured ones, no bands).
GREY = "#C4C4C4"
HIGHLIGHT_COLORS = ("#D62728", "#9467BD", "#FF7F0E", "#1F77B4", "#2CA02C", "#8C564B", "#E377C2", "#17BECF")
SIZE_NOTE = ("n: the group's real training rows, the rows its error is measured against (the same numbers as the "
             "Smallest strata table). The Strata setup table counts every row, the held-out test rows included, "
             "so its sizes are larger.")


def highlighted_groups(worst: pd.DataFrame | None, sizes: dict[str, int], n_worst: int = 3,
                       n_smallest: int = 3) -> dict[str, str]:
    """Which groups to colour, and why: the groups the result names worst (``worst_groups``' names,
    those at the largest epsilon first, then by how often they are worst) and the smallest by real rows.

    Only picks names from the result's views; it computes no number of its own. Returns
    {group: reason}, worst first.
    """
    out: dict[str, str] = {}
    if worst is not None and len(worst) and "worst_group_name" in worst:
        named = worst[worst["worst_group_name"].map(lambda g: isinstance(g, str))]
        top = named[named["epsilon"] == named["epsilon"].max()]["worst_group_name"].tolist()
        by_count = named["worst_group_name"].value_counts(sort=True).index.tolist()
        for g in dict.fromkeys(top + by_count):
            if len(out) >= n_worst:
                break
            out[g] = "worst"
    present = [g for g, n in sorted(sizes.items(), key=lambda kv: (kv[1], kv[0])) if n > 0]
    for g in present[:n_smallest]:
        out[g] = "worst, smallest" if out.get(g) == "worst" else "smallest"
    return out


def _group_name(g: str, sizes: dict[str, int] | None, why: str | None = None) -> str:
    size = f"n={sizes[g]:,}" if sizes and g in sizes else ""
    extra = ", ".join(x for x in (size, why) if x)
    return f"{g} ({extra})" if extra else g


def group_curves_figure(curves: pd.DataFrame, metric: str, sizes: dict[str, int] | None = None,
                        bands: bool = True, log_y: bool = False, highlight: dict[str, str] | None = None,
                        facets: bool = False) -> go.Figure:
    """Metric against epsilon, one line per group, stratified and pooled side by side (shared y axis).

    ``curves`` holds epsilon, method, group, mean, min, max (from the sweep's ``curves`` view) and
    ``sizes`` each group's real rows (its ``real_rows`` column). With more than ALL_COLOURED groups only
    the ``highlight`` groups (see :func:`highlighted_groups`) are coloured, labelled at their line's end
    and banded; the rest are thin grey lines under them, with one legend entry. ``facets`` draws small
    multiples instead (:func:`group_facets_figure`).
    """
    if facets:
        return group_facets_figure(curves, metric, sizes, bands, log_y, highlight)
    groups = list(pd.unique(curves.sort_values("group")["group"]))
    if sizes:
        groups.sort(key=lambda g: -sizes.get(g, 0))
    crowded = len(groups) > ALL_COLOURED
    marked = dict(highlight or {}) if crowded else {}
    palette = pcolors.qualitative.Dark24
    colors = ({g: HIGHLIGHT_COLORS[i % len(HIGHLIGHT_COLORS)] for i, g in enumerate(marked)} if crowded
              else {g: palette[i % len(palette)] for i, g in enumerate(groups)})
    # grey first so the coloured lines sit on top of them
    order = [g for g in groups if g not in colors] + [g for g in marked if g in groups] if crowded else groups
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("Stratified: one model per group", "Pooled: one model for everyone"))
    grey_shown = False
    for c, method in enumerate(("stratified", "pooled"), start=1):
        part = curves[curves["method"] == method]
        for g in order:
            d = part[part["group"] == g].sort_values("epsilon")
            if d.empty:
                continue
            hover = f"{g}<br>epsilon %{{x}}<br>{metric} %{{y:.4f}}<extra>{method}</extra>"
            if g not in colors:
                n_grey = sum(h not in colors for h in groups)
                fig.add_scatter(x=d["epsilon"], y=d["mean"], mode="lines", name=f"other groups ({n_grey})",
                                legendgroup="other groups", showlegend=not grey_shown, opacity=0.8,
                                line=dict(color=GREY, width=1), row=1, col=c, hovertemplate=hover)
                grey_shown = True
                continue
            color = colors[g]
            if bands and (d["max"] > d["min"]).any():
                _band(fig, d["epsilon"], d["min"], d["max"], color, g, 1, c)
            kw = {}
            if crowded:      # a label at the line's end: colour is not the only way to tell the lines apart
                kw = dict(mode="lines+markers+text", text=[""] * (len(d) - 1) + [g], textposition="top left",
                          textfont=dict(color=color, size=11), line=dict(color=color, width=2.5))
            else:
                kw = dict(mode="lines+markers", line=dict(color=color))
            fig.add_scatter(x=d["epsilon"], y=d["mean"], name=_group_name(g, sizes, marked.get(g)), legendgroup=g,
                            showlegend=c == 1, row=1, col=c, hovertemplate=hover, **kw)
    fig.update_xaxes(type="log", title_text="epsilon (log scale)")
    fig.update_yaxes(title_text=METRIC_LABELS.get(metric, metric), row=1, col=1)
    if log_y:
        fig.update_yaxes(type="log")
    what = ("coloured: the worst and the smallest groups, grey: the rest; " if crowded else "") + \
        "bands: min to max over seeds"
    fig.update_layout(height=480, margin=dict(t=60, b=40, l=60, r=10),
                      legend=dict(font=dict(size=11), title_text="group (n = training rows)" if sizes else None),
                      title=f"Per-group error against the privacy budget ({what})")
    return tidy_log_axes(fig)


def group_facets_figure(curves: pd.DataFrame, metric: str, sizes: dict[str, int] | None = None,
                        bands: bool = True, log_y: bool = False, highlight: dict[str, str] | None = None,
                        wrap: int = 6) -> go.Figure:
    """Small multiples: one panel per group (largest first), stratified and pooled in each, shared axes.

    Each panel's title names the group, its real rows and, for highlighted groups, why it is marked."""
    groups = list(pd.unique(curves.sort_values("group")["group"]))
    if sizes:
        groups.sort(key=lambda g: -sizes.get(g, 0))
    marked = highlight or {}
    n_cols = max(1, min(wrap, len(groups)))
    n_rows = max(1, -(-len(groups) // n_cols))
    titles = [("<b>" + _group_name(g, sizes, marked[g]) + "</b>") if g in marked else _group_name(g, sizes)
              for g in groups]
    fig = make_subplots(rows=n_rows, cols=n_cols, shared_xaxes=True, shared_yaxes=True, subplot_titles=titles,
                        horizontal_spacing=0.02, vertical_spacing=min(0.3 / n_rows, 0.08))
    for i, g in enumerate(groups):
        r, c = divmod(i, n_cols)
        for method, color in METHOD_COLORS.items():
            d = curves[(curves["method"] == method) & (curves["group"] == g)].sort_values("epsilon")
            if d.empty:
                continue
            if bands and (d["max"] > d["min"]).any():
                _band(fig, d["epsilon"], d["min"], d["max"], color, method, r + 1, c + 1)
            fig.add_scatter(x=d["epsilon"], y=d["mean"], mode="lines+markers", name=method, legendgroup=method,
                            showlegend=i == 0, line=dict(color=color, width=1.5), marker=dict(size=4),
                            row=r + 1, col=c + 1,
                            hovertemplate=f"{g}<br>epsilon %{{x}}<br>{metric} %{{y:.4f}}<extra>{method}</extra>")
    fig.update_annotations(font_size=10)
    fig.update_xaxes(type="log")
    fig.update_xaxes(title_text="epsilon", row=n_rows)
    fig.update_yaxes(title_text=METRIC_LABELS.get(metric, metric).split(" (")[0], col=1)
    if log_y:
        fig.update_yaxes(type="log")
    fig.update_layout(height=140 + 150 * n_rows, margin=dict(t=80, b=40, l=60, r=10),
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
                      title="Per-group error against the privacy budget, one panel per group (largest first"
                            + ("; bands: min to max over seeds)" if bands else ")"))
    return tidy_log_axes(fig)


def method_curves_figure(curves: pd.DataFrame, metrics: tuple[str, ...], title: str,
                         baseline: dict[str, float] | None = None) -> go.Figure:
    """One panel per metric, stratified vs pooled against epsilon with seed bands; optional real-data lines."""
    fig = make_subplots(rows=1, cols=len(metrics), horizontal_spacing=0.08,
                        subplot_titles=[METRIC_LABELS.get(m, m).split(" (")[0] for m in metrics])
    for c, metric in enumerate(metrics, start=1):
        part = curves[curves["metric"] == metric]
        for method, color in METHOD_COLORS.items():
            d = part[part["method"] == method].sort_values("epsilon")
            if d.empty:
                continue
            if (d["max"] > d["min"]).any():
                _band(fig, d["epsilon"], d["min"], d["max"], color, method, 1, c)
            fig.add_scatter(x=d["epsilon"], y=d["mean"], mode="lines+markers", name=method, legendgroup=method,
                            showlegend=c == 1, line=dict(color=color), row=1, col=c)
        if baseline and metric in baseline:
            fig.add_hline(y=baseline[metric], line_dash="dot", line_color="grey", row=1, col=c,
                          annotation_text="real data", annotation_position="bottom right")
    fig.update_xaxes(type="log", title_text="epsilon (log scale)")
    fig.update_layout(height=400, title=title, margin=dict(t=70, b=40, l=50, r=10),
                      legend=dict(orientation="h", y=-0.25))
    return tidy_log_axes(fig)


def worst_vs_population_figure(worst: pd.DataFrame, measure: str = "two-way TVD") -> go.Figure:
    """Population error against worst-group error, one point per method and epsilon (what fairness costs)."""
    fig = go.Figure()
    # the two methods' points often sit close together at large epsilon: labels above one, below the other
    positions = dict(zip(METHOD_COLORS, ("top center", "bottom center")))
    for method, color in METHOD_COLORS.items():
        d = worst[worst["method"] == method].sort_values("epsilon")
        fig.add_scatter(x=d["population"], y=d["worst_group"], mode="lines+markers+text", name=method,
                        text=[f"eps {e:g}" for e in d["epsilon"]], textposition=positions[method],
                        line=dict(color=color))
    fig.update_layout(title=f"Population error vs worst-group error ({measure})", height=380,
                      xaxis_title=f"population {measure}", yaxis_title=f"worst group's {measure}",
                      margin=dict(t=50, b=40, l=60, r=10))
    return tidy_log_axes(fig)


def strata_sizes_figure(overview: pd.DataFrame, min_size: float = 0.0) -> go.Figure:
    """Bar chart of stratum sizes (log scale), strata under the small-stratum threshold highlighted."""
    colors = ["#E45756" if r < max(min_size, 1) else "#4C78A8" for r in overview["real_rows"]]
    fig = go.Figure(go.Bar(x=overview["group"], y=overview["real_rows"].clip(lower=0.5), marker_color=colors,
                           text=overview["real_rows"], textposition="outside"))
    fig.update_layout(title="Rows per stratum (red: below the small-stratum threshold or empty)", yaxis_type="log",
                      yaxis_title="rows (log scale)", height=360, margin=dict(t=50, b=110, l=50, r=10))
    return tidy_log_axes(fig)


def mean_error_figure(curves: pd.DataFrame) -> go.Figure:
    """Theory curve (error sd, and the implied mean |error| band) over simulated |error| points, per method."""
    fig = go.Figure()
    for method, color in METHOD_COLORS.items():
        th = curves[(curves["method"] == method) & (curves["kind"] == "theory sd")].sort_values("epsilon")
        sim = curves[(curves["method"] == method) & (curves["kind"] == "simulated |error|")]
        agg = sim.groupby("epsilon")["value"].mean().reset_index()
        fig.add_scatter(x=sim["epsilon"], y=sim["value"], mode="markers", name=f"{method}: simulated |error|",
                        marker=dict(color=_rgba(color, 0.25), size=5), legendgroup=method)
        fig.add_scatter(x=agg["epsilon"], y=agg["value"], mode="markers", name=f"{method}: simulated mean |error|",
                        marker=dict(color=color, size=11, symbol="diamond"), legendgroup=method)
        fig.add_scatter(x=th["epsilon"], y=th["value"], mode="lines", name=f"{method}: theory sd",
                        line=dict(color=color), legendgroup=method)
    fig.update_layout(title="Privacy error of the population mean: closed form over simulation",
                      xaxis_type="log", yaxis_type="log", xaxis_title="epsilon (log scale)",
                      yaxis_title="error of the population mean (log scale)", height=440,
                      margin=dict(t=50, b=40, l=60, r=10), legend=dict(font=dict(size=11)))
    return tidy_log_axes(fig)


def dirichlet_figure(table: pd.DataFrame, observed: float, worst: float, best: float, alpha_hat: float) -> go.Figure:
    """Theorem 10's expected sum of log group sizes against alpha, with worst, best and observed values."""
    fig = go.Figure()
    fig.add_scatter(x=table["alpha"], y=table["expected"], mode="lines", name="Thm. 10: E sum log |G_i|")
    fig.add_hline(y=worst, line_dash="dash", annotation_text="worst case k log(n/k)")
    fig.add_hline(y=best, line_dash="dot", annotation_text="best case log(n-k+1)")
    fig.add_scatter(x=[alpha_hat], y=[observed], mode="markers+text", marker=dict(size=13, symbol="star"),
                    text=[f"these strata (alpha MLE {alpha_hat:.3g})"], textposition="bottom right",
                    name="observed sum log sizes")
    fig.update_layout(title="How skewed group sizes soften the cost of stratifying (Dirichlet sizes)",
                      xaxis_type="log", xaxis_title="Dirichlet concentration alpha (log scale)", yaxis_title="sum of log group sizes",
                      height=380, margin=dict(t=50, b=40, l=60, r=10))
    return tidy_log_axes(fig)


def group_error_figure(table: pd.DataFrame, names: list[str]) -> go.Figure:
    """Per-group mean |error| of its own private mean (stratified) vs the pooled mean standing in, log scale."""
    x = [f"{n} (n={s:,})" for n, s in zip(names, table["size"])]
    fig = go.Figure()
    fig.add_bar(x=x, y=table["stratified mean |error|"], name="stratified: own private mean",
                marker_color=METHOD_COLORS["stratified"])
    fig.add_bar(x=x, y=table["pooled mean |error|"], name="pooled: population mean used for the group",
                marker_color=METHOD_COLORS["pooled"])
    # a Laplace(b) error has sd sqrt(2) b and mean absolute value b
    fig.add_scatter(x=x, y=table["stratified theory sd"] / 2 ** 0.5, mode="markers",
                    name="stratified closed form: mean |Laplace| = b", marker=dict(symbol="line-ew-open", size=26,
                                                                               color="black", line=dict(width=2)))
    fig.update_layout(barmode="group", yaxis_type="log", height=420, title="Who pays: each group's error",
                      yaxis_title="mean |error| of the group's mean (log scale)",
                      margin=dict(t=50, b=120, l=60, r=10), legend=dict(orientation="h", y=1.08, x=0))
    return tidy_log_axes(fig)


def coinpress_figure(table: pd.DataFrame) -> go.Figure:
    """Mean absolute error of COINPRESS, stratified COINPRESS and PubStrat against the private n."""
    agg = table.groupby(["n_private", "method"])["abs_error"].agg(["mean", "sem"]).reset_index()
    colors = {"COINPRESS": METHOD_COLORS["pooled"], "Strat": METHOD_COLORS["stratified"], "PubStrat": "#54A24B"}
    fig = go.Figure()
    for method, color in colors.items():
        d = agg[agg["method"] == method]
        fig.add_scatter(x=d["n_private"], y=d["mean"], error_y=dict(type="data", array=1.96 * d["sem"]),
                        mode="lines+markers", name=method, line=dict(color=color))
    fig.add_hline(y=0.01, line_dash="dot", annotation_text="1% error")
    fig.update_layout(title="COINPRESS on a Gaussian mixture with Dirichlet group sizes (Sec. 4.2)",
                      xaxis_type="log", yaxis_type="log", xaxis_title="private n (log scale)",
                      yaxis_title="mean |error| of the population mean", height=400,
                      margin=dict(t=50, b=40, l=60, r=10))
    return tidy_log_axes(fig)


def tvd_heatmap_figure(tvd: pd.DataFrame) -> go.Figure:
    """Group x column one-way TVD, stratified and pooled side by side on one colour scale."""
    order = (tvd.groupby("group")["real_rows"].first().sort_values(ascending=False).index.tolist())
    cols = list(pd.unique(tvd["column"]))
    zmax = float(tvd["tvd"].max()) if len(tvd) else 1.0
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=("Stratified", "Pooled"))
    for c, method in enumerate(("stratified", "pooled"), start=1):
        z = (tvd[tvd["method"] == method].pivot(index="group", columns="column", values="tvd")
             .reindex(index=order, columns=cols))
        fig.add_heatmap(z=z.to_numpy(), x=cols, y=order, zmin=0, zmax=zmax, colorscale="Reds",
                        showscale=c == 2, text=z.round(3).to_numpy(), texttemplate="%{text}",
                        hovertemplate="%{y}<br>%{x}: TVD %{z:.3f}<extra>" + method + "</extra>", row=1, col=c)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title="One-way TVD of each column inside each group (largest groups on top)",
                      height=140 + 34 * len(order), margin=dict(t=70, b=40, l=10, r=10))
    return tidy_log_axes(fig)


def marginal_bars_figure(shares: pd.DataFrame, group: str, column: str) -> go.Figure:
    """Real, stratified and pooled distribution of one column inside one group."""
    d = shares[(shares["group"] == group) & (shares["column"] == column)]
    fig = go.Figure()
    for src, color in (("real", "#555555"), ("stratified", METHOD_COLORS["stratified"]),
                       ("pooled", METHOD_COLORS["pooled"])):
        fig.add_bar(x=d["category"], y=d[src], name=src, marker_color=color)
    fig.update_layout(barmode="group", title=f"{column} within {group}", yaxis_title="share of the group's rows",
                      height=380, margin=dict(t=50, b=80, l=50, r=10), legend=dict(orientation="h", y=1.1))
    return tidy_log_axes(fig)


def mean_release_figure(strata: pd.DataFrame, overall: pd.DataFrame, what: str) -> go.Figure:
    """Released per-stratum means as bars with their 95% intervals, and the recombined (stratified) and
    pooled overall means as dashed lines across them."""
    shown = strata[strata["mean"].notna()]
    fig = go.Figure()
    fig.add_bar(x=shown["group"], y=shown["mean"], name="stratum mean", marker_color=METHOD_COLORS["stratified"],
                error_y=dict(type="data", symmetric=False, array=(shown["ci_high"] - shown["mean"]).tolist(),
                             arrayminus=(shown["mean"] - shown["ci_low"]).tolist(), color="#333"),
                hovertemplate="%{x}<br>%{y:.4g}<extra></extra>")
    styles = {"stratified (recombined)": ("#B22222", "dash"), "pooled (comparison)": (METHOD_COLORS["pooled"], "dot")}
    for est, mean in zip(overall["estimate"], overall["mean"]):
        color, dash = styles.get(est, ("#555", "dash"))
        fig.add_scatter(x=list(shown["group"]), y=[mean] * len(shown), mode="lines", name=f"overall, {est}",
                        line=dict(color=color, dash=dash, width=2),
                        hovertemplate=f"overall, {est}: {mean:.4g}<extra></extra>")
    fig.update_layout(title=f"Private {what} per stratum, with 95% intervals from the privacy noise",
                      yaxis_title=what, xaxis_title="stratum", template="plotly_white", height=440,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), margin=dict(t=80))
    return fig
