"""Coherence audit benchmark: prints the issue's figures against their targets (not a test).

1. 100 trials x 3 adversaries x 2 releases on 20,000 CPS rows with 10 subgroups: target <= 60 s.
2. One trial's Wasserstein computations for 10 subgroups (real split + null): target < 50 ms.
3. The page's default plan (10,000 CPS rows, 60 trials, 2 releases x 3 adversaries), uncached; then
   the same plan again, answered from the cache.
4. Size curve: the audit of [1] on 50,000 to 1,000,000 rows resampled from the CPS extract, a few
   trials each, in-process: CPU seconds of the one-off setup (encoding, subgroups, the people's
   classes) and per trial, the growth exponent of the per-trial cost between sizes (log cost ratio /
   log rows ratio; 1 is linear), and beside 1,000,000 rows the projected 100 trials against the
   10-minute target (setup + 100 trials, shared by the local workers).
5. The real run, not a projection: 100 trials on 1,000,000 rows on the local workers, wall time
   against the 10-minute target.
6. The same audit with --dask-trials trials (default 20) on a Dask LocalCluster on loopback with 1,
   then 2 single-threaded worker processes: wall time of each (whole audit, and its trials once the
   tasks are out), the speed-up, identical results, and how the data reached the workers (the shared
   inputs scattered once per run and their bytes, beside the largest task's bytes).
``--quick`` skips [5] and [6] (the projection of [4] remains).
Run: DASHBOARD_N_JOBS=2 .venv/bin/python benchmarks/coherence_bench.py [--trials 100] [--sizes 50000,...] [--quick]
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")      # CPU seconds count one thread's work, not idle spinning

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from core.coherence import AuditPlan, run  # noqa: E402
from core.coherence.audit import coherence_audit  # noqa: E402
from core.coherence.releases import make_release  # noqa: E402
from core.coherence.subgroups import Subgroup  # noqa: E402
from core.coherence.wasserstein import SideCounts, count_distances, subgroup_distances  # noqa: E402
from core.datasets import load_dataset  # noqa: E402
from core.parallel import default_n_jobs  # noqa: E402
from timing import Value, record, spread, warm_time  # noqa: E402


def ten_subgroups(df) -> list[Subgroup]:
    """Everyone, the 5 race groups, 2 sexes and the 2 largest hispanic-origin groups."""
    out = [Subgroup("everyone", np.ones(len(df), bool))]
    for col, levels in (("race", None), ("sex", None), ("hispanic", 2)):
        vc = df[col].value_counts()
        for v in (vc.index if levels is None else vc.index[:levels]):
            out.append(Subgroup(f"{col}={v}", (df[col] == v).to_numpy()))
    return out[:10]


TARGET_1M_S = 600.0
CURVE_TRIALS = 3


def resampled(base, n: int):
    """``n`` rows drawn with replacement from the CPS extract (seeded by ``n``)."""
    return base.iloc[np.random.default_rng(n).integers(0, len(base), n)].reset_index(drop=True)


def audit(df, trials: int, n_jobs: int | None, progress=None):
    """The benchmark's audit: 2 releases x 3 adversaries, 10 subgroups, ``trials`` trials."""
    return coherence_audit(df, [make_release("clear_half"), make_release("laplace_table", epsilon=1.0)],
                           ["logistic", "boosting", "nearest_neighbour"], "income",
                           ["age_band", "education", "marital", "race", "sex"], ten_subgroups(df), gamma=80,
                           trials=trials, seed=0, n_jobs=n_jobs, progress=progress)


def curve_point(df, trials: int, n_jobs: int | None = 1) -> dict:
    """CPU seconds before the first trial, per trial (median), and in all, for one audit."""
    marks = []
    t0 = time.process_time()
    w0 = time.perf_counter()
    audit(df, trials, n_jobs, progress=lambda d, t, m: marks.append(time.process_time()))
    total = time.process_time() - t0
    steps = np.diff([t0, *marks])
    per_trial = float(np.median(steps[1:])) if len(steps) > 1 else float(steps[0])
    return {"rows": len(df), "setup": max(float(steps[0]) - per_trial, 0.0), "trial": per_trial,
            "total": total, "wall": time.perf_counter() - w0}


class FanOutLog(logging.Handler):
    """Keeps the fan-out's own account of what it sent (``core.parallel`` logs it once per run)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) so far of this process and each of its descendants, by pid (the
    local workers live on between fan-outs, so their own clocks are read, not their exit accounts)."""
    import psutil

    me = psutil.Process()
    out = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:            # ended between the listing and the read
            continue
        out[proc.pid] = times.user + times.system
    return out


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    return float(sum(v - before.get(pid, 0.0) for pid, v in after.items()))


def full_run(df) -> None:
    """[5] the 100 trials at 1,000,000 rows on the local workers, measured: wall time and the CPU
    seconds of this process and its workers (CPU / workers is the wall time on an idle machine)."""
    workers = default_n_jobs()
    load_before = load()
    c0 = tree_cpu()
    w0 = time.perf_counter()
    audit(df, 100, None)
    wall = time.perf_counter() - w0
    cpu = cpu_between(c0, tree_cpu())
    idle = cpu / workers
    print(f"[5] 100 trials x 3 adversaries x 2 releases on {len(df):,} rows, {workers} local workers, measured: "
          f"wall {wall:.0f} s, CPU {cpu:.0f} s in all, i.e. {idle:.0f} s on {workers} idle cores (target < "
          f"{TARGET_1M_S:.0f} s) -> wall {'met' if wall < TARGET_1M_S else 'MISSED'}, CPU / cores "
          f"{'met' if idle < TARGET_1M_S else 'MISSED'}; load before/after {load_before} / {load()}", flush=True)
    record(f"Coherence audit, 100 trials on {len(df):,} rows, {workers} local workers, one run", Value(wall, wall, wall),
           clock="wall")


def dask_run(df, trials: int) -> None:
    """[6] the audit on a loopback LocalCluster with 1 and then 2 single-threaded worker processes."""
    from distributed import Client, LocalCluster

    from core.cluster import close_clients, use_scheduler

    handler = FanOutLog()
    logger = logging.getLogger("core.parallel")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    codes_mb = len(df) * 6 * 8 / 1e6      # the audit's int64 codes: 5 lens columns and the target
    print(f"[6] the same audit, {trials} trials (not 100), {len(df):,} rows, on a Dask LocalCluster on loopback "
          f"(single-threaded worker processes; wall seconds, cluster start-up excluded)", flush=True)
    results, walls, critical = {}, {}, {}
    try:
        for n_workers in (1, 2):
            with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster:
                with use_scheduler(cluster.scheduler_address), Client(cluster) as client:
                    handler.records.clear()
                    load_before = load()
                    c0, here0 = client.run(time.process_time), time.process_time()
                    w0, e0 = time.perf_counter(), time.time()
                    res = audit(df, trials, None)
                    wall = time.perf_counter() - w0
                    ended = e0 + wall
                    c1, here = client.run(time.process_time), time.process_time() - here0
                    per_worker = sorted((c1[w] - c0[w] for w in c1), reverse=True)
                    worker_cpu = sum(per_worker)
                    sent = [r for r in handler.records if "shared inputs sent once" in r.getMessage()]
                    if len(sent) != 1:
                        raise RuntimeError(f"expected one fan-out on the cluster, saw {len(sent)}: the audit "
                                           "ran locally or in several fan-outs")
                    _, tasks, _, largest, n_shared, shared_bytes = sent[0].args
                    fan_out = ended - sent[0].created       # the record is logged once every task is out
                    close_clients()
            results[n_workers], walls[n_workers] = res, (wall, fan_out)
            critical[n_workers] = here + per_worker[0]      # the wall time on idle cores: setup, then the busiest worker
            print(f"    {n_workers} worker{'s' if n_workers > 1 else ' '}: wall {wall:6.1f} s (trials after the "
                  f"tasks went out {fan_out:6.1f} s); {tasks} tasks, largest {largest / 1e3:.1f} kB; {n_shared} "
                  f"shared inputs scattered once to every worker, {shared_bytes / 1e6:.1f} MB in all (the "
                  f"{len(df):,}-row codes alone {codes_mb:.0f} MB); CPU {worker_cpu:.0f} s on the workers "
                  f"({' + '.join(f'{c:.0f}' for c in per_worker)}), "
                  f"{here:.0f} s here; load before/after {load_before} / {load()}",
                  flush=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
    (w1, f1), (w2, f2) = walls[1], walls[2]
    same = results[1].maxima.equals(results[2].maxima) and results[1].summary.equals(results[2].summary)
    print(f"    speed-up 1 -> 2 workers: {w1 / w2:.2f}x whole audit, {f1 / f2:.2f}x its trials (linear: 2x; wall "
          f"time, blurred by the load); from CPU seconds (setup here + the busiest worker, i.e. the wall time on "
          f"idle cores) {critical[1]:.0f} s -> {critical[2]:.0f} s, {critical[1] / critical[2]:.2f}x; "
          f"results identical: {'yes' if same else 'NO'}", flush=True)


def growth(a: float, b: float, na: int, nb: int) -> float:
    """log(b / a) / log(nb / na): the growth exponent of a cost between two sizes."""
    return float(np.log(b / a) / np.log(nb / na)) if a > 0 and b > 0 else float("nan")


def size_curve(sizes: list[int], trials: int, full: bool, dask_trials: int = 20) -> None:
    base = load_dataset("cps")
    workers = default_n_jobs()
    print(f"[4] size curve: {trials} trials x 3 adversaries x 2 releases, 10 subgroups, in-process CPU seconds")
    print(f"{'rows':>10} {'setup s':>8} {'per trial s':>11} {'exponent':>9} {'100 trials s':>13}")
    points = []
    for n in sizes:
        p = curve_point(resampled(base, n), trials)
        points.append(p)
        exp = growth(points[-2]["trial"], p["trial"], points[-2]["rows"], n) if len(points) > 1 else None
        hundred = p["setup"] + 100 * p["trial"]
        note = ""
        if n == 1_000_000:
            shared = p["setup"] + 100 * p["trial"] / workers
            note = (f"   target: 100 trials < {TARGET_1M_S:.0f} s on this machine; projected {shared:.0f} s "
                    f"on {workers} local workers -> {'met' if shared < TARGET_1M_S else 'MISSED'}")
        print(f"{n:>10,} {p['setup']:8.2f} {p['trial']:11.3f} {'' if exp is None else f'{exp:9.2f}':>9} "
              f"{hundred:13.1f}{note}", flush=True)
    if full:
        df = resampled(base, 1_000_000)
        full_run(df)
        dask_run(df, dask_trials)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--sizes", default="50000,100000,200000,1000000", help="rows of the size curve")
    ap.add_argument("--curve-trials", type=int, default=CURVE_TRIALS)
    ap.add_argument("--quick", action="store_true",
                    help="skip the measured 100 trials on 1,000,000 rows and the Dask runs (projection only)")
    ap.add_argument("--full", action="store_true", help=argparse.SUPPRESS)   # the default now; kept for old commands
    ap.add_argument("--dask-trials", type=int, default=20, help="trials of the Dask LocalCluster runs")
    args = ap.parse_args()
    df = load_dataset("cps").sample(args.rows, random_state=0).reset_index(drop=True)
    groups = ten_subgroups(df)
    lens = ["age_band", "education", "marital", "race", "sex"]
    releases = [make_release("clear_half"), make_release("laplace_table", epsilon=1.0)]
    adversaries = ["logistic", "boosting", "nearest_neighbour"]
    print(f"CPS rows {len(df):,}; subgroups {len(groups)}; lens {lens}; workers {default_n_jobs()}")

    ticks, out = [], {}

    def one_audit():
        ticks.clear()
        out["res"] = coherence_audit(df, releases, adversaries, "income", lens, groups, alpha=0.1, beta=0.05,
                                     gamma=80, trials=args.trials, seed=0, progress=lambda d, t, m: ticks.append(d))
    t = warm_time(one_audit)
    res = out["res"]
    print(f"[1] audit {args.trials} trials x {len(adversaries)} adversaries x {len(releases)} releases on "
          f"{default_n_jobs()} workers, warm: {t.wall_value.text(digits=1)} wall (target <= 60 s) -> "
          f"{'OK' if t.wall_value.median <= 60 else 'MISSED'}; progress updates {len(ticks)}; load {load()}")
    record(f"Coherence audit, {args.trials} trials x 3 adversaries x 2 releases, {len(df):,} CPS rows, "
           f"{default_n_jobs()} workers", t, wall=True)
    print(res.releases[["release", "verdict"]].to_string(index=False))

    rng = np.random.default_rng(1)
    members = np.column_stack([g.mask for g in groups])
    scores = rng.uniform(-1, 1, len(df))
    halves = np.zeros((2, len(df)), bool)
    for j in range(2):
        halves[j, rng.choice(len(df), len(df) // 2, replace=False)] = True
    subgroup_distances(scores, halves, members)
    times = []
    for _ in range(20):
        t = time.perf_counter()
        subgroup_distances(scores, halves, members)
        times.append(time.perf_counter() - t)
    ms = 1000 * float(np.median(times))
    print(f"[2] W1 + KS for 10 subgroups, real split and null, one score vector, n={len(df):,}: "
          f"median {ms:.1f} ms (target < 50 ms) -> {'OK' if ms < 50 else 'MISSED'}")
    # the audit's path: scores depend on the lens cell only, so CDFs come from per-cell counts
    cells = df[lens].astype(str).agg("|".join, axis=1)
    _, cell_of = np.unique(cells.to_numpy(), return_inverse=True)
    n_cells = int(cell_of.max()) + 1
    counts = SideCounts(cell_of, members, n_cells)          # once per audit
    n_pairs = len(releases) * len(adversaries)
    vectors = [rng.uniform(-1, 1, n_cells) for _ in range(n_pairs)]
    runs = []
    for _ in range(10):
        t = time.perf_counter()
        sides = [counts.released(h) for h in halves]         # once per trial
        for v in vectors:
            count_distances(v, sides)
        runs.append(1000 * (time.perf_counter() - t))
    whole = float(np.median(runs))
    print(f"    whole trial as the audit runs it ({n_pairs} release x adversary predictors, {n_cells:,} lens cells): "
          f"median {whole:.1f} ms (target < 50 ms) -> {'OK' if whole < 50 else 'MISSED'}")
    record(f"Coherence trial's distances, {n_pairs} predictors x 10 subgroups, {len(df):,} rows (median of 10, wall)",
           spread(runs), unit="ms", clock="wall")
    return args


def default_plan_timing() -> None:
    import os
    import tempfile
    os.environ["DASHBOARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="coh_bench_")
    plan = AuditPlan()
    t = time.perf_counter()
    run(plan)
    first = time.perf_counter() - t
    t = time.perf_counter()
    run(plan)
    again = time.perf_counter() - t
    print(f"[3] default page plan ({plan.rows.size:,} rows, {plan.trials} trials): {first:.1f} s; "
          f"from the cache: {1000 * again:.0f} ms")


if __name__ == "__main__":
    options = main()
    default_plan_timing()
    size_curve([int(x) for x in options.sizes.split(",")], options.curve_trials, not options.quick,
               options.dask_trials)
