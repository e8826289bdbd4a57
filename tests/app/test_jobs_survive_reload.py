"""A browser tab's background jobs survive a reload: the tab's owner token rides in the address
(``?jobs=``), so a new Streamlit session opened with it lists the jobs in the sidebar and can cancel them;
a session without it cannot. The token never reaches the join link a facilitator shares, a malformed token
is ignored, and the elicitation page's own ``?me=`` and ``?join=`` keep working beside it.

A reload is a second AppTest (a new session) given the first one's query parameters."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, RUNNING
from dashboard.components.job_lines import OWNER_KEY, OWNER_PARAM, valid_owner

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
ELICITATION = str(ROOT / "dashboard" / "tools" / "fairness_elicitation.py")


def _script():
    import streamlit as st

    from dashboard.components.progress import run_with_progress
    from tests.app.test_cancelled_job_stays_cancelled import PLAN, double

    st.session_state["answer"] = run_with_progress(double, PLAN, None, label="Doubling")


def _sidebar_lines(at) -> list[str]:
    return [m.value for m in at.sidebar.markdown]


def _open(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in query.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception
    return at


def test_a_tabs_first_job_puts_its_owner_in_the_address(thread_queue):
    at = AppTest.from_function(_script, default_timeout=60).run()
    assert not at.exception and at.session_state["answer"] == 42
    owner = at.session_state[OWNER_KEY]
    assert valid_owner(owner) and len(bytes.fromhex(owner)) == 16          # 128 random bits
    assert at.query_params[OWNER_PARAM] == owner
    assert [j.owner for j in thread_queue.jobs()] == [owner]


def test_a_reload_with_the_token_lists_the_running_job_and_cancels_it(thread_queue):
    first = _open()
    assert OWNER_PARAM not in first.query_params                            # no job yet: nothing in the address
    gate = threading.Event()
    job = thread_queue.submit(lambda progress=None: gate.wait(), owner=first.session_state[OWNER_KEY], key="sweep",
                       label="My sweep")
    first.run()
    token = first.query_params[OWNER_PARAM]
    assert token == first.session_state[OWNER_KEY]
    assert any("My sweep: running" in line for line in _sidebar_lines(first))

    stranger = _open()                                                     # another tab, no token
    assert not any("My sweep" in line for line in _sidebar_lines(stranger))
    assert not [b for b in stranger.button if b.key == f"job_cancel_{job.id}"]
    assert stranger.session_state[OWNER_KEY] != token

    reloaded = _open(**{OWNER_PARAM: token})                               # the same tab, reloaded
    assert reloaded.session_state[OWNER_KEY] == token
    assert any("My sweep: running" in line for line in _sidebar_lines(reloaded))
    assert job.state == RUNNING
    reloaded.button(key=f"job_cancel_{job.id}").click().run()
    assert not reloaded.exception
    assert job.state == CANCELLED
    gate.set()


@pytest.mark.parametrize("bad", ["not-a-token", "ABCDEF" * 6, "0" * 31, "g" * 32, "script"])
def test_a_malformed_token_is_ignored_and_a_new_one_made(thread_queue, bad):
    at = _open(**{OWNER_PARAM: bad})
    owner = at.session_state[OWNER_KEY]
    assert valid_owner(owner) and owner != bad
    thread_queue.submit(lambda progress=None: None, owner=owner, key=f"k{bad}", label="Mine")
    at.run()
    assert not at.exception and at.query_params[OWNER_PARAM] == owner     # replaced once the tab has a job


def test_the_join_link_never_carries_the_token(thread_queue, monkeypatch):
    import dashboard.components.join_link as join_link

    token = "0123456789abcdef" * 2
    address = f"http://10.0.0.5:8501/fairness-elicitation?{OWNER_PARAM}={token}"
    monkeypatch.setattr(join_link, "browser_page_url", lambda: address)     # what the facilitator's bar holds
    fac = AppTest.from_file(ELICITATION, default_timeout=120)
    fac.query_params[OWNER_PARAM] = token
    fac.run()
    assert not fac.exception
    fac.button(key="fe_create").click().run()
    fac.button(key="fe_key_saved").click().run()
    assert not fac.exception
    links = [c.value for c in fac.code if "?join=" in c.value]
    assert links and all(token not in link and OWNER_PARAM + "=" not in link for link in links)
    assert all(token not in m.value for m in fac.markdown)


def test_join_and_me_parameters_work_beside_the_token(thread_queue):
    token = "fedcba9876543210" * 2
    at = AppTest.from_file(ELICITATION, default_timeout=120)
    at.query_params["join"] = "AB12-CD34"
    at.query_params[OWNER_PARAM] = token
    at.run()
    assert not at.exception
    assert at.text_input(key="fe_join_code").value == "AB12-CD34"         # the join form, code filled in
    assert at.query_params["join"] == "AB12-CD34" and at.query_params[OWNER_PARAM] == token
    at.query_params.pop("join")
    at.query_params["me"] = "no-such-stakeholder"
    at.run()
    assert not at.exception
    assert "me" not in at.query_params                                    # a bad ?me= is still popped
    assert at.query_params[OWNER_PARAM] == token
