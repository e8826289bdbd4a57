"""Speed of the privacy samplers and of ``import core``; prints a table with the targets.

Run from the repository root: .venv/bin/python benchmarks/privacy_bench.py
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402

from core.privacy import mechanisms as m  # noqa: E402
from timing import Value, load, record, spread, warm_time  # noqa: E402

N = 10_000_000
REPEATS = 5


def rate(seconds) -> Value:
    """Draws per CPU second: the median call's rate, and the range between the slowest and fastest call."""
    t = spread(seconds)
    return Value(N / t.median, N / t.high, N / t.low)


def draws_per_second(draw) -> Value:
    """Rate of ``draw(N)``, timed warm (one discarded call, then the median of ``REPEATS``)."""
    return rate(warm_time(lambda: draw(N), REPEATS).cpu)


def paired_rates(draw, reference) -> tuple[Value, Value]:
    """Rates of ``draw`` and ``reference``, each warm, timed alternately so that load on a shared machine
    hits both alike (timing them minutes apart made identical code look 30% slower)."""
    draw(N)
    reference(N)
    times: list[list[float]] = [[], []]
    for _ in range(REPEATS):
        for i, fn in enumerate((draw, reference)):
            start = time.process_time()
            fn(N)
            times[i].append(time.process_time() - start)
    return rate(times[0]), rate(times[1])


def import_seconds() -> Value:
    """Seconds of a fresh interpreter's import of the core modules: one discarded, then the median of three."""
    probe = ("import time, json; t = time.perf_counter(); import core, core.privacy.mechanisms, "
             "core.privacy.accounting, core.privacy.ledger, core.cache, core.parallel; "
             "import sys; print(json.dumps([time.perf_counter() - t, "
             "sorted({k.split('.')[0] for k in sys.modules} & {'streamlit', 'plotly'})]))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                                      text=True, check=True).stdout) for _ in range(4)][1:]
    if any(r[1] for r in runs):
        print("WARNING: import core pulled in", runs[0][1])
    return spread([r[0] for r in runs])


def main() -> None:
    rng = np.random.default_rng(0)

    def numpy_ref(n):
        return rng.laplace(0.0, 10.0, n)

    lap, lap_ref = paired_rates(lambda n: m.sample_laplace(10.0, n, rng), numpy_ref)
    geo, geo_ref = paired_rates(lambda n: m.sample_geometric(10.0, n, rng), numpy_ref)
    numpy_laplace = max(lap_ref, geo_ref, key=lambda v: v.median)
    rows = [
        ("discrete Gaussian, sigma=10", draws_per_second(lambda n: m.sample_discrete_gaussian(10.0, n, rng)),
         ">= 5.0e6 /s", 5e6),
        ("discrete Gaussian, sigma=1000", draws_per_second(lambda n: m.sample_discrete_gaussian(1e3, n, rng)),
         "(info)", None),
        ("Laplace, b=10", lap, f"~ numpy {lap_ref.median:.2e} /s", 0.8 * lap_ref.median),
        ("two-sided geometric, b=10", geo, f"~ numpy {geo_ref.median:.2e} /s", 0.8 * geo_ref.median),
        ("Generalized Gaussian, p=4", draws_per_second(lambda n: m.sample_generalized_gaussian(10.0, 4, n, rng)),
         "(info)", None),
        ("numpy rng.laplace (reference)", numpy_laplace, "(reference)", None),
    ]
    print(f"Draws per CPU second, median of {REPEATS} warm calls of {N:,} draws (range); {load()}")
    print(f"{'figure':34s} {'measured':>10s} {'range':>21s}  {'target':24s} verdict")
    for name, value, target, floor in rows:
        verdict = "" if floor is None else ("PASS" if value.median >= floor else "MISS")
        print(f"{name:34s} {value.median:10.3e} ({value.low:.3e}-{value.high:.3e})  {target:24s} {verdict}")
        if floor is not None:
            record(f"{name}: millions of draws per CPU second", value.scaled(1e-6), unit="M/s")
    seconds = import_seconds()
    print(f"{'import core (fresh process)':34s} {seconds.text(digits=3):>32s}  {'< 1 s, no streamlit/plotly':24s} "
          f"{'PASS' if seconds.median < 1 else 'MISS'}")
    record("import core in a fresh interpreter", seconds, clock="wall")


if __name__ == "__main__":
    main()
