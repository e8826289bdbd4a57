"""Synthesizers offered on the page and to the audit: key -> (label, factory)."""
from __future__ import annotations

from typing import Callable

from core.synthesis.synthesizers import MST, IndependentMarginals

SYNTHESIZERS: dict[str, tuple[str, Callable[[], object]]] = {
    "independent": ("Independent marginals (baseline)", IndependentMarginals),
    "mst": ("MST (maximum spanning tree)", MST),
}


def make_synthesizer(key: str):
    """A fresh synthesizer for a registry key."""
    if key not in SYNTHESIZERS:
        raise ValueError(f"Unknown synthesizer {key!r}; choose one of {sorted(SYNTHESIZERS)}.")
    return SYNTHESIZERS[key][1]()
