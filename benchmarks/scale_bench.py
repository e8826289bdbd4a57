"""Scale-out benchmark: one local worker against a two-worker Dask LocalCluster, in one run (not a test).

1. Coherence audit, 100 trials x 3 adversaries x 2 releases on 20,000 CPS rows: wall time in-process
   (one worker) and on the cluster, their ratio (target >= 1.7x on a 2-core machine) and a check
   that both runs give the same table.
2. MST (or, with --synthesizer aim, AIM) epsilon x seed sweep, stratified and pooled fits, on CPS
   rows: the same comparison.
3. Overhead of the cluster path on a tiny job (10 trials of 1 ms): target under 1 s.
4. Paper-scale projection: the measured cost of one fit x the stratification paper's grid
   (6 epsilons x 5 seeds x 13 variants x 3 synthesizers) / workers, for 2, 16 and 128 workers.
   It assumes every fit costs what the measured ones did and ignores the (small) per-task overhead.

Every process runs single-threaded numerics (OMP/BLAS threads = 1), so the ratio measures the
fan-out, not a BLAS library's threads. The cluster binds 127.0.0.1 only. Measure on a quiet
machine: with other work running, Linux shares CPU per session (autogroup), so the workers and
the in-process run draw on the same share and the ratio says little.
The audit's data are scattered to the workers once per run (the "sent:" lines give each task's and
the shared inputs' bytes); ``--rows 1000000`` resamples the extract with replacement for the
issue's million-row audit.
Run: .venv/bin/python benchmarks/scale_bench.py [--trials 100] [--rows 20000] [--sweep-rows 5000] [--synthesizer aim]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from core.cluster import client_for, describe_backend, use_scheduler  # noqa: E402
from core.coherence.audit import coherence_audit  # noqa: E402
from core.coherence.releases import make_release  # noqa: E402
from core.contracts import DataRef  # noqa: E402
from core.datasets import load_dataset  # noqa: E402
from core.parallel import map_trials  # noqa: E402
from core.synthesis.plan import SweepPlan, SynthesisPlan  # noqa: E402
from core.synthesis.registry import AIMParams  # noqa: E402
from core.synthesis.sweep import run_sweep  # noqa: E402
from timing import ratio, record, warm_time  # noqa: E402

PAPER_GRID = {"epsilons": 6, "seeds": 5, "variants": 13, "synthesizers": 3}
SWEEP_COLUMNS = ("age_band", "education", "sex", "race", "income")


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def audit(df: pd.DataFrame, trials: int, n_jobs: int | None):
    releases = [make_release("clear_half"), make_release("laplace_table", epsilon=1.0)]
    return coherence_audit(df, releases, ["logistic", "boosting", "nearest_neighbour"], "income",
                           ["age_band", "education", "marital", "race", "sex"], ["race", "sex"],
                           gamma=80, trials=trials, seed=0, n_jobs=n_jobs)


def one_ms(item: int) -> int:
    time.sleep(0.001)
    return item


def warm_wall(fn):
    """(result of the last call, wall seconds: median and range) of fn() timed warm (timing.warm_time)."""
    out = {}
    t = warm_time(lambda: out.__setitem__("result", fn()))
    return out["result"], t.wall_value


def compare(name: str, run, address: str, same) -> tuple[float, float]:
    """``run(n_jobs)`` in-process (n_jobs=1), then on the cluster (n_jobs=None), each warm; wall seconds."""
    local, t_local = warm_wall(lambda: run(1))
    with use_scheduler(address):
        remote, t_remote = warm_wall(lambda: run(None))
    speed = ratio(t_local, t_remote)
    print(f"{name}: 1 local worker {t_local.text()}; {describe_backend(scheduler=address)} {t_remote.text()} wall; "
          f"speed-up {speed.text('x')}; identical results: {same(local, remote)}; load {os.getloadavg()[0]:.1f}")
    record(f"{name}: two-worker cluster against one local worker (speed-up)", speed, unit="x", clock="wall")
    return t_local.median, t_remote.median


def main() -> None:
    import logging

    import dask
    from distributed import LocalCluster

    dask.config.set({"distributed.worker.profile.enabled": False})   # its sampling thread costs each task CPU

    shipping = logging.getLogger("core.parallel")        # what each cluster run sends: task and shared sizes
    shipping.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("    sent: %(message)s"))
    shipping.addHandler(handler)

    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--sweep-rows", type=int, default=5_000)
    ap.add_argument("--synthesizer", choices=("mst", "aim"), default="mst",
                    help="AIM (4 rounds here) costs several times an MST fit")
    args = ap.parse_args()

    cps = load_dataset("cps")
    # more rows than the extract holds (e.g. --rows 1000000): drawn with replacement, seeded
    df = cps.sample(args.rows, random_state=0, replace=args.rows > len(cps)).reset_index(drop=True)
    frame = cps.sample(args.sweep_rows, random_state=1).reset_index(drop=True)
    params = AIMParams(max_rounds=4) if args.synthesizer == "aim" else None
    plan = SynthesisPlan(data=DataRef("cps"), columns=SWEEP_COLUMNS, strata=("sex", "race"), target="income",
                         synthesizer=args.synthesizer, synth_params=params,
                         sweep=SweepPlan(epsilons=(0.3, 1.0, 3.0), seeds=(0, 1, 2), n_trees=5))
    fits = len(plan.sweep.epsilons) * len(plan.sweep.seeds) * 2

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=50) as cluster:
        address = cluster.scheduler_address
        client = client_for(address)
        for module in ("core.coherence.audit", "core.synthesis.sweep"):   # workers import once, as in use
            client.run(importlib.import_module, module)
        print(f"Cluster: {describe_backend(scheduler=address)} (LocalCluster, processes, 1 thread each); "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work on the machine "
              "skews both timings)")

        t_local, t_cluster = compare(
            f"[1] audit {args.trials} trials x 3 adversaries x 2 releases, {len(df):,} rows",
            lambda n_jobs: audit(df, args.trials, n_jobs), address,
            lambda a, b: a.maxima.equals(b.maxima) and a.trials.equals(b.trials))
        ratio = t_local / t_cluster
        print(f"    target >= 1.7x -> {'OK' if ratio >= 1.7 else 'MISSED'}")

        s_local, s_cluster = compare(
            f"[2] {args.synthesizer.upper()} sweep {len(plan.sweep.epsilons)} epsilons x {len(plan.sweep.seeds)} seeds x "
            f"stratified/pooled ({fits} fits), {len(frame):,} rows",
            lambda n_jobs: run_sweep(plan, frame, n_jobs=n_jobs), address,
            lambda a, b: a.overall_metrics.equals(b.overall_metrics) and a.group_metrics.equals(b.group_metrics))

        local_tiny, t_tiny_local = timed(lambda: map_trials(one_ms, range(10), n_jobs=1))
        with use_scheduler(address):
            remote_tiny, t_tiny = timed(lambda: map_trials(one_ms, range(10)))
        print(f"[3] tiny job, 10 trials of 1 ms: cluster {1000 * t_tiny:.0f} ms (in-process "
              f"{1000 * t_tiny_local:.0f} ms; target < 1 s) -> {'OK' if t_tiny < 1 else 'MISSED'}; "
              f"identical: {local_tiny == remote_tiny}")

    per_fit = s_local / fits
    grid = int(np.prod(list(PAPER_GRID.values())))
    print(f"[4] paper grid {' x '.join(f'{v} {k}' for k, v in PAPER_GRID.items())} = {grid:,} fits at "
          f"{per_fit:.2f} s per measured {args.synthesizer.upper()} fit ({len(frame):,} rows), charged to every "
          "fit of the grid" + (": a lower bound, since AIM and GEM fits cost more than MST's "
                               "(rerun with --synthesizer aim for AIM's cost):" if args.synthesizer == "mst" else ":"))
    for workers in (2, 16, 128):
        seconds = grid * per_fit / workers
        print(f"    {workers:>3} workers: {seconds / 60:7.1f} min ({seconds / 3600:.2f} h)")


if __name__ == "__main__":
    main()
