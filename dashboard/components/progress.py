"""Bind core's progress callbacks to a Streamlit progress bar, with a Cancel button and a caption
saying where the work runs (this machine's cores or a Dask cluster); a page's long run goes to the
background job queue (:mod:`core.jobs`) and the page follows it here."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.cache import config_digest, memory
from core.cluster import backend_for, last_failure, scheduler_address
from core.contracts import Cancelled
from core.estimates import observe
from core.jobs import CANCELLED, REUSABLE, job_queue, run_key
from dashboard.components import job_lines
from dashboard.components.job_lines import LISTED_KEY, job_owner, keep_owner_in_address
from dashboard.components.run_estimate import plan_estimate

T = TypeVar("T")


def where_work_runs(n_jobs: int | None = None) -> str:
    """A caption for the page: "Runs on 2 local cores" or "Runs on Dask cluster tcp://...: 4 workers"."""
    return f"Runs on {backend_for(n_jobs).describe()}"


def _stopped(label: str) -> None:
    st.toast(f"{label}: stopped; the settings are kept.")


def is_cancel_click(interrupt: BaseException, cancel_key: str) -> bool:
    """Whether Streamlit's rerun request (raised at a bar update while the work runs) is the click
    of this bar's Cancel button: a keyed widget's id ends with its key."""
    states = getattr(getattr(interrupt, "rerun_data", None), "widget_states", None)
    for widget in getattr(states, "widgets", ()):
        if widget.id.endswith(f"-{cancel_key}") and widget.WhichOneof("value") == "trigger_value" \
                and widget.trigger_value:
            return True
    return False


@contextmanager
def progress_bar(label: str, *, cancel_key: str | None = None,
                 n_jobs: int | None = None) -> Iterator[Callable[[int, int, str], None]]:
    """Yield a ``progress(done, total, message)`` callback drawn as ``st.progress``; cleared after.

    A caption says where the work runs. With ``cancel_key`` a Cancel button sits under the bar.
    Streamlit answers its click by stopping the running script (the work unwinds and outstanding
    cluster tasks are cancelled) and running the page again, with a toast saying the work stopped.
    If that rerun starts the same work again, it raises :class:`core.contracts.Cancelled` before
    any work is done, which the page catches to keep its inputs and results. With fast reruns
    off, the click instead surfaces at the next bar update, and the callback raises ``Cancelled``
    there. A scheduler that could not be reached leaves a warning on the page.
    """
    slot = st.empty()
    box = slot.container()
    backend = backend_for(n_jobs)
    fallback = last_failure(scheduler_address())
    if fallback:
        st.warning(fallback)
    box.caption(f"Runs on {backend.describe()}")
    bar = box.progress(0.0, text=label)
    cancelled = bool(cancel_key) and box.button("Cancel", key=cancel_key, on_click=_stopped, args=(label,))
    if cancelled:
        slot.empty()
        raise Cancelled(f"{label} was cancelled.")

    def update(done: int, total: int, message: str = "") -> None:
        fraction = 0.0 if total <= 0 else min(1.0, done / total)
        try:
            bar.progress(fraction, text=f"{label}: {message} ({done}/{total})" if message else label)
        except BaseException as interrupt:  # Streamlit's rerun request surfaces at an element update
            if cancel_key and is_cancel_click(interrupt, cancel_key):
                raise Cancelled(f"{label} was cancelled.") from None
            raise

    try:
        yield update
    finally:
        slot.empty()
        lost = last_failure(scheduler_address())
        if lost and lost != fallback:
            st.warning(lost)


POLL = 0.1
"""Seconds between looks at a background job while the page waits for it."""
HEARTBEAT = 0.5
"""Seconds between bar updates when nothing changed (an update is where Streamlit's stop requests and a
Cancel click reach the waiting page)."""


def run_with_progress(run: Callable[..., T], plan, data=None, *, label: str,
                      cancel_key: str | None = None, n_jobs: int | None = None, batch: bool = True,
                      restart: bool = False) -> T:
    """``run(plan, data)`` for a page: answered straight from the result cache when it holds the plan
    (no job, no bar flickers on a display change), otherwise as a background batch job
    (:mod:`core.jobs`) that the page waits for behind :func:`progress_bar`, with Cancel.

    The bar says where the job stands ("queued behind 2 jobs", "running on this machine, background
    worker") and moves with its progress. When Streamlit stops the script while it waits (a widget
    change, another page), the job runs on; the next run with the same plan attaches to it again, or
    finds its result. A Cancel click cancels the job. ``run`` is an area's cached ``run`` (it has
    ``is_cached``); :class:`core.contracts.Cancelled` and the job's ``ValueError`` reach the caller,
    which keeps the user's inputs and says what happened.

    A plan whose job was cancelled is not started again by merely coming back to the page: the page
    gets :class:`Cancelled` until the user asks again (``restart``, e.g. a Run button pressed in this
    script run, or the "Start again" button shown here). ``batch=False`` marks interactive work (a
    page's first render, a quick preview): it runs in this process at once and never queues behind
    other sessions' batch jobs.
    """
    is_cached = getattr(run, "is_cached", None)
    if is_cached is not None and is_cached(plan, data):
        return run(plan, data)
    if not batch:
        with progress_bar(label, cancel_key=cancel_key, n_jobs=n_jobs) as bar:
            return job_queue().interactive(run, plan, data, owner=job_owner(), label=label, progress=bar)
    key = run_key(run, plan, data)
    last = job_queue().find(key)
    if last is not None and last.state == CANCELLED and not restart:
        again = st.button("Start again", key=f"{cancel_key or 'run'}_again_{key[-12:]}",
                          help="This computation was cancelled; start it again with the same settings.")
        if not again:
            raise Cancelled(f"{label} was cancelled.")
    result = run_job(run, plan, data, key=key, label=label, cancel_key=cancel_key, n_jobs=n_jobs)
    observe_run(plan, data, job_queue().find(key))
    return result


def first_render(page: str, plan) -> bool:
    """Whether ``plan`` is what ``page`` computes on its first render in this browser session: the first
    plan the page asked for here (kept by digest). A page passes ``batch=not first_render(...)`` to
    :func:`run_with_progress`, so opening it draws at once, in the server, and never waits behind other
    sessions' batch jobs; the runs its later settings ask for go to the batch queue."""
    digest = plan.digest()
    return st.session_state.setdefault(f"_first_plan_{page}", digest) == digest


MIN_OBSERVED_SECONDS = 5.0
"""Runs predicted shorter than this are not used to correct estimates (start-up costs dominate them)."""


def observe_run(plan, data, job) -> None:
    """Tell the run-time estimates (:func:`core.estimates.observe`) how long a finished job took, once
    per job, so later estimates on this server follow the machine's real speed and load."""
    if job is None or job.seconds is None or job.observed or os.environ.get("DASHBOARD_OBSERVE_RUNS") == "0":
        return
    job.observed = True
    est = plan_estimate(plan, data)
    if est is not None and est.seconds >= MIN_OBSERVED_SECONDS:
        observe(est, job.seconds)


def run_job(func: Callable[..., T], *args, key: str, label: str, cancel_key: str | None = None,
            n_jobs: int | None = None) -> T:
    """``func(*args, progress=...)`` as a background batch job of this session, followed behind
    :func:`progress_bar` (with Cancel when ``cancel_key`` is given); its result, or its exception.

    ``key`` names what determines the result (a run's name, a plan digest, a data fingerprint): a job
    queued, running or done under the same key is attached to instead of starting another, so a page
    left while its job runs finds it again. ``func`` should be a module-level function of ``core`` with
    picklable arguments, so the job runs in a process of its own; anything else runs on a server thread.
    A Cancel click (or a cancel from the sidebar) cancels the job and raises
    :class:`core.contracts.Cancelled`; a stopped script (another page, a widget change) leaves it running.
    """
    queue = job_queue()
    try:
        with progress_bar(label, cancel_key=cancel_key, n_jobs=n_jobs) as bar:
            job = queue.submit(func, *args, owner=job_owner(), key=key, label=label)
            keep_owner_in_address()
            return follow(job, bar)
    except Cancelled:
        job = queue.find(key)
        if job is None or job.owner == job_owner():
            queue.cancel_key(key)   # another session following the same plan only stops waiting for it
        raise


def job_key(func: Callable, *parts) -> str:
    """The key of a job that calls ``func`` on what ``parts`` name (JSON-able: row keys, a digest, a
    nonce), for work that has no plan: the function's name, the digest of the parts and the code version
    (the result cache's folder), as :func:`core.jobs.run_key` names a plan's run."""
    name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
    return f"{name}:{config_digest(list(parts))}@{memory().location}"


def attached_job(key: str):
    """The job of ``key`` a page may attach to (queued, running or finished with a result), else None."""
    job = job_queue().find(key)
    return job if job is not None and job.state in REUSABLE else None


def follow(job, bar: Callable[[int, int, str], None]):
    """Wait for ``job``, drawing its state and progress on ``bar`` while it changes (and at least every
    :data:`HEARTBEAT` seconds); its result, or its exception.

    The sidebar's job list was drawn before this run submitted the job, and it cannot redraw itself while
    the run waits here, so a job it did not list gets a line of its own at the end of the sidebar, redrawn
    with the bar (no Cancel there: the page's own Cancel sits under its bar); the line keeps the job's final
    state after the wait, as the list shows it on the next run."""
    line = _sidebar_line(job)
    shown, beat = None, time.monotonic()
    while not job.wait(POLL):
        now = (job.status(), job.done, job.total, job.message)
        if now != shown or time.monotonic() - beat >= HEARTBEAT:
            shown, beat = now, time.monotonic()
            if line is not None:
                line()
            bar(job.done, job.total, job.status_inline() + (f"; {job.message}" if job.message else ""))
    if line is not None:
        line()
    return job.outcome()


def _sidebar_line(job) -> Callable[[], None] | None:
    """A redraw of ``job``'s line in a sidebar slot of this run, or None when the sidebar already lists it
    (or there is no script run to draw in)."""
    if get_script_run_ctx(suppress_warning=True) is None or job.id in st.session_state.get(LISTED_KEY, ()):
        return None
    slot = st.sidebar.empty()

    def draw() -> None:
        with slot.container():
            job_lines.draw_line(job)
    return draw


def remember(store_key: str, key, value: T, limit: int = 12) -> T:
    """Keep ``value`` under ``key`` in the per-session dict ``store_key``, holding at most ``limit``
    entries (oldest out), so a long session that tries many settings does not pile up results."""
    store = st.session_state.setdefault(store_key, {})
    store.pop(key, None)
    while len(store) >= limit:
        store.pop(next(iter(store)))
    store[key] = value
    return value
