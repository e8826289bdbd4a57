"""The small AIM sweep the relay tests run: 2,000 CPS rows, four columns, two strata, three rounds a fit,
one epsilon and one seed; its two fits (stratified and pooled) fan out, so their rounds have to be relayed."""
from __future__ import annotations


def small_aim_sweep():
    """``(plan, frame)`` ready for ``core.synthesis.sweep.run_sweep``."""
    from core.contracts import DataRef
    from core.datasets import load_dataset
    from core.synthesis import AIMParams, SweepPlan, SynthesisPlan
    from core.synthesis.workflow import prepare

    columns = ("age_band", "education", "sex", "income")
    data = load_dataset("cps").head(2000)[list(columns)].reset_index(drop=True)
    plan = SynthesisPlan(data=DataRef("cps"), columns=columns, strata=("sex",), target=None, synthesizer="aim",
                         synth_params=AIMParams(max_rounds=3), sweep=SweepPlan(epsilons=(2.0,), seeds=(0,)))
    frame, _ = prepare(plan, data)
    return plan, frame
