"""Shared means released: what a report of private data may carry when it leaves the curator.

Every report is made for one of two audiences:

- ``shared`` (the default of every export): for a plan on private data (an uploaded or declared data set,
  :func:`is_private`) it carries only numbers released through the ledger, public information (the plan's
  settings, the declared categories and bounds, the ledger's spends) and numbers computed on a released
  synthetic copy. A result names such tables and headline numbers itself (``Result.shared_table_names``,
  ``Result.shared_headline_names``); everything else it computed on the private rows (simulations, audit
  statistics, rankings, sizes, figures drawn from them) is withheld, and the report says what and why.
  Bands of sizes are not enough: a rate, a statistic or a fraction next to a band gives the count back.
- ``confidential``: everything the result holds, for the curator only, marked :data:`CONFIDENTIAL_MARK`
  in every file (the JSON's ``confidential`` member, every HTML/PDF page, the CSV zip's README). It is
  never the default export.

Bundled data is public: its shared report is its full report. The full report records which members may be
shared, so :func:`shared_copy` turns any full report into its shared one without the result at hand.
"""
from __future__ import annotations

from typing import Any, Mapping

from core.contracts import DataRef

SHARED = "shared"
CONFIDENTIAL = "confidential"
AUDIENCES = (SHARED, CONFIDENTIAL)
CONFIDENTIAL_MARK = "Confidential \u2014 computed on private rows; do not share"
#: Members of a report's ``extra`` that are fixed words of the tool, never numbers of the data.
PUBLIC_EXTRA = ("simulation", "note")
CONFIDENTIAL_README = (f"{CONFIDENTIAL_MARK}.\n\nThese tables were computed on the private rows of the curator's "
                       "data set. Keep them with the curator: share the shared report instead.\n")
WITHHELD_NOTE = ("This is the shared report of a private data set: it carries only numbers released through the "
                 "privacy ledger, public information (the plan's settings, the declared categories and bounds, "
                 "the ledger's spends) and numbers computed on a released synthetic copy. What the tool computed "
                 "on the private rows themselves (simulations, audit statistics, rankings, accuracies, sizes and "
                 "the figures drawn from them) is withheld: even as bands or rates such numbers can give exact "
                 "counts back. The curator keeps them in the confidential report.")


def is_private(plan: Any) -> bool:
    """Whether ``plan`` runs on a curator's own data (an uploaded or declared data set), whose rows are private;
    bundled data and plans without data are public."""
    ref = getattr(plan, "data", None)
    return isinstance(ref, DataRef) and ref.is_upload


def check_audience(audience: str) -> str:
    if audience not in AUDIENCES:
        raise ValueError(f"A report is either {SHARED!r} or {CONFIDENTIAL!r}; got {audience!r}.")
    return audience


def sharing_record(result: Any, audience: str, tables: Mapping[str, Any], headline: Mapping[str, Any]) -> dict:
    """The report's ``sharing`` member: its audience, whether its data is private, and, when it is, which of its
    tables and headline numbers may leave the curator (on public data all of them may)."""
    if not is_private(result.plan):
        return {"audience": check_audience(audience), "private_data": False}
    names, keys = set(result.shared_table_names()), set(result.shared_headline_names())
    return {"audience": check_audience(audience), "private_data": True,
            "shared_tables": [n for n in tables if n in names],
            "shared_headline": [k for k in headline if k in keys]}


def audience_of(report: Mapping[str, Any]) -> str:
    """A report's audience; reports made before the rule are full reports, so confidential when private."""
    sharing = report.get("sharing") or {}
    if sharing.get("audience") in AUDIENCES:
        return sharing["audience"]
    return CONFIDENTIAL if private_report(report) else SHARED


def private_report(report: Mapping[str, Any]) -> bool:
    """Whether a saved report's data is private (its ``sharing`` record, else its data reference)."""
    sharing = report.get("sharing") or {}
    if "private_data" in sharing:
        return bool(sharing["private_data"])
    return (report.get("data") or {}).get("source") == "upload"


def is_confidential(report: Mapping[str, Any]) -> bool:
    """Whether a report holds numbers computed on private rows (and must say so on every page)."""
    return audience_of(report) == CONFIDENTIAL and private_report(report)


def withholds(report: Mapping[str, Any]) -> bool:
    """Whether a report is the shared report of private data (numbers were withheld from it)."""
    return audience_of(report) == SHARED and private_report(report)


def shared_copy(report: Mapping[str, Any]) -> dict:
    """The shared report of ``report``: on private data only the tables and headline numbers its ``sharing``
    record names, no figures, and only the tool's fixed words of ``extra``; public data unchanged."""
    out = dict(report)
    out.pop("confidential", None)
    sharing = dict(report.get("sharing") or {})
    if not private_report(report):
        out["sharing"] = {**sharing, "audience": SHARED}
        return out
    tables = set(sharing.get("shared_tables") or ())
    keys = set(sharing.get("shared_headline") or ())
    withheld_tables = [n for n in (report.get("tables") or {}) if n not in tables]
    withheld_numbers = [k for k in (report.get("headline") or {}) if k not in keys]
    out["tables"] = {n: r for n, r in (report.get("tables") or {}).items() if n in tables}
    out["headline"] = {k: v for k, v in (report.get("headline") or {}).items() if k in keys}
    out["headline_uncertainty"] = {k: v for k, v in (report.get("headline_uncertainty") or {}).items() if k in keys}
    out.pop("figures", None)
    out.pop("takeaway", None)      # its sentences quote headline numbers and subgroup counts of the private rows
    extra = {k: v for k, v in (report.get("extra") or {}).items() if k in PUBLIC_EXTRA}
    if extra:
        out["extra"] = extra
    else:
        out.pop("extra", None)
    out["sharing"] = {**sharing, "audience": SHARED, "withheld_tables": withheld_tables,
                      "withheld_headline": withheld_numbers, "note": WITHHELD_NOTE}
    return out


def for_audience(report: Mapping[str, Any], audience: str) -> dict:
    """``report`` (a full report) as ``audience`` receives it: the shared copy, or the full report marked
    confidential when its data is private."""
    if check_audience(audience) == SHARED:
        return shared_copy(report)
    out = dict(report)
    out["sharing"] = {**(report.get("sharing") or {}), "audience": CONFIDENTIAL}
    if private_report(report):
        out["confidential"] = CONFIDENTIAL_MARK
    return out


def confidential_geojson(text: str) -> str:
    """A GeoJSON document of numbers computed on private rows, with the confidential mark as a top-level member."""
    import json
    return json.dumps({"confidential": CONFIDENTIAL_MARK, **json.loads(text)})


def zip_readme(report: Mapping[str, Any]) -> str | None:
    """The README a CSV zip of ``report`` carries: the confidential mark, or what a shared report withheld
    (None for public data)."""
    if is_confidential(report):
        return CONFIDENTIAL_README
    if withholds(report):
        return WITHHELD_NOTE + "\n"
    return None
