"""A cancelled computation is not started again by merely coming back to its page: the page says it
was cancelled and offers "Start again"; only that click (or the page's own Run button) submits it.
Interactive work (a plan whose estimate is short, ``core.estimates.work_class``) runs at once in the server
even when every batch slot is taken."""
from __future__ import annotations

import threading

from streamlit.testing.v1 import AppTest

from core.estimates import ESTIMATORS, Work
from core.jobs import CANCELLED, run_key


def _script():
    import streamlit as st

    from core.contracts import Cancelled
    from dashboard.components.progress import run_with_progress
    from tests.app.test_cancelled_job_stays_cancelled import PLAN, QUICK, double

    plan = QUICK if st.session_state.get("quick") else PLAN
    try:
        st.session_state["answer"] = run_with_progress(double, plan, None, label="Doubling", cancel_key="dbl")
        st.write(f"answer {st.session_state['answer']}")
    except Cancelled:
        st.info("cancelled")


class Plan:
    """The smallest thing a run takes: a value, a digest, and the seconds its cost model predicts."""

    def __init__(self, value: int, seconds: float = 600.0) -> None:
        self.value, self.seconds = value, seconds

    def digest(self) -> str:
        return f"plan-{self.value}"


if Plan not in ESTIMATORS:      # the page script imports this module under its own name too
    ESTIMATORS.register(Plan, "doubling")(lambda plan, data, costs: Work("double a number", 1, plan.seconds))

PLAN = Plan(21)                 # predicted ten minutes: batch work
QUICK = Plan(21, seconds=1.0)   # predicted a second: interactive


def double(plan, data=None, progress=None):
    return 2 * plan.value


def _as_the_page_sees_them():
    """``PLAN`` and ``double`` imported under the name the page script uses, so their job key matches."""
    import importlib

    module = importlib.import_module("tests.app.test_cancelled_job_stays_cancelled")
    return module.PLAN, module.double


def test_a_cancelled_plan_waits_for_start_again(thread_queue):
    plan, run = _as_the_page_sees_them()
    key = run_key(run, plan, None)
    gate = threading.Event()
    thread_queue.submit(lambda progress=None: gate.wait(), owner="another session", key="other", label="other")
    thread_queue.submit(run, plan, None, owner="me", key=key, label="Doubling")       # queued behind "other"
    assert thread_queue.cancel_key(key) and thread_queue.find(key).state == CANCELLED
    at = AppTest.from_function(_script, default_timeout=20).run()
    assert not at.exception
    assert [i.value for i in at.info] == ["cancelled"]
    assert thread_queue.find(key).state == CANCELLED                  # nothing was submitted again
    gate.set()
    again = next(b for b in at.button if b.label == "Start again")
    again.click().run()
    assert not at.exception and at.session_state["answer"] == 42


def test_interactive_work_runs_while_every_batch_slot_is_taken(thread_queue):
    gate = threading.Event()
    held = thread_queue.submit(lambda progress=None: gate.wait(), owner="another session", key="held", label="held")
    at = AppTest.from_function(_script, default_timeout=20)
    at.session_state["quick"] = True
    at.run()
    assert not at.exception and at.session_state["answer"] == 42
    assert thread_queue.find(run_key(*reversed(_as_the_page_sees_them()), None)) is None        # never went through the batch queue
    assert held.state == "running"
    gate.set()
