"""A synthetic copy of a declared folder set: MST or AIM fitted from count tables of the parts, sampled in parts.

The data never gather in one place. :class:`FolderCounts` is :class:`core.synthesis.parts.PartCounts`
reading each part through the curator's declaration (:func:`core.intake.folder.part_codes`: trimmed,
merged, missing values by their policy, numbers binned), so every table a fit asks for is counted in
one pass over the parts, on this machine's workers or on the Dask cluster named by
``DASHBOARD_DASK_SCHEDULER``. The model is fitted here from those tables; the synthetic file is drawn in
parts (:func:`core.synthesis.parts.sample_in_parts`, one child generator per part) and each part is
written to the output folder by whoever draws it.

The synthetic file's size is the model's own noisy total (MST's least-squares estimate of the row
count from its noisy marginals; AIM's minimum-variance total of its measurements): post-processing of
the measurements, so it costs nothing more, and the exact row count of the parts is never used, shown
or recorded. The ledger lists every spend of the fit (``core.synthesis.fit_ledger.record_fit``), adding
up to rho for the plan's (epsilon, delta); nothing in it or in the statement is counted from the data.
"""
from __future__ import annotations

import dataclasses
import math
import secrets
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from core.contracts import Plan, digest_of, named_rng
from core.intake.folder import folder_labels, list_folder, part_codes
from core.intake.schema import DataSchema
from core.privacy.accounting import rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.synthesis.counts import Clique, count_tables
from core.synthesis.fit_ledger import record_fit
from core.synthesis.noise import SecureNoise, SeededNoise
from core.synthesis.parts import PartCounts, sample_in_parts
from core.synthesis.registry import SYNTHESIZERS

__all__ = ["FOLDER_ACTION", "FOLDER_METHODS", "FolderCounts", "FolderRelease", "FolderReleasePlan", "noisy_total",
           "pending_release", "plan_digest", "projected_folder_ledger", "release_and_record", "release_folder"]

FOLDER_ACTION = "folder synthetic release"

FOLDER_METHODS = ("mst", "aim")
MAX_OUT_PARTS = 10_000
RELEASE = "Release: every privacy noise value was drawn by OpenDP's secure sampler."
SIMULATION = ("Simulation, not a release: the noise comes from a seeded generator so the numbers can be "
              "reproduced from the seed.")


def _count_clean_part(path: str, schema: DataSchema, labels: dict, cliques) -> dict[Clique, np.ndarray]:
    """Integer count tables of ``cliques`` over one part read through ``schema`` (runs where it is read)."""
    arr = part_codes(path, schema, labels)
    index = {c: j for j, c in enumerate(labels)}
    domain = {c: len(v) for c, v in labels.items()}
    return count_tables(arr, index, domain, cliques)


class FolderCounts(PartCounts):
    """Count tables of a declared folder set: :class:`PartCounts` whose parts are cleaned by the schema
    before they are encoded with its public labels (:func:`core.intake.folder.folder_labels`)."""

    def __init__(self, folder, schema: DataSchema, *, n_jobs: int | None = None,
                 scheduler: str | None = None) -> None:
        super().__init__(folder, folder_labels(schema), n_jobs=n_jobs, scheduler=scheduler)
        self.schema = schema

    def part_counter(self, cliques: Sequence[Clique]):
        return partial(_count_clean_part, schema=self.schema, labels=self.labels, cliques=cliques)


@dataclass(frozen=True)
class FolderReleasePlan(Plan):
    """A synthetic copy of the declared folder set ``name``: ``method`` ("mst" or "aim") at (``epsilon``,
    ``delta``), written as ``out_parts`` Parquet parts to ``out_folder``. ``aim_rounds`` caps AIM's rounds
    (0: its default, 16 per column)."""

    name: str
    method: str = "mst"
    epsilon: float = 1.0
    delta: float = 1e-6
    out_folder: str = ""
    out_parts: int = 4
    aim_rounds: int = 0

    def __post_init__(self) -> None:
        if not str(self.name).strip():
            raise ValueError("Name the declared folder set to release from.")
        if self.method not in FOLDER_METHODS:
            raise ValueError(f"method must be one of {list(FOLDER_METHODS)}, not {self.method!r}.")
        for what, value, low, high in (("epsilon", self.epsilon, 0.0, 100.0), ("delta", self.delta, 0.0, 0.1)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low < value <= high:
                raise ValueError(f"{what} must be a number above {low:g} and at most {high:g}, not {value!r}.")
        if isinstance(self.out_parts, bool) or not isinstance(self.out_parts, int) \
                or not 1 <= self.out_parts <= MAX_OUT_PARTS:
            raise ValueError(f"Write the synthetic file in 1 to {MAX_OUT_PARTS:,} parts, not {self.out_parts!r}.")
        if isinstance(self.aim_rounds, bool) or not isinstance(self.aim_rounds, int) or self.aim_rounds < 0:
            raise ValueError("aim_rounds is a whole number of rounds (0: AIM's default).")
        if not str(self.out_folder).strip():
            raise ValueError("Give the output folder the synthetic parts are written to.")

    @property
    def rho(self) -> float:
        return rho_for_epsilon(self.epsilon, self.delta)

    def label(self) -> str:
        return f"synthetic copy ({SYNTHESIZERS[self.method].label}), epsilon {self.epsilon:g}, delta {self.delta:g}"


@dataclass
class FolderRelease:
    """What a folder release made: the part files, their (noisy) row count, the ledger and its statement."""

    paths: list[str]
    n_rows: int
    ledger: BudgetLedger
    statement: str
    secure: bool
    plan: FolderReleasePlan
    where: str
    summary: pd.DataFrame = field(repr=False, default=None)

    def headline(self) -> dict:
        return {"synthesizer": SYNTHESIZERS[self.plan.method].label, "epsilon": self.plan.epsilon,
                "delta": self.plan.delta, "synthetic rows (noisy total)": self.n_rows,
                "parts written": len(self.paths), "output folder": self.plan.out_folder}


def noisy_total(model) -> float:
    """A fitted model's estimate of the row count, from its noisy measurements only: MST's ``n_estimate_``,
    AIM's model total. ValueError for a model without one."""
    if hasattr(model, "n_estimate_"):
        return float(model.n_estimate_)
    inner = getattr(model, "model_", None)
    if inner is not None and hasattr(inner, "total"):
        return float(inner.total)
    raise ValueError(f"{type(model).__name__} keeps no noisy total; release the folder with MST or AIM.")


def projected_folder_ledger(plan: FolderReleasePlan) -> BudgetLedger:
    """What the release will spend in all, before it runs (its reservation in the project ledger)."""
    out = BudgetLedger()
    out.spend("synthetic release (projected)", plan.rho, "rho",
              measured=f"{SYNTHESIZERS[plan.method].label} on a folder of parts: every measurement of the fit")
    return out


def plan_digest(plan: FolderReleasePlan, schema: DataSchema) -> str:
    """The digest a ledger entry carries: the plan and the declaration it reads the parts through."""
    return digest_of({"plan": plan.digest(), "schema": schema.digest()})


def release_folder(plan: FolderReleasePlan, schema: DataSchema, folder, *, secure: bool = True,
                   seed: int | None = None, n_jobs: int | None = None, scheduler: str | None = None,
                   progress=None) -> FolderRelease:
    """Fit ``plan.method`` on the parts of ``folder`` (read through ``schema``) and write the synthetic parts.

    ``secure`` draws every privacy noise value from OpenDP and the sampling seed from the operating
    system; otherwise ``seed`` drives both (a simulation). Counting and sampling run where
    :func:`core.parallel.map_trials` sends them (a Dask cluster when one is configured).
    """
    if not isinstance(schema, DataSchema):
        raise ValueError("release_folder takes the folder set's DataSchema.")
    if schema.name != plan.name:
        raise ValueError(f"The plan releases {plan.name!r} but the declaration is {schema.name!r}.")
    listing = list_folder(folder)
    out = Path(str(plan.out_folder).strip()).expanduser()
    if out.resolve() == Path(listing.folder) or Path(listing.folder) in out.resolve().parents:
        raise ValueError("Write the synthetic parts to a folder outside the private parts' folder.")
    if out.exists() and any(out.glob("*.parquet")):
        raise ValueError(f"The output folder {out} already holds Parquet files; choose an empty or new folder.")
    if secure:
        noise, sample_seed = SecureNoise(), secrets.randbits(128)
        rng = np.random.default_rng(secrets.randbits(128))
    else:
        if seed is None:
            raise ValueError("A seeded simulation needs a seed.")
        rng = named_rng(seed, "folder release")
        noise, sample_seed = SeededNoise(rng), named_rng(seed, "folder sample").integers(2**63)
    source = FolderCounts(listing.folder, schema, n_jobs=n_jobs, scheduler=scheduler)
    params = SYNTHESIZERS[plan.method].default_params()
    if plan.method == "aim" and plan.aim_rounds:
        params = dataclasses.replace(params, max_rounds=plan.aim_rounds)
    model = SYNTHESIZERS[plan.method].build(params)
    model = model.fit(source, None, plan.rho, rng, noise=noise)
    n_rows = int(round(max(noisy_total(model), 0.0)))
    paths = sample_in_parts(model, n_rows, plan.out_parts, int(sample_seed), labels=source.labels, folder=out,
                            n_jobs=n_jobs, scheduler=scheduler, progress=progress)
    ledger = BudgetLedger()
    record_fit(ledger, model, plan.rho, f"{SYNTHESIZERS[plan.method].label} on the folder's parts")
    from core.cluster import scheduler_address
    where = "a Dask cluster" if scheduler_address(scheduler) else "this machine"
    statement = " ".join([RELEASE if secure else SIMULATION, ledger.statement(delta=plan.delta),
                          "Row count: the model's noisy total, not the real one.",
                          "Category lists: declared public by the curator (not read from the parts).",
                          "Each row of the parts is one person (neighbouring data sets differ by one row)."])
    result = FolderRelease(list(map(str, paths)), n_rows, ledger, statement, secure, plan, where)
    result.summary = pd.DataFrame({"item": list(result.headline()) + ["counted and sampled on"],
                                   "value": [str(v) for v in result.headline().values()] + [where]})
    return result


def pending_release(plan: FolderReleasePlan, schema: DataSchema, page: str, nonce: str, label: str | None = None):
    """The project-ledger entry a folder release reserves: under ``dataset:<name>``, with the projected spend
    (``nonce`` makes each press its own release)."""
    from core.privacy.project_ledger import LedgerRelease, declared_key, release_key, spends_of
    digest = plan_digest(plan, schema)
    return LedgerRelease(declared_key(schema.name), release_key(FOLDER_ACTION, digest, nonce), "release", page,
                         FOLDER_ACTION, label or plan.label(), digest, spends_of(projected_folder_ledger(plan)),
                         schema.name)


def release_and_record(ledger, plan: FolderReleasePlan, schema: DataSchema, folder, *, page: str = "command line",
                       n_jobs: int | None = None, scheduler: str | None = None, progress=None) -> FolderRelease:
    """A secure folder release through the project ledger: reserve the projected spend (refused over the
    cap), run, then commit the fit's detailed spends; a failure drops the reservation and spends nothing."""
    from core.privacy.project_ledger import spends_of
    rel = pending_release(plan, schema, page, secrets.token_hex(8))
    with ledger.reserved(rel) as reservation:
        result = release_folder(plan, schema, folder, secure=True, n_jobs=n_jobs, scheduler=scheduler,
                                progress=progress)
        ledger.commit(reservation, spends_of(result.ledger))
    return result
