"""The theory calculator: subgroup size gamma a guarantee certifies, and the inverses, as a plan.

Given a guarantee (pure DP, approximate DP, a max-information bound zeta, or k records published
in the clear) and (n, alpha, beta, |C|), it returns gamma in both constant modes, the certified
alpha and the largest epsilon for one subgroup size, and gamma against epsilon for the chart.
Formulas are those of ``core.coherence.theory`` (coherence spec Sec. 3).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

import core.coherence.theory as theory
from core.contracts import Plan, finite_number

GUARANTEES = {
    "pure_dp": "pure DP (Thm 7)",
    "approx_dp": "approximate DP (Thm 8)",
    "zeta": "max-information zeta (Thm 6)",
    "k_records": "k records in the clear (derived)",
}
DP_GUARANTEES = ("pure_dp", "approx_dp")


@dataclass(frozen=True)
class TheoryPlan(Plan):
    """Every input of the theory calculator."""
    guarantee: str = "pure_dp"
    epsilon: float = 0.01
    delta: float = 0.0
    zeta: float = 10.0
    k_records: int = 10
    n: int = 200_000
    alpha: float = 0.5
    beta: float = 0.05
    n_groups: int = 10
    size: int = 10_000

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"Choose a guarantee among {list(GUARANTEES)}; got {self.guarantee!r}.")
        for name in ("epsilon", "delta", "zeta", "alpha", "beta"):
            finite_number(getattr(self, name), name)
        if not self.epsilon > 0:
            raise ValueError("epsilon must be positive.")
        if not 0 <= self.delta < 1:
            raise ValueError("delta must lie in [0, 1).")
        if self.zeta < 0:
            raise ValueError("zeta (nats) must be non-negative.")
        if not 0 < self.alpha <= 2:
            raise ValueError("alpha must lie in (0, 2].")
        if not 0 < self.beta < 1:
            raise ValueError("beta must lie strictly between 0 and 1.")
        for name, low in (("k_records", 1), ("n", 2), ("n_groups", 1), ("size", 1)):
            value = getattr(self, name)
            if int(value) != value or value < low:
                raise ValueError(f"{name.replace('_', ' ')} must be a whole number of at least {low}.")


def gamma_for(plan: TheoryPlan, mode: str, *, alpha: float | None = None,
              epsilon: float | None = None) -> theory.TheoryResult:
    """gamma of ``plan``'s guarantee in one constant mode, optionally at another alpha or epsilon."""
    a = plan.alpha if alpha is None else alpha
    e = plan.epsilon if epsilon is None else epsilon
    if plan.guarantee == "pure_dp":
        return theory.gamma_pure_dp(e, plan.n, a, plan.beta, plan.n_groups, constants=mode)
    if plan.guarantee == "approx_dp":
        return theory.gamma_approx_dp(e, plan.delta, plan.n, a, plan.beta, plan.n_groups, constants=mode)
    if plan.guarantee == "zeta":
        return theory.gamma_from_zeta(plan.zeta, a, plan.beta, plan.n_groups, constants=mode)
    half = plan.n // 2
    z = theory.zeta_description_length(theory.log_binomial(half, min(plan.k_records, half)), plan.beta,
                                       plan.n_groups)
    return theory.gamma_from_zeta(z, a, plan.beta, plan.n_groups, constants=mode)


@dataclass
class TheoryOutcome:
    """The calculator's answer: one row per constant mode, and gamma against epsilon (DP only)."""
    summary: pd.DataFrame
    gamma_curve: pd.DataFrame
    delta_cap: float | None


def calculate(plan: TheoryPlan) -> TheoryOutcome:
    """gamma, certified alpha at ``plan.size`` and the largest epsilon there, in both constant modes."""
    rows = []
    for mode in theory.CONSTANTS:
        res = gamma_for(plan, mode)
        ca = theory.certified_alpha(plan.size, lambda a, mode=mode: gamma_for(plan, mode, alpha=a), mode)
        me = theory.max_epsilon(plan.size, plan.n, plan.alpha, plan.beta, plan.n_groups, constants=mode,
                                mechanism=plan.guarantee) if plan.guarantee in DP_GUARANTEES else None
        rows.append({"constants": mode, "gamma": res.gamma, "binding": res.binding, "zeta": res.zeta,
                     "note": res.reason, "certified_alpha": ca, "max_epsilon": me})
    curve = pd.DataFrame(columns=["epsilon", "constants", "gamma"])
    if plan.guarantee in DP_GUARANTEES:
        grid = np.geomspace(1e-4, 0.5 if plan.guarantee == "approx_dp" else 1.0, 40)
        curve = pd.DataFrame([{"epsilon": float(e), "constants": mode,
                               "gamma": gamma_for(plan, mode, epsilon=float(e)).gamma}
                              for e in grid for mode in theory.CONSTANTS]).dropna().reset_index(drop=True)
    cap = theory.delta_cap(plan.epsilon, plan.n, plan.beta, plan.n_groups) if plan.guarantee == "approx_dp" else None
    return TheoryOutcome(pd.DataFrame(rows), curve, cap)
