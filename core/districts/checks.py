"""Is a plan usable? Contiguity on the block rook graph and population balance within a chosen tolerance.

A district passes when it is one connected piece and its population is within ``tolerance_pct`` of the
ideal (total / k); a plan passes when every district does. Deviation = 100 (P_D - P/k) / (P/k).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.geography.adjacency import UnitAdjacency


def district_checks(adj: UnitAdjacency, population: np.ndarray, labels: np.ndarray,
                    tolerance_pct: float) -> pd.DataFrame:
    """One row per district: deviation from ideal (%), pieces, and pass/fail for contiguity and balance."""
    tol = float(tolerance_pct)
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"The balance tolerance must be a percentage of 0 or more; got {tolerance_pct!r}.")
    lab = np.asarray(labels, dtype=np.int64)
    k = int(lab.max()) + 1
    pop = np.bincount(lab, weights=np.asarray(population, dtype=float), minlength=k)
    ideal = pop.sum() / k
    deviation = 100 * (pop - ideal) / ideal if ideal > 0 else np.zeros(k)
    pieces = np.asarray(adj.n_components(lab))
    contiguous = pieces == 1
    balanced = np.abs(deviation) <= tol + 1e-12
    return pd.DataFrame({"district": np.arange(1, k + 1), "deviation_pct": deviation, "pieces": pieces,
                         "contiguous": contiguous, "balanced": balanced, "passes": contiguous & balanced})


def plan_check(checks: pd.DataFrame) -> dict:
    """Plan verdict from its district checks, with the reasons a failing plan fails."""
    bad_pieces = checks.loc[~checks["contiguous"], "district"].astype(int).tolist()
    bad_balance = checks.loc[~checks["balanced"], "district"].astype(int).tolist()
    return {"contiguous": not bad_pieces, "balanced": not bad_balance, "passes": not (bad_pieces or bad_balance),
            "max_abs_deviation_pct": float(checks["deviation_pct"].abs().max()),
            "not_contiguous": bad_pieces, "out_of_balance": bad_balance}


def check_warning(verdict: dict, tolerance_pct: float) -> str:
    """The sentence a page shows before a failing plan is used ("" when it passes)."""
    parts = []
    if verdict["not_contiguous"]:
        parts.append(f"districts {_listing(verdict['not_contiguous'])} are in more than one piece")
    if verdict["out_of_balance"]:
        parts.append(f"districts {_listing(verdict['out_of_balance'])} are more than {tolerance_pct:g}% from "
                     f"the ideal population (worst {verdict['max_abs_deviation_pct']:.2f}%)")
    return "" if not parts else "This plan fails the checks: " + "; ".join(parts) + "."


def _listing(ids: list[int], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
