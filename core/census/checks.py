"""Checks for plan fields: every bad value becomes a ValueError that says what to change.

Values come from widgets and from saved reports, so anything may arrive: text, None, NaN, lists,
integers too large for a float. Nothing here lets a TypeError or OverflowError through.
"""
from __future__ import annotations

import math

import numpy as np


def number(value, what: str, low: float, high: float, *, open_low: bool = False) -> float:
    """A finite number in [low, high] (or (low, high] with ``open_low``)."""
    if open_low and low == 0:
        text = f"a positive finite number (at most {high:g})"
    else:
        text = f"a finite number {'above' if open_low else 'at least'} {low:g} and at most {high:g}"
    problem = ValueError(f"{what} must be {text}; got {value!r:.40}.")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise problem
    try:
        x = float(value)
    except OverflowError:
        raise problem from None
    if not math.isfinite(x) or not (low < x if open_low else low <= x) or x > high:
        raise problem
    return x


def choice(value, what: str, options) -> str:
    """One of ``options`` (compared as text keys)."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{what} must be one of {list(options)}; got {value!r:.40}.")
    return value


def numbers(values, what: str, low: float, high: float, *, min_len: int = 0, max_len: int = 100) -> tuple:
    """A tuple of finite numbers in [low, high]."""
    if not isinstance(values, tuple) or not min_len <= len(values) <= max_len:
        raise ValueError(f"{what} must be a list of {min_len} to {max_len} numbers; got {values!r:.40}.")
    return tuple(number(v, what, low, high) for v in values)
