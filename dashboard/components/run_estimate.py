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

from core.estimates import LONG_RUN_SECONDS, RunEstimate, estimate


def plan_estimate(plan, data=None) -> RunEstimate | None:
    """The estimate of ``plan``, or None when there is none for it (an estimate never blocks a run)."""
    try:
        return estimate(plan, data)
    except Exception:   # noqa: BLE001 - a missing or failing estimate must not stop the page
        return None


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
        where.caption(f":material/schedule: {est.sentence()}.")
        return True
    box = where.container(border=True)
    box.warning(f"{est.sentence()} (between {est.low / 60:.0f} and {est.high / 60:.0f} minutes). "
                f"Runs over {threshold / 60:.0f} minutes ask before starting.", icon=":material/schedule:")
    if est.suggestions:
        box.markdown("**Faster:**\n" + "\n".join(f"- {s}" for s in est.suggestions))
    digest = plan.digest()[:12] if hasattr(plan, "digest") else "plan"
    return bool(box.checkbox("Start anyway", key=f"{key}_start_{digest}",
                             help="Tick to allow this long run; the Run button is enabled once ticked."))
