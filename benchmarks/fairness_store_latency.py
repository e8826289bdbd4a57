"""Benchmark of the elicitation store: latency of one answer with 20 concurrent writers (target p95 < 20 ms).

Run from the repository root: `python benchmarks/fairness_store_latency.py [--writers 20] [--answers 50]
[--url sqlite:///...]`. By default the database is a fresh SQLite file under data/sessions/ (the real
disk, WAL, synchronous=FULL), removed afterwards. Writers are threads, as Streamlit sessions are.

Three regimes are printed. "Paced": every writer pauses a random 0-200 ms between answers, still ten
times faster than a person reading a card, so twenty writers are genuinely concurrent; the target is
checked on both. "Saturated": no pause at all, a stress test whose latency is mostly queueing for the
write lock and the interpreter lock (throughput is the figure that matters there). "Same card":
every writer is a tab of one stakeholder clicking the same card, the case where revision numbers
collide unless writes to a card are serialised; every click must be stored.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from core.fairness.elicitation import SessionConfig  # noqa: E402
from core.fairness.store import ElicitationStore  # noqa: E402

TARGET_P95_MS = 20.0


def run(url: str, writers: int, answers: int, think_ms: float, same_card: bool = False) -> dict:
    """`same_card`: every writer is a tab of ONE stakeholder clicking card 0 over and over (the
    revision race); otherwise each writer is its own stakeholder answering its own cards."""
    store = ElicitationStore(url)
    config = SessionConfig(n_core=10, n_random=max(0, answers - 10), n_repeat=0, seed=1)
    created = store.create_session(config, "benchmark")
    logins = [store.join(created.join_code, f"writer {k}") for k in range(1 if same_card else writers)]
    logins = logins * writers if same_card else logins
    latencies: list[list[float]] = [[] for _ in range(writers)]
    barrier = threading.Barrier(writers)

    def writer(k: int) -> None:
        token = logins[k].token
        pause = np.random.default_rng(k).uniform(0, 2 * think_ms, size=answers) / 1000
        barrier.wait()
        for position in range(answers):
            if think_ms:
                time.sleep(pause[position])
            t0 = time.perf_counter()
            store.record_answer(token, 0 if same_card else position, "same" if position % 3 else "differ",
                                uuid.uuid4().hex)
            latencies[k].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = np.array([x for part in latencies for x in part]) * 1000
    stored = len(store.event_log(created.session_id, created.facilitator_key))
    store.dispose()
    return {"n": lat.size, "stored": stored, "wall": wall, "p50": np.percentile(lat, 50),
            "p95": np.percentile(lat, 95), "p99": np.percentile(lat, 99), "max": lat.max()}


def add_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """This benchmark's options on ``parser`` (its own or a larger benchmark's), so one parser reads the
    command line."""
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--answers", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--url", default=None, help="database URL (default: temporary SQLite under data/sessions/)")
    return parser


def main(args: argparse.Namespace | None = None) -> None:
    """Every regime's latency; ``args`` from ``add_options`` (read from the command line when None)."""
    if args is None:
        args = add_options(argparse.ArgumentParser(description=__doc__)).parse_args()
    folder = ROOT / "data" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"Elicitation store: one transaction per answer, {args.writers} concurrent writers x "
          f"{args.answers} answers each; {args.repeats} runs per regime (the machine is shared, so "
          "the load average is printed with each run)")
    for label, think, same in (("paced, pause U(0, 200) ms", 100.0, False), ("saturated, no pause", 0.0, False),
                               ("one stakeholder's tabs on one card, no pause", 0.0, True)):
        runs = []
        for _ in range(args.repeats):
            load = os.getloadavg()[0]
            with tempfile.TemporaryDirectory(dir=folder, prefix="bench-") as tmp:
                url = args.url or f"sqlite:///{Path(tmp) / 'bench.sqlite'}"
                runs.append({**run(url, args.writers, args.answers, think, same), "load": load})
        print(f"[{label}] on {url.split(':', 1)[0]}")
        for r in runs:
            print(f"  load {r['load']:4.1f}: stored {r['stored']}/{r['n']}, {r['n'] / r['wall']:6.0f} answers/s, "
                  f"p50 {r['p50']:6.2f} ms, p95 {r['p95']:6.2f} ms, p99 {r['p99']:6.2f} ms, max {r['max']:6.2f} ms")
        p95 = float(np.median([r["p95"] for r in runs]))
        lost = sum(r["n"] - r["stored"] for r in runs)
        verdict = ("OK" if p95 < TARGET_P95_MS else "MISSED") + ("" if think else " (stress test)")
        # Every acknowledged click must be stored: record_answer raises rather than drop one.
        print(f"  median p95 {p95:.2f} ms   target < {TARGET_P95_MS:.0f} ms  {verdict};  "
              f"answers lost or duplicated: {lost}")


if __name__ == "__main__":
    main()
