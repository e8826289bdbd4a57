"""Run-time estimates against measured runs, and the fit of their cost coefficients.

``python benchmarks/estimate_bench.py`` (what ``make bench`` runs) times a grid of synthesis sweeps on
the page's defaults (bundled CPS, strata sex x race, one synthesizer at a time) with a fresh result
cache, prints predicted and measured seconds and their ratio for each, and ends with the line
``estimates: predicted/measured within [a, b] on N runs`` (the target: within a factor of 2). The local
workers are started and the speed probe is timed once before the first sweep, as in a running server;
the ratios without the speed correction are printed too.

``python benchmarks/estimate_bench.py --fit`` measures a small grid per tool on this machine (CPU-light
sizes: a few minutes in all) and writes the coefficients to ``core/estimate_costs.json``, together
with the timing of the speed probe (``core.estimates.probe_seconds``) so a running server can correct
for how fast its machine is at the moment. Rerun it whenever a synthesizer, learner, audit or chain
gets faster or slower. The machine's load average is printed because other work on a 2-core machine
moves every figure.

Last measured (2026-11-26, coefficients fitted at load 7.1, compared at load 3.3-6.3, speed correction
0.65): ``estimates: predicted/measured within [0.74, 2.54] on 8 runs``; the curator-sized GEM point
predicted 54 s against 36 s measured (it was 708 s against 76 s before GEM's per-fit batch and rounds
were counted); the two AIM runs (2.28, 2.54) are the ones outside a factor of 2.

``--learner`` compares the pairwise learner's estimates with measured runs of a few plans (see
``learner_grid``). Last measured (2026-11-29, two workers, load 15-25 from other work on the machine,
the speed correction at its bound of 10 for most runs): within [1.05, 1.73] on 5 runs, after the
learner was timed in waves of fits over the workers and the probe retimed every two minutes.

``--fit --only aim`` (or another synthesizer) refits one synthesizer and keeps the rest of the file,
its coefficients put on the file's speed (times the file's probe over the probe now); ``--only aim``
alone compares only that synthesizer's sweeps. AIM refitted so (2026-11-26 15:36, load 2.4, after its
estimator change, with two fits on the page's default rounds added to its grid): the two AIM sweeps
predicted/measured 1.22 and 1.10 (3,000 and 20,000 rows; they were 1.56 and 1.87 refitted on the
old grid, 2.28 and 2.54 before).

``--fit --only gem --cpu`` times the fits and the speed probe in CPU seconds of this process instead of
wall seconds, for a shared machine whose load makes wall seconds measure the other work: refitted so
(2026-11-29 04:42, load 19-31, probe 69 ms CPU, coefficients x 0.56 onto the file's speed) after GEM's
cell layout and noise input changed, with two fits on the page's defaults added to its grid. The same
refit on wall seconds at load 25 read a probe of 602 ms (x 0.06) and gave units 0: unusable. The pooled
50,000 x 10 CPS fit is now predicted at 5.7 s at the file's speed (75 s before; measured 6.5-6.9 s CPU at
a probe of 69 ms, i.e. about 3.8 s at the file's 39 ms).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["DASHBOARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="estimate_bench_")   # every run computes

import numpy as np  # noqa: E402
from scipy.optimize import nnls  # noqa: E402

from core import estimates  # noqa: E402
from core.synthesis import cost as synthesis_cost  # noqa: E402
from core.contracts import DataRef, make_rng  # noqa: E402
from core.datasets import load_cps  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis import SweepPlan, SynthesisPlan  # noqa: E402
from core.synthesis.encoding import encode_categories  # noqa: E402
from core.synthesis.registry import SYNTHESIZERS, AIMParams, GEMParams  # noqa: E402
from core.synthesis.workflow import prepare  # noqa: E402
from timing import Value, record  # noqa: E402

COLUMNS = ("sex", "race", "age_band", "education", "marital", "income")
STRATA = ("sex", "race")
#: A curator-sized file: 36 strata, most of them small (as ``benchmarks/synthesis_bench.py``'s)
CURATOR_STRATA = ("class_of_worker", "sex", "income")
CURATOR_ROWS = 3_500


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


CLOCK = {"now": time.perf_counter}
"""The clock of every timing: wall seconds, or this process's CPU seconds with ``--cpu``."""


def timed(func) -> tuple[object, float]:
    start = CLOCK["now"]()
    out = func()
    return out, CLOCK["now"]() - start


def cps_frame(columns=COLUMNS):
    plan = SynthesisPlan(data=DataRef("cps"), columns=tuple(columns), strata=STRATA)
    frame, _ = prepare(plan)
    return frame


def solve(rows: list[list[float]], seconds: list[float], names: list[str]) -> dict[str, float]:
    """Non-negative least squares on relative errors (each row divided by its measured seconds)."""
    a = np.asarray(rows, float)
    b = np.asarray(seconds, float)
    w = 1.0 / np.maximum(b, 1e-3)
    coef, _ = nnls(a * w[:, None], b * w)
    return {n: float(c) for n, c in zip(names, coef)}


# --------------------------------------------------------------------------------------------------
# --fit
# --------------------------------------------------------------------------------------------------

#: (rows, number of columns, Params) per synthesizer: sizes that vary each feature, each fit a second or so
FIT_GRID = {
    "independent": [(1000, 3, None), (5000, 6, None), (20000, 6, None), (20000, 4, None)],
    "mst": [(1000, 3, None), (5000, 6, None), (20000, 6, None), (20000, 4, None), (1000, 6, None)],
    "aim": [(1000, 3, AIMParams(max_rounds=8)), (1000, 6, AIMParams(max_rounds=24)),
            (5000, 4, AIMParams(max_rounds=48)), (300, 4, AIMParams(max_rounds=16)),
            (5000, 6, AIMParams(max_rounds=12)),
            # the page's defaults (16 planned rounds a column), as a sweep's fits: the budget's annealing
            # ends them in fewer rounds than planned, which the grid's capped rounds alone do not show
            (2000, 6, None), (10000, 6, None)],
    "gem": [(1000, 4, GEMParams(rounds=5, steps=20, batch=250)), (1000, 6, GEMParams(rounds=20, steps=20, batch=500)),
            (3000, 6, GEMParams(rounds=10, steps=40, batch=1000)), (400, 3, GEMParams(rounds=10, steps=20, batch=250)),
            (3000, 4, GEMParams(rounds=20, steps=40, batch=500)),
            # small fits, as a small stratum's: the 62- and 16-row generator batches (the part of a step
            # that does not shrink with the generator rows) and the rounds cut to a small noisy total
            (80, 6, GEMParams(rounds=20, steps=40, batch=1000)), (30, 6, GEMParams(rounds=30, steps=40, batch=1000)),
            # the page's defaults (100 rounds of 12 steps on 2,000 generator rows), as a sweep's pooled fits
            (5000, 6, None), (20000, 4, None)],
}


def fit_synthesizers(frame, only: str | None = None) -> dict:
    """Per synthesizer (or only ``only``): single fits over a small grid of rows, columns and settings,
    NNLS of the seconds on the features of ``core.synthesis.cost.fit_features``. GEM's compile time is the
    median over the grid of its first fit of a shape less the second."""
    out = {}
    rho = rho_for_epsilon(1.0, 1e-9)
    for key, grid in FIT_GRID.items():
        if only is not None and key != only:
            continue
        spec = SYNTHESIZERS[key]
        rows_a, secs, compiles = [], [], []
        for i, (n, n_cols, params) in enumerate(grid):
            params = params or spec.params()
            cols = COLUMNS[:n_cols]
            sample = frame.sample(n, random_state=i, replace=n > len(frame))[list(cols)]
            codes, domain, _ = encode_categories(sample)
            dims = [domain[c] for c in cols]
            times = []
            for rep in range(2):
                model = spec.build(params)
                _, took = timed(lambda: model.fit(codes, domain, rho, make_rng(rep)))
                times.append(took)
            if key == "gem":
                compiles.append(times[0] - times[1])
            took = times[1]
            feats = synthesis_cost.fit_features(key, params, n, dims, rho=rho)
            names = ["fixed", "data", "units"] + (["steps"] if key == "gem" else [])
            rows_a.append([feats[k] for k in names])
            secs.append(took)
            print(f"  {key:11s} {n:5d} rows x {n_cols} columns, units {feats['units']:.3g}: {took:6.2f} s "
                  f"(first {times[0]:.2f} s; load {load()})", flush=True)
        coef = solve(rows_a, secs, names)
        if key == "gem":
            coef["compile"] = round(max(float(np.median(compiles)), 0.0), 3)
        out[key] = coef
    return out


def fit_scoring(frame, synth_costs: dict) -> dict:
    """Scoring seconds per sweep point: an independent-marginals sweep on one process at two sizes,
    less its modelled fits."""
    os.environ["DASHBOARD_N_JOBS"] = "1"
    rows_a, secs = [], []
    costs = estimates.merge_costs(estimates.default_costs(), {"synthesis": {**synth_costs,
                                                                         "score": {"fixed": 0.0, "data": 0.0}}})
    from core.synthesis.sweep import run_sweep

    for n in (800, 1500, 6000, 15000):
        data = frame.sample(n, random_state=1)
        plan = SynthesisPlan(data=DataRef("cps"), columns=COLUMNS, strata=STRATA, synthesizer="independent",
                             sweep=SweepPlan(epsilons=(1.0,), seeds=(0,)))
        if n == 800:               # warm-up: imports and first calls
            run_sweep(plan, data, n_jobs=1)
            continue
        _, took = timed(lambda: run_sweep(plan, data, n_jobs=1))
        shape = synthesis_cost.sweep_shape(plan, data)
        fits = synthesis_cost.sweep_seconds(shape, costs, n_workers=1)
        rows_a.append([2.0, 2.0 * shape.rows * len(COLUMNS) / 1e5 * shape.n_trees / 20.0])
        secs.append(max(took - fits, 0.01))
        print(f"  scoring {n:5d} rows: sweep {took:.2f} s, fits {fits:.2f} s (load {load()})", flush=True)
    os.environ.pop("DASHBOARD_N_JOBS", None)
    return solve(rows_a, secs, ["fixed", "data"])


def fit_parallel(frame) -> float:
    """Efficiency of the sweep's fan-out: a default MST sweep on one process against the same on the
    local workers (already started), ``serial / (lanes x parallel)``, between 0.3 and 1."""
    from core.synthesis.sweep import run_sweep

    data = frame.sample(10000, random_state=3)
    plan = SynthesisPlan(data=DataRef("cps"), columns=COLUMNS, strata=STRATA, synthesizer="mst",
                         sweep=SweepPlan(seeds=(0,)))
    run_sweep(plan.replace(sweep=SweepPlan(epsilons=(1.0,), seeds=(5,))), data)   # starts the workers
    _, serial = timed(lambda: run_sweep(plan, data, n_jobs=1))
    _, parallel = timed(lambda: run_sweep(plan, data))
    lanes = min(estimates.workers(), 2 * len(plan.sweep.epsilons) * len(plan.sweep.seeds))
    eff = float(min(max(serial / (lanes * parallel), 0.3), 1.0))
    print(f"  fan-out: one process {serial:.2f} s, {lanes} workers {parallel:.2f} s: efficiency {eff:.2f} "
          f"(load {load()})", flush=True)
    return eff


def two_point(label: str, run, sizes, units_of) -> dict[str, float]:
    """Seconds of ``run(size, seed)`` at two sizes (after a warm-up run at the first size with another
    seed) -> fixed seconds and seconds per unit (``units_of(size)``)."""
    secs, units = [], []
    run(sizes[0], 1)
    for size in sizes:
        _, took = timed(lambda: run(size, 0))
        secs.append(took)
        units.append(units_of(size))
        print(f"  {label} {size}: {took:.2f} s (load {load()})", flush=True)
    per = max((secs[1] - secs[0]) / max(units[1] - units[0], 1e-9), 0.0)
    return {"fixed": max(secs[0] - per * units[0], 0.0), "per": per}


def fit_learner() -> dict:
    from core.fairness.frontier import FrontierPlan, trade_off_frontier
    from core.fairness.learning_data import compas_learning_data
    from benchmarks.fairness_bench import pooled_constraints

    data = compas_learning_data()
    cons = pooled_constraints(data.n, 300, 0)
    cons = cons.assign(i=data.rows[cons["i"]], j=data.rows[cons["j"]])
    # two fits side by side: one wave of T rounds on two workers, two waves on one (core/fairness/cost.py)
    waves = math.ceil(2 / min(estimates.workers(), 2))
    res = two_point("learner rounds", lambda t, seed: trade_off_frontier(cons, FrontierPlan(gammas=(0.0, 0.3), T=t, seed=seed)),
                    (50, 250), lambda t: waves * t)
    return {"fixed": res["fixed"], "per_round": res["per"]}


def fit_group_fairness() -> dict:
    from core.fairness.group_fairness_plan import GroupFairnessPlan, LexifairPlan
    from core.fairness.group_fairness_plan import lexifair_subrun as sub

    res = two_point("lexifair rounds", lambda r, seed: sub(GroupFairnessPlan(
        seed=seed, ranking=None, companion=None, lexifair=LexifairPlan(columns=("sex", "race"), levels=1, rounds=r))),
        (50, 300), lambda r: r)
    return {"fixed": res["fixed"], "per_round": res["per"]}


def fit_coherence() -> dict:
    from core.coherence import AuditPlan, run
    from core.coherence.plan import RowSample

    res = two_point("audit trials", lambda t, seed: run(AuditPlan(rows=RowSample(2000), trials=t, seed=seed)),
                    (2, 8), lambda t: t * 3 * 2 * 0.2)
    return {"fixed": res["fixed"], "per_fit": res["per"]}


def fit_districts() -> dict:
    from core.districts import DistrictPlan, run

    base = DistrictPlan(grid_fanouts=(16, 4, 16))

    def one(runs, seed):
        return run(base.replace(noise=base.noise.replace(runs=runs, seed=seed)))
    res = two_point("district noisy runs", one, (4, 24), lambda r: r * 1024 / 4096.0)
    return {"fixed": res["fixed"], "per_run": res["per"]}


def fit_one(out_path: Path, key: str) -> None:
    """Refit one synthesizer's coefficients and keep every other number of ``out_path``. The new
    coefficients are put on the file's speed: scaled by the file's probe time over the probe time now
    (measured before and after), so the speed correction a server applies stays right for all."""
    costs = json.loads(out_path.read_text())
    if key not in costs.get("synthesis", {}):
        raise ValueError(f"{out_path} has no coefficients for {key!r}; run --fit for all tools instead.")
    print(f"Fitting {key}'s estimate costs on this machine (load {load()}, {os.cpu_count()} cores)", flush=True)
    probe = estimates.probe_seconds(clock=CLOCK["now"])
    coef = fit_synthesizers(cps_frame(), only=key)[key]
    now = float(np.sqrt(probe * estimates.probe_seconds(clock=CLOCK["now"])))
    ratio = float(costs["probe_seconds"]) / now
    costs["synthesis"][key] = {k: v * ratio for k, v in coef.items()}
    costs[f"fitted_{key}"] = {"when": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()[0], "probe_seconds": now,
                              "clock": "cpu" if CLOCK["now"] is time.process_time else "wall"}
    out_path.write_text(json.dumps(costs, indent=2, sort_keys=True) + "\n")
    print(f"wrote {key} into {out_path} (probe now {now * 1e3:.1f} ms, file's {costs['probe_seconds'] * 1e3:.1f} ms: "
          f"coefficients x {ratio:.2f}): {costs['synthesis'][key]}")


def fit(out_path: Path) -> None:
    print(f"Fitting estimate costs on this machine (load {load()}, {os.cpu_count()} cores)", flush=True)
    probe = estimates.probe_seconds()
    frame = cps_frame()
    synth = fit_synthesizers(frame)
    synth["score"] = fit_scoring(frame, synth)
    synth["parallel_efficiency"] = fit_parallel(frame)
    costs = {"probe_seconds": probe, "fitted": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()[0],
             "band": estimates.DEFAULT_BAND, "synthesis": synth}
    for name, func in (("learner", fit_learner), ("group_fairness", fit_group_fairness),
                       ("coherence", fit_coherence), ("districts", fit_districts)):
        try:
            costs[name] = func()
        except Exception as exc:   # one tool's failure keeps the others' coefficients (and says so)
            print(f"  {name}: not fitted ({type(exc).__name__}: {exc}); its defaults stay", flush=True)
    probe_after = estimates.probe_seconds()
    costs["probe_seconds"] = float(np.sqrt(probe * probe_after))   # the machine's speed over the fit
    out_path.write_text(json.dumps(costs, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out_path} (probe {costs['probe_seconds'] * 1e3:.1f} ms)")


# --------------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------------

def compare_grid():
    """(synthesizer, rows, epsilons, seeds[, strata]) of the sweeps compared: the page's defaults per
    synthesizer at a few sizes, and one GEM sweep point on a curator-sized file (3,500 rows of every
    column of the extract over 36 mostly small strata, sampled as ``benchmarks/synthesis_bench.py`` does)."""
    return [("mst", 3000, (1.0,), (0,)), ("mst", 10000, (0.1, 1.0, 5.0), (0, 1)),
            ("mst", 50000, (0.1, 1.0, 5.0), (0, 1)), ("independent", 20000, (0.1, 1.0, 5.0), (0, 1)),
            ("aim", 3000, (1.0,), (0,)), ("aim", 20000, (1.0,), (0,)), ("gem", 3500, (1.0,), (0,)),
            ("gem", CURATOR_ROWS, (1.0,), (0,), CURATOR_STRATA)]


def compare(only: str | None = None) -> None:
    from core.synthesis.sweep import run_sweep

    frame = cps_frame()
    costs = estimates.load_costs()
    print(f"Predicted against measured sweeps (load {load()}; coefficients fitted "
          f"{costs.get('fitted', 'never: defaults')}; workers started before the first)")
    ratios, raw = [], []
    warm = SynthesisPlan(data=DataRef("cps"), columns=COLUMNS, strata=STRATA, synthesizer="mst",
                         sweep=SweepPlan(epsilons=(1.0,), seeds=(9,)))
    run_sweep(warm, frame.sample(500, random_state=9))   # a running server's workers are already started
    speed = estimates.speed_factor(costs)                # probed once, as a running server does
    full = None
    for key, n, eps, seeds, *strata in compare_grid():
        if only is not None and key != only:
            continue
        if strata:    # the curator case: every column of the extract, its own strata, no target
            full = load_cps() if full is None else full
            data = full.iloc[np.random.default_rng(0).choice(len(full), n, replace=False)].reset_index(drop=True)
            plan = SynthesisPlan(data=DataRef("cps"), columns=tuple(full.columns), strata=strata[0], target=None,
                                 synthesizer=key, sweep=SweepPlan(epsilons=eps, seeds=seeds))
        else:
            data = frame.sample(n, random_state=7)
            plan = SynthesisPlan(data=DataRef("cps"), columns=COLUMNS, strata=STRATA, synthesizer=key,
                                 sweep=SweepPlan(epsilons=eps, seeds=seeds))
        est = estimates.estimate(plan, data, costs=costs, speed=speed)
        _, took = timed(lambda: run_sweep(plan, data))
        ratio = est.seconds / took
        ratios.append(ratio)
        raw.append(est.raw_seconds / took)
        print(f"  {key:11s} {n:6d} rows, {est.work}: predicted {est.seconds:7.1f} s, measured {took:7.1f} s, "
              f"ratio {ratio:.2f} (uncorrected {raw[-1]:.2f}; load {load()})", flush=True)
    print(f"speed correction {speed:.2f} (probe now / probe when fitted); without it the ratios lie within "
          f"[{min(raw):.2f}, {max(raw):.2f}]")
    print(f"estimates: predicted/measured within [{min(ratios):.2f}, {max(ratios):.2f}] on {len(ratios)} runs")
    record(f"Run-time estimates: predicted / measured over {len(ratios)} sweeps (median, range), each sweep one run",
           Value(float(np.median(ratios)), min(ratios), max(ratios)), unit="x", clock="wall")


def learner_grid():
    """(what, frontier settings, elicited pairs) of the pairwise learner plans compared: the page's default
    sweep, sweeps whose fits do not divide evenly among two workers, an eta sweep and more pairs."""
    return [("10 gammas x 1000 (page default)", {}, 300),
            ("4 gammas x 1000", {"gammas": (0.0, 0.1, 0.3, 0.5)}, 300),
            ("2 gammas x 1000", {"gammas": (0.0, 0.3)}, 300),
            ("5 etas x 500", {"sweep": "eta", "etas": (0.0, 0.1, 0.2, 0.5, 1.0), "T": 500}, 300),
            ("3 gammas x 1000, 1000 pairs", {"gammas": (0.0, 0.2, 0.4)}, 1000)]


def compare_learner() -> None:
    """The learner's estimate, made as a server makes it just before the run (the speed probe retimed
    when stale), against the run's measured seconds, on fresh result caches."""
    from benchmarks.fairness_bench import pooled_constraints
    from core.fairness.frontier import FrontierPlan
    from core.fairness.learning_data import compas_learning_data
    from core.fairness.learning_plan import ConstraintTable, LearningPlan, run_learning

    data = compas_learning_data()
    costs = estimates.load_costs()
    ratios = []
    print(f"Learner estimates against measured runs (load {load()}, {estimates.workers()} workers)")
    for name, settings, k in learner_grid():
        cons = pooled_constraints(data.n, k, 0)
        cons = cons.assign(i=data.rows[cons["i"]], j=data.rows[cons["j"]])
        plan = LearningPlan(constraints=ConstraintTable.from_frame(cons, source="bench"),
                            frontier=FrontierPlan(**{"T": 1000, **settings}))
        est = estimates.estimate(plan, costs=costs)
        _, took = timed(lambda: run_learning(plan))
        ratios.append(est.seconds / took)
        print(f"  {name}: predicted {est.seconds:6.1f} s (model {est.raw_seconds:5.1f} s x {est.factor:.2f}), "
              f"measured {took:6.1f} s, ratio {ratios[-1]:.2f} (load {load()})", flush=True)
    print(f"learner estimates: predicted/measured within [{min(ratios):.2f}, {max(ratios):.2f}] on {len(ratios)} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="measure and write core/estimate_costs.json")
    parser.add_argument("--out", type=Path, default=estimates.COSTS_PATH)
    parser.add_argument("--only", choices=sorted(FIT_GRID), default=None,
                        help="fit (or compare) only this synthesizer, keeping the other coefficients")
    parser.add_argument("--cpu", action="store_true",
                        help="with --fit --only: time the fits and the probe in CPU seconds of this process (on a "
                             "shared, loaded machine, where wall seconds measure the other work)")
    parser.add_argument("--learner", action="store_true", help="compare the pairwise learner's estimates instead")
    args = parser.parse_args()
    if args.cpu:
        CLOCK["now"] = time.process_time
    if args.learner:
        compare_learner()
    elif args.fit and args.only:
        fit_one(args.out, args.only)
    elif args.fit:
        fit(args.out)
    else:
        compare(args.only)


if __name__ == "__main__":
    main()
