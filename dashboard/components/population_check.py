"""Before a new declared data set is saved: "is this the same population as a data set that already has a
privacy budget?".

The ledger counts spends per declared data set (``core.privacy.project_ledger.data_key``), so a re-export of
a capped data set declared under a new name would start a fresh budget for the same people. The Data step
page calls :func:`confirm_population` before saving a NEW data set; the closeness rule and the recorded
answers live in ``core.privacy.population`` (this module only asks and draws).

* ``None``: the curator has not answered yet; the question is on screen, with the capped data sets the
  upload is close to (the same or nearly the same column names and close in size);
* ``True``: the same population: the caller files the upload as a version of that data set, whose name
  :func:`same_population_as` gives (its spends and cap go on);
* ``False``: a new data set with a fresh budget (nothing close, or the curator said so).

Both answers are recorded in the project database. Row counts are compared and forgotten: the question says
"close in size", never a number.
"""
from __future__ import annotations

import os
from typing import Iterable

import streamlit as st

from core.contracts import bytes_fingerprint
from core.privacy.population import Candidate, PopulationAnswers, budgeted_names, column_overlap, similar_data_sets
from dashboard.components.ledger_badge import project_ledger
from dashboard.components.plain_text import bare, plain

QUESTION = "Is this the same population as a data set that already has a privacy budget?"
NEW = "__new_population__"
DECIDED = "population_decided"     # session key: (new name, fingerprint) -> the name it was filed under, or None


@st.cache_resource(show_spinner=False)
def _answers(db_url: str) -> PopulationAnswers:
    return PopulationAnswers(db_url or None)


def population_answers() -> PopulationAnswers:
    """The recorded answers, in the project database (``DASHBOARD_DB_URL``)."""
    return _answers(os.environ.get("DASHBOARD_DB_URL", ""))


def _stored_schema(name: str):
    """A declared data set's schema from the data set store, when that store exists and holds it."""
    try:
        from core.intake.store import DataSetStore
    except ImportError:
        return None
    try:
        return DataSetStore(os.environ.get("DASHBOARD_DB_URL") or None).get(name)
    except ValueError:
        return None


@st.cache_data(max_entries=16, show_spinner=False)
def _row_count(fingerprint: str, _raw: bytes, file_name: str) -> int | None:
    """How many rows a declared file has (kept in this process's memory only, for the comparison)."""
    from dashboard.components.dataset_picker import read_table_data
    try:
        return len(read_table_data(_raw, file_name))
    except ValueError:
        return None


def candidates(names: Iterable[str]) -> list[Candidate]:
    """The budgeted data sets ``names`` with their column names (from the data set store, else this
    session's declaration) and, when the file is loaded in this session, their row counts."""
    from dashboard.components.dataset_picker import declared_data
    session = declared_data()
    out = []
    for name in names:
        entry = session.get(name) or {}
        schema = entry.get("schema") or _stored_schema(name)
        if schema is None:     # nothing known about its columns: it cannot be compared
            continue
        n_rows = None
        if entry.get("raw") is not None:
            n_rows = _row_count(bytes_fingerprint(entry["raw"]), entry["raw"], entry.get("file_name", ".csv"))
        out.append(Candidate(name, tuple(c.name for c in schema.columns), n_rows))
    return out


def _remember(name: str, fingerprint: str, filed_under: str | None) -> None:
    st.session_state.setdefault(DECIDED, {})[(name, fingerprint)] = filed_under


def same_population_as(schema, fingerprint: str) -> str | None:
    """The data set an upload was confirmed to be the same population as (its name), else None."""
    found = st.session_state.get(DECIDED, {}).get((schema.name, fingerprint))
    if found is not None:
        return found
    decision = population_answers().decision(schema.name, fingerprint, ())
    return decision if isinstance(decision, str) else None


def _why_close(cols: tuple[str, ...], n_rows: int | None, cand: Candidate) -> str:
    overlap = column_overlap(cols, cand.columns)
    words = "the same column names" if overlap >= 1.0 else f"{overlap:.0%} of the column names shared"
    if n_rows is not None and cand.n_rows is not None:
        return words + ", close in size"
    return words + " (size not compared: its file is not loaded in this session)"


def confirm_population(schema, fingerprint: str, columns: tuple[str, ...], *,
                       n_rows: int | None = None) -> bool | None:
    """Ask, once per upload, whether a new data set is the same population as a budgeted one.

    ``columns`` are the new file's column names, ``n_rows`` its row count (None: compared on columns
    alone). Returns None until answered, True for the same population (then :func:`same_population_as`
    names the data set to file the upload under), False for a new data set with a fresh budget.
    """
    name, fingerprint = schema.name, str(fingerprint)
    cols = tuple(str(c) for c in columns)
    try:
        budgeted = budgeted_names(project_ledger())
    except ValueError as exc:
        st.error(f"The privacy ledger cannot be read, so this upload cannot be checked against the data sets "
                 f"that already have a budget: {exc}")
        return None
    if name in budgeted:       # the name already has a budget: the upload joins that data set
        _remember(name, fingerprint, name)
        st.info(f"**{plain(name)}** already has a privacy budget in the ledger: this file is filed as a "
                "version of it, and its spends and cap go on.")
        return True
    pool = candidates(budgeted)
    close = similar_data_sets(cols, n_rows, pool)
    if not close:
        return False
    answers = population_answers()
    try:
        decided = answers.decision(name, fingerprint, close)
    except ValueError as exc:
        st.error(str(exc))
        return None
    if decided is not None:
        _remember(name, fingerprint, decided or None)
        return decided is not False

    by_name = {c.name: c for c in pool}
    key = f"population_{fingerprint[:16]}"
    box = st.empty()
    with box.container(border=True, key=f"{key}_box"):
        st.warning(f"**{QUESTION}** The new data set **{plain(name)}** is close to "
                   + ("this data set" if len(close) == 1 else "these data sets")
                   + " that already have a cap or releases in the privacy ledger:")
        st.markdown("\n".join(f"- **{plain(c)}**: {_why_close(cols, n_rows, by_name[c])}" for c in close))
        st.caption("The same people under a new name would start a fresh privacy budget, and the ledger would no "
                   "longer count what was already spent on them. If this is a re-export, a corrected copy or a "
                   "subset of one of them, file it under that data set: its spends and cap go on.")
        options = [*close, NEW]
        choice = st.radio("This upload is", options, index=None, key=f"{key}_choice",
                          format_func=lambda o: ("a different population: start a new data set with a fresh "
                                                 "budget") if o == NEW else f"the same population as {bare(o)}")
        pressed = st.button("Record the answer", key=f"{key}_record", type="primary", disabled=choice is None)
    if not pressed or choice is None:
        return None
    same_as = None if choice == NEW else choice
    try:
        answers.record(name, fingerprint, same_as, close)
    except ValueError as exc:
        st.error(str(exc))
        return None
    _remember(name, fingerprint, same_as)
    box.empty()
    st.success(f"Recorded: {plain(name)} is " + (f"the same population as {plain(same_as)}; the file is filed as "
                                                  "a version of it." if same_as is not None else
                                                  "a different population, with a budget of its own."))
    return same_as is not None


__all__ = ["QUESTION", "candidates", "confirm_population", "population_answers", "same_population_as"]
