"""Copy a fitted synthesizer's own ledger into a release's ledger, line by line.

AIM and GEM write one line per spend (the one-way marginals, every round's selection and every
round's measurement). A release's ledger keeps those lines, each labelled with what was fitted
(``"stratum Female · White: round 3: selection"``), so the release and the project ledger list every
spend. The copied lines add up to the budget the fit was given: rounding dust is folded into the
last line, and a share the fit left unspent gets a line of its own, so the total is never lower than
what was set aside. A synthesizer that keeps no ledger gets one summary line for its whole budget.
"""
from __future__ import annotations

import math

from core.privacy.ledger import BudgetLedger

DUST = 1e-9
"""Relative gap between the given budget and the fit's own total treated as float rounding."""


def record_fit(ledger: BudgetLedger, model, rho: float, label: str, *, measured: str = "every row",
               composition: str = "sequential", group: str | None = None, part: str | None = None) -> int:
    """Record what ``model`` spent out of ``rho`` in ``ledger``, every line prefixed by ``label``.

    ``composition``, ``group`` and ``part`` apply to every copied line (a stratum's lines share one
    part of the strata group, so they add up inside the stratum and the largest stratum counts).
    ``measured`` describes the summary line of a synthesizer without a ledger. Returns the number of
    lines written.
    """
    rho = float(rho)
    if not math.isfinite(rho) or rho <= 0:
        raise ValueError(f"The budget given to the fit must be a positive rho; got {rho}.")
    own = getattr(model, "ledger_", None)
    spends = own.spends if isinstance(own, BudgetLedger) else ()
    if not spends or any(s.composition != "sequential" or s.approximate for s in spends):
        # nothing to itemise (or structure a copy could not keep): the whole budget on one line
        ledger.spend(label, rho, "rho", composition, group, measured, part)
        return 1
    amounts = [s.amount for s in spends]
    gap = rho - math.fsum(s.rho for s in spends)
    if 0 < gap <= DUST * rho and spends[-1].unit == "rho":
        amounts[-1] += gap      # float rounding of the fit's split: the last line carries it
        gap = 0.0
    for s, amount in zip(spends, amounts):
        ledger.spend(f"{label}: {s.label}", amount, s.unit, composition, group, s.measured, part)
    if gap > 0:
        ledger.spend(f"{label}: budget set aside but not spent", gap, "rho", composition, group,
                     "nothing (counted all the same: the fit was given this budget)", part)
    return len(spends) + (gap > 0)
