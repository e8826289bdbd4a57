"""Plotly figures for the coherence audit page (no streamlit here)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.figures.axes import tidy_log_axes

VERDICT_COLOURS = {"FAIL": "#c0392b", "PASS": "#1e8449", "INCONCLUSIVE": "#b9770e"}
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]

# Human column labels (with units) for the tables the page shows; the result's tables keep machine names.
SUMMARY_COLUMNS = {
    "release": "Release", "adversary": "Adversary", "verdict": "Verdict",
    "beta_hat": "Failure rate (share of trials, W1 > alpha)",
    "ci_low": "Failure rate, lower 95% bound", "ci_high": "Failure rate, upper 95% bound",
    "null_beta_hat": "Null failure rate (share of null splits)",
    "alpha_hat": "W1 exceeded in beta of trials (0-2)", "alpha_hat_null": "Same, null splits (0-2)",
    "excess_median": "Median W1 over the null (0-2)", "sign_test_p": "Sign test p-value (real worse than null)",
    "trials_needed": "Trials that would decide (at this rate)",
}
SUBGROUP_COLUMNS = {
    "subgroup": "Subgroup", "release": "Release", "size": "Size (people, full sample)",
    "median_w1": "Median W1 (0-2)", "q_w1": "W1 at the (1 - beta) quantile (0-2)",
    "median_null": "Null median W1 (0-2)", "q_null": "Null W1 at the (1 - beta) quantile (0-2)",
    "excess_median": "Median W1 over the null (0-2)", "exceed_rate": "Share of trials with W1 > alpha",
    "nan_trials": "Trials with an empty half (count)", "certified_alpha": "Alpha certified by theory (0-2)",
}
EXCLUDED_COLUMNS = {"subgroup": "Subgroup", "size": "Size (people, below gamma)"}
SWEEP_COLUMNS = {
    "release": "Release at epsilon", "adversary": "Adversary", "verdict": "Verdict",
    "alpha_hat": "W1 exceeded in beta of trials (0-2)", "alpha_hat_null": "Same, null splits (0-2)",
    "beta_hat": "Failure rate (share of trials)", "trials_needed": "Trials that would decide (at this rate)",
}
THEORY_COLUMNS = {
    "constants": "Constants", "gamma": "Subgroup size needed, gamma (people)", "binding": "Binding term",
    "zeta": "Max-information zeta (nats)", "certified_alpha": "Alpha certified at that size (0-2)",
    "max_epsilon": "Largest epsilon at that size", "note": "Note",
}
CONSTANT_LABELS = {"conservative": "conservative (repaired)", "paper": "as printed (unproven)"}


def readable(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """The listed columns of ``df`` in that order, renamed to their human labels."""
    keep = [c for c in columns if c in df.columns]
    out = df[keep].rename(columns=columns)
    if "Constants" in out.columns:
        out["Constants"] = out["Constants"].map(CONSTANT_LABELS).fillna(out["Constants"])
    return out


def _short(name: str, width: int = 38) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _wrap(name: str, width: int = 22) -> str:
    """A long label broken into lines of about ``width`` characters (plotly breaks at <br>)."""
    lines, line = [], ""
    for word in name.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "<br>".join([*lines, line])


def distance_heatmap(subgroups: pd.DataFrame, adversary: str, alpha: float) -> go.Figure:
    """Subgroup x release heat map of median W1 for one adversary, 5-95% of trials in brackets.

    Rows are sorted by the worst (1 - beta)-quantile across releases, worst on top; hover adds
    that quantile and the null's.
    """
    d = subgroups[subgroups["adversary"] == adversary]
    order = d.groupby("subgroup")["q_w1"].max().sort_values(ascending=True).index.tolist()   # worst on top
    rels = list(dict.fromkeys(d["release"]))

    def grid(col: str) -> np.ndarray:
        return d.pivot(index="subgroup", columns="release", values=col).reindex(index=order, columns=rels).to_numpy()

    med, lo, hi, q, null = grid("median_w1"), grid("q05_w1"), grid("q95_w1"), grid("q_w1"), grid("q_null")
    size = d.groupby("subgroup")["size"].first().reindex(order)
    text = [[f"{med[i, j]:.3f}<br>[{lo[i, j]:.3f}, {hi[i, j]:.3f}]" for j in range(len(rels))]
            for i in range(len(order))]
    custom = np.dstack([lo, hi, q, null])
    top = float(np.nanmax(hi)) if np.isfinite(hi).any() else 0.0
    fig = go.Figure(go.Heatmap(
        z=med, x=[_wrap(r) for r in rels], y=[f"{s} ({_size_text(size[s])})" for s in order],
        text=text, texttemplate="%{text}", customdata=custom, colorscale="OrRd", zmin=0,
        zmax=max(top, alpha), colorbar=dict(title="median<br>W1 (0-2)"),
        hovertemplate=("%{y}<br>%{x}<br>median W1 %{z:.3f}; 5-95%% of trials [%{customdata[0]:.3f}, "
                       "%{customdata[1]:.3f}]<br>(1 - beta) quantile %{customdata[2]:.3f}; null at that quantile "
                       "%{customdata[3]:.3f}<extra></extra>"),
    ))
    fig.update_layout(title=f"W1 per subgroup and release ({_short(adversary, 40)}); alpha = {alpha:g}",
                      height=max(320, 30 * len(order) + 160), margin=dict(l=10, r=10, t=50, b=10))
    return tidy_log_axes(fig)


def score_histograms(scores: np.ndarray, in_release: np.ndarray, subgroup: str, label: str) -> go.Figure:
    """Overlaid histograms of scores for the released half and the held-out half of a subgroup."""
    from core.coherence.wasserstein import wasserstein1
    a, b = scores[in_release], scores[~in_release]
    w = wasserstein1(a, b)
    bins = dict(start=-1.0, end=1.0001, size=0.05)
    fig = go.Figure()
    fig.add_histogram(x=a, xbins=bins, histnorm="probability", name=f"in the release's half (n={a.size:,})",
                      marker_color=PALETTE[1], opacity=0.6)
    fig.add_histogram(x=b, xbins=bins, histnorm="probability", name=f"held out (n={b.size:,})",
                      marker_color=PALETTE[0], opacity=0.6)
    fig.update_layout(barmode="overlay",
                      title=dict(text=f"{_short(subgroup, 70)}: W1 = {w:.3f} in trial 1<br><sup>{_short(label, 110)}</sup>"),
                      xaxis=dict(title="score h(x), from -1 (surely not) to 1 (surely)", range=[-1.05, 1.05]),
                      yaxis_title="share of the subgroup's half", height=420, margin=dict(l=10, r=10, t=70, b=10),
                      legend=dict(orientation="h", y=-0.3))
    return tidy_log_axes(fig)


def coherence_curve_figure(curve: pd.DataFrame, release: str, alpha: float, beta: float) -> go.Figure:
    """beta_hat(alpha) per adversary with its one-sided CP band, the null dashed, the chosen (alpha, beta) marked."""
    d = curve[curve["release"] == release]
    fig = go.Figure()
    for i, (adv, g) in enumerate(d.groupby("adversary", sort=False)):
        col = PALETTE[i % len(PALETTE)]
        real, null = g[g["split"] == "release"], g[g["split"] == "null"]
        fig.add_scatter(x=np.r_[real["alpha"], real["alpha"][::-1]], y=np.r_[real["ci_high"], real["ci_low"][::-1]],
                        fill="toself", line=dict(width=0), fillcolor=col, opacity=0.15, showlegend=False,
                        hoverinfo="skip")
        fig.add_scatter(x=real["alpha"], y=real["beta_hat"], name=adv, line=dict(color=col, shape="hv"))
        fig.add_scatter(x=null["alpha"], y=null["beta_hat"], name=f"{adv} (null)",
                        line=dict(color=col, dash="dot", shape="hv"))
    fig.add_vline(x=alpha, line_dash="dash", line_color="grey")
    fig.add_hline(y=beta, line_dash="dash", line_color="grey")
    fig.update_layout(title=f"Failure rate against alpha: {_short(release, 60)}",
                      xaxis_title="alpha, the W1 threshold (0-2)", yaxis=dict(title="share of trials with W1 > alpha",
                                                                      range=[-0.02, 1.02]),
                      height=380, margin=dict(l=10, r=10, t=50, b=10))
    return tidy_log_axes(fig)


def size_scatter(subgroups: pd.DataFrame, adversary: str, alpha: float) -> go.Figure:
    """Subgroup size against the W1 quantile per release, with the null quantile as hollow markers."""
    d = subgroups[subgroups["adversary"] == adversary]
    fig = go.Figure()
    for i, (rel, g) in enumerate(d.groupby("release", sort=False)):
        col = PALETTE[i % len(PALETTE)]
        fig.add_scatter(x=g["size"], y=g["q_w1"], mode="markers", name=_wrap(rel, 30), text=g["subgroup"],
                        marker=dict(color=col, size=9), hovertemplate="%{text}<br>size %{x}<br>W1 %{y:.3f}<extra></extra>")
        fig.add_scatter(x=g["size"], y=g["q_null"], mode="markers", name=_wrap(f"{rel}: null split", 30),
                        text=g["subgroup"], marker=dict(color=col, size=9, symbol="circle-open"))
    fig.add_hline(y=alpha, line_dash="dash", line_color="grey")
    fig.update_layout(title=f"Small groups carry more sampling noise ({_short(adversary, 40)})",
                      xaxis=dict(title="subgroup size (people in the audited rows)", type="log"),
                      yaxis_title="W1 at the (1 - beta) quantile (0-2)", height=380, margin=dict(l=10, r=10, t=50, b=10))
    return tidy_log_axes(fig)


def epsilon_figure(summary: pd.DataFrame, releases: pd.DataFrame, theory: pd.DataFrame, beta: float) -> go.Figure:
    """Empirical alpha_hat(beta) against epsilon per adversary (and the null), with the certified alpha."""
    eps = releases.set_index("release")["epsilon"]
    d = summary.assign(epsilon=summary["release"].map(eps)).sort_values("epsilon")
    fig = go.Figure()
    for i, (adv, g) in enumerate(d.groupby("adversary", sort=False)):
        col = PALETTE[i % len(PALETTE)]
        fig.add_scatter(x=g["epsilon"], y=g["alpha_hat"], name=f"{adv}: audit", mode="lines+markers",
                        line=dict(color=col))
        fig.add_scatter(x=g["epsilon"], y=g["alpha_hat_null"], name=f"{adv}: null", mode="lines+markers",
                        line=dict(color=col, dash="dot"), marker=dict(symbol="circle-open"))
    dashes = {"conservative": "solid", "paper": "dash"}
    greys = dict(zip(sorted(theory["size"].unique()), ["#000000", "#6e6e6e", "#b0b0b0"]))
    for (mode, size), g in theory.groupby(["constants", "size"]):
        g = g.dropna(subset=["certified_alpha"])
        if g.empty:
            continue
        fig.add_scatter(x=g["epsilon"], y=g["certified_alpha"], mode="lines",
                        line=dict(color=greys.get(size, "#000000"), dash=dashes[mode], width=2),
                        name=f"theory, size {_size_text(size, '')} ({'as printed' if mode == 'paper' else mode})")
    fig.update_layout(title=f"W1 exceeded in beta = {beta:g} of trials, against epsilon, beside what theory certifies",
                      xaxis=dict(title="epsilon", type="log"), yaxis=dict(title="alpha, the W1 threshold (0-2)", range=[0, 2.05]),
                      height=430, margin=dict(l=10, r=10, t=50, b=10))
    return tidy_log_axes(fig)


def _size_text(size, prefix: str = "n=") -> str:
    """A subgroup size as a label: an exact count ("n=1,234"), or a shared report's band ("50 <= n < 100")."""
    return str(size) if isinstance(size, str) else f"{prefix}{size:,}"


def gamma_figure(grid: pd.DataFrame, sizes: np.ndarray) -> go.Figure:
    """Subgroup size theory needs against epsilon, with a rug of the actual subgroup sizes."""
    fig = go.Figure()
    for mode, g in grid.groupby("constants"):
        fig.add_scatter(x=g["epsilon"], y=g["gamma"], mode="lines", name=CONSTANT_LABELS.get(mode, mode),
                        line=dict(dash="dash" if mode == "paper" else "solid"))
    for s in np.unique(sizes):
        fig.add_hline(y=float(s), line_color="rgba(120,120,120,0.3)", line_width=1)
    fig.update_layout(title="Subgroup size needed by theory (grey lines: your subgroups' sizes)",
                      xaxis=dict(title="epsilon", type="log"), yaxis=dict(title="subgroup size needed, gamma (people)", type="log"),
                      height=360, margin=dict(l=10, r=10, t=50, b=10))
    return tidy_log_axes(fig)
