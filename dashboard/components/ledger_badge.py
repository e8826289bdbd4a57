"""The project privacy ledger on every page: the sidebar badge, the recording call for seeded simulations,
the data set in use, and the ledger a report carries (a real release is built and run by ``core.releases``,
behind the confirmation of ``dashboard.components.release_confirm``). Composition and storage live in
``core.privacy.project_ledger``; this module only draws and calls it."""
from __future__ import annotations

import os
from dataclasses import replace

import streamlit as st

from core.contracts import Plan
from core.privacy.project_ledger import DEFAULT_DELTA, LedgerRelease, ProjectLedger, data_key
from core.privacy.project_ledger import data_label as ledger_data_label
from core.releases import ledger_ref
from dashboard.components import access
from dashboard.components.plain_text import plain

@st.cache_resource(show_spinner=False)
def _ledger(db_url: str) -> ProjectLedger:
    return ProjectLedger(db_url or None)


def project_ledger() -> ProjectLedger:
    """The project ledger on the sessions' database (``DASHBOARD_DB_URL``; ValueError when unreachable)."""
    return _ledger(os.environ.get("DASHBOARD_DB_URL", ""))


def ledger_delta(key: str) -> float:
    """The delta a data set's zCDP spends are stated at everywhere: its cap's, else the ledger's default
    (as ``ProjectLedger.totals`` and ``preview`` compose them)."""
    cap = project_ledger().cap(key)
    return cap.delta if cap is not None else DEFAULT_DELTA


def total_text(key: str) -> str:
    """One line for a data set's running total, e.g. "epsilon 1.25 (delta 1e-06) of cap 2"."""
    ledger = project_ledger()
    t = ledger.totals(key)
    cap = ledger.cap(key)
    text = f"epsilon {t.epsilon:.3g}" + ("" if t.pure else f" (delta {t.delta:.2g})")
    if t.rho is not None and not t.pure:
        text += f", rho {t.rho:.3g}"
    if cap is not None:
        text += f" of cap {cap.amount:.3g}{'' if cap.unit == 'epsilon' else ' rho'}"
    return text


def badge_labels(sets) -> dict[str, str]:
    """Data set key -> the label people see; labels that name two data sets (two uploads called
    people.csv) get the start of their fingerprint so they can be told apart."""
    counts = sets["data_label"].value_counts()
    return {key: label if counts[label] == 1 else f"{label} ({key.split(':')[-1][:8]})"
            for key, label in zip(sets["data_key"], sets["data_label"])}


#: Seconds the sidebar's totals are kept between reruns (every page of every browser session draws them, so
#: a room of people clicking would otherwise read the whole ledger on each click).
BADGE_TTL_S = 5.0


@st.cache_data(ttl=BADGE_TTL_S, show_spinner=False, max_entries=8)
def badge_lines(db_url: str) -> list[str]:
    """One line per data set that has releases, for the ledger at ``db_url`` (kept ``BADGE_TTL_S``; a
    release recorded through ``record_release`` drops it at once). ValueError is not kept."""
    sets = project_ledger().data_sets(kind="release")    # data sets with only simulations spent nothing
    return [f"**{plain(label)}**: {total_text(key)}" for key, label in badge_labels(sets).items()]


def sidebar_badge() -> None:
    """Running totals of every data set that has releases, in the sidebar."""
    try:
        lines = badge_lines(os.environ.get("DASHBOARD_DB_URL", ""))
    except ValueError as exc:
        st.sidebar.caption(f"Privacy ledger unavailable: {exc}")
        return
    with st.sidebar.container(key="ledger_badge"):
        st.markdown("**Privacy spent** (releases only)")
        st.caption(("  \n".join(lines) if lines else "No release recorded yet.") +
                   "  \nDetails and caps: the Privacy ledger page.")


IN_USE = "ledger_data_in_use"


def mark_in_use(key: str, label: str = "") -> None:
    """Remember the data set this browser session last worked on (the Privacy ledger page opens on it)."""
    try:
        st.session_state[IN_USE] = (key, label or key)
    except Exception:   # outside a running page (a script building a report): nothing to remember
        pass


def data_in_use() -> tuple[str, str] | None:
    """(key, label) of the data set this browser session last used on any page, or None."""
    try:
        return st.session_state.get(IN_USE)
    except Exception:
        return None


def record_release(rel: LedgerRelease) -> bool:
    """Record a release or simulation in the project ledger; an error on screen (and False) when it fails.

    Pages call this on every rerun for their seeded previews (one entry per plan): a key this browser
    session has already stored is not sent to the database again."""
    mark_in_use(rel.data_key, rel.data_label)
    rel = replace(rel, curator=access.curator_name())
    seen = st.session_state.setdefault("ledger_recorded_keys", set())
    key = (os.environ.get("DASHBOARD_DB_URL", ""), rel.data_key, rel.release_key)
    if key in seen:
        return True
    try:
        project_ledger().record(rel)
    except ValueError as exc:
        st.error(str(exc))
        return False
    seen.add(key)
    badge_lines.clear()
    return True


def ledger_for_report(plan: Plan) -> dict | None:
    """The project ledger of the plan's data set, for a report (None without a data set; a note when the
    database cannot be read, so the report says so instead of omitting it silently)."""
    ref = ledger_ref(plan)
    if ref is None:
        return None
    if (data_in_use() or ("",))[0] != data_key(ref):
        mark_in_use(data_key(ref), ledger_data_label(ref))
    try:
        return project_ledger().export(data_key(ref))
    except ValueError as exc:
        return {"data_key": data_key(ref), "unavailable": str(exc)}
