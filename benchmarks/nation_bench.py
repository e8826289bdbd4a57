"""A nation's microdata on a Dask cluster: MST and AIM end to end on a partitioned Parquet file.

Writes a file of --rows rows (default 20,000,000, resampled with replacement from the bundled CPS
extract's 10 columns, stored as text categories) in parts of --part-rows rows, then on a
two-worker LocalCluster on loopback (single-threaded workers):
1. counts every table MST needs in one pass (the workers read the parts themselves),
2. fits MST from the counts here, and draws a synthetic file of the same size in parts, each part
   drawn and written by a worker with its own child generator,
3. the same for AIM (epsilon 1, its default model-size cap).
It prints each step's wall time, the passes over the parts, and each worker's peak memory beside the
size of one part in memory. Not a test: run ``.venv/bin/python benchmarks/nation_bench.py [--rows N]``.
Writing 20,000,000 rows takes minutes; ``--data DIR`` keeps the written parts in DIR and reuses them
on the next run with the same --rows and --part-rows (e.g. MST first, then AIM on the same file).
"""
from __future__ import annotations

import argparse
import inspect
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from core.cluster import close_clients, use_scheduler  # noqa: E402
from core.datasets import cps_domain, load_dataset  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis.aim import AIM  # noqa: E402
from core.synthesis.parts import PartCounts, sample_in_parts  # noqa: E402
from timing import record  # noqa: E402
from core.synthesis.synthesizers import MST  # noqa: E402


def part_layout(rows: int, part_rows: int) -> list[tuple[str, int]]:
    """File name and row count of each part of a file of ``rows`` rows in parts of ``part_rows``."""
    return [(f"part-{i:05d}.parquet", min(part_rows, rows - start)) for i, start in enumerate(range(0, rows, part_rows))]


def write_parts(folder: Path, rows: int, part_rows: int) -> None:
    """The resampled file in the parts of ``part_layout``."""
    people = load_dataset("cps")
    rng = np.random.default_rng(20261126)
    for name, size in part_layout(rows, part_rows):
        part = people.iloc[rng.integers(0, len(people), size)].reset_index(drop=True)
        part.astype(str).to_parquet(folder / name, index=False)


def reusable_parts(folder: Path, rows: int, part_rows: int) -> bool:
    """True when ``folder`` holds the parts a run with these sizes writes (names and row counts)."""
    import pyarrow.parquet as pq

    layout = part_layout(rows, part_rows)
    found = sorted(folder.glob("part-*.parquet"))
    if [p.name for p in found] != [name for name, _ in layout]:
        return False
    return [pq.ParquetFile(p).metadata.num_rows for p in found] == [size for _, size in layout]


def part_frame_mb(path: Path) -> float:
    """Megabytes of one part as the workers read it (its text columns in a pandas frame)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pandas().memory_usage(index=True, deep=True).sum() / 1e6


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


ROUND_LINES_EVERY = 30.0
"""Seconds between the lines that say how far a fit has got (its rounds, its model's size)."""


def round_reporter(name: str, synthesizer, started: float):
    """A fit's ``progress(round, planned, message)`` that prints, at most every ROUND_LINES_EVERY
    seconds, the fit's own message (for AIM: the round reached and the budget left), the model's size
    and the last estimate's CPU seconds (so a run stopped before its end still says how far it got)."""
    last = [started]

    def progress(t: int, planned: int, message: str) -> None:
        now = time.perf_counter()
        if now - last[0] < ROUND_LINES_EVERY:
            return
        last[0] = now
        done = getattr(synthesizer, "estimates_", None) or [{}]
        model = done[-1].get("model_mb", float("nan"))
        cpu = done[-1].get("cpu_s", float("nan"))
        print(f"    {name} at {now - started:.0f} s: {message or f'round {t} of {planned}'}; model {model:.1f} MB, "
              f"last estimate {cpu:.1f} s CPU; load {os.getloadavg()[0]:.1f}", flush=True)

    return progress


def end_to_end(name: str, synthesizer, folder: Path, labels: dict, rows: int, n_parts: int, rho: float,
               out: Path) -> None:
    t0 = time.perf_counter()
    source = PartCounts(folder, labels)
    takes_progress = "progress" in inspect.signature(synthesizer.fit).parameters
    options = {"progress": round_reporter(name, synthesizer, t0)} if takes_progress else {}
    fitted = synthesizer.fit(source, None, rho, np.random.default_rng(1), **options)
    t_fit = time.perf_counter() - t0
    t1 = time.perf_counter()
    paths = sample_in_parts(fitted, rows, n_parts, seed=2, labels=labels, folder=out / name)
    t_sample = time.perf_counter() - t1
    estimates = getattr(fitted, "estimates_", None)
    rounds = (f"; {len(fitted.rounds_)} rounds, model {estimates[-1]['model_mb']:.1f} MB, estimation "
              f"{sum(e['cpu_s'] for e in estimates):.0f} s CPU" if estimates and hasattr(fitted, "rounds_") else "")
    print(f"  {name}: end to end {t_fit + t_sample:.1f} s (count + fit {t_fit:.1f} s, {source.passes} pass over "
          f"{source.n_parts} parts{rounds}; synthetic {rows:,} rows in {len(paths)} parts {t_sample:.1f} s); "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    record(f"{name} end to end on {rows:,} rows in {source.n_parts} parts, two-worker cluster, one run",
           t_fit + t_sample, clock="wall")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--part-rows", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--synthesizers", default="mst,aim")
    parser.add_argument("--data", type=Path, default=None,
                        help="folder for the input parts, kept after the run and reused when it already "
                             "holds --rows rows in parts of --part-rows (default: a temporary folder)")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    labels = cps_domain()
    rho = rho_for_epsilon(args.epsilon, 1e-9)
    work = Path(tempfile.mkdtemp(prefix="nation_"))
    try:
        t0 = time.perf_counter()
        data = work / "in" if args.data is None else args.data
        if args.data is not None and reusable_parts(data, args.rows, args.part_rows):
            written = f"reused from {data}"
        else:
            if data.exists():
                for old in data.glob("part-*.parquet"):
                    old.unlink()
            data.mkdir(parents=True, exist_ok=True)
            write_parts(data, args.rows, args.part_rows)
            written = f"written in {time.perf_counter() - t0:.0f} s" + ("" if args.data is None else f" to {data}")
        part_bytes = args.part_rows * len(labels) * 8
        n_parts = len(part_layout(args.rows, args.part_rows))
        print(f"Nation on Dask: {args.rows:,} rows x {len(labels)} columns in {n_parts} Parquet parts "
              f"({written}); two single-threaded workers on loopback; load {os.getloadavg()[0]:.1f}")
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address="127.0.0.1:0", silence_logs=50) as cluster:
            with use_scheduler(cluster.scheduler_address):
                for name in args.synthesizers.split(","):
                    synthesizer = {"mst": MST(), "aim": AIM()}[name.strip()]
                    end_to_end(name.strip().upper(), synthesizer, data, labels, args.rows, n_parts, rho, work)
                with Client(cluster.scheduler_address) as client:
                    peaks = client.run(peak_mb)
            close_clients()
        here = peak_mb()                        # before reading a part here to measure it
        print(f"  worker peak memory: {', '.join(f'{v:.0f} MB' for v in peaks.values())}; one part's codes "
              f"{part_bytes / 1e6:.0f} MB, read as text {part_frame_mb(data / 'part-00000.parquet'):.0f} MB; "
              f"this process {here:.0f} MB; load {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
