"""Fairness figures: 1,000 learner rounds with 1,500 pair constraints, a ten-point frontier, and the
elicitation store's write latency with 20 concurrent writers (from fairness_store_latency.py).

Run: .venv/bin/python benchmarks/fairness_bench.py  (prints timings against their targets)
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from core.fairness.frontier import FrontierConfig, trade_off_frontier  # noqa: E402
from core.fairness.learner import LearnerConfig, fit_elicited_fair, ordered_pairs, pair_metrics  # noqa: E402
from core.fairness.learning_data import compas_learning_data  # noqa: E402
from benchmarks.fairness_store_latency import main as store_latency  # noqa: E402


def pooled_constraints(n: int, k: int, seed: int) -> pd.DataFrame:
    """k distinct "treat alike" pairs on random COMPAS individuals (a pooled synthetic panel)."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < k:
        i, j = (int(v) for v in rng.integers(0, n, 2))
        if i != j:
            pairs.add((min(i, j), max(i, j)))
    arr = np.array(sorted(pairs))
    return pd.DataFrame({"i": arr[:, 0], "j": arr[:, 1], "weight": 1.0, "n_judges": 1, "agreement": 1.0})


def main() -> None:
    data = compas_learning_data(seed=0)
    cons = pooled_constraints(data.n, 1500, 0)
    pairs = ordered_pairs(cons, data.n)
    print(f"COMPAS: {data.n} individuals, {data.X.shape[1]} features; {len(cons)} pair constraints "
          f"({pairs.m} ordered)")
    for oracle in ("logistic", "ols"):
        for gamma in (0.0, 0.3):
            t = time.perf_counter()
            fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=gamma, T=1000, oracle=oracle))
            dt = time.perf_counter() - t
            m = pair_metrics(fit.p_hat, pairs, gamma)
            print(f"1,000 rounds, oracle={oracle:8s} gamma={gamma:.1f}: {dt:6.2f} s (target <= 15 s) "
                  f"error {np.abs(fit.p_hat - data.y).mean():.3f}, realised gamma {m['realized_gamma']:.3f}"
                  f" {'OK' if dt <= 15 else 'MISSED'}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DASHBOARD_CACHE_DIR"] = tmp
        calls = []
        config = FrontierConfig(T=1000, oracle="logistic", averaging="fast")
        t = time.perf_counter()
        res = trade_off_frontier(cons, config, progress=lambda d, tot, msg: calls.append((d, tot)))
        dt = time.perf_counter() - t
        print(f"Ten-point frontier (gammas {list(config.gammas)}, 1,000 rounds each, logistic oracle): "
              f"{dt:.1f} s (target <= 60 s) {'OK' if dt <= 60 else 'MISSED'}; "
              f"{len(calls)} progress updates")
        t = time.perf_counter()
        trade_off_frontier(cons, config)
        print(f"  same frontier from the cache: {time.perf_counter() - t:.3f} s")
        cols = ["gamma", "error", "error_heldout", "realized_gamma", "heldout_realized_gamma",
                "violated_pairs", "on_hull", "averaging"]
        print(res.points[cols].round(3).to_string(index=False))
    print()
    store_latency()


if __name__ == "__main__":
    main()
