"""Benchmark of core.census: prints each figure beside its target (run from the repository root)."""
from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from core.census.analytic import district_variances  # noqa: E402
from core.census.geography_data import Hierarchy  # noqa: E402
from core.census.mechanism_comparison import gg_metrics  # noqa: E402
from core.privacy.calibration import calibrate_generalized_gaussian, gg_scale_by_bisection  # noqa: E402
from core.census.toydown import draw_node_noise, toydown  # noqa: E402
from timing import WARM_RUNS, Value, load, ratio, record, warm_time  # noqa: E402

# Peer ToyDown (scipy path, L2 objective, eps = 1 split equally over all levels incl. the root,
# leaves ~ Poisson(50)): median seconds per run and leaf MAE, from the shared peer-baseline notes.
PEER = {(10, 10, 10): (1.20, 7.93), (10, 10, 10, 10): (12.4, 9.84), (10, 10, 10, 10, 10): (128.0, 11.77)}


def bench_large_toydown() -> None:
    h = Hierarchy.homogeneous([10, 10, 100, 100])
    rng = np.random.default_rng(0)
    counts = rng.poisson(5, h.n_leaves)
    eps = [0.2] * h.depth
    t = warm_time(lambda: toydown(h, counts, eps, nonnegative=True, rng=rng))
    label = f"ToyDown non-negative, {h.n_leaves:,} leaves, 4 levels below the root"
    print(f"{label}: {t.text()} CPU per run (target <= 3 s); {load()}")
    record(label, t)


def peak_mb(func) -> float:
    """The peak of memory one call of ``func`` allocates on top of what was live (numpy reports its arrays
    to tracemalloc), in MB. Measured on a call of its own: tracing slows the Python parts of a call."""
    tracemalloc.start()
    func()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return peak


def bench_national_toydown() -> None:
    """ToyDown on a national-size tree (fan-outs 50 x 60 x 50 x 55 = 8.25 million leaves) and two smaller
    trees of the same shape, beside the floor every ToyDown run pays: noise for every node plus one
    grouped sum per level. Non-negative ToyDown is timed as real numbers and as the non-negative
    integers a release publishes (``core.census.release.post_process``: largest-remainder rounding
    at every level). Every call is timed warm (one discarded call, then the median of ``WARM_RUNS``,
    with the range); the ratios are of medians. The growth exponent is log(cost ratio) / log(leaf
    ratio) between sizes, of the integer release."""
    rows = []
    for last in (5, 16, 55):
        h = Hierarchy.homogeneous([50, 60, 50, last])
        counts = np.random.default_rng(3).poisson(40, h.n_leaves)
        eps = [0.2] * h.depth
        calls = {
            "floor": lambda: h.aggregate(counts) + draw_node_noise(h, eps, "laplace", 2.0, None,
                                                                   np.random.default_rng(0)),
            "plain": lambda: toydown(h, counts, eps, rng=np.random.default_rng(0)),
            "non-neg": lambda: toydown(h, counts, eps, nonnegative=True, rng=np.random.default_rng(0)),
            "integer": lambda: toydown(h, counts, eps, nonnegative=True, integer=True, rng=np.random.default_rng(0)),
        }
        cpu = {name: warm_time(call) for name, call in calls.items()}
        mem = {name: peak_mb(calls[name]) for name in ("floor", "non-neg", "integer")}
        rows.append((h.n_leaves, cpu, mem))
        del h, counts, calls
    print(f"ToyDown size curve: CPU s, median of {WARM_RUNS} warm calls (range); peak MB allocated by one call; "
          f"x floor: ratio of medians; {load()}")
    print(f"  {'leaves':>10} {'floor s':>17} {'plain s':>17} {'non-neg s':>17} {'x floor':>7} {'integer s':>17} "
          f"{'x floor':>7} {'floor MB':>9} {'non-neg MB':>11} {'integer MB':>11} {'x floor':>7} {'exponent':>9}")
    for i, (n, cpu, mem) in enumerate(rows):
        grow = ""
        if i:
            before_n, before_cpu, _ = rows[i - 1]
            grow = f"{np.log(cpu['integer'].median / before_cpu['integer'].median) / np.log(n / before_n):.2f}"
        print(f"  {n:>10,} {cpu['floor'].text(unit=''):>17} {cpu['plain'].text(unit=''):>17} "
              f"{cpu['non-neg'].text(unit=''):>17} {ratio(cpu['non-neg'], cpu['floor']).median:7.1f} "
              f"{cpu['integer'].text(unit=''):>17} {ratio(cpu['integer'], cpu['floor']).median:7.1f} "
              f"{mem['floor']:9.0f} {mem['non-neg']:11.0f} {mem['integer']:11.0f} {mem['integer'] / mem['floor']:7.2f} "
              f"{grow:>9}")
    n, cpu, mem = rows[-1]
    for name, label in (("non-neg", "non-negative"), ("integer", "released (non-negative integer)")):
        times = ratio(cpu[name], cpu["floor"])
        print(f"ToyDown {label} on {n:,} leaves: {cpu[name].text()} CPU (target < 2 s), "
              f"{times.median:.1f}x the floor ({times.low:.1f}-{times.high:.1f}x between runs; target <= 8x); "
              f"peak memory {mem[name]:.0f} MB, {mem[name] / mem['floor']:.2f}x the floor's (target <= 2x); {load()}")
        record(f"ToyDown {label}, {n:,} leaves", cpu[name])
        record(f"ToyDown {label}, {n:,} leaves, against the floor (noise + level sums)", times, unit="x",
               load=cpu[name].load)
        record(f"ToyDown {label}, {n:,} leaves, peak memory allocated", mem[name], unit="MB", clock="-")


def bench_county_runs() -> None:
    h = Hierarchy.homogeneous([25, 4, 100])
    rng = np.random.default_rng(1)
    counts = rng.poisson(30, h.n_leaves)
    eps = [0.25] * h.depth

    def hundred():
        for _ in range(100):
            toydown(h, counts, eps, nonnegative=True, rng=rng)
    t = warm_time(hundred)
    label = f"100 non-negative ToyDown runs of a {h.n_leaves:,}-leaf county"
    print(f"{label}: {t.text()} CPU in all (target <= 2 s); {load()}")
    record(label, t)


def bench_district_variance() -> None:
    h = Hierarchy.homogeneous([10, 10, 10, 100])
    rng = np.random.default_rng(2)
    offset = int(rng.integers(h.n_leaves))
    contiguous = ((np.arange(h.n_leaves) + offset) % h.n_leaves) * 1000 // h.n_leaves
    scattered = rng.permutation(h.n_leaves) * 1000 // h.n_leaves
    for name, labels in (("contiguous", contiguous), ("scattered", scattered)):
        t = warm_time(lambda: district_variances(h, labels, [0.2] * 5))
        label = f"district_variance for 1,000 {name} districts on {h.n_leaves:,} leaves"
        print(f"{label}: {t.text(digits=3)} CPU (target < 1 s); {load()}")
        record(label, t)


def bench_peer_toydown() -> None:
    print("ToyDown vs peer ToyDown (peer: scipy SLSQP, L2 objective; both non-negative, eps = 1 equal over levels; "
          f"ours: median of {WARM_RUNS} warm runs, range):")
    for fan, (peer_t, peer_mae) in PEER.items():
        h = Hierarchy.homogeneous(list(fan))
        rng = np.random.default_rng(3)
        counts = rng.poisson(50, h.n_leaves)
        eps = [1.0 / h.depth] * h.depth
        maes = []

        def run():
            alpha = toydown(h, counts, eps, nonnegative=True, rng=rng)
            maes.append(np.mean(np.abs(alpha[h.leaf_nodes] - counts)))
        t = warm_time(run)
        faster = ratio(Value(peer_t, peer_t, peer_t), t)
        print(f"  {h.n_leaves:>7,} leaves {fan}: {t.text(1000, 'ms', 1)} CPU per run (peer {peer_t:.1f} s, "
              f"{faster.median:,.0f}x faster); leaf MAE {np.mean(maes):.2f} (peer L2 {peer_mae:.2f}); {load()}")
    record(f"ToyDown {h.n_leaves:,} leaves against peer ToyDown's recorded {peer_t:g} s (times faster)", faster,
           unit="x", load=t.load)


def bench_gg_calibration() -> None:
    spec = {(100, 3.0): (75.3, 111), (1000, 3.0): (233.2, 404), (1000, 4.0): (271.8, 402)}
    for (k, p), (sigma_ref, emax_ref) in spec.items():
        out = {}                                                # the calibration itself, not the shipped grid
        t = warm_time(lambda: out.__setitem__("sigma", gg_scale_by_bisection(k, p, 1.0, 1e-6)))
        sigma = out["sigma"]
        shipped = calibrate_generalized_gaussian(k, p, 1.0, 1e-6)
        t_page = warm_time(lambda: calibrate_generalized_gaussian(k, p, 1.0, 1e-6))
        emax = gg_metrics(sigma, p, k)["E max error"]
        label = f"GG calibration k={k}, p={p:g}, eps=1, delta=1e-6"
        print(f"{label}: sigma {sigma:.1f} (spec {sigma_ref}), E max {emax:.0f} (spec {emax_ref}), {t.text()} CPU "
              f"(spec: 1-20 s per pair); page lookup {t_page.text(1000, 'ms', 1)} CPU (sigma {shipped:.1f}); {load()}")
        record(label, t)



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
            record(f"Budget page first render, {label}, one AppTest run", r["first"], clock="wall")
            record(f"Budget page back to a cached preset, {label}", r["back"], clock="wall")


if __name__ == "__main__":
    print("Timings on a shared 2-core machine; other work may be running.")
    bench_large_toydown()
    bench_national_toydown()
    bench_county_runs()
    bench_district_variance()
    bench_peer_toydown()
    bench_gg_calibration()
    bench_page()
