"""Pin a page's results as A, change the settings and see the current results (B) beside A.

The pin is a frozen snapshot of A's report (plan, headline, tables) kept in ``st.session_state``
under the page's key, so it survives leaving the page and is never recomputed. Pins can be saved
by name in the project database and reopened; two report files can be compared as well.
"""
from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pandas as pd
import streamlit as st

from core.compare import Comparison, Snapshot, compare, compare_reports, readable_name, snapshot_of_report
from core.report import tables_zip
from core.sharing import CONFIDENTIAL_MARK, CONFIDENTIAL_README, is_confidential
from core.scenarios import MAX_SCENARIO_NAME, ScenarioExists, get_scenario_store
from core.uploads import read_bytes
from dashboard.components import access
from core.areas import area_for
from core.figures.overlays import (DIFFERENCE_COLUMNS,  # noqa: F401
                                        district_difference_figure, overlay_figures, overlay_for)

S = "session"
DELTA_LABELS = {"number": "Headline number", "A": "A (pinned)", "B": "B (current)", "change": "B − A",
                "change_pct": "Change (% of A)", "direction": "Direction", "why": "Not subtracted because"}
CELL_LABELS = {**DELTA_LABELS, "column": "Quantity"}


def pin_key(key: str) -> str:
    """Where a panel keeps its pin in the session."""
    return f"{key}__pin"


def pinned_for_report(report: dict, key: str, result=None):
    """What the stakeholder report needs to be an A/B report when a scenario is pinned on this panel, as a
    function to call when the report is made: it gives the pin's saved report (``compare``) and the overlays
    the panel draws (``overlays``), or nothing without a pin or when the two cannot be compared. The pin is
    read now, during the page's run (a download made later has no session to read it from)."""
    pinned: Snapshot | None = st.session_state.get(pin_key(key))

    def parts() -> dict:
        if pinned is None:
            return {}
        try:
            comparison = compare(pinned, snapshot_of_report(report, "B"))
        except ValueError:
            return {}
        return {"compare": pinned.report, "overlays": overlay_figures(comparison, report_outlines(result))}
    return parts


def pin_compare_panel(result, report: dict, *, page: str, key: str) -> Comparison | None:
    """"Pin as A", the comparison of the current results with the pin, saved pins and file comparison.
    ``report`` is the current result's report (already built for the downloads); returns the comparison."""
    pinned: Snapshot | None = st.session_state.get(pin_key(key))
    comparison = None
    with st.expander("Pin and compare scenarios", icon=":material/push_pin:", expanded=pinned is not None):
        b1, b2 = st.columns(2)
        if b1.button("Pin as A", key=f"{key}__pin_a", icon=":material/push_pin:",
                     help="Keep these results as A; change the settings and the results shown become B."):
            pinned = dataclasses.replace(snapshot_of_report(report, "A"), page=page)
            st.session_state[pin_key(key)] = pinned
        if pinned is not None and b2.button("Clear the pin", key=f"{key}__unpin"):
            st.session_state.pop(pin_key(key), None)
            pinned = None
        if pinned is None:
            st.caption("Pin these results as A, then change any setting: the new results (B) are compared "
                       "with A number by number. A is kept as it was, never rerun.")
        else:
            try:
                comparison = compare(pinned, snapshot_of_report(report, "B"))
            except ValueError as exc:
                st.error(f"Cannot compare: {exc}")
            else:
                show_comparison(comparison, key=key, result=result)
        saved_section(pinned, report, page=page, key=key)
    with st.expander("Compare two saved reports (files)", icon=":material/compare:"):
        files_section(key)
    return comparison


def delta_view(delta: pd.DataFrame, labels: dict[str, str] = DELTA_LABELS) -> pd.DataFrame:
    """A delta table with human column and number names (numbers stay numbers; the table formats them)."""
    if "number" in delta.columns:
        delta = delta.assign(number=delta["number"].map(readable_name))
    return delta.rename(columns=labels)


DELTA_FORMATS = {DELTA_LABELS["A"]: st.column_config.NumberColumn(format="%.4g"),
                 DELTA_LABELS["B"]: st.column_config.NumberColumn(format="%.4g"),
                 DELTA_LABELS["change"]: st.column_config.NumberColumn(format="%+.4g"),
                 DELTA_LABELS["change_pct"]: st.column_config.NumberColumn(format="%+.1f%%")}


def show_comparison(comparison: Comparison, *, key: str, result=None, files: bool = False) -> None:
    """Delta table of the headline numbers, the main figure overlaid, and per-table deltas."""
    if comparison.same_plan:
        st.info("B has the same settings as A: change a setting to see the difference.")
    st.dataframe(delta_view(comparison.headline), hide_index=True, key=f"{key}__delta", column_config=DELTA_FORMATS)
    st.caption("B − A with its sign; the change in percent is of |A| and is left blank when A is 0. A number that "
               "measures something else under A than under B (another loss or measure) is shown side by side, "
               "not subtracted.")
    worst = comparison.worst_off()
    if not worst.empty:
        st.markdown("**The worst-off group, A and B**")
        st.dataframe(worst.rename(columns={"what": "Under", "A": "A (pinned)", "B": "B (current)",
                                           "changed": "Changed"}), hide_index=True, key=f"{key}__worst_off")
    st.plotly_chart(overlay_for(comparison), key=f"{key}__overlay")
    if not files and _district_plan(getattr(result, "plan", None)):
        district_difference(comparison, result, key)
    names = comparison.common_tables()
    if names:
        name = st.selectbox("Differences in the table", names, key=f"{key}__delta_table", persist_state=S)
        if comparison.too_large(name):
            st.caption("This table is too large to compare cell by cell here; download both reports instead.")
        else:
            st.dataframe(delta_view(comparison.table(name), CELL_LABELS), hide_index=True,
                         key=f"{key}__delta_cells", column_config=DELTA_FORMATS)
    private = any(is_confidential(side.report) for side in (comparison.a, comparison.b))
    st.download_button(f"{'Confidential: ' if private else ''}Download the comparison (CSV, zipped)",
                       lambda: tables_zip(comparison.tables(), readme=CONFIDENTIAL_README if private else None),
                       file_name=f"{key}_comparison{'_confidential' if private else ''}.zip", mime="application/zip",
                       key=f"{key}__delta_zip", icon=":material/download:",
                       help="The headline delta, the worst-off groups of A and B and every table's cell deltas (tables with one row per block are "
                            "left out)." + (f" {CONFIDENTIAL_MARK}." if private else ""))


def _district_plan(plan) -> bool:
    """Whether ``plan`` is the district maps' (whose comparison also draws a per-district difference map)."""
    area = area_for(plan) if plan is not None else None
    return area is not None and area.key == "districts"


@st.cache_resource(max_entries=8, show_spinner=False)
def district_outlines(plan_digest: str, _result):
    """District polygons of plan 1 of a district result, and their GeoJSON (cached per plan)."""
    from core.districts.display import district_shapes
    from core.districts.workflow import load_geography
    from core.figures.districts import map_geojson

    numbers = pd.DataFrame({"district": np.unique(_result.labels[0]) + 1})
    shapes = district_shapes(load_geography(_result.plan), _result.labels[0], numbers)
    return shapes, map_geojson(shapes, "district", 150.0)


def report_outlines(result):
    """B's plan-1 district polygons for the A/B report's difference map, when ``result`` is a district result
    on a geography the server can load (not an upload); None otherwise."""
    plan = getattr(result, "plan", None)
    if not _district_plan(plan) or plan.data.source == "upload":
        return None
    return district_outlines(plan.digest(), result)


def district_difference(comparison: Comparison, result, key: str) -> None:
    """Map of B's districts coloured by each district's B − A (districts matched by number)."""
    st.markdown("**Per-district difference (B − A), plan 1**")
    if result.plan.data.source == "upload":
        st.caption("The map needs the uploaded geography; the table below holds the same differences.")
        return
    column = st.selectbox("Difference in", list(DIFFERENCE_COLUMNS), format_func=DIFFERENCE_COLUMNS.get,
                          key=f"{key}__diff_col", persist_state=S)
    shapes, geojson = district_outlines(result.plan.digest(), result)
    st.plotly_chart(district_difference_figure(comparison, shapes, geojson, column), key=f"{key}__diff_map")
    st.caption("Districts are matched by number: with different plans, district 3 of B is compared with "
               "district 3 of A. Districts only one side has are grey.")


def saved_section(pinned: Snapshot | None, report: dict, *, page: str, key: str) -> None:
    """Save the pin (or, with no pin, the current results) under a name; reopen a saved one as A."""
    st.markdown("**Saved scenarios**")
    try:
        store = get_scenario_store()
        plan_class = str((report.get("plan") or {}).get("__type__", ""))
        listing = store.listing(page, plan_class)
    except ValueError as exc:
        st.error(str(exc))
        return
    s1, s2 = st.columns([3, 1], vertical_alignment="bottom")
    name = s1.text_input("Name", key=f"{key}__save_name", max_chars=MAX_SCENARIO_NAME, persist_state=S,
                         placeholder="e.g. equal split, 4 districts")
    what = "A" if pinned is not None else "these results"
    pending_key = f"{key}__replace_pending"
    saved = None
    if s2.button(f"Save {what}", key=f"{key}__save", icon=":material/save:"):
        snapshot = pinned if pinned is not None else dataclasses.replace(snapshot_of_report(report, "A"), page=page)
        snapshot = dataclasses.replace(snapshot, page=page)
        st.session_state.pop(pending_key, None)
        try:
            saved = store.save(name, snapshot, curator=access.curator_name())
        except ScenarioExists as exc:       # never replace silently: ask first, keeping what was clicked
            st.session_state[pending_key] = (exc.name, snapshot)
        except ValueError as exc:
            st.error(str(exc))
    pending = st.session_state.get(pending_key)
    if pending is not None and saved is None:
        saved = replace_prompt(store, pending, pending_key, key)
    if saved is not None:
        st.success(f"Saved as {saved!r}.")
        listing = store.listing(page, plan_class)
    if listing.empty:
        st.caption("No scenario saved for this page yet.")
        return
    o1, o2 = st.columns([3, 1], vertical_alignment="bottom")
    choice = o1.selectbox("Saved scenario", list(listing["name"]), key=f"{key}__open_name", persist_state=S,
                          format_func=lambda n: (f"{n} (saved {listing.set_index('name').at[n, 'saved_at'][:16]} UTC "
                                                 f"by {listing.set_index('name').at[n, 'curator']})"))
    if o2.button("Open as A", key=f"{key}__open", icon=":material/folder_open:"):
        try:
            st.session_state[pin_key(key)] = dataclasses.replace(store.load(page, choice, "A"), page=page)
        except ValueError as exc:
            st.error(str(exc))
        else:
            st.rerun()


def replace_prompt(store, pending: tuple[str, Snapshot], pending_key: str, key: str) -> str | None:
    """Ask whether the scenario just saved should replace the saved one of that name; the name on a yes."""
    name, snapshot = pending
    st.warning(f"Replace the saved scenario {name!r}? A scenario of that name is already saved for this "
               "page; replacing it loses the earlier one. To keep both, cancel and choose another name.")
    r1, r2 = st.columns(2)
    if r1.button("Replace", key=f"{key}__replace_yes", icon=":material/sync:"):
        st.session_state.pop(pending_key, None)
        try:
            return store.save(name, snapshot, replace=True, curator=access.curator_name())
        except ValueError as exc:
            st.error(str(exc))
    elif r2.button("Cancel", key=f"{key}__replace_no"):
        st.session_state.pop(pending_key, None)
        st.rerun()
    return None


def remembered_upload(label: str, key: str) -> bytes | None:
    """An uploaded file's bytes, kept in the session so they are still there after leaving the page."""
    store = f"{key}__bytes"
    upload = st.file_uploader(label, type=["json"], key=key)
    if upload is not None:
        try:
            raw = read_bytes(upload)
        except ValueError as exc:
            st.error(str(exc))
            return None
        st.session_state[store] = (hashlib.sha256(raw).hexdigest(), upload.name, raw)
    kept = st.session_state.get(store)
    if kept is not None and upload is None:
        st.caption(f"Using {kept[1]} from earlier in this session.")
        if st.button("Forget this file", key=f"{key}__forget"):
            st.session_state.pop(store, None)
            return None
    return None if kept is None else kept[2]


def files_section(key: str) -> None:
    """Upload two saved reports (A, B) of the same page and compare them."""
    f1, f2 = st.columns(2)
    with f1:
        raw_a = remembered_upload("Report A (JSON)", f"{key}__file_a")
    with f2:
        raw_b = remembered_upload("Report B (JSON)", f"{key}__file_b")
    if raw_a is None or raw_b is None:
        st.caption("Upload two reports downloaded from this page to see B − A for every headline number.")
        return
    try:
        comparison = compare_reports(raw_a, raw_b)
    except ValueError as exc:
        st.error(f"Cannot compare these files: {exc}")
        return
    show_comparison(comparison, key=f"{key}__files", files=True)
