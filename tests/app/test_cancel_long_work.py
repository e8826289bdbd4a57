"""Long work on the district and synthesis pages offers Cancel; a cancelled run keeps the inputs and says so."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import dashboard.components.progress as progress_module
from core.contracts import Cancelled

TOOLS = Path(__file__).resolve().parents[2] / "dashboard" / "tools"


@pytest.fixture
def cancelling(monkeypatch, tmp_path):
    """Replace the shared progress bar with one whose Cancel was clicked (for bars that offer Cancel), with a
    result cache of its own: a result another test left in the run's cache would be answered without a bar."""
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    keys: list[str] = []

    @contextmanager
    def clicked(label, *, cancel_key=None, n_jobs=None):
        if cancel_key:
            keys.append(cancel_key)
            raise Cancelled(f"{label} was cancelled.")
        yield lambda done, total, message="": None

    monkeypatch.setattr(progress_module, "progress_bar", clicked)
    return keys


def test_district_runs_can_be_cancelled_and_keep_the_plan(cancelling):
    at = AppTest.from_file(str(TOOLS / "district_maps.py"), default_timeout=240).run()
    assert not at.exception, at.exception
    assert cancelling == ["dm_cancel"]
    assert any("cancelled" in i.value for i in at.info)
    assert not at.error
    assert at.session_state["dm_plan"].k >= 2                    # the plan built from the inputs is kept


def test_synthesis_sweep_can_be_cancelled_and_keeps_the_inputs(cancelling):
    at = AppTest.from_file(str(TOOLS / "stratified_synthesis.py"), default_timeout=240).run()
    assert not at.exception, at.exception
    at.text_input(key="ss_epsilons").input("0.77").run()
    at.button(key="ss_run").click().run()
    assert not at.exception, at.exception
    assert "ss_cancel" in cancelling
    assert any("cancelled" in i.value for i in at.info)
    assert not at.error
    assert at.text_input(key="ss_epsilons").value == "0.77"
