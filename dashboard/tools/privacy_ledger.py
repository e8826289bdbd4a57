"""Privacy ledger: every release made from each data set, on any page, composed into one total.

The page reads and draws ``core.privacy.project_ledger``; the only thing it writes is the curator's
budget cap per data set. Releases are recorded by the pages that make them.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import json  # noqa: E402

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.census.geography_data import GEOGRAPHIES  # noqa: E402
from core.datasets import DATASETS  # noqa: E402
from core.privacy.project_ledger import (DEFAULT_DELTA, Cap, check_cap, compose, cumulative_frame,  # noqa: E402
                                         spends_frame)
from core.report import guarded_csv  # noqa: E402
from dashboard.components.ledger_badge import badge_labels, project_ledger  # noqa: E402
from dashboard.figures.ledger import cumulative_figure  # noqa: E402

S = "session"
LABELS = {"release": "#", "kind": "Kind", "page": "Page", "action": "Action",
          "release_label": "Release", "created_utc": "Time (UTC)", "plan_digest": "Plan digest",
          "label": "Spend", "measured": "What was measured", "amount": "Amount", "unit": "Unit",
          "delta": "delta", "composition": "Composition", "group": "Disjoint group", "part": "Part",
          "epsilon": "Total epsilon", "rho": "Total rho (zCDP)"}
WHAT_COUNTS = """
- **Counted as releases** (noise from OpenDP's samplers; each press is a new release): Budget allocation's
  *Release noisy counts*, Stratified synthesis's *Release synthetic data* and *Release a stratified mean*,
  Coherence audit's *Release this algorithm's output*, and Fairness elicitation's private synthetic copy
  that stakeholders see instead of real records (one release per copy; sessions reusing it add nothing).
- **Listed apart, never counted**: seeded previews, each with what one run would spend: Stratified
  synthesis's seeded simulation and sweeps, Budget allocation's ToyDown and TopDown-lite runs, District maps' noisy
  runs, and the Coherence audit's trials and epsilon sweeps. The mechanism comparison and
  public-information runs are not recorded.
- **Composition**: releases of one data set add up one after another. Inside a release, a group of
  declared disjoint parts (strata, the units of a geographic level) costs its largest part once. Pure
  epsilon adds; zCDP adds in rho (pure epsilon counts as epsilon²/2) and is stated as (epsilon, delta)
  with the tight conversion; (epsilon, delta) spends add their epsilons and deltas.
- **Neighbouring data sets**: totals read as "adding or removing one person". A spend a page calibrated
  for "replacing one person" (an option of the Coherence audit's noisy tables; its "What was measured"
  says so) is recorded at face value: for those count tables that over-states, never under-states, the
  add/remove cost.
- **Stored**: only spends, labels, the page, the time and the plan's digest; never the data.
"""


ORDER = ["release", "release_label", "label", "measured", "amount", "unit", "delta", "composition", "group",
         "part", "page", "action", "created_utc", "plan_digest"]


def show(df: pd.DataFrame, key: str) -> None:
    """A spends table, spends first, with human column labels (the data keep their machine names)."""
    df = df[[c for c in ORDER if c in df.columns]]
    config = {c: st.column_config.Column(LABELS[c]) for c in df.columns if c in LABELS}
    st.dataframe(df, hide_index=True, width="stretch", column_config=config, key=key)


st.title("Privacy ledger")
st.caption("How much privacy has been spent on each data set, by every release on every page, and how "
           "much is left under the curator's cap?")

try:
    ledger = project_ledger()
    known = ledger.data_sets()
except ValueError as exc:
    st.error(str(exc))
    st.stop()

labels = {**{k: info.label for k, info in DATASETS.items()},
          **{k: f"{v} (geography)" for k, v in GEOGRAPHIES.items()},
          **badge_labels(known)}
choices = list(dict.fromkeys([*known["data_key"], *DATASETS, *GEOGRAPHIES]))
key = st.selectbox("Data set", choices, format_func=lambda k: labels.get(k, k), key="pl_data",
                   persist_state=S, help="A bundled data set by name, or an upload by its SHA-256 fingerprint.")

cap = ledger.cap(key)
with st.expander("Budget cap for this data set", expanded=cap is None):
    c1, c2, c3 = st.columns(3)
    unit = c1.radio("Cap in", ["epsilon", "rho"], index=0 if cap is None or cap.unit == "epsilon" else 1,
                    key=f"pl_cap_unit_{key}", horizontal=True, persist_state=S)
    amount = c2.number_input(f"Cap ({unit})", 0.001, 1000.0, float(cap.amount) if cap else 1.0, 0.1,
                             key=f"pl_cap_amount_{key}", persist_state=S)
    cap_delta = c3.number_input("delta the cap holds at", 1e-12, 0.1, float(cap.delta) if cap else DEFAULT_DELTA,
                                format="%.1e", key=f"pl_cap_delta_{key}", persist_state=S,
                                disabled=unit == "rho")
    s1, s2 = st.columns(2)
    if s1.button("Save cap", key="pl_cap_save", type="primary"):
        try:
            ledger.set_cap(key, Cap(float(amount), unit, float(cap_delta)))
            st.rerun()
        except ValueError as exc:
            st.error(str(exc))
    if cap is not None and s2.button("Remove cap", key="pl_cap_remove"):
        ledger.set_cap(key, None)
        st.rerun()

delta = cap.delta if cap is not None else float(st.number_input(
    "delta for stating zCDP totals as (epsilon, delta)", 1e-12, 0.1, DEFAULT_DELTA, format="%.1e",
    key="pl_delta", persist_state=S))
rels = ledger.releases(key)
made = [r for r in rels if r.kind == "release"]
totals = compose(made, delta)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Releases", totals.n_releases)
m2.metric("Total epsilon", f"{totals.epsilon:.4g}")
m3.metric("delta", "0 (pure DP)" if totals.pure else f"{totals.delta:.2g}")
m4.metric("Total rho (zCDP)", "n/a" if totals.rho is None else f"{totals.rho:.4g}",
          help="Not defined once an (epsilon, delta) spend is in the ledger.")
if cap is not None:
    verdict = check_cap(made, cap)
    (st.success if verdict.within else st.error)(f"Spent so far: {verdict.message}")
else:
    st.info("No budget cap is set for this data set; release buttons will not warn before going over.")

frame = spends_frame(rels)   # for the downloads; the tables number releases and simulations apart
sims = [r for r in rels if r.kind == "simulation"]
st.subheader("Releases")
if made:
    cumulative = cumulative_frame(made, delta)
    chart_unit = "rho" if cap is not None and cap.unit == "rho" and totals.rho is not None else "epsilon"
    st.plotly_chart(cumulative_figure(cumulative, cap, chart_unit), key="pl_cumulative", width="stretch")
    show(spends_frame(made), "pl_releases")
else:
    st.info("No release has been recorded for this data set yet.")
st.subheader("Simulations (seeded previews, not counted)")
if sims:
    show(spends_frame(sims), "pl_simulations")
else:
    st.caption("No seeded preview recorded for this data set.")

d1, d2 = st.columns(2)
d1.download_button("Download the ledger (JSON)", json.dumps(ledger.export(key), indent=1, allow_nan=False),
                   file_name=f"privacy_ledger_{key[:24].replace(':', '_')}.json", mime="application/json",
                   key="pl_json", icon=":material/download:")
d2.download_button("Download the ledger (CSV)", guarded_csv(frame),
                   file_name=f"privacy_ledger_{key[:24].replace(':', '_')}.csv", mime="text/csv",
                   key="pl_csv", icon=":material/table_view:")
with st.expander("What counts as a release, and how totals compose"):
    st.markdown(WHAT_COUNTS)
