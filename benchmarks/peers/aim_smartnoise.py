"""SmartNoise's AIM (smartnoise-synth) on the peers benchmark's extract, run in the peer's own virtualenv.

Fits ``AIMSynthesizer`` with every column categorical (its defaults otherwise); its noise comes from numpy's
global generator, seeded here. The rest (arguments, timing, output) is ``runner.run``. Imports only the
peer's package, numpy and pandas: nothing of the project.
"""
import numpy as np
from runner import run
from snsynth.aim import AIMSynthesizer


def fit_sample(data, domain, args):
    np.random.seed(args.seed)
    synth = AIMSynthesizer(epsilon=args.epsilon, delta=args.delta)
    synth.fit(data, categorical_columns=list(data.columns))
    return synth.sample(len(data))


if __name__ == "__main__":
    run(fit_sample)
