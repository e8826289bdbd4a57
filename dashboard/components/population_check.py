"""Before a new declared data set is saved: "is this the same population as a data set already declared?".

The ledger counts spends per declared data set (``core.privacy.project_ledger.data_key``), so the same rows
declared under a new name would start a fresh budget. The Data step page calls :func:`confirm_population`
before saving a NEW data set (an upload or a folder of parts), with how the new table's rows stand to each
declared data set's (:func:`upload_overlaps` / :func:`folder_overlaps`, from ``core.intake.identity``'s
sketches); the relation words and the recorded answers live in ``core.privacy.population`` (this module
only asks and draws).

* ``None``: the curator has not answered yet; the question is on screen, naming each declared data set the
  table shares rows with and how (the same rows, a subset, a superset, some rows in common);
* ``True``: the same population: the caller files the table under that data set, whose name
  :func:`same_population_as` gives (its spends and cap go on);
* ``False``: a new data set with a fresh budget: it shares no rows with any declared data set, or the curator
  answered, on the record, that it is a different population (the privacy ledger page lists that answer).

No count and no share of rows is shown: only names and the relation's words.
"""
from __future__ import annotations

import hashlib
import os
from typing import Mapping

import pandas as pd
import streamlit as st

from core.intake.identity import (column_terms, compare, frame_sketches, installation_secret, match)
from core.intake.schema import DEFAULT_MISSING_TOKENS
from core.privacy.population import PopulationAnswers, related
from dashboard.components.dataset_picker import current_curator, data_set_store
from dashboard.components.plain_text import bare, plain

QUESTION = "Is this the same population as a data set already declared?"
NEW = "__new_population__"
DECIDED = "population_decided"     # session key: (new name, fingerprint) -> the name it was filed under, or None
TOKENS = tuple(DEFAULT_MISSING_TOKENS)   # one reading of missing cells for every table, whatever its declaration


@st.cache_resource(show_spinner=False)
def _answers(db_url: str) -> PopulationAnswers:
    return PopulationAnswers(db_url or None)


def population_answers() -> PopulationAnswers:
    """The recorded answers, in the project database (``DASHBOARD_DB_URL``)."""
    return _answers(os.environ.get("DASHBOARD_DB_URL", ""))


def _stored_digest(stored: Mapping) -> str:
    sha = hashlib.sha256()
    for name, sketches in sorted(stored.items()):
        sha.update(name.encode("utf-8") + b"\0")
        for sketch in sketches:
            sha.update("\0".join(sketch.columns).encode("utf-8") + sketch.to_bytes())
    return sha.hexdigest()


def _key_id(secret: bytes) -> str:
    """Which installation key a cached result was made with (a digest, never the key)."""
    return hashlib.sha256(b"key id" + secret).hexdigest()[:16]


@st.cache_data(max_entries=8, show_spinner="Comparing the rows with the declared data sets...")
def _upload_overlaps(fingerprint: str, stored_digest: str, key_id: str, _frame: pd.DataFrame, _stored,
                     _secret: bytes) -> dict:
    return match(column_terms(_frame, TOKENS, _secret), _stored, _secret)


@st.cache_data(max_entries=8, show_spinner="Fingerprinting the rows...")
def _upload_sketches(fingerprint: str, key_id: str, _frame: pd.DataFrame, _secret: bytes) -> list:
    return frame_sketches(_frame, TOKENS, _secret)


def upload_sketches(fingerprint: str, frame: pd.DataFrame) -> list:
    """The population sketches a saved upload keeps (``core.intake.identity``), cached on its fingerprint and
    the installation's key."""
    secret = installation_secret()
    return _upload_sketches(fingerprint, _key_id(secret), frame, secret)


def upload_overlaps(fingerprint: str, frame: pd.DataFrame) -> dict:
    """How an uploaded table's rows stand to each declared data set's: name -> Overlap."""
    stored = data_set_store().sketches()
    secret = installation_secret()
    return _upload_overlaps(fingerprint, _stored_digest(stored), _key_id(secret), frame, stored, secret)


def folder_overlaps(sketches) -> dict:
    """How a folder's rows (its sketches, from the check of every part) stand to each declared data set's."""
    out = {}
    for name, old in data_set_store().sketches().items():
        found = compare(sketches, old)
        if found is not None:
            out[name] = found
    return out


def _remember(name: str, fingerprint: str, filed_under: str | None) -> None:
    st.session_state.setdefault(DECIDED, {})[(name, fingerprint)] = filed_under


def same_population_as(schema, fingerprint: str) -> str | None:
    """The data set a table was confirmed to be the same population as (its name), else None."""
    found = st.session_state.get(DECIDED, {}).get((schema.name, fingerprint))
    if found is not None:
        return found
    decision = population_answers().decision(schema.name, fingerprint, ())
    return decision if isinstance(decision, str) else None


def confirm_population(schema, fingerprint: str, overlaps: Mapping, *, curator: str | None = None,
                       key: str = "population") -> bool | None:
    """Ask, once per table, whether a new data set is the same population as a declared one it shares rows
    with. ``overlaps`` maps declared names to ``core.intake.identity.Overlap``. Returns None until answered,
    True for the same population (then :func:`same_population_as` names the data set to file it under),
    False for a new data set with a fresh budget. The answer is recorded as ``curator``'s (the signed-in
    curator by default). ``key`` prefixes the question's widgets (a page may ask in
    two places; the first answer recorded answers both)."""
    name, fingerprint = schema.name, str(fingerprint)
    matches = related(overlaps, exclude=name)
    if not matches:
        return False
    answers = population_answers()
    compared = [m.name for m in matches]
    try:
        decided = answers.decision(name, fingerprint, compared)
    except ValueError as exc:
        st.error(str(exc))
        return None
    if decided is not None:
        _remember(name, fingerprint, decided or None)
        return decided is not False

    key = f"{key}_{fingerprint[:16]}"
    box = st.empty()
    with box.container(border=True, key=f"{key}_box"):
        st.warning(f"**{QUESTION}** The rows of **{plain(name)}** are found in "
                   + ("this declared data set" if len(matches) == 1 else "these declared data sets")
                   + " (compared by content: the names, column order, number formats and the file's bytes "
                     "do not matter):")
        st.markdown("\n".join(f"- **{plain(m.name)}**: {m.words}" for m in matches))
        st.caption("The same people under a new name would start a fresh privacy budget, and the ledger would no "
                   "longer count what was already spent on them. File it under the data set it comes from: its "
                   "spends and cap go on. Answering that it is a different population is recorded, with when, "
                   "and listed on the Privacy ledger page.")
        options = [*compared, NEW]
        choice = st.radio("This table is", options, index=None, key=f"{key}_choice",
                          format_func=lambda o: (f"the same population as {bare(o)}" if o != NEW else
                                                 "a different population: start a new data set with a fresh "
                                                 "budget (recorded)"))
        pressed = st.button("Record the answer", key=f"{key}_record", type="primary", disabled=choice is None)
    if not pressed or choice is None:
        return None
    same_as = None if choice == NEW else choice
    try:
        answers.record(name, fingerprint, same_as, compared, relations={m.name: m.relation for m in matches},
                       curator=curator or current_curator())
    except ValueError as exc:
        st.error(str(exc))
        return None
    _remember(name, fingerprint, same_as)
    box.empty()
    st.success(f"Recorded: {plain(name)} is " + (f"the same population as {plain(same_as)}; it is filed under it."
                                                  if same_as is not None else
                                                  "a different population, with a budget of its own."))
    return same_as is not None


__all__ = ["QUESTION", "confirm_population", "folder_overlaps", "population_answers", "same_population_as",
           "upload_overlaps", "upload_sketches"]
