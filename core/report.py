"""Reports: a result's plan, data fingerprint, ledger, versions and tables, saved and reloaded.

A report is what a page exports and what ``python -m core reproduce`` reruns. ``load_plan`` gives
the plan back (pages restore their widgets from it); ``reproduce`` reruns it and
``tables_match`` checks the tables came out the same.

Every CSV the tool writes goes through :func:`guarded_csv`, which keeps spreadsheet programs from
running a cell as a formula.
"""
from __future__ import annotations

import importlib
import io
import json
import math
import platform
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, Mapping

import numpy as np
import pandas as pd

from core.contracts import DataRef, Plan, Result, bytes_fingerprint, plan_from_dict, plan_to_dict
from core.takeaway import takeaway_record
from core.sharing import SHARED, for_audience, sharing_record, withholds, zip_readme
from core.uploads import parse_json_text, read_text
from core.privacy.protection import ProtectionUnit

SCHEMA_VERSION = 2
_VERSIONED = ("numpy", "pandas", "scipy", "scikit-learn", "opendp", "gerrychain", "geopandas",
              "networkx", "joblib", "streamlit", "plotly")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NOT_A_REPORT = "This file is not a report saved by this tool (it has no plan)."


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape results."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


# --------------------------------------------------------------------------------------------------
# Guarded CSV
# --------------------------------------------------------------------------------------------------

def guard_cell(value: Any) -> Any:
    """Text a spreadsheet would run as a formula (or text that already starts with an apostrophe)
    gets a leading apostrophe; everything else is returned unchanged."""
    if isinstance(value, str) and value and (value[0] in _FORMULA_START or value[0] == "'"):
        return "'" + value
    return value


def unguard_cell(value: Any) -> Any:
    """Undo :func:`guard_cell` (for files this tool wrote and reads back)."""
    if isinstance(value, str) and value.startswith("'") and len(value) > 1 \
            and (value[1] in _FORMULA_START or value[1] == "'"):
        return value[1:]
    return value


def guarded_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells and column names are guarded against formula injection."""
    out = df.copy()
    out.columns = [guard_cell(str(c)) for c in out.columns]
    for col in out.columns:
        if out[col].dtype == object or isinstance(out[col].dtype, (pd.CategoricalDtype, pd.StringDtype)):
            out[col] = out[col].astype(object).map(guard_cell)
    return out


def guarded_csv(df: pd.DataFrame, **kwargs) -> str:
    """The one CSV writer for exports: ``df.to_csv`` with formula-like cells guarded."""
    kwargs.setdefault("index", False)
    return guarded_frame(df).to_csv(**kwargs)


# --------------------------------------------------------------------------------------------------
# Tables as exact JSON
# --------------------------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return None if math.isnan(value) else (str(value) if math.isinf(value) else value)
    if isinstance(value, (pd.Timestamp, datetime)):
        return value.isoformat()
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (int, str)) else str(value)


def table_records(df: pd.DataFrame) -> dict:
    """A table as JSON-able columns and rows; floats keep every bit (Python's shortest repr)."""
    columns = [str(c) for c in df.columns]
    rows = [[_plain(v) for v in row] for row in df.itertuples(index=False, name=None)]
    return {"columns": columns, "rows": rows}


def table_from_records(record: Mapping[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(record.get("rows", []), columns=record.get("columns", []))


# --------------------------------------------------------------------------------------------------
# Sizes of a private file in shared tables
# --------------------------------------------------------------------------------------------------

#: Lower edges of the size bands shared tables quote for an uploaded file (1-2-5 steps).
SIZE_BAND_EDGES = (10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000,
                   200_000, 500_000, 1_000_000)


def size_band(n: int) -> str:
    """A count of a private file as a coarse band ('n < 10', '50 <= n < 100', 'n >= 1000000'), never the
    exact number: shared reports of an upload quote these instead of subgroup sizes or row counts."""
    n = int(n)
    edges = SIZE_BAND_EDGES
    if n < edges[0]:
        return f"n < {edges[0]}"
    for low, high in zip(edges[:-1], edges[1:]):
        if n < high:
            return f"{low} <= n < {high}"
    return f"n >= {edges[-1]}"


def banded(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """``df`` with each named count column replaced by its :func:`size_band` text (absent ones skipped)."""
    out = df.copy()
    for c in columns:
        if c in out.columns:
            out[c] = [size_band(v) for v in out[c]]
    return out


# --------------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------------

def data_ref_of(plan: Plan) -> DataRef | None:
    ref = getattr(plan, "data", None)
    return ref if isinstance(ref, DataRef) else None


def protection_sentence(plan: Plan) -> str | None:
    """The line naming whom the plan's budget protects (``ProtectionUnit.sentence``: per row, or per
    person up to k rows each), or None when the plan uses no data set."""
    ref = data_ref_of(plan)
    if ref is None:
        return None
    return ProtectionUnit.of(ref).sentence()


def ledger_statement(ledger, plan: Plan) -> str:
    """``ledger.statement()`` followed by the unit of protection when the plan names a data set (a budget
    means nothing without saying whether it holds per row or per person)."""
    text = ledger.statement()
    unit = protection_sentence(plan)
    return text if unit is None or "Unit of protection" in text else f"{text} {unit}"


def build_report(result: Result, *, page: str = "", ledger=None, extra: Mapping[str, Any] | None = None,
                 tables: Mapping[str, pd.DataFrame] | None = None, audience: str = SHARED) -> dict:
    """A JSON-able record of one result: schema, plan, its digest, data reference (with the unit of
    protection), ledger (its statement naming that unit), headline numbers and the uncertainty of each
    in words, versions and tables (``result.tables()`` unless ``tables`` is given), made for ``audience``
    (:mod:`core.sharing`): the shared report of private data keeps only what its result names as released,
    public or computed on a released synthetic copy; the confidential one keeps everything and says so."""
    plan = result.plan
    ledger = result.ledger() if ledger is None else ledger
    tables = result.tables() if tables is None else tables
    headline = {k: _plain(v) for k, v in result.headline().items()}
    ref = data_ref_of(plan)
    full = {
        "schema": SCHEMA_VERSION,
        "page": page,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "plan": plan_to_dict(plan),
        "plan_digest": plan.digest(),
        "data": None if ref is None else {"source": ref.source, "fingerprint": ref.fingerprint,
                                          "unit_of_protection": protection_sentence(plan)},
        "ledger": None if ledger is None else {
            "spends": table_records(ledger.to_frame()), "statement": ledger_statement(ledger, plan)},
        "headline": headline,
        "headline_uncertainty": {str(k): str(v) for k, v in result.headline_uncertainty().items()},
        "takeaway": takeaway_record(result),
        "versions": package_versions(),
        "tables": {name: table_records(df) for name, df in tables.items()},
        **({"extra": json.loads(json.dumps(dict(extra), default=str))} if extra else {}),
        "sharing": sharing_record(result, audience, tables, headline),
    }
    return for_audience(full, audience)


def report_json(report: dict) -> str:
    return json.dumps(report, indent=1, allow_nan=False)


def parse_report(text: str | bytes) -> dict:
    """Read a saved report; ``ValueError`` for anything that is not one (or is from an old schema)."""
    if isinstance(text, (bytes, bytearray)):
        text = read_text(bytes(text))
    report = parse_json_text(text)
    if not isinstance(report, dict):
        raise ValueError(NOT_A_REPORT)
    return migrate(report)


def migrate(report: dict) -> dict:
    """Bring an older report up to the current schema, or refuse it with a reason."""
    schema = report.get("schema")
    if schema is None and "config" in report:
        raise ValueError("This report comes from an older version (schema 1) that saved the settings "
                         "but not the full plan (data sample, seeds, every tab), so it cannot be "
                         "reproduced. Rerun it on the page and export it again.")
    if schema is None or "plan" not in report:
        raise ValueError(NOT_A_REPORT)
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise ValueError(f"The report's schema must be a whole number from 1 to {SCHEMA_VERSION}; got "
                         f"{schema!r:.40}. Export the report again from its page.")
    if schema > SCHEMA_VERSION:
        raise ValueError(f"This report has schema {schema!r}; this version of the tool reads up to "
                         f"{SCHEMA_VERSION}. Update the tool to open it.")
    check_members(report)
    return report


#: Each member of a report and the JSON kinds it may hold when present (NoneType: may be null).
MEMBER_KINDS = {"plan": (dict,), "page": (str, type(None)), "created_utc": (str, type(None)),
                "plan_digest": (str, type(None)), "data": (dict, type(None)), "ledger": (dict, type(None)),
                "headline": (dict, type(None)), "headline_uncertainty": (dict, type(None)),
                "versions": (dict, type(None)), "tables": (dict,), "extra": (dict, type(None)),
                "question": (str, type(None)), "figures": (list, type(None)), "project_ledger": (dict, type(None)),
                "takeaway": (dict, type(None)),
                "sharing": (dict, type(None)), "confidential": (str, type(None))}
JSON_KIND = {dict: "an object", str: "text", list: "a list", type(None): "null"}


def check_members(report: Mapping[str, Any]) -> None:
    """Every member a report's readers use has its JSON kind, and every table is columns of text and rows
    of that many cells; ``ValueError`` naming the member otherwise (a hand-edited or foreign file)."""
    for name, kinds in MEMBER_KINDS.items():
        value = report.get(name)
        if name in report and not isinstance(value, kinds):
            want = " or ".join(JSON_KIND[k] for k in kinds)
            raise ValueError(f"The report's {name!r} must be {want}, not {type(value).__name__}; "
                             "export the report again from its page.")
    for name, record in (report.get("tables") or {}).items():
        check_table_record(record, f"table {name!r}")
    ledger = report.get("ledger")
    if ledger is not None and ledger.get("spends") is not None:
        check_table_record(ledger["spends"], "ledger")


def check_table_record(record: Any, what: str) -> None:
    """A stored table: {"columns": [text, ...], "rows": [[cell, ...], ...]} with one cell per column."""
    if not isinstance(record, dict):
        raise ValueError(f"The report's {what} must be an object with 'columns' and 'rows'.")
    columns, rows = record.get("columns", []), record.get("rows", [])
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ValueError(f"The report's {what} must list its column names as text.")
    if not isinstance(rows, list) or any(not isinstance(r, list) or len(r) != len(columns) for r in rows):
        raise ValueError(f"Every row of the report's {what} must be a list of {len(columns)} cells.")


def load_plan(report: Mapping[str, Any] | str | bytes) -> Plan:
    """The plan a report was made from (validated like any new plan)."""
    if isinstance(report, (str, bytes)):
        report = parse_report(report)
    else:
        report = migrate(dict(report))
    return plan_from_dict(report["plan"])


def area_of(plan: Plan):
    """The ``core`` package that runs ``plan`` (it exports ``run``)."""
    module = type(plan).__module__
    return importlib.import_module(".".join(module.split(".")[:2]))


def run_plan(plan: Plan, data: Any = None, *, progress=None) -> Result:
    """Run any plan with its area's ``run``."""
    return area_of(plan).run(plan, data, progress=progress)


def stored_data(plan: Plan) -> Any:
    """What ``plan``'s run needs from the project database (e.g. the synthetic copy a fairness design
    showed), fetched by its area's ``stored_data(plan)``; None when the area keeps nothing there. Runs
    never open the database themselves: a caller without a page (the command line) fetches it here and
    passes it as the run's data."""
    loader = getattr(area_of(plan), "stored_data", None)
    return None if loader is None else loader(plan)


def check_upload(plan: Plan, files: tuple[bytes, ...]) -> Any:
    """The data to pass to ``run`` for ``plan`` from uploaded file bytes, after checking their
    fingerprint against the plan's. A plan whose data reference carries no fingerprint runs on
    bundled data alone and takes no files."""
    ref = data_ref_of(plan)
    if ref is None or not ref.fingerprint:
        if files:
            raise ValueError("This plan runs on bundled data; it takes no data file.")
        return None
    if not files:
        raise ValueError("This plan ran on uploaded file(s): pass the same file(s) with --data, in the "
                         f"order they were uploaded (fingerprint {ref.fingerprint[:12]}...).")
    if bytes_fingerprint(*files) != ref.fingerprint:
        raise ValueError("The data file(s) given are not the ones the plan ran on (their fingerprint "
                         "differs; with several files, keep the order they were uploaded in).")
    return files[0] if len(files) == 1 else tuple(files)


def tables_match(report: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Names of the tables that differ between a report and a rerun (empty when all match); a shared report
    of private data is checked on the tables it holds (the rest were withheld from it)."""
    saved = report.get("tables", {})
    if withholds(report):
        tables = report_tables(report, tables)
    fresh = {name: table_records(df) for name, df in tables.items()}
    names = sorted(set(saved) | set(fresh))
    return [n for n in names if json.dumps(saved.get(n)) != json.dumps(fresh.get(n))]


def report_tables(report: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables of ``tables`` that ``report`` holds (a shared report of private data holds fewer)."""
    kept = report.get("tables") or {}
    return {name: df for name, df in tables.items() if name in kept}


def tables_zip(tables: Mapping[str, pd.DataFrame], report: dict | None = None, *, readme: str | None = None) -> bytes:
    """A zip of one guarded CSV per table (plus the JSON report when given). With a report, only the tables
    it holds are written, and a README says what a shared report withheld or that a confidential one must
    not be shared (:func:`core.sharing.zip_readme`); without one, ``readme`` is the README when given."""
    buffer = io.BytesIO()
    if report is not None:
        tables = report_tables(report, tables)
        readme = zip_readme(report)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, df in tables.items():
            archive.writestr(f"{name}.csv", guarded_csv(df))
        if report is not None:
            archive.writestr("report.json", report_json(report))
        if readme:
            archive.writestr("README.txt", readme)
    return buffer.getvalue()
