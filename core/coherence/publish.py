"""Publishing an audited release algorithm's output on the whole data set, with the ledger of its spends.

After an audit a curator may release the algorithm once, on every row of the file (the audit only ever
ran it on halves of a sample). Two paths share one procedure:

* ``secure=True`` (the release path): every privacy noise value comes from OpenDP's samplers
  (``core.privacy.secure`` for the noisy tables, ``core.synthesis.noise.SecureNoise`` for the
  synthesizers), so the output cannot be reproduced;
* ``secure=False`` (a simulation): the same procedure with seeded noise from ``plan.seed``, so the
  numbers can be reproduced; it publishes nothing.

The ledger is in the algorithm's own unit: epsilon for the Laplace table, rho (zCDP) for the Gaussian
table and the synthesizers. Algorithms without a differential privacy guarantee are refused. When the
plan's data declare up to k rows per person, the noise covers a whole person (the tables' sensitivity
times k, the synthesizers fitted at rho / k^2) and the ledger states the per-person amounts and the unit.

What leaves this module is the release itself (noisy counts or synthetic rows) and its spends: no exact
count of the private table. A pooled synthesizer therefore pays ``count_share`` of its budget for a
noisy row count; a stratified one keeps the audited algorithm's declaration that stratum sizes (and so
the row count) are public.
"""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from core.coherence.plan import DEFAULT_LENS, AuditPlan, ReleaseChoice
from core.coherence.releases import (DP_KINDS, MAX_TABLE_CELLS, NEIGHBOURS, RELEASES, AuditSchema, SynthesizerRelease,
                                     encode_for_audit)
from core.coherence.run import load_frame, positive_value
from core.contracts import DataRef, Plan, Result, named_rng
from core.privacy.ledger import BudgetLedger
from core.privacy.protection import ProtectionUnit

SIMULATION_NOTE = ("Simulation, not a release: the noise comes from a seeded generator so the output can be "
                   "reproduced from the plan.")
RELEASE_NOTE = "Release: every privacy noise value was drawn by OpenDP's secure sampler."
NOT_PRIVATE = ("{label} has no differential privacy guarantee, so it cannot be released privately; "
               "choose a noisy table or a synthesizer.")


def refuse_if_not_private(choice: ReleaseChoice) -> None:
    """ValueError, in plain words, when the chosen algorithm carries no differential privacy guarantee."""
    if choice.build().privacy.kind not in DP_KINDS:
        raise ValueError(NOT_PRIVATE.format(label=RELEASES[choice.key].label))


@dataclass(frozen=True)
class PublishPlan(Plan):
    """One audited DP release run once on every row of ``data``.

    ``seed`` drives only the simulation path; ``count_share`` is the part of a pooled synthesizer's
    rho spent on its noisy row count (stratified synthesizers declare their sizes public instead).
    """
    data: DataRef = DataRef("cps")
    target: str = "income"
    positive: str | None = "50K+"
    lens: tuple[str, ...] = DEFAULT_LENS["cps"]
    release: ReleaseChoice = field(default_factory=lambda: ReleaseChoice("laplace_table"))
    seed: int = 0
    count_share: float = 0.1

    def __post_init__(self) -> None:
        if not self.target:
            raise ValueError("Choose the target attribute of the released table.")
        if not self.lens:
            raise ValueError("Choose at least one lens column.")
        if self.target in self.lens:
            raise ValueError(f"The target {self.target!r} cannot also be a lens column.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ValueError(f"The seed must be a whole number from 0; got {self.seed!r}.")
        share = self.count_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not (
                math.isfinite(share) and 0 < share < 1):
            raise ValueError(f"The share of budget for the row count must lie strictly between 0 and 1; got {share!r}.")
        refuse_if_not_private(self.release)

    @classmethod
    def from_audit(cls, plan: AuditPlan, choice: ReleaseChoice, seed: int | None = None) -> "PublishPlan":
        """The release of ``choice`` with the audit's data, target and lens (and seed unless given)."""
        return cls(plan.data, plan.target, plan.positive, plan.lens, choice,
                   plan.seed if seed is None else int(seed))


@dataclass
class PublishResult(Result):
    """The released output (noisy table or synthetic rows, with category labels) and what it spent."""
    plan: PublishPlan
    table: pd.DataFrame
    budget: BudgetLedger
    statement: str
    secure: bool
    kind: str
    created_utc: str

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"release": self.table, "ledger": self.budget.to_frame()}

    def ledger(self):
        """The spends of a release (None for a seeded simulation, which publishes nothing)."""
        return self.budget if self.secure else None

    def csv_name(self) -> str:
        stem = "noisy_table" if self.kind == "table" else "synthetic_rows"
        return f"{stem}_{self.plan.release.key}{'' if self.secure else '_simulation'}.csv"


def trial_ledger(choice: ReleaseChoice, label: str | None = None,
                 protection: ProtectionUnit | None = None) -> BudgetLedger | None:
    """What one run of ``choice`` costs, in its own unit (None for an algorithm without a DP guarantee).

    The amount is per person (``protection``: the data's unit, ``ProtectionUnit.of(plan.data)``); with
    up to k rows per person the line says so."""
    g = choice.build().privacy
    if g.kind not in DP_KINDS:
        return None
    ledger = BudgetLedger()
    name = label or RELEASES[choice.key].label
    neighbours = NEIGHBOURS.get(g.neighbour, g.neighbour)
    if g.kind == "pure_dp":
        ledger.spend(name, g.epsilon, "epsilon", measured=f"one run ({neighbours} neighbours)")
    else:
        ledger.spend(name, g.rho, "rho", measured=f"one run ({neighbours} neighbours)")
    return (protection or ProtectionUnit()).person_ledger(ledger, scale=False)


def sweep_ledger(choices, protection: ProtectionUnit | None = None) -> BudgetLedger | None:
    """One trial of an epsilon sweep: every swept epsilon run once (None when nothing is private)."""
    ledger = BudgetLedger()
    for c in choices:
        one = trial_ledger(c, f"{RELEASES[c.key].label}, {c.build().epsilon_word} {c.params.epsilon:g}",
                           protection)
        for s in one.spends if one is not None else ():
            ledger.spend(s.label, s.amount, s.unit, measured=s.measured)
    return ledger if len(ledger) else None


def simulation_label(choice: ReleaseChoice, trials: int) -> str:
    """How the ledger page names an audit run, e.g. 'audit of Noisy table (Laplace), 60 seeded trials (simulation)'."""
    return f"audit of {RELEASES[choice.key].label}, {int(trials)} seeded trials (simulation)"


# --------------------------------------------------------------------------------------------------
# The release
# --------------------------------------------------------------------------------------------------

def _schema(plan: PublishPlan, frame: pd.DataFrame, strata: tuple[str, ...]):
    columns = list(dict.fromkeys([*plan.lens, plan.target, *strata]))
    codes, domain, labels = encode_for_audit(frame, columns)
    tlabels = labels[plan.target]
    positive = positive_value(frame, plan.target, plan.positive)
    if positive is None:
        if len(tlabels) != 2:
            raise ValueError(f"Target {plan.target!r} has {len(tlabels)} values; choose the positive value.")
        positive = tlabels[-1]
    return codes, AuditSchema(domain, labels, tuple(plan.lens), plan.target, tlabels.index(positive),
                              ProtectionUnit.of(plan.data))


def _noisy_table(release, codes: pd.DataFrame, schema: AuditSchema, secure: bool, rng) -> tuple[pd.DataFrame, float]:
    """Noisy counts over every lens cell of the public domain x (target other, target positive), labelled.

    The audit's table also has a slot per lens column for a suppressed value; nothing is suppressed
    here, so those cells are left out (they are not measured and cost nothing)."""
    sizes = tuple(int(schema.domain[c]) for c in schema.lens)
    n_cells = int(np.prod(sizes, dtype=np.float64))
    if n_cells * 2 > MAX_TABLE_CELLS:
        raise ValueError(f"The lens has {n_cells:,} cells; a released table is limited to {MAX_TABLE_CELLS // 2:,}. "
                         "Choose fewer or coarser lens columns.")
    cell = np.ravel_multi_index(tuple(codes[c].to_numpy(np.int64) for c in schema.lens), sizes)
    y = (codes[schema.target].to_numpy(np.int64) == schema.positive_code).astype(np.int64)
    counts = np.bincount(cell * 2 + y, minlength=n_cells * 2).reshape(n_cells, 2).astype(float)
    mechanism, scale, sensitivity = release.secure_noise
    if secure:
        from core.privacy.secure import secure_privacy_cost, secure_release

        noisy = secure_release(counts, mechanism, scale)
        cost = secure_privacy_cost(mechanism, scale, sensitivity)
    else:
        noisy = counts + release.noise(counts.shape, rng)
        cost = 0.0
    del counts                                  # nothing exact leaves this function
    idx = np.unravel_index(np.arange(n_cells), sizes)
    out = {c: pd.Categorical.from_codes(i, categories=list(schema.labels[c])) for c, i in zip(schema.lens, idx)}
    pos = schema.labels[schema.target][schema.positive_code]
    out[f"noisy count, {schema.target} not {pos}"] = noisy[:, 0]
    out[f"noisy count, {schema.target} {pos}"] = noisy[:, 1]
    return pd.DataFrame(out), cost


def _synthetic(release: SynthesizerRelease, plan: PublishPlan, codes: pd.DataFrame, schema: AuditSchema,
               noise, rng, progress=None) -> tuple[pd.DataFrame, BudgetLedger]:
    from core.synthesis import StratifiedSynthesizer, decode_categories
    from core.synthesis.fit_ledger import record_fit
    from core.synthesis.stratified import takes_progress

    cols = release.columns_
    domain = {c: int(schema.domain[c]) for c in cols}
    rho = release.fit_rho              # per row: rho / k^2 with up to k rows per person, so rho holds per person
    fit_rng, sample_rng = rng.spawn(2)
    rows = codes[cols].reset_index(drop=True)
    if release.stratified:
        model = StratifiedSynthesizer(release.factory, release.strata, size_policy="public", n_jobs=1,
                                      labels=schema.labels)
        model.fit(rows, domain, rho, fit_rng, noise=noise, progress=progress)
        ledger = model.ledger_
        n_out = len(rows)                    # stratum sizes are declared public by this algorithm
    else:
        ledger = BudgetLedger()
        rho_count = plan.count_share * rho
        draw, sigma = noise.gaussian(1.0, rho_count, 1)
        n_out = int(round(max(len(rows) + float(draw[0]), 0.0)))
        ledger.spend("row count (Gaussian count)", rho_count, "rho", measured=f"one noisy row count, sigma {sigma:.3g}")
        model = release.factory()
        extra = {"progress": progress} if progress is not None and takes_progress(model.fit) else {}
        model = model.fit(rows, domain, rho - rho_count, fit_rng, noise=noise, **extra)
        # every spend of the fit (AIM and GEM: each round's selection and measurement), adding up to its share
        record_fit(ledger, model, rho - rho_count, f"{release.label} on all rows")
    ledger = schema.protection.person_ledger(ledger)     # the per-person amounts (unchanged at one row each)
    synth = model.sample(max(n_out, 0), sample_rng)[cols].reset_index(drop=True)
    return decode_categories(synth, schema.labels), ledger


def publish(plan: PublishPlan, data: bytes | None = None, *, secure: bool = True,
            progress=None) -> PublishResult:
    """Run ``plan.release`` once on every row of the plan's data.

    ``secure=True`` is a release (OpenDP noise, not reproducible); ``secure=False`` a seeded simulation
    from ``plan.seed``. ``data`` is the uploaded CSV's bytes for an upload. Algorithms without a DP
    guarantee raise ValueError. ``progress(done, total, message)`` hears a synthesizer's rounds and may
    raise ``Cancelled`` to stop before anything is returned.
    """
    if not isinstance(plan, PublishPlan):
        raise ValueError(f"publish takes a PublishPlan, not {type(plan).__name__}.")
    refuse_if_not_private(plan.release)
    release = plan.release.build()
    frame = load_frame(plan.data, data)
    codes, schema = _schema(plan, frame, tuple(release.strata))
    del frame
    release.bind(schema)
    if secure:
        from core.synthesis.noise import SecureNoise

        rng = np.random.default_rng(secrets.randbits(128))   # post-processing only; privacy noise is OpenDP's
        noise = SecureNoise()
    else:
        from core.synthesis.noise import SeededNoise

        rng = named_rng(plan.seed, "coherence publish")
        noise = SeededNoise(rng)
    g = release.privacy
    label = RELEASES[plan.release.key].label
    if release.kind == "table":
        table, opendp_cost = _noisy_table(release, codes, schema, secure, rng)
        stated = g.epsilon if g.kind == "pure_dp" else g.rho
        ledger = BudgetLedger()
        # never less than OpenDP's own privacy map says the draw cost
        ledger.spend(f"{label} on all rows", max(stated, opendp_cost), "epsilon" if g.kind == "pure_dp" else "rho",
                     measured=f"every lens cell x target ({NEIGHBOURS.get(g.neighbour, g.neighbour)} neighbours)")
        # the noise already covers a whole person (sensitivity times k): the amount is per person
        ledger = schema.protection.person_ledger(ledger, scale=False)
        kind, size_note = "table", "Every cell of the public lens domain is released, empty or not."
    elif isinstance(release, SynthesizerRelease):
        table, ledger = _synthetic(release, plan, codes, schema, noise, rng, progress)
        kind = "microdata"
        size_note = ("Row count: stratum sizes are declared public by this algorithm, so the output has the data's "
                     "row count." if release.stratified else
                     "Row count: the noisy count paid for above, not the real one.")
    else:   # pragma: no cover - every DP release of the registry is handled above
        raise ValueError(f"{label} has no release path here.")
    statement = " ".join([RELEASE_NOTE if secure else SIMULATION_NOTE, g.statement, ledger.statement(delta=1e-6),
                          size_note, "Category lists: the whole file's values, treated as a public schema.",
                          schema.protection.sentence()])
    return PublishResult(plan, table, ledger, statement, secure, kind,
                         datetime.now(timezone.utc).isoformat(timespec="seconds"))
