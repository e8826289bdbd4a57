"""Small phrases for the uncertainty of a headline number (see ``Result.headline_uncertainty``).

Each area builds its statements from what its result already holds; these helpers only keep the
wording and the number format the same everywhere.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

__all__ = ["num", "sd_over", "interval", "rounding_step", "round_to_uncertainty", "rounded", "with_interval", "SET_BY_PLAN",
           "CLOSED_FORM", "LEDGER_TOTAL"]

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


def rounding_step(half_width: float) -> float:
    """The place a number is rounded to when its 95% interval has this half width: the decade of the
    half width's first significant figure, one decade finer when that figure is 1 (so 42 rounds to tens,
    14 to units, 0.3 to tenths). A zero or unknown half width gives 0 (nothing to round to)."""
    half_width = abs(float(half_width))
    if not math.isfinite(half_width) or half_width == 0:
        return 0.0
    exponent = math.floor(math.log10(half_width))
    if half_width / 10 ** exponent < 2:
        exponent -= 1
    return 10.0 ** exponent


def round_to_uncertainty(value: float, half_width: float) -> float:
    """``value`` rounded to ``rounding_step(half_width)``; unchanged when there is no step."""
    step = rounding_step(half_width)
    if step == 0 or not math.isfinite(float(value)):
        return float(value)
    return float(np.round(float(value) / step) * step)


def rounded(value: float, low: float, high: float) -> str:
    """``value`` as text, rounded to what its 95% interval ``low``-``high`` supports (two decimals when the
    interval is unknown or empty); a minus sign, not a hyphen."""
    half = (float(high) - float(low)) / 2
    step = rounding_step(half)
    decimals = max(0, -int(math.floor(math.log10(step)))) if step else 2
    return f"{round_to_uncertainty(value, half):,.{decimals}f}".replace("-", "\u2212")


def with_interval(value: float, low: float, high: float, unit: str = "", short: bool = False) -> str:
    """"value unit (95% interval low to high)" with all three rounded to what the interval supports;
    ``short`` leaves out the words "95% interval" (for a table whose header says it)."""
    unit = f" {unit}" if unit else ""
    words = "" if short else "95% interval "
    return f"{rounded(value, low, high)}{unit} ({words}{rounded(low, low, high)} to {rounded(high, low, high)})"
