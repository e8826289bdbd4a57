"""The budget allocation's cost model: how long a plan takes, said before it starts (registered by
``core/census/area.py``).

The allocation (analytic error, the split, ToyDown's seeded runs) works on every unit of the
geography once, so its seconds grow with the units: the product of the fan-outs of a stylised
geography, a fixed count for the Georgia census geography. Each optional tab (ToyDown against
TopDown-lite, the noise mechanisms compared, the published information) adds one allocation's worth.
"""
from __future__ import annotations

import math
from typing import Any

from core.estimates import Work

#: Units of the Georgia census geography the page loads (its blocks), counted as the model's size.
GEORGIA_UNITS = 20_000

#: The allocation's section of the coefficients until the benchmark has fitted them on this machine.
DEFAULT_COSTS: dict[str, Any] = {"census": {"fixed": 1.0, "per_unit": 0.1}}


def estimate_budget(plan, data, costs) -> Work:
    """``fixed + per_unit x units / 1e4`` for the allocation, once more for each tab asked for."""
    c = costs["census"]
    units = math.prod(plan.fanouts) if plan.geography == "stylised" else GEORGIA_UNITS
    tabs = [name for name in ("algorithms", "mechanisms", "public") if getattr(plan, name, None) is not None]
    one = float(c["per_unit"]) * units / 1e4
    seconds = float(c["fixed"]) + one * (1 + len(tabs))
    sentence = f"allocate the budget over {units:,} units" + (f", plus {len(tabs)} comparison tab"
                                                               f"{'s' if len(tabs) != 1 else ''}" if tabs else "")
    return Work(sentence, units, seconds)


__all__ = ["DEFAULT_COSTS", "GEORGIA_UNITS", "estimate_budget"]
