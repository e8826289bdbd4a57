"""Small phrases for the uncertainty of a headline number (see ``Result.headline_uncertainty``).

Each area builds its statements from what its result already holds; these helpers only keep the
wording and the number format the same everywhere.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

__all__ = ["num", "sd_over", "interval", "SET_BY_PLAN", "CLOSED_FORM", "LEDGER_TOTAL"]

SET_BY_PLAN = "exact (set by the plan)"
CLOSED_FORM = "exact (closed form, no sampling)"
LEDGER_TOTAL = "exact (sum of the ledger's recorded spends)"


def num(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures (``nan`` spelled out)."""
    value = float(value)
    if not math.isfinite(value):
        return "not available"
    return f"{value:,.{digits}g}" if abs(value) >= 1e4 else f"{value:.{digits}g}"


def sd_over(values: Iterable[float], what: str, digits: int = 2) -> str:
    """"sd X over N <what>" (sample sd, ddof 1) or, for a single value, that nothing was measured."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return f"no {what} to measure a spread over"
    if arr.size == 1:
        return f"one {what.rstrip('s')} only: no spread measured"
    return f"sd {num(arr.std(ddof=1), digits)} over {arr.size} {what}"


def interval(low: float, high: float, label: str) -> str:
    """"<label> low-high" with both ends to three significant figures."""
    return f"{label} {num(low)}-{num(high)}"
