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
Every fit is timed warm (``timing.warm_time``: a discarded first fit, then the median CPU seconds of
``--repeats`` fits, printed with the range); ratios are of medians.

Run: DASHBOARD_N_JOBS=1 .venv/bin/python benchmarks/aim_estimator_bench.py [--skip-mbi] [--sizes 50000,100000]
     [--repeats 3]
"""
from __future__ import annotations

import os
import sys
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
from timing import WARM_RUNS, ratio, record, warm_time  # noqa: E402

EPSILON, DELTA, SEED = 1.0, 1e-9, 0
MST_TWO_WAY = 0.028    # MST's mean two-way TVD at epsilon 1 on this extract (synthesis_bench.py)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def run(factory, codes, dom, rho, repeats):
    """Warm CPU seconds of the seeded fit + sample, its 2-way TVD and the last (identical) fit's model."""
    out = {}

    def fit_and_sample():
        out["model"] = factory().fit(codes, dom, rho, make_rng(SEED))
        out["synth"] = out["model"].sample(len(codes), make_rng(SEED + 1000))
    total = warm_time(fit_and_sample, repeats)
    return total, float(two_way_tvd(codes, out["synth"], dom)["tvd"].mean()), out["model"]


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
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else WARM_RUNS
    codes, dom, _ = encode_categories(load_cps())
    rho = rho_for_epsilon(EPSILON, DELTA)
    print(f"CPS extract: {len(codes):,} rows x {codes.shape[1]} columns; epsilon {EPSILON:g}, delta {DELTA:g}, "
          f"seed {SEED}")
    print(f"before: {load()}\n")

    aim = lambda: make_synthesizer("aim")  # noqa: E731
    ours, tvd, model = run(aim, codes, dom, rho, repeats)
    print(f"1. pooled AIM, our estimator: fit+sample {ours.text(digits=1)} CPU (target <= 120 s), "
          f"{len(model.rounds_)} rounds, mean 2-way TVD {tvd:.4f} (MST about {MST_TWO_WAY})")
    record(f"AIM fit + sample, CPS 50,000 rows, epsilon {EPSILON:g} (2-way TVD {tvd:.4f})", ours)
    if skip_mbi:
        print("   mbi's estimator: skipped (--skip-mbi)")
    else:
        with use_estimator("mbi"):
            theirs, tvd_m, model_m = run(aim, codes, dom, rho, repeats)
        print(f"   mbi's estimator:  fit+sample {theirs.text(digits=1)} CPU, {len(model_m.rounds_)} rounds, "
              f"mean 2-way TVD {tvd_m:.4f}")
        speed = ratio(theirs, ours)
        print(f"   speed-up: mbi / ours = {speed.text('x', 1)}; TVD ours - mbi = {tvd - tvd_m:+.4f}")
        record(f"AIM on mbi's estimator / on ours, same rounds (TVD ours - mbi {tvd - tvd_m:+.4f})", speed,
               unit="x", load=theirs.load)
    print(f"   {load()}\n")

    strat = lambda: StratifiedSynthesizer(aim, ("sex", "race"), size_policy="public")  # noqa: E731
    both_s, tvd_s, _ = run(strat, codes, dom, rho, repeats)
    print(f"2. stratified AIM (sex x race, 10 strata), our estimator: fit+sample {both_s.text(digits=1)} CPU, "
          f"mean 2-way TVD {tvd_s:.4f}")
    strat_ratio = ratio(both_s, ours)
    print(f"   stratified / pooled = {strat_ratio.text('x')} (target <= 3x)\n")
    record("AIM stratified (sex x race) / pooled, CPS 50,000 rows", strat_ratio, unit="x", load=both_s.load)

    sizes = [int(v) for v in (sys.argv[sys.argv.index("--sizes") + 1] if "--sizes" in sys.argv
                              else "50000,100000,200000,1000000").split(",")]
    points = []
    for n in sizes:
        points.append(aim_point(codes, dom, n, repeats))
        print(f"   ... {n:,} rows done: {points[-1]['cpu_s']:.1f} s CPU", flush=True)
    cost_per_round(points[-1])
    print("\n4. AIM size curve (CPU seconds of fit + sample; exponent = growth between sizes)")
    print_curve(points)
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
