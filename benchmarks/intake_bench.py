"""Intake benchmark: read + profile + draft + check of a 1,000,000-row x 30-column messy CSV (not a test).

Targets: under 10 s and under 2 GB peak memory for reading, profiling and checking together.

The CSV is generated in a temporary folder (about 150 MB; chunked, so generating it stays small):
10 category columns (case variants, trailing spaces, blanks, "N/A"), 10 number columns (half
written as "45,000" / "$45,000" / "12%", some "unknown"), 5 numeric code columns, a person id with
repeats, a row id and 3 free-text columns. The measurement runs in a fresh child process so its
peak resident memory (``ru_maxrss``) counts reading, profiling and checking only.

Run: .venv/bin/python benchmarks/intake_bench.py [--rows 1000000]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from timing import record  # noqa: E402

CHUNK = 100_000
TARGET_SECONDS = 10.0
TARGET_BYTES = 2 * 1024**3


def chunk(rng: np.random.Generator, start: int, rows: int) -> pd.DataFrame:
    cols = {}
    people = start + np.arange(rows)
    people[rng.random(rows) < 0.02] -= 1
    cols["person_id"] = np.char.add("P", np.char.zfill(people.astype(str), 8))
    cols["row_id"] = (start + np.arange(rows)).astype(str)
    labels = np.array(["Alpha", "Beta", "Gamma", "Delta", "Epsilon", "alpha", "BETA", "Gamma ", "", "N/A"])
    for i in range(10):
        cols[f"cat_{i}"] = labels[rng.integers(0, 4 + i % 6 + 1, rows)]
    for i in range(10):
        values = np.round(rng.lognormal(10, 1, rows), -1).astype(np.int64)
        text = values.astype(str).astype(object)
        if i % 2:
            style = rng.random(rows)
            text[style < 0.3] = [f"{v:,}" for v in values[style < 0.3]]
            text[(style >= 0.3) & (style < 0.35)] = [f"${v:,}" for v in values[(style >= 0.3) & (style < 0.35)]]
            text[(style >= 0.35) & (style < 0.36)] = "12%"
        text[rng.random(rows) < 0.01] = "unknown"
        cols[f"num_{i}"] = text
    for i in range(5):
        cols[f"code_{i}"] = rng.integers(1, 8, rows)
    words = np.array(["red", "green", "blue", "late", "early", "tall", "small", "house"])
    for i in range(3):
        cols[f"text_{i}"] = np.char.add(np.char.add(words[rng.integers(0, 8, rows)], " "),
                                        rng.integers(0, 100_000, rows).astype(str))
    return pd.DataFrame(cols)


def generate(path: Path, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for start in range(0, rows, CHUNK):
        chunk(rng, start, min(CHUNK, rows - start)).to_csv(path, mode="a", header=start == 0, index=False)


def measure(path: Path) -> None:
    from core.intake import check, draft_schema, profile, read_table

    c0, t0 = time.process_time(), time.perf_counter()
    frame = read_table(path, max_bytes=2_000_000_000)
    c1, t1 = time.process_time(), time.perf_counter()
    prof = profile(frame)
    c2, t2 = time.process_time(), time.perf_counter()
    schema = draft_schema(frame, "bench", profiled=prof)
    c3, t3 = time.process_time(), time.perf_counter()
    problems = check(frame, schema)
    c4, t4 = time.process_time(), time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # kB on Linux
    cpu = c4 - c0
    total = t4 - t0
    print(f"{len(frame):,} rows x {frame.shape[1]} columns ({path.stat().st_size / 1e6:.0f} MB)")
    print(f"wall: read {t1 - t0:.2f} s, profile {t2 - t1:.2f} s, draft {t3 - t2:.2f} s, check {t4 - t3:.2f} s")
    print(f"CPU:  read {c1 - c0:.2f} s, profile {c2 - c1:.2f} s, draft {c3 - c2:.2f} s, check {c4 - c3:.2f} s")
    print(f"total {total:.2f} s (target < {TARGET_SECONDS:.0f} s); peak memory {peak / 1024**3:.2f} GB "
          f"(target < {TARGET_BYTES / 1024**3:.0f} GB); {len(prof.columns)} columns profiled, "
          f"{len(problems)} problems found")
    print(f"CPU time {cpu:.2f} s (pyarrow reads on several threads; on a busy machine wall time also "
          "includes waiting for a core)")
    print("within targets" if total < TARGET_SECONDS and peak < TARGET_BYTES else "OVER TARGET")
    print(json.dumps({"rows": len(frame), "wall": total, "cpu": cpu, "peak_gb": peak / 1024**3}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "messy.csv"
        started = time.perf_counter()
        generate(path, args.rows)
        print(f"generated in {time.perf_counter() - started:.1f} s")
        done = subprocess.run([sys.executable, __file__, "--measure", str(path)], capture_output=True, text=True)
        print(done.stdout + done.stderr, end="")
        if done.returncode == 0:      # one run in a fresh process: its peak memory is the intake's alone
            out = json.loads(done.stdout.strip().splitlines()[-1])
            what = f"Intake read + profile + draft + check, {out['rows']:,} x 30 messy CSV, one run"
            record(what, out["wall"], clock="wall")
            record(f"{what}, peak memory", out["peak_gb"] * 1024, unit="MB", clock="-")
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
