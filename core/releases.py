"""The one path every real release takes: pending ledger entry, reserve -> compute -> commit or drop ->
publish or discard.

A :class:`Release` describes one release before it runs: its kind, the pending entry of the project ledger
(data set, plan digest, planned spends, label), the computation, how to read the computed result's actual
spends, and what publishing or discarding it means. One builder per release kind makes it
(:data:`RELEASE_KINDS`), so pages, background jobs and the command line release the same thing.

The protocol, written once here:

1. the computation's arguments are prepared (nothing is reserved if that fails);
2. :meth:`ProjectLedger.reserve` checks the data set's cap and stores the entry as reserved in one
   transaction (refused: nothing reserved, nothing spent);
3. the computation runs (in this thread: :func:`run_release`; as a background job: :func:`submit_release`,
   whose completion hook, built by :func:`settle`, carries out the steps below in the server process);
4. success: the reservation is committed with the result's detailed spends (the ledger refuses spends
   above what was reserved, so accounting never under-reports), then the result is published; failure,
   cancel or a refused commit: the reservation is dropped and whatever the computation left is discarded.

Nothing is published before its commit. A process that dies between reserve and commit leaves the
reservation, which keeps counting until it expires: totals may over-state a spend, never miss one.
"""
from __future__ import annotations

import contextlib
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

from core.contracts import Cancelled, DataRef, Plan, digest_of
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import (DECLARED, LedgerRelease, ProjectLedger, Reservation, data_key,
                                         declared_key, release_key, spends_of)
from core.privacy.project_ledger import data_label as ledger_data_label
from core.report import data_ref_of
from core.census import release as census
from core.census.geography_data import load_geography
from core.coherence.publish import publish, trial_ledger
from core.fairness.private_pairs import COPY_PAGE, copy_release, release_synthetic_people
from core.intake.estimate import estimate_bounds, estimate_categories, estimate_input, planned_estimate_ledger
from core.privacy.protection import ProtectionUnit
from core.synthesis import folder_release as fr
from core.synthesis import workflow
from core.synthesis import mean_release
from core.synthesis.mean_release import MeanReleasePlan, projected_ledger
from core.synthesis.release import projected_release_ledger

__all__ = ["CANCELLED", "COMMITTED", "FAILED", "INTERACTIVE_WAIT", "NOTHING_RESERVED", "NOTHING_SPENT", "REFUSED",
           "RELEASE_KINDS", "RUNNING", "STILL_RESERVED", "WAITING", "Outcome", "Release", "audited_output_release",
           "cancel_release", "census_counts_release", "expiry_text", "folder_copy_release", "ledger_ref",
           "new_pairs_copy", "pairs_copy_release", "private_estimate_release", "release_digest", "release_entry",
           "release_when_free", "run_release", "secure_estimate", "secure_mean", "settle", "stratified_mean_release",
           "submit_release", "synthetic_data_release", "what_is_left"]

log = logging.getLogger(__name__)

RUNNING, COMMITTED, REFUSED, FAILED, CANCELLED = "running", "committed", "refused", "failed", "cancelled"
NOTHING_SPENT = "Nothing was released and nothing was spent: the reservation in the ledger was dropped."
NOTHING_RESERVED = "Nothing was released and nothing was spent (nothing was reserved)."
#: after a failure the ledger could not record: the reservation stays and counts until it expires
STILL_RESERVED = ("Nothing was released, but the ledger could not be written to drop its reservation: the "
                  "reservation still counts toward this data set's total until it expires{when}, after which "
                  "it stops counting by itself. Nothing was published, so nothing more needs undoing.")

#: seconds a release made in a page's run waits for another writer's lock on the ledger before it says so (a
#: try may then still block for the database's busy timeout, ten seconds on SQLite: under a minute in all)
INTERACTIVE_WAIT = 30.0
#: the progress message of a release kept waiting in the background while the ledger is locked
WAITING = "Waiting for the privacy ledger's database: another writer holds its lock."

# the release kinds (the ledger's action names)
CENSUS, SYNTHETIC, MEAN, AUDITED, PAIRS, FOLDER, ESTIMATE = (
    "noisy counts", "secure synthetic release", "stratified mean release", "audited release",
    "synthetic pair people", "folder synthetic release", "private estimate of public information")


# ------------------------------------------------------------------------------------------- the entry

def ledger_ref(plan: Plan) -> DataRef | None:
    """The data set a plan's releases spend from: its geography for a census plan (a district-plan
    upload still releases the geography's counts), else its data reference."""
    geography = getattr(plan, "geography", None)
    if isinstance(geography, str):
        return DataRef(geography)
    return data_ref_of(plan)


def release_digest(ref: DataRef | None, part: Any) -> str:
    """The digest of a release's data reference and its own plan part (see :func:`release_entry`)."""
    return digest_of({"data": ref, "release": part})


def release_entry(plan: Plan, page: str, action: str, label: str, ledger: BudgetLedger, *,
                  kind: str = "release", fresh: bool = False, data_label: str = "",
                  part: Any = None) -> LedgerRelease:
    """A release (or seeded simulation) for the project ledger, keyed on the action and the plan's digest;
    ``fresh`` adds a random nonce, for a real release (each press is a new release even with the same
    plan). The data set is ``data_key`` of the plan's data.

    ``part`` is what the release itself depends on (its own sub-plan, with simulation-only settings such
    as a seed or a number of seeded runs left out): the digest recorded is then that of the data
    reference and ``part``, so the same release made under other simulation settings is still recognised
    as a repeat. Without it the whole plan's digest is recorded (a simulation, keyed on its plan)."""
    ref = ledger_ref(plan)
    key = data_key(ref)
    digest = plan.digest() if part is None else release_digest(ref, part)
    # a declared data set is always labelled by its name, so every release of it reads the same everywhere
    shown = ledger_data_label(ref) if key.startswith(DECLARED) else (data_label or key)
    return LedgerRelease(key, release_key(action, digest, secrets.token_hex(8) if fresh else ""), kind, page,
                         action, label, digest, spends_of(ledger), shown)



# ------------------------------------------------------------------------------------------- the release

@dataclass(frozen=True)
class Release:
    """One real release before it runs, carrying its own accounting.

    ``entry`` is the pending ledger entry (planned spends: the most the computation may spend);
    ``compute(*args, progress=None)`` makes the result (a module-level function and picklable ``args``,
    so it can run in a job's process; ``args`` may be a function giving them, called once just before the
    reservation); ``spent(result)`` is the result's detailed ledger (None: the planned spends stand);
    ``publish(result)`` runs after the commit and returns what is shown (a ``ValueError`` keeps the
    result, with a notice); ``discard()`` removes what a computation that released nothing left behind."""

    kind: str
    entry: LedgerRelease
    compute: Callable = field(repr=False)
    args: tuple | Callable[[], tuple] = field(default=(), repr=False)
    spent: Callable[[Any], BudgetLedger] | None = field(default=None, repr=False)
    publish: Callable[[Any], Any] | None = field(default=None, repr=False)
    discard: Callable[[], None] | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.entry.kind != "release":
            raise ValueError("A release records a real release; seeded simulations are recorded apart.")

    @property
    def data_key(self) -> str:
        return self.entry.data_key

    @property
    def label(self) -> str:
        return self.entry.label

    def arguments(self) -> tuple:
        return tuple(self.args()) if callable(self.args) else tuple(self.args)


@dataclass(eq=False)
class Outcome:
    """What became of one release: ``state`` (running, committed, refused, failed, cancelled), the
    reservation (None when refused before one was made), the published ``result`` once committed, the
    ledger entry as committed, the ``error`` otherwise, and ``left``: in words, what became of the
    reservation. ``notice`` says a committed release could not be published."""

    release: Release
    reservation: Reservation | None = None
    state: str = RUNNING
    result: Any = field(default=None, repr=False)
    committed: LedgerRelease | None = None
    error: BaseException | None = None
    notice: str = ""
    left: str = ""

    @property
    def spends(self):
        """The spends committed in the ledger (none unless committed)."""
        return () if self.committed is None else self.committed.spends

    def value(self):
        """The published result of a committed release; otherwise its error is raised (the ledger's or the
        computation's ``ValueError``, ``Cancelled``, ...), for callers without a page to say it on."""
        if self.state == COMMITTED:
            if self.notice:
                raise ValueError(self.notice)
            return self.result
        if self.error is None:
            raise ValueError(f"The release of {self.release.label} has not finished.")
        raise self.error


def expiry_text(reservation: Reservation | None) -> str:
    """When a reservation stops counting by itself, as " (<time> UTC)" ("" when unknown)."""
    return f" ({reservation.expires_utc} UTC)" if reservation is not None and reservation.expires_utc else ""


def what_is_left(ledger: ProjectLedger, reservation: Reservation | None) -> str:
    """After a failed or cancelled release: whether its reservation was dropped, or (the ledger could not be
    written, e.g. its database was deleted or made read-only) still counts until it expires."""
    if reservation is None:
        return NOTHING_RESERVED
    until = expiry_text(reservation)
    try:
        held = any(r.id == reservation.id for r, _ in ledger.reservations(reservation.data_key))
    except ValueError:                                    # cannot even be read: say what may be the case
        return ("Nothing was released. The ledger cannot be read, so its reservation may not have been "
                "dropped: if it was kept, it counts toward this data set's total until it expires"
                f"{until}.")
    return STILL_RESERVED.format(when=until) if held else NOTHING_SPENT


def _reserve(release: Release, ledger: ProjectLedger, *, wait: float | None = None,
             waiting: Callable[[], None] | None = None) -> tuple[Outcome, tuple]:
    """Prepare the computation's arguments, then reserve: an outcome still running, or refused (the ledger's
    ``ValueError``: over the cap, no cap decided, unwritable, or still locked by another writer after
    ``wait`` seconds) with nothing reserved."""
    outcome = Outcome(release)
    try:
        args = release.arguments()
        outcome.reservation = ledger.reserve(release.entry, wait=wait, waiting=waiting)
    except ValueError as exc:
        outcome.state, outcome.error, outcome.left = REFUSED, exc, NOTHING_RESERVED
        return outcome, ()
    return outcome, args


def settle(outcome: Outcome, ledger: ProjectLedger) -> Callable[[bool, Any], None]:
    """The completion hook of a reserved release, ``hook(ok, value)``: on success commit the reservation
    with the result's detailed spends, then publish; on failure or cancel (or a refused commit) drop the
    reservation and discard. Runs wherever the computation's end is learned (this thread, or the job
    queue's hook in the server process); it never raises."""
    release = outcome.release

    def discard() -> None:
        if release.discard is not None:
            try:
                release.discard()
            except Exception:  # noqa: BLE001 - the release's own outcome is what must be heard
                log.exception("Removing what %s left behind failed", release.label)

    def drop(state: str, error: BaseException) -> None:
        with contextlib.suppress(Exception):      # if even that fails, the reservation expires on its own
            ledger.cancel(outcome.reservation)
        discard()
        outcome.error, outcome.left = error, what_is_left(ledger, outcome.reservation)
        outcome.state = state

    def hook(ok: bool, value: Any) -> None:
        if not ok:
            drop(CANCELLED if isinstance(value, Cancelled) else FAILED, value)
            return
        try:       # the detailed spends replace the reserved ones, never exceeding them
            spends = None if release.spent is None else spends_of(release.spent(value))
            outcome.committed = ledger.commit(outcome.reservation, spends)
        except Exception as exc:  # noqa: BLE001 - refused (over the reservation, lost, unwritable)
            drop(REFUSED, exc)
            return
        if release.publish is not None:
            try:
                value = release.publish(value)
            except ValueError as exc:
                outcome.notice = (f"The release is recorded in the ledger, but its parts could not be put in place "
                                  f"(nothing of it is published): {exc}")
        outcome.result, outcome.state = value, COMMITTED

    return hook


def run_release(release: Release, ledger: ProjectLedger, *, progress=None, wait: float | None = None) -> Outcome:
    """The whole protocol in this thread; the outcome says what became of it. An interruption that is not an
    error (a stopped script) drops the reservation and is raised again. ``wait`` (seconds; a page passes
    :data:`INTERACTIVE_WAIT`) bounds the wait behind another writer's lock on the ledger: past it the release
    is refused with :class:`~core.privacy.project_ledger.LedgerBusy`, and :func:`release_when_free` can keep
    waiting in the background."""
    outcome, args = _reserve(release, ledger, wait=wait)
    if outcome.state != RUNNING:
        return outcome
    hook = settle(outcome, ledger)
    try:
        value = release.compute(*args, progress=progress)
    except Exception as exc:  # noqa: BLE001 - every failure drops the reservation and is reported
        hook(False, exc)
        return outcome
    except BaseException as exc:
        hook(False, exc)
        raise
    hook(True, value)
    return outcome


def submit_release(release: Release, ledger: ProjectLedger, queue, *, owner: str, key: Callable[[Reservation], str]
                   | str, label: str, wait: float | None = None):
    """Reserve in this thread, then hand the computation to ``queue`` (a :class:`core.jobs.JobQueue`) as a
    background job whose completion hook (:func:`settle`) commits or drops the reservation in the server
    process, whoever watches. ``key`` is the job's key, or a function of the reservation giving it; ``wait``
    bounds the reservation's wait for the ledger as in :func:`run_release`.
    Returns (outcome, job); the job is None when the ledger refused the release."""
    outcome, args = _reserve(release, ledger, wait=wait)
    if outcome.state != RUNNING:
        return outcome, None
    job_key = key(outcome.reservation) if callable(key) else str(key)
    try:
        job = queue.submit(release.compute, *args, owner=owner, key=job_key, label=label,
                           on_done=settle(outcome, ledger))
    except BaseException:
        with contextlib.suppress(Exception):
            ledger.cancel(outcome.reservation)
        outcome.state = CANCELLED
        raise
    return outcome, job


def release_when_free(release: Release, ledger: ProjectLedger, queue, *, owner: str, key: str, label: str):
    """The whole protocol as one background job that first waits its turn for the ledger (as long as the
    ledger waits for any writer) with :data:`WAITING` as its progress, so a page whose release found the
    ledger locked need not hold its run. Nothing is reserved while it waits, and a cancel then spends
    nothing; once reserved, the computation runs and the completion hook (:func:`settle`) commits or drops
    the reservation as for :func:`submit_release`. The job runs on a thread of the server (its body is bound
    to this ledger and release). Returns (outcome, job)."""
    outcome = Outcome(release)

    def wait_then_compute(progress=None):
        def waiting() -> None:             # a cancel is raised here, between two tries for the lock
            if progress is not None:
                progress(0, 1, WAITING)
        held, args = _reserve(release, ledger, waiting=waiting)
        if held.state != RUNNING:
            raise held.error
        outcome.reservation = held.reservation
        try:
            waiting()                      # cancelled while the reservation was being made: drop it now
        except BaseException:
            with contextlib.suppress(Exception):
                ledger.cancel(held.reservation)
            raise
        return release.compute(*args, progress=progress)

    def hook(ok: bool, value: Any) -> None:
        if outcome.reservation is not None:
            settle(outcome, ledger)(ok, value)
            return
        outcome.error, outcome.left = value, NOTHING_RESERVED      # stopped before anything was reserved
        outcome.state = (CANCELLED if isinstance(value, Cancelled) else
                         REFUSED if isinstance(value, ValueError) else FAILED)

    job = queue.submit(wait_then_compute, owner=owner, key=key, label=label, on_done=hook)
    return outcome, job


def cancel_release(job) -> None:
    """Stop a release submitted by :func:`submit_release` and wait until its hook (:func:`settle`) has dropped
    the reservation and discarded what it made: nothing is spent, and the ledger says so when this returns.
    Any other job (one without a completion hook) stops at once, so a list of a session's jobs cancels them
    all this way and never needs to know which are releases."""
    job.cancel()
    job.wait()


# ------------------------------------------------------------------------------------------- the kinds

def census_counts_release(plan, allocation, *, page: str, label: str) -> Release:
    """Census noisy counts of the budget allocation ``allocation`` on ``plan``'s geography (loaded when the
    release is confirmed). What the counts depend on is the allocation and the geography it is drawn on, so
    another number of seeded runs is the same release."""
    part = {"allocation": json.loads(allocation.to_json()), "geography": plan.geography,
            "fanouts": list(plan.fanouts) if plan.geography == "stylised" else [], "geography seed": plan.seed}
    entry = release_entry(plan, page, CENSUS, label, allocation.ledger(), fresh=True, part=part)

    def args() -> tuple:
        return allocation, load_geography(plan.geography, plan.fanouts if plan.geography == "stylised" else (),
                                          plan.seed)

    return Release(CENSUS, entry, census.release_noisy_counts, args, spent=lambda r: r.ledger())


def synthetic_data_release(plan, raw, *, page: str, label: str, data_name: str = "") -> Release:
    """A secure synthetic copy of ``plan``'s data (``plan.release`` holds its epsilon and method); the
    seed plays no part in a secure fit, so it is left out of what the release depends on."""
    if plan.release is None:
        raise ValueError("Choose the release's epsilon and method first.")
    setup = plan.setup().replace(release=plan.release.replace(seed=0))
    projected = projected_release_ledger(plan, plan.release.epsilon, plan.release.method)
    entry = release_entry(plan, page, SYNTHETIC, label, projected, fresh=True, data_label=data_name, part=setup)
    return Release(SYNTHETIC, entry, workflow.secure_release, (plan, raw), spent=lambda r: r.ledger)


def secure_mean(plan, raw, progress=None):
    """The stratified mean drawn with OpenDP's sampler (the computation of a mean release)."""
    return mean_release.release_stratified_mean(plan, raw, secure=True)


def stratified_mean_release(plan, raw, *, page: str, label: str, data_name: str = "") -> Release:
    """One column's stratified mean (``plan``: a MeanReleasePlan); a pure-DP noise ignores the delta, so it
    is left out of what the release depends on."""
    part = plan if plan.unit == "rho" else plan.replace(delta=MeanReleasePlan.delta)
    entry = release_entry(plan, page, MEAN, label, projected_ledger(plan), fresh=True, data_label=data_name,
                          part=part)
    return Release(MEAN, entry, secure_mean, (plan, raw), spent=lambda r: r.ledger())


def audited_output_release(plan, data, *, page: str, label: str, data_name: str = "") -> Release:
    """One audited algorithm (``plan``: a PublishPlan) run once on the whole file with secure noise; the
    audit's seed drives simulations only."""
    planned = trial_ledger(plan.release, protection=ProtectionUnit.of(plan.data))
    entry = release_entry(plan, page, AUDITED, label, planned, fresh=True, data_label=data_name,
                          part=plan.replace(seed=0))
    return Release(AUDITED, entry, publish, (plan, data), spent=lambda r: r.budget)


def new_pairs_copy(plan, copy_id: str, progress=None):
    """A new secure synthetic copy of the pair people, under the id its reservation holds."""
    import dataclasses

    made = release_synthetic_people(plan, progress=progress)
    return dataclasses.replace(made, plan=made.plan.replace(copy_id=copy_id))


def pairs_copy_release(plan, copy_id: str, *, label: str = "", page: str = "", store=None) -> Release:
    """The elicitation's synthetic copy of the people (``plan``: a PrivatePairsPlan) under ``copy_id``;
    with ``store`` (an elicitation store) the copy is stored once committed."""
    import dataclasses

    entry = copy_release(plan.replace(copy_id=copy_id), page or COPY_PAGE)
    if label:
        entry = dataclasses.replace(entry, label=label)

    def keep(copy):
        store.save_copy(copy)
        return copy

    return Release(PAIRS, entry, new_pairs_copy, (plan, copy_id), spent=lambda c: c.spent,
                   publish=None if store is None else keep)


def folder_copy_release(plan, schema, folder, *, page: str, label: str = "", nonce: str = "",
                        n_jobs: int | None = None, scheduler: str | None = None) -> Release:
    """A synthetic copy of a declared folder set, drawn into a marked unfinished folder (named by ``nonce``)
    and moved into place only after the commit; removed when nothing was released. ``n_jobs`` and
    ``scheduler`` say where the parts are counted and drawn (the default: as configured)."""
    digest = fr.plan_digest(plan, schema)
    entry = LedgerRelease(declared_key(schema.name), release_key(FOLDER, digest, secrets.token_hex(8)), "release",
                          page, FOLDER, label or plan.label(), digest, spends_of(fr.projected_folder_ledger(plan)),
                          schema.name)
    nonce = nonce or secrets.token_hex(6)
    return Release(FOLDER, entry, fr.release_unpublished, (plan, schema, folder, nonce, n_jobs, scheduler),
                   spent=lambda r: r.ledger,
                   publish=fr.publish, discard=lambda: fr.discard_unfinished(plan.out_folder, nonce))


def secure_estimate(frame, schema, column: str, what: str, epsilon: float, floor: float | None = None,
                    ceiling: float | None = None, progress=None):
    """(found, spent ledger): private bounds (low, high) or categories of one column, on the release path."""
    values = estimate_input(frame, schema, column, what)
    k = schema.max_rows_per_person
    if what == "bounds":
        low, high, spent = estimate_bounds(values, epsilon, secure=True, rows_per_person=k,
                                           floor=floor, ceiling=ceiling)
        return (low, high), spent
    return estimate_categories(values, epsilon, secure=True, rows_per_person=k)


def private_estimate_release(ref: DataRef, frame, column: str, what: str, epsilon: float, *, page: str,
                             floor: float | None = None, ceiling: float | None = None) -> Release:
    """Private bounds (``what="bounds"``) or categories (``"categories"``) of one column of the declared data
    set ``ref`` (its schema rides in it), read from ``frame``, the declared file."""
    schema = getattr(ref, "schema", None)
    if schema is None:
        raise ValueError("A private estimate is made on a declared data set: declare the file's schema first.")
    if what not in ("bounds", "categories"):
        raise ValueError(f"Estimate 'bounds' or 'categories', not {what!r}.")
    schema.column(column)
    digest = digest_of({"schema": schema.digest(), "column": column, "what": what, "epsilon": epsilon,
                        "floor": floor, "ceiling": ceiling})
    planned = planned_estimate_ledger(what, column, epsilon, schema.max_rows_per_person)
    label = f"private {what} of {column}, epsilon {epsilon:g}"
    entry = LedgerRelease(data_key(ref), release_key(ESTIMATE, digest, secrets.token_hex(8)), "release", page,
                          ESTIMATE, label, digest, spends_of(planned), schema.name)
    return Release(ESTIMATE, entry, secure_estimate, (frame, schema, column, what, epsilon, floor, ceiling),
                   spent=lambda r: r[1])


RELEASE_KINDS: dict[str, Callable[..., Release]] = {
    CENSUS: census_counts_release, SYNTHETIC: synthetic_data_release, MEAN: stratified_mean_release,
    AUDITED: audited_output_release, PAIRS: pairs_copy_release, FOLDER: folder_copy_release,
    ESTIMATE: private_estimate_release}
"""The seven release kinds: the ledger's action -> the builder of its :class:`Release`."""
