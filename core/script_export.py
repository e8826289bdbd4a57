"""Code people keep: a saved report written out as a Python script or a Jupyter notebook.

The exported code recomputes the report's result with the project's own API, step by step and in
plain sight: the plan is built with its class and one keyword per line (nested sub-plans and plugin
parameters too, every value a literal), the data are loaded the way the page loaded them (the
bundled loader, or the uploaded / declared file by path, checked against the report's fingerprint),
``run`` is called, every table is printed and saved as CSV, and the page's main figure is drawn with
the same plotly builder the page uses and saved as HTML. An analyst can read it, change a value and
rerun it without the dashboard.

:func:`script_sections` holds the steps (a plain-words explanation and the code of each);
:func:`script_text` joins them into a ``.py`` file with the explanations as comments and
:func:`notebook_json` into a notebook (a markdown cell, then a code cell, per step).
``python -m core script REPORT.json --out reproduce.py --notebook reproduce.ipynb`` writes both.
Nothing here runs a plan: the text is generated from the report alone.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from core.areas import parts_for
from core.contracts import DataRef, Plan
from core.report import area_of, data_ref_of, load_plan

__all__ = ["Section", "OUT_DIR", "FIGURE_FILE", "plan_source", "script_sections", "script_text",
           "notebook_json", "add_script_parser", "run_script_command"]

#: Folder, next to where the code runs, that the exported code writes its tables and figure into.
OUT_DIR = "reproduced"
#: The main figure's file inside :data:`OUT_DIR`.
FIGURE_FILE = "figure.html"
#: Plan digest line the exported code prints (tests and readers compare it with the report's).
DIGEST_PREFIX = "Plan digest:"
_WIDTH = 100
_ONE_LINE = 72


@dataclass(frozen=True)
class Section:
    """One step of the exported code: a title, what it does in plain words, and its code."""

    title: str
    words: str
    code: str


# --------------------------------------------------------------------------------------------------
# Values as Python source
# --------------------------------------------------------------------------------------------------

class _Imports:
    """The ``from module import Name`` lines a piece of generated code needs, one name per class."""

    def __init__(self) -> None:
        self.by_module: dict[str, set[str]] = {}
        self.names: dict[str, type] = {}

    def add(self, module: str, name: str) -> None:
        self.by_module.setdefault(module, set()).add(name)

    def name_of(self, cls: type) -> str:
        """The name code can use for ``cls``, imported from the package that exports it when one does."""
        name = cls.__name__
        known = self.names.get(name)
        if known is not None and known is not cls:
            raise ValueError(f"Two different classes named {name} sit in one plan; the exported code "
                             "cannot import both under one name.")
        self.names[name] = cls
        self.add(_public_home(cls), name)
        return name

    def lines(self) -> list[str]:
        return [f"from {module} import {', '.join(sorted(names))}"
                for module, names in sorted(self.by_module.items())]


def _public_home(cls: type) -> str:
    """The shortest ``core`` module that exports ``cls`` under its own name: its area package when the
    package's ``__init__`` re-exports it, else the module that defines it."""
    module = cls.__module__
    parts = module.split(".")
    for depth in range(2, len(parts)):
        candidate = ".".join(parts[:depth])
        try:
            package = importlib.import_module(candidate)
        except ImportError:
            continue
        if getattr(package, cls.__name__, None) is cls:
            return candidate
    return module


def _literal(value: Any, imports: _Imports, indent: int) -> str:
    """``value`` as Python source: dataclasses as constructor calls with keywords, tuples and lists as
    tuples, text and numbers as literals (non-finite floats as ``float("inf")``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _call(value, imports, indent)
    if isinstance(value, enum.Enum):
        return f"{imports.name_of(type(value))}.{value.name}"
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, str):
        return _text(value, indent)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f'float("{value}")'
    if isinstance(value, np.ndarray):
        value = tuple(value.tolist())
    if isinstance(value, Mapping):
        items = [f"{_literal(k, imports, indent + 4)}: {_literal(v, imports, indent + 4)}"
                 for k, v in value.items()]
        return _bracketed("{", "}", items, indent, trailing_single=False)
    if isinstance(value, (tuple, list)):
        items = [_literal(v, imports, indent + 4) for v in value]
        return _bracketed("(", ")", items, indent, trailing_single=True)
    raise ValueError(f"A plan value of type {type(value).__name__} cannot be written as Python source.")


def _text(value: str, indent: int) -> str:
    """A string literal; a long text is split at spaces into adjacent literals, one per line, in brackets."""
    if len(value) <= _ONE_LINE:
        return repr(value)
    chunks = textwrap.wrap(value, _ONE_LINE - 8, drop_whitespace=False, break_on_hyphens=False,
                           break_long_words=False)
    if "".join(chunks) != value or len(chunks) < 2:
        return repr(value)
    pad = " " * (indent + 4)
    return "(\n" + "".join(f"{pad}{chunk!r}\n" for chunk in chunks) + " " * indent + ")"


def _bracketed(open_: str, close: str, items: list[str], indent: int, *, trailing_single: bool) -> str:
    if not items:
        return "()" if open_ == "(" else "{}"
    one = ", ".join(items) + ("," if trailing_single and len(items) == 1 else "")
    if len(one) <= _ONE_LINE and "\n" not in one:
        return f"{open_}{one}{close}"
    pad = " " * (indent + 4)
    body = "".join(f"{pad}{item},\n" for item in items)
    return f"{open_}\n{body}{' ' * indent}{close}"


def _field_comment(f: dataclasses.Field) -> str:
    """A field's label (from ``param(label=...)``) as a short trailing comment, or nothing."""
    label = str(f.metadata.get("label") or "").strip()
    return f"  # {label}" if label and label.lower() != f.name.replace("_", " ") else ""


def _call(value: Any, imports: _Imports, indent: int) -> str:
    """A dataclass as ``Class(\\n    field=value,\\n)``: one keyword per line, every field written out."""
    name = imports.name_of(type(value))
    fields = [f for f in dataclasses.fields(value) if f.init
              and not (f.metadata.get("omit_if_none") and getattr(value, f.name) is None)]
    if not fields:
        return f"{name}()"
    pad = " " * (indent + 4)
    args = [(f.name, _literal(getattr(value, f.name), imports, indent + 4), _field_comment(f)) for f in fields]
    flat = ", ".join(f"{k}={v}" for k, v, _ in args)
    if len(fields) <= 3 and len(flat) + len(name) <= _ONE_LINE and "\n" not in flat \
            and not any(c for _, _, c in args):
        return f"{name}({flat})"
    lines = "".join(f"{pad}{k}={v},{c}\n" for k, v, c in args)
    return f"{name}(\n{lines}{' ' * indent})"


def plan_source(plan: Plan, variable: str = "plan") -> tuple[str, list[str]]:
    """``variable = PlanClass(...)`` for ``plan``, and the import lines it needs."""
    imports = _Imports()
    code = f"{variable} = {_literal(plan, imports, 0)}"
    return code, imports.lines()


# --------------------------------------------------------------------------------------------------
# The steps
# --------------------------------------------------------------------------------------------------

def _merged(lines: list[str]) -> list[str]:
    """``from m import a`` lines with the names of one module joined, sorted by module."""
    by_module: dict[str, set[str]] = {}
    for line in lines:
        module, names = line[len("from "):].split(" import ")
        by_module.setdefault(module, set()).update(n.strip() for n in names.split(","))
    return [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(by_module.items())]


def _wrap(text: str) -> str:
    return "\n\n".join(textwrap.fill(p, _WIDTH - 2) for p in text.split("\n\n"))


def _data_section(plan: Plan, data_files: Sequence[str]) -> Section:
    """How the run gets its data: bundled (``run`` loads it from the plan), a geography the plan builds,
    or the uploaded / declared file(s) read from disk and checked against the plan's fingerprint."""
    ref = data_ref_of(plan)
    if ref is None:
        return Section("The data", "This plan reads no data set: everything it needs is in the plan.",
                       "data = None")
    if ref.is_upload:
        return _upload_section(ref, data_files)
    from core.datasets import DATASETS
    info = DATASETS.get(ref.source)
    if info is None:
        return Section(
            "The data",
            f"The plan's data are {ref.source!r}: built from the plan's own settings (a synthetic geography "
            "or grid), so there is no file to load. run() builds it from the plan.",
            f"data = None  # {ref.source!r} is built by run() from the plan's settings")
    words = (f"The plan runs on the bundled data set {info.label!r} ({info.rows:,} rows, {info.columns} "
             f"columns), shipped with the project as data/{info.file}. Source: {info.provenance}; "
             f"licence: {info.licence}. run() loads it itself from plan.data, with the same loader the "
             "page used; it is loaded here too so you can look at it.")
    code = (f"table = load_dataset(plan.data)  # data/{info.file}\n"
            "print(f\"{len(table):,} rows x {len(table.columns)} columns\")\n"
            f"data = None  # bundled data: run() loads {ref.source!r} from plan.data itself")
    return Section("The data", words, code)


def _upload_section(ref: DataRef, data_files: Sequence[str]) -> Section:
    schema = ref.schema
    name = getattr(schema, "name", None)
    if data_files:
        files = list(data_files)
    elif name:
        files = [f"{name}{getattr(schema, 'file_suffix', '.csv')}"]
    else:
        files = ["uploaded_data.csv"]
    if name:
        words = (f"The plan runs on the declared data set {name!r}: a file the curator brought and declared on "
                 "the Data step. Its declaration (columns, roles, bounds, missing values, unit of protection) "
                 "rides in the plan, so run() cleans the file by it again exactly as the page did. The file "
                 "itself is not in the report: put it at the path below (the project database lists the "
                 f"file names of its versions: DataSetStore().versions({name!r})).")
    else:
        words = ("The plan ran on a file uploaded on the page. The file is not in the report: put it at the "
                 "path below (several files: list them all, in the order they were uploaded).")
    words += (f"\n\nThe file's fingerprint (SHA-256) is {ref.fingerprint}; check_upload refuses any other "
              "file before anything runs.")
    listed = ", ".join(f"Path({f!r})" for f in files)
    code = (f"DATA_FILES = [{listed}]  # the file(s) the plan ran on\n"
            "data = check_upload(plan, tuple(path.read_bytes() for path in DATA_FILES))")
    return Section("The data", words, code)


def _stored_part(plan: Plan) -> Any:
    """The sub-plan that names what a run keeps in the project database (a synthetic copy), or None."""
    getter = getattr(plan, "private_pairs_plan", None)
    if callable(getter):
        return getter()
    constraints = getattr(plan, "constraints", None)
    return getattr(constraints, "people", None)


def _stored_section(plan: Plan) -> Section | None:
    """The data step of a plan whose run takes what the project database keeps (a synthetic copy)."""
    sub = _stored_part(plan)
    if sub is None or not getattr(sub, "copy_id", ""):
        return None
    ref = data_ref_of(plan)
    source = f" of the bundled data set {ref.source!r}" if ref is not None else ""
    return Section(
        "The data",
        f"The cards showed a private synthetic copy{source} (copy id {sub.copy_id!r}), released once when "
        "the session was created and kept in the project database; the run reads only that copy. A run "
        "never opens the database itself, so the copy is fetched here (from the database named by "
        "DASHBOARD_DB_URL, else the default SQLite file) and passed to run(). Elsewhere, import the "
        "session's database first.",
        "data = stored_data(plan)  # the synthetic copy the cards showed")


def _figure_code(plan: Plan) -> tuple[str, str] | None:
    """(what the figure shows, code that sets ``fig``) for the page's main figure, from the plan's area
    (``core.areas``), or None."""
    parts = parts_for(plan)
    return parts.figure(plan) if parts is not None and parts.figure is not None else None


def _fallback_figure() -> tuple[str, str]:
    return ("the result's first table (this page draws no chart for this plan; the table is what it shows)",
            "import plotly.graph_objects as go\n\n"
            "name, first = next(iter(result.tables().items()))\n"
            "fig = go.Figure(go.Table(header=dict(values=list(first.columns)),\n"
            "                         cells=dict(values=[first[c].astype(str) for c in first.columns])))\n"
            "fig.update_layout(title=name)")


def _notes(plan: Plan) -> list[str]:
    """What the exported code does not recompute, said plainly (the plan's area says it)."""
    parts = parts_for(plan)
    return parts.notes(plan) if parts is not None and parts.notes is not None else []


def script_sections(report: Mapping[str, Any], *, data_files: Sequence[str] = ()) -> list[Section]:
    """The steps of the code that recomputes ``report``'s result (see the module docstring)."""
    plan = load_plan(report)
    area = area_of(plan).__name__
    page = str(report.get("page") or type(plan).__name__)
    plan_code, plan_imports = plan_source(plan)
    stored = _stored_section(plan)
    data = _data_section(plan, data_files) if stored is None else stored
    figure = _figure_code(plan) or _fallback_figure()
    needed = _Imports()
    needed.add(area, "run")
    needed.add("core.report", "guarded_csv")
    if "load_dataset" in data.code:
        needed.add("core.datasets", "load_dataset")
    if "check_upload" in data.code:
        needed.add("core.report", "check_upload")
    if stored is not None:
        needed.add(area, "stored_data")
    imports = ["from pathlib import Path", "", *_merged(needed.lines() + plan_imports)]
    digest = report.get("plan_digest") or plan.digest()
    made = report.get("created_utc") or "an unknown time"
    notes = _notes(plan)
    sections = [
        Section("What this does",
                f"Recomputes the result of the page {page!r} from the report saved at {made} (UTC), with the "
                "project's core API and no dashboard. Run it with the project's folder on the Python path "
                "(from that folder, or with PYTHONPATH set to it). It writes every table as CSV and the main "
                f"figure as HTML into the folder {OUT_DIR!r}." + ("\n\n" + "\n\n".join(notes) if notes else ""),
                "\n".join(imports)),
        Section("The plan",
                "Every setting that shapes a number, as the page recorded it: change any value and rerun. "
                f"The report's plan has digest {digest}; the line printed below agrees with it until you "
                "change something.",
                f"{plan_code}\nprint(\"{DIGEST_PREFIX}\", plan.digest())"),
        data,
        Section("The run",
                "run() computes everything the page shows from the plan and the data. Every random draw in it "
                "is seeded by the plan (these are simulations, not releases), so the numbers come out the same "
                "on every run. The headline numbers are the few a stakeholder would quote.",
                "result = run(plan, data)\n"
                "for name, value in result.headline().items():\n"
                "    print(f\"{name}: {value}\")"),
        Section("The tables",
                "Every table of the result, printed and saved as CSV (cells that a spreadsheet would run as "
                "a formula get a leading apostrophe).",
                f"out = Path({OUT_DIR!r})\n"
                "out.mkdir(exist_ok=True)\n"
                "tables = result.tables()\n"
                "for name, table in tables.items():\n"
                "    (out / f\"{name}.csv\").write_text(guarded_csv(table))\n"
                "    print(f\"\\n{name} ({len(table)} rows)\")\n"
                "    print(table.head(10).to_string())"),
        Section("The main figure",
                f"The figure shows {figure[0]}. It is saved as a self-contained HTML file (plotly.js "
                "inside, nothing fetched from the network); open it in a browser.",
                f"{figure[1]}\n"
                f"fig.write_html(out / {FIGURE_FILE!r}, include_plotlyjs=True)\n"
                f"print(\"Figure saved to\", out / {FIGURE_FILE!r})"),
    ]
    return sections


def _comment(text: str) -> str:
    return "\n".join(("# " + line).rstrip() for line in _wrap(text).splitlines())


def script_text(report: Mapping[str, Any], *, data_files: Sequence[str] = ()) -> str:
    """The exported Python script: each step's explanation as comments above its code."""
    sections = script_sections(report, data_files=data_files)
    head, rest = sections[0], sections[1:]
    doc = _wrap(head.words).replace('"""', "'''").replace("\\", "\\\\")
    parts = [f'"""{head.title}\n\n{doc}\n"""\n{head.code}\n']
    for number, section in enumerate(rest, start=1):
        bar = f"# {number}. {section.title} "
        parts.append(f"{bar}{'-' * max(3, _WIDTH - len(bar))}\n{_comment(section.words)}\n{section.code}\n")
    return "\n\n".join(parts)


def _notebook_cell(kind: str, number: int, text: str) -> dict:
    """One nbformat-4.5 cell: its source as a list of lines (each but the last keeping its newline), a
    stable id, and for code no outputs and no execution count yet."""
    cell: dict[str, Any] = {"cell_type": kind, "id": f"{kind}-{number}", "metadata": {},
                            "source": text.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def notebook_json(report: Mapping[str, Any], *, data_files: Sequence[str] = ()) -> str:
    """The exported Jupyter notebook: a markdown cell, then a code cell, per step. Written as the
    nbformat 4.5 JSON document by hand (top-level ``cells``, ``metadata``, ``nbformat`` 4 and
    ``nbformat_minor`` 5, one-space indent and sorted keys as Jupyter saves it), so exporting needs no
    notebook package at run time."""
    cells = []
    for number, section in enumerate(script_sections(report, data_files=data_files)):
        heading = f"# {section.title}" if number == 0 else f"## {number}. {section.title}"
        cells.append(_notebook_cell("markdown", number, f"{heading}\n\n{section.words}"))
        cells.append(_notebook_cell("code", number, section.code))
    book = {"cells": cells, "metadata": {
                "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(book, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------
# Command line: python -m core script REPORT.json --out reproduce.py --notebook reproduce.ipynb
# --------------------------------------------------------------------------------------------------

def add_script_parser(sub) -> None:
    """The ``script`` subcommand of ``python -m core``."""
    cmd = sub.add_parser("script", help="write a report as a Python script and/or a Jupyter notebook")
    cmd.add_argument("file", type=Path, help="a report exported by a page (JSON)")
    cmd.add_argument("--out", type=Path, help="the Python script to write (e.g. reproduce.py)")
    cmd.add_argument("--notebook", type=Path, help="the Jupyter notebook to write (e.g. reproduce.ipynb)")
    cmd.add_argument("--data", action="append", default=[],
                     help="path of the uploaded data file(s) the plan ran on, as the code should read them")


def run_script_command(args) -> int:
    """Write the script and/or notebook of a report (the script to stdout when neither is named)."""
    import sys

    from core.report import parse_report
    try:
        report = parse_report(args.file.read_text())
        files = tuple(str(p) for p in args.data)
        if args.out is None and args.notebook is None:
            print(script_text(report, data_files=files))
            return 0
        if args.out is not None:
            args.out.write_text(script_text(report, data_files=files))
        if args.notebook is not None:
            args.notebook.write_text(notebook_json(report, data_files=files))
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    written = [str(p) for p in (args.out, args.notebook) if p is not None]
    print(f"Wrote {' and '.join(written)}.")
    return 0
