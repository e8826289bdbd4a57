"""The sidebar list of this browser tab's background jobs (see :mod:`core.jobs`): what each is, where it
stands, how far it got, where it runs, and Cancel while it is queued or running. The tab is named by its
owner token (:func:`dashboard.components.progress.job_owner`), which a reload keeps through the address."""
from __future__ import annotations

import streamlit as st

from core.jobs import CANCELLED, DONE, FAILED, LIVE, Job, job_queue
from dashboard.components.progress import LISTED_KEY, job_owner, keep_owner_in_address

REFRESH = 2.0
"""Seconds between redraws of the list while one of the session's jobs is queued or running."""
SHOWN = 8
"""Most recent jobs listed (older finished ones drop off the list, not out of the cache)."""

# Streamlit's bundled icon font: emoji need a font the machine may not have (a blank box instead)
_ICONS = {DONE: ":material/check_circle:", FAILED: ":material/error:", CANCELLED: ":material/stop_circle:"}
_warmed = False


def _cancel(job_id: int) -> None:
    for job in job_queue().jobs_of(job_owner()):
        if job.id == job_id:
            job.cancel()


def describe(job: Job) -> str:
    """One line for a job: "Computing: running on this machine, background worker (3/10, round 3)"."""
    text = f"{job.label}: {job.status_inline()}"
    if job.state in LIVE and job.total:
        text += f" ({job.done}/{job.total}" + (f", {job.message}" if job.message else "") + ")"
    if job.state == FAILED and job.error is not None:
        text += f": {job.error}"
    return text


def _draw(jobs: list[Job]) -> None:
    st.caption("Background work of this session")
    for job in jobs[-SHOWN:]:
        _line(job)
        if job.state in LIVE:
            st.button("Cancel", key=f"job_cancel_{job.id}", on_click=_cancel, args=(job.id,))


def _line(job: Job) -> None:
    st.markdown(f"{_ICONS.get(job.state, ':material/hourglass_top:')} {describe(job)}")
    if job.state in LIVE:
        st.progress(min(1.0, job.done / job.total) if job.total else 0.0)


def draw_line(job: Job) -> None:
    """A job the page is waiting for, drawn as the list draws it (without Cancel: the page's bar has it)."""
    st.caption("Background work of this session")
    _line(job)


def _warm_workers() -> None:
    """Start the job processes' forkserver once per server, before anyone presses Run."""
    global _warmed
    if not _warmed and st.runtime.exists():             # a served app (not a script or AppTest)
        _warmed = True
        executor = job_queue().executor
        process = getattr(executor, "process", None)
        if process is not None:
            process.warm()


def jobs_sidebar() -> None:
    """List this session's jobs in the sidebar (nothing when it has none); the list redraws itself every
    :data:`REFRESH` seconds while a job is queued or running, without rerunning the page."""
    _warm_workers()
    jobs = job_queue().jobs_of(job_owner())
    st.session_state[LISTED_KEY] = frozenset(j.id for j in jobs[-SHOWN:])
    if not jobs:
        return
    keep_owner_in_address()          # a reload of this tab finds these jobs again
    with st.sidebar:
        if any(j.state in LIVE for j in jobs):
            st.fragment(run_every=REFRESH)(_live_list)()
        else:
            _draw(jobs)


def _live_list() -> None:
    _draw(job_queue().jobs_of(job_owner()))
