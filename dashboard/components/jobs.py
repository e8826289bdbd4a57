"""The sidebar list of this browser tab's background jobs (see :mod:`core.jobs`): what each is, where it
stands, how far it got, where it runs, and Cancel while it is queued or running. The tab is named by its
owner token (:func:`dashboard.components.job_lines.job_owner`), which a reload keeps through the address."""
from __future__ import annotations

import streamlit as st

from core.jobs import LIVE, Job, job_queue
from core.releases import cancel_release
from dashboard.components.job_lines import LISTED_KEY, job_line, job_owner, keep_owner_in_address

REFRESH = 2.0
"""Seconds between redraws of the list while one of the session's jobs is queued or running."""
SHOWN = 8
"""Most recent jobs listed (older finished ones drop off the list, not out of the cache)."""

_warmed = False


def _cancel(job_id: int) -> None:
    for job in job_queue().jobs_of(job_owner()):
        if job.id == job_id:
            cancel_release(job)          # a release drops its reservation before this returns


def _draw(jobs: list[Job]) -> None:
    st.caption("Background work of this session")
    for job in jobs[-SHOWN:]:
        job_line(job)
        if job.state in LIVE:
            st.button("Cancel", key=f"job_cancel_{job.id}", on_click=_cancel, args=(job.id,))


def _warm_workers() -> None:
    """Start the job host (the process that forks job processes) once per server, before anyone presses Run."""
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
