"""dpmm's AIM (``AIMPipeline``) on the peers benchmark's extract, run in the peer's own virtualenv.

Reads the integer-coded CSV and its domain (column -> number of codes), fits the pipeline at the given
epsilon and delta on the codes as they are (its binning step off: every column is already categorical,
so none of the budget goes to bins) in one process (``n_jobs=1``, so the child's CPU is all of it),
samples as many rows, writes them as CSV and prints one JSON line: the CPU seconds of fit + sample.
Imports only the peer's package and pandas: nothing of the project.
"""
import argparse
import json
import time
from pathlib import Path

import pandas as pd
from dpmm.pipelines.aim import AIMPipeline


def main() -> None:
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
    t0 = time.process_time()
    pipe = AIMPipeline(epsilon=args.epsilon, delta=args.delta, n_jobs=1, disable_processing=True)
    pipe.fit(data, domain=domain, random_state=args.seed)
    synth = pipe.generate(n_records=len(data), random_state=args.seed + 1000)
    cpu = time.process_time() - t0
    synth[list(data.columns)].to_csv(args.out, index=False)
    print(json.dumps({"fit_sample_cpu": cpu}))


if __name__ == "__main__":
    main()
