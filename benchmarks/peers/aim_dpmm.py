"""dpmm's AIM (``AIMPipeline``) on the peers benchmark's extract, run in the peer's own virtualenv.

Fits the pipeline on the codes as they are (its binning step off: every column is already categorical, so
none of the budget goes to bins) in one process (``n_jobs=1``, so the child's CPU is all of it); the rest
(arguments, timing, output) is ``runner.run``. Imports only the peer's package and pandas: nothing of the
project.
"""
from dpmm.pipelines.aim import AIMPipeline
from runner import run


def fit_sample(data, domain, args):
    pipe = AIMPipeline(epsilon=args.epsilon, delta=args.delta, n_jobs=1, disable_processing=True)
    pipe.fit(data, domain=domain, random_state=args.seed)
    return pipe.generate(n_records=len(data), random_state=args.seed + 1000)[list(data.columns)]


if __name__ == "__main__":
    run(fit_sample)
