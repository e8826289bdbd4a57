"""AppTest steps shared by the page tests: a real release goes through one confirmation; a small page whose
release job waits for the test's gate, for the release component's own tests."""
from __future__ import annotations

import threading


def has_button(at, key: str) -> bool:
    return any(b.key == key for b in at.button)


def decide_cap(at, key: str, cap: float | None = None):
    """Answer the first-release question: an explicit 'no cap' (default) or a cap of ``cap`` epsilon."""
    if cap is None:
        at.radio(key=f"{key}_cap_choice").set_value("No cap").run()
    else:
        at.number_input(key=f"{key}_cap_amount").set_value(cap).run()
    at.button(key=f"{key}_cap_save").click().run()
    return at


def confirm_release(at, key: str, cap: float | None = None):
    """Press the release button ``key`` and confirm, deciding the cap first when the page asks for it."""
    at.button(key=key).click().run()
    if has_button(at, f"{key}_cap_save"):
        decide_cap(at, key, cap)
    at.button(key=f"{key}_confirm").click().run()
    return at


def press(at, key: str):
    """Press ``key``, confirming when it opened a release confirmation (a button that may or may not
    release, such as one that reuses a copy already released when there is one)."""
    at.button(key=key).click().run()
    if has_button(at, f"{key}_cap_save"):
        decide_cap(at, key)
    if has_button(at, f"{key}_confirm"):
        at.button(key=f"{key}_confirm").click().run()
    return at


# ------------------------------------------------------------------------------------------ a gated release

#: the gated release's data set (a declared name, so the ledger accepts a real release of it)
GATED_KEY = "dataset:people"
#: set when the gated computation starts; the computation waits for ``GATE`` (tests clear both first)
STARTED, GATE = threading.Event(), threading.Event()


def gated_counts(x: int, progress=None) -> dict:
    """A release's computation that reports its start, then waits until the test opens ``GATE``."""
    progress(0, 1, "drawing")
    STARTED.set()
    assert GATE.wait(60), "the test never opened the gate"
    progress(1, 1, "drawn")
    return {"counts": x}


def gated_release(epsilon: float = 0.25):
    """A real release of ``GATED_KEY`` whose computation is :func:`gated_counts` (a fresh key per build, as a
    page's builder makes one per press)."""
    import secrets

    from core.privacy.ledger import Spend
    from core.privacy.project_ledger import LedgerRelease
    from core.releases import Release

    entry = LedgerRelease(GATED_KEY, f"test counts {secrets.token_hex(8)}", "release", "Test page", "test counts",
                          f"test counts, epsilon {epsilon:g}", "d" * 64, (Spend("counts", epsilon, "epsilon"),),
                          "people")
    return Release("test", entry, gated_counts, (7,))


def gated_page():
    """A page with one release button whose release runs as a background job, and the sidebar's job list (an
    AppTest runs this function's body). With ``away`` set in the session, the curator is on another page:
    only the sidebar is drawn."""
    import streamlit as st

    from dashboard.components.jobs import jobs_sidebar
    from dashboard.components.release_confirm import ReleaseJob, release_button
    from tests.release_steps import gated_release

    if st.session_state.get("away"):
        jobs_sidebar()
        return
    made = release_button("Release the counts", key="rel", release=gated_release(),
                          job=ReleaseJob("Releasing test counts", "rel_bar_cancel"))
    if made is not None:
        st.session_state["rel_result"] = made
        st.success(f"Released: {made['counts']}")
    jobs_sidebar()


#: a message here makes :func:`inline_counts` fail with it (tests set and clear it)
FAIL: dict[str, str] = {}


def inline_counts(x: int, progress=None) -> str:
    """A release's computation made in the page's run; fails with ``FAIL["message"]`` when set."""
    if "message" in FAIL:
        raise ValueError(FAIL["message"])
    return f"counts {x}"


def inline_page():
    """A page with one release button whose release is made in the page's run (an AppTest runs this body)."""
    import streamlit as st

    from core.privacy.ledger import Spend
    from core.privacy.project_ledger import LedgerRelease
    from core.releases import Release
    from dashboard.components.release_confirm import release_button
    from tests.release_steps import GATED_KEY, inline_counts

    entry = LedgerRelease(GATED_KEY, "inline-release", "release", "Test page", "test action",
                          "test counts, epsilon 0.25", "d" * 64, (Spend("planned", 0.25, "epsilon"),), "people")
    made = release_button("Release the counts", key="rel", release=Release("test", entry, inline_counts, (7,)))
    if made is not None:
        st.success(f"Released: {made}")
