"""AIM against packaged peers' AIM: CPU seconds and two-way TVD on one extract, each peer in its own virtualenv.

Writes the bundled CPS extract (``core.datasets.load_cps``, the first ``--rows`` rows, integer codes
over the public domain) to a CSV with its domain as JSON, then runs, each in a child process, our AIM
(this interpreter, ``aim_ours.py``) and every peer's AIM (``aim_<peer>.py`` under the peer's
virtualenv, which ``run.sh`` builds in the cache folder), all at the same epsilon and delta 1e-9.
Measured per tool: the child's CPU seconds (user + system of the whole process, imports included,
from ``getrusage`` of the waited child), the fit + sample CPU seconds the child reports, and the mean
two-way TVD of its synthetic rows (as many as the real ones) against the real rows, computed here by
``core.synthesis.metrics.two_way_tvd``. Ratios are peer / ours (above 1: the peer costs more, or is
less accurate). One seeded run per tool: a peer's run can take many minutes. A peer that is not
installed or fails is reported as such, with the reason, and the others still are.

Not a test and not part of ``make bench``: ``make bench-peers`` (or ``benchmarks/peers/run.sh``).
Run: .venv/bin/python benchmarks/peers/peers_bench.py [--cache .cache/peers] [--epsilon 0.1] [--rows 50000]
     [--peers smartnoise,dpmm] [--timeout 3600]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent))

from core.datasets import load_cps  # noqa: E402
from core.synthesis.encoding import encode_categories  # noqa: E402
from core.synthesis.metrics import two_way_tvd  # noqa: E402
from timing import Value, load, record  # noqa: E402

PEERS = {"smartnoise": "smartnoise-synth", "dpmm": "dpmm"}
"""Peer name (its virtualenv's folder and runner ``aim_<name>.py``) -> the PyPI package that brings its AIM."""


@dataclass(frozen=True)
class Run:
    tool: str
    child_cpu: float | None = None
    fit_cpu: float | None = None
    tvd: float | None = None
    failure: str = ""


def write_extract(folder: Path, rows: int) -> tuple[Path, Path, pd.DataFrame, dict]:
    codes, domain, _ = encode_categories(load_cps())
    if rows > len(codes):
        raise ValueError(f"--rows {rows} is more than the extract's {len(codes):,} rows; choose at most that.")
    codes = codes.iloc[:rows].reset_index(drop=True)
    folder.mkdir(parents=True, exist_ok=True)
    data, dom = folder / f"cps_{rows}.csv", folder / f"cps_{rows}_domain.json"
    codes.to_csv(data, index=False)
    dom.write_text(json.dumps({k: int(v) for k, v in domain.items()}))
    return data, dom, codes, domain


def children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_tool(tool: str, python: Path, runner: Path, data: Path, dom: Path, out: Path, args, real, domain) -> Run:
    """One child process of ``runner`` under ``python``: its CPU, its reported fit + sample CPU, its TVD."""
    command = [str(python), str(runner), "--data", str(data), "--domain", str(dom), "--epsilon", str(args.epsilon),
               "--seed", str(args.seed), "--out", str(out)]
    env = {**os.environ, "DASHBOARD_N_JOBS": "1", "PYTHONPATH": ""}
    before = children_cpu()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Run(tool, failure=f"did not finish within {args.timeout:g} s")
    cpu = children_cpu() - before
    if done.returncode:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return Run(tool, child_cpu=cpu, failure=f"exited {done.returncode}: {tail}")
    try:
        fit_cpu = json.loads(done.stdout.strip().splitlines()[-1])["fit_sample_cpu"]
        synth = pd.read_csv(out).astype(int)[list(real.columns)]
        bad = [c for c in real.columns if synth[c].min() < 0 or synth[c].max() >= domain[c]]
        if bad:
            return Run(tool, child_cpu=cpu, failure=f"wrote codes outside the domain in {', '.join(bad)}")
        tvd = float(two_way_tvd(real, synth, domain)["tvd"].mean())
    except (ValueError, KeyError, IndexError) as err:
        return Run(tool, child_cpu=cpu, failure=f"unreadable output: {err}")
    return Run(tool, cpu, fit_cpu, tvd)


def show(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "peers", help="folder of the peers' virtualenvs")
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated, from: " + ", ".join(PEERS))
    ap.add_argument("--timeout", type=float, default=3600, help="seconds one tool may run")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise SystemExit(f"Unknown peer(s) {', '.join(unknown)}: choose from {', '.join(PEERS)}.")
    data, dom, real, domain = write_extract(args.cache / "data", args.rows)
    print(f"AIM peers: CPS extract, {len(real):,} rows x {real.shape[1]} columns, epsilon {args.epsilon:g}, "
          f"delta 1e-9, seed {args.seed}; one run per tool; {load()}", flush=True)
    runs = [run_tool("ours", Path(sys.executable), HERE / "aim_ours.py", data, dom, args.cache / "data" / "ours.csv",
                     args, real, domain)]
    print(f"  ours done; {load()}", flush=True)
    for peer in peers:
        python = args.cache / peer / "bin" / "python"
        if not (args.cache / peer / ".installed").exists() or not python.exists():
            runs.append(Run(peer, failure=f"not installed (benchmarks/peers/run.sh installs {PEERS[peer]}; "
                                          f"see {args.cache / (peer + '.log')})"))
        else:
            runs.append(run_tool(peer, python, HERE / f"aim_{peer}.py", data, dom,
                                 args.cache / "data" / f"{peer}.csv", args, real, domain))
        print(f"  {peer} done; {load()}", flush=True)
    ours = runs[0]
    print(f"\n{'tool':>11} {'child CPU s':>12} {'fit+sample CPU s':>17} {'2-way TVD':>10} {'CPU peer/ours':>14} "
          f"{'TVD peer/ours':>14}")
    for r in runs:
        both = not r.failure and not ours.failure
        cpu_ratio = r.child_cpu / ours.child_cpu if both else None
        tvd_ratio = r.tvd / ours.tvd if both else None
        print(f"{r.tool:>11} {show(r.child_cpu, 1):>12} {show(r.fit_cpu, 1):>17} {show(r.tvd, 4):>10} "
              f"{show(cpu_ratio if r is not ours else None, 2):>14} {show(tvd_ratio if r is not ours else None, 2):>14}"
              + (f"   FAILED: {r.failure}" if r.failure else ""))
        if r is not ours and both:
            record(f"AIM, {len(real):,} rows, epsilon {args.epsilon:g}: {r.tool} / ours, child CPU "
                   f"({r.child_cpu:.1f} s / {ours.child_cpu:.1f} s)", Value(cpu_ratio, cpu_ratio, cpu_ratio), unit="x")
            record(f"AIM, {len(real):,} rows, epsilon {args.epsilon:g}: {r.tool} / ours, 2-way TVD "
                   f"({r.tvd:.4f} / {ours.tvd:.4f})", Value(tvd_ratio, tvd_ratio, tvd_ratio), unit="x", clock="-")
    print(f"\n{load()}")


if __name__ == "__main__":
    main()
