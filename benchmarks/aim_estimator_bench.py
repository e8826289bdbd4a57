"""AIM's graphical-model estimator: our numpy junction-tree mirror descent against mbi's (JAX).

On the bundled CPS extract (50,000 rows x 10 columns) at epsilon 1, delta 1e-9, one seed:
1. pooled AIM fit + sample with our estimator, and with mbi's (``use_estimator("mbi")``), the time
   ratio and both mean two-way TVDs (target: ours below MST's, about 0.028);
2. stratified AIM (sex x race, public sizes) with our estimator and its time ratio to pooled
   (target: within 3x);
3. the estimator's cost per round against the model's size (MB), from the largest fit of 4;
4. AIM's size curve (``size_curves.py``): rows 50k, 100k, 200k, 1M resampled from the extract, CPU
   seconds, rounds, model MB, TVD and the growth exponent between sizes, the 1M line beside its
   60 s target;
5. the machine's load average before and after, since the machine is shared.

Run: DASHBOARD_N_JOBS=1 .venv/bin/python benchmarks/aim_estimator_bench.py [--skip-mbi] [--sizes 50000,100000]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.contracts import make_rng  # noqa: E402
from core.datasets import load_cps  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis import StratifiedSynthesizer, make_synthesizer  # noqa: E402
from core.synthesis.encoding import encode_categories  # noqa: E402
from core.synthesis.graphical_model import use_estimator  # noqa: E402
from core.synthesis.metrics import two_way_tvd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from size_curves import aim_point, print_curve  # noqa: E402

EPSILON, DELTA, SEED = 1.0, 1e-9, 0
MST_TWO_WAY = 0.028    # MST's mean two-way TVD at epsilon 1 on this extract (synthesis_bench.py)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def run(factory, codes, dom, rho):
    t = time.perf_counter()
    model = factory().fit(codes, dom, rho, make_rng(SEED))
    fitted = time.perf_counter() - t
    synth = model.sample(len(codes), make_rng(SEED + 1000))
    total = time.perf_counter() - t
    return fitted, total, float(two_way_tvd(codes, synth, dom)["tvd"].mean()), model


def cost_per_round(point: dict) -> None:
    """Each estimate of one fit: round, model MB, steps, CPU seconds, milliseconds per step and per
    step and MB (flat when a step's cost is linear in the model)."""
    print(f"3. estimator cost per round, {point['rows']:,} rows (round 0: the one-way fit; last: the final fit)")
    print(f"   {'round':>5} {'model MB':>9} {'steps':>6} {'CPU s':>7} {'ms/step':>8} {'ms/step/MB':>11}")
    for e in point["estimates"]:
        per = 1000 * e["cpu_s"] / max(e["steps"], 1)
        print(f"   {e['round']:>5} {e['model_mb']:9.2f} {e['steps']:>6} {e['cpu_s']:7.2f} {per:8.2f} "
              f"{per / max(e['model_mb'], 1e-3):11.1f}")


def main() -> None:
    skip_mbi = "--skip-mbi" in sys.argv
    codes, dom, _ = encode_categories(load_cps())
    rho = rho_for_epsilon(EPSILON, DELTA)
    print(f"CPS extract: {len(codes):,} rows x {codes.shape[1]} columns; epsilon {EPSILON:g}, delta {DELTA:g}, "
          f"seed {SEED}")
    print(f"before: {load()}\n")

    aim = lambda: make_synthesizer("aim")  # noqa: E731
    fit, ours, tvd, model = run(aim, codes, dom, rho)
    print(f"1. pooled AIM, our estimator: fit {fit:.1f} s, fit+sample {ours:.1f} s (target <= 120 s), "
          f"{len(model.rounds_)} rounds, mean 2-way TVD {tvd:.4f} (MST about {MST_TWO_WAY})")
    if skip_mbi:
        print("   mbi's estimator: skipped (--skip-mbi)")
    else:
        with use_estimator("mbi"):
            fit_m, theirs, tvd_m, model_m = run(aim, codes, dom, rho)
        print(f"   mbi's estimator:  fit {fit_m:.1f} s, fit+sample {theirs:.1f} s, {len(model_m.rounds_)} rounds, "
              f"mean 2-way TVD {tvd_m:.4f}")
        print(f"   speed-up: mbi / ours = {theirs / ours:.1f}x; TVD ours - mbi = {tvd - tvd_m:+.4f}")
    print(f"   {load()}\n")

    strat = lambda: StratifiedSynthesizer(aim, ("sex", "race"), size_policy="public")  # noqa: E731
    fit_s, both_s, tvd_s, _ = run(strat, codes, dom, rho)
    print(f"2. stratified AIM (sex x race, 10 strata), our estimator: fit+sample {both_s:.1f} s, "
          f"mean 2-way TVD {tvd_s:.4f}")
    print(f"   stratified / pooled = {both_s / ours:.2f}x (target <= 3x)\n")

    sizes = [int(v) for v in (sys.argv[sys.argv.index("--sizes") + 1] if "--sizes" in sys.argv
                              else "50000,100000,200000,1000000").split(",")]
    points = []
    for n in sizes:
        points.append(aim_point(codes, dom, n))
        print(f"   ... {n:,} rows done: {points[-1]['cpu_s']:.1f} s CPU", flush=True)
    cost_per_round(points[-1])
    print("\n4. AIM size curve (CPU seconds of fit + sample; exponent = growth between sizes)")
    print_curve(points)
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
