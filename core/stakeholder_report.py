"""A self-contained HTML report of one result for people who will not open the dashboard, and its PDF.

The HTML holds everything it shows: styles inline, plotly.js inlined once (with the first figure),
no fonts, images or scripts fetched from anywhere, so it opens offline and makes no network
request. It states the question, the plan in plain words, the headline numbers each with its
uncertainty in words (then the uncertainty columns of the result's tables), the figures, the privacy
ledger (the result's own and the data set's project ledger when the report carries it), what is a
simulation and what a release, where the data came from, the package versions and the command that reruns it.
The JSON report (:func:`core.report.build_report`) is embedded too, so the HTML file alone is
enough to reproduce the numbers.

The PDF is the same HTML printed by headless Chromium (Debian's ``/usr/bin/chromium``): it lays
out the interactive plotly figures exactly as the browser draws them, so no second renderer (such
as kaleido) is needed.
"""
from __future__ import annotations

import dataclasses
import html
import json
import math
import os
import shutil
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from core.compare import readable_name
from core.contracts import DataRef, Result
from core.report import (build_report, data_ref_of, ledger_statement, package_versions, protection_sentence,
                         report_json)

__all__ = ["report_html", "report_pdf", "project_ledger_html", "chromium_path", "plan_lines", "uncertainty_columns", "embedded_report",
           "PDF_NEEDS_CHROMIUM", "REPRODUCE_COMMAND", "format_number"]

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
PDF_NEEDS_CHROMIUM = "The PDF needs Chromium (Debian package 'chromium'); the HTML report works without it."
REPRODUCE_COMMAND = "python -m core reproduce {file} --out results/"
MAX_TABLE_ROWS = 40
_UNCERTAINTY_WORDS = ("sd", "se", "std", "interval", "ci", "lower", "upper", "low", "high", "±", "margin",
                      "quantile", "p05", "p95", "2.5", "97.5")

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:60rem;margin:2rem auto;
padding:0 1rem;color:#1b1f24;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;border-bottom:1px solid #d0d7de;
padding-bottom:.2rem;margin-top:2rem}h3{font-size:1rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem;display:block;max-width:100%;overflow-x:auto}th,td{border:1px solid #d0d7de;
padding:.2rem .5rem;text-align:left;vertical-align:top}th{background:#f6f8fa}
.muted{color:#57606a;font-size:.9rem}.headline td.value{font-weight:600;font-variant-numeric:tabular-nums}
code,pre{background:#f6f8fa;padding:.1rem .3rem;border-radius:3px;font-size:.85rem}
pre{padding:.5rem;white-space:pre-wrap}.figure{page-break-inside:avoid;margin:1rem 0}
@media print{body{margin:0;max-width:none}h2{page-break-after:avoid}table{font-size:.7rem;overflow:visible}
td,th{word-break:break-word}}
"""


# --------------------------------------------------------------------------------------------- parts

def _label(name: str, meta: Mapping[str, Any] | None = None) -> str:
    label = (meta or {}).get("label") or ""
    return label or name.replace("_", " ")


def _plain_value(value: Any) -> str:
    if isinstance(value, DataRef):
        return value.source if not value.is_upload else f"uploaded file (SHA-256 {value.fingerprint[:12]}…)"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain_value(v) for v in value) or "(none)"
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def plan_lines(plan: Any, depth: int = 0) -> list[tuple[int, str, str]]:
    """The plan as (indent, setting, value) lines in words: nested settings become indented groups under
    their field's label, and parts the plan leaves unset (None: that tab was not asked for) are left out."""
    out: list[tuple[int, str, str]] = []
    if not dataclasses.is_dataclass(plan):
        return [(depth, "value", _plain_value(plan))]
    for f in dataclasses.fields(plan):
        value = getattr(plan, f.name)
        if value is None:
            continue
        label = _label(f.name, f.metadata)
        if dataclasses.is_dataclass(value) and not isinstance(value, DataRef):
            inner = plan_lines(value, depth + 1)
            if inner:
                out.append((depth, label, ""))
                out.extend(inner)
        else:
            out.append((depth, label, _plain_value(value)))
    return out


def uncertainty_columns(df: pd.DataFrame) -> list[str]:
    """Columns of a table that carry uncertainty (standard deviations, intervals, quantiles)."""
    cols = []
    for c in df.columns:
        words = str(c).lower().replace("(", " ").replace(")", " ").replace("_", " ").split()
        if any(w in _UNCERTAINTY_WORDS for w in words) or "±" in str(c):
            cols.append(str(c))
    return cols


def format_number(value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:.4e}"
    return html.escape(str(value))


def _table(df: pd.DataFrame, max_rows: int = MAX_TABLE_ROWS) -> str:
    shown = df.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = "".join("<tr>" + "".join(f"<td>{format_number(v)}</td>" for v in row) + "</tr>"
                   for row in shown.itertuples(index=False, name=None))
    more = (f"<p class='muted'>First {max_rows} of {len(df):,} rows; the embedded JSON report has them all.</p>"
            if len(df) > max_rows else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _headline(headline: Mapping[str, Any], uncertainty: Mapping[str, str] | None = None) -> str:
    """The headline numbers, each with its uncertainty in words (``Result.headline_uncertainty``)."""
    if not headline:
        return "<p class='muted'>This result has no headline numbers.</p>"
    words = uncertainty or {}
    rows = "".join(f"<tr><td>{html.escape(readable_name(str(k)))}</td><td class='value'>{format_number(v)}</td>"
                   f"<td class='uncertainty'>{html.escape(words.get(k) or 'not stated')}</td></tr>"
                   for k, v in headline.items())
    return ("<table class='headline'><thead><tr><th>number</th><th>value</th><th>uncertainty</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _uncertainty(tables: Mapping[str, pd.DataFrame]) -> str:
    parts = []
    for name, df in tables.items():
        cols = uncertainty_columns(df)
        if cols:
            keep = [c for c in df.columns if not pd.api.types.is_float_dtype(df[c]) or str(c) in cols]
            parts.append(f"<h3>{html.escape(name)}</h3>" + _table(df[keep], 20))
    if not parts:
        return ("<p class='muted'>The result's tables carry no separate uncertainty columns; the headline "
                "table above says for each number whether it is exact or how far it can move.</p>")
    return "".join(parts)


def _figures(figures: Sequence[Any]) -> str:
    """Plotly figures as HTML divs: plotly.js inlined with the first one, reused by the rest."""
    out = []
    for i, fig in enumerate(figures):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False,
                          "responsive": True}, default_width="100%", default_height="420px")
        out.append(f"<div class='figure'>{div}</div>")
    return "".join(out) or "<p class='muted'>No figures for this result.</p>"


def _ledger(ledger, plan: Any = None) -> str:
    """The result's ledger: its statement (with the unit of protection when the plan names a data set,
    :func:`core.report.ledger_statement`) and its spends."""
    unit = protection_sentence(plan) if plan is not None else None
    if ledger is None:
        return "<p>This result spends no privacy budget.</p>" + (f"<p>{html.escape(unit)}</p>" if unit else "")
    frame = ledger.to_frame()
    text = ledger_statement(ledger, plan) if plan is not None else ledger.statement()
    return f"<p>{html.escape(text)}</p>" + (_table(frame) if len(frame) else "")


_PROJECT_COLUMNS = {"release_label": "release", "page": "page", "created_utc": "time (UTC)", "unit": "unit",
                    "amount": "amount", "composition": "composition"}


def _spend_rows(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(records)).reindex(columns=list(_PROJECT_COLUMNS))
    return frame.rename(columns=_PROJECT_COLUMNS).fillna("")


def _running_total(totals: Mapping[str, Any] | None, cap: Mapping[str, Any] | None) -> str:
    if not totals:
        return "No running total recorded."
    text = f"epsilon {format_number(float(totals.get('epsilon', 0.0)))}"
    if not totals.get("pure", True):
        text += f" (delta {format_number(float(totals.get('delta', 0.0)))})"
    if totals.get("rho") is not None and not totals.get("pure", True):
        text += f", rho {format_number(float(totals['rho']))}"
    text += f" over {int(totals.get('n_releases', 0))} release(s)"
    if cap:
        text += f"; cap {format_number(float(cap.get('amount', 0.0)))} {html.escape(str(cap.get('unit', '')))}"
    return text


def project_ledger_html(project: Mapping[str, Any] | None) -> str:
    """The data set's project ledger (``core.privacy.project_ledger.ProjectLedger.export``): one row per
    spend of every release (release, page, time, unit, amount, composition), the composed running total,
    and the simulations in a separate table that the total never counts."""
    if not project:
        return "<p>This result's plan uses no data set, so no project ledger applies.</p>"
    key = html.escape(str(project.get("data_key", "")))
    if project.get("unavailable"):
        return (f"<p>The project ledger of <code>{key}</code> could not be read when this report was made: "
                f"{html.escape(str(project['unavailable']))}</p>")
    releases, simulations = project.get("releases") or [], project.get("simulations") or []
    parts = [f"<p>Every release of data set <code>{key}</code> recorded in the project ledger so far.</p>"]
    parts.append(_table(_spend_rows(releases)) if releases else "<p>No release recorded yet.</p>")
    parts.append(f"<p><strong>Running total</strong> (releases only): "
                 f"{_running_total(project.get('totals'), project.get('cap'))}.</p>")
    parts.append("<h3>Simulations (listed apart, never counted in the total)</h3>")
    parts.append(_table(_spend_rows(simulations)) if simulations else "<p>No simulation recorded.</p>")
    return "".join(parts)


def _simulation(ledger, extra: Mapping[str, Any] | None) -> str:
    lines = []
    note = (extra or {}).get("simulation")
    if note:
        lines.append(html.escape(str(note)))
    if ledger is None:
        lines.append("Nothing here is a release of private data: every number is computed from the plan "
                     "(theory, bundled public data or simulation).")
    else:
        lines.append("Every noisy number in this report is a simulation: noise drawn with the tool's "
                     "floating-point samplers from the plan's seed, to show what a release would look "
                     "like. The ledger above is what such a release would spend. An actual release is "
                     "made only through the project's secure release path and appears in the project's "
                     "privacy ledger.")
    return "".join(f"<p>{line}</p>" for line in lines)


def _provenance(ref: DataRef | None) -> str:
    from core.datasets import DATASETS
    if ref is None:
        return "<p>The plan uses no data set (theory or synthetic inputs only).</p>"
    if ref.is_upload:
        return (f"<p>An uploaded file, identified by its SHA-256 fingerprint <code>{html.escape(ref.fingerprint)}"
                f"</code>. Rerunning needs the same file.</p>")
    info = DATASETS.get(ref.source)
    if info is None:
        return f"<p>Bundled data <code>{html.escape(ref.source)}</code>.</p>"
    rows = [("data set", info.label), ("description", info.description),
            ("size", f"{info.rows:,} rows x {info.columns} columns"), ("where it came from", info.provenance),
            ("licence", info.licence), ("file", Path(info.file).name)]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _versions(versions: Mapping[str, str]) -> str:
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in versions.items())
    return f"<table><thead><tr><th>package</th><th>version</th></tr></thead><tbody>{body}</tbody></table>"


def _plan(plan: Any) -> str:
    rows = "".join(
        f"<tr><td style='padding-left:{0.5 + 1.2 * d}rem'>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
        for d, k, v in plan_lines(plan))
    return (f"<p>{html.escape(type(plan).__name__)}, digest <code>{html.escape(plan.digest()[:16])}</code>. "
            f"Every setting that shapes a number:</p><table><tbody>{rows}</tbody></table>")


# ---------------------------------------------------------------------------------------------- HTML

def report_html(result: Result, *, page: str, question: str = "", figures: Iterable[Any] = (),
                report: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
                tables: Mapping[str, pd.DataFrame] | None = None, ledger=None,
                file_name: str = "report.json") -> str:
    """The stakeholder report of ``result`` as one self-contained HTML document (a string)."""
    tables = dict(result.tables() if tables is None else tables)
    ledger = result.ledger() if ledger is None else ledger
    report = dict(report) if report is not None else build_report(result, page=page, ledger=ledger,
                                                                   extra=extra, tables=tables)
    versions = report.get("versions") or package_versions()
    created = report.get("created_utc") or datetime.now(timezone.utc).isoformat(timespec="seconds")
    embedded = report_json(report).replace("</", "<\\/")
    command = REPRODUCE_COMMAND.format(file=file_name)
    title = html.escape(page or "Result")
    table_parts = "".join(f"<h3>{html.escape(name)}</h3>{_table(df)}" for name, df in tables.items())
    sections = [
        f"<h1>{title}</h1><p class='muted'>Report made {html.escape(created)} (UTC).</p>",
        f"<h2>The question</h2><p>{html.escape(question) or 'See the page this report came from.'}</p>",
        f"<h2>The plan in plain words</h2>{_plan(result.plan)}",
        f"<h2>Headline numbers</h2>{_headline(result.headline(), result.headline_uncertainty())}",
        f"<h2>Uncertainty in the tables</h2>{_uncertainty(tables)}",
        f"<h2>Figures</h2>{_figures(list(figures))}",
        f"<h2>Privacy ledger</h2>{_ledger(ledger, result.plan)}",
        f"<h2>Project privacy ledger of this data set</h2>{project_ledger_html(report.get('project_ledger'))}",
        f"<h2>Simulation or release</h2>{_simulation(ledger, extra if extra is not None else report.get('extra'))}",
        f"<h2>Where the data came from</h2>{_provenance(data_ref_of(result.plan))}",
        f"<h2>Package versions</h2>{_versions(versions)}",
        "<h2>Reproduce these numbers</h2><p>Save the JSON report embedded in this file (or downloaded "
        f"next to it) as <code>{html.escape(file_name)}</code> and run:</p><pre>{html.escape(command)}</pre>"
        "<p class='muted'>It reruns the plan and checks that every table comes out the same.</p>",
        f"<h2>Tables</h2>{table_parts or '<p class=muted>No tables.</p>'}",
    ]
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; "
            "font-src data:\">"
            f"<title>{title}: report</title><style>{_STYLE}</style></head><body>"
            + "".join(sections)
            + f"<script type='application/json' id='report-json'>{embedded}</script></body></html>")


# ----------------------------------------------------------------------------------------------- PDF

def chromium_path() -> str | None:
    """Debian's Chromium when it is installed (or the one named by ``DASHBOARD_CHROMIUM``)."""
    env = os.environ.get("DASHBOARD_CHROMIUM")
    for cand in ((env,) if env else ()) + CHROMIUM_CANDIDATES:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("chromium")
    return found


def report_pdf(report_html_text: str, *, chromium: str | None = None, timeout: float = 90.0) -> bytes:
    """Print the HTML report to PDF with headless Chromium; ValueError when Chromium is missing or fails.

    The page is loaded from a temporary file with networking switched off, so printing cannot
    fetch anything either.
    """
    exe = chromium or chromium_path()
    if exe is None:
        raise ValueError(PDF_NEEDS_CHROMIUM)
    with tempfile.TemporaryDirectory(prefix="report_pdf_") as tmp:
        src, out = Path(tmp) / "report.html", Path(tmp) / "report.pdf"
        src.write_text(report_html_text, encoding="utf-8")
        cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--no-pdf-header-footer",
               "--disable-extensions", "--disable-background-networking", "--proxy-server=127.0.0.1:9",
               "--proxy-bypass-list=<-loopback>", f"--user-data-dir={tmp}/profile",
               "--run-all-compositor-stages-before-draw", "--virtual-time-budget=10000",
               f"--print-to-pdf={out}", src.as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"Chromium could not print the report: {exc}") from exc
        if not out.exists() or out.stat().st_size == 0:
            raise ValueError("Chromium could not print the report: "
                             + proc.stderr.decode(errors="replace")[-300:])
        return out.read_bytes()


def embedded_report(html_text: str) -> dict:
    """The JSON report embedded in a stakeholder HTML report (for reruns and tests)."""
    start = html_text.index("<script type='application/json' id='report-json'>")
    start = html_text.index(">", start) + 1
    end = html_text.index("</script>", start)
    return json.loads(html_text[start:end].replace("<\\/", "</"))
