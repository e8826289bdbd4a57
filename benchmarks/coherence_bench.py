"""Coherence audit benchmark: prints the issue's figures against their targets (not a test).

1. 100 trials x 3 adversaries x 2 releases on 20,000 CPS rows with 10 subgroups: target <= 60 s.
2. One trial's Wasserstein computations for 10 subgroups (real split + null): target < 50 ms.
3. The page's default plan (10,000 CPS rows, 60 trials, 2 releases x 3 adversaries), uncached; then
   the same plan again, answered from the cache.
Run: DASHBOARD_N_JOBS=2 .venv/bin/python benchmarks/coherence_bench.py [--trials 100]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from core.coherence import AuditPlan, run  # noqa: E402
from core.coherence.audit import coherence_audit  # noqa: E402
from core.coherence.releases import make_release  # noqa: E402
from core.coherence.subgroups import Subgroup  # noqa: E402
from core.coherence.wasserstein import cell_distances, member_pairs, subgroup_distances  # noqa: E402
from core.datasets import load_dataset  # noqa: E402
from core.parallel import default_n_jobs  # noqa: E402


def ten_subgroups(df) -> list[Subgroup]:
    """Everyone, the 5 race groups, 2 sexes and the 2 largest hispanic-origin groups."""
    out = [Subgroup("everyone", np.ones(len(df), bool))]
    for col, levels in (("race", None), ("sex", None), ("hispanic", 2)):
        vc = df[col].value_counts()
        for v in (vc.index if levels is None else vc.index[:levels]):
            out.append(Subgroup(f"{col}={v}", (df[col] == v).to_numpy()))
    return out[:10]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--rows", type=int, default=20_000)
    args = ap.parse_args()
    df = load_dataset("cps").sample(args.rows, random_state=0).reset_index(drop=True)
    groups = ten_subgroups(df)
    lens = ["age_band", "education", "marital", "race", "sex"]
    releases = [make_release("clear_half"), make_release("laplace_table", epsilon=1.0)]
    adversaries = ["logistic", "boosting", "nearest_neighbour"]
    print(f"CPS rows {len(df):,}; subgroups {len(groups)}; lens {lens}; workers {default_n_jobs()}")

    ticks = []
    t0 = time.perf_counter()
    res = coherence_audit(df, releases, adversaries, "income", lens, groups, alpha=0.1, beta=0.05, gamma=80,
                          trials=args.trials, seed=0,
                          progress=lambda d, t, m: ticks.append(d))
    wall = time.perf_counter() - t0
    print(f"[1] audit {args.trials} trials x {len(adversaries)} adversaries x {len(releases)} releases: "
          f"{wall:.1f} s (target <= 60 s) -> {'OK' if wall <= 60 else 'MISSED'}; progress updates {len(ticks)}")
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
    pairs = member_pairs(cell_of, members)
    n_pairs = len(releases) * len(adversaries)
    vectors = [rng.uniform(-1, 1, n_cells) for _ in range(n_pairs)]
    runs = []
    for _ in range(10):
        t = time.perf_counter()
        for v in vectors:
            cell_distances(v, cell_of, halves, members, pairs)
        runs.append(1000 * (time.perf_counter() - t))
    whole = float(np.median(runs))
    print(f"    whole trial as the audit runs it ({n_pairs} release x adversary predictors, {n_cells:,} lens cells): "
          f"median {whole:.1f} ms (target < 50 ms) -> {'OK' if whole < 50 else 'MISSED'}")


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
    main()
    default_plan_timing()
