"""AIM's step schedule: a round's fit on a model larger than ``accelerate_mb`` takes half as many
accelerated steps; smaller models keep the plain steps, so their fits (and ledgers) are the ones
of a schedule without the threshold; the budget's rules do not depend on the schedule."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.synthesis.aim import MEASURE_SHARE, AIM, planned_rounds
from core.synthesis.graphical_model import WORK
from tests.unit.graphical_support import DOM, correlated_rows



def frame(n: int = 3000, seed: int = 16) -> pd.DataFrame:
    return pd.DataFrame(correlated_rows(n, seed))


def test_the_schedule_is_plain_below_the_threshold_and_half_as_many_accelerated_steps_above():
    aim = AIM(iters=40, accelerate_mb=2.0)
    assert aim.schedule(0.5) == (40, False)
    assert aim.schedule(2.0) == (40, False)          # "larger than": the threshold itself stays plain
    assert aim.schedule(2.5) == (20, True)
    assert aim.schedule(0.5, final=True) == (60, True)
    assert aim.schedule(50.0, final=True) == (60, True)
    plain = AIM(iters=40, accelerate=False, accelerate_mb=0.0)
    assert plain.schedule(50.0) == (40, False)
    assert plain.schedule(50.0, final=True) == (120, False)


def test_a_fit_takes_the_steps_its_models_size_calls_for():
    df = frame()
    first = AIM(max_rounds=6, iters=40).fit(df, DOM, 0.5, np.random.default_rng(17))
    # a threshold between the one-way model and the final one: both kinds of round occur
    sizes = sorted({e["model_mb"] for e in first.estimates_})
    assert len(sizes) > 2
    cut = sizes[len(sizes) // 2]
    restarts = WORK["restarts"]
    model = AIM(max_rounds=6, iters=40, accelerate_mb=cut).fit(df, DOM, 0.5, np.random.default_rng(17))
    rounds, final = model.estimates_[:-1], model.estimates_[-1]
    assert {e["accelerated"] for e in rounds} == {False, True}
    for e in rounds:
        assert e["accelerated"] == (e["model_mb"] > cut)
        assert 0 < e["steps"] <= (20 if e["accelerated"] else 40)
    assert final["accelerated"] and 0 < final["steps"] <= 60
    assert WORK["restarts"] > restarts                 # momentum ran (and restarted) somewhere


def test_models_below_the_threshold_keep_the_plain_rounds_and_the_same_ledger():
    df = frame()
    fits = [AIM(max_rounds=6, iters=40, accelerate_mb=mb).fit(df, DOM, 0.5, np.random.default_rng(17))
            for mb in (math.inf, 2.0)]
    old, new = fits
    assert max(e["model_mb"] for e in new.estimates_) < 2.0
    assert [(s.label, s.amount, s.measured) for s in old.ledger_.spends] == \
        [(s.label, s.amount, s.measured) for s in new.ledger_.spends]
    assert old.rounds_ == new.rounds_
    assert [(e["steps"], e["accelerated"]) for e in old.estimates_] == \
        [(e["steps"], e["accelerated"]) for e in new.estimates_]
    assert old.model_.loss == new.model_.loss


@pytest.mark.parametrize("accelerate_mb", [0.0, math.inf])
def test_the_budgets_rules_hold_whatever_the_schedule(accelerate_mb):
    df = frame()
    rho, T = 0.5, 6
    model = AIM(max_rounds=T, iters=40, accelerate_mb=accelerate_mb).fit(df, DOM, rho, np.random.default_rng(17))
    spends = model.ledger_.spends
    assert math.fsum(s.amount for s in spends) == pytest.approx(rho, rel=1e-12)
    assert planned_rounds(T, len(DOM)) == T
    # one-way marginals: d rounds' measurement share, capped at half the budget
    assert spends[0].label == "one-way marginals"
    assert spends[0].amount == pytest.approx(min(len(DOM) * MEASURE_SHARE * rho / T, rho / 2), rel=1e-12)
    # every round: a selection then a measurement, 1:9 of that round's share; a round's share is the
    # planned one times 4 per annealing before it, or the whole rest in the last round
    share = rho / T
    for k, r in enumerate(model.rounds_):
        sel, meas = spends[1 + 2 * k], spends[2 + 2 * k]
        assert (sel.label, meas.label) == (f"round {r['round']}: selection", f"round {r['round']}: measurement")
        assert sel.amount == pytest.approx((1 - MEASURE_SHARE) / MEASURE_SHARE * meas.amount, rel=1e-9)
        last = k == len(model.rounds_) - 1
        if not last:
            assert sel.amount + meas.amount == pytest.approx(share, rel=1e-12)
        if r["annealed"]:
            share *= 4
