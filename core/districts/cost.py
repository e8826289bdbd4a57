"""The district maps' cost model: how long plans, noisy runs and ensembles take, said before they start
(registered by ``core/districts/area.py``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from core.estimates import Work, fewer

#: The districts' section of the coefficients until the benchmark has fitted them on this machine.
DEFAULT_COSTS: dict[str, Any] = {
    "districts": {"fixed": 1.0, "per_run": 0.02, "per_step": 0.05, "per_district": 0.002}}


def estimate_districts(plan, data, costs) -> Work:
    """Chains x steps of ReCom (the plan generator's and each ensemble unit's chain), the noisy runs
    (the main study's and runs x splits of the ensemble), and the ensemble's random districts."""
    c = costs["districts"]
    params = plan.params
    steps = int(getattr(params, "steps", 0)) if plan.generator == "recom" else 0
    chains = 1 if steps else 0
    runs = int(plan.noise.runs)
    districts = 0
    ens = plan.ensemble
    if ens is not None:
        ens_steps = int(getattr(params, "steps", 40)) if steps else 40
        chains += len(ens.recom_units)
        steps_total = steps + len(ens.recom_units) * ens_steps
        runs += len(ens.splits) * int(ens.runs)
        districts = int(ens.n_square) + len(ens.disconn_units) * int(ens.n_disconn)
    else:
        steps_total = steps
    blocks = float(np.prod(plan.grid_fanouts)) if plan.data.source == "grid" else 20_000.0
    size = blocks / 4096.0
    seconds = float(c["fixed"]) + size * (float(c["per_run"]) * runs + float(c["per_step"]) * steps_total
                                          + float(c["per_district"]) * districts)
    parts = []
    if chains:
        parts.append(f"{chains} chain{'s' if chains != 1 else ''} x {steps_total // max(chains, 1):,} steps")
    parts.append(f"{runs:,} noisy runs")
    if districts:
        parts.append(f"{districts:,} random districts")
    tips = []
    if ens is not None and ens.runs > 8:
        tips.append(fewer("runs per split", int(ens.runs), 8, seconds, 0.6))
    if steps_total > 200:
        tips.append("Fewer ReCom steps: chains cost in proportion to their steps.")
    return Work(", ".join(parts), chains * max(steps_total, 1) + runs + districts, seconds, tuple(tips))


__all__ = ["DEFAULT_COSTS", "estimate_districts"]
