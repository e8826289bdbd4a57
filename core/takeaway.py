"""What a result says in a few words: the answer, the numbers that carry it, their units and meanings,
and the worst-off group.

A result may declare a :class:`Takeaway` (``Result.takeaway()``). Reports keep it as the ``takeaway``
member (:func:`takeaway_record`) so that a saved report, a pinned scenario and the stakeholder report
read the same words:

- ``answer``: the verdict or answer in sentences, each quoting numbers of the run that was made;
- ``verdict``: the verdict in one sentence, for a result that reaches one (an A/B report sets A's
  beside B's);
- ``key``: the headline names that carry the answer, in the order a reader should see them;
- ``units``: each headline number's unit in words (people, trials, share of trials...); a headline
  number without a declared unit gets one from its name (:func:`unit_of`);
- ``meaning``: for a headline number whose meaning depends on the plan (the loss it is measured in,
  the measure, the estimand), that meaning in words. Two scenarios whose meanings differ are shown
  side by side with both meanings and never subtracted (:func:`core.compare.headline_delta`);
- ``worst_off``: the worst-off group of each model or method (what -> group), with ``worst_off_rule``
  saying how worst is judged. Results leave group names out when they come from private data.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Takeaway", "takeaway_record", "takeaway_of_report", "unit_of", "UNIT_RULES", "NO_UNIT"]

NO_UNIT = "number (no unit)"


@dataclass(frozen=True)
class Takeaway:
    """What a result declares about its own numbers (see the module docstring); every part is optional."""

    answer: tuple[str, ...] = ()
    verdict: str = ""
    key: tuple[str, ...] = ()
    units: Mapping[str, str] = field(default_factory=dict)
    meaning: Mapping[str, str] = field(default_factory=dict)
    worst_off: Mapping[str, str] = field(default_factory=dict)
    worst_off_rule: str = ""


#: Units read from a headline number's name when its result declares none: (pattern, unit), first match wins.
UNIT_RULES: tuple[tuple[str, str], ...] = (
    (r"\(%\)|_pct$|\bpercent", "%"),
    (r"failure rate", "share of trials"),
    (r"\btvd\b", "total variation distance (0 to 1)"),
    (r"eta_hat", "average loss"),
    (r"group error", "share of people misclassified"),
    (r"error sd|abs.district.error|district error", "people"),
    (r"\bgamma\b|subgroup size", "people"),
    (r"\brows\b", "rows"),
    (r"\btrials\b", "trials"),
    (r"\bleaves\b", "units of the geography"),
    (r"\bstrata\b", "strata"),
    (r"\bdistricts\b", "districts"),
    (r"plans", "plans"),
    (r"cut.edges", "edges between units"),
    (r"kappa", "agreement beyond chance (-1 to 1)"),
    (r"\bpeople\b", "people"),
    (r"\bpairs\b", "pairs"),
    (r"\bcards\b", "cards"),
    (r"multiplier", "times"),
    (r"\brho\b", "rho (zCDP)"),
    (r"epsilon|budget", "epsilon"),
    (r"utility loss", "share of the original ranking's utility lost"),
    (r"\bap at k", "average precision (0 to 1)"),
    (r"selection rate", "ratio to the group's share of everybody (1 is parity)"),
    (r"\bfpr\b", "false-positive rate (0 to 1)"),
    (r"\btpr\b", "true-positive rate (0 to 1)"),
    (r"\brate\b|share", "share (0 to 1)"),
    (r"unfairness", "unfairness (the frontier's own measure)"),
    (r"\berror\b", "share of people misclassified"),
    (r"\bmean\b", "units of the column"),
)


def unit_of(name: str, declared: Mapping[str, str] | None = None) -> str:
    """The unit of headline number ``name``: the declared one, else the first :data:`UNIT_RULES` match, else
    :data:`NO_UNIT`: never empty."""
    if declared and declared.get(name):
        return str(declared[name])
    low = str(name).lower()
    for pattern, unit in UNIT_RULES:
        if re.search(pattern, low):
            return unit
    return NO_UNIT


def _texts(values: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items() if v is not None and str(v).strip()}


def takeaway_record(result: Any) -> dict:
    """The ``takeaway`` member of a result's report: its declared :class:`Takeaway` with a unit for every
    headline number (declared or from :func:`unit_of`)."""
    take = result.takeaway() if hasattr(result, "takeaway") else None
    take = take if isinstance(take, Takeaway) else Takeaway()
    headline = result.headline()
    units = {str(k): unit_of(str(k), take.units) for k in headline}
    return {"answer": [str(s) for s in take.answer], "verdict": str(take.verdict), "key": [str(k) for k in take.key if k in headline],
            "units": units, "meaning": _texts(take.meaning), "worst_off": _texts(take.worst_off),
            "worst_off_rule": str(take.worst_off_rule)}


def takeaway_of_report(report: Mapping[str, Any]) -> dict:
    """A report's takeaway (empty parts for a report saved before it had one, or a malformed one)."""
    record = report.get("takeaway")
    record = record if isinstance(record, Mapping) else {}
    answer = record.get("answer")
    key = record.get("key")
    return {"answer": [str(s) for s in answer] if isinstance(answer, list) else [],
            "verdict": str(record.get("verdict") or ""),
            "key": [str(k) for k in key] if isinstance(key, list) else [],
            "units": _texts(record.get("units") if isinstance(record.get("units"), Mapping) else {}),
            "meaning": _texts(record.get("meaning") if isinstance(record.get("meaning"), Mapping) else {}),
            "worst_off": _texts(record.get("worst_off") if isinstance(record.get("worst_off"), Mapping) else {}),
            "worst_off_rule": str(record.get("worst_off_rule") or "")}
