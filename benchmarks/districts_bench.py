"""Benchmark of the district tools: prints each figure the District maps issue names beside its target.

Run from the repository root: ``.venv/bin/python benchmarks/districts_bench.py [--browser]``. The geography
is built in a fresh temporary cache so "from scratch" really is from scratch; ``--browser`` also times the
page in headless Chromium (needs /usr/bin/chromium).

The ReCom size curve runs the chain on Georgia's tracts at 100, 200 and 400 steps (k = 14) and with 7,
14 and 28 districts (100 steps), in CPU seconds of this process, with the growth exponent between
sizes (log cost ratio / log size ratio; 1 is linear) and 1,000 steps projected from the per-step cost
against the 60 s target. ``--curve-only`` prints just the geography and the curve.
"""
from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("DASHBOARD_N_JOBS", "1")
os.environ["DASHBOARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="districts_bench_")


from core.geography.adjacency import unit_adjacency  # noqa: E402
from core.districts.enumeration import enumerate_plans, grid_edges  # noqa: E402
from core.geography.blocks import load_georgia_blocks  # noqa: E402
from core.districts.noise import NoiseConfig  # noqa: E402
from core.districts.plans import recom_ensemble  # noqa: E402
from core.districts.workflow import district_tables, noisy_block_errors  # noqa: E402
from timing import Timing, record, warm_time  # noqa: E402


def _line(what: str, seconds: float | Timing, target: float, headline: bool = False) -> None:
    """Print a figure: warm CPU seconds (a ``Timing``, always recorded), or one wall-clock reading of what a
    user meets once (a first render, a cache filled from scratch; recorded when ``headline``)."""
    if isinstance(seconds, Timing):
        value, text = seconds.median, f"{seconds.text():>20s} CPU "
    else:
        value, text = seconds, f"{seconds:8.2f} s wall, one run "
    print(f"{what:<72s} {text}  (target < {target:g} s, {'ok' if value <= target else 'MISSED'})")
    if isinstance(seconds, Timing) or headline:
        record(what, seconds, clock="CPU" if isinstance(seconds, Timing) else "wall")


def bench_geography():
    t0 = time.perf_counter()
    geo = load_georgia_blocks(seed=0)
    _line(f"Georgia block geography from scratch ({len(geo.blocks):,} blocks, incl. adjacency)",
          time.perf_counter() - t0, 20, headline=True)
    t0 = time.perf_counter()
    geo = load_georgia_blocks(seed=0)
    unit_adjacency(geo, "tract")
    _line("Georgia block geography loaded from cache (incl. tract graph)", time.perf_counter() - t0, 1)
    return geo


def bench_recom(geo):
    adj = unit_adjacency(geo, "tract")
    pop = geo.units("tract")["total"].to_numpy()
    out = {}
    t = warm_time(lambda: out.__setitem__("plans", recom_ensemble(adj, pop, 14, 0.05, steps=1000, thin=100, seed=0,
                                                                  use_cache=False)))
    plans = out["plans"]
    _line(f"1,000 ReCom steps, {adj.n_units:,} tracts, k = 14, 5% tolerance ({plans.shape[0]} plans kept)", t, 60)
    return plans[-1][geo.leaf_unit_index("tract")]


def bench_enumeration():
    out = {}
    t = warm_time(lambda: out.__setitem__("plans", enumerate_plans(25, grid_edges(5, 5), 5)))
    _line(f"Every plan of a 5 x 5 grid into 5 districts of 5 ({len(out['plans']):,} plans; spec: 4,006)", t, 1)


def bench_noise(geo, labels):
    for algorithm in ("toydown", "topdown_lite"):
        cfg = NoiseConfig((0.2,) * 5, algorithm=algorithm, runs=100, seed=0)
        out = {}
        t = warm_time(lambda: out.__setitem__("table", district_tables(geo, labels[None, :],
                                                                       noisy_block_errors(geo, cfg), cfg, 5.0)[0]))
        _line(f"100 {algorithm} runs + table, 14 districts over {len(geo.blocks):,} blocks "
              f"(mean |E_D| {out['table']['mean_abs_error'].mean():.0f})", t, 5)


def bench_page():
    """First render cold and warm, then each display-only change (plan shown, what to draw, colour) and a
    widget change whose result is already cached."""
    from streamlit.testing.v1 import AppTest
    page = str(ROOT / "dashboard" / "tools" / "district_maps.py")
    at = None
    for label in ("first render, cold process caches", "second render, same process (warm)"):
        t0 = time.perf_counter()
        at = AppTest.from_file(page, default_timeout=300)
        at.run()
        ok = not at.exception and any("choroplethmap" in c.proto.spec for c in at.get("plotly_chart"))
        _line(f"District maps page, AppTest {label}{'' if ok else ' (FAILED)'}", time.perf_counter() - t0, 5,
              headline=True)
    changes = [("next plan of the ensemble", lambda: at.number_input(key="dm_plan_no").set_value(2)),
               ("'Draw' tracts", lambda: at.selectbox(key="dm_display_grid").select("tract")),
               ("'Colour by' deviation", lambda: at.selectbox(key="dm_colour").select("deviation")),
               ("'Colour by' group share", lambda: at.selectbox(key="dm_colour").select("group share"))]
    for what, change in changes:
        t0 = time.perf_counter()
        change().run()
        _line(f"Display change: {what}{' (FAILED)' if at.exception else ''}", time.perf_counter() - t0, 0.5)
    seed = at.number_input(key="dm_noise_seed")
    seed.set_value(1).run()                               # computed once ...
    t0 = time.perf_counter()
    at.number_input(key="dm_noise_seed").set_value(0).run()   # ... and back to a cached result
    _line("Widget change with a cached result (noise seed back to 0)", time.perf_counter() - t0, 1)
    for label in ("first", "second"):
        at.radio(key="dm_geo").set_value("grid").run()
        t0 = time.perf_counter()
        at.radio(key="dm_geo").set_value("georgia").run()
        ok = not at.exception and not at.error
        _line(f"Switch to Georgia, {label} time (ReCom on tracts){'' if ok else ' (FAILED)'}",
              time.perf_counter() - t0, 5)


def bench_browser():
    from playwright.sync_api import sync_playwright
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(ROOT / ".venv" / "bin" / "streamlit"), "run", str(ROOT / "dashboard" / "app.py"),
                               "--server.headless", "true", "--server.port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        time.sleep(5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # as in the browser test, the home page is visited first (the server process is warm)
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("h1", timeout=60_000)
            page.wait_for_timeout(3000)
            for label in ("first visit", "second visit"):
                t0 = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/district-maps")
                page.wait_for_selector("h1:has-text('District maps')", timeout=60_000)
                t1 = time.perf_counter() - t0
                page.wait_for_selector(".js-plotly-plot .maplibregl-canvas, .js-plotly-plot canvas", timeout=60_000)
                _line(f"District maps in Chromium, {label}: h1 after {t1:.2f} s, map drawn after",
                      time.perf_counter() - t0, 5)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _growth(a: float, b: float, na: int, nb: int) -> float:
    return math.log(b / a) / math.log(nb / na) if a > 0 and b > 0 else float("nan")


def recom_size_curve(geo, steps=(100, 200, 400), districts=(7, 14, 28)) -> None:
    """CPU seconds of the ReCom chain as its steps and its number of districts grow."""
    adj = unit_adjacency(geo, "tract")
    pop = geo.units("tract")["total"].to_numpy()

    def cpu(k: int, n_steps: int) -> float:
        t0 = time.process_time()
        recom_ensemble(adj, pop, k, 0.05, steps=n_steps, thin=max(1, n_steps // 10), seed=0, use_cache=False)
        return time.process_time() - t0

    print(f"ReCom size curve on {adj.n_units:,} tracts, 5% tolerance, CPU seconds:")
    print(f"{'steps':>7} {'k':>4} {'CPU s':>7} {'exponent':>9}")
    prev = None
    for n in steps:
        c = cpu(14, n)
        exp = f"{_growth(prev[1], c, prev[0], n):9.2f}" if prev else ""
        note = ""
        if n == max(steps):
            projected = c / n * 1000
            note = (f"   1,000 steps projected {projected:.0f} s (target < 60 s, "
                    f"{'ok' if projected < 60 else 'MISSED'})")
        print(f"{n:>7,} {14:>4} {c:7.1f} {exp:>9}{note}", flush=True)
        prev = (n, c)
    prev = None
    for k in districts:
        c = cpu(k, 100)
        exp = f"{_growth(prev[1], c, prev[0], k):9.2f}" if prev else ""
        print(f"{100:>7,} {k:>4} {c:7.1f} {exp:>9}", flush=True)
        prev = (k, c)


if __name__ == "__main__":
    geography = bench_geography()
    recom_size_curve(geography)
    if "--curve-only" in sys.argv:
        sys.exit(0)
    plan = bench_recom(geography)
    bench_noise(geography, plan)
    bench_enumeration()
    bench_page()
    if "--browser" in sys.argv:
        bench_browser()
