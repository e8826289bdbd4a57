"""One release button for every page that makes a real release: disabled while the page's settings are in
error, then one confirmation in the same words everywhere, then the project ledger's reserve -> run ->
commit.

The flow on every page:

1. the button is disabled, with the reason, while ``error`` is set (or there is nothing to release);
2. a press opens the confirmation below it: what is released, its spend in the ledger's units (at the
   cap's delta, else the ledger's default delta), the data set's total before and after, and the cap, all
   read from ``ProjectLedger.preview``. A release identical to one already made says so;
3. before the first real release of a data set with no cap decision, the curator decides first: a cap (a
   value is suggested and explained) or an explicit "no cap" (recorded);
4. Confirm: ``with ledger.reserved(rel):`` the page's computation runs, then the release is committed; a
   failure or a cancel drops the reservation and the page says nothing was spent (or, when the ledger
   could not be written to drop it, that the reservation counts until it expires). A release over the
   cap is refused with what to change.

One release states one (epsilon, delta): a page builds the figures in its label with :func:`stated_spend`,
at the data set's delta (the cap's, else the ledger's default), the delta of the spend line, the totals and
the Privacy ledger page.

Seeded simulations do not come here: they are recorded with ``ledger_badge.record_release``.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, TypeVar

import streamlit as st

from core.contracts import Cancelled
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import (DEFAULT_DELTA, Cap, CapExceeded, CapUndecided, LedgerRelease, compose,
                                         spends_of)
from dashboard.components.ledger_badge import ledger_delta, mark_in_use, project_ledger
from dashboard.components.plain_text import plain

T = TypeVar("T")
NOTHING_SPENT = "Nothing was released and nothing was spent: the reservation in the ledger was dropped."
#: after a failure the ledger could not record: the reservation stays and counts until it expires
STILL_RESERVED = ("Nothing was released, but the ledger could not be written to drop its reservation: the "
                  "reservation still counts toward this data set's total until it expires{when}, after which "
                  "it stops counting by itself. Nothing was published, so nothing more needs undoing.")
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
                ledger.set_cap(pending.data_key, Cap(float(amount), "epsilon", float(cap_delta)))
            else:
                ledger.set_no_cap(pending.data_key)
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

def release_button(label: str, *, key: str, pending: LedgerRelease | None, run: Callable[[], T],
                   error: str | None = None, what: str = "", spent: Callable[[T], BudgetLedger] | None = None,
                   help: str | None = None, container=None,
                   same_as: Callable[[LedgerRelease], bool] | None = None) -> T | None:
    """A real release behind one confirmation and the ledger's reserve -> run -> commit.

    ``pending`` is the release as it will be stored (from ``release_entry(..., fresh=True)``); ``run``
    computes it (called only inside the reservation); ``spent`` reads the computed result's ledger, which
    must not exceed the reservation; ``container`` is where the button goes (a column), the confirmation
    goes below it on the page; ``same_as`` picks earlier releases that also count as this one's repeat (for
    releases whose plan digest differs by an id alone). Returns the result on the run where it was committed
    (the page keeps it and reruns), else None.
    """
    state = f"release_confirm_{key}"
    if pending is not None:
        mark_in_use(pending.data_key, pending.data_label or pending.data_key)
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
    try:
        action, preview = _confirmation(key, stored["rel"], what, same_as)
    except ValueError as exc:            # the ledger cannot be read: nothing can be released
        st.error(str(exc))
        return None
    if action is None:
        return None
    st.session_state.pop(state, None)
    if action == "cancel":
        st.session_state[f"{state}_note"] = "Release cancelled: nothing was released and nothing was spent."
        st.rerun()
    return _reserve_and_run(stored["rel"], run, spent)


def _reserve_and_run(rel: LedgerRelease, run: Callable[[], T], spent) -> T | None:
    """``with ledger.reserved(rel):`` run, then commit; every failure says nothing was released, and whether
    its reservation was dropped or still counts until it expires."""
    ledger = project_ledger()
    reservation = None
    try:
        with ledger.reserved(rel) as reservation:
            result = run()
            if spent is not None:       # the detailed spends replace the reserved ones, never exceeding them
                ledger.commit(reservation, spends_of(spent(result)))
        return result
    except CapExceeded as exc:          # its message says what to change
        st.error(f"{exc} Nothing was released or spent.")
    except CapUndecided as exc:
        st.error(f"{exc} Decide the data set's cap (or record 'no cap') and press the release button again.")
    except Cancelled:
        st.info("The release was cancelled before anything was published. " + _what_is_left(ledger, reservation))
    except ValueError as exc:
        st.error(str(exc))
        st.info(_what_is_left(ledger, reservation))
    return None


def _what_is_left(ledger, reservation) -> str:
    """After a failed or cancelled release: whether its reservation was dropped, or (the ledger could not be
    written, e.g. its database was deleted or made read-only) still counts until it expires."""
    if reservation is None:
        return "Nothing was released and nothing was spent (nothing was reserved)."
    try:
        held = any(r.id == reservation.id for r, _ in ledger.reservations(reservation.data_key))
    except ValueError:                                    # cannot even be read: say what may be the case
        return ("Nothing was released. The ledger cannot be read, so its reservation may not have been "
                "dropped: if it was kept, it counts toward this data set's total until it expires"
                f"{_until(reservation)}.")
    return STILL_RESERVED.format(when=_until(reservation)) if held else NOTHING_SPENT


def _until(reservation) -> str:
    return f" ({reservation.expires_utc} UTC)" if reservation.expires_utc else ""
