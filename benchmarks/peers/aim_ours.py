"""Our AIM on the peers benchmark's extract: run in a child process by ``peers_bench.py``.

Reads the integer-coded CSV and its domain (JSON), fits AIM at the given epsilon (delta 1e-9),
samples as many rows, writes them as CSV and prints one JSON line: the CPU seconds of fit + sample.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.contracts import make_rng  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis import make_synthesizer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    data = pd.read_csv(args.data)
    domain = json.loads(Path(args.domain).read_text())
    t0 = time.process_time()
    model = make_synthesizer("aim").fit(data, domain, rho_for_epsilon(args.epsilon, args.delta), make_rng(args.seed))
    synth = model.sample(len(data), make_rng(args.seed + 1000))
    cpu = time.process_time() - t0
    synth.to_csv(args.out, index=False)
    print(json.dumps({"fit_sample_cpu": cpu}))


if __name__ == "__main__":
    main()
