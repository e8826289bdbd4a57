"""A synthetic data set fitted on every row, with the ledger of what it spent.

Two paths share one procedure. The seeded path draws its noise from ``core.privacy.mechanisms``
through the plan's seed: reproducible, and labelled a simulation. The secure path
(``secure=True``) draws every privacy noise value from OpenDP (``core.privacy.secure``): that is a
release. Nothing confidential enters the ledger or the statement: the row count of the output is
public only when declared so; otherwise it is the noisy count the release paid for.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.contracts import Progress, named_rng
from core.privacy.accounting import rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.privacy.protection import ProtectionUnit
from core.synthesis.encoding import ColumnUnits, decode_categories, encode_categories, to_units
from core.synthesis.fit_ledger import record_fit
from core.synthesis.noise import SecureNoise, SeededNoise
from core.synthesis.plan import SynthesisPlan
from core.synthesis.registry import SYNTHESIZERS
from core.synthesis.sweep import build_synthesizer, fit_progress, readable_ledger

SIMULATION = ("Simulation, not a release: the noise comes from a seeded generator so the numbers can be "
              "reproduced from the plan.")
RELEASE = "Release: every privacy noise value was drawn by OpenDP's secure sampler."
ADJACENCY = ("Neighbouring data sets differ by adding or removing one person; if instead one person's group "
             "may change (replace-one), a stratified release costs twice the budget.")


@dataclass
class SyntheticRelease:
    """The synthetic rows, their ledger and budget statement, and how they were drawn.

    ``data`` has the columns and dtypes of the prepared original: categories as labels, numeric columns
    in their units. ``binned`` is the same rows as category labels (numeric columns as their public
    bins), on which shares are counted; None means ``data`` itself.
    """

    data: pd.DataFrame
    ledger: BudgetLedger
    ledger_table: pd.DataFrame
    statement: str
    secure: bool
    method: str
    epsilon: float
    binned: pd.DataFrame | None = field(default=None, repr=False)

    def shares(self) -> pd.DataFrame:
        """One-way category shares of the synthetic data, numeric columns over their bins (releasable:
        computed from the release only)."""
        parts = []
        frame = self.data if self.binned is None else self.binned
        for col in frame.columns:
            counts = frame[col].value_counts(sort=False)
            total = max(int(counts.sum()), 1)
            parts.append(pd.DataFrame({"column": col, "category": [str(c) for c in counts.index],
                                       "share": counts.to_numpy() / total}))
        return pd.concat(parts, ignore_index=True)


def domain_note(plan: SynthesisPlan) -> str:
    if plan.data.is_upload:
        return "Category lists: declared public by the curator (not read as private information)."
    return "Category lists: the bundled data set's documented categories."


def make_release(plan: SynthesisPlan, frame: pd.DataFrame, *, units: dict[str, ColumnUnits] | None = None,
                 secure: bool = False, progress: Progress | None = None) -> SyntheticRelease:
    """Fit ``plan.release.method`` on every row of the prepared ``frame`` and draw the synthetic rows.

    Stratified: the strata's sizes are public (declared) or the noisy counts it paid for, and the
    output has their total. Pooled: under DP counts a Gaussian row count takes ``count_share`` of
    rho and sets the output size; with declared public sizes the real row count is public.
    The ledger lists every spend the synthesizer made (each round's selection and measurement for AIM
    and GEM), per stratum in parallel when stratified; its total is the plan's rho.
    Unit of protection: when the plan's data declare up to k rows per person, every mechanism runs at the
    per-row budget (rho / k^2) and the ledger states the per-person amounts, so the plan's epsilon holds
    per person (``core.privacy.protection``).
    The one fit runs in this process, so ``progress`` hears the synthesizer's rounds (AIM, GEM) and a
    ``Cancelled`` raised there stops the fit before anything is released.
    ``units`` (from ``core.synthesis.workflow.prepare_units``) return numeric columns to their units: a
    binned value is drawn uniformly within its public bin by the same generator that drew the rows, after
    them (post-processing of the release; no privacy noise).
    """
    sub = plan.release
    codes, domain, labels = encode_categories(frame[list(plan.columns)])
    unit = ProtectionUnit.of(plan.data)
    rho = unit.row_budget(rho_for_epsilon(sub.epsilon, plan.delta), "rho")   # per row: per person at k = 1
    if secure:
        # post-processing draws (rows from the fitted model) need no seed; the privacy noise is OpenDP's
        rng = np.random.default_rng(secrets.randbits(128))
        noise = SecureNoise()
    else:
        rng = named_rng(sub.seed, "release", int(round(sub.epsilon * 1e6)))
        noise = SeededNoise(rng)
    if sub.method == "stratified":
        model = build_synthesizer(plan, "stratified", labels=labels)
        model = model.fit(codes, domain, rho, rng, noise=noise, **fit_progress(model, progress, "fit 1 of 1"))
        n_out = len(codes) if plan.sizes_public else model.release_size()
        ledger = model.ledger_
        table = readable_ledger(ledger.to_frame(), plan.strata, labels, domain)
    else:
        ledger = BudgetLedger()
        rho_fit = rho
        n_out = len(codes)
        if not plan.sizes_public:
            rho_count = plan.count_share * rho
            draw, sigma = noise.gaussian(1.0, rho_count, 1)
            n_out = int(round(max(len(codes) + float(draw[0]), 0.0)))
            rho_fit = rho - rho_count
            ledger.spend("row count (Gaussian count)", rho_count, "rho", measured=f"one noisy row count, sigma {sigma:.3g}")
        model = SYNTHESIZERS[plan.synthesizer].build(plan.params)
        model = model.fit(codes, domain, rho_fit, rng, noise=noise, **fit_progress(model, progress, "fit 1 of 1"))
        # every spend of the fit (one-way marginals, each round's selection and measurement), adding up to rho_fit
        record_fit(ledger, model, rho_fit, f"{SYNTHESIZERS[plan.synthesizer].label} on all rows")
        table = ledger.to_frame()
    ledger = unit.person_ledger(ledger)
    if unit.grouped:
        table = readable_ledger(ledger.to_frame(), plan.strata, labels, domain) if sub.method == "stratified" \
            else ledger.to_frame()
    binned = decode_categories(model.sample(n_out, rng), labels)
    synth = to_units(binned, units or {}, rng)
    size_note = ("Row count: public, as declared." if plan.sizes_public else
                 "Row count: the noisy count paid for above, not the real one.")
    statement = " ".join([RELEASE if secure else SIMULATION, ledger.statement(delta=plan.delta), size_note,
                          domain_note(plan), ADJACENCY, unit.sentence()])
    return SyntheticRelease(synth, ledger, table, statement, secure, sub.method, sub.epsilon,
                            binned=binned if units else None)


def budget_statement_text(plan: SynthesisPlan, release: SyntheticRelease, log_statement: str = "") -> str:
    """The downloadable budget statement: the release's own ledger and, when given, every release so far.

    Only what the ledger holds is printed (labels, what was measured, amounts): never a private count.
    """
    lines = [release.statement, "",
             f"Method: {release.method}; synthesizer: {SYNTHESIZERS[plan.synthesizer].label}; "
             f"epsilon {release.epsilon:g}, delta {plan.delta:g}; size policy {plan.size_policy}; "
             f"columns {', '.join(plan.columns)}; strata {', '.join(plan.strata)}.",
             f"Rows released: {len(release.data):,}" + ("" if plan.sizes_public else " (a noisy count)") + ".", ""]
    if log_statement:
        lines += ["All releases from this data set:", log_statement, ""]
    cols = ["label", "measured", "amount", "unit", "composition", "group"]
    lines += [release.ledger_table[cols].to_string(index=False)]
    return "\n".join(lines)


def projected_release_ledger(plan: SynthesisPlan, epsilon: float, method: str) -> BudgetLedger:
    """What a secure synthetic release will spend in all, before it runs: rho_for_epsilon(epsilon, delta)
    over every measurement of the fit (its reservation in the project ledger; the commit then stores the
    fit's detailed spends, which never exceed it)."""
    out = BudgetLedger()
    out.spend("synthetic release (projected)", rho_for_epsilon(epsilon, plan.delta), "rho",
              measured=f"secure {method} synthetic data: every measurement of the fit")
    return out
