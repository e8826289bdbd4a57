"""Reproductions: the papers' headline numbers, recomputed now by the project's code, and the errors
found in the papers. The rows and their computation live in ``core.reproductions`` and
``core.paper_errors``; this page only runs them with a progress bar and draws the tables.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import streamlit as st  # noqa: E402

from core.paper_errors import paper_errors_table  # noqa: E402
from core.report import guarded_csv  # noqa: E402
from core.reproductions import REPRODUCTIONS, reproductions_table  # noqa: E402
from dashboard.components.progress import progress_bar  # noqa: E402

P = "rp_"
RESULT = P + "table"
PAPERS = sorted({r.paper for r in REPRODUCTIONS})


def closeness_figure(table) -> go.Figure:
    """How far each row is from its reference value, as a share of its tolerance (<= 1 passes)."""
    share = (table["difference"] / table["tolerance"].where(table["tolerance"] > 0, 1e-12)).clip(upper=2.0)
    share = share.where(table["difference"] > 0, 0.0).fillna(2.0)
    colours = ["#2da44e" if ok else "#cf222e" for ok in table["pass"]]
    fig = go.Figure(go.Bar(x=share, y=table["key"], orientation="h", marker_color=colours,
                           customdata=table[["paper value", "ours", "tolerance"]].to_numpy(),
                           hovertemplate="%{y}<br>paper %{customdata[0]:.6g}, ours %{customdata[1]:.6g}"
                                         "<br>tolerance %{customdata[2]:.3g}<extra></extra>"))
    fig.add_vline(x=1.0, line_dash="dash", line_color="#57606a", annotation_text="tolerance")
    fig.update_layout(height=max(320, 18 * len(table)), margin=dict(l=10, r=10, t=30, b=40),
                      xaxis_title="|ours - paper| / tolerance (capped at 2; 0 = exact)",
                      yaxis=dict(autorange="reversed"), title="How close each number is")
    return fig


def run_rows(keys: list[str]):
    with progress_bar("Recomputing the papers' numbers") as progress:
        return reproductions_table(keys, progress=progress)


st.title("Reproductions")
st.caption("The numbers the papers behind each tool printed, recomputed now with this project's own "
           "code, with the tolerance each must meet; and every error found in the papers, with what "
           "the tool does about it. `make reproduce` runs the same table from the command line.")

papers = st.multiselect("Papers", PAPERS, default=PAPERS, key=P + "papers", persist_state="session",
                        help="Which papers' rows to recompute.")
keys = [r.key for r in REPRODUCTIONS if r.paper in papers]
kept = st.session_state.get(RESULT)
done = set() if kept is None else set(kept["key"])
asked = st.button("Recompute now", key=P + "run", icon=":material/play_arrow:", type="primary",
                  help="Recompute the rows of the chosen papers.")
todo = keys if asked else [k for k in keys if k not in done]    # rows of newly chosen papers are computed too
if todo:
    fresh = run_rows(todo)
    rest = kept[~kept["key"].isin(todo)] if kept is not None else fresh.iloc[:0]
    order = {r.key: i for i, r in enumerate(REPRODUCTIONS)}
    merged = pd.concat([rest, fresh], ignore_index=True)
    st.session_state[RESULT] = merged.sort_values("key", key=lambda c: c.map(order)).reset_index(drop=True)

table = st.session_state.get(RESULT, pd.DataFrame(columns=["key", "pass", "seconds", "paper", "source"]))
shown = table[table["key"].isin(keys)]
passed = int(shown["pass"].sum())
printed = shown["source"] == "paper"
left, mid, right = st.columns(3)
left.metric("Rows that pass", f"{passed} / {len(shown)}",
            help="Values printed in the papers and values the specs checked independently together.")
mid.metric("Printed in the papers / spec checks",
           f"{int(shown.loc[printed, 'pass'].sum())} / {int(printed.sum())}  ·  "
           f"{int(shown.loc[~printed, 'pass'].sum())} / {int((~printed).sum())}",
           help="Rows whose reference is a number the paper printed, and rows whose reference the specs "
                "computed or checked themselves (closed forms, consistency checks such as a ledger adding up).")
right.metric("Computing time", f"{shown['seconds'].sum():.1f} s")
if passed < len(shown):
    st.error("Some rows fail: " + ", ".join(shown.loc[~shown["pass"], "key"]))

st.subheader("Headline numbers")
st.dataframe(
    shown.assign(result=shown["pass"].map({True: "pass", False: "FAIL"})),
    hide_index=True, width="stretch", key=P + "rows",
    column_order=["result", "paper", "claim", "paper value", "ours", "tolerance", "difference", "source",
                  "spec", "code", "seconds", "error"],
    column_config={
        "result": st.column_config.TextColumn("Result", width="small"),
        "paper": st.column_config.TextColumn("Paper", width="small"),
        "claim": st.column_config.TextColumn("What is checked", width="medium"),
        "paper value": st.column_config.NumberColumn("Paper's value", format="%.6g"),
        "ours": st.column_config.NumberColumn("Ours (computed now)", format="%.6g"),
        "tolerance": st.column_config.NumberColumn("Tolerance (±)", format="%.3g"),
        "difference": st.column_config.NumberColumn("|Ours − paper|", format="%.3g"),
        "source": st.column_config.TextColumn("Reference", help="'paper': printed in the paper; 'spec check': "
                                              "a value the specs verified independently"),
        "spec": st.column_config.TextColumn("Where the specs state it"),
        "code": st.column_config.TextColumn("Code that computes ours", help="The file (and function) in this "
                                            "repository, relative to its root"),
        "seconds": st.column_config.NumberColumn("Time (s)", format="%.2f"),
        "error": st.column_config.TextColumn("Error"),
    })
st.plotly_chart(closeness_figure(shown), key=P + "chart", width="stretch")
st.download_button("Download the table (CSV)", guarded_csv(shown), file_name="reproductions.csv",
                   mime="text/csv", key=P + "csv", icon=":material/download:", on_click="ignore")

st.subheader("Errors found in the papers")
errors = paper_errors_table()
st.dataframe(errors[errors["paper"].isin(papers)], hide_index=True, width="stretch", key=P + "errors")
