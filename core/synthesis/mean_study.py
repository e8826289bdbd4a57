"""The mean-estimation tab as one computation: simulated private means on N(mu_i, 1) data with the
strata's group sizes, the closed forms beside them, and the budget each choice spends.

Every draw comes from a named sub-stream of ``MeansPlan.seed`` (each epsilon's curves, the group
errors, the group means, each COINPRESS size), so a plan reproduces its tables exactly and adding an
epsilon leaves the others' numbers where they were.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from core.contracts import named_rng
from core.privacy.ledger import BudgetLedger
import core.synthesis.mean_estimation as me
from core.synthesis.plan import MeansPlan, mean_noise

COINPRESS_SIZES = (1000, 4000, 10000, 20000)


def group_means(plan: MeansPlan, k: int) -> np.ndarray:
    """The simulated true group means: spread x N(0, 1), clipped to [-R, R] (seeded by the plan)."""
    return np.clip(plan.spread * named_rng(plan.seed, "group means").normal(0, 1, k), -plan.R, plan.R)


def means_ledger(plan: MeansPlan, delta: float) -> BudgetLedger:
    """What publishing every group's mean (and the recombined mean) spends.

    The means spend, in parallel over the disjoint groups, the plan's noise's budget for its epsilon in
    that noise's unit (Laplace: the pure epsilon; Gaussian: the largest rho that is (epsilon, delta)-DP).
    DP weights add their own pure-epsilon count.
    """
    noise = mean_noise(plan.noise)
    ledger = BudgetLedger()
    ledger.spend("group means", noise.budget_for(plan.group_epsilon, delta), noise.unit,
                 composition="parallel", group="groups", part="every group", measured="one clipped mean per group")
    if plan.weights == "dp":
        ledger.spend("group sizes for the weights (Laplace counts)", plan.count_epsilon, "epsilon",
                     measured="noisy group counts")
    return ledger


def guarantee_text(plan: MeansPlan, delta: float) -> str:
    """The budget statement of the per-group comparison, from its ledger."""
    noise = mean_noise(plan.noise)
    ledger = means_ledger(plan, delta)
    budget = noise.budget_for(plan.group_epsilon, delta)
    per_group = (f"the full epsilon {plan.group_epsilon:g}" if noise.unit == "epsilon" else
                 f"{noise.label} noise at rho {budget:.3g}, which is ({plan.group_epsilon:g}, {delta:g})-DP")
    dp = f", plus epsilon {plan.count_epsilon:g} for the DP size counts" if plan.weights == "dp" else ""
    total = (f"{ledger.total('epsilon'):g}-DP" if ledger.is_pure() else
             f"({ledger.total('epsilon', delta):.4g}, {delta:g})-DP (rho {ledger.total('rho'):.4g})")
    fresh = BudgetLedger()
    for s in ledger.spends:
        fresh.spend(s.label, s.amount, s.unit, s.composition, s.group, s.measured, s.part)
    fresh.spend("a separate pooled mean", budget, noise.unit, measured="one clipped mean of everyone")
    fresh_total = (f"epsilon {fresh.total('epsilon'):g}" if fresh.is_pure()
                   else f"({fresh.total('epsilon', delta):.4g}, {delta:g})-DP")
    return (f"Every group's mean uses {per_group} (disjoint groups, parallel composition){dp}: {total} in "
            f"total. Publishing a separate pooled mean as well would cost {fresh_total}.")


@dataclass
class MeanStudy:
    """Tables of the mean-estimation tab and the few numbers it states."""

    curves: pd.DataFrame
    group_errors: pd.DataFrame
    population: dict
    coinpress: pd.DataFrame
    dirichlet: pd.DataFrame
    dirichlet_summary: dict
    summary: dict
    guarantee: str


def run_means(plan: MeansPlan, sizes: Sequence[int], delta: float) -> MeanStudy:
    """All of the tab's numbers for these group sizes (at least two non-empty groups)."""
    sizes = np.asarray([int(s) for s in sizes if s > 0], int)
    if sizes.size < 2:
        raise ValueError("Choose strata with at least two non-empty groups for the mean-estimation tab.")
    # each epsilon and each COINPRESS size draws from its own named stream: adding one never moves another
    curves = pd.concat([me.mean_estimation_curves(list(sizes), plan.R, plan.gamma, [eps], plan.runs,
                                                  named_rng(plan.seed, "curves", int(round(eps * 1e6))),
                                                  noise=plan.noise, delta=delta) for eps in plan.epsilons],
                       ignore_index=True)
    mus = group_means(plan, sizes.size)
    errors = me.group_error_table(list(sizes), list(mus), plan.R, plan.gamma, plan.group_epsilon, plan.runs,
                                  named_rng(plan.seed, "group errors"), plan.weights,
                                  plan.count_epsilon if plan.weights == "dp" else None,
                                  noise=plan.noise, delta=delta)
    population = dict(errors.attrs.pop("population"))
    coinpress = pd.concat([me.simulate_mixture_coinpress(n, plan.coinpress_alpha, plan.coinpress_k, plan.coinpress_runs,
                                                         named_rng(plan.seed, "coinpress", n)) for n in COINPRESS_SIZES],
                          ignore_index=True)
    dsummary, dtable = me.dirichlet_summary(sizes)
    n = int(sizes.sum())
    b1 = me.noise_budget(1.0, plan.noise, delta)
    sd1 = me.population_error_sd(sizes, plan.R, plan.gamma, b1, True, plan.noise)
    ratio = sd1 / me.population_error_sd(sizes, plan.R, plan.gamma, b1, False, plan.noise)
    lo, hi = me.cost_ratio_bounds(sizes.size, n, plan.R, plan.gamma)
    summary = {"cost_multiplier": float(ratio), "cost_bound_low": float(lo), "cost_bound_high": float(hi),
               "sampling_sd": float(1 / math.sqrt(n)), "stratified_sd_at_eps1": float(sd1)}
    return MeanStudy(curves, errors, population, coinpress, dtable, dsummary, summary, guarantee_text(plan, delta))
