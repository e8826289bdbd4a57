"""AIM's size curve: CPU seconds, rounds, model size and two-way TVD as the number of rows grows.

Rows are resampled with replacement from the bundled CPS extract (seeded), AIM runs with its
registry defaults at epsilon 1, delta 1e-9, and the synthetic copy (as many rows as the input) is
scored by the mean two-way TVD against the resampled rows. CPU time is process time (user +
system of this process), so load from other processes does not blur it; each size is timed warm
(``timing.warm_time``: a discarded first fit, then the median of ``--repeats`` fits, with the range).
The growth exponent between two sizes is log(cost ratio) / log(size ratio): 1 is linear.

``--ledger FILE`` writes every run's spends (label and amount) to a JSON file, and ``--compare
FILE`` checks them against an earlier run's, so a change to the estimator can be shown to leave
the budget's path alone.

Measured on the shared 2-core machine, CPU seconds of fit + sample (seed 0; one discarded warm-up
call, then the median of 3 at each size), 2026-11-29 05:00-05:20, the code before and after the
blocked estimator run side by side (load average 8-16, falling to 4 for the 1M runs):
  rows       before (one pass per reduction)         after (blocked passes, dense hosts above 4,096 cells)
  50,000      1.49 s, 29 rounds, 0.24 MB, TVD 0.01092   1.40 s, 29 rounds, 0.24 MB, TVD 0.01093
  100,000     5.04 s, 37 rounds, 1.39 MB, TVD 0.00581   3.93 s, 37 rounds, 1.39 MB, TVD 0.00575
  200,000    14.21 s, 42 rounds, 3.98 MB, TVD 0.00363   8.55 s, 42 rounds, 3.98 MB, TVD 0.00364
  1,000,000  74.5 s, 49 rounds, 45.2 MB, TVD 0.00166   47.8 s, 49 rounds, 45.2 MB, TVD 0.00163
  fitted exponent 1.28                                  1.16
The rounds, models and spends are the same before and after (every ledger compared spend for
spend); the TVDs differ only through the last digits of the fits. The model itself grows
with rows (less noise per count, so AIM picks more and larger marginals until the model-size cap
binds), and a step costs in proportion to the model: 146 ms before and 81 ms after on the 45 MB
model of 1M rows (``aim_estimator_bench.py`` prints the cost per round against model size).
Then (2026-11-29 07:59-08:07, the same way, load average 2-3.7), the code before and after three
changes: a round's fit on a model above 2 MB takes 50 accelerated steps instead of 100 plain ones,
``_sum`` works out its matrix products once per shape, and the gradient's broadcast tables are
repeated out over short runs (``_wide``; the last two give the same sums bit for bit):
  rows       before                                    after
  50,000      1.23 s, 29 rounds, 0.24 MB, TVD 0.01093   1.20 s, 29 rounds, 0.24 MB, TVD 0.01093
  100,000     3.28 s, 37 rounds, 1.39 MB, TVD 0.00575   3.21 s, 37 rounds, 1.39 MB, TVD 0.00575
  200,000     8.17 s, 42 rounds, 3.98 MB, TVD 0.00364   5.73 s, 43 rounds, 3.98 MB, TVD 0.00362
  1,000,000  48.5 s, 49 rounds, 45.2 MB, TVD 0.00163   31.8 s, 50 rounds, 45.2 MB, TVD 0.00155
  fitted exponent 1.22                                  1.07
At 50,000 and 100,000 the spends are the same; at 200,000 and 1,000,000 the rounds' fits differ, so
AIM picks differently (two more spends each) under the same budget rules. Alone at load 2-3 the
new code took 1.2 / 2.7 / 5.2 / 29.4 s (exponent 1.07).
Earlier history: the first numpy estimator took 2.7 / 6.4 / 40.5 s at 50k / 100k / 200k and did not
finish 1M; summing a large table to all its cliques along one tree of partial sums, reusing a
step's tables and a final fit of 150 accelerated steps brought 1M to 108 s (2026-11-26).

Run: .venv/bin/python benchmarks/size_curves.py [--rows 50000,100000,200000,1000000] [--repeats 3] [--ledger out.json]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from core.contracts import make_rng  # noqa: E402
from core.datasets import load_cps  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis import make_synthesizer  # noqa: E402
from core.synthesis.encoding import encode_categories  # noqa: E402
from core.synthesis.graphical_model import model_size_mb  # noqa: E402
from core.synthesis.metrics import two_way_tvd  # noqa: E402
from timing import WARM_RUNS, Value, record, warm_time  # noqa: E402

EPSILON, DELTA, SEED = 1.0, 1e-9, 0
TARGET_1M_S = 60.0


def resampled(codes, n: int, seed: int = SEED):
    """``n`` rows drawn with replacement from ``codes`` (seeded, so every run sees the same rows)."""
    idx = np.random.default_rng(seed + n).integers(0, len(codes), n)
    return codes.iloc[idx].reset_index(drop=True)


def fitted_exponent(points: list[dict], key: str = "cpu_s") -> float:
    """Least-squares slope of log(cost) on log(rows) over every point: the curve's growth exponent."""
    if len(points) < 2:
        return math.nan
    x = np.log([p["rows"] for p in points])
    y = np.log([p[key] for p in points])
    return float(np.polyfit(x, y, 1)[0])


def aim_point(codes, dom, n: int, repeats: int = WARM_RUNS) -> dict:
    """AIM fit + sample on ``n`` resampled rows, timed warm: median CPU seconds of fit + sample (and range),
    and the rounds, model MB, TVD and spends of the last of the (seeded, so identical) fits."""
    rows = resampled(codes, n)
    rho = rho_for_epsilon(EPSILON, DELTA)
    out = {}

    def fit_and_sample():
        out["model"] = make_synthesizer("aim").fit(rows, dom, rho, make_rng(SEED))
        out["synth"] = out["model"].sample(n, make_rng(SEED + 1000))
    both = warm_time(fit_and_sample, repeats)
    model, synth = out["model"], out["synth"]
    tvd = float(two_way_tvd(rows, synth, dom)["tvd"].mean())
    return {"rows": n, "cpu_s": both.median, "cpu_range": [both.value.low, both.value.high], "load": both.load,
            "rounds": len(model.rounds_),
            "model_mb": model_size_mb(dom, model.measured_), "tvd": tvd,
            "estimate_s": math.fsum(e["cpu_s"] for e in model.estimates_),
            "estimates": model.estimates_,
            "spends": [[s.label, s.amount] for s in model.ledger_.spends]}


def exponent(a: dict, b: dict, key: str = "cpu_s") -> float:
    """Growth exponent of ``key`` between two points: log(ratio of costs) / log(ratio of rows)."""
    if a[key] <= 0 or b[key] <= 0:
        return math.nan
    return math.log(b[key] / a[key]) / math.log(b["rows"] / a["rows"])


HEADER = f"{'rows':>10} {'CPU s (range)':>20} {'rounds':>6} {'model MB':>9} {'2-way TVD':>10} {'exponent':>9}"


def row_line(points: list[dict], i: int) -> str:
    """One line of the curve: point ``i`` and its growth exponent from point ``i - 1``."""
    p = points[i]
    exp = f"{exponent(points[i - 1], p):9.2f}" if i else f"{'':>9}"
    note = ""
    if p["rows"] == 1_000_000:
        note = f"   target < {TARGET_1M_S:.0f} s: {'met' if p['cpu_s'] < TARGET_1M_S else 'MISSED'}"
    cpu = f"{p['cpu_s']:.1f} ({p['cpu_range'][0]:.1f}-{p['cpu_range'][1]:.1f})"
    return f"{p['rows']:>10,} {cpu:>20} {p['rounds']:>6} {p['model_mb']:9.2f} {p['tvd']:10.4f} {exp}{note}"


def print_curve(points: list[dict]) -> None:
    """Print the curve and record each size's CPU seconds among the benchmark figures."""
    print(HEADER)
    for i in range(len(points)):
        print(row_line(points, i), flush=True)
    for p in points:
        record(f"AIM fit + sample, {p['rows']:,} rows resampled from CPS, epsilon {EPSILON:g} "
               f"(2-way TVD {p['tvd']:.4f})", Value(p["cpu_s"], *p["cpu_range"]), load=p["load"])
    slope = fitted_exponent(points)
    print(f"fitted exponent (least squares on log-log, all sizes): {slope:.2f}; "
          f"load average now {os.getloadavg()[0]:.1f}")
    if len(points) > 1:
        record(f"AIM size curve's growth exponent, {points[0]['rows']:,} to {points[-1]['rows']:,} rows "
               "(least squares on log-log CPU seconds)", slope, unit="", clock="CPU", load=points[-1]["load"])


def compare_spends(points: list[dict], path: str) -> None:
    """Say, per size, whether every spend (label and amount) equals the earlier run's."""
    old = {p["rows"]: p["spends"] for p in json.loads(Path(path).read_text())}
    for p in points:
        if p["rows"] not in old:
            continue
        a, b = old[p["rows"]], p["spends"]
        same = len(a) == len(b) and all(x[0] == y[0] and math.isclose(x[1], y[1], rel_tol=1e-12, abs_tol=0)
                                        for x, y in zip(a, b))
        print(f"   {p['rows']:,} rows: ledger {'identical' if same else 'DIFFERENT'} to {path} "
              f"({len(b)} spends now, {len(a)} before)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="50000,100000,200000,1000000")
    ap.add_argument("--ledger", default=None, help="write every run's spends and figures to this JSON file")
    ap.add_argument("--compare", default=None, help="compare the spends with an earlier --ledger file")
    ap.add_argument("--repeats", type=int, default=WARM_RUNS, help="timed fits per size after a discarded one")
    args = ap.parse_args()
    codes, dom, _ = encode_categories(load_cps())
    sizes = [int(s) for s in args.rows.split(",")]
    print(f"AIM size curve: CPS columns ({codes.shape[1]}), epsilon {EPSILON:g}, delta {DELTA:g}, seed {SEED}")
    points = []
    if args.repeats > 1:
        aim_point(codes, dom, sizes[0])     # warm-up (imports, first allocations), discarded
    print(HEADER, flush=True)
    for n in sizes:
        points.append(aim_point(codes, dom, n, args.repeats))
        print(row_line(points, len(points) - 1), flush=True)
        if args.ledger:
            Path(args.ledger).write_text(json.dumps(points, indent=1))
    print()
    print_curve(points)
    if args.ledger:
        Path(args.ledger).write_text(json.dumps(points, indent=1))
    if args.compare:
        compare_spends(points, args.compare)


if __name__ == "__main__":
    main()
