"""Bind core's progress callbacks to a Streamlit progress bar."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import streamlit as st


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
