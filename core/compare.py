"""Compare two scenarios: a pinned one (A) and the current or another saved one (B).

A :class:`Snapshot` freezes what a result or a saved report shows (plan digest, headline numbers,
tables) so that comparing never reruns A. :func:`compare` gives tidy delta tables:

- ``headline``: one row per headline number with A, B, the signed change ``B - A``, the relative
  change ``100 (B - A) / |A|`` (NaN when A is 0 or either side is missing) and its direction; a
  number whose declared meaning differs between A and B (another loss, measure or estimand:
  ``core.takeaway``) is not subtracted: its direction is "not comparable" and ``why`` names both;
- :func:`table_delta`: the same for every numeric cell of a table both sides hold, rows matched on
  their identifying columns (text columns, and integer columns equal on both sides); a column that
  is numeric on one side and text on the other is read as text on both;
- :meth:`Comparison.worst_off`: the worst-off group of each model or method under A and under B, and
  whether it changed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from core.contracts import Result
from core.report import build_report, migrate, parse_report, table_from_records
from core.takeaway import takeaway_of_report
from core.sharing import CONFIDENTIAL

DELTA_COLUMNS = ("A", "B", "change", "change_pct", "direction")
NOT_COMPARABLE = "not comparable"
MAX_DELTA_CELLS = 500_000  # larger tables (e.g. one row per block) are left out of cell-by-cell deltas
SAME_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Snapshot:
    """One side of a comparison, frozen: the report of a result (plan, headline, tables)."""

    label: str
    page: str
    plan_class: str
    plan_digest: str
    headline: dict[str, float]
    tables: dict[str, pd.DataFrame] = field(repr=False)
    report: dict = field(repr=False)

    @property
    def takeaway(self) -> dict:
        """The report's takeaway (answer, key numbers, units, meanings, worst-off groups)."""
        return takeaway_of_report(self.report)


#: Symbols a name may hold, in words.
SYMBOL_WORDS = {"eta_hat": "eta-hat"}
#: Whole machine names that read wrongly word by word, in words (the one place a report's names are spelled out).
NAME_WORDS = {"nan_trials": "trials without a value", "mean_abs_district_error": "mean absolute district error",
              "q_w1": "W1 at the (1 - beta) quantile", "q_null": "null W1 at the (1 - beta) quantile"}
#: Abbreviations inside a machine name, in words (whole words only).
WORD_WORDS = {"abs": "absolute", "w1": "W1", "ci": "interval", "q05": "5th percentile",
              "q95": "95th percentile", "dev": "deviation", "n": "number of"}


def readable_name(name: str) -> str:
    """A machine-style number or column name in words: ``mean_abs_error_pct`` -> ``mean absolute error (%)``,
    ``eta_hat level 1`` -> ``eta-hat level 1``, ``nan_trials`` -> ``trials without a value`` (:data:`NAME_WORDS`,
    :data:`WORD_WORDS`); other names that already read as words are kept."""
    if name in NAME_WORDS:
        return NAME_WORDS[name]
    for symbol, words in SYMBOL_WORDS.items():
        name = name.replace(symbol, words)
    if " " in name or "_" not in name:
        return name
    words = name.removesuffix("_pct").split("_")
    return " ".join(WORD_WORDS.get(w, w) for w in words) + (" (%)" if name.endswith("_pct") else "")


def snapshot_of_report(report: Mapping[str, Any] | str | bytes, label: str = "A") -> Snapshot:
    """A snapshot of a saved report (bytes or text are read with :func:`core.report.parse_report`)."""
    report = parse_report(report) if isinstance(report, (str, bytes, bytearray)) else migrate(dict(report))
    plan = report.get("plan") or {}
    headline = {str(k): _number(v) for k, v in (report.get("headline") or {}).items()}
    tables = {str(name): table_from_records(rec) for name, rec in (report.get("tables") or {}).items()
              if isinstance(rec, Mapping)}
    return Snapshot(label=label, page=str(report.get("page") or ""),
                    plan_class=str(plan.get("__type__", "")) if isinstance(plan, Mapping) else "",
                    plan_digest=str(report.get("plan_digest") or ""), headline=headline, tables=tables,
                    report=report)


def snapshot_of_result(result: Result, *, page: str, label: str = "A") -> Snapshot:
    """A snapshot of a result, through its report (so a pin and a saved report look the same): the full report,
    marked confidential on private data, as a comparison is the curator's own view."""
    return snapshot_of_report(build_report(result, page=page, audience=CONFIDENTIAL), label)


def _number(value: Any) -> float:
    """A headline value as a float (reports keep infinities as text and NaN as null)."""
    if value is None:
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def relative_change(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """``100 (b - a) / |a|``; NaN where ``a`` is 0 or either side is not finite."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 100.0 * (b - a) / np.abs(a)
    return np.where(np.isfinite(out) & (a != 0), out, np.nan)


def direction(change: np.ndarray) -> np.ndarray:
    """"higher", "lower", "same", or "n/a" where either side is missing."""
    change = np.asarray(change, dtype=float)
    return np.select([np.isnan(change), change > SAME_TOLERANCE, change < -SAME_TOLERANCE],
                     ["n/a", "higher", "lower"], "same")


def _delta_columns(frame: pd.DataFrame) -> pd.DataFrame:
    a, b = frame["A"].to_numpy(dtype=float), frame["B"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        change = b - a
    return frame.assign(change=change, change_pct=relative_change(a, b), direction=direction(change))


def headline_delta(a: Mapping[str, float], b: Mapping[str, float], meaning_a: Mapping[str, str] | None = None,
                   meaning_b: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per headline number (A's order, then numbers only B has): A, B, change, change_pct, direction
    and why. A number both sides declare with different meanings (``meaning_a``, ``meaning_b``: another
    loss, measure or estimand) keeps A and B side by side with no change: its direction is
    :data:`NOT_COMPARABLE` and ``why`` says what each side measures."""
    names = list(a) + [k for k in b if k not in a]
    frame = _delta_columns(pd.DataFrame({"number": names,
                                         "A": [_number(a.get(k)) for k in names],
                                         "B": [_number(b.get(k)) for k in names]}))
    meaning_a, meaning_b = meaning_a or {}, meaning_b or {}
    why = [f"A is {meaning_a[k]}; B is {meaning_b[k]}"
           if meaning_a.get(k) and meaning_b.get(k) and meaning_a[k] != meaning_b[k] else "" for k in names]
    differ = np.array([bool(w) for w in why], dtype=bool)
    frame.loc[differ, ["change", "change_pct"]] = np.nan
    frame["direction"] = np.where(differ, NOT_COMPARABLE, frame["direction"])
    return frame.assign(why=why)


def _numeric(series: pd.Series) -> bool:
    """A column of numbers (or yes/no); a column of nothing but missing values counts as numbers (a saved
    report keeps a column of NaN as nulls, which read back as text)."""
    return (pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)
            or bool(series.isna().all()))


def _as_text(series: pd.Series) -> pd.Series:
    """A column as text, missing values as the empty string (so both sides of a merge are text)."""
    return series.astype(object).where(series.notna(), "").astype(str)


def identifying_columns(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Columns that name a row: shared text columns (a column that is text on either side is text on both),
    and shared integer columns equal on both sides."""
    keys = []
    for col in (c for c in a.columns if c in b.columns):
        ca, cb = a[col], b[col]
        if not (_numeric(ca) and _numeric(cb)):
            keys.append(col)
        elif (pd.api.types.is_integer_dtype(ca) and pd.api.types.is_integer_dtype(cb)
              and len(ca) == len(cb) and np.array_equal(ca.to_numpy(), cb.to_numpy())):
            keys.append(col)
    return keys


def table_delta(a: pd.DataFrame, b: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """Tidy per-cell differences of two tables: the key columns, ``column``, A, B, change,
    change_pct, direction. Rows are matched on ``keys`` (default :func:`identifying_columns`) and
    their order within equal keys; a row only one side has gets NaN on the other."""
    a, b = a.loc[:, ~a.columns.duplicated()], b.loc[:, ~b.columns.duplicated()]
    keys = identifying_columns(a, b) if keys is None else list(keys)
    missing = [k for k in keys if k not in a.columns or k not in b.columns]
    if missing:
        raise ValueError(f"Rows can only be matched on columns both tables hold; {missing} is not in both.")
    values = [c for c in a.columns if c in b.columns and c not in keys and _numeric(a[c]) and _numeric(b[c])]
    if not values:
        return pd.DataFrame(columns=[*keys, "column", *DELTA_COLUMNS])
    text_keys = [k for k in keys if not (_numeric(a[k]) and _numeric(b[k]))]

    def prepared(df: pd.DataFrame) -> pd.DataFrame:
        out = df[keys + values].copy()
        for col in keys:  # a key that is text on either side compares as text on both
            out[col] = _as_text(out[col]) if col in text_keys else out[col].astype(float)
        out[values] = out[values].apply(pd.to_numeric, errors="coerce").astype(float)
        out["__n"] = out.groupby(keys, sort=False).cumcount() if keys else np.arange(len(out))
        return out

    merged = prepared(a).merge(prepared(b), on=[*keys, "__n"], how="outer", suffixes=(" A", " B"), sort=False)
    long = [merged[keys].assign(column=col, A=merged[f"{col} A"], B=merged[f"{col} B"]) for col in values]
    return _delta_columns(pd.concat(long, ignore_index=True))


@dataclass(frozen=True)
class Comparison:
    """A against B: the headline delta and, table by table on demand, cell deltas."""

    a: Snapshot
    b: Snapshot
    headline: pd.DataFrame

    @property
    def same_plan(self) -> bool:
        return bool(self.a.plan_digest) and self.a.plan_digest == self.b.plan_digest

    def common_tables(self) -> list[str]:
        return [name for name in self.a.tables if name in self.b.tables]

    def too_large(self, name: str, max_cells: int = MAX_DELTA_CELLS) -> bool:
        """Whether a table holds too many cells on either side for a cell-by-cell delta."""
        return any(t[name].size > max_cells for t in (self.a.tables, self.b.tables) if name in t)

    def worst_off(self) -> pd.DataFrame:
        """One row per model or method either side names a worst-off group for: ``what``, the group under
        A and under B ("" where a side names none) and ``changed`` (both named and different)."""
        a, b = self.a.takeaway["worst_off"], self.b.takeaway["worst_off"]
        names = list(a) + [k for k in b if k not in a]
        frame = pd.DataFrame({"what": names, "A": [a.get(k, "") for k in names], "B": [b.get(k, "") for k in names]})
        return frame.assign(changed=[bool(x and y and x != y) for x, y in zip(frame["A"], frame["B"])])

    def table(self, name: str, keys: list[str] | None = None) -> pd.DataFrame:
        if name not in self.a.tables or name not in self.b.tables:
            raise ValueError(f"Only one of the two scenarios has the table {name!r}; pick one both have.")
        return table_delta(self.a.tables[name], self.b.tables[name], keys)

    def tables(self, max_cells: int = MAX_DELTA_CELLS) -> dict[str, pd.DataFrame]:
        """Every delta table (for export): the headline, the worst-off groups when either side names one,
        and each table both sides hold that is not :meth:`too_large`."""
        worst = self.worst_off()
        return {"headline_delta": self.headline, **({"worst_off_groups": worst} if not worst.empty else {}),
                **{f"delta_{name}": self.table(name) for name in self.common_tables()
                   if not self.too_large(name, max_cells)}}


def compare(a: Snapshot, b: Snapshot) -> Comparison:
    """Compare two snapshots of the same page's plans (``ValueError`` across pages)."""
    if a.plan_class and b.plan_class and a.plan_class != b.plan_class:
        raise ValueError(f"A was saved from a {a.plan_class} and B from a {b.plan_class}: compare two "
                         "scenarios of the same page.")
    return Comparison(a, b, headline_delta(a.headline, b.headline, a.takeaway["meaning"], b.takeaway["meaning"]))


def compare_results(a: Result, b: Result, *, page: str = "") -> Comparison:
    """Compare two results of the same page (each frozen through its report first)."""
    return compare(snapshot_of_result(a, page=page, label="A"), snapshot_of_result(b, page=page, label="B"))


def compare_reports(report_a: Mapping[str, Any] | str | bytes, report_b: Mapping[str, Any] | str | bytes) -> Comparison:
    """Compare two saved reports (raw bytes, text or parsed)."""
    return compare(snapshot_of_report(report_a, "A"), snapshot_of_report(report_b, "B"))


def format_change(change: float, pct: float) -> str:
    """``+1.5 (+3.2%)``, ``-2 (n/a %)`` or ``no change``, for tables shown to people."""
    if change is None or (isinstance(change, float) and math.isnan(change)):
        return "n/a"
    if abs(change) <= SAME_TOLERANCE:
        return "no change"
    pct_text = "n/a %" if pct is None or math.isnan(pct) else f"{pct:+.1f}%"
    return f"{change:+.4g} ({pct_text})"


__all__ = ["Comparison", "DELTA_COLUMNS", "MAX_DELTA_CELLS", "NOT_COMPARABLE", "Snapshot", "compare", "compare_reports", "compare_results", "direction", "format_change",
           "headline_delta", "identifying_columns", "relative_change", "snapshot_of_report", "snapshot_of_result",
           "table_delta"]
