"""Our AIM on the peers benchmark's extract: run in a child process by ``peers_bench.py`` (``runner.run``:
reads the integer-coded CSV and its domain, times fit + sample at the given epsilon, writes the rows)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.contracts import make_rng  # noqa: E402
from core.privacy.accounting import rho_for_epsilon  # noqa: E402
from core.synthesis import make_synthesizer  # noqa: E402
from runner import run  # noqa: E402


def fit_sample(data, domain, args):
    model = make_synthesizer("aim").fit(data, domain, rho_for_epsilon(args.epsilon, args.delta), make_rng(args.seed))
    return model.sample(len(data), make_rng(args.seed + 1000))


if __name__ == "__main__":
    run(fit_sample)
