"""Data step: bring your own table once, declare it column by column, and use it on every microdata page.

Upload (CSV, Parquet, Excel) -> profile (curator-only) -> a drafted ``core.intake.DataSchema`` the curator
confirms with widgets -> every problem at once (``core.intake.check``) -> optional private estimates of
missing public bounds and categories (a real release, recorded under the data set the file's rows belong
to, declared from the moment it spends) -> save in the project database (``core.intake.store.DataSetStore``:
the declaration, the file kept on the server, the rows' population sketches; a table whose rows belong to
another declared data set first answers "same population?") and offer it on every microdata page, after a
reload or a restart too (``dashboard.components.dataset_picker``). This page is the one intake. Nothing is
computed here: reading, profiling, drafting, checking, cleaning and estimating are core's.

A table too large for a browser upload is named instead by the path of its folder of Parquet parts on this
machine (``core.intake.folder``): a bounded sample is profiled and drafted, every part is checked in one
pass, the declaration and the folder's path are saved, and a compact section below makes a synthetic copy
from the parts (``core.synthesis.folder_release``: MST or AIM through the shared release confirmation).
Both the check and the release say their work and its expected time first, then run as background jobs
that count parts on their bar and can be cancelled: the check is keyed by the declaration and the folder's
listing (a page left and opened again, or reloaded, finds its job or its result), the release lives only
while the page follows it, between the ledger's reservation and its commit, and its parts are published
only after the commit.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.contracts import Cancelled, bytes_fingerprint, digest_of  # noqa: E402
from core.intake import (MISSING_POLICIES, ColumnSchema, DataSchema, check, clean,  # noqa: E402
                         draft_schema, needs_public_info, profile)
from core.intake.folder import (SAMPLE_ROWS, check_folder, check_plan, folder_rows, folder_work,  # noqa: E402
                                list_folder, sample_rows)
from core.intake.estimate import (DEFAULT_DELTA, DEFAULT_QUANTILES, category_threshold,  # noqa: E402
                                  estimate_input, required_values)
from core.intake.options import DECIMALS, ENCODINGS, SEPARATORS, ReadOptions  # noqa: E402
from core.intake.read import read_file, table_suffix  # noqa: E402
from core.intake.check import unreadable_values  # noqa: E402
from core.intake.hints import named  # noqa: E402
from core.intake.schema import DEFAULT_MISSING_TOKENS  # noqa: E402
from core.intake.suggest import column_suggestions  # noqa: E402
from core.intake.values import read_values  # noqa: E402
from core.privacy.project_ledger import declared_key  # noqa: E402
from core.releases import folder_copy_release, private_estimate_release  # noqa: E402
from dashboard.components.dataset_picker import (current_curator, data_set_store, declared_data,  # noqa: E402
                                                 declared_ref, register_declared)
from dashboard.components.plain_text import plain  # noqa: E402
from dashboard.components.progress import attached_job, job_key, run_job  # noqa: E402
from dashboard.components.release_confirm import ReleaseJob, release_button  # noqa: E402
from dashboard.components.run_estimate import run_estimate_notice  # noqa: E402
from dashboard.components.uploads_kept import upload_kept  # noqa: E402

PAGE = "Data step"
P = "ds"
ROLE_LABELS = {"category": "Category", "number": "Number", "person_id": "Person id (unit of protection)",
               "leave_out": "Leave out"}
UNDECIDED = "undecided"
MISSING_LABELS = {UNDECIDED: "Not decided (blocks a run if the column has missing values)",
                  "own_category": "Its own category '(missing)'", "fill": "A public fill value",
                  "drop_row": "Drop the row"}
CURATOR_ONLY = ("Only on your screen: the profile, the problem list and every count on this page come from your "
                "private file. They are never exported, never put in a report, a plan or the privacy ledger. "
                "What travels is the declaration below (roles, public categories and bounds, missing values, "
                "merges, unit of protection), which holds nothing counted from the data.")
TYPES = ["csv", "tsv", "txt", "parquet", "pq", "xlsx"]
DETECT = "Detect"
MAX_WIDGET_SEED = 2**53 - 1   # the largest whole number a browser's number box holds exactly
STATE = "ds_state"         # {"fp", "base": DataSchema, "kind": "draft" | "declared", "gen": int}
PENDING = "ds_pending"     # widget values to set before the widgets are drawn (estimates)
UPLOAD, FOLDER = "Upload a file", "A folder of Parquet parts on this machine"


# ------------------------------------------------------------------------------------------- cached reads

@st.cache_data(max_entries=4, show_spinner="Reading the file...")
def _read(fingerprint: str, _raw: bytes, file_name: str, options_digest: str, _options: ReadOptions):
    return read_file(_raw, file_name, _options)


def _read_key(fp: str, what: str) -> str:
    return f"{P}_read_{what}_{fp[:16]}"


def chosen_read_options(fp: str) -> ReadOptions:
    """The read options chosen on the page for this file (Detect, the default, leaves a choice to the file)."""
    value = {w: st.session_state.get(_read_key(fp, w), DETECT) for w in ("encoding", "sep", "sheet", "decimal")}
    header = int(st.session_state.get(_read_key(fp, "header"), 0) or 0)
    chosen = {w: None if v == DETECT else v for w, v in value.items()}
    return ReadOptions(chosen["encoding"], chosen["sep"], chosen["sheet"], header or None, chosen["decimal"])


def read_option_widgets(fp: str, suffix: str, read) -> None:
    """The boxes that override what is detected (their values are read by :func:`chosen_read_options`)."""
    text = suffix not in (".xlsx", ".parquet", ".pq")
    c1, c2, c3, c4, c5 = st.columns(5)
    c1.selectbox("Encoding", [DETECT, *ENCODINGS], key=_read_key(fp, "encoding"), disabled=not text,
                 format_func=lambda e: ENCODINGS.get(e, e))
    c2.selectbox("Separator", [DETECT, *SEPARATORS], key=_read_key(fp, "sep"), disabled=not text,
                 format_func=lambda v: f"{SEPARATORS[v]} ({v!r})" if v in SEPARATORS else v)
    sheets = list(read.report.sheets) if read is not None else []
    chosen = st.session_state.get(_read_key(fp, "sheet"))
    c3.selectbox("Sheet", [DETECT, *sheets, *([chosen] if chosen and chosen != DETECT and chosen not in sheets
                                              else [])],
                 key=_read_key(fp, "sheet"), disabled=suffix != ".xlsx",
                 help="Every sheet of the workbook; Detect reads the first one that holds a table.")
    c4.number_input("Header row (0: detect)", 0, 1000, key=_read_key(fp, "header"),
                    disabled=suffix in (".parquet", ".pq"),
                    help="The row holding the column names; rows above it (titles, notes) are skipped.")
    c5.selectbox("Decimal mark", [DETECT, *DECIMALS], key=_read_key(fp, "decimal"), disabled=not text,
                 format_func=lambda v: f"{DECIMALS[v]} ({v!r})" if v in DECIMALS else v,
                 help="With a comma, numbers such as 3,5 and 1.250,75 are read as 3.5 and 1250.75.")


def preset_read_options(fp: str, options: ReadOptions | None, *, next_run: bool = False) -> None:
    """Start the read boxes of a declaration opened again from the options it was read with, so the file is
    read the same way and the declaration is not drafted again; ``next_run`` when the boxes are already drawn
    (their values are then set at the top of the next run)."""
    _state()["read"] = None
    if options is None:
        return
    target = st.session_state.setdefault(PENDING, {}) if next_run else st.session_state
    for what, value in (("encoding", options.encoding), ("sep", options.separator), ("sheet", options.sheet),
                        ("header", options.header_row), ("decimal", options.decimal)):
        if value is not None:
            target[_read_key(fp, what)] = value


def _notable(report) -> bool:
    """Whether the read needs a look: not plain UTF-8 with commas from the first line, or notes."""
    used = report.options
    return (report.kind == "text" and (used.encoding != "utf-8" or used.separator != ",")) \
        or (used.header_row or 1) > 1 or len(report.sheets) > 1 or bool(report.notes)


def read_section(raw: bytes, file_name: str, fp: str):
    """The file read by the options on the page, with how it was read (plain text: sheet names and notes come
    from the file) and the boxes that change it; stops the page with the reason when it cannot be read."""
    read, error = None, None
    try:
        suffix = table_suffix(file_name)
        options = chosen_read_options(fp)
        read = _read(fp, raw, file_name, digest_of(options), options)
    except ValueError as exc:
        suffix, error = Path(file_name).suffix.lower(), exc
    with st.expander("How the file is read", expanded=read is None or _notable(read.report)):
        read_option_widgets(fp, suffix, read)
        if read is None:
            st.error(plain(f"{file_name}: {error}"))
            st.stop()
        st.text("\n".join(read.report.lines()))
    return read


@st.cache_data(max_entries=4, show_spinner="Profiling every column...")
def _profile(fingerprint: str, file_name: str, _frame: pd.DataFrame):
    return profile(_frame)


# ------------------------------------------------------------------------------------------- state

def _state() -> dict:
    return st.session_state.setdefault(STATE, {"fp": None, "base": None, "kind": "draft", "gen": 0})


def _start_from(schema: DataSchema, kind: str, fp: str, *, next_run: bool = False) -> None:
    """Make ``schema`` the declaration the widgets start from (new widget keys, so nothing stale stays);
    ``next_run`` when the name box is already drawn (its new value is then set at the top of the next run)."""
    state = _state()
    state.update(fp=fp, base=schema, kind=kind, gen=state["gen"] + 1)
    if next_run:
        st.session_state.setdefault(PENDING, {})[f"{P}_name"] = schema.name
    else:
        st.session_state[f"{P}_name"] = schema.name


def _k(name: str, field: str) -> str:
    return f"{P}{_state()['gen']}_{name}_{field}"


def _start(key: str, value):
    """A widget's first value, kept in the session (so an estimate can set it without a second default)."""
    if key not in st.session_state:
        st.session_state[key] = value
    return key


def _apply_pending() -> None:
    """Widget values decided on the previous run (a private estimate), set before the widgets exist."""
    for key, value in st.session_state.pop(PENDING, {}).items():
        st.session_state[key] = value


# ------------------------------------------------------------------------------------------- widgets

def _labels(series: pd.Series, missing) -> list[str]:
    """The distinct labels of a column as written (trimmed), for the curator's category and merge menus."""
    return sorted(str(x) for x in read_values(series, tuple(missing)).label_names)


def _rows_format(rows: dict):
    """A menu entry with its rows in the file when it was suggested (curator only), else as typed."""
    return lambda text: f"{text} ({rows[text]:,} rows)" if text in rows else str(text)


def _codes(col: ColumnSchema, series: pd.Series, role: str, tokens) -> tuple[str, ...]:
    """This column's own missing codes: the suggested ones (a value far outside the rest, a word such as
    'refused') to pick, or any other typed in."""
    found = dict(column_suggestions(series, role, tokens).missing_codes)
    key = _start(_k(col.name, "codes"), list(col.missing_codes or ()))
    options = list(dict.fromkeys([*(col.missing_codes or ()), *found, *st.session_state[key]]))
    fresh = [t for t in found if t not in st.session_state[key]]
    if fresh:
        st.caption("These values look like missing codes: " + plain(named(fresh, [found[t] for t in fresh]))
                   + ". Pick the ones that mean 'no answer' below (curator only).")
    return tuple(st.multiselect("Missing codes of this column (read as missing here only)", options, key=key,
                                accept_new_options=True, format_func=_rows_format(found),
                                help="Texts that mean 'no answer' in this column only, such as 999 or 'refused', "
                                     "beside the values read as missing in every column. Type one to add it."))


def _add_merge(name: str) -> None:
    """Add the chosen labels -> target as merges of column ``name`` (a button's callback, so the menus can
    be emptied before they are drawn again)."""
    labels, target = st.session_state.get(_k(name, "merge_from"), []), st.session_state.get(_k(name, "merge_to"))
    if target:
        added = st.session_state.setdefault(_k(name, "added_merges"), [])
        added += [(label, str(target).strip()) for label in labels if label != target and (label, target) not in added]
    st.session_state[_k(name, "merge_from")] = []
    st.session_state[_k(name, "merge_to")] = None


def _category(col: ColumnSchema, series: pd.Series, missing, suggested, ticked: bool) -> dict:
    added = st.session_state.get(_k(col.name, "added_merges"), [])
    pairs = list(dict.fromkeys([*suggested, *col.merges, *added]))
    merges = []
    if pairs:
        st.markdown("Merge label variants (case, accent, spacing and hyphen variants are suggested; tick the ones "
                    "you agree with):")
    for variant, label in pairs:
        start = (ticked and (variant, label) in col.merges) or (variant, label) in added
        if st.checkbox(f"'{plain(variant)}' is '{plain(label)}'", value=start,
                       key=_k(col.name, f"merge_{digest_of([variant, label])[:12]}")):
            merges.append((variant, label))
    found = _labels(series, missing)
    key = _start(_k(col.name, "categories"), list(col.categories or ()))
    options = list(dict.fromkeys([*(col.categories or ()), *(c for _, c in merges), *found]))
    options += [c for c in st.session_state[key] if c not in options]
    c1, c2, c3 = st.columns([3, 2, 1], vertical_alignment="bottom")
    c1.multiselect("Merge these labels", found, key=_k(col.name, "merge_from"),
                   help="Any labels of this column, merged into the label on the right.")
    c2.selectbox("into", options, index=None, key=_k(col.name, "merge_to"), accept_new_options=True,
                 placeholder="a label (or type one)")
    c3.button("Add merge", key=_k(col.name, "merge_add"), on_click=_add_merge, args=(col.name,))
    cats = st.multiselect("Public categories (the full public list; empty: not declared yet)", options, key=key,
                          accept_new_options=True,
                          help="Categories known without looking at the data (a questionnaire's answers, a "
                               "published code list). Type one that is missing to add it.")
    return {"categories": tuple(cats) or None, "merges": tuple(merges)}


def _units(col: ColumnSchema, found: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """Words written around this column's numbers ("45 yrs"): the suggested ones to pick, or any typed in."""
    rows = dict(found)
    key = _start(_k(col.name, "units"), list(col.units or ()))
    options = list(dict.fromkeys([*(col.units or ()), *rows, *st.session_state[key]]))
    return tuple(st.multiselect("Units written around the numbers (45 yrs: yrs)", options, key=key,
                                accept_new_options=True, format_func=_rows_format(rows),
                                help="A word before or after the number, removed before reading it (ignoring "
                                     "case). Suggested from the values that cannot be read yet; type one to add "
                                     "it."))


def _number(col: ColumnSchema, units: tuple[tuple[str, int], ...]) -> dict:
    parse = st.checkbox("Read numbers written with separators, currency or percent signs (45,000, $45,000, 12%)",
                        value=col.parse_numbers, key=_k(col.name, "parse"))
    chosen = _units(col, units)
    declared = st.checkbox("Public bounds declared", key=_start(_k(col.name, "has_bounds"), col.bounds is not None),
                           help="A range known without looking at the data (a questionnaire's limits, a published "
                                "top code). Values outside are clipped.")
    c1, c2, c3 = st.columns(3)
    low0, high0 = col.bounds if col.bounds is not None else (0.0, 100.0)
    low = c1.number_input("Public low", key=_start(_k(col.name, "low"), float(low0)), disabled=not declared)
    high = c2.number_input("Public high", key=_start(_k(col.name, "high"), float(high0)), disabled=not declared)
    bins0 = col.bins if isinstance(col.bins, int) else (len(col.bins) - 1 if col.bins else 0)
    bins = c3.number_input("Bins (0: keep the numbers)", 0, 1000, int(bins0), key=_k(col.name, "bins"),
                           help="Cut the range into this many equal-width bins (labelled in the column's units).")
    if isinstance(col.bins, tuple) and int(bins) == bins0 and declared:
        bins_value = col.bins        # declared edges, kept while the count is unchanged
    else:
        bins_value = int(bins) or None
    return {"parse_numbers": bool(parse), "bounds": (float(low), float(high)) if declared else None,
            "bins": bins_value, "units": chosen}


def _missing(col: ColumnSchema, role: str, missing_rows: int) -> dict:
    options = [UNDECIDED, "drop_row"] if role == "person_id" else [UNDECIDED, *MISSING_POLICIES]
    start = col.missing if col.missing in options else UNDECIDED
    chosen = st.selectbox("A missing value becomes", options, index=options.index(start),
                          format_func=MISSING_LABELS.get, key=_k(col.name, "missing"))
    policy = None if chosen == UNDECIDED else chosen
    out = {"missing": policy, "fill": None}
    if policy == "fill":
        if role == "number":
            start_fill = col.fill if isinstance(col.fill, float) else 0.0
            out["fill"] = float(st.number_input("Public fill value", value=start_fill, key=_k(col.name, "fill_n")))
        else:
            out["fill"] = st.text_input("Public fill label", value=str(col.fill or ""), key=_k(col.name, "fill_t"))
    if missing_rows:
        fate = {"drop_row": f"drops {missing_rows:,} rows", None: "blocks a run until you decide"}.get(
            policy, "keeps those rows")
        st.caption(f"{missing_rows:,} missing values in your file: this choice {fate} (curator only).")
    return out


def _unreadable(col: ColumnSchema, frame, tokens) -> None:
    """The values of a number column that cannot be read yet, with their rows (curator only; plain text)."""
    try:
        table = unreadable_values(frame, DataSchema("column", (col,), missing_tokens=tokens), col.name)
    except ValueError:
        return
    if len(table):
        st.caption(f"{int(table['rows'].sum()):,} values cannot be read as numbers yet: declare their unit, pick "
                   "the ones meaning 'no answer' as missing codes, or correct the file (curator only).")
        st.dataframe(table, hide_index=True, key=_k(col.name, "unreadable"))


def column_widgets(col: ColumnSchema, frame, tokens, ticked: bool) -> ColumnSchema:
    """One column's declaration from its widgets (ValueError naming the column when it is inconsistent)."""
    role = st.selectbox("Role", list(ROLE_LABELS), index=list(ROLE_LABELS).index(col.role),
                        format_func=ROLE_LABELS.get, key=_k(col.name, "role"))
    if role == "leave_out":
        st.caption("Dropped before anything runs.")
        return ColumnSchema(col.name, "leave_out")
    series = frame[col.name]
    codes = _codes(col, series, role, tokens) if role != "person_id" else ()
    missing = tuple(tokens) + codes
    found = column_suggestions(series, role, missing)
    fields = {"missing_codes": codes}
    if role == "category":
        fields.update(_category(col, series, missing, found.merges, ticked))
    elif role == "number":
        fields.update(_number(col, found.units))
    fields.update(_missing(col, role, read_values(series, missing).missing_rows))
    declared = ColumnSchema(col.name, role, **fields)
    if role == "number":
        _unreadable(declared, frame, tokens)
    return declared


def _tokens(base: DataSchema) -> tuple[str, ...]:
    """The texts read as missing in every column: the declaration's, any removed or typed in."""
    key = _start(f"{P}{_state()['gen']}_tokens", list(base.missing_tokens))
    options = list(dict.fromkeys([*DEFAULT_MISSING_TOKENS, *base.missing_tokens, *st.session_state[key]]))
    return tuple(st.multiselect("Read as missing in every column (ignoring case)", options, key=key,
                                accept_new_options=True, format_func=lambda t: t or "(a blank cell)",
                                help="Remove one that is a real answer in your file; type one to add it. A single "
                                     "column's own codes (such as 999) are declared in that column below."))


def declaration(base: DataSchema, frame, prof, name: str, suffix: str, ticked: bool):
    """The schema the widgets declare, or (None, every declaration error) when some column is inconsistent."""
    tokens = _tokens(base)
    declared = {c.name: c for c in base.columns}
    columns, errors = [], []
    for source in frame.columns:
        colname = str(source)
        col = declared.get(colname) or ColumnSchema(colname, "leave_out")
        cprof = prof.column(colname)
        with st.expander(f"{plain(colname)}: {ROLE_LABELS[st.session_state.get(_k(colname, 'role'), col.role)]}",
                         expanded=False):
            st.caption(f"Looks like: {cprof.guess}; {cprof.distinct:,} distinct values, {cprof.missing:,} missing; "
                       f"e.g. {plain(', '.join(cprof.examples[:4]))} (curator only).")
            try:
                columns.append(column_widgets(col, frame, tokens, ticked))
            except ValueError as exc:
                errors.append(str(exc))
    st.markdown("**Unit of protection**")
    ids = [c.name for c in columns if c.role == "person_id"]
    c1, c2 = st.columns(2)
    c1.caption(f"Person id column: **{plain(ids[0])}** (one person may have several rows)." if len(ids) == 1 else
               "No person id column: each row is one person. Give a column the role 'Person id' if a person "
               "can have several rows.")
    gen = _state()["gen"]      # a declaration opened again starts these from its own values too
    most = c1.number_input("Most rows per person", 1, 1000, int(base.max_rows_per_person), key=f"{P}{gen}_max_rows",
                           disabled=len(ids) != 1,
                           help="Contribution bounding keeps at most this many rows of each person (chosen by a "
                                "seeded hash of each row, so the same rows whatever else the file holds); "
                                "the privacy guarantee then covers a whole person.")
    seed = c2.number_input("Seed of contribution bounding", 0, MAX_WIDGET_SEED,
                           min(int(base.bounding_seed), MAX_WIDGET_SEED), key=f"{P}{gen}_bounding_seed",
                           disabled=len(ids) != 1, help="Which of a person's rows over the limit are kept; "
                                                        "the same seed keeps the same rows wherever it is rerun.")
    if errors:
        return None, errors
    try:
        schema = DataSchema(name, tuple(columns), person_id=ids[0] if len(ids) == 1 else None,
                            max_rows_per_person=int(most) if len(ids) == 1 else 1,
                            missing_tokens=tokens, bounding_seed=int(seed), file_suffix=suffix)
    except ValueError as exc:
        return None, [str(exc)]
    return schema, []


# ------------------------------------------------------------------------------------------- problems

def problems_table(frame, schema: DataSchema) -> pd.DataFrame:
    """Every problem at once (curator-only)."""
    rows = [{"column": p.column, "severity": p.severity, "what": p.what, "what to do": p.todo}
            for p in check(frame, schema)]
    return pd.DataFrame(rows, columns=["column", "severity", "what", "what to do"])


# ------------------------------------------------------------------------------------------- private estimates

def keep_declared(name: str, schema: DataSchema, raw: bytes, file_name: str, frame) -> None:
    """Declare the file under ``name`` in the project database: its declaration when none is saved under that
    name yet, the file as a version, its population sketches and the file kept on the server."""
    from dashboard.components.population_check import upload_sketches
    fp = bytes_fingerprint(raw)
    store = data_set_store()
    if store.get(name) is None:
        store.save(schema.replace(name=name), curator=current_curator())
    store.add_version(name, fp, file_name, curator=current_curator())
    store.save_sketches(name, fp, upload_sketches(fp, frame))
    store.keep_file(name, raw, file_name, fp, curator=current_curator())


def _remove_kept_button(name: str) -> bool:
    """A button that removes the data set's file from the server (its declaration, population fingerprints
    and ledger stay, so its rows keep their budget); True when it was just removed."""
    if not st.button("Remove its file from this server", key=f"{P}_remove_kept",
                     help="The declaration, the fingerprints that recognise its rows and its privacy ledger stay; "
                          "upload the file again to use it."):
        return False
    try:
        data_set_store().remove_file(name, current_curator())
    except ValueError as exc:
        st.error(str(exc))
        return False
    declared_data().pop(name, None)
    st.session_state.setdefault(PENDING, {})[f"{P}_reopen"] = ""
    st.rerun()


def _estimate_owner(schema: DataSchema, raw: bytes, frame) -> str | None:
    """The data set a private estimate on this file spends from: the one its rows were confirmed to belong
    to, else its own name; None while the "same population?" question waits for an answer (it is on screen)."""
    from dashboard.components.population_check import confirm_population, same_population_as, upload_overlaps
    fp = bytes_fingerprint(raw)
    try:
        answer = confirm_population(schema, fp, upload_overlaps(fp, frame), key="population_est")
    except ValueError as exc:
        st.error(f"The project database cannot be read: {exc}")
        return None
    if answer is None:
        st.caption("Answer first: a private estimate spends the budget of the data set these rows belong to.")
        return None
    return (same_population_as(schema, fp) if answer else None) or schema.name


def estimate_section(frame, schema: DataSchema, raw: bytes, file_name: str) -> None:
    """Estimate missing public bounds or categories privately: a real release behind the shared confirmation,
    recorded under the data set the file ends up in (the one its rows belong to, declared when it spends)."""
    wanted = needs_public_info(schema)
    if not wanted or not schema.name:
        return
    with st.container(border=True, key=f"{P}_estimate_box"):
        st.markdown("**Missing public information**: " + ", ".join(f"{plain(c)} ({w})" for c, w in wanted) + ".")
        st.caption("Declare them above if they are known publicly (a code book, the questionnaire's limits). "
                   "Otherwise they can be estimated privately: that is a real release (OpenDP's secure "
                   "sampler), its spend is recorded in this data set's privacy ledger, and the estimate becomes "
                   "part of the public declaration. A bounds estimate says how many values it needs first, "
                   "and on a smaller column it is not offered.")
        c1, c2 = st.columns(2)
        choice = c1.selectbox("Column", [f"{c}: {w}" for c, w in wanted], key=f"{P}_est_column")
        column, what = choice.rsplit(": ", 1)
        epsilon = float(c2.number_input("Epsilon for this estimate", 0.01, 10.0, 1.0, 0.05, key=f"{P}_est_epsilon"))
        k = schema.max_rows_per_person
        floor = ceiling = values = refusal = None
        if what == "bounds":
            try:
                values = estimate_input(frame, schema, column, what)
            except ValueError as exc:
                refusal = str(exc)
            st.caption(f"The {DEFAULT_QUANTILES[0]:.0%} and {DEFAULT_QUANTILES[1]:.0%} quantiles: a quarter of the "
                       "epsilon finds the range of magnitudes that holds the data (a noisy histogram over public "
                       "bins), the rest picks each quantile among candidates spread over that range.")
            c3, c4 = st.columns(2)
            floor = c3.number_input("A value no record could be below (public knowledge; empty = none)", value=None,
                                    key=f"{P}_est_floor", help="For example 0 for an age, a count or an amount. "
                                    "Values below it are clipped; leave it empty unless a code book says so.")
            ceiling = c4.number_input("A value no record could exceed (public knowledge; empty = none)", value=None,
                                      key=f"{P}_est_ceiling", help="For example 130 for an age or 100 for a "
                                      "percentage. Values above it are clipped.")
            try:
                need = required_values(epsilon, k, DEFAULT_QUANTILES, floor, ceiling)
            except ValueError as exc:
                need, refusal = None, str(exc)
            if need is not None:
                enough = values is not None and len(values) >= need
                st.caption(f"At this epsilon the estimate lands near the true range (within the 0.5 to 99.5 "
                           f"percentile range widened by half its width on each side, in at least 90% of draws) "
                           f"when the column has at least {need:,} values"
                           f"{f' (up to {k} rows per person)' if k > 1 else ''} (a public figure: it uses no "
                           f"data). This column has {'enough' if enough else 'fewer'}.")
                if refusal is None and not enough:
                    refusal = (f"the column has fewer values than the {need:,} the estimate needs at epsilon "
                               f"{epsilon:g}; raise the epsilon, or declare the bounds above from a code book.")
        else:
            st.caption(f"Labels whose noisy count reaches {category_threshold(epsilon, DEFAULT_DELTA, k):.1f} are "
                       f"kept (the least that keeps delta {DEFAULT_DELTA:g}); rarer labels stay out.")
        owner = _estimate_owner(schema, raw, frame)
        if owner is None:
            return
        if owner != schema.name:
            st.caption(f"These rows are {plain(owner)}'s: the estimate is recorded in its privacy ledger.")
        release = private_estimate_release(declared_ref(schema.replace(name=owner), raw), frame, column, what,
                                           epsilon, page=PAGE, floor=floor, ceiling=ceiling)

        def publish(found):       # spent on: declared under its owner from this moment
            keep_declared(owner, schema, raw, file_name, frame)
            return found

        release = dataclasses.replace(release, publish=publish)
        result = release_button("Estimate privately", key=f"{P}_estimate", release=release, what=release.label,
                                error=refusal)
        if result is not None:
            found, _ = result
            pend = st.session_state.setdefault(PENDING, {})
            if what == "bounds":
                pend.update({_k(column, "has_bounds"): True, _k(column, "low"): float(found[0]),
                             _k(column, "high"): float(found[1])})
                shown = f"{found[0]:g} to {found[1]:g}"
            else:
                pend[_k(column, "categories")] = list(found)
                shown = ", ".join(found) if found else "no label cleared the threshold"
            st.session_state[f"{P}_estimated_note"] = (f"Estimated privately and recorded in the ledger: the public "
                                                       f"{what} of {plain(column)}: {plain(shown)}. Check them above, "
                                                       "then save.")
            st.rerun()


# ------------------------------------------------------------------------------------------- saving

def save_section(schema: DataSchema, blocking: int, raw: bytes, file_name: str, frame) -> None:
    """Save the declaration in the project database, with the file kept on the server and its population
    sketches (a table whose rows belong to another declared data set first answers "same population?"), and
    offer it on every microdata page, after a reload too."""
    from dashboard.components.population_check import confirm_population, same_population_as, upload_overlaps
    fp = bytes_fingerprint(raw)
    try:
        store = data_set_store()
        existing = store.get(schema.name)
        own_file = existing is not None and fp in set(store.versions(schema.name)["fingerprint"])
    except ValueError as exc:
        st.error(f"The project database cannot be read: {exc}")
        return
    replace = own_file       # a declaration of this very file, saved before (or when it spent), is edited
    if existing is not None and existing != schema and not own_file:
        replace = st.checkbox(f"Replace the saved declaration of {plain(schema.name)}", key=f"{P}_replace")
    reason = None
    if blocking:
        reason = f"{blocking} problem{'s' if blocking > 1 else ''} still block a run (see the list above)."
    elif existing is not None and existing != schema and not replace:
        reason = f"a data set named {schema.name} is already saved; tick 'Replace' or choose another name."
    if st.button("Save the declaration", key=f"{P}_save", type="primary", disabled=reason is not None):
        st.session_state[f"{P}_saving"] = (schema.digest(), fp)
    if reason is not None:
        st.caption(f"Saving is disabled: {plain(reason)}")
        st.session_state.pop(f"{P}_saving", None)
        return
    if st.session_state.get(f"{P}_saving") != (schema.digest(), fp):
        return
    try:
        answer = confirm_population(schema, fp, upload_overlaps(fp, frame))
    except ValueError as exc:
        st.error(f"The project database cannot be read: {exc}")
        return
    if answer is None:
        return
    filed_as = (same_population_as(schema, fp) if answer else None) or schema.name
    final = schema.replace(name=filed_as)
    try:
        store.save(final, replace=store.get(filed_as) is not None, curator=current_curator())
        keep_declared(filed_as, final, raw, file_name, frame)
    except ValueError as exc:
        st.error(str(exc))
        return
    st.session_state.pop(f"{P}_saving", None)
    register_declared(final, raw, file_name)
    st.session_state[f"{P}_saved_note"] = (
        f"Saved {plain(final.name)} in the project database, with its file kept on this server"
        + ("" if filed_as == schema.name else f" (the same population as {plain(filed_as)}, so its budget goes on)")
        + ". It is offered on every microdata page, after a reload too: Stratified synthesis, Coherence audit, "
          "Group fairness and ranking.")
    if filed_as != schema.name:
        _start_from(final, "declared", fp, next_run=True)
    st.rerun()


def import_section(fp: str) -> None:
    """Open a declaration saved as JSON, or one saved in the project database."""
    c1, c2 = st.columns(2)
    file = c1.file_uploader("Open a declaration (JSON)", type=["json"], key=f"{P}_import")
    if file is not None:
        raw = file.getvalue()
        seen = bytes_fingerprint(raw) + fp
        if st.session_state.get(f"{P}_import_seen") != seen:
            st.session_state[f"{P}_import_seen"] = seen
            try:
                opened = DataSchema.from_dict(json.loads(raw.decode("utf-8")))
                _start_from(opened, "declared", fp)
                preset_read_options(fp, opened.read, next_run=True)
            except (ValueError, UnicodeDecodeError) as exc:
                c1.error(plain(f"{file.name}: {exc}"))
    try:
        names = data_set_store().names()
    except ValueError:
        names = []
    if names:
        chosen = c2.selectbox("Or start from a saved declaration", ["", *names], key=f"{P}_stored",
                              format_func=lambda n: n or "(choose)")
        if chosen and c2.button("Use it", key=f"{P}_use_stored"):
            stored = data_set_store().get(chosen)
            _start_from(stored, "declared", fp)
            preset_read_options(fp, stored.read, next_run=True)
            st.rerun()


# ------------------------------------------------------------------------------------------- a folder of parts

@st.cache_data(max_entries=4, show_spinner="Reading a sample of the parts...")
def _folder_sample(fingerprint: str, folder: str) -> pd.DataFrame:
    return sample_rows(list_folder(folder))


@st.cache_data(max_entries=8, show_spinner=False)
def _folder_rows(fingerprint: str, folder: str) -> int | None:
    """The folder's rows from the parts' footers (None when a part cannot be opened: the check says why)."""
    try:
        return folder_rows(list_folder(folder))
    except ValueError:
        return None


def _folder_identity(listing) -> tuple[bytes, tuple[tuple[str, ...], ...]]:
    """What the check needs to fingerprint the folder's rows: the installation's secret, and the column sets
    of the declared data sets its columns cover (so a copy with columns added is measured on theirs)."""
    from core.intake.identity import covered_sets, installation_secret
    names = {str(c).strip().casefold() for c in _folder_sample(listing.fingerprint, listing.folder).columns}
    try:
        stored = data_set_store().sketches()
    except ValueError:
        stored = {}
    sets = {cols for old in stored.values() for cols in covered_sets(old, names)}
    return installation_secret(), tuple(sorted(sets))


def _folder_check(listing, schema: DataSchema):
    """Every part checked against the declaration (one pass over the parts) on a press, as a background job
    keyed by the declaration and the folder's listing: leaving the page (or reloading it) while it runs and
    coming back attaches to the same job, or shows its result without checking again. The result is kept for
    this declaration and this listing; a cancelled check keeps nothing."""
    rows = _folder_rows(listing.fingerprint, listing.folder)
    plan = check_plan(listing, schema, rows or 0)
    secret, column_sets = _folder_identity(listing)
    key = job_key(check_folder, plan.digest(), [list(c) for c in column_sets])
    done = st.session_state.get(f"{P}_folder_checked")
    if done is not None and done[0] != plan.digest():
        done = None
    allowed = True
    if done is None:
        if rows is None:
            st.caption(f"Reads each of the {listing.n_parts} parts once.")
        else:
            allowed = run_estimate_notice(plan, None, key=f"{P}_folder_check_estimate")
    pressed = st.button("Check every part", key=f"{P}_folder_check", disabled=not allowed,
                        help="Reads every part once, in the background (on the Dask cluster when one is configured), "
                             "and lists every problem.")
    if pressed or (done is None and attached_job(key) is not None):
        slot = st.empty()
        try:
            with slot.container():
                checked = run_job(check_folder, listing, schema, secret, column_sets, key=key,
                                  label=f"Checking {listing.n_parts} parts", cancel_key=f"{P}_folder_check_cancel")
        except Cancelled:
            slot.empty()
            st.info("The check was stopped before it finished: nothing was kept. Press **Check every part** to "
                    "start it again.")
            return None
        except ValueError as exc:
            slot.empty()
            st.error(str(exc))
            return None
        slot.empty()
        done = (plan.digest(), checked)
        st.session_state[f"{P}_folder_checked"] = done
    if done is None:
        st.info("Check every part before saving: the sample above is not the whole folder.")
        return None
    return done[1]


def _folder_save(schema: DataSchema, listing, checked) -> bool:
    """Save the declaration, the folder's path and its rows' population sketches (parts that hold another
    declared data set's rows first answer "same population?"); True when this declaration is the one saved."""
    from dashboard.components.population_check import confirm_population, folder_overlaps, same_population_as
    try:
        store = data_set_store()
        existing, where = store.get(schema.name), store.folder(schema.name)
    except ValueError as exc:
        st.error(f"The project database cannot be read: {exc}")
        return False
    if existing == schema and where == listing.folder:
        st.success(f"{plain(schema.name)} is saved as a folder set ({plain(listing.folder)}).")
        return True
    replace = False
    if existing is not None:
        replace = st.checkbox(f"Replace the saved declaration of {plain(schema.name)}", key=f"{P}_folder_replace")
    reason = None
    if checked is None:
        reason = "check every part first."
    elif checked.blocking:
        reason = f"{len(checked.blocking)} problem(s) still block a run (see the list above)."
    elif existing is not None and not replace:
        reason = f"a data set named {schema.name} is already saved; tick 'Replace' or choose another name."
    if st.button("Save the folder data set", key=f"{P}_folder_save", type="primary", disabled=reason is not None):
        st.session_state[f"{P}_folder_saving"] = (schema.digest(), listing.fingerprint)
    if reason is not None:
        st.caption(f"Saving is disabled: {plain(reason)}")
        st.session_state.pop(f"{P}_folder_saving", None)
        return False
    if st.session_state.get(f"{P}_folder_saving") != (schema.digest(), listing.fingerprint):
        return False
    try:
        answer = confirm_population(schema, listing.fingerprint, folder_overlaps(checked.sketches))
    except ValueError as exc:
        st.error(f"The project database cannot be read: {exc}")
        return False
    if answer is None:
        return False
    filed_as = (same_population_as(schema, listing.fingerprint) if answer else None) or schema.name
    try:
        store.save(schema.replace(name=filed_as), replace=replace or filed_as != schema.name,
                   curator=current_curator())
        store.save_folder(filed_as, listing.folder)
        store.save_sketches(filed_as, listing.fingerprint, checked.sketches)
    except ValueError as exc:
        st.error(str(exc))
        return False
    st.session_state.pop(f"{P}_folder_saving", None)
    if filed_as != schema.name:
        _start_from(schema.replace(name=filed_as), "declared", "folder:" + listing.fingerprint, next_run=True)
    st.rerun()


def _folder_release(schema: DataSchema, listing) -> None:
    """A synthetic copy of the saved folder set: one confirmation, then reserve -> fit -> write -> commit."""
    from core.synthesis.folder_release import FOLDER_METHODS, FolderReleasePlan, projected_folder_ledger
    from core.synthesis.registry import SYNTHESIZERS
    from dashboard.components.release_confirm import stated_spend

    st.subheader("Synthetic copy of the folder set")
    st.caption("MST or AIM fitted from count tables of the parts, counted part by part (on the Dask cluster when "
               "DASHBOARD_DASK_SCHEDULER is set); the synthetic file is drawn in parts, one generator per part, "
               "and written to the output folder. Its size is the model's noisy total, never the real row count. "
               "A real release: its spend goes to this data set's privacy ledger.")
    c1, c2, c3 = st.columns(3)
    method = c1.selectbox("Synthesizer", FOLDER_METHODS, format_func=lambda k: SYNTHESIZERS[k].label,
                          key=f"{P}_folder_method")
    epsilon = float(c2.number_input("Epsilon", 0.01, 10.0, 1.0, 0.1, key=f"{P}_folder_epsilon"))
    delta = float(c3.number_input("Delta", 1e-12, 1e-2, 1e-6, format="%.1e", key=f"{P}_folder_delta"))
    c4, c5 = st.columns([3, 1])
    base = Path(listing.folder)
    out = c4.text_input("Output folder for the synthetic parts (on this machine; new or empty)",
                        str(base.parent / f"{base.name}-synthetic"), key=f"{P}_folder_out")
    parts = int(c5.number_input("Parts to write", 1, 10_000, min(max(listing.n_parts, 1), 10_000),
                                key=f"{P}_folder_parts"))
    error, release, plan = None, None, None
    try:
        plan = FolderReleasePlan(schema.name, method, epsilon, delta, out, parts)
    except ValueError as exc:
        error = str(exc)
    if plan is not None:
        spend = stated_spend(projected_folder_ledger(plan), declared_key(schema.name))
        # drawn in a job out of the server process that outlives this run of the page; the parts are published
        # only after the ledger's commit, and removed when it is cancelled, fails or is refused
        release = folder_copy_release(plan, schema, listing.folder, page=PAGE,
                                      label=f"{plan.label()} written in {parts} parts ({spend})")
        rows = _folder_rows(listing.fingerprint, listing.folder)
        if rows is not None and not run_estimate_notice(plan, folder_work(listing, schema, rows),
                                                        key=f"{P}_folder_release_estimate"):
            error = "this release is predicted to run long: tick 'Start anyway' above to allow it."
    release_slot = st.empty()
    job = ReleaseJob("Releasing a synthetic copy of the parts", cancel_key=f"{P}_folder_release_cancel",
                     slot=release_slot)
    result = release_button("Release a synthetic copy", key=f"{P}_folder_release", release=release, job=job,
                            error=error, what=plan.label() if plan else "")
    release_slot.empty()
    if result is not None:
        st.session_state[f"{P}_folder_result"] = result
    shown = st.session_state.get(f"{P}_folder_result")
    if shown is not None and shown.plan.name == schema.name:
        if shown.staging:
            st.warning(f"Released, but its {len(shown.paths)} parts still wait in {shown.staging}.")
        else:
            st.success(f"Written: {len(shown.paths)} parts in {shown.plan.out_folder}.")
        st.dataframe(shown.summary, hide_index=True, width="stretch", key=f"{P}_folder_summary")
        st.caption(shown.statement)
        st.dataframe(shown.ledger.to_frame(), hide_index=True, width="stretch", key=f"{P}_folder_ledger")


def _saved_folder_set(folder: str) -> DataSchema | None:
    """The declaration saved for this folder (the curator comes back to it), or None."""
    try:
        store = data_set_store()
        name = next((n for n in store.folder_names() if store.folder(n) == folder), None)
        return None if name is None else store.get(name)
    except ValueError:
        return None


def folder_step() -> None:
    """The whole data step for a folder of parts named by its path (never uploaded)."""
    path = st.text_input("Folder of Parquet parts on this machine (its path on the server)", key=f"{P}_folder",
                         help="The folder is read where it is, part by part; nothing is uploaded through the browser.")
    if not path.strip():
        st.info("Give the path of a folder of .parquet parts, as written by dask.dataframe.to_parquet or "
                "pyarrow.dataset.write_dataset. The folder stays where it is; only its path and declaration are "
                "saved.")
        return
    try:
        listing = list_folder(path)
        sample = _folder_sample(listing.fingerprint, listing.folder)
        prof = _profile("folder:" + listing.fingerprint, listing.folder, sample)
    except ValueError as exc:
        st.error(plain(exc))
        return
    names = listing.names
    st.caption(f"{listing.n_parts} part{'s' if listing.n_parts > 1 else ''}: {plain(', '.join(names[:5]))}"
               + (f" and {len(names) - 5} more" if len(names) > 5 else "") + ".")
    fp = "folder:" + listing.fingerprint
    state = _state()
    # a page left and opened again has lost its widgets' values: start again from the saved declaration
    lost = f"{P}_name" not in st.session_state
    if state["fp"] != fp or state["base"] is None or lost:
        saved = _saved_folder_set(listing.folder)
        if saved is not None:
            _start_from(saved, "declared", fp)
        else:
            _start_from(draft_schema(sample, Path(listing.folder).name, profiled=prof), "draft", fp)
        state = _state()
    st.info(CURATOR_ONLY, icon=":material/visibility_off:")
    with st.expander(f"Profile of a sample: the first rows of the parts, at most {SAMPLE_ROWS:,} (curator only)",
                     expanded=False):
        shown = prof.as_frame()[["name", "guess", "distinct", "missing", "examples"]]
        st.dataframe(shown.rename(columns={"name": "column", "guess": "looks like"}), hide_index=True,
                     width="stretch", key=f"{P}_folder_profile")
        st.caption(f"Read with pyarrow from the first parts in name order, at most {SAMPLE_ROWS:,} rows: the draft "
                   "and the counts beside each column below are of this sample only. The check below reads every "
                   "part.")
    name = st.text_input("Name of the data set", key=f"{P}_name",
                         help="The name the privacy ledger and every report use for this data set.")
    st.subheader("Declare each column")
    st.caption("Drafted from the sample. Public categories (or a number's public bounds and bins) are never read "
               "from the data: declare each column's full public list, or leave the column out.")
    schema, errors = declaration(state["base"], sample, prof, name or "", ".parquet",
                                 ticked=state["kind"] != "draft")
    st.subheader("Problems in every part")
    if errors:
        for err in errors:
            st.error(plain(err))
        return
    checked = _folder_check(listing, schema)
    if checked is not None:
        table = checked.table()
        if checked.blocking:
            st.error(f"{len(checked.blocking)} problem(s) block a run. Counts are shown as size bands.")
        elif len(table):
            st.warning(f"Nothing blocks a run; {len(table)} warning(s) to read. Counts are shown as size bands.")
        else:
            st.success(f"No problems in any of the {listing.n_parts} parts.")
        st.dataframe(table, hide_index=True, width="stretch", key=f"{P}_folder_problems")
    st.subheader("Save the declaration")
    if _folder_save(schema, listing, checked):
        _folder_release(schema, listing)
    st.download_button("Download the declaration (JSON)", json.dumps(schema.to_dict(), indent=2),
                       file_name=f"{schema.name}.schema.json", mime="application/json", key=f"{P}_folder_export",
                       help="Public: roles, categories, bounds, missing values, merges. No counts.")


# ------------------------------------------------------------------------------------------- the page

st.title("Data step")
st.caption("Which of my own data can the tools use, and how is each column read, cleaned and protected? "
           "Declare it once here; every microdata page, the privacy ledger and every report use that declaration.")
_apply_pending()

source = st.radio("Where is the table?", [UPLOAD, FOLDER], key=f"{P}_source", horizontal=True,
                  help="A table too large to upload stays where it is: give the path of its folder of Parquet parts.")
if source == FOLDER:
    folder_step()
    st.stop()

with st.container(border=True, key=f"{P}_start"):
    kept = upload_kept("Your table (CSV, Parquet or Excel .xlsx; one row per record, a header row)", f"{P}_file",
                       type=TYPES, keep=3)
    reopen = [n for n in declared_data()]
    if kept is None and reopen:
        name = st.selectbox("Or edit a declared data set (kept on this server)", ["", *reopen], key=f"{P}_reopen",
                            format_func=lambda n: n or "(choose)")
        if name and _remove_kept_button(name):
            name = ""
        if name:
            entry = declared_data()[name]
            raw_, fname = entry["raw"], entry["file_name"]
            fp_ = bytes_fingerprint(raw_)
            if _state()["fp"] != fp_ or _state()["base"] is None or _state()["base"].name != name:
                _start_from(entry["schema"], "declared", fp_)
                preset_read_options(fp_, entry["schema"].read)
            kept = type("Reopened", (), {"raw": raw_, "name": fname, "fingerprint": fp_})()
    if kept is None:
        st.info("Upload a table to begin. Nothing leaves this machine. Once saved, the declaration is kept in the "
                "project database and the file on this server (under the project's data folder), until you remove "
                "the data set; the database holds no row, only keyed fingerprints that recognise the same rows.")
        st.stop()
raw, file_name, fp = kept.raw, kept.name, kept.fingerprint
read = read_section(raw, file_name, fp)
suffix = table_suffix(file_name)
frame = read.frame
try:
    prof = _profile(fp + digest_of(read.report.options), file_name, frame)
except ValueError as exc:
    st.error(plain(f"{file_name}: {exc}"))
    st.stop()

state = _state()
if state["fp"] != fp or state["base"] is None or state.get("read") not in (None, read.report.options):
    _start_from(draft_schema(frame, Path(file_name).stem, profiled=prof), "draft", fp)
    state = _state()
state["read"] = read.report.options     # read another way (new columns), the declaration is drafted again

st.info(CURATOR_ONLY, icon=":material/visibility_off:")
with st.expander(f"Profile of every column ({prof.rows:,} rows x {len(prof.columns)} columns; curator only)",
                 expanded=True):
    shown = prof.as_frame()[["name", "guess", "distinct", "missing", "numbers_as_text", "case_variants",
                             "examples"]]
    st.dataframe(shown.rename(columns={"name": "column", "guess": "looks like", "numbers_as_text":
                                       "numbers written with separators", "case_variants": "case variants"}),
                 hide_index=True, width="stretch", key=f"{P}_profile")
    st.caption("Never exported, never in a report or the ledger.")

import_section(fp)
name = st.text_input("Name of the data set", key=f"{P}_name",
                     help="The name every page, the privacy ledger and every report use for this data set.")
st.subheader("Declare each column")
if state["kind"] == "draft":
    st.caption("Drafted from the file: roles from the type guess, missing values dropped (numbers) or kept as "
               "their own category. Public categories and bounds are never read from the data: declare them, or "
               "estimate them privately below. Label merges are suggestions: tick the ones you agree with.")
schema, errors = declaration(state["base"], frame, prof, name or "", suffix, ticked=state["kind"] != "draft")
if schema is not None:
    schema = schema.replace(read=read.report.options)   # a rerun reads the file the way it was read here

st.subheader("Problems (every one, at once)")
if errors:
    for err in errors:
        st.error(plain(err))
    st.stop()
table = problems_table(frame, schema)
blocking = int((table["severity"] == "blocks a run").sum())
if blocking:
    st.error(f"{blocking} problem{'s' if blocking > 1 else ''} block a run and {len(table) - blocking} are "
             "warnings. Each row says what to do; the data set cannot be chosen on other pages until none blocks.")
elif len(table):
    st.warning(f"Nothing blocks a run; {len(table)} warning{'s' if len(table) > 1 else ''} to read.")
else:
    st.success("No problems: the declaration covers every column.")
st.dataframe(table, hide_index=True, width="stretch", key=f"{P}_problems")
note = st.session_state.pop(f"{P}_estimated_note", None)
if note:
    st.success(note)
estimate_section(frame, schema, raw, file_name)

if not blocking:
    with st.expander("What the cleaning does (curator only)"):
        try:
            st.markdown("\n".join(f"- {plain(line)}" for line in clean(frame, schema).report.lines()))
        except ValueError as exc:
            st.error(str(exc))

st.subheader("Save and share the declaration")
saved = st.session_state.pop(f"{P}_saved_note", None)
if saved:
    st.success(saved)
save_section(schema, blocking, raw, file_name, frame)
st.download_button("Download the declaration (JSON)", json.dumps(schema.to_dict(), indent=2),
                   file_name=f"{schema.name}.schema.json", mime="application/json", key=f"{P}_export",
                   help="Public: roles, categories, bounds, missing values, merges, unit of protection. No counts.")
