"""Warm timing for the benchmarks, and the headline figures they record for the README's one table.

Every compared call is timed warm: one call is made and thrown away (it pays for lazy imports, compiled
programs, first-touch memory and caches that later calls find ready), then ``repeats`` calls are timed
and the figure is their median, printed with their range. CPU seconds are this process's
(``time.process_time``: all its threads, not other processes on the machine); wall seconds are kept
beside them. On a shared machine the 1-minute load average goes with every figure.

A script records a headline figure with :func:`record`; the records of one run of a script replace
that script's earlier ones in ``benchmarks/results/<script>.jsonl`` (``BENCH_RESULTS`` names another
folder), and ``benchmarks/figures.py`` turns every script's records into one markdown table.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

WARM_RUNS = 3
"""Timed calls after the discarded first one (at least three, so the median is not one reading)."""

RESULTS = Path(__file__).resolve().parent / "results"


def load1() -> float:
    """The machine's 1-minute load average."""
    return float(os.getloadavg()[0])


def load() -> str:
    """The three load averages (1, 5, 15 minutes) as printed beside a figure."""
    return "load " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass(frozen=True)
class Value:
    """A figure: the median of several readings and their range."""
    median: float
    low: float
    high: float

    def text(self, unit: str = "s", digits: int = 2) -> str:
        """'median unit (low-high)'; the range is left out when every reading was the same."""
        tail = "" if self.low == self.high else f" ({self.low:.{digits}f}-{self.high:.{digits}f})"
        return f"{self.median:.{digits}f}{' ' + unit if unit else ''}{tail}"

    def scaled(self, factor: float) -> "Value":
        return Value(self.median * factor, self.low * factor, self.high * factor)


@dataclass(frozen=True)
class Timing:
    """The CPU and wall seconds of each warm call, and the 1-minute load when they ended."""
    cpu: tuple[float, ...]
    wall: tuple[float, ...]
    load: float

    @property
    def value(self) -> Value:
        """CPU seconds: median and range."""
        return spread(self.cpu)

    @property
    def wall_value(self) -> Value:
        return spread(self.wall)

    @property
    def median(self) -> float:
        return self.value.median

    def text(self, scale: float = 1.0, unit: str = "s", digits: int = 2) -> str:
        return self.value.scaled(scale).text(unit, digits)


def spread(readings) -> Value:
    """Median and range of the readings."""
    r = np.asarray(readings, dtype=float)
    if r.size == 0:
        raise ValueError("spread needs at least one reading")
    return Value(float(np.median(r)), float(r.min()), float(r.max()))


def warm_time(fn: Callable[[], object], repeats: int = WARM_RUNS, clock: Callable[[], float] = time.process_time,
              wall_clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Time ``repeats`` calls of ``fn`` after one discarded call: CPU (``clock``) and wall seconds of each."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = clock(), wall_clock()
        fn()
        cpu.append(clock() - c0)
        wall.append(wall_clock() - w0)
    return Timing(tuple(cpu), tuple(wall), load1())


def ratio(a: Timing | Value, b: Timing | Value) -> Value:
    """a / b: the ratio of the medians, and the range it could take between runs (low a / high b, high a / low b)."""
    a = a.value if isinstance(a, Timing) else a
    b = b.value if isinstance(b, Timing) else b
    return Value(a.median / b.median, a.low / b.high, a.high / b.low)


@dataclass(frozen=True)
class Figure:
    """One row of the table of figures."""
    figure: str
    median: float
    low: float
    high: float
    unit: str
    clock: str
    load: float
    date: str
    command: str


_written: set[Path] = set()


def command_line() -> str:
    """This process's command, as run from the repository root."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path(__file__).resolve().parent.parent)
    except ValueError:
        pass
    return " ".join(["python", str(script), *sys.argv[1:]])


def results_folder() -> Path:
    return Path(os.environ.get("BENCH_RESULTS", RESULTS))


def record(figure: str, value: Timing | Value | float, unit: str = "s", clock: str = "CPU",
           load: float | None = None, wall: bool = False) -> Figure:
    """Append a headline figure to this script's results file (the first record of a run starts the file anew).

    ``value`` is a :class:`Timing` (its CPU seconds, or its wall seconds with ``wall=True``), a
    :class:`Value` or a single reading. ``clock`` says what the number measures: "CPU", "wall" or "-"
    for a figure that is not a time (a ratio of CPU times says "CPU")."""
    if isinstance(value, Timing):
        load = value.load if load is None else load
        clock = "wall" if wall else clock
        value = value.wall_value if wall else value.value
    elif not isinstance(value, Value):
        value = Value(float(value), float(value), float(value))
    row = Figure(figure, value.median, value.low, value.high, unit, clock, load1() if load is None else load,
                 datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"), command_line())
    folder = results_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{Path(sys.argv[0]).stem or 'interactive'}.jsonl"
    mode = "a" if path in _written else "w"
    _written.add(path)
    with path.open(mode) as out:
        out.write(json.dumps(asdict(row)) + "\n")
    return row
