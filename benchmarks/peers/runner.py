"""What every AIM runner of the peers benchmark shares: its command line, reading the extract, timing fit +
sample in CPU seconds of this process, and writing the synthetic rows and the one JSON line
``peers_bench.py`` reads. Imports only pandas and the standard library, so a peer's own virtualenv runs it.
"""
import argparse
import json
import time
from pathlib import Path
from typing import Callable

import pandas as pd


def run(fit_sample: Callable[[pd.DataFrame, dict, argparse.Namespace], pd.DataFrame]) -> None:
    """Parse ``--data --domain --epsilon [--delta] [--seed] --out``, read the integer-coded CSV and its domain
    (column -> number of codes), time ``fit_sample(data, domain, args)`` (the synthetic rows, as many as the
    input) with the process's CPU clock, write the rows in the input's column order and print
    ``{"fit_sample_cpu": seconds}``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    data = pd.read_csv(args.data)
    domain = json.loads(Path(args.domain).read_text())
    start = time.process_time()
    synth = fit_sample(data, domain, args)
    cpu = time.process_time() - start
    pd.DataFrame(synth, columns=data.columns).to_csv(args.out, index=False)
    print(json.dumps({"fit_sample_cpu": cpu}))
