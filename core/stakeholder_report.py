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
import re
import shutil
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.compare import NOT_COMPARABLE, readable_name
from core.contracts import DataRef, Result
from core.report import (build_report, data_ref_of, ledger_statement, load_plan, migrate, package_versions,
                         protection_sentence, report_json, table_from_records)
from core.report_words import plan_sections, plan_sentences
from core.takeaway import NO_UNIT, takeaway_of_report, unit_of
from core.sharing import (CONFIDENTIAL, CONFIDENTIAL_MARK, WITHHELD_NOTE, audience_of, is_confidential, private_report,
                          shared_copy, withholds)
from core.uncertainty_words import LEDGER_TOTAL, SET_BY_PLAN

__all__ = ["report_html", "report_html_from_json", "render_report", "ReportParts", "parts_of_report", "parts_of_result",
           "report_pdf", "project_ledger_html", "chromium_path", "plan_lines", "uncertainty_columns", "embedded_report",
           "PDF_NEEDS_CHROMIUM", "REPRODUCE_COMMAND", "format_number", "format_signed", "key_numbers",
           "answer_sentences", "format_answer", "privacy_sentences", "with_unit", "worst_off_sentences",
           "verdict_sentences", "data_set_words", "stored_figures", "FIRST_PAGE_NUMBERS", "PRINT_CONFIG", "print_ready",
           "PAPERS", "MIN_FONT_PX", "PRINT_WIDTH_PX", "page_size_css"]

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
PDF_NEEDS_CHROMIUM = "The PDF needs Chromium (Debian package 'chromium'); the HTML report works without it."
REPRODUCE_COMMAND = "python -m core reproduce {file} --out results/"
MAX_TABLE_ROWS = 40
FIRST_PAGE_NUMBERS = 5
MAX_PRINT_COLUMNS = 8         # columns of one printed table; wider tables are shown in column groups
#: Words of an "exact (...)" uncertainty that mark an input (a size, a count, a conversion), not a finding.
INPUT_WORDS = ("count)", "units of the geography", "size of", "rows the plan", "public constant", "combinations",
               "conversion")
#: The first page's question when a report carries none (made from a plan file alone, not from a page).
NO_QUESTION = ("This report was made from a plan file alone, which does not state the question it answers; "
               "the plan in plain words below says what was computed.")
LEDGER_TABLE = "ledger"       # the table name results give their ledger's spends
#: Print sizes. A CSS pixel prints as 0.75 pt, so no text of a printed figure is smaller than
#: MIN_FONT_PX * 0.75 = 7.5 pt; figures are drawn PRINT_WIDTH_PX wide, which fits the printable width of both
#: A4 (210 mm - 2 x 12 mm = 186 mm = 703 px) and US Letter (216 mm - 24 mm = 192 mm = 725 px) at 100 %.
MIN_FONT_PX = 10
PRINT_WIDTH_PX = 700
PRINT_MAX_HEIGHT_PX = 880      # the tallest figure that fits one printed page under its heading (Letter is shorter)
#: The first page's main figure: a figure up to 480 px high is drawn 220 px high, which fits under the first page's
#: text on A4 and Letter; a taller one (several panels) keeps its height and starts the second page.
FIRST_PAGE_FIT = (220, 480)
#: Paper sizes the PDF prints on (CSS ``@page`` size names).
PAPERS = ("A4", "Letter")
#: Fill patterns that tell bar series apart without colour (the first series stays plain).
BAR_PATTERNS = ("", "/", "x", ".", "\\", "+", "-", "|")
#: Markers drawn on one line at most (a dense curve keeps every point of its line).
MOST_MARKERS = 15
#: Marker symbols that tell line series apart without colour.
LINE_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "triangle-down", "star", "pentagon",
                "hexagon")
#: Geographies the tool makes up itself: no person's data, so no budget to spend.
PUBLIC_SOURCES = ("stylised", "grid")
#: How every figure is drawn in a report: a still picture (no toolbar over titles, no hover), sized by the page.
PRINT_CONFIG = {"displayModeBar": False, "staticPlot": True, "displaylogo": False, "responsive": True}
_UNCERTAINTY_WORDS = ("sd", "se", "std", "interval", "ci", "lower", "upper", "low", "high", "±", "margin",
                      "quantile", "p05", "p95", "2.5", "97.5")

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:60rem;margin:2rem auto;
padding:0 1rem;color:#1b1f24;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h4{font-size:.95rem;margin:.6rem 0 .2rem}h2{font-size:1.2rem;border-bottom:1px solid #d0d7de;
padding-bottom:.2rem;margin-top:2rem}h3{font-size:1rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem;display:block;max-width:100%;overflow-x:auto}th,td{border:1px solid #d0d7de;
padding:.2rem .5rem;text-align:left;vertical-align:top}th{background:#f6f8fa}
td.value,td.num,.num{white-space:nowrap;font-variant-numeric:tabular-nums}td.num{text-align:right}
.muted{color:#57606a;font-size:.9rem}.headline td.value{font-weight:600}
code,pre{background:#f6f8fa;padding:.1rem .3rem;border-radius:3px;font-size:.85rem}
pre{padding:.5rem;white-space:pre-wrap}ul.plan{padding-left:1.2rem}ul.plan li{margin:.15rem 0}
.figure,table.headline,table.delta{break-inside:avoid;page-break-inside:avoid;margin:1rem 0}
.modebar,.modebar-container{display:none!important}
@media print{body{margin:0;max-width:none;font-size:10pt}h1{margin-top:0}.first-page h2{margin-top:.7rem;margin-bottom:.3rem}
.first-page p{margin:.3rem 0}.first-page .figure{margin:.3rem 0}.first-page{break-after:page;page-break-after:always}
h2,h3{break-after:avoid;page-break-after:avoid}
table{font-size:.7rem;display:table;overflow:visible}td{overflow-wrap:break-word}th{overflow-wrap:normal}
.table{break-inside:auto}tr{break-inside:avoid;page-break-inside:avoid}}
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
        if math.isnan(value):
            return "n/a"
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:.4e}"
    return html.escape(str(value))


#: A cell that holds a machine key (``clear_half``, ``parity_error``): printed in words.
MACHINE_KEY = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def _cell(value: Any) -> str:
    """A table cell; numbers never wrap across lines; yes/no for a true/false value; a machine key in words."""
    if isinstance(value, (bool, np.bool_)):
        return f"<td>{'yes' if value else 'no'}</td>"
    is_number = isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, str) and MACHINE_KEY.fullmatch(value):
        value = readable_name(value)
    return f"<td class='num'>{format_number(value)}</td>" if is_number else f"<td>{format_number(value)}</td>"


def _header(name: Any) -> str:
    """A column name in words (``rho_equivalent`` -> ``rho equivalent``: ``core.compare.readable_name``)."""
    return html.escape(readable_name(str(name)))


def _one_table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{_header(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in df.itertuples(index=False, name=None))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def key_columns(df: pd.DataFrame, most: int = 2) -> list[str]:
    """The leading columns that name a row (text, whole numbers, yes/no), at most ``most`` of them."""
    keys = []
    for c in df.columns:
        if len(keys) == most or pd.api.types.is_float_dtype(df[c]):
            break
        keys.append(c)
    return keys


def column_groups(df: pd.DataFrame, width: int = MAX_PRINT_COLUMNS) -> list[list]:
    """A wide table's columns in groups that fit a printed page, each led by the row-naming columns."""
    cols = list(df.columns)
    if len(cols) <= width:
        return [cols]
    keys = key_columns(df)
    rest = [c for c in cols if c not in keys]
    step = max(width - len(keys), 1)
    return [keys + rest[i:i + step] for i in range(0, len(rest), step)]


def _table(df: pd.DataFrame, max_rows: int = MAX_TABLE_ROWS) -> str:
    """A table (its first ``max_rows`` rows); a wide one in column groups, so nothing is cut at the page's
    right edge and no printed page is shrunk to fit it."""
    shown = df.head(max_rows)
    groups = column_groups(shown)
    more = (f"<p class='muted'>First {max_rows} of {len(df):,} rows; the embedded JSON report has them all.</p>"
            if len(df) > max_rows else "")
    if len(groups) == 1:
        return _one_table(shown) + more
    note = (f"<p class='muted'>{len(shown.columns)} columns, shown in {len(groups)} parts"
            + (f" (each led by {html.escape(', '.join(readable_name(str(c)) for c in key_columns(shown)))})" if key_columns(shown) else "") + ".</p>")
    return note + "".join(_one_table(shown[g]) for g in groups) + more


def _headline(headline: Mapping[str, Any], uncertainty: Mapping[str, str] | None = None, key: bool = False,
              empty: str = "This result has no headline numbers.", units: Mapping[str, str] | None = None) -> str:
    """The headline numbers, each with its unit (``units``, else :func:`core.takeaway.unit_of`) and its
    uncertainty in words (``Result.headline_uncertainty``); ``key``: the first page's few (the table marked
    apart from the rest's). Each number is printed in one of the two tables only, so ``empty`` says why the
    rest's table has nothing to show."""
    if not headline:
        return f"<p class='muted'>{html.escape(empty)}</p>"
    words = uncertainty or {}
    rows = "".join(f"<tr><td>{html.escape(readable_name(str(k)))}</td><td class='value'>{format_number(v)}</td>"
                   f"<td class='unit'>{html.escape(unit_of(str(k), units))}</td>"
                   f"<td class='uncertainty'>{html.escape(words.get(k) or 'not stated')}</td></tr>"
                   for k, v in headline.items())
    return (f"<table class='headline{' key' if key else ''}'><thead><tr><th>number</th><th>value</th><th>unit</th>"
            f"<th>uncertainty</th></tr></thead><tbody>{rows}</tbody></table>")


def _uncertainty(tables: Mapping[str, pd.DataFrame]) -> str:
    """Which columns of which tables carry uncertainty (the tables themselves are shown once, below)."""
    items = []
    for name, df in tables.items():
        cols = uncertainty_columns(df)
        if cols:
            items.append(f"<li><strong>{html.escape(readable_name(str(name)))}</strong>: "
                         f"{html.escape(', '.join(readable_name(str(c)) for c in cols))}</li>")
    if not items:
        return ("<p class='muted'>The result's tables carry no separate uncertainty columns; the headline "
                "table above says for each number whether it is exact or how far it can move.</p>")
    return ("<p>These columns of the tables (in the Tables section below) say how far their numbers can "
            "move:</p><ul>" + "".join(items) + "</ul>")


def _figures(figures: Sequence[Any], first: bool = False, fit: tuple[int, int] | None = None) -> str:
    """Plotly figures as still pictures (no toolbar: :data:`PRINT_CONFIG`) made ready for print
    (:func:`print_ready`: the page's colours, a pattern or marker per series, readable text, the printed
    width) and never scaled down in print; plotly.js is inlined once, with the report's first figure
    (``first``). ``fit`` (height, tallest): a figure no taller than ``tallest`` pixels is drawn ``height`` high
    (the first page's room); a figure too tall for what is left of a page starts the next one."""
    out = []
    for i, fig in enumerate(figures):
        fig = print_ready(fig)
        if fit is not None and (fig.layout.height or 420) <= fit[1]:
            fig.update_layout(height=min(fig.layout.height or 420, fit[0]))
        div = fig.to_html(full_html=False, include_plotlyjs=(first and i == 0), config=PRINT_CONFIG,
                                       default_width=f"{PRINT_WIDTH_PX}px", default_height="420px")
        out.append(f"<div class='figure'>{div}</div>")
    return "".join(out) or "<p class='muted'>No figures for this result.</p>"


_CATEGORY = ("#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1", "#ff8700", "#ffd16a", "#6d3fc0",
             "#d5dae5")
_SEQUENTIAL = ("#e4f5ff", "#c7ebff", "#a6dcff", "#83c9ff", "#60b4ff", "#3d9df3", "#1c83e1", "#0068c9", "#0054a3",
               "#004280")
_DIVERGING = ("#7d353b", "#bd4043", "#ff4b4b", "#ff8c8c", "#ffc7c7", "#a6dcff", "#60b4ff", "#1c83e1", "#0054a3",
              "#004280")
#: The dashboard's chart theme leaves stand-in colours in a figure ("#000001" is the first category colour,
#: up to "#000040") that only the page's browser code swaps for the theme's; printed as they are, every bar
#: and line comes out black. These are the light theme's colours in their place.
THEME_COLOURS: dict[str, str] = {
    **{f"#{i + 1:06d}": c for i, c in enumerate(_CATEGORY)},
    **{f"#{i + 11:06d}": c for i, c in enumerate(_SEQUENTIAL)},
    **{f"#{i + 21:06d}": c for i, c in enumerate(_DIVERGING)},
    "#000032": "#29b09d", "#000033": "#ff2b2b", "#000034": "#0068c9", "#000036": "#a3a8b8", "#000037": "#31333f",
    "#000038": "#ffffff", "#000039": "#e6e7ea", "#000040": "#f0f2f6",
}


def theme_colours(fig: Any) -> Any:
    """``fig`` with the chart theme's stand-in colours (:data:`THEME_COLOURS`) replaced by real ones."""
    import plotly.io as pio
    text = fig.to_json() if hasattr(fig, "to_json") else json.dumps(fig)
    swapped = re.sub(r'"(#0000[0-4][0-9])"', lambda m: json.dumps(THEME_COLOURS.get(m.group(1), m.group(1))), text)
    return pio.from_json(swapped) if swapped != text or not hasattr(fig, "to_json") else fig


def print_ready(fig: Any) -> Any:
    """A copy of ``fig`` for print: in the page's colours (:func:`theme_colours`) with explicit colours on traces
    that had none (the template's colourway, in order); every series told apart without colour too
    (:func:`distinct_series`); no empty fill pattern (Chromium prints a bar whose fill points at an empty pattern
    as solid black); margins that grow to fit long tick labels as the page's do (plotly.js alone keeps a
    figure's fixed margins and cuts such labels); no text below :data:`MIN_FONT_PX` (:func:`readable_text`);
    :data:`PRINT_WIDTH_PX` wide and at most :data:`PRINT_MAX_HEIGHT_PX` high, on a white background."""
    import plotly.graph_objects as go
    fig = go.Figure(theme_colours(fig))
    template = fig.layout.template
    colourway = list(fig.layout.colorway or (template.layout.colorway if template and template.layout else None)
                     or ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692"))
    for i, trace in enumerate(fig.data):
        colour = colourway[i % len(colourway)]
        marker = getattr(trace, "marker", None)
        if trace.type in ("bar", "histogram") and marker is not None:
            if marker.color is None:
                trace.marker.color = colour
            pattern = marker.pattern
            if pattern is not None and isinstance(pattern.shape, str) and not pattern.shape:
                trace.marker.pattern = None      # an empty pattern (plotly express) prints as solid black
        if trace.type == "scatter" and getattr(trace, "line", None) is not None and trace.line.color is None:
            trace.line.color = colour
            if marker is not None and marker.color is None:
                trace.marker.color = colour
    distinct_series(fig)
    for each in (fig.for_each_xaxis, fig.for_each_yaxis):     # the page grows margins to fit long tick
        each(lambda axis: axis.update(automargin=True) if axis.automargin is None else None)   # labels too
    height = fig.layout.height
    fig.update_layout(paper_bgcolor="white", width=PRINT_WIDTH_PX, autosize=False,
                      height=min(int(height), PRINT_MAX_HEIGHT_PX) if height else None)
    return readable_text(fig)


def _series(fig: Any, kinds: tuple[str, ...]) -> list[str]:
    """The names of the series of ``fig`` drawn by traces of ``kinds``, in order (a series drawn in several
    panels, one trace each, counts once); traces without a name or a legend entry are not series."""
    names = []
    for trace in fig.data:
        if trace.type in kinds and trace.name and trace.showlegend is not False and getattr(trace, "fill", None) in (
                None, "none") and trace.name not in names:
            names.append(trace.name)
    titles = [a.text for a in (fig.layout.annotations or ()) if a.text]    # panels titled one per series
    bars = [t for t in fig.data if t.type in kinds]
    if len(names) < 2 and len(bars) >= 2 and len(titles) >= len(bars):
        names = [f"panel {i}" for i in range(len(bars))]
    return names


def distinct_series(fig: Any) -> Any:
    """Every series of ``fig`` told apart without its colour: each bar series its own fill pattern
    (:data:`BAR_PATTERNS`) and each line series its own marker symbol (:data:`LINE_SYMBOLS`), so a
    grey-scale print or a reader who cannot tell the colours apart still can. A figure of one series is left
    as it is; a trace's own pattern or symbol is kept."""
    bars = _series(fig, ("bar", "histogram"))
    if len(bars) >= 2:
        by_panel = bars[0] == "panel 0"
        for i, trace in enumerate(t for t in fig.data if t.type in ("bar", "histogram")):
            k = i if by_panel else (bars.index(trace.name) if trace.name in bars else -1)
            shape = BAR_PATTERNS[k % len(BAR_PATTERNS)] if k >= 0 else ""
            if shape and (trace.marker.pattern is None or not trace.marker.pattern.shape):
                trace.marker.pattern = dict(shape=shape, fillmode="overlay", fgcolor="white", solidity=0.35)
    lines = _series(fig, ("scatter",))
    if len(lines) >= 2:
        for trace in fig.data:
            if trace.type != "scatter" or trace.name not in lines or "lines" not in str(trace.mode or "lines"):
                continue
            if trace.marker.symbol is None:
                trace.marker.symbol = LINE_SYMBOLS[lines.index(trace.name) % len(LINE_SYMBOLS)]
                trace.mode = "lines+markers"
                if trace.x is not None and len(trace.x) > MOST_MARKERS:     # a dense curve: a few markers
                    trace.marker.maxdisplayed = MOST_MARKERS
    return fig


def _raise_fonts(node: Any) -> None:
    """Raise every font size in a figure's JSON below :data:`MIN_FONT_PX` to it (numbers and lists of numbers)."""
    if isinstance(node, list):
        for item in node:
            _raise_fonts(item)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key.endswith("font") and isinstance(value, dict):
            size = value.get("size")
            if isinstance(size, (int, float)):
                value["size"] = max(size, MIN_FONT_PX)
            elif isinstance(size, list):
                value["size"] = [max(v, MIN_FONT_PX) if isinstance(v, (int, float)) else v for v in size]
        _raise_fonts(value)


def readable_text(fig: Any) -> Any:
    """``fig`` with no text smaller than :data:`MIN_FONT_PX` (7.5 pt in print): the base font, every font a
    figure sets (titles, ticks, legends, colour bars, annotations, hover and cell labels), and text inside bars
    or heat-map cells, which plotly would otherwise shrink to fit."""
    import plotly.graph_objects as go
    spec = fig.to_plotly_json()
    layout = spec.setdefault("layout", {})
    base = layout.setdefault("font", {})
    base["size"] = max(base.get("size") or 12, MIN_FONT_PX)
    layout["uniformtext"] = {"minsize": MIN_FONT_PX, "mode": "show"}
    for trace in spec.get("data", []):
        if trace.get("text") is not None or trace.get("texttemplate") is not None:
            font = trace.setdefault("textfont", {})
            if not isinstance(font.get("size"), (int, float, list)):
                font["size"] = base["size"]
    _raise_fonts(spec)
    return go.Figure(spec)


def page_size_css(paper: str) -> str:
    """The CSS that sets the printed page's size (one of :data:`PAPERS`); ValueError for another."""
    if paper not in PAPERS:
        raise ValueError(f"Print on one of {', '.join(PAPERS)}, not {paper!r}.")
    return f"@page{{size:{paper};margin:14mm 12mm}}"


def _ledger(ledger, plan: Any = None) -> str:
    """The result's ledger: its statement (with the unit of protection when the plan names a data set,
    :func:`core.report.ledger_statement`) and its spends."""
    unit = protection_sentence(plan) if plan is not None else None
    if ledger is None:
        return "<p>This result spends no privacy budget.</p>" + (f"<p>{html.escape(unit)}</p>" if unit else "")
    frame = ledger.to_frame()
    text = ledger_statement(ledger, plan) if plan is not None else ledger.statement()
    return f"<p>{html.escape(text)}</p>" + (_table(frame) if len(frame) else "")


def _ledger_parts(parts: "ReportParts") -> str:
    """:func:`_ledger` from a report's parts (its stored statement and spends)."""
    if parts.ledger_text is None:
        unit = protection_sentence(parts.plan) if parts.plan is not None else None
        return "<p>This result spends no privacy budget.</p>" + (f"<p>{html.escape(unit)}</p>" if unit else "")
    frame = parts.ledger_frame
    return f"<p>{html.escape(parts.ledger_text)}</p>" + (_table(frame) if frame is not None and len(frame) else "")


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


def project_ledger_html(project: Mapping[str, Any] | None, carried: bool = True) -> str:
    """The data set's project ledger (``core.privacy.project_ledger.ProjectLedger.export``): one row per
    spend of every release (release, page, time, unit, amount, composition), the composed running total,
    and the simulations summarised in one line (they are never counted in the total)."""
    if not project and not carried:
        return ("<p>This report was made without the data set's project ledger (outside the dashboard), so no "
                "project ledger applies here; the dashboard's Privacy ledger page shows it.</p>")
    if not project:
        return "<p>This result's plan uses no private data set, so no project ledger applies.</p>"
    key = html.escape(str(project.get("data_key", "")))
    if project.get("unavailable"):
        return (f"<p>The project ledger of <code>{key}</code> could not be read when this report was made: "
                f"{html.escape(str(project['unavailable']))}</p>")
    releases, simulations = project.get("releases") or [], project.get("simulations") or []
    parts = [f"<p>Every release of data set <code>{key}</code> recorded in the project ledger so far.</p>"]
    parts.append(_table(_spend_rows(releases)) if releases else "<p>No release recorded yet.</p>")
    parts.append(f"<p><strong>Running total</strong> (releases only): "
                 f"{_running_total(project.get('totals'), project.get('cap'))}.</p>")
    parts.append(f"<p><strong>Simulations (listed apart, never counted in the total)</strong>: "
                 f"{html.escape(simulations_line(simulations))}</p>")
    return "".join(parts)


def simulations_line(simulations: Sequence[Mapping[str, Any]]) -> str:
    """The seeded simulations of a data set in one line: how many, on which pages, and the latest."""
    if not simulations:
        return "no simulation recorded."
    labels = {}
    for rec in simulations:           # one release may record several spends; count releases once
        labels.setdefault(rec.get("release") or (rec.get("release_label"), rec.get("created_utc")), rec)
    n = len(labels)
    pages = sorted({str(r.get("page")) for r in labels.values() if r.get("page")})
    latest = max(labels.values(), key=lambda r: str(r.get("created_utc") or ""))
    text = f"{n:,} seeded simulation{'s' if n != 1 else ''} recorded"
    if pages:
        text += f" on {', '.join(pages)}"
    if latest.get("release_label"):
        text += f"; the latest: {latest['release_label']}"
    return text + "."


def _simulation(ledger, extra: Mapping[str, Any] | None, report: Mapping[str, Any] | None = None) -> str:
    """What is a simulation and what a release (``ledger``: the result's ledger or its statement, None when
    nothing would be spent); what a shared report of private data withheld, or that a confidential one holds
    numbers of the private rows (``report``: the report shown)."""
    lines = []
    note = (extra or {}).get("simulation")
    if note:
        lines.append(html.escape(str(note)))
    report = report or {}
    if withholds(report):
        lines.append(html.escape(WITHHELD_NOTE))
    elif is_confidential(report):
        lines.append(html.escape(f"{CONFIDENTIAL_MARK}. The numbers here were computed on the curator's private "
                                 "rows (simulations, audits, rankings): none of them is a release, and the "
                                 "report must stay with the curator. Share the shared report instead."))
    elif ledger is None:
        lines.append("Nothing here is a release of private data: every number is computed from the plan "
                     "(theory, bundled public data or simulation).")
    if ledger is not None and not withholds(report):
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
    """The plan in sentences (:func:`core.report_words.plan_sections`), each sub-plan under its label."""
    parts = [f"<p class='muted'>{html.escape(type(plan).__name__)}, digest "
             f"<code>{html.escape(plan.digest()[:16])}</code>.</p>"]
    for heading, sentences in plan_sections(plan):
        if heading:
            parts.append(f"<h4>{html.escape(heading)}</h4>")
        parts.append("<ul class='plan'>" + "".join(f"<li>{html.escape(s)}</li>" for s in sentences) + "</ul>")
    return "".join(parts)


# ------------------------------------------------------------------------------------------ the parts

@dataclasses.dataclass
class ReportParts:
    """What one report shows, read either from a result or from its saved JSON report."""

    page: str
    question: str
    plan: Any
    headline: dict
    uncertainty: dict
    tables: dict
    ledger_text: str | None
    ledger_frame: pd.DataFrame | None
    report: dict
    extra: Mapping[str, Any] | None = None

    @property
    def project(self) -> Mapping[str, Any] | None:
        return self.report.get("project_ledger")

    @property
    def takeaway(self) -> dict:
        """The answer, key numbers, units, meanings and worst-off groups the result declared (``core.takeaway``)."""
        return takeaway_of_report(self.report)


def parts_of_result(result: Result, report: Mapping[str, Any], *, page: str, question: str,
                    tables: Mapping[str, pd.DataFrame], ledger, extra) -> ReportParts:
    text = None if ledger is None else ledger_statement(ledger, result.plan)
    frame = None if ledger is None else ledger.to_frame()
    return ReportParts(page=page, question=question or str(report.get("question") or ""), plan=result.plan,
                       headline=dict(result.headline()), uncertainty=dict(result.headline_uncertainty()),
                       tables=dict(tables), ledger_text=text, ledger_frame=frame, report=dict(report),
                       extra=extra if extra is not None else report.get("extra"))


def parts_of_report(report: Mapping[str, Any], question: str = "") -> ReportParts:
    """The parts of a saved report (the JSON a page exports); the plan is rebuilt with ``load_plan``."""
    report = migrate(dict(report))
    ledger = report.get("ledger") or None
    frame = None
    if ledger and ledger.get("spends") is not None:
        frame = table_from_records(ledger["spends"])
    headline = {str(k): (float("nan") if v is None else v) for k, v in (report.get("headline") or {}).items()}
    return ReportParts(page=str(report.get("page") or ""), question=question or str(report.get("question") or ""),
                       plan=load_plan(report), headline=headline,
                       uncertainty={str(k): str(v) for k, v in (report.get("headline_uncertainty") or {}).items()},
                       tables={str(n): table_from_records(r) for n, r in (report.get("tables") or {}).items()},
                       ledger_text=(ledger or {}).get("statement"), ledger_frame=frame, report=report,
                       extra=report.get("extra"))


# ------------------------------------------------------------------------------------------ first page

def key_numbers(headline: Mapping[str, Any], limit: int = FIRST_PAGE_NUMBERS,
                uncertainty: Mapping[str, str] | None = None, key: Sequence[str] = ()) -> dict:
    """At most ``limit`` headline numbers for the first page. A result that declares the numbers carrying
    its answer (``key``, ``core.takeaway``) gets exactly those, in its order. Otherwise in the result's order
    (it lists the ones a stakeholder quotes first): its findings first, and only when there are fewer than
    ``limit`` of them the numbers that restate an input (:func:`restates_input`: a setting, a size, the
    ledger's total)."""
    declared = [k for k in key if k in headline]
    if declared:
        return {k: headline[k] for k in declared[:limit]}
    words = uncertainty or {}
    items = list(headline.items())
    found = [kv for kv in items if not restates_input(words.get(kv[0]))]
    inputs = [kv for kv in items if restates_input(words.get(kv[0]))]
    return dict((found + inputs)[:limit])


def format_answer(value: Any) -> str:
    """A number as the answer's sentences quote it: four significant figures (``33.59``, ``13.58``,
    ``9,600``), where the tables keep six."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
        value = float(value)
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:.3e}"
    return format_number(value)


def with_unit(text: str, unit: str) -> str:
    """A formatted number with its unit: ``33.59%``, ``116.1 people``; a number with no unit stays bare."""
    if not unit or unit == NO_UNIT:
        return text
    return f"{text}%" if unit == "%" else f"{text} {unit}"


def number_name(name: str, unit: str) -> str:
    """A headline number's name as a sentence says it: in words, without a trailing ``(%)`` when the unit that
    follows the number is already ``%``."""
    words = readable_name(str(name))
    return words.removesuffix(" (%)") if unit == "%" else words


def sentence_start(text: str) -> str:
    """``text`` with its first letter in capitals (the rest as it is: names keep their capitals)."""
    return text[:1].upper() + text[1:]


def _moved_sentence(name: str, r: Mapping[str, Any], unit_a: str, unit_b: str) -> str:
    """How B moves one headline number from A, or, when A and B measure different things, both side by side."""
    label = sentence_start(number_name(name, unit_a if unit_a == unit_b else ""))
    a, b = with_unit(format_answer(float(r["A"])), unit_a), with_unit(format_answer(float(r["B"])), unit_b)
    if r["direction"] == NOT_COMPARABLE:
        return f"{label} is {a} under A and {b} under B; they are not subtracted, because {r['why']}"
    if not (math.isfinite(float(r["A"])) and math.isfinite(float(r["B"]))):
        known = [(side, v) for side, v in (("A", a), ("B", b)) if math.isfinite(float(r[side]))]
        if not known:
            return f"{label} has no value under A or under B"
        side, value = known[0]
        return f"{label} is {value} under {side}; {'B' if side == 'A' else 'A'} has no such number"
    return f"{label} moves from {a} under A to {b} under B ({format_signed(float(r['change']))})"


def answer_sentences(parts: ReportParts, comparison=None) -> list[str]:
    """The answer in words. A single report: the verdict or answer the result declares (``core.takeaway``),
    else its first findings with their units. An A/B report: how B moves its first findings from A (numbers
    that mean different things under A and B side by side, never subtracted) and whether the worst-off group
    changed."""
    take = parts.takeaway
    if comparison is None and take["answer"]:
        return [html.escape(s) for s in take["answer"]]
    units = take["units"]
    keyed = {k: parts.headline[k] for k in take["key"] if k in parts.headline}
    quoted = list(keyed.items()) + [(k, v) for k, v in parts.headline.items()
                                    if k not in keyed and not restates_input(parts.uncertainty.get(k))]
    if comparison is not None:      # the numbers B moves, before those it leaves alone
        moved = set(comparison.headline.loc[comparison.headline["direction"].isin(["higher", "lower"]), "number"])
        quoted = [kv for kv in quoted if kv[0] in moved] + [kv for kv in quoted if kv[0] not in moved]
    items = quoted[:2]
    if withholds(parts.report) and not parts.headline:
        return ["The answer was computed on the curator's private rows, so this shared report withholds it "
                "(the section below says what was left out and why); the curator's confidential report holds it."]
    if comparison is not None:      # and every number that must not be subtracted is said so
        apart = comparison.headline.loc[comparison.headline["direction"] == NOT_COMPARABLE, "number"]
        items += [(k, parts.headline.get(k)) for k in apart if k not in dict(items)]
    worst = worst_off_sentences(comparison) if comparison is not None else []
    lead = verdict_sentences(comparison) if comparison is not None else []
    if not parts.headline:
        return lead + ["This result quotes no headline number; see the tables below."] + worst
    if not items:
        return lead + ["This result's numbers are its settings and sizes (the key numbers below); what it found "
                       "is in its tables and figures."] + worst
    out = []
    for name, value in items:
        unit = unit_of(str(name), units)
        text = f"{sentence_start(number_name(name, unit))} is {with_unit(format_answer(value), unit)}"
        if comparison is not None:
            row = comparison.headline[comparison.headline["number"] == name]
            if len(row):
                text = _moved_sentence(name, row.iloc[0], unit_of(str(name), comparison.a.takeaway["units"]), unit)
        out.append(html.escape(text + "."))      # its uncertainty is in the key numbers just below
    return lead + out + worst


def verdict_sentences(comparison) -> list[str]:
    """The verdict of A and of B (results that reach one, ``core.takeaway``), or that both reach the same."""
    a, b = comparison.a.takeaway["verdict"], comparison.b.takeaway["verdict"]
    if not (a or b):
        return []
    if a == b:
        return [html.escape(f"Under both A and B: {a}")]
    return [html.escape(f"Under A: {a or 'no verdict.'} Under B: {b or 'no verdict.'}")]


def worst_off_sentences(comparison) -> list[str]:
    """Whether the worst-off group of each model or method is the same under A and B, naming both."""
    out = []
    for r in comparison.worst_off().itertuples(index=False):
        if r.changed:
            text = (f"The worst-off group under {r.what} changed: it is {r.A} under A and {r.B} under B.")
        elif r.A and r.B:
            text = f"The worst-off group under {r.what} is {r.A} under both A and B: it did not change."
        else:
            text = (f"The worst-off group under {r.what} is {r.A or r.B} under {'A' if r.A else 'B'}; "
                    f"{'B' if r.A else 'A'} names none for it.")
        out.append(html.escape(text))
    return out


def restates_input(words: str | None) -> bool:
    """Whether a headline number's uncertainty says it is an input rather than a finding: a setting of the
    plan, a size or count of the data, the ledger's total or a conversion of it."""
    if not words:
        return False
    words = str(words)
    return words in (SET_BY_PLAN, LEDGER_TOTAL) or (words.startswith("exact (") and any(
        w in words for w in INPUT_WORDS))


def format_signed(value: float) -> str:
    """A difference with its sign (``+0.25``, ``-3``, ``no change``)."""
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    if abs(value) <= 1e-12:
        return "no change"
    return f"{value:+,.4g}"


def data_set_words(key: str) -> str:
    """A data set's key as its label, quoted (``compas`` -> ``'COMPAS two-year recidivism'``); an unknown key
    quoted as it is."""
    from core.datasets import DATASETS
    info = DATASETS.get(key)
    return f"'{info.label}'" if info is not None else (f"'{key}'" if key else "this data set")


def privacy_sentences(parts: ReportParts) -> list[str]:
    """Privacy spent and left on the plan's data set (from its project ledger), and what this result's
    own numbers spend; says so when nothing is spent."""
    out = []
    project = parts.project
    ref = data_ref_of(parts.plan) if parts.plan is not None else None
    if project and not project.get("unavailable"):
        key = data_set_words(str(project.get("data_key", "")))
        totals, cap = project.get("totals") or {}, project.get("cap")
        n = int(totals.get("n_releases", 0) or 0)
        unit = str((cap or {}).get("unit", "epsilon"))
        spent = totals.get("rho") if unit == "rho" else totals.get("epsilon", 0.0)
        spent = float(spent or 0.0)
        if n == 0:
            out.append(f"Nothing has been spent on data set {key} yet: no release is recorded.")
        else:
            out.append(f"Spent on data set {key} so far: {unit} {format_number(spent)} over {n} release(s).")
        if cap:
            amount = float(cap.get("amount", 0.0))
            out.append(f"Left under the curator's cap of {unit} {format_number(amount)}: "
                       f"{unit} {format_number(max(amount - spent, 0.0))}.")
        elif project.get("no_cap"):
            out.append("The curator chose to set no cap for this data set.")
        else:
            out.append("No cap is set for this data set yet, so what is left cannot be stated.")
    elif project and project.get("unavailable"):
        out.append("The data set's project ledger could not be read when this report was made.")
    elif ref is None or ("project_ledger" in parts.report and ref.source in PUBLIC_SOURCES):
        out.append("The plan uses no private data set (only public or synthetic inputs), so no privacy "
                   "budget is spent.")
    elif "project_ledger" in parts.report:
        out.append("No project ledger applies to this plan's data, so nothing is spent from a data set's budget.")
    else:
        out.append("This report carries no project ledger of its data set (it was made outside the "
                   "dashboard), so it cannot say what has been spent.")
    if parts.ledger_text is None:
        out.append("The numbers in this report spend nothing: they are computed from the plan or simulated.")
    else:
        out.append("The numbers in this report are seeded simulations and spend nothing; a real release "
                   "with this plan would spend what the ledger section states.")
    return [html.escape(s) for s in out]


def _first_page(parts: ReportParts, figure: Any, comparison, created: str) -> str:
    title = html.escape(parts.page or "Result")
    subtitle = " (scenario B compared with A)" if comparison is not None else ""
    numbers = key_numbers(parts.headline, uncertainty=parts.uncertainty, key=parts.takeaway["key"])
    body = [f"<h1>{title}</h1><p class='muted'>Report made {html.escape(created)} (UTC){subtitle}.</p>",
            f"<h2>The question</h2><p>{html.escape(parts.question or NO_QUESTION)}</p>",
            "<h2>The answer</h2>" + "".join(f"<p>{s}</p>" for s in answer_sentences(parts, comparison)),
            "<h2>Key numbers</h2>" + _headline(numbers, parts.uncertainty, key=True, units=parts.takeaway["units"]),
            "<h2>Privacy spent and left</h2>" + "".join(f"<p>{s}</p>" for s in privacy_sentences(parts))]
    if figure is not None:
        body.append(f"<h2>The main figure</h2>{_figures([figure], first=True, fit=FIRST_PAGE_FIT)}")
    return f"<section class='first-page'>{''.join(body)}</section>"


# ------------------------------------------------------------------------------------------------ A/B

def _unit_cell(name: str, units_a: Mapping[str, str], units_b: Mapping[str, str]) -> str:
    ua, ub = unit_of(name, units_a), unit_of(name, units_b)
    return ub if ua == ub else f"A: {ua}; B: {ub}"


def _delta_table(delta: pd.DataFrame, units_a: Mapping[str, str] | None = None,
                 units_b: Mapping[str, str] | None = None) -> str:
    """Signed differences of the headline numbers, each with its unit (A's and B's when they differ); a number
    A and B measure differently is shown side by side with why, and never subtracted."""
    head = "".join(f"<th>{h}</th>" for h in ("number", "unit", "A (pinned)", "B (current)", "B − A", "change (% of A)"))
    rows = []
    for r in delta.itertuples(index=False):
        pct = ("n/a" if not math.isfinite(float(r.change_pct)) else
               "0%" if abs(float(r.change_pct)) < 0.05 else f"{float(r.change_pct):+.1f}%")
        why = getattr(r, "why", "")
        change = (f"<td colspan='2' class='why'>not subtracted: {html.escape(why)}</td>" if why else
                  f"<td class='num signed'>{html.escape(format_signed(float(r.change)))}</td>"
                  f"<td class='num'>{html.escape(pct)}</td>")
        rows.append(f"<tr><td>{html.escape(readable_name(str(r.number)))}</td>"
                    f"<td class='unit'>{html.escape(_unit_cell(str(r.number), units_a or {}, units_b or {}))}</td>"
                    f"<td class='num'>{format_number(float(r.A))}</td><td class='num'>{format_number(float(r.B))}</td>"
                    f"{change}</tr>")
    return f"<table class='delta'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _worst_off_table(comparison, rule: str) -> str:
    """The worst-off group of each model or method under A and under B, and whether it changed."""
    view = comparison.worst_off()
    if view.empty:
        return ""
    rows = "".join(f"<tr><td>{html.escape(str(r.what))}</td><td>{html.escape(r.A or 'not named')}</td>"
                   f"<td>{html.escape(r.B or 'not named')}</td><td>{'yes' if r.changed else 'no'}</td></tr>"
                   for r in view.itertuples(index=False))
    how = f" (worst: {html.escape(rule)})" if rule else ""
    return (f"<h3>The worst-off group, A and B{how}</h3><table class='worst-off'><thead><tr><th>under</th>"
            f"<th>A (pinned)</th><th>B (current)</th><th>changed</th></tr></thead><tbody>{rows}</tbody></table>")


def _ab_section(a: ReportParts, b: ReportParts, comparison, overlays: Sequence[Any]) -> str:
    """Scenario ``a`` (A) against ``b`` (B): the signed differences, the overlays and the plan sentences that
    differ (both plans in full follow in the plan section)."""
    sa, sb = plan_sentences(a.plan), plan_sentences(b.plan)
    only_a, only_b = [s for s in sa if s not in sb], [s for s in sb if s not in sa]
    changed = ("<p>A and B have the same settings.</p>" if not (only_a or only_b) else
               "<table class='changes'><thead><tr><th>A (pinned)</th><th>B (current)</th></tr></thead><tbody>"
               "<tr><td><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in only_a) + "</ul></td><td><ul>"
               + "".join(f"<li>{html.escape(s)}</li>" for s in only_b) + "</ul></td></tr></tbody></table>")
    return ("<h2>Scenario A against scenario B</h2>"
            "<p>A is the scenario pinned on the page (kept as it was, never rerun); B is the current one. "
            "Every difference is B − A with its sign; a number that measures something else under A than "
            "under B (another loss or measure) is shown side by side and not subtracted.</p>"
            "<h3>Signed differences of the headline numbers</h3>"
            + _delta_table(comparison.headline, a.takeaway["units"], b.takeaway["units"])
            + _worst_off_table(comparison, b.takeaway["worst_off_rule"] or a.takeaway["worst_off_rule"])
            + (f"<h3>The page's figures, A and B overlaid</h3>{_figures(list(overlays))}" if overlays else "")
            + f"<h3>What differs between the two plans</h3>{changed}"
            + "<p class='muted'>Both plans in full are in the next section.</p>")


# ---------------------------------------------------------------------------------------------- HTML

def _rest_of_headline(parts: ReportParts) -> str:
    """The headline numbers the first page's key numbers leave out (each number is printed once)."""
    shown = key_numbers(parts.headline, uncertainty=parts.uncertainty, key=parts.takeaway["key"])
    rest = {k: v for k, v in parts.headline.items() if k not in shown}
    note = ("<p class='muted'>The key numbers on the first page are not repeated here.</p>"
            if shown and rest else "")
    return note + _headline(rest, parts.uncertainty, units=parts.takeaway["units"], empty=(
        "Every headline number is among the key numbers on the first page." if parts.headline else
        "This result has no headline numbers."))


def _tables_once(tables: Mapping[str, pd.DataFrame], ledger_shown: bool = False) -> str:
    """Every table once: the ledger's spends, already shown in the ledger section, are not repeated."""
    shown = {n: df for n, df in tables.items() if not (ledger_shown and n == LEDGER_TABLE)}
    note = ("<p class='muted'>The ledger's spends are in the Privacy ledger section above.</p>"
            if len(shown) < len(tables) else "")
    return note + ("".join(f"<div class='table'><h3>{html.escape(readable_name(str(name)))}</h3>{_table(df)}</div>"
                           for name, df in shown.items()) or "<p class='muted'>No tables.</p>")


#: A confidential report prints its mark at the top of every PDF page (Chromium repeats a fixed element on each).
_CONFIDENTIAL_STYLE = """
.confidential{border:2px solid #b42318;color:#b42318;font-weight:700;padding:.3rem .6rem;margin:.5rem 0}
.confidential-running{display:none}
@media print{body{padding-top:7mm}.confidential-running{display:block;position:fixed;top:0;left:0;right:0;
text-align:center;font-size:8pt;font-weight:700;color:#b42318;background:white}}
"""


def _confidential_banner() -> str:
    """The confidential mark: a box on screen, and a line printed at the top of every page."""
    mark = html.escape(CONFIDENTIAL_MARK)
    return (f"<div class='confidential'>{mark}. Every number below was computed on the private rows.</div>"
            f"<div class='confidential-running'>{mark}</div>")


def _withheld(report: Mapping[str, Any]) -> str:
    """What a shared report of private data left out, by name, and why."""
    sharing = report.get("sharing") or {}
    items = [("tables", sharing.get("withheld_tables") or []), ("headline numbers", sharing.get("withheld_headline") or [])]
    lists = "".join(f"<p><strong>Withheld {what}</strong>: "
                    f"{html.escape(', '.join(readable_name(str(n)) for n in names))}.</p>" for what, names in items if names)
    return f"<p>{html.escape(WITHHELD_NOTE)}</p>{lists}"


def render_report(parts: ReportParts, *, figures: Sequence[Any] = (), compare: ReportParts | None = None,
                  overlays: Sequence[Any] = (), file_name: str = "report.json") -> str:
    """The report of ``parts`` as one self-contained HTML document; with ``compare`` (scenario A's parts)
    an A/B report of ``parts`` as B."""
    comparison = None
    if compare is not None:
        from core.compare import compare_reports
        comparison = compare_reports(compare.report, parts.report)
    figures, overlays = list(figures), list(overlays)
    main = overlays[0] if overlays else (figures[0] if figures else None)
    rest_overlays = overlays[1:] if overlays else []
    rest_figures = figures if overlays else figures[1:]
    report = parts.report
    versions = report.get("versions") or package_versions()
    created = report.get("created_utc") or datetime.now(timezone.utc).isoformat(timespec="seconds")
    shown = {k: v for k, v in report.items() if k != "figures"}
    embedded = report_json(shown).replace("</", "<\\/")
    command = REPRODUCE_COMMAND.format(file=file_name)
    title = html.escape(parts.page or "Result")
    confidential = is_confidential(report)
    sections = [_confidential_banner()] if confidential else []
    sections.append(_first_page(parts, main, comparison, created))
    if withholds(report):
        sections.append(f"<h2>What this shared report withholds</h2>{_withheld(report)}")
    if comparison is not None:
        sections.append(_ab_section(compare, parts, comparison, rest_overlays))
    sections += [
        f"<h2>The plan in plain words</h2>{_plan(parts.plan)}" if compare is None else
        (f"<h2>The plan in plain words</h2><h3>Plan A (pinned)</h3><div class='plan-a'>{_plan(compare.plan)}</div>"
         f"<h3>Plan B (current)</h3><div class='plan-b'>{_plan(parts.plan)}</div>"),
        f"<h2>Headline numbers</h2>{_rest_of_headline(parts)}",
        f"<h2>Uncertainty in the tables</h2>{_uncertainty(parts.tables)}",
        ("<h2>Figures</h2><p class='muted'>The figures are drawn from numbers computed on the private rows, so "
         "this shared report leaves them out.</p>") if withholds(report) else
        f"<h2>Figures</h2>{_figures(rest_figures, first=main is None)}" if rest_figures or main is None else "",
        f"<h2>Privacy ledger</h2>{_ledger_parts(parts)}",
        f"<h2>Project privacy ledger of this data set</h2>{project_ledger_html(parts.project, 'project_ledger' in parts.report)}",
        f"<h2>Simulation or release</h2>{_simulation(parts.ledger_text, parts.extra, report)}",
        f"<h2>Where the data came from</h2>{_provenance(data_ref_of(parts.plan))}",
        f"<h2>Package versions</h2>{_versions(versions)}",
        "<h2>Reproduce these numbers</h2><p>Save the JSON report embedded in this file (or downloaded "
        f"next to it) as <code>{html.escape(file_name)}</code> and run:</p><pre>{html.escape(command)}</pre>"
        "<p class='muted'>It reruns the plan and checks that every table comes out the same.</p>",
        f"<h2>Tables</h2>{_tables_once(parts.tables, ledger_shown=parts.ledger_frame is not None)}",
    ]
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; "
            "font-src data:\">"
            f"<title>{'Confidential: ' if confidential else ''}{title}: report</title>"
            f"<style>{_STYLE}{_CONFIDENTIAL_STYLE if confidential else ''}</style>"
            f"<style id='page-size'>{page_size_css(PAPERS[0])}</style></head><body>"
            + "".join(sections) + (_confidential_banner() if confidential else "")
            + f"<script type='application/json' id='report-json'>{embedded}</script></body></html>")


def same_audience(report: Mapping[str, Any], compare: Mapping[str, Any] | None,
                  overlays: Iterable[Any]) -> tuple[Mapping[str, Any] | None, list]:
    """The pinned scenario A of an A/B report for the audience of B's ``report``: a shared report compares with A's
    shared copy, without the overlays drawn from A's private numbers."""
    overlays = list(overlays)
    if compare is None or audience_of(report) == CONFIDENTIAL or not private_report(compare):
        return compare, overlays
    return shared_copy(compare), []


def report_html(result: Result, *, page: str, question: str = "", figures: Iterable[Any] = (),
                report: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
                tables: Mapping[str, pd.DataFrame] | None = None, ledger=None,
                file_name: str = "report.json", compare: Mapping[str, Any] | None = None,
                overlays: Iterable[Any] = ()) -> str:
    """The stakeholder report of ``result`` as one self-contained HTML document (a string). With
    ``compare`` (the saved report of a pinned scenario A) it is an A/B report of ``result`` as B, with
    the page's ``overlays`` (A and B drawn on one figure)."""
    tables = dict(result.tables() if tables is None else tables)
    ledger = result.ledger() if ledger is None else ledger
    report = dict(report) if report is not None else build_report(result, page=page, ledger=ledger,
                                                                   extra=extra, tables=tables)
    compare, overlays = same_audience(report, compare, overlays)
    other = parts_of_report(compare) if compare is not None else None
    if withholds(report):      # the shared report of private data: drawn from what the report keeps, no figures
        shared = parts_of_report(report, question)
        shared.page = page or shared.page
        return render_report(shared, compare=other, file_name=file_name)
    parts = parts_of_result(result, report, page=page, question=question, tables=tables, ledger=ledger,
                            extra=extra)
    return render_report(parts, figures=list(figures), compare=other, overlays=list(overlays),
                         file_name=file_name)


def stored_figures(report: Mapping[str, Any]) -> list:
    """The figures a page stored in its exported report (plotly JSON), as plotly figures."""
    import plotly.io as pio
    out = []
    for item in report.get("figures") or []:
        try:
            out.append(pio.from_json(json.dumps(item)))
        except (ValueError, TypeError):
            continue
    return out


def report_html_from_json(report: Mapping[str, Any], *, compare: Mapping[str, Any] | None = None,
                          figures: Sequence[Any] | None = None, overlays: Sequence[Any] = (),
                          question: str = "", file_name: str = "report.json") -> str:
    """The same report made from a saved JSON report alone (the command line's ``report``): the figures the
    page stored in it unless ``figures`` are given."""
    parts = parts_of_report(report, question)
    compare, overlays = same_audience(parts.report, compare, overlays)
    other = parts_of_report(compare) if compare is not None else None
    if withholds(parts.report):
        return render_report(parts, compare=other, file_name=file_name)
    shown = stored_figures(report) if figures is None else list(figures)
    return render_report(parts, figures=shown, compare=other, overlays=overlays, file_name=file_name)


# ----------------------------------------------------------------------------------------------- PDF

def chromium_path() -> str | None:
    """Debian's Chromium when it is installed (or the one named by ``DASHBOARD_CHROMIUM``)."""
    env = os.environ.get("DASHBOARD_CHROMIUM")
    for cand in ((env,) if env else ()) + CHROMIUM_CANDIDATES:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("chromium")
    return found


def report_pdf(report_html_text: str, *, chromium: str | None = None, timeout: float = 90.0,
               paper: str = PAPERS[0]) -> bytes:
    """Print the HTML report to PDF with headless Chromium on ``paper`` (one of :data:`PAPERS`); ValueError
    when Chromium is missing or fails.

    The page is loaded from a temporary file with networking switched off, so printing cannot
    fetch anything either.
    """
    sized = page_size_css(paper)
    report_html_text = report_html_text.replace(page_size_css(PAPERS[0]), sized, 1)
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
