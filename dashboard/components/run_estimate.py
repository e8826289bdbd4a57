"""Before a long run: what it will do and roughly how long it takes here, and a confirmation when long.

``run_estimate_notice(plan, data, key=...)`` sits by a page's Run button. It states the estimate of
``core.estimates.estimate`` ("About 12 minutes here: 36 strata x 6 fits = 216 GEM fits"); when the
prediction exceeds ``LONG_RUN_SECONDS`` (3 minutes) it lists what would make the run faster and asks
for a "Start anyway" tick, and returns whether the run may start. The tick belongs to the plan it was
given for: another plan asks again. A plan already in the result cache starts without asking.
"""
from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from core.estimates import INTERACTIVE, LONG_RUN_SECONDS, RunEstimate, class_of, estimate
from core.jobs import describe_limit, job_queue


def plan_estimate(plan, data=None) -> RunEstimate | None:
    """The estimate of ``plan``, or None when there is none for it (an estimate never blocks a run)."""
    try:
        return estimate(plan, data)
    except Exception:   # noqa: BLE001 - a missing or failing estimate must not stop the page
        return None


def background_limit(est: RunEstimate) -> str:
    """What the page says of the time limit of the work it will start: nothing for interactive work (run at
    once, here); for a background job the queue's limit, after which the job is cancelled with a message
    (``core.jobs``), and a warning when the estimate's upper end passes it."""
    if class_of(est) == INTERACTIVE:
        return ""
    limit = job_queue().limit
    if est.high > limit:
        return (f" Its upper estimate passes the background limit of {describe_limit(limit)}, when the run "
                "would be stopped: make it smaller, or ask for a longer limit (DASHBOARD_JOB_LIMIT).")
    return f" It runs in the background and is stopped if it runs past {describe_limit(limit)}."


def run_estimate_notice(plan, data=None, *, key: str, run: Callable[..., Any] | None = None,
                        threshold: float = LONG_RUN_SECONDS, container=None) -> bool:
    """Show the estimate of ``plan`` and return whether its run may start.

    ``run`` (an area's cached run) lets a plan already computed start with nothing said. A run predicted
    above ``threshold`` seconds needs the "Start anyway" tick (keyed by ``key`` and the plan's digest).
    """
    if plan is None:
        return True
    is_cached = getattr(run, "is_cached", None)
    if is_cached is not None:
        try:
            if is_cached(plan, data):
                return True
        except Exception:   # noqa: BLE001 - cache look-ups that fail simply do not skip the notice
            pass
    est = plan_estimate(plan, data)
    if est is None:
        return True
    where = st if container is None else container
    st.session_state[f"{key}_estimate"] = est       # what the page said (tests, and the run's observation)
    if not est.is_long(threshold):
        where.caption(f":material/schedule: {est.sentence()}.{background_limit(est)}")
        return True
    box = where.container(border=True)
    box.warning(f"{est.sentence()} (between {est.low / 60:.0f} and {est.high / 60:.0f} minutes). "
                f"Runs over {threshold / 60:.0f} minutes ask before starting.{background_limit(est)}",
                icon=":material/schedule:")
    if est.suggestions:
        box.markdown("**Faster:**\n" + "\n".join(f"- {s}" for s in est.suggestions))
    digest = plan.digest()[:12] if hasattr(plan, "digest") else "plan"
    return bool(box.checkbox("Start anyway", key=f"{key}_start_{digest}",
                             help="Tick to allow this long run; the Run button is enabled once ticked."))
