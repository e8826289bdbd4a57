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
from core.contracts import Plan, finite_number, param

GUARANTEES = {
    "pure_dp": "pure DP (Thm 7)",
    "approx_dp": "approximate DP (Thm 8)",
    "zeta": "max-information zeta (Thm 6)",
    "k_records": "k records in the clear (derived)",
}
DP_GUARANTEES = ("pure_dp", "approx_dp")
#: The largest inputs the calculator takes: beyond any real guarantee or population, short of the
#: float overflow that would turn the formulas' answers into infinities.
MAX_THEORY_EPSILON = 1e3
MAX_THEORY_ZETA = 1e15
MAX_THEORY_COUNT = 10**15


@dataclass(frozen=True)
class TheoryPlan(Plan):
    """Every input of the theory calculator (labels and the ranges the page offers declared with each
    field; ``__post_init__`` accepts the wider ranges the formulas allow)."""
    guarantee: str = param("pure_dp", label="Guarantee", choices=GUARANTEES, kind="select")
    epsilon: float = param(0.01, label="epsilon", low=1e-5, high=1.0)
    delta: float = param(0.0, label="delta", low=0.0, high=1e-3)
    zeta: float = param(10.0, label="zeta (nats)", low=0.0, high=1e7)
    k_records: int = param(10, label="k records in the clear", low=1, high=10**7)
    n: int = param(200_000, label="n, people (audit view |X|; production 2N)", low=100, high=10**10)
    alpha: float = param(0.5, label="alpha", low=0.01, high=2.0)
    beta: float = param(0.05, label="beta", low=0.001, high=0.5)
    n_groups: int = param(10, label="number of subgroups |C|", low=1, high=10**6)
    size: int = param(10_000, label="subgroup size to certify, people", low=1, high=10**10)

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
        if self.epsilon > MAX_THEORY_EPSILON or self.zeta > MAX_THEORY_ZETA:
            raise ValueError(f"epsilon must be at most {MAX_THEORY_EPSILON:g} and zeta at most "
                             f"{MAX_THEORY_ZETA:g}; larger values certify nothing more.")
        for name, low in (("k_records", 1), ("n", 2), ("n_groups", 1), ("size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not low <= value <= MAX_THEORY_COUNT or int(value) != value:
                raise ValueError(f"{name.replace('_', ' ')} must be a whole number from {low} to "
                                 f"{MAX_THEORY_COUNT:.0e}; got {value!r:.40}.")


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
