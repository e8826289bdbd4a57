"""Reproductions: the papers' headline numbers, recomputed now by the project's code, and the errors
found in the papers. The rows and their computation live in ``core.reproductions`` and
``core.paper_errors``; this page only runs them (as a background job of the session, with progress and
Cancel) and draws the tables.
"""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import streamlit as st  # noqa: E402

from core.contracts import Cancelled  # noqa: E402
from core.paper_errors import paper_errors_table  # noqa: E402
from core.report import guarded_csv  # noqa: E402
from core.reproductions import REPRODUCTIONS, TABLE_COLUMNS, reproductions_table  # noqa: E402
from dashboard.components.progress import job_key, run_job  # noqa: E402

P = "rp_"
RESULT = P + "table"
PENDING = P + "pending"     # (row keys, job key) of a recompute asked for and not drawn yet
STOPPED = P + "stopped"     # a cancelled computation: rows are computed again only when asked
LABEL = "Recomputing the papers' numbers"
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


def run_rows(keys: list[str], key: str):
    """The rows of ``keys``, computed as a background job of this session under ``key`` (a page left
    while it runs attaches to the same job when it comes back)."""
    return run_job(reproductions_table, list(keys), key=key, label=LABEL, cancel_key=P + "cancel")


def keep_rows(fresh: pd.DataFrame) -> None:
    """Put freshly computed rows in the session's table (replacing the same keys), in the registry's order."""
    kept = st.session_state.get(RESULT)
    rest = kept[~kept["key"].isin(fresh["key"])] if kept is not None else fresh.iloc[:0]
    order = {r.key: i for i, r in enumerate(REPRODUCTIONS)}
    merged = pd.concat([rest, fresh], ignore_index=True)
    st.session_state[RESULT] = merged.sort_values("key", key=lambda c: c.map(order)).reset_index(drop=True)


st.title("Reproductions")
st.caption("The numbers the papers behind each tool printed, recomputed now with this project's own "
           "code, with the tolerance each must meet; and every error found in the papers, with what "
           "the tool does about it. `make reproduce` runs the same table from the command line.")

papers = st.multiselect("Papers", PAPERS, default=PAPERS, key=P + "papers", persist_state="session",
                        help="Which papers' rows to recompute.")
keys = [r.key for r in REPRODUCTIONS if r.paper in papers]
asked = st.button("Recompute now", key=P + "run", icon=":material/play_arrow:", type="primary",
                  help="Recompute the rows of the chosen papers.")
if asked:      # a recompute the user asked for: a job of its own (a nonce), remembered until it is drawn
    st.session_state[PENDING] = (keys, job_key(reproductions_table, keys, uuid.uuid4().hex))
    st.session_state.pop(STOPPED, None)
try:
    pending = st.session_state.get(PENDING)
    if pending is not None:
        keep_rows(run_rows(*pending))
        st.session_state.pop(PENDING, None)
    done = set(st.session_state[RESULT]["key"]) if RESULT in st.session_state else set()
    todo = [k for k in keys if k not in done]     # rows of newly chosen papers are computed too
    if todo and not st.session_state.get(STOPPED):
        keep_rows(run_rows(todo, job_key(reproductions_table, todo)))
except Cancelled:
    st.session_state.pop(PENDING, None)
    st.session_state[STOPPED] = True
    st.info("Recomputing was stopped; the rows already shown are kept. Press **Recompute now** to run it again.")

table = st.session_state.get(RESULT, pd.DataFrame(columns=list(TABLE_COLUMNS)))    # empty after a stopped first run
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
