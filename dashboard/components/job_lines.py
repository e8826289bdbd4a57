"""This browser tab's background jobs as the sidebar names and draws them: the tab's owner token in the job
queue (kept in the address across a reload) and one job's line. The sidebar's list
(:mod:`dashboard.components.jobs`) and a page waiting on a job (:mod:`dashboard.components.progress`) both
draw from here, so neither imports the other."""
from __future__ import annotations

import re
import secrets

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.jobs import CANCELLED, DONE, FAILED, LIVE, Job

__all__ = ["LISTED_KEY", "OWNER_KEY", "OWNER_PARAM", "describe", "draw_line", "job_line", "job_owner",
           "keep_owner_in_address", "valid_owner"]

OWNER_KEY = "_jobs_owner"
OWNER_PARAM = "jobs"
"""The query parameter that carries a browser tab's job owner across a reload (a new Streamlit session)."""
_OWNER_FORM = re.compile(r"[0-9a-f]{32}")
LISTED_KEY = "_jobs_listed"
"""Session key: ids of the jobs the sidebar listed in this script run (set by ``jobs_sidebar``)."""
# Streamlit's bundled icon font: emoji need a font the machine may not have (a blank box instead)
_ICONS = {DONE: ":material/check_circle:", FAILED: ":material/error:", CANCELLED: ":material/stop_circle:"}


def valid_owner(token) -> bool:
    """Whether ``token`` has the form of an owner this module makes: 32 lower-case hex digits (128 bits)."""
    return isinstance(token, str) and _OWNER_FORM.fullmatch(token) is not None


def job_owner() -> str:
    """This browser tab's name in the job queue, or "script" outside Streamlit; the sidebar lists the jobs
    of this owner.

    The name is a random 128-bit token kept in the session state. Once the tab has a job the token also
    rides in the page address as ``?jobs=...`` (:func:`keep_owner_in_address`), so a reload (a new
    Streamlit session) adopts it from there and finds the tab's jobs again. A session keeps the token it
    has; a new session adopts a well-formed token from the address and otherwise makes a new one (a
    malformed value is ignored, not an error). Whoever holds the address can see and cancel those jobs, so
    links made for others (the join link and its QR code) are built without the page's query."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return "script"
    owner = st.session_state.get(OWNER_KEY)
    if owner is None:
        carried = st.query_params.get(OWNER_PARAM)
        owner = carried if valid_owner(carried) else secrets.token_hex(16)
        st.session_state[OWNER_KEY] = owner
    return owner


def keep_owner_in_address() -> None:
    """Write this tab's owner token into the address (``?jobs=``) when it is not there: after its first
    job, and again after a page change dropped the parameter. Other parameters (``?me=``, ``?join=``) are
    left as they are."""
    owner = job_owner()
    if valid_owner(owner) and st.query_params.get(OWNER_PARAM) != owner:
        st.query_params[OWNER_PARAM] = owner


def describe(job: Job) -> str:
    """One line for a job: "Computing: running on this machine, background worker (3/10, round 3)"."""
    text = f"{job.label}: {job.status_inline()}"
    if job.state in LIVE and job.total:
        text += f" ({job.done}/{job.total}" + (f", {job.message}" if job.message else "") + ")"
    if job.state == FAILED and job.error is not None:
        text += f": {job.error}"
    return text


def job_line(job: Job) -> None:
    """A job's icon and :func:`describe` line, with its progress while it is queued or running."""
    st.markdown(f"{_ICONS.get(job.state, ':material/hourglass_top:')} {describe(job)}")
    if job.state in LIVE:
        st.progress(min(1.0, job.done / job.total) if job.total else 0.0)


def draw_line(job: Job) -> None:
    """A job the page is waiting for, drawn as the list draws it (without Cancel: the page's bar has it)."""
    st.caption("Background work of this session")
    job_line(job)
