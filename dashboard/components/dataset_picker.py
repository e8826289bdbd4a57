"""Reusable widget: choose bundled microdata (CPS extract, UCI Adult) or a data set declared on the Data step.

The Data step is the one intake: a curator's own file is declared there, and nowhere else (a plain upload
would be keyed by its bytes, so it could never carry one budget per population). Declared data sets are
kept in the project database with their file on the server (``core.intake.store.DataSetStore``: schema
and kept file, per signed-in curator, :func:`current_curator`), so they come back after a reload or a server restart: ``declared_data()``
fills ``st.session_state["declared_data"]`` (``{name: {"schema": DataSchema, "raw": bytes, "file_name":
str}}``) from the store, and the Data step page adds to it when it saves. The picker offers each one as
``"declared:<name>"`` and returns a :class:`PickedData` whose ``ref`` is ``DataRef("upload", fingerprint,
schema=schema)``, so the declaration travels in every plan and every run
cleans the file exactly as declared (``core.datasets.load_microdata``). A declared data set that still has
a problem blocking a run is not offered; the picker says which and why.

The choice follows the curator across pages: every picker writes what was chosen to
``st.session_state["data_choice"]`` and, when another page changed it since this picker last drew, starts
from it (bundled keys and declared data sets).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from core.contracts import DataRef, bytes_fingerprint
from core.datasets import DATASETS, load_dataset
from dashboard.components.plain_text import plain

MICRODATA_CHOICES = ("cps", "adult")
CHOICE_LABELS = {"cps": "CPS 1994-95 extract", "adult": "UCI Adult"}
DECLARED = "declared:"
DECLARED_DATA = "declared_data"          # session key: name -> {"schema", "raw", "file_name"}
DATA_CHOICE = "data_choice"              # session key: the choice last made on any page
_SEEN = "data_choice_seen"               # session key: widget key -> the shared choice it last followed
_LAST = "data_choice_last"               # session key: widget key -> its value when it last drew
DATA_STEP_HINT = ("Your own file is declared once on the **Data step** page (first among the tools): "
                  "roles, public categories and bounds, missing values, label merges, unit of protection. "
                  "It is then kept and offered here and on every microdata page, after a reload too.")


@dataclass(frozen=True)
class PickedData:
    """What the user chose: a reference a plan can hold, a name, the table, and (declared data) the bytes."""

    ref: DataRef
    name: str
    frame: pd.DataFrame
    raw: bytes | None = None

    def __iter__(self):  # (name, frame), the shape callers unpack
        return iter((self.name, self.frame))

    def __getitem__(self, i):
        return (self.name, self.frame)[i]


# ------------------------------------------------------------------------------------------- declared data

@st.cache_resource(show_spinner=False)
def _store(db_url: str):
    from core.intake.store import DataSetStore
    return DataSetStore(db_url or None)


def data_set_store():
    """The data set store in the project database (``DASHBOARD_DB_URL``); ValueError when unavailable."""
    return _store(os.environ.get("DASHBOARD_DB_URL", ""))


def current_curator() -> str:
    """The signed-in curator (sign-in cookie or identity provider), else ``LOCAL_CURATOR``: whose kept files
    and answers these are."""
    from dashboard.components import access
    return access.curator_name()


def declared_data() -> dict:
    """The declared data sets this session can use: name -> {"schema", "raw", "file_name"}; the ones kept in
    the project database for the signed-in curator are added the first time they are missing from the
    session."""
    session = st.session_state.setdefault(DECLARED_DATA, {})
    try:
        store = data_set_store()
        curator = current_curator()
        for name in store.kept_names(curator):
            if name in session:
                continue
            schema, kept = store.get(name), store.kept(name, curator)
            if schema is not None and kept is not None:
                session[name] = {"schema": schema, "raw": kept[1], "file_name": kept[0]}
    except ValueError:      # the project database cannot be read: this session's declarations only
        pass
    return session


def declared_key(name: str) -> str:
    """The choice key of a declared data set (what ``data_choice`` and the pickers hold)."""
    return DECLARED + name


def register_declared(schema, raw: bytes, file_name: str) -> str:
    """Offer ``schema`` over ``raw`` on every page of this session and make it the current choice."""
    declared_data()[schema.name] = {"schema": schema, "raw": bytes(raw), "file_name": str(file_name)}
    key = declared_key(schema.name)
    st.session_state[DATA_CHOICE] = key
    return key


def read_table_data(raw: bytes, file_name: str, options=None) -> pd.DataFrame:
    """A curator's file as text cells, by its suffix (CSV, Parquet, Excel) and read options (None: detected)."""
    from core.intake import read_table_bytes
    return read_table_bytes(bytes(raw), file_name, options)


def declared_ref(schema, raw: bytes) -> DataRef:
    """The reference a plan holds for a declared data set: the file's fingerprint and its schema."""
    return DataRef(DataRef.UPLOAD, bytes_fingerprint(bytes(raw)), schema=schema)


@st.cache_data(max_entries=8, show_spinner="Checking the declared data...")
def _blocking(digest: str, fingerprint: str, _schema, _raw: bytes, file_name: str) -> tuple[str, ...]:
    """The problems that block a run of the declared file (cached on the schema digest and file)."""
    from core.intake import check
    try:
        frame = read_table_data(_raw, file_name, _schema.read)
    except ValueError as exc:
        return (str(exc),)
    return tuple(p.line(values=False) for p in check(frame, _schema) if p.blocks)


@st.cache_data(max_entries=8, show_spinner="Cleaning the declared data...")
def _cleaned(digest: str, fingerprint: str, _ref: DataRef, _raw: bytes) -> pd.DataFrame:
    """The declared file cleaned by its schema: the one loader every run uses."""
    from core.datasets import load_microdata
    return load_microdata(_ref, bytes(_raw))


def declared_status(name: str) -> tuple[str | None, str | None]:
    """(label, None) for a declared data set a run can use, else (None, why not)."""
    entry = declared_data().get(name)
    if entry is None:
        return None, f"{name} is not declared (or its file is no longer kept): declare it on the Data step."
    schema, raw = entry["schema"], entry["raw"]
    blocks = _blocking(schema.digest(), bytes_fingerprint(raw), schema, raw, entry["file_name"])
    if blocks:
        return None, (f"{name}: {len(blocks)} problem{'s' if len(blocks) > 1 else ''} still block a run "
                      f"(first: {blocks[0]}). Fix them on the Data step page.")
    return f"{name} (declared: {entry['file_name']})", None


def pick_declared(name: str) -> PickedData:
    """The declared data set ``name`` cleaned by its schema; ValueError when it cannot run."""
    label, why = declared_status(name)
    if label is None:
        raise ValueError(why)
    entry = declared_data()[name]
    schema, raw = entry["schema"], entry["raw"]
    ref = declared_ref(schema, raw)
    frame = _cleaned(schema.digest(), ref.fingerprint, ref, raw)
    return PickedData(ref, schema.name, frame.copy(), raw)


def declared_options() -> tuple[dict[str, str], list[str]]:
    """({choice key: label} of the declared data sets a run can use, [why each other one is not offered])."""
    offered, refused = {}, []
    for name in list(declared_data()):
        label, why = declared_status(name)
        if label is None:
            refused.append(why)
        else:
            offered[declared_key(name)] = label
    return offered, refused


def declared_name(choice: str | None) -> str | None:
    """The declared data set's name in a choice key ("declared:<name>"), else None."""
    return choice[len(DECLARED):] if isinstance(choice, str) and choice.startswith(DECLARED) else None


def choice_of(ref: DataRef) -> str:
    """The picker choice that gives ``ref`` back (a saved plan's data -> the widget value)."""
    schema = getattr(ref, "schema", None)
    return declared_key(schema.name) if schema is not None else ref.source


def declared_ranges(ref: DataRef) -> dict[str, tuple[float, float]]:
    """Public ranges of the unbinned number columns a reference's declaration gives (none without one)."""
    schema = getattr(ref, "schema", None)
    if schema is None:
        return {}
    return {c.name: (float(c.bounds[0]), float(c.bounds[1])) for c in schema.used_columns()
            if c.role == "number" and c.bounds is not None and c.bins is None}


def declared_public(ref: DataRef) -> bool:
    """True when a reference's declaration makes every kept column's categories public: each category
    column lists its public categories and each number column has public bounds."""
    schema = getattr(ref, "schema", None)
    if schema is None:
        return False
    from core.intake import needs_public_info
    return not needs_public_info(schema)


# ------------------------------------------------------------------------------------------- following

def follow_choice(widget_key: str, options) -> bool:
    """Before drawing a data selectbox: when another page changed the shared choice since this widget last
    followed it, and this page offers it, start from it. True when the widget's value was set here."""
    shared = st.session_state.get(DATA_CHOICE)
    seen = st.session_state.setdefault(_SEEN, {})
    if shared is None or seen.get(widget_key) == shared:
        return False
    seen[widget_key] = shared
    if shared in options and st.session_state.get(widget_key) != shared:
        st.session_state[widget_key] = shared
        return True
    return False


def remember_choice(widget_key: str, choice: str) -> None:
    """After drawing: a choice the curator made here (the value changed since this widget last drew) becomes
    the shared one; merely opening a page changes nothing."""
    last = st.session_state.setdefault(_LAST, {})
    changed = widget_key in last and last[widget_key] != choice
    last[widget_key] = choice
    if not (changed or st.session_state.get(DATA_CHOICE) is None):
        return
    st.session_state[DATA_CHOICE] = choice
    st.session_state.setdefault(_SEEN, {})[widget_key] = choice


def data_selectbox(label: str, bundled, labels: dict, *, key: str, default: str | None = None,
                   help: str | None = None, container=None, **kwargs) -> str:
    """A data selectbox: ``bundled`` keys, then the declared data sets; the choice follows the curator across
    pages. Returns the chosen key."""
    offered, refused = declared_options()
    options = [*bundled, *offered]
    names = {**labels, **offered}
    index = options.index(default) if default in options else 0
    asked = st.session_state.get(key)
    wanted = declared_name(asked)
    if wanted is not None and declared_key(wanted) not in options and wanted not in declared_data():
        st.info(f"The data set {plain(wanted)} (asked for by an opened report, or chosen earlier) is not declared: "
                "declare its file on the Data step to use it.")
    elif asked is not None and wanted is None and asked not in options:
        st.info("The opened report ran on a file uploaded without a declaration, which the tools no longer take: "
                "declare that file on the Data step (one intake, one budget per population) and choose it here.")
        st.session_state.pop(key)
    if follow_choice(key, options):
        index = 0          # the value was just set in the session; a second default would only warn
    choice = (container or st).selectbox(label, options, index=index, format_func=lambda k: names.get(k, k),
                                         key=key, help=help, **kwargs)
    for why in refused:
        st.caption(f"Not offered: {plain(why)}")      # names and problems come from the curator's file
    if not offered:
        st.caption(DATA_STEP_HINT)
    remember_choice(key, choice)
    return choice


# ------------------------------------------------------------------------------------------- the picker

def pick_microdata(key: str, default: str = "cps") -> PickedData | None:
    """Selectbox of bundled microdata and declared data sets; None when nothing usable is chosen yet."""
    if default not in MICRODATA_CHOICES:
        raise ValueError(f"default must be one of {MICRODATA_CHOICES}, not {default!r}")
    choice = data_selectbox("Microdata", MICRODATA_CHOICES, CHOICE_LABELS, key=f"{key}_dataset",
                            default=default, persist_state="session",
                            help="A bundled real data set, or your own file declared on the Data step.")
    name = declared_name(choice)
    if name is not None:
        try:
            picked = pick_declared(name)
        except ValueError as exc:
            st.error(str(exc))
            return None
        entry = declared_data()[name]
        st.caption(f"{plain(name)}: {len(picked.frame):,} rows x {picked.frame.shape[1]} columns after the "
                   f"declared cleaning of {plain(Path(entry['file_name']).name)}. The declaration (schema) travels "
                   "with every plan and report; change it on the Data step page.")
        return picked
    info = DATASETS[choice]
    frame = load_dataset(choice)
    st.caption(f"{info.label}: {len(frame):,} rows x {frame.shape[1]} columns. "
               f"Source: {info.provenance}. Licence: {info.licence}.")
    return PickedData(DataRef(choice), info.label, frame)
