"""Privacy ledger: every release made from each data set, on any page, composed into one total.

The page reads and draws ``core.privacy.project_ledger``; the only thing it writes is the curator's
budget cap per data set. Releases are recorded by the pages that make them. Every answer that a table
sharing rows with a declared data set is nevertheless "a different population" (with its own budget) is
listed here with when and by whom (``core.privacy.population``), and travels in the page's downloads.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import json  # noqa: E402
import os  # noqa: E402

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.census.geography_data import GEOGRAPHIES  # noqa: E402
from core.datasets import DATASETS  # noqa: E402
from core.privacy.project_ledger import (DEFAULT_DELTA, NO_CAP, Cap, check_cap, compose,  # noqa: E402
                                         cumulative_frame, declared_name, spends_frame)
from core.report import guarded_csv  # noqa: E402
from dashboard.components.ledger_badge import badge_labels, data_in_use, project_ledger  # noqa: E402
from dashboard.components.access import curator_name  # noqa: E402
from dashboard.components.plain_text import plain  # noqa: E402
from dashboard.components.population_check import population_answers  # noqa: E402
from core.figures.ledger import cumulative_figure  # noqa: E402

S = "session"
LABELS = {"release": "#", "kind": "Kind", "page": "Page", "action": "Action",
          "release_label": "Release", "created_utc": "Time (UTC)", "curator": "By", "plan_digest": "Plan digest",
          "label": "Spend", "measured": "What was measured", "amount": "Amount", "unit": "Unit",
          "delta": "delta", "composition": "Composition", "group": "Disjoint group", "part": "Part",
          "epsilon": "Total epsilon", "rho": "Total rho (zCDP)"}
WHAT_COUNTS = """
- **Counted as releases** (noise from OpenDP's samplers; each confirmed release is a new one, and the
  first release of a data set asks for its cap decision, a cap or an explicit "no cap"): Budget allocation's
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
         "part", "page", "action", "created_utc", "curator", "plan_digest"]


def show(df: pd.DataFrame, key: str) -> None:
    """A spends table, spends first, with human column labels (the data keep their machine names)."""
    df = df[[c for c in ORDER if c in df.columns]]
    config = {c: st.column_config.Column(LABELS[c]) for c in df.columns if c in LABELS}
    st.dataframe(df, hide_index=True, width="stretch", column_config=config, key=key)


ALL = "__all__"     # the summary of every data set


def summary_frame(ledger, keys, labels) -> pd.DataFrame:
    """One row per data set: releases made, total spend at the delta it is stated at, and the cap decision."""
    rows = []
    for k in keys:
        decision = ledger.cap_decision(k)
        delta = decision.delta if isinstance(decision, Cap) else DEFAULT_DELTA
        t = compose(ledger.releases(k, "release"), delta)
        rows.append({"data set": labels.get(k, k), "releases": t.n_releases, "total epsilon": t.epsilon,
                     "at delta": 0.0 if t.pure else t.delta, "total rho (zCDP)": t.rho,
                     "cap": decision_text(decision)})
    return pd.DataFrame(rows, columns=["data set", "releases", "total epsilon", "at delta", "total rho (zCDP)",
                                       "cap"])


VERSION_LABELS = {"fingerprint": "File fingerprint (SHA-256)", "file_name": "File name", "added_utc": "Added (UTC)",
                  "curator": "By"}


def file_versions(name: str) -> pd.DataFrame | None:
    """The files read under the declared data set ``name`` (the data set store's list), oldest first; None
    when the store cannot be opened."""
    try:
        from core.intake.store import DataSetStore
    except ImportError:
        return None
    try:
        store = DataSetStore(os.environ.get("DASHBOARD_DB_URL") or None)
        try:
            return store.versions(name)
        finally:
            store.dispose()
    except ValueError:
        return None


def show_versions(name: str) -> None:
    """A declared data set's file versions: every file uploaded into it spends from this one budget."""
    st.subheader("File versions of this data set")
    found = file_versions(name)
    if found is None:
        st.caption("The list of file versions cannot be read from the data set store right now.")
    elif found.empty:
        st.caption("No file version is recorded for this data set in the data set store.")
    else:
        st.dataframe(found, hide_index=True, width="stretch", key="pl_versions",
                     column_config={c: st.column_config.Column(v) for c, v in VERSION_LABELS.items()})
    st.caption("Spends and the cap belong to the declared data set, not to one file: every version uploaded "
               "into it (a re-export, a corrected copy, a row fewer) spends from the same budget.")


ANSWER_LABELS = {"new_name": "Declared data set", "compared_name": "Shares rows with", "relation": "How",
                 "answered_utc": "Answered (UTC)", "curator": "By", "fingerprint": "File or folder fingerprint"}
ANSWER_ORDER = ["new_name", "compared_name", "relation", "answered_utc", "curator", "fingerprint"]


def different_answers(name: str | None = None) -> pd.DataFrame | None:
    """Every "different population" answer (those naming the declared data set ``name`` when given), oldest
    first; None when the answers cannot be read."""
    try:
        frame = population_answers().different()
    except ValueError:
        return None
    if name is not None:
        frame = frame[(frame["new_name"] == name) | (frame["compared_name"] == name)]
    return frame[ANSWER_ORDER].reset_index(drop=True)


def show_answers(frame: pd.DataFrame | None, key: str) -> None:
    """The "different population" answers: each is a budget started apart from rows already declared."""
    st.subheader("Declared as a different population")
    if frame is None:
        st.caption("The recorded answers cannot be read from the project database right now.")
        return
    if frame.empty:
        st.caption("No table sharing rows with a declared data set was declared as a different population.")
        return
    st.dataframe(frame, hide_index=True, width="stretch", key=key,
                 column_config={c: st.column_config.Column(v) for c, v in ANSWER_LABELS.items()})
    st.caption("Each row is the curator's recorded answer that a table whose rows were found in a declared data "
               "set is nevertheless a different population, with a budget of its own. Both budgets then cover "
               "the rows they share.")


def answer_records(frame: pd.DataFrame | None) -> list[dict]:
    """The answers as the downloads carry them: names, when, who and the file's fingerprint; how the rows
    relate is computed from the private rows, so it stays on this screen."""
    return [] if frame is None else frame.drop(columns=["relation"]).to_dict("records")


def decision_text(decision) -> str:
    if isinstance(decision, Cap):
        return (f"rho {decision.amount:.4g}" if decision.unit == "rho"
                else f"epsilon {decision.amount:.4g} at delta {decision.delta:.2g}")
    return "no cap (recorded choice)" if decision == NO_CAP else "not decided yet"


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
in_use = data_in_use()
if in_use is not None:
    labels.setdefault(in_use[0], in_use[1])
labels.update({k: f"{v} (declared data set)" for k, v in labels.items() if declared_name(k) is not None})
choices = list(dict.fromkeys([ALL, *([in_use[0]] if in_use else []), *known["data_key"], *DATASETS, *GEOGRAPHIES]))
# open on the data set this session last used on any page (once per change of that data set)
if in_use is not None and st.session_state.get("pl_opened_on") != in_use[0]:
    st.session_state["pl_opened_on"] = in_use[0]
    st.session_state["pl_data"] = in_use[0]
elif "pl_data" not in st.session_state and in_use is None:
    st.session_state["pl_data"] = ALL
key = st.selectbox("Data set", choices, key="pl_data", persist_state=S,
                   format_func=lambda k: "All data sets (summary)" if k == ALL else labels.get(k, k),
                   help="A bundled data set by name, a declared data set by its name (every file version "
                        "uploaded into it together), or an undeclared upload by its SHA-256 fingerprint. It opens "
                        "on the data set last used on any page in this browser session.")

if key == ALL:
    st.subheader("Every data set with a release or a cap decision")
    keys = list(known["data_key"])
    st.metric("Data sets with a release or a cap decision", len(keys))
    if keys:
        st.dataframe(summary_frame(ledger, keys, labels), hide_index=True, width="stretch", key="pl_summary")
        st.caption("Each total is stated at its cap's delta, else at the ledger's default delta "
                   f"{DEFAULT_DELTA:g}; a pure-DP total has delta 0. Choose a data set above for its releases, cap "
                   "and downloads.")
    else:
        st.info("No release has been recorded for any data set yet.")
    answers = different_answers()
    show_answers(answers, "pl_answers_all")
    if answers is not None and not answers.empty:
        a1, a2 = st.columns(2)
        a1.download_button("Download the answers (JSON)", json.dumps(answer_records(answers), indent=1),
                           file_name="different_population_answers.json", mime="application/json",
                           key="pl_answers_json", icon=":material/download:")
        a2.download_button("Download the answers (CSV)", guarded_csv(answers.drop(columns=["relation"])),
                           file_name="different_population_answers.csv", mime="text/csv", key="pl_answers_csv",
                           icon=":material/table_view:")
    with st.expander("What counts as a release, and how totals compose"):
        st.markdown(WHAT_COUNTS)
    st.stop()

decision = ledger.cap_decision(key)
cap = decision if isinstance(decision, Cap) else None
with st.expander("Budget cap for this data set", expanded=cap is None):
    decided = ledger.cap_decided_by(key)
    st.markdown(f"**Current decision**: {decision_text(decision)}"
                + (f" (by {plain(decided[0])}, {plain(decided[1][:16].replace('T', ' '))} UTC)." if decided else "."))
    c1, c2, c3 = st.columns(3)
    unit = c1.radio("Cap in", ["epsilon", "rho"], index=0 if cap is None or cap.unit == "epsilon" else 1,
                    key=f"pl_cap_unit_{key}", horizontal=True, persist_state=S)
    amount = c2.number_input(f"Cap ({unit})", 0.001, 1000.0, float(cap.amount) if cap else None, 0.1,
                             key=f"pl_cap_amount_{key}", persist_state=S, placeholder="no cap saved",
                             help="Empty until a cap is saved for this data set.")
    cap_delta = c3.number_input("delta the cap holds at", 1e-12, 0.1, float(cap.delta) if cap else DEFAULT_DELTA,
                                format="%.1e", key=f"pl_cap_delta_{key}", persist_state=S,
                                disabled=unit == "rho")
    s1, s2, s3 = st.columns(3)
    if s1.button("Save cap", key="pl_cap_save", type="primary"):
        try:
            if amount is None:
                raise ValueError("Enter the cap first (a positive number), then save it.")
            ledger.set_cap(key, Cap(float(amount), unit, float(cap_delta)), curator=curator_name())
            st.rerun()
        except ValueError as exc:
            st.error(str(exc))
    if decision != NO_CAP and s2.button("Record 'no cap'", key="pl_no_cap",
                                        help="The explicit choice to release this data set without a cap; "
                                             "releases are then never refused for their total."):
        ledger.set_no_cap(key, curator=curator_name())
        st.rerun()
    if decision is not None and s3.button("Undo the decision", key="pl_cap_remove",
                                          help="Back to undecided: the next release asks for a cap again."):
        ledger.set_cap(key, None, curator=curator_name())
        st.rerun()

delta = cap.delta if cap is not None else DEFAULT_DELTA
rels = ledger.releases(key)
made = [r for r in rels if r.kind == "release"]
totals = compose(made, delta)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Releases", totals.n_releases)
m2.metric("Total epsilon", f"{totals.epsilon:.4g}", help=f"At delta {0.0 if totals.pure else totals.delta:.2g}.")
m3.metric("delta", "0 (pure DP)" if totals.pure else f"{totals.delta:.2g}")
m4.metric("Total rho (zCDP)", "n/a" if totals.rho is None else f"{totals.rho:.4g}",
          help="Not defined once an (epsilon, delta) spend is in the ledger.")
st.caption(f"zCDP spends are stated as epsilon at delta {delta:g} ("
           + ("the cap's delta" if cap is not None else "the ledger's default delta; a cap sets its own") +
           "), here, in every release confirmation and in the sidebar. A release labelled with another delta "
           "(a page's own setting) is the same spend converted at that delta.")
if cap is not None:
    verdict = check_cap(made, cap)
    (st.success if verdict.within else st.error)(f"Spent so far: {verdict.message}")
elif decision == NO_CAP:
    st.info("No cap, by the curator's recorded choice: releases of this data set are never refused for their "
            "total (each still asks for confirmation and is recorded).")
else:
    st.info("No budget cap has been decided for this data set: the first release on any page asks for one (a "
            "cap, or the explicit choice of no cap).")

answers = None
if declared_name(key) is not None:
    show_versions(declared_name(key))
    answers = different_answers(declared_name(key))
    show_answers(answers, "pl_answers")

frame = spends_frame(rels)   # for the downloads; the tables number releases and simulations apart
sims = [r for r in rels if r.kind == "simulation"]
st.subheader("Releases")
if made:
    cumulative = cumulative_frame(made, delta)
    chart_unit = "rho" if cap is not None and cap.unit == "rho" and totals.rho is not None else "epsilon"
    st.plotly_chart(cumulative_figure(cumulative, cap, chart_unit, delta), key="pl_cumulative", width="stretch")
    show(spends_frame(made), "pl_releases")
else:
    st.info("No release has been recorded for this data set yet.")
held = ledger.reservations(key)
if held:
    st.subheader("Reserved (a release running now; counted toward the cap until committed or expired)")
    show(spends_frame([r for _, r in held]).assign(created_utc=[res.expires_utc for res, r in held
                                                                for _ in r.spends]), "pl_reserved")
    st.caption("The time column of this table is when each reservation expires if it is never committed.")
st.subheader("Simulations (seeded previews, not counted)")
if sims:
    show(spends_frame(sims), "pl_simulations")
else:
    st.caption("No seeded preview recorded for this data set.")

d1, d2 = st.columns(2)
exported = {**ledger.export(key), "different_population_answers": answer_records(answers)}
d1.download_button("Download the ledger (JSON)", json.dumps(exported, indent=1, allow_nan=False),
                   file_name=f"privacy_ledger_{key[:24].replace(':', '_')}.json", mime="application/json",
                   key="pl_json", icon=":material/download:")
d2.download_button("Download the ledger (CSV)", guarded_csv(frame),
                   file_name=f"privacy_ledger_{key[:24].replace(':', '_')}.csv", mime="text/csv",
                   key="pl_csv", icon=":material/table_view:")
with st.expander("What counts as a release, and how totals compose"):
    st.markdown(WHAT_COUNTS)
