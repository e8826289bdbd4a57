"""Widgets drawn from a plugin's Params dataclass (one shape for every registry)."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import streamlit as st

from core.contracts import Spec, param_info


def _label(spec: Spec, name: str, meta: dict) -> str:
    return f"{meta.get('label') or name.replace('_', ' ')} ({spec.label})"


def params_widgets(spec: Spec, key: str, *, columns: Sequence[str] = (), lens: Sequence[str] = (),
                   container=st, persist_state: str | None = None, hide: Sequence[str] = ()) -> Any:
    """One widget per field of ``spec.params``; returns the Params built from them.

    Field types pick the widget: bool -> checkbox, int/float -> number input within its bounds,
    a value with ``choices`` -> radio (or multiselect for a tuple), ``kind="columns"`` /
    ``"column"`` / ``"lens"`` -> pickers of the data's columns. Invalid combinations raise
    ``ValueError`` from the Params' own checks. ``persist_state`` is passed to every widget
    (``"session"`` keeps the values when the user leaves the page and comes back). Fields named in
    ``hide`` get no widget and keep their default (for a value the page sets elsewhere).
    """
    values: dict[str, Any] = {}
    keep = {"persist_state": persist_state} if persist_state else {}
    for f, meta in param_info(spec.params):
        if f.name in hide:
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        wkey = f"{key}_{spec.key}_{f.name}"
        label, help_ = _label(spec, f.name, meta), meta.get("help") or None
        kind, choices = meta.get("kind", ""), meta.get("choices")
        if kind in ("columns", "lens"):
            options = list(lens if kind == "lens" else columns)
            chosen = [c for c in (default or ()) if c in options]
            values[f.name] = tuple(container.multiselect(label, options, default=chosen, key=wkey, help=help_, **keep))
        elif kind == "column":
            options = list(columns)
            values[f.name] = container.selectbox(label, options, index=options.index(default)
                                                 if default in options else 0, key=wkey, help=help_, **keep)
        elif isinstance(default, bool):
            values[f.name] = container.checkbox(label, value=default, key=wkey, help=help_, **keep)
        elif choices is not None and isinstance(default, tuple):
            opts = list(choices)
            fmt = choices.get if isinstance(choices, dict) else str
            values[f.name] = tuple(container.multiselect(label, opts, default=list(default), key=wkey,
                                                         format_func=fmt, help=help_, **keep))
        elif choices is not None:
            opts = list(choices)
            fmt = choices.get if isinstance(choices, dict) else str
            values[f.name] = container.radio(label, opts, index=opts.index(default), key=wkey,
                                             format_func=fmt, horizontal=True, help=help_, **keep)
        elif isinstance(default, int):
            low, high = meta.get("low"), meta.get("high")
            values[f.name] = int(container.number_input(
                label, min_value=None if low is None else int(low), max_value=None if high is None else int(high),
                value=int(default), step=int(meta.get("step") or 1), key=wkey, help=help_, **keep))
        elif isinstance(default, float):
            low, high = meta.get("low"), meta.get("high")
            values[f.name] = float(container.number_input(
                label, min_value=None if low is None else float(low), max_value=None if high is None else float(high),
                value=float(default), step=meta.get("step"), format="%.4g", key=wkey, help=help_, **keep))
        else:
            values[f.name] = default
    return spec.params(**values)
