"""GEM speed and accuracy on the bundled CPS extract: pooled against stratified (sex x race, 10 strata).

Each line is a fit of 50,000 rows x 10 columns at epsilon 1 (delta 1e-9) followed by sampling
as many rows, timed warm (``benchmarks/timing.py``: a discarded first fit builds the compiled
programs for that shape, then the median CPU seconds of three, with the range). Accuracy is the mean two-way
total variation distance over the 45 column pairs. The product's target: stratified within 3 x
pooled at equal accuracy. The machine's load average is printed with every line because other
work on a 2-core machine moves these numbers a lot.

Size curve (CPU seconds, so the machine's load does not blur them): pooled GEM at epsilon 1 on 50,000 and
1,000,000 rows resampled from the extract, fit plus sampling as many rows, with the two-way TVD against
those rows and the growth exponent log(t2 / t1) / log(n2 / n1) (0: the cost does not grow with the rows;
targets: 50,000 rows under 8 s, 1,000,000 rows under 120 s). Every fit is warm (a discarded first fit
builds the programs) and each size is the median of ``--seeds`` seeds, printed with the range. The rows
enter once, through the marginal tables.

Run: .venv/bin/python benchmarks/gem_bench.py [--rounds N] [--jobs J] [--unscaled] [--probe-batch K]
     [--sizes 50000,1000000] [--sizes-only] [--seeds 3]
Defaults are the registry's (``make_synthesizer("gem")``): 100 rounds, and in a stratified fit each
stratum runs rounds in proportion to its share of the rows (at least 10); every fit then runs no more
rounds than its noisy total and budget carry (``core.synthesis.gem.fit_rounds``: 50,000 rows keep 100 from
epsilon 0.1 up). ``--unscaled`` adds the
stratified fit with every stratum running all rounds (before rounds scaled: pooled 52.6 s, stratified
433.9 s, 8.3 x, load about 5). ``--jobs 2`` fits strata on two worker processes.

``--probe-batch K`` refits both with K generator rows per step instead of 1000: the cost of a GEM fit
grows with K, not with the stratum's rows. One seed does not settle whether strata need the pooled
model's K: at 30 rounds K = 250 matched K = 1000 on seed 0 (2-way TVD 0.0346 against 0.0354) but was
about 20 % worse on seed 1 (0.0428 against 0.0356).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from core.contracts import make_rng  # noqa: E402
from core.datasets import load_cps  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis.encoding import encode_categories  # noqa: E402
from core.synthesis.gem import GEM  # noqa: E402
from core.synthesis.metrics import two_way_tvd  # noqa: E402
from core.synthesis.registry import GEMParams, make_synthesizer  # noqa: E402
from core.synthesis.stratified import StratifiedSynthesizer  # noqa: E402
from timing import load, ratio, record, spread, warm_time  # noqa: E402

EPSILON, DELTA, STRATA, TARGET = 1.0, 1e-9, ("sex", "race"), 3.0
FIT_TARGET = 8.0
"""CPU seconds a pooled fit of 50,000 rows may take, so a sweep of three epsilons and two seeds fits in a minute."""


def timed(factory, codes, dom, rho, seed):
    """Warm CPU seconds of one seeded fit + sampling as many rows (``timing.warm_time``), and its 2-way TVD."""
    out = {}

    def fit():
        out["synth"] = factory().fit(codes, dom, rho, make_rng(seed)).sample(len(codes), make_rng(seed + 1000))
    seconds = warm_time(fit)
    return seconds, float(two_way_tvd(codes, out["synth"], dom)["tvd"].mean())


def cpu_timed(factory, codes, dom, rho, seed):
    """CPU seconds of fit + sampling as many rows (this process and its threads), and the 2-way TVD."""
    t = time.process_time()
    synth = factory().fit(codes, dom, rho, make_rng(seed)).sample(len(codes), make_rng(seed + 1000))
    seconds = time.process_time() - t
    return seconds, float(two_way_tvd(codes, synth, dom)["tvd"].mean())


def size_curve(sizes: list[int], rounds: int, seeds: int) -> None:
    """Pooled GEM at each size (rows resampled from the extract), warm: one discarded fit compiles the
    programs, then ``seeds`` seeded fits per size, their median CPU seconds with the range, and the
    growth exponent between the medians."""
    codes, dom, _ = encode_categories(load_cps())
    rho = rho_for_epsilon(EPSILON, DELTA)
    make = lambda: make_synthesizer("gem", GEMParams(rounds=rounds))  # noqa: E731
    print(f"GEM size curve, epsilon {EPSILON:g}, {rounds} rounds, CPU seconds of fit + sample, median of "
          f"{seeds} seeds after a discarded fit (range); {load()}")
    rows = []
    for k, n in enumerate(sizes):
        data = codes.iloc[np.random.default_rng(n).integers(0, len(codes), n)].reset_index(drop=True)
        if k == 0:
            cpu_timed(make, data, dom, rho, 99)          # discarded: builds or loads the compiled programs
        runs = np.array([cpu_timed(make, data, dom, rho, seed) for seed in range(seeds)])
        cpu, tvd = spread(runs[:, 0]), runs[:, 1]
        seconds = cpu.median
        growth = (f"; growth exponent {math.log(seconds / rows[-1][1]) / math.log(n / rows[-1][0]):.2f}"
                  if rows else "")
        rows.append((n, seconds))
        limit = FIT_TARGET if n <= 50_000 else 120.0 if n >= 1_000_000 else None
        target = f" -> {'PASS' if seconds < limit else 'FAIL'} (target < {limit:g} s)" if limit else ""
        print(f"  GEM at {n:,} rows: {cpu.text(digits=1)} CPU, 2-way TVD "
              f"{tvd.mean():.4f} ({tvd.min():.4f}-{tvd.max():.4f}){growth}{target}; {load()}", flush=True)
        record(f"GEM fit + sample, {n:,} rows, epsilon {EPSILON:g}, median of {seeds} seeds", cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=GEMParams().rounds, help="GEM rounds (the registry's default)")
    ap.add_argument("--jobs", type=int, default=1, help="n_jobs of the stratified wrapper (1: in this process)")
    ap.add_argument("--unscaled", action="store_true", help="also fit strata with every stratum running all rounds")
    ap.add_argument("--probe-batch", type=int, default=0, help="generator rows per step of a probe (0: skip)")
    ap.add_argument("--sizes", default="50000,1000000", help="rows of the size curve, comma-separated ('' skips)")
    ap.add_argument("--sizes-only", action="store_true", help="only the size curve")
    ap.add_argument("--seeds", type=int, default=3, help="seeded fits per size of the size curve (median, range)")
    args = ap.parse_args()
    if args.sizes:
        size_curve([int(x) for x in args.sizes.split(",")], args.rounds, args.seeds)
        if args.sizes_only:
            return
    codes, dom, _ = encode_categories(load_cps())
    rho = rho_for_epsilon(EPSILON, DELTA)
    print(f"GEM on CPS: {len(codes):,} rows x {codes.shape[1]} columns, epsilon {EPSILON:g} (rho {rho:.4g}), "
          f"{args.rounds} rounds; stratified over {' x '.join(STRATA)} (n_jobs {args.jobs}); {os.cpu_count()} cores; "
          f"{load()}")
    params = GEMParams(rounds=args.rounds)
    pooled = lambda: make_synthesizer("gem", params)  # noqa: E731
    stratified = lambda: StratifiedSynthesizer(pooled, STRATA, n_jobs=args.jobs)  # noqa: E731
    fits = [("pooled", pooled), ("stratified", stratified)]
    if args.unscaled:
        unscaled = GEMParams(rounds=args.rounds, scale_rounds=False)
        fits.append(("strat., all rounds", lambda: StratifiedSynthesizer(lambda: make_synthesizer("gem", unscaled),
                                                                         STRATA, n_jobs=args.jobs)))
    rows = {}
    for name, factory in fits:
        rows[name] = timed(factory, codes, dom, rho, 0)
        print(f"  {name:>10}: {rows[name][0].text(digits=1)} CPU (2-way TVD {rows[name][1]:.4f}); {load()}", flush=True)
    times = ratio(rows["stratified"][0], rows["pooled"][0])
    print(f"  stratified / pooled: {times.text('x')} -> {'PASS' if times.median <= TARGET else 'FAIL'} "
          f"(target <= {TARGET:g} x)")
    record(f"GEM stratified (sex x race) / pooled, CPS 50,000 rows, epsilon {EPSILON:g}", times, unit="x",
           load=rows["stratified"][0].load)
    print(f"  2-way TVD stratified / pooled: {rows['stratified'][1] / rows['pooled'][1]:.2f}")
    if args.probe_batch > 0:
        k = args.probe_batch
        probe = {"pooled": timed(lambda: GEM(rounds=args.rounds, batch=k), codes, dom, rho, 0),
                 "stratified": timed(lambda: StratifiedSynthesizer(lambda: GEM(rounds=args.rounds, batch=k), STRATA,
                                                                   n_jobs=args.jobs), codes, dom, rho, 0)}
        for name, (s, tv) in probe.items():
            print(f"  probe, {k} generator rows per step, {name:>10}: {s.text(digits=1)} CPU (2-way TVD {tv:.4f}); "
                  f"{load()}")
        ratio_k = ratio(probe["stratified"][0], rows["pooled"][0])
        print(f"  probe: stratified at {k} rows / pooled at 1000 rows: {ratio_k.text('x')} time, "
              f"{probe['stratified'][1] / rows['pooled'][1]:.2f} x TVD (stratified at 1000 rows: "
              f"{rows['stratified'][1] / rows['pooled'][1]:.2f} x TVD)")


if __name__ == "__main__":
    main()
