"""Long fits report their own rounds through the workflow's progress, and Cancelled stops them."""
import pytest

from core.contracts import Cancelled, DataRef
from core.datasets import load_dataset
from core.synthesis import AIMParams, ReleasePlan, SweepPlan, SynthesisPlan, run
from core.synthesis.sweep import fit_progress
from core.synthesis.workflow import secure_release

COLUMNS = ("age_band", "education", "sex", "income")


@pytest.fixture(scope="module")
def small_cps():
    return load_dataset("cps").head(3000)[list(COLUMNS)].reset_index(drop=True)


def _plan(method="pooled", seed=0, epsilon=1.0):
    return SynthesisPlan(data=DataRef("cps"), columns=COLUMNS, strata=("sex",), target=None, synthesizer="aim",
                         synth_params=AIMParams(max_rounds=4), release=ReleasePlan(epsilon, method, seed))


def test_a_pooled_aim_release_reports_its_rounds(small_cps):
    heard = []
    result = run(_plan(seed=11), small_cps, progress=lambda d, t, m: heard.append((d, t, m)))
    assert result.release is not None
    rounds = [h for h in heard if "AIM round" in h[2]]
    assert rounds, heard
    assert all(m.startswith("fit 1 of 1 - AIM round") and "of the budget left" in m for _, _, m in rounds)
    assert rounds[0][0] == 1 and rounds[0][1] == 4          # round 1 of about 4 planned
    assert [d for d, _, _ in rounds] == sorted(d for d, _, _ in rounds)


def test_cancelled_inside_a_round_stops_the_release(small_cps):
    calls = []

    def stop(done, total, message):
        calls.append(message)
        if "AIM round 2" in message:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        run(_plan(seed=12), small_cps, progress=stop)
    assert sum("AIM round" in m for m in calls) == 2        # nothing ran after the cancelling round
    with pytest.raises(Cancelled):                          # the secure release stops the same way
        secure_release(_plan(seed=13), small_cps, progress=stop)


def test_a_stratified_release_reports_progress_per_stratum(small_cps):
    heard = []
    run(_plan("stratified", seed=14), small_cps, progress=lambda d, t, m: heard.append(m))
    assert heard and all(m.startswith("fit 1 of 1 - ") for m in heard)


def test_a_one_process_sweep_reports_rounds_with_the_fit_number(small_cps):
    plan = _plan().replace(release=None, sweep=SweepPlan(epsilons=(2.0,), seeds=(0,)))
    from core.synthesis.sweep import run_sweep
    from core.synthesis.workflow import prepare

    frame, _ = prepare(plan, small_cps)
    heard = []
    run_sweep(plan, frame, lambda d, t, m: heard.append(m), n_jobs=1)
    assert any(m.startswith("fit 2 of 2 (pooled, epsilon 2) - AIM round") for m in heard)
    assert heard[-1] == "synthesizer fits"


def test_fit_progress_only_for_fits_that_accept_it():
    class Plain:
        def fit(self, df, domain, rho, rng):
            return self

    class Rounds:
        def fit(self, df, domain, rho, rng, progress=None):
            progress(1, 3, "round 1")
            return self

    class Keywords:
        def fit(self, df, domain, rho, rng, **extra):
            return self

    assert fit_progress(Plain(), print, "fit 1 of 1") == {}
    assert set(fit_progress(Keywords(), print, "fit 1 of 1")) == {"progress"}
    assert fit_progress(Rounds(), None, "fit 1 of 1") == {}
    heard = []
    Rounds().fit(None, None, 1.0, None, **fit_progress(Rounds(), lambda *a: heard.append(a), "fit 3 of 4"))
    assert heard == [(1, 3, "fit 3 of 4 - round 1")]
