"""Private bounds: does each estimate land near the truth, on columns of every scale and sign?

For each column and epsilon, 40 seeded runs of :func:`core.intake.estimate.estimate_bounds` (the same
algorithm as the release, with numpy's noise instead of OpenDP's), and the share of runs that land near
the truth, :func:`core.intake.estimate.near_truth`: with a, b the column's true 0.5 and 99.5 percentiles
and w = b - a, the low bound lies in [a - w/2, 2.5th percentile] and the high bound in
[97.5th percentile, b + w/2]. "Widened by at most 2x" means exactly this: the bounds never reach past the
true 0.5-99.5 range widened by half its width on each side (twice its width, same centre), and clip at
most 2.5% of the values on either side. Columns below the stated requirement
(:func:`core.intake.estimate.required_values`) are refused before any draw and show as "refused".

Columns: the bundled Adult (age, hours per week, fnlwgt, capital gain, age standardised to mean 0 and
sd 1, and 1994 - age as an offset "birth year"), the bundled COMPAS extract (age, priors, days between
screening and arrest, which is signed and long-tailed), and the messy fixture tests/fixtures/messy_county.csv
read through its drafted declaration as the Data step reads it (age, income, hours per week). A last block
checks the release path: 10 OpenDP runs on Adult age at epsilon 1.

Run: .venv/bin/python benchmarks/bounds_bench.py     (well under a minute)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.datasets import load_adult, load_compas  # noqa: E402
from core.intake import draft_schema, read_table  # noqa: E402
from core.intake.estimate import estimate_bounds, estimate_input, near_truth, required_values  # noqa: E402

EPSILONS = (0.5, 1.0, 3.0)
RUNS = 40


def columns() -> dict[str, np.ndarray]:
    adult, compas = load_adult(), load_compas()
    age = adult["age"].to_numpy(float)
    out = {"adult age": age, "adult hours_per_week": adult["hours_per_week"].to_numpy(float),
           "adult fnlwgt": adult["fnlwgt"].to_numpy(float), "adult capital_gain": adult["capital_gain"].to_numpy(float),
           "adult age standardised": (age - age.mean()) / age.std(), "adult 1994 - age": 1994.0 - age,
           "compas age": compas["age"].to_numpy(float), "compas priors_count": compas["priors_count"].to_numpy(float),
           "compas days_b_screening_arrest": compas["days_b_screening_arrest"].dropna().to_numpy(float)}
    messy = read_table(REPO / "tests" / "fixtures" / "messy_county.csv")
    schema = draft_schema(messy, "County extract")
    for name in ("age", "income", "hours_per_week"):
        out[f"messy {name}"] = estimate_input(messy, schema, name, "bounds").to_numpy(float)
    return out


def main() -> None:
    print(f"{'column':32s} {'n':>7s} {'eps':>4s} {'needs':>7s} {'landed':>7s}  {'median low':>11s} "
          f"{'median high':>11s}  {'true 0.5%':>10s} {'true 99.5%':>10s}")
    for name, x in columns().items():
        a, b = np.quantile(x, [0.005, 0.995])
        for eps in EPSILONS:
            need = required_values(eps)
            if x.size < need:
                print(f"{name:32s} {x.size:7,d} {eps:4g} {need:7,d} {'refused':>7s}")
                continue
            runs = np.array([estimate_bounds(x, eps, secure=False, rng=s)[:2] for s in range(RUNS)])
            landed = np.mean([near_truth(x, lo, hi) for lo, hi in runs])
            lo, hi = np.median(runs, axis=0)
            print(f"{name:32s} {x.size:7,d} {eps:4g} {need:7,d} {landed:7.0%}  {lo:11.4g} {hi:11.4g}  "
                  f"{a:10.4g} {b:10.4g}")
    x = columns()["adult age"]
    secure = [estimate_bounds(x, 1.0, secure=True)[:2] for _ in range(10)]
    print(f"release path (OpenDP), adult age, eps 1: {np.mean([near_truth(x, *r) for r in secure]):.0%} of 10 "
          f"landed; bounds {', '.join(f'[{lo:.4g}, {hi:.4g}]' for lo, hi in secure[:4])}, ...")


if __name__ == "__main__":
    main()
