"""A page's first render is interactive: District maps, Group fairness and Stratified synthesis draw their
opening result at once, in the server, while another session's batch job holds every slot; they never enter
the batch queue for it. Their opening plans are short by their own estimates (``core.estimates.work_class``,
on the tests' fixed coefficients); a plan estimated longer goes to the queue, whether or not it is the
first a page draws (District maps' ReCom chain on the Georgia geography, a synthesis sweep)."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import RUNNING

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")


@pytest.mark.parametrize("page, label", [
    ("tools/district_maps.py", "Drawing plans and noisy runs"),
    ("tools/group_fairness.py", "Training and ranking"),
    ("tools/stratified_synthesis.py", "Computing")])
def test_the_first_render_draws_while_another_sessions_batch_job_holds_the_slot(traced_queue, page, label):
    gate = threading.Event()
    held = traced_queue.submit(lambda progress=None: gate.wait(), owner="another session", key="held",
                               label="Another session's sweep")
    try:
        at = AppTest.from_file(APP, default_timeout=300).run()
        at.switch_page(page).run()
        assert not at.exception and not at.error
        assert len(at.metric) > 0                                        # the result is drawn
        assert held.state == RUNNING                                     # ... while the slot was still held
        assert ("queued", label) not in traced_queue.events              # never queued behind it
        assert traced_queue.events.index(("interactive-done", label)) > \
            traced_queue.events.index(("started", "Another session's sweep"))
        assert [j.label for j in traced_queue.jobs()] == ["Another session's sweep"]
    finally:
        gate.set()
