"""Readable log axes: plotly labels the minor digits (2, 3, ... 9) of a log axis that spans less than
about two decades, which reads as noise. `tidy_log_axes` puts ticks at 1-2-5 steps (or at powers
of ten over wide ranges) and labels them with plain numbers."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

MAX_TICKS = 10


def log_tick_values(lo: float, hi: float) -> list[float]:
    """Ticks 1, 2, 5, 10, 20, ... covering [lo, hi]; only powers of ten when that gives too many."""
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    decades = 10.0 ** np.arange(first, last + 1)
    steps = np.outer(decades, [1, 2, 5]).ravel()
    ticks = steps[(steps >= lo / 1.01) & (steps <= hi * 1.01)]
    if len(ticks) > MAX_TICKS:
        ticks = decades[(decades >= lo / 1.01) & (decades <= hi * 1.01)]
    if len(ticks) < 2:  # a range inside one 1-2-5 step: the bounds of that step
        ticks = steps[max(np.searchsorted(steps, lo) - 1, 0):np.searchsorted(steps, hi) + 1]
    return [float(t) for t in ticks]


def _trace_values(trace, letter: str) -> np.ndarray:
    values = getattr(trace, letter, None)
    try:
        out = [np.asarray(values, dtype=float)]
    except (TypeError, ValueError):  # absent or categorical
        return np.empty(0)
    err = getattr(trace, f"error_{letter}", None)
    if err is not None and err.array is not None:
        plus = np.asarray(err.array, dtype=float)
        minus = np.asarray(err.arrayminus if err.arrayminus is not None else err.array, dtype=float)
        out += [out[0] + plus, out[0] - minus]
    return np.concatenate([v.ravel() for v in out])


def tidy_log_axes(fig: go.Figure) -> go.Figure:
    """Give every log axis of `fig` 1-2-5 ticks with plain labels, from the data it shows."""
    for name in [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]:
        axis = fig.layout[name]
        if axis.type != "log" or axis.tickvals is not None:
            continue
        letter, ref = name[0], name[0] + name[5:]
        values = [_trace_values(t, letter) for t in fig.data
                  if (getattr(t, f"{letter}axis", None) or letter) == ref]
        values = np.concatenate(values) if values else np.empty(0)
        values = values[np.isfinite(values) & (values > 0)]
        if not values.size:
            continue
        lo, hi = values.min(), values.max()
        ticks = log_tick_values(lo, hi)
        axis.update(tickvals=ticks, tickformat=",~r")
        if sum(lo / 1.01 <= t <= hi * 1.01 for t in ticks) < 2:  # widen a narrow axis to show its ticks
            pad = 0.05 * np.log10(max(ticks[-1], hi) / min(ticks[0], lo))
            axis.update(range=[np.log10(min(ticks[0], lo)) - pad, np.log10(max(ticks[-1], hi)) + pad])
    return fig
