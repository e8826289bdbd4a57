"""SmartNoise's AIM (smartnoise-synth) on the peers benchmark's extract, run in the peer's own virtualenv.

Reads the integer-coded CSV, fits ``AIMSynthesizer`` at the given epsilon and delta with every column
categorical (its defaults otherwise), samples as many rows, writes them as CSV and prints one JSON
line: the CPU seconds of fit + sample. Its noise comes from numpy's global generator, seeded here.
Imports only the peer's package, numpy and pandas: nothing of the project.
"""
import argparse
import json
import time

import numpy as np
import pandas as pd
from snsynth.aim import AIMSynthesizer


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
    np.random.seed(args.seed)
    t0 = time.process_time()
    synth = AIMSynthesizer(epsilon=args.epsilon, delta=args.delta)
    synth.fit(data, categorical_columns=list(data.columns))
    rows = synth.sample(len(data))
    cpu = time.process_time() - t0
    pd.DataFrame(rows, columns=data.columns).to_csv(args.out, index=False)
    print(json.dumps({"fit_sample_cpu": cpu}))


if __name__ == "__main__":
    main()
