"""One release button for every page that makes a real release: disabled while the page's settings are in
error, then one confirmation in the same words everywhere, then the release protocol of ``core.releases``
(reserve -> compute -> commit or drop -> publish or discard). This module only asks and shows.

The flow on every page:

1. the button is disabled, with the reason, while ``error`` is set (or there is nothing to release);
2. a press opens the confirmation below it: what is released, its spend in the ledger's units (at the
   cap's delta, else the ledger's default delta), the data set's total before and after, and the cap, all
   read from ``ProjectLedger.preview``. A release identical to one already made says so;
3. before the first real release of a data set with no cap decision, the curator decides first: a cap (a
   value is suggested and explained) or an explicit "no cap" (recorded);
4. Confirm: the release is reserved in the ledger, then computed, then committed; a failure or a cancel
   drops the reservation and the page says nothing was spent (or, when the ledger could not be written to
   drop it, that the reservation counts until it expires). A release over the cap is refused with what to
   change. When another writer keeps the ledger's database locked, the release gives up after a short wait
   (``core.releases.INTERACTIVE_WAIT``), says so, and offers to keep waiting in the background: a batch job
   that reserves once the lock goes, then computes and commits (``core.releases.release_when_free``).

A long release (shown with a :class:`ReleaseJob`) is computed as a background job that outlives the page
run: the reservation is made in the page run after the confirmation, and the job's completion hook
(``core.releases.settle``) commits it (with the result's detailed spends) or drops it, in the server
process, whether or not anyone still watches. The
page that is opened again (after another page, a reload that keeps the tab's ``?jobs=`` token, or a widget
change) follows the running release, or shows what became of it once. The ledger stays the authority: a
result is shown only after its commit succeeded, and a server that dies mid-job leaves the reservation,
which keeps counting until it expires (six hours), so the totals may over-state a spend but never miss one.

One release states one (epsilon, delta): a page builds the figures in its label with :func:`stated_spend`,
at the data set's delta (the cap's, else the ledger's default), the delta of the spend line, the totals and
the Privacy ledger page.

Seeded simulations do not come here: they are recorded with ``ledger_badge.record_release``.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable

import streamlit as st

from core.contracts import Cancelled
from core.privacy.ledger import BudgetLedger
from core.jobs import job_queue
from core.privacy.project_ledger import (DEFAULT_DELTA, Cap, CapExceeded, CapUndecided, LedgerBusy, LedgerRelease,
                                         Reservation, compose, spends_of)
from core.releases import (CANCELLED, COMMITTED, INTERACTIVE_WAIT, REFUSED, RUNNING, Outcome, Release, cancel_release,
                           expiry_text, release_when_free, run_release, submit_release)
from dashboard.components.ledger_badge import ledger_delta, mark_in_use, project_ledger
from dashboard.components.plain_text import plain
from dashboard.components import access, progress
from dashboard.components.job_lines import job_owner, keep_owner_in_address
from dashboard.components.progress import follow

CANCELLED_NOTE = "The release was cancelled before anything was published. "
#: round values offered as a first cap (epsilon)
CAP_STEPS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 20.0, 50.0, 100.0)


# ------------------------------------------------------------------------------------------- wording

def totals_text(t) -> str:
    """A composed total in the ledger's units, always with its delta: "epsilon 1.5 at delta 1e-06"."""
    if t.n_releases == 0 and t.epsilon == 0:
        return "nothing yet"
    if t.pure:
        return f"epsilon {t.epsilon:.4g} (pure DP, delta 0)"
    text = f"epsilon {t.epsilon:.4g} at delta {t.delta:.2g}"
    return text + ("" if t.rho is None else f" (rho {t.rho:.4g})")


def cap_text(cap: Cap | None, no_cap: bool) -> str:
    """The data set's cap decision in words."""
    if cap is not None:
        return (f"rho {cap.amount:.4g}" if cap.unit == "rho"
                else f"epsilon {cap.amount:.4g} at delta {cap.delta:.2g}")
    return "no cap (the curator's recorded choice)" if no_cap else "not decided yet"


def spend_text(rel: LedgerRelease, delta: float) -> str:
    """This release alone in the ledger's units (at ``delta``, the cap's or the ledger's default)."""
    return totals_text(compose([replace(rel, kind="release")], delta))


def stated_spend(ledger: BudgetLedger, key: str) -> str:
    """A page's planned spends in the words the confirmation and the ledger use for them, at data set
    ``key``'s delta (its cap's, else the ledger's default): "epsilon 0.74 at delta 1e-06 (rho 0.0123)" for
    zCDP, "epsilon 1 (pure DP, delta 0)" for pure DP. A page's own delta (a synthesizer's, a statement's)
    converts the same rho to another epsilon, so labels use this instead, and a release shows one figure.
    When the ledger cannot be read the default delta is used (nothing can be released then anyway)."""
    try:
        delta = ledger_delta(key)
    except ValueError:
        delta = DEFAULT_DELTA
    rel = LedgerRelease(key, "-", "release", "-", "-", "-", "-", spends_of(ledger))
    return totals_text(compose([rel], delta))


def suggested_cap(after_epsilon: float) -> float:
    """A first cap: the smallest round value that leaves room for this release and about as much again."""
    need = 2.0 * float(after_epsilon) if math.isfinite(after_epsilon) else CAP_STEPS[-1]
    return next((c for c in CAP_STEPS if c >= need), CAP_STEPS[-1])


def _signature(rel: LedgerRelease) -> tuple:
    """What makes two pending releases the same request (the nonce of a fresh key aside). The label is
    words about it: it follows the data set's delta (a cap decided in the confirmation restates it)."""
    return (rel.data_key, rel.kind, rel.page, rel.action, rel.plan_digest, rel.spends)


# ------------------------------------------------------------------------------------------- the pieces

def _cap_decision(key: str, pending: LedgerRelease, preview) -> None:
    """Ask for the data set's cap decision before its first real release: a cap or an explicit "no cap"."""
    suggestion = suggested_cap(preview.after.epsilon)
    name = plain(pending.data_label or pending.data_key)
    st.markdown(f"**Before the first release of {name}: decide its privacy budget cap.**")
    choice = st.radio("Budget cap", ["Set a cap", "No cap"], key=f"{key}_cap_choice", horizontal=True)
    if choice == "Set a cap":
        c1, c2 = st.columns(2)
        amount = c1.number_input("Cap (epsilon)", 0.001, 1000.0, suggestion, 0.5, key=f"{key}_cap_amount")
        cap_delta = c2.number_input("delta the cap holds at", 1e-12, 0.1, DEFAULT_DELTA, format="%.1e",
                                    key=f"{key}_cap_delta")
        st.caption(f"Suggested: epsilon {suggestion:g}, room for this release and about as much again. A cap of "
                   f"epsilon {amount:g} at delta {cap_delta:.1e} means every release of this data set, on every "
                   "page and in every session, together stays "
                   f"({amount:g}, {cap_delta:.1e})-differentially private: a release that would go past it is "
                   "refused until the cap is raised on the Privacy ledger page.")
    else:
        st.caption("No cap means releases of this data set are never refused for their total: each one still "
                   "asks for confirmation and is recorded, but nothing stops the total from growing. The choice "
                   "is recorded in the ledger, with its time, and can be changed on the Privacy ledger page.")
    if st.button("Save this decision", key=f"{key}_cap_save", type="primary"):
        ledger = project_ledger()
        try:
            if choice == "Set a cap":
                ledger.set_cap(pending.data_key, Cap(float(amount), "epsilon", float(cap_delta)),
                               curator=access.curator_name())
            else:
                ledger.set_no_cap(pending.data_key, curator=access.curator_name())
        except ValueError as exc:
            st.error(str(exc))
            return
        st.rerun()


def _confirmation(key: str, pending: LedgerRelease, what: str, same_as=None):
    """The confirmation panel; returns ("confirm" | "cancel" | None, preview)."""
    ledger = project_ledger()
    preview = ledger.preview(pending)
    delta = preview.cap.delta if preview.cap is not None else DEFAULT_DELTA     # as the ledger composes
    with st.container(border=True, key=f"{key}_confirm_box"):
        st.markdown(f"**Confirm a real release**: {plain(what or pending.label)} from "
                    f"{plain(pending.data_label or pending.data_key)}.")
        st.markdown(f"- Spend of this release: {spend_text(pending, delta)}\n"
                    f"- Total of this data set before: {totals_text(preview.before)}\n"
                    f"- Total after: {totals_text(preview.after)}\n"
                    f"- Cap: {cap_text(preview.cap, preview.no_cap)}")
        st.caption("In the ledger's units: zCDP spends are stated as epsilon at the cap's delta (else the "
                   f"ledger's default delta {DEFAULT_DELTA:g}), the same figures the Privacy ledger page shows.")
        earlier = preview.repeat_of
        if earlier is None and same_as is not None:
            earlier = next((r for r in reversed(ledger.releases(pending.data_key, "release")) if same_as(r)), None)
        if earlier is not None:
            st.warning(f"This is a repeat: the same release ({plain(earlier.label)}) was already made on "
                       f"{earlier.created_utc or 'an earlier date'} (UTC). Releasing it again spends the budget "
                       "again, and the two noisy answers can be combined to undo part of the noise. Confirm only "
                       "if that is intended.")
        decision = ledger.cap_decision(pending.data_key)
        if decision is None:
            _cap_decision(key, pending, preview)
            if st.button("Cancel", key=f"{key}_cancel"):
                return "cancel", preview
            return None, preview
        if not preview.within:
            st.error(f"This release would take the data set past its cap: after it, "
                     f"{totals_text(preview.after)} against the cap {cap_text(preview.cap, False)}. "
                     "To release, lower this release's epsilon, or raise the cap on the Privacy ledger page.")
        c1, c2 = st.columns(2)
        if c1.button("Confirm the release", key=f"{key}_confirm", type="primary", disabled=not preview.within,
                     icon=":material/lock:"):
            return "confirm", preview
        if c2.button("Cancel", key=f"{key}_cancel"):
            return "cancel", preview
    return None, preview


# ------------------------------------------------------------------------------------------- the button

def release_button(label: str, *, key: str, release: Release | None, job: "ReleaseJob | None" = None,
                   error: str | None = None, what: str = "", help: str | None = None, container=None,
                   same_as: Callable[[LedgerRelease], bool] | None = None) -> Any:
    """A real release behind one confirmation; the protocol itself is ``core.releases``.

    ``release`` is the release as the settings on screen describe it (from a builder of
    ``core.releases``); it runs in this page run, or with ``job`` as a background job that survives the page
    run (pass it on every run, so a page opened again finds its running release); ``container`` is where the
    button goes (a column), the confirmation goes below it on the page; ``same_as`` picks earlier releases
    that also count as this one's repeat (for releases whose plan digest differs by an id alone). Returns the
    published result on the run where it was committed, or (a job) on the first run that finds it committed:
    once, the page keeps it and reruns; else None.
    """
    state = f"release_confirm_{key}"
    if release is not None:       # the ledger records who made it
        release = replace(release, entry=replace(release.entry, curator=access.curator_name()))
    pending = None if release is None else release.entry
    if pending is not None:
        mark_in_use(pending.data_key, pending.data_label or pending.data_key)
    ongoing = _ongoing(key)
    if ongoing is not None:               # a release job (or one kept waiting for the ledger) of this button
        made = _attend(ongoing, job or _waiting_job(key, ongoing.label), key, confirmed_now=False)
        if made is not None:
            return made
    busy = st.session_state.get(f"{state}_busy")
    if busy is not None:                   # a release that found the ledger locked: wait in the background?
        return _busy_offer(key, busy, job)
    if error is None and pending is None:
        error = "there is nothing to release with these settings."
    note = st.session_state.pop(f"{state}_note", None)
    stored = st.session_state.get(state)
    if stored is not None and (error is not None or stored["sig"] != _signature(pending)):
        st.session_state.pop(state, None)
        stored = None
        if error is None:
            st.info("The settings changed after the release button was pressed: nothing was released. Press it "
                    "again to confirm the release as it is now.")
    if stored is not None and stored["rel"].label != pending.label:       # the same release, restated
        stored["rel"] = replace(stored["rel"], label=pending.label)
    if (container or st).button(label, key=key, type="primary", disabled=error is not None, help=help,
                                icon=":material/lock:"):
        stored = {"rel": pending, "sig": _signature(pending)}
        st.session_state[state] = stored
    if error is not None:
        st.caption(f"Release disabled until the settings are fixed: {plain(error)}")
    if note:
        st.info(note)
    if stored is None:
        return None
    panel = st.empty()
    try:
        with panel.container():
            action, preview = _confirmation(key, stored["rel"], what, same_as)
    except ValueError as exc:            # the ledger cannot be read: nothing can be released
        st.error(str(exc))
        return None
    if action is None:
        return None
    panel.empty()                        # answered: its buttons must not stay on screen while the release runs
    st.session_state.pop(state, None)
    if action == "cancel":
        st.session_state[f"{state}_note"] = "Release cancelled: nothing was released and nothing was spent."
        st.rerun()
    confirmed = replace(release, entry=stored["rel"])        # the entry as confirmed, with its press's key
    if job is not None:
        return _submit(key, confirmed, job)
    outcome = run_release(confirmed, project_ledger(), wait=INTERACTIVE_WAIT)
    if isinstance(outcome.error, LedgerBusy):
        return _busy_offer(key, _busy(key, confirmed, outcome), job)
    return _shown(outcome)


def _busy(key: str, release: Release, outcome: Outcome) -> dict:
    """Remember a release refused because the ledger stayed locked, with the ledger's words, for the offer."""
    held = {"release": release, "message": str(outcome.error)}
    st.session_state[f"release_confirm_{key}_busy"] = held
    return held


def _waiting_job(key: str, label: str) -> "ReleaseJob":
    """How a page without a release job of its own follows a release kept waiting for the ledger."""
    return ReleaseJob(label=f"Release: {label}", cancel_key=f"{key}_wait_cancel")


def _busy_offer(key: str, busy: dict, spec: "ReleaseJob | None"):
    """Say that the ledger is locked and nothing was reserved; offer to keep waiting in the background (the
    release, as confirmed, then runs as a batch job once the lock goes) or to drop it."""
    release = busy["release"]
    st.warning(f"{busy['message']} The release waiting is: {plain(release.label)}.")
    c1, c2 = st.columns(2)
    if c1.button("Keep waiting in the background", key=f"{key}_wait_background", type="primary",
                 icon=":material/schedule:"):
        st.session_state.pop(f"release_confirm_{key}_busy", None)
        owner = job_owner()
        outcome, started = release_when_free(release, project_ledger(), job_queue(), owner=owner,
                                             key=f"release-wait|{owner}|{key}|{release.entry.release_key}",
                                             label=spec.label if spec is not None else release.label)
        return _follow_new(key, outcome, started, spec or _waiting_job(key, release.label))
    if c2.button("Do not release", key=f"{key}_wait_drop"):
        st.session_state.pop(f"release_confirm_{key}_busy", None)
        st.session_state[f"release_confirm_{key}_note"] = "Release dropped: nothing was released and nothing was spent."
        st.rerun()
    return None


def _shown(outcome: Outcome):
    """What the page says about a finished release: its published result (returned), or why nothing was
    released and what became of its reservation."""
    if outcome.state == COMMITTED:
        if outcome.notice:
            st.error(outcome.notice)
        return outcome.result
    error = outcome.error
    if outcome.state == CANCELLED:
        st.info(CANCELLED_NOTE + outcome.left)
    elif isinstance(error, CapExceeded):          # its message says what to change
        st.error(f"{error} Nothing was released or spent.")
    elif isinstance(error, CapUndecided):
        st.error(f"{error} Decide the data set's cap (or record 'no cap') and press the release button again.")
    elif outcome.state == REFUSED or isinstance(error, ValueError):
        st.error(str(error))
        st.info(outcome.left)
    else:
        st.error(f"The release stopped before it finished ({type(error).__name__}"
                 + (f": {error}" if str(error) else "") + ").")
        st.info(outcome.left)
    return None


# ------------------------------------------------------------------------------------------- releases as jobs

KEPT = 32
"""Releases remembered by the server for pages to find again (the oldest finished ones go first)."""


@dataclass(frozen=True)
class ReleaseJob:
    """How a release computed as a background job is followed on the page: behind a bar labelled ``label``
    with Cancel (``cancel_key``) in ``slot`` (a ``st.empty``; below the button when None)."""

    label: str
    cancel_key: str
    n_jobs: int | None = None
    slot: Any = None


@dataclass(eq=False)
class _Followed:
    """A confirmed release carried by a job, as this server's pages find it again: the tab's owner, the
    button, the job, and the protocol's outcome (filled in by its completion hook)."""

    owner: str
    button: str
    job_key: str
    outcome: Outcome
    delivered: bool = False

    @property
    def label(self) -> str:
        return self.outcome.release.label


_releases: "OrderedDict[str, _Followed]" = OrderedDict()
_releases_lock = threading.Lock()


def _remember(record: _Followed) -> None:
    with _releases_lock:
        _releases[record.job_key] = record
        finished = [k for k, r in _releases.items() if r.outcome.state != RUNNING]
        for old in finished[:max(0, len(_releases) - KEPT)]:
            del _releases[old]


def _ongoing(key: str) -> _Followed | None:
    """This tab's release from button ``key`` not yet shown: by the job key kept in the session (another page
    and back), else by the tab's owner token (a reload, a new session with the same ``?jobs=``)."""
    held = st.session_state.get(f"release_confirm_{key}_job")
    with _releases_lock:
        record = _releases.get(held) if held else None
        if record is None:
            owner = job_owner()
            record = next((r for r in reversed(_releases.values())
                           if r.owner == owner and r.button == key and not r.delivered), None)
    return None if record is None or record.delivered else record


def release_job_key(owner: str, key: str, reservation: Reservation) -> str:
    """The job of a confirmed release: the tab's owner, the release button and the ledger's reservation."""
    return f"release|{owner}|{key}|{reservation.data_key}|{reservation.id}|{reservation.release_key}"


def _submit(key: str, release: Release, spec: ReleaseJob):
    """Reserve in this page run and hand the computation to a background job whose completion hook commits or
    drops the reservation (``core.releases.submit_release``); follow it here while this run lasts."""
    owner = job_owner()
    outcome, job = submit_release(release, project_ledger(), job_queue(), owner=owner, label=spec.label,
                                  key=lambda reservation: release_job_key(owner, key, reservation),
                                  wait=INTERACTIVE_WAIT)
    if isinstance(outcome.error, LedgerBusy):
        return _busy_offer(key, _busy(key, release, outcome), spec)
    if job is None:
        return _shown(outcome)
    return _follow_new(key, outcome, job, spec)


def _follow_new(key: str, outcome: Outcome, job, spec: ReleaseJob):
    """Remember a release just handed to a job, so this tab finds it again, and follow it now."""
    owner = job_owner()
    record = _Followed(owner, key, job.key, outcome)
    _remember(record)
    st.session_state[f"release_confirm_{key}_job"] = record.job_key
    keep_owner_in_address()              # a reload of this tab finds the release again
    return _attend(record, spec, key, confirmed_now=True)


def _attend(record: _Followed, spec: ReleaseJob, key: str, *, confirmed_now: bool):
    """Follow a running release behind its bar (Cancel stops it: nothing is spent), then show what became of
    it, once: its result (returned), or why nothing was released."""
    queue = job_queue()
    if record.outcome.state == RUNNING:
        job = queue.find(record.job_key)
        if job is None:                  # the job is not in this server's queue any more (it was replaced)
            st.warning("A release confirmed earlier is no longer followed by this server: nothing of it is "
                       "shown. Its reservation counts toward this data set's total until the job's outcome is "
                       f"recorded or the reservation expires{expiry_text(record.outcome.reservation)}.")
            record.delivered = True
            return None
        if not confirmed_now:
            st.info(f"A release confirmed earlier is running ({plain(record.label)}), with the settings it was "
                    "confirmed with: it is reserved in the ledger, so changing the settings does not stop it. Its "
                    "result appears here when it ends; Cancel stops it and spends nothing.")
        slot = spec.slot if spec.slot is not None else st.empty()
        try:
            with slot.container():
                with progress.progress_bar(spec.label, cancel_key=spec.cancel_key, n_jobs=spec.n_jobs) as bar:
                    follow(job, bar)
        except Cancelled:                # this bar's Cancel (or the sidebar's, seen as the job's outcome)
            cancel_release(job)          # core drops the reservation before this returns
        except BaseException as exc:     # the job's own failure (its hook recorded it) or Streamlit's stop
            if exc is not job.error:
                raise
        slot.empty()
    return _deliver(record, key)


def _deliver(record: _Followed, key: str):
    """What became of a finished release, shown once (see :func:`_shown`)."""
    if record.outcome.state == RUNNING:
        return None
    record.delivered = True
    st.session_state.pop(f"release_confirm_{key}_job", None)
    result = _shown(record.outcome)
    record.outcome.result = None                  # the page keeps it from now on
    return result
