"""Fairness learning figures on the page's defaults: 1,000 learner rounds with 1,500 pair constraints
on the default logistic oracle (and the least-squares one for comparison), the default ten-point
frontier, and the elicitation store's write latency with 20 concurrent writers.

Times are CPU seconds of this process (``time.process_time``, all its threads) beside wall-clock
seconds; the frontier's CPU figure is taken in-process (DASHBOARD_N_JOBS=1) so no work hides in
worker processes, then the wall time with the default worker count is shown. The machine load
(``os.getloadavg``) is printed first: on a shared box, wall time is not the code's speed.

Size curve: the same learner and the default frontier on 5,829 (the paper's people), 20,000, 50,000
and 100,000 people resampled from that population (seeded; pair constraints on 1,500 random pairs of
the resampled people), CPU seconds in-process, the growth exponent between sizes (log cost ratio /
log people ratio; 1 is linear) and the 60 s target beside 100,000 people.

Run: .venv/bin/python benchmarks/fairness_bench.py [--sizes 5829,20000,50000,100000] [--skip-store]
     [--writers 20] [--answers 50] [--repeats 3] [--url URL]   (the last four: the store's write latency)
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")      # CPU seconds count one thread's work, not idle spinning

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from core.fairness.frontier import FrontierPlan, trade_off_frontier  # noqa: E402
from core.fairness.learner import LearnerConfig, fit_elicited_fair, ordered_pairs, pair_metrics  # noqa: E402
from core.fairness.learning_data import compas_learning_data  # noqa: E402
from benchmarks.fairness_store_latency import add_options as store_options  # noqa: E402
from benchmarks.fairness_store_latency import main as store_latency  # noqa: E402
from timing import WARM_RUNS, record, warm_time  # noqa: E402

ORACLE_NAMES = {"logistic": "weighted logistic regression (page default)",
                "ols": "least-squares threshold (not the default)"}


def pooled_constraints(n: int, k: int, seed: int) -> pd.DataFrame:
    """k distinct "treat alike" pairs on random individuals 0..n-1 (a pooled synthetic panel)."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < k:
        i, j = (int(v) for v in rng.integers(0, n, 2))
        if i != j:
            pairs.add((min(i, j), max(i, j)))
    arr = np.array(sorted(pairs))
    return pd.DataFrame({"i": arr[:, 0], "j": arr[:, 1], "weight": 1.0, "n_judges": 1, "agreement": 1.0})


def timed(func):
    """(result, CPU seconds, wall seconds) of func()."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = func()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def warm(func):
    """(result of the last call, ``timing.Timing``) of func() timed warm: one discarded call, then three."""
    out = {}
    timing = warm_time(lambda: out.__setitem__("result", func()))
    return out["result"], timing


def fresh_cache(func):
    """func() with a new, empty result cache, so a repeated call computes again."""
    def call():
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["DASHBOARD_CACHE_DIR"] = tmp
            return func()
    return call


TARGET_100K_S = 60.0


def resampled_people(base, n: int):
    """``n`` people drawn with replacement from ``base`` (seeded by ``n``); 30% of them held out."""
    if n == base.n:
        return base
    rng = np.random.default_rng(n)
    idx = np.sort(rng.integers(0, base.n, n))
    perm = rng.permutation(n)
    cut = int(round(0.3 * n))
    return dataclasses.replace(base, X=base.X[idx], y=base.y[idx], groups=base.groups.iloc[idx].reset_index(drop=True),
                               rows=np.arange(n), train=np.sort(perm[cut:]), test=np.sort(perm[:cut]))


def growth(a: float, b: float, na: int, nb: int) -> float:
    """log(b / a) / log(nb / na): the growth exponent of a cost between two sizes."""
    return math.log(b / a) / math.log(nb / na) if a > 0 and b > 0 else float("nan")


def size_curve(sizes: list[int]) -> None:
    """One 1,000-round fit (gamma 0.1) and the default ten-point frontier, in-process, per size."""
    import core.fairness.frontier as frontier_mod

    base = compas_learning_data()
    plan = FrontierPlan()
    print(f"Size curve: people resampled from the paper's {base.n:,}; 1,500 pairs; CPU seconds in-process")
    print(f"{'people':>9} {'fit s':>7} {'exp':>6} {'frontier s':>11} {'exp':>6}")
    points = []
    os.environ["DASHBOARD_N_JOBS"] = "1"
    real = FrontierPlan.learning_data
    try:
        for n in sizes:
            data = resampled_people(base, n)
            cons = pooled_constraints(n, 1500, 1)
            pairs = ordered_pairs(cons, n)
            _, fit_s, _ = timed(lambda: fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.1, T=1000),
                                                          fit_rows=data.train))
            frontier_mod.FrontierPlan.learning_data = lambda self, data=data: data
            with tempfile.TemporaryDirectory() as tmp:
                os.environ["DASHBOARD_CACHE_DIR"] = tmp
                _, front_s, _ = timed(lambda: trade_off_frontier(cons.assign(i=data.rows[cons["i"]],
                                                                             j=data.rows[cons["j"]]), plan))
            points.append((n, fit_s, front_s))
            e1 = e2 = ""
            if len(points) > 1:
                (n0, f0, r0) = points[-2]
                e1, e2 = f"{growth(f0, fit_s, n0, n):6.2f}", f"{growth(r0, front_s, n0, n):6.2f}"
            note = ""
            if n == 100_000:
                note = (f"   target < {TARGET_100K_S:.0f} s each: fit {'met' if fit_s < TARGET_100K_S else 'MISSED'}, "
                        f"frontier {'met' if front_s < TARGET_100K_S else 'MISSED'}")
            print(f"{n:>9,} {fit_s:7.1f} {e1:>6} {front_s:11.1f} {e2:>6}{note}", flush=True)
    finally:
        frontier_mod.FrontierPlan.learning_data = real
        os.environ.pop("DASHBOARD_N_JOBS", None)


def main() -> None:
    ap = store_options(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--sizes", default="5829,20000,50000,100000", help="people of the size curve")
    ap.add_argument("--skip-store", action="store_true", help="leave out the store's write latency")
    args = ap.parse_args()
    print("load average (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in os.getloadavg())
          + f" on {os.cpu_count()} cores")
    data = compas_learning_data()                          # default population: the paper's 5,829
    cons = pooled_constraints(data.n, 1500, 0)
    pairs = ordered_pairs(cons, data.n)
    print(f"COMPAS population '{data.population}': {data.n} people, {data.X.shape[1]} features; "
          f"{len(cons)} pair constraints ({pairs.m} ordered)")
    for oracle in ("logistic", "ols"):
        for gamma in (0.0, 0.3):
            fit, t = warm(lambda: fit_elicited_fair(data, pairs, LearnerConfig(gamma=gamma, T=1000, oracle=oracle)))
            m = pair_metrics(fit.p_hat, pairs, gamma)
            print(f"1,000 rounds, oracle {ORACLE_NAMES[oracle]}, gamma={gamma:.1f}: {t.text()} CPU "
                  f"({t.wall_value.text()} wall; target <= 15 s CPU {'OK' if t.median <= 15 else 'MISSED'}); "
                  f"error {np.abs(fit.p_hat - data.y).mean():.3f}, realised gamma {m['realized_gamma']:.3f}")
            if oracle == "logistic":
                record(f"Fairness learner, 1,000 rounds, 1,500 pair constraints, logistic oracle, gamma {gamma:g}", t)
    # The frontier takes pair indices as rows of the whole COMPAS file.
    file_cons = cons.assign(i=data.rows[cons["i"]], j=data.rows[cons["j"]])
    plan = FrontierPlan()
    print(f"Default frontier: oracle {ORACLE_NAMES[plan.oracle]}, {plan.T} rounds, {plan.averaging} averaging, "
          f"{plan.sweep} in {plan.values}")
    for jobs in ("1", ""):
        os.environ["DASHBOARD_N_JOBS"] = jobs
        calls = []
        res, t = warm(fresh_cache(lambda: trade_off_frontier(
            file_cons, plan, progress=lambda d, tot, msg: calls.append((d, tot)))))
        where = "in-process" if jobs else f"default workers ({os.cpu_count()})"
        print(f"  {where}: {t.text(digits=1)} CPU in this process, {t.wall_value.text(digits=1)} wall "
              + (f"(target <= 60 s CPU {'OK' if t.median <= 60 else 'MISSED'}); " if jobs else "; ")
              + f"{len(calls) // (WARM_RUNS + 1)} progress updates a run")
        record(f"Ten-point fairness frontier, {where}", t, wall=not jobs)
        if not jobs:
            with tempfile.TemporaryDirectory() as tmp:
                os.environ["DASHBOARD_CACHE_DIR"] = tmp
                trade_off_frontier(file_cons, plan)
                _, cached = warm(lambda: trade_off_frontier(file_cons, plan))
            print(f"  same frontier from the cache: {cached.wall_value.text(digits=3)} wall")
    os.environ.pop("DASHBOARD_N_JOBS", None)
    cols = ["target", "error", "error_heldout", "realized_gamma", "heldout_realized_gamma",
            "violated_pairs", "on_hull", "averaging"]
    print(res.points[cols].round(3).to_string(index=False))
    print()
    size_curve([int(x) for x in args.sizes.split(",")])
    if not args.skip_store:
        print()
        store_latency(args)


if __name__ == "__main__":
    main()
