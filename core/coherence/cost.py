"""The coherence audit's cost model: how long an audit takes, said before it starts (registered by
``core/coherence/area.py``)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.estimates import Tip, Work, fewer

#: The audit's section of the coefficients until the benchmark has fitted them on this machine.
DEFAULT_COSTS: dict[str, Any] = {"coherence": {"fixed": 1.0, "per_fit": 0.05}}


def estimate_audit(plan, data, costs) -> Work:
    """Trials x adversaries x releases adversary fits (each null split scores again), each in proportion
    to the audited rows / 10,000; the epsilon sweep, when asked, adds its own trials."""
    c = costs["coherence"]
    trials, adv, rel = int(plan.trials), len(plan.adversaries), len(plan.releases)
    units = trials * adv * rel
    rows = plan.rows.size if plan.rows.size is not None else (len(data) if hasattr(data, "__len__") else 10_000)
    size = max(float(rows), 1.0) / 1e4
    splits = 1 + 0.25 * (int(plan.null_splits) - 1)
    extra = 0
    if plan.sweep is not None:
        extra = len(plan.sweep.epsilons) * int(plan.sweep.trials) * adv
    seconds = float(c["fixed"]) + float(c["per_fit"]) * (units * splits + extra) * size
    tips = []
    if trials > 20:
        tip = fewer("trials", trials, 20, seconds, 20 / trials)
        tips.append(replace(tip, text=tip.text + " (a PASS at beta 0.05 needs 59)."))
    if adv > 1:
        tips.append(fewer("adversaries", adv, 1, seconds, 1 / adv))
    if rows > 5_000:
        tips.append(Tip(f"Fewer audited rows: 5,000 instead of {int(rows):,} takes {{}}.",
                        (seconds * 5_000 / rows,)))
    sentence = f"{trials} trials x {adv} adversaries x {rel} releases = {units:,} adversary fits"
    if extra:
        sentence += f", plus {extra:,} for the epsilon sweep"
    return Work(sentence, units + extra, seconds, tuple(tips))


__all__ = ["DEFAULT_COSTS", "estimate_audit"]
