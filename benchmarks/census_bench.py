"""Benchmark of core.census: prints each figure beside its target (run from the repository root)."""
from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from core.census.analytic import district_variances  # noqa: E402
from core.census.geography_data import Hierarchy  # noqa: E402
from core.census.mechanism_comparison import gg_metrics  # noqa: E402
from core.privacy.calibration import calibrate_generalized_gaussian, gg_scale_by_bisection  # noqa: E402
from core.census.toydown import draw_node_noise, toydown  # noqa: E402

# Peer ToyDown (scipy path, L2 objective, eps = 1 split equally over all levels incl. the root,
# leaves ~ Poisson(50)): median seconds per run and leaf MAE, from the shared peer-baseline notes.
PEER = {(10, 10, 10): (1.20, 7.93), (10, 10, 10, 10): (12.4, 9.84), (10, 10, 10, 10, 10): (128.0, 11.77)}


def _timed(func, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def bench_large_toydown() -> None:
    h = Hierarchy.homogeneous([10, 10, 100, 100])
    rng = np.random.default_rng(0)
    counts = rng.poisson(5, h.n_leaves)
    eps = [0.2] * h.depth
    t = _timed(lambda: toydown(h, counts, eps, nonnegative=True, rng=rng))
    print(f"ToyDown non-negative, {h.n_leaves:,} leaves, 4 levels below the root: {t:.2f} s per run (target <= 3 s)")


def _cpu_and_peak(func) -> tuple[float, float]:
    """CPU seconds of one call and the peak of memory it allocated on top of what was live (numpy
    reports its arrays to tracemalloc), in MB."""
    tracemalloc.start()
    t0 = time.process_time()
    func()
    cpu = time.process_time() - t0
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return cpu, peak


def bench_national_toydown() -> None:
    """ToyDown on a national-size tree (fan-outs 50 x 60 x 50 x 55 = 8.25 million leaves) and two smaller
    trees of the same shape, beside the floor every ToyDown run pays: noise for every node plus one
    grouped sum per level. The growth exponent is log(cost ratio) / log(leaf ratio) between sizes."""
    rows = []
    for last in (5, 16, 55):
        h = Hierarchy.homogeneous([50, 60, 50, last])
        counts = np.random.default_rng(3).poisson(40, h.n_leaves)
        eps = [0.2] * h.depth

        def floor():
            noise = draw_node_noise(h, eps, "laplace", 2.0, None, np.random.default_rng(0))
            return h.aggregate(counts) + noise
        f_cpu, f_mem = _cpu_and_peak(floor)
        p_cpu, _ = _cpu_and_peak(lambda: toydown(h, counts, eps, rng=np.random.default_rng(0)))
        n_cpu, n_mem = _cpu_and_peak(lambda: toydown(h, counts, eps, nonnegative=True, rng=np.random.default_rng(0)))
        rows.append((h.n_leaves, f_cpu, f_mem, p_cpu, n_cpu, n_mem))
        del h, counts
    print("ToyDown size curve (CPU s; peak MB allocated by the call; exponent vs the previous size):")
    print(f"  {'leaves':>10} {'floor s':>8} {'floor MB':>9} {'plain s':>8} {'non-neg s':>10} {'x floor':>8} "
          f"{'non-neg MB':>11} {'x floor':>8} {'exponent':>9}")
    for i, (n, f_cpu, f_mem, p_cpu, n_cpu, n_mem) in enumerate(rows):
        grow = "" if i == 0 else f"{np.log(n_cpu / rows[i - 1][4]) / np.log(n / rows[i - 1][0]):.2f}"
        print(f"  {n:>10,} {f_cpu:8.2f} {f_mem:9.0f} {p_cpu:8.2f} {n_cpu:10.2f} {n_cpu / f_cpu:8.1f} "
              f"{n_mem:11.0f} {n_mem / f_mem:8.2f} {grow:>9}")
    n, f_cpu, f_mem, _, n_cpu, n_mem = rows[-1]
    print(f"ToyDown non-negative on {n:,} leaves: {n_cpu:.2f} s CPU (target < 2 s), {n_cpu / f_cpu:.1f}x the floor "
          f"(target <= 8x); peak memory {n_mem / f_mem:.2f}x the floor's (target <= 2x)")


def bench_county_runs() -> None:
    h = Hierarchy.homogeneous([25, 4, 100])
    rng = np.random.default_rng(1)
    counts = rng.poisson(30, h.n_leaves)
    eps = [0.25] * h.depth

    def hundred():
        for _ in range(100):
            toydown(h, counts, eps, nonnegative=True, rng=rng)
    t = _timed(hundred, repeat=1)
    print(f"100 non-negative ToyDown runs of a {h.n_leaves:,}-leaf county: {t:.2f} s in all (target <= 2 s)")


def bench_district_variance() -> None:
    h = Hierarchy.homogeneous([10, 10, 10, 100])
    rng = np.random.default_rng(2)
    offset = int(rng.integers(h.n_leaves))
    contiguous = ((np.arange(h.n_leaves) + offset) % h.n_leaves) * 1000 // h.n_leaves
    scattered = rng.permutation(h.n_leaves) * 1000 // h.n_leaves
    for name, labels in (("contiguous", contiguous), ("scattered", scattered)):
        t = _timed(lambda: district_variances(h, labels, [0.2] * 5))
        print(f"district_variance for 1,000 {name} districts on {h.n_leaves:,} leaves: {t:.3f} s (target < 1 s)")


def bench_peer_toydown() -> None:
    print("ToyDown vs peer ToyDown (peer: scipy SLSQP, L2 objective; both non-negative, eps = 1 equal over levels):")
    for fan, (peer_t, peer_mae) in PEER.items():
        h = Hierarchy.homogeneous(list(fan))
        rng = np.random.default_rng(3)
        counts = rng.poisson(50, h.n_leaves)
        eps = [1.0 / h.depth] * h.depth
        runs = 5
        maes = []
        t0 = time.perf_counter()
        for _ in range(runs):
            alpha = toydown(h, counts, eps, nonnegative=True, rng=rng)
            maes.append(np.mean(np.abs(alpha[h.leaf_nodes] - counts)))
        t = (time.perf_counter() - t0) / runs
        print(f"  {h.n_leaves:>7,} leaves {fan}: {t * 1000:8.1f} ms per run (peer {peer_t:.1f} s, "
              f"{peer_t / t:,.0f}x faster); leaf MAE {np.mean(maes):.2f} (peer L2 {peer_mae:.2f})")


def bench_gg_calibration() -> None:
    spec = {(100, 3.0): (75.3, 111), (1000, 3.0): (233.2, 404), (1000, 4.0): (271.8, 402)}
    for (k, p), (sigma_ref, emax_ref) in spec.items():
        t0 = time.perf_counter()
        sigma = gg_scale_by_bisection(k, p, 1.0, 1e-6)          # the calibration itself, not the shipped grid
        t = time.perf_counter() - t0
        t0 = time.perf_counter()
        shipped = calibrate_generalized_gaussian(k, p, 1.0, 1e-6)
        t_page = time.perf_counter() - t0
        emax = gg_metrics(sigma, p, k)["E max error"]
        print(f"GG calibration k={k}, p={p:g}, eps=1, delta=1e-6: sigma {sigma:.1f} (spec {sigma_ref}), "
              f"E max {emax:.0f} (spec {emax_ref}), {t:.2f} s (spec: 1-20 s per pair); "
              f"page lookup {t_page * 1000:.1f} ms (sigma {shipped:.1f})")



def bench_page() -> None:
    """The budget page as a user meets it: first render with an empty result cache (cold, a fresh cache
    folder), first render again (warm: every result read from the cache), widget changes, Georgia."""
    import os
    import subprocess
    import tempfile

    page = str(Path(__file__).resolve().parent.parent / "dashboard" / "tools" / "budget_allocation.py")
    probe = (
        "import sys, time, json; sys.path.insert(0, '.'); from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({page!r}, default_timeout=600)\n"
        "t = time.perf_counter(); at.run(); first = time.perf_counter() - t\n"
        "t = time.perf_counter(); at.selectbox(key='ba_preset').set_value('block-heavy').run(); preset = time.perf_counter() - t\n"
        "t = time.perf_counter(); at.selectbox(key='ba_preset').set_value('equal').run(); back = time.perf_counter() - t\n"
        "t = time.perf_counter(); at.session_state['ba_tab'] = 'Mechanisms'; at.run(); tab_open = time.perf_counter() - t\n"
        "t = time.perf_counter(); at.select_slider(key='ba_mech_k').set_value(300).run(); tab = time.perf_counter() - t\n"
        "at.session_state['ba_tab'] = 'Levels & targets'; at.run()\n"
        "t = time.perf_counter(); at.radio(key='ba_geo').set_value('georgia').run(); georgia = time.perf_counter() - t\n"
        "print(json.dumps(dict(first=first, preset=preset, back=back, tab_open=tab_open, tab=tab, georgia=georgia, ok=not at.exception)))\n")
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "DASHBOARD_CACHE_DIR": cache}
        for label in ("cold (empty result cache)", "warm (results cached)"):
            out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=env, capture_output=True, text=True,
                                 timeout=1200)
            if out.returncode:
                print(f"Budget page {label}: failed\n{out.stderr[-2000:]}")
                return
            r = __import__("json").loads(out.stdout.strip().splitlines()[-1])
            print(f"Budget page {label}: first render {r['first']:.2f} s; preset change {r['preset']:.2f} s, "
                  f"back to a cached preset {r['back']:.2f} s (target < 1 s), opening the Mechanisms tab "
                  f"{r['tab_open']:.2f} s, its k change {r['tab']:.2f} s; first switch to Georgia {r['georgia']:.2f} s; no exception: {r['ok']}")


if __name__ == "__main__":
    print("Timings on a shared 2-core machine; other work may be running.")
    bench_large_toydown()
    bench_national_toydown()
    bench_county_runs()
    bench_district_variance()
    bench_peer_toydown()
    bench_gg_calibration()
    bench_page()
