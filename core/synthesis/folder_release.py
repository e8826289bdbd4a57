"""A synthetic copy of a declared folder set: MST or AIM fitted from count tables of the parts, sampled in parts.

The data never gather in one place. :class:`FolderCounts` is :class:`core.synthesis.parts.PartCounts`
reading each part through the curator's declaration (:func:`core.intake.folder.part_codes`: trimmed,
merged, missing values by their policy, numbers binned), so every table a fit asks for is counted in
one pass over the parts, on this machine's workers or on the Dask cluster named by
``DASHBOARD_DASK_SCHEDULER``. The model is fitted here from those tables; the synthetic file is drawn in
parts (:func:`core.synthesis.parts.sample_in_parts`, one child generator per part) and each part is
written to the output folder by whoever draws it.

Publishing is the last step. The parts are drawn into a folder beside the output folder whose name
marks it unfinished (``_<out>.unfinished-<nonce>``: a name starting with "_" is a marker that
:func:`core.intake.folder.list_folder`, pyarrow and dask skip), and :func:`publish` renames it into place
(one rename when the output folder is new or empty). A run that fails or is cancelled removes its
unfinished folder; one killed from outside leaves it, still marked, for :func:`discard_unfinished`. A real
release (``core.releases.folder_copy_release``) publishes only after the ledger has committed it
(:func:`release_unpublished`, then :func:`publish`), so no synthetic file appears without its spend recorded. Progress counts the parts
read, the fit's rounds and the synthetic parts written on one bar (:class:`ReleaseProgress`).

The synthetic file's size is the model's own noisy total (MST's least-squares estimate of the row
count from its noisy marginals; AIM's minimum-variance total of its measurements): post-processing of
the measurements, so it costs nothing more, and the exact row count of the parts is never used, shown
or recorded. The ledger lists every spend of the fit (``core.synthesis.fit_ledger.record_fit``), adding
up to rho for the plan's (epsilon, delta); nothing in it or in the statement is counted from the data.
"""
from __future__ import annotations

import dataclasses
import glob
import math
import os
import secrets
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from core.contracts import Plan, digest_of, named_rng
from core.intake.folder import folder_labels, list_folder, part_codes, part_progress
from core.intake.schema import DataSchema
from core.privacy.accounting import rho_for_epsilon
from core.privacy.ledger import BudgetLedger
from core.synthesis.aim import planned_rounds
from core.synthesis.fit_ledger import record_fit
from core.synthesis.noise import SecureNoise, SeededNoise
from core.synthesis.parts import PartCounts, sample_in_parts
from core.synthesis.registry import SYNTHESIZERS
from core.synthesis.stratified import takes_progress

__all__ = ["FOLDER_METHODS", "FolderCounts", "FolderRelease", "FolderReleasePlan", "ReleaseProgress",
           "discard_unfinished", "fit_steps", "noisy_total", "plan_digest", "projected_folder_ledger", "publish",
           "release_folder", "release_unpublished", "unfinished_folders"]

FOLDER_METHODS = ("mst", "aim")
MAX_OUT_PARTS = 10_000
RELEASE = "Release: every privacy noise value was drawn by OpenDP's secure sampler."
SIMULATION = ("Simulation, not a release: the noise comes from a seeded generator so the numbers can be "
              "reproduced from the seed.")


class FolderCounts(PartCounts):
    """Count tables of a declared folder set: :class:`PartCounts` whose parts are cleaned by the schema
    before they are encoded with its public labels (:func:`core.intake.folder.folder_labels`)."""

    def __init__(self, folder, schema: DataSchema, *, n_jobs: int | None = None,
                 scheduler: str | None = None) -> None:
        super().__init__(folder, folder_labels(schema), n_jobs=n_jobs, scheduler=scheduler)
        self.schema = schema

    progress = None
    """``progress(done, total, message)`` for each count pass, part by part (set by the release)."""

    def count(self, cliques, progress=None) -> None:
        report = progress if progress is not None else self.progress
        super().count(cliques, progress=part_progress(report, "counted", f"count pass {self.passes + 1}: "))

    def part_reader(self):
        return partial(part_codes, schema=self.schema)


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
    staging: str = ""
    """The marked unfinished folder the parts wait in until :func:`publish` ("" once published)."""

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


UNFINISHED = ".unfinished-"
"""Between the output folder's name and a nonce in the name of the folder the parts are drawn into."""


def _out_path(plan: FolderReleasePlan) -> Path:
    return Path(str(plan.out_folder).strip()).expanduser()


def _check_nonce(nonce: str) -> str:
    nonce = str(nonce)
    if not nonce or not nonce.isalnum():
        raise ValueError("A release's nonce is a non-empty run of letters and digits.")
    return nonce


def unfinished_folders(out, nonce: str = "*") -> list[Path]:
    """The unfinished folders of the output folder ``out`` (``_<name>.unfinished-<nonce>`` beside it; every
    one of them with the default ``nonce``)."""
    out = Path(str(out).strip()).expanduser()
    tail = "*" if nonce == "*" else glob.escape(_check_nonce(nonce))
    return sorted(p for p in out.parent.glob(f"_{glob.escape(out.name)}{UNFINISHED}{tail}") if p.is_dir())


def discard_unfinished(out, nonce: str = "*") -> int:
    """Remove the unfinished folder(s) of ``out`` (a cancelled or failed release's parts: the one of
    ``nonce``, or all); how many went."""
    gone = 0
    for path in unfinished_folders(out, nonce):
        shutil.rmtree(path, ignore_errors=True)
        gone += not path.exists()
    return gone


def _fit_params(plan: FolderReleasePlan, method: str):
    """``method``'s default Params, with the plan's cap on AIM's rounds when it sets one."""
    params = SYNTHESIZERS[method].default_params()
    if method == "aim" and plan.aim_rounds:
        params = dataclasses.replace(params, max_rounds=plan.aim_rounds)
    return params


def fit_steps(plan: FolderReleasePlan, n_columns: int) -> int:
    """The progress steps of the fit: AIM's planned rounds (``aim_rounds`` or 16 per column), MST's one."""
    return planned_rounds(plan.aim_rounds, n_columns) if plan.method == "aim" else 1


class ReleaseProgress:
    """One bar for a folder release: the parts counted (``n_parts`` steps per pass), the fit (``fit``
    steps) and the synthetic parts written (``out_parts`` steps), each reported in its own words."""

    def __init__(self, progress, n_parts: int, fit: int, out_parts: int) -> None:
        self.progress = progress
        self.sizes = {"count": max(int(n_parts), 1), "fit": max(int(fit), 1), "write": max(int(out_parts), 1)}
        self.total = sum(self.sizes.values())

    def stage(self, name: str):
        """``progress(done, total, message)`` of stage ``name``, placed on the whole bar with its message."""
        if self.progress is None:
            return None
        names = list(self.sizes)
        offset, size = sum(self.sizes[n] for n in names[:names.index(name)]), self.sizes[name]

        def report(done: int, total: int, message: str = "") -> None:
            share = min(max(done / total, 0.0), 1.0) if total > 0 else 0.0
            self.progress(offset + int(round(share * size)), self.total, message)
        return report


def release_folder(plan: FolderReleasePlan, schema: DataSchema, folder, *, secure: bool = True,
                   seed: int | None = None, n_jobs: int | None = None, scheduler: str | None = None,
                   progress=None, publish_parts: bool = True, nonce: str | None = None) -> FolderRelease:
    """Fit ``plan.method`` on the parts of ``folder`` (read through ``schema``) and write the synthetic parts.

    ``secure`` draws every privacy noise value from OpenDP and the sampling seed from the operating
    system; otherwise ``seed`` drives both (a simulation). Counting and sampling run where
    :func:`core.parallel.map_trials` sends them (a Dask cluster when one is configured). The parts are
    drawn into a marked unfinished folder and renamed into the output folder at the end (module
    docstring; ``nonce`` names it, random by default); with ``publish_parts=False`` they stay there until
    :func:`publish`. ``progress`` may raise ``Cancelled``: the unfinished folder is then removed and
    nothing is published.
    """
    if not isinstance(schema, DataSchema):
        raise ValueError("release_folder takes the folder set's DataSchema.")
    if schema.name != plan.name:
        raise ValueError(f"The plan releases {plan.name!r} but the declaration is {schema.name!r}.")
    listing = list_folder(folder)
    out = _out_path(plan)
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
    bar = ReleaseProgress(progress, listing.n_parts, fit_steps(plan, len(source.labels)), plan.out_parts)
    source.progress = bar.stage("count")
    model = SYNTHESIZERS[plan.method].build(_fit_params(plan, plan.method))
    fitting = bar.stage("fit")
    extra = {"progress": fitting} if fitting is not None and takes_progress(model.fit) else {}
    model = model.fit(source, None, plan.rho, rng, noise=noise, **extra)
    if fitting is not None:
        fitting(1, 1, f"{SYNTHESIZERS[plan.method].label} fitted")
    n_rows = int(round(max(noisy_total(model), 0.0)))
    staging = out.parent / f"_{out.name}{UNFINISHED}{_check_nonce(nonce or secrets.token_hex(6))}"
    try:
        paths = sample_in_parts(model, n_rows, plan.out_parts, int(sample_seed), labels=source.labels,
                                folder=staging, n_jobs=n_jobs, scheduler=scheduler,
                                progress=part_progress(bar.stage("write"), "written", "synthetic "))
    except BaseException:                 # a failure or a cancel: nothing half-written is left behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    ledger = BudgetLedger()
    record_fit(ledger, model, plan.rho, f"{SYNTHESIZERS[plan.method].label} on the folder's parts")
    from core.cluster import scheduler_address
    where = "a Dask cluster" if scheduler_address(scheduler) else "this machine"
    statement = " ".join([RELEASE if secure else SIMULATION, ledger.statement(delta=plan.delta),
                          "Row count: the model's noisy total, not the real one.",
                          "Category lists: declared public by the curator (not read from the parts).",
                          "Each row of the parts is one person (neighbouring data sets differ by one row)."])
    result = FolderRelease(list(map(str, paths)), n_rows, ledger, statement, secure, plan, where,
                           staging=str(staging))
    result.summary = pd.DataFrame({"item": list(result.headline()) + ["counted and sampled on"],
                                   "value": [str(v) for v in result.headline().values()] + [where]})
    return publish(result) if publish_parts else result


def release_unpublished(plan: FolderReleasePlan, schema: DataSchema, folder, nonce: str, n_jobs: int | None = None,
                        scheduler: str | None = None, progress=None) -> FolderRelease:
    """A secure release whose parts wait in their marked unfinished folder (named by ``nonce``, so it can be
    removed should the job be stopped from outside): the computation of a folder release
    (``core.releases.folder_copy_release``), which publishes them (:func:`publish`) only once the ledger has
    committed the release."""
    return release_folder(plan, schema, folder, secure=True, n_jobs=n_jobs, scheduler=scheduler, progress=progress,
                          publish_parts=False, nonce=nonce)


def publish(result: FolderRelease) -> FolderRelease:
    """Move a release's parts from its unfinished folder into the output folder: one rename when the output
    folder is new or empty, else part by part; the release with its final paths. ValueError (the parts
    stay where they are, named in the message) when the output folder has meanwhile got Parquet files."""
    if not result.staging:
        return result
    staging, out = Path(result.staging), _out_path(result.plan)
    if out.exists() and any(out.glob("*.parquet")):
        raise ValueError(f"The output folder {out} got Parquet files while the release ran; the synthetic parts "
                         f"are in {staging}. Move them where they belong.")
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or not any(out.iterdir()):
        os.replace(staging, out)
    else:
        for path in sorted(staging.glob("*.parquet")):
            os.replace(path, out / path.name)
        shutil.rmtree(staging, ignore_errors=True)
    return dataclasses.replace(result, paths=[str(out / Path(p).name) for p in result.paths], staging="")


def _estimate_release(plan: FolderReleasePlan, data, costs):
    """One count pass over the parts, the fit (the synthesis cost model on the folder's rows: its data term
    also carries AIM's larger marginals on more rows) and the synthetic parts drawn and written. ``data``
    is the folder's :class:`core.intake.folder.FolderWork`."""
    from core.estimates import Tip, Work
    from core.intake.folder import FolderWork, folder_costs, parts_seconds
    from core.synthesis.cost import coefficients, fit_features, fit_seconds

    if not isinstance(data, FolderWork):
        raise ValueError("A folder release is estimated from its FolderWork (parts, rows, columns).")
    c = folder_costs(costs)
    dims = data.dims or (2,) * max(data.columns, 1)

    def seconds_for(method: str) -> float:
        coef = coefficients(costs, method)
        fit = fit_seconds(coef, fit_features(method, _fit_params(plan, method), data.rows, dims))
        written = FolderWork(plan.out_parts, data.rows, data.columns)
        return (float(c["fixed"]) + parts_seconds(data, float(c["count"]), costs) + fit
                + parts_seconds(written, float(c["write"]), costs, items=plan.out_parts))

    seconds = seconds_for(plan.method)
    label = SYNTHESIZERS[plan.method].label
    fit = f"fit {label}" + (f" in up to {fit_steps(plan, len(dims))} rounds" if plan.method == "aim" else "")
    sentence = (f"count {data.words()} in one pass, {fit}, draw and write {plan.out_parts} synthetic "
                f"part{'s' if plan.out_parts != 1 else ''}")
    tips = []
    if plan.method == "aim":
        tips.append(Tip("MST instead of AIM takes {}.", (seconds_for("mst"),)))
    from core.cluster import scheduler_address
    if not scheduler_address(None):
        tips.append("A Dask cluster (DASHBOARD_DASK_SCHEDULER) counts and writes the parts on its workers.")
    return Work(sentence, data.n_parts, seconds, tuple(tips))


def _register_estimate() -> None:
    from core.estimates import ESTIMATORS
    if FolderReleasePlan not in ESTIMATORS:
        ESTIMATORS.register(FolderReleasePlan, "synthetic copy of a folder set")(_estimate_release)


_register_estimate()


