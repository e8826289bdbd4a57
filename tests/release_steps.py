"""AppTest steps shared by the page tests: a real release goes through one confirmation."""
from __future__ import annotations


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
