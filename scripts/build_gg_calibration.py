"""Precompute Generalized Gaussian scales for the Budget allocation page's default settings.

The numerical calibration (privacy-loss distribution, core.privacy.calibration) takes about
a second per (k, p, epsilon) the first time; shipping the page's default grid makes its Mechanisms
tab answer at once. Other settings are still calibrated on demand. Run by maintainers:

    .venv/bin/python scripts/build_gg_calibration.py [--curves-only]

It also ships the what-if curve of the allocation's default Generalized Gaussian (two counts per
person, delta 1e-6 over five levels, every order offered), so choosing it for an allocation does
not wait for a calibration; ``--curves-only`` rebuilds just those rows.
"""
from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import pandas as pd
from joblib import Parallel, delayed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.census.mechanism_comparison import MechanismSweepPlan  # noqa: E402
from core.privacy.calibration import CURVE_EPSILONS, GG_GRID_FILE, gg_scale_by_bisection  # noqa: E402

K_VALUES = (1, 3, 10, 30, 100, 300, 1000)      # the page's k slider
ORDERS = (2.0, 3.0, 4.0)                        # default order 3 and its neighbours
# The allocation's default: 2 counts changed per person (bounded DP), delta 1e-6 over five levels,
# every order the budget input offers, at the epsilons of the what-if curve.
ALLOCATION_K, ALLOCATION_DELTA = 2, 1e-6 / 5
ALLOCATION_ORDERS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0)


def _calibrate(settings: list[tuple[int, float, float, float]]) -> pd.DataFrame:
    sigmas = Parallel(n_jobs=-1)(delayed(gg_scale_by_bisection)(*s) for s in settings)
    return pd.DataFrame(settings, columns=["k", "p", "epsilon", "delta"]).assign(sigma=sigmas)


def main(argv: list[str]) -> None:
    cfg = MechanismSweepPlan()
    t0 = time.perf_counter()
    curves = [(ALLOCATION_K, p, e, ALLOCATION_DELTA) for p in ALLOCATION_ORDERS for e in CURVE_EPSILONS]
    if "--curves-only" in argv and GG_GRID_FILE.exists():      # keep the (slow) comparison grid as shipped
        old = pd.read_csv(GG_GRID_FILE)
        table = pd.concat([old[old["delta"] != ALLOCATION_DELTA], _calibrate(curves)], ignore_index=True)
    else:
        grid = [(k, p, e, cfg.delta) for k, p, e in itertools.product(K_VALUES, ORDERS, cfg.epsilons)]
        table = _calibrate(grid + curves)
    table.to_csv(GG_GRID_FILE, index=False, float_format="%.17g")
    print(f"{len(table)} scales in {time.perf_counter() - t0:.0f} s -> {GG_GRID_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
