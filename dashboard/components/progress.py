"""Bind core's progress callbacks to a Streamlit progress bar."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import streamlit as st

T = TypeVar("T")


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int, str], None]]:
    """Yield a ``progress(done, total, message)`` callback drawn as ``st.progress``; cleared after."""
    bar = st.progress(0.0, text=label)

    def update(done: int, total: int, message: str = "") -> None:
        fraction = 0.0 if total <= 0 else min(1.0, done / total)
        bar.progress(fraction, text=f"{label}: {message} ({done}/{total})" if message else label)

    try:
        yield update
    finally:
        bar.empty()


def session_memo(store_key: str, digest: str, compute: Callable[[Callable], T], label: str,
                 limit: int = 12) -> T:
    """Per-session memo of ``compute(progress)`` by config digest, run behind a progress bar once.

    The bar sits in a placeholder created on every run, so the page keeps the same element layout
    whether or not the result was memoised (otherwise tabs and widgets below would reset).
    """
    slot = st.empty()
    store = st.session_state.setdefault(store_key, {})
    if digest not in store:
        with slot.container():
            with progress_bar(label) as progress:
                remember(store_key, digest, compute(progress), limit)
        slot.empty()
    return store[digest]


def remember(store_key: str, key, value: T, limit: int = 12) -> T:
    """Keep ``value`` under ``key`` in the per-session dict ``store_key``, holding at most ``limit``
    entries (oldest out), so a long session that tries many settings does not pile up results."""
    store = st.session_state.setdefault(store_key, {})
    store.pop(key, None)
    while len(store) >= limit:
        store.pop(next(iter(store)))
    store[key] = value
    return value
