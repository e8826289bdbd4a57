"""A page's first render is interactive: District maps, Group fairness and Stratified synthesis draw their
opening result at once, in the server, while another session's batch job holds every slot; they never enter
the batch queue for it, nor does District maps' first switch to another state. A later change of a setting
does go to the queue (it may be long), as does a synthesis sweep."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import RUNNING

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")


@pytest.mark.parametrize("page, label, switch", [
    ("tools/district_maps.py", "Drawing plans and noisy runs", None),
    ("tools/district_maps.py", "Drawing plans and noisy runs", ("dm_geo", "georgia")),
    ("tools/group_fairness.py", "Training and ranking", None),
    ("tools/stratified_synthesis.py", "Computing", None)])
def test_the_first_render_draws_while_another_sessions_batch_job_holds_the_slot(traced_queue, page, label, switch):
    gate = threading.Event()
    held = traced_queue.submit(lambda progress=None: gate.wait(), owner="another session", key="held",
                               label="Another session's sweep")
    try:
        at = AppTest.from_file(APP, default_timeout=300).run()
        at.switch_page(page).run()
        if switch is not None:                                           # the first switch of state
            at.radio(key=switch[0]).set_value(switch[1]).run()
        assert not at.exception and not at.error
        assert len(at.metric) > 0                                        # the result is drawn
        assert held.state == RUNNING                                     # ... while the slot was still held
        assert ("queued", label) not in traced_queue.events              # never queued behind it
        assert traced_queue.events.index(("interactive-done", label)) > \
            traced_queue.events.index(("started", "Another session's sweep"))
        assert [j.label for j in traced_queue.jobs()] == ["Another session's sweep"]
    finally:
        gate.set()


def _asks_for_plans():
    import streamlit as st

    from dashboard.components.progress import first_render
    from tests.app.test_cancelled_job_stays_cancelled import Plan

    plan = Plan(st.session_state.get("value", 1))
    other = first_render("other page", plan) if plan.value == 2 else None    # opened only at the second plan
    st.session_state.setdefault("seen", []).append((first_render("page", plan), other))


def test_only_the_first_plan_a_page_asks_for_in_a_session_skips_the_queue():
    """The rule the pages above use: a rerun with the opening settings (or a return to them) is drawn at once,
    any other plan is batch work; each page keeps its own first plan."""
    at = AppTest.from_function(_asks_for_plans, default_timeout=30).run()
    at.run()                                       # a rerun, same settings
    at.session_state["value"] = 2
    at.run()                                       # a changed setting
    at.session_state["value"] = 1
    at.run()                                       # back to the opening settings
    assert not at.exception
    assert at.session_state["seen"] == [(True, None), (True, None), (False, True), (True, None)]
