"""Precompute Generalized Gaussian scales for the Budget allocation page's default settings.

The numerical calibration (privacy-loss distribution, core.privacy.calibration) takes about
a second per (k, p, epsilon) the first time; shipping the page's default grid makes its Mechanisms
tab answer at once. Other settings are still calibrated on demand. Run by maintainers:

    .venv/bin/python scripts/build_gg_calibration.py
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
from core.privacy.calibration import GG_GRID_FILE, gg_scale_by_bisection  # noqa: E402

K_VALUES = (1, 3, 10, 30, 100, 300, 1000)      # the page's k slider
ORDERS = (2.0, 3.0, 4.0)                        # default order 3 and its neighbours


def main() -> None:
    cfg = MechanismSweepPlan()
    grid = list(itertools.product(K_VALUES, ORDERS, cfg.epsilons))
    t0 = time.perf_counter()
    sigmas = Parallel(n_jobs=-1)(delayed(gg_scale_by_bisection)(k, p, e, cfg.delta) for k, p, e in grid)
    table = pd.DataFrame(grid, columns=["k", "p", "epsilon"]).assign(delta=cfg.delta, sigma=sigmas)
    table.to_csv(GG_GRID_FILE, index=False, float_format="%.10g")
    print(f"{len(table)} calibrations in {time.perf_counter() - t0:.0f} s -> {GG_GRID_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
