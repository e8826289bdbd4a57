"""Widget keys of the Stratified synthesis page and their values for a saved plan ("Open a saved report").

Declared plan fields are keyed ``ss_<field>`` (SynthesisPlan) and ``ss_me_<field>`` (MeansPlan) and are
restored from their declaration; the rest are restored here by hand: the per-data-set pickers
(``ss_columns_<data>``, ``ss_strata_<data>``, ``ss_target_<data>``, ``ss_bounds_<data>``), the sweep's
epsilons (typed as text) and seed count, the synthesizer's Params and the requested tabs.
"""
from __future__ import annotations

import dataclasses

from core.synthesis import SYNTHESIZERS, MeansPlan, SweepPlan, SynthesisPlan
from core.synthesis.plan import bounds_text
from dashboard.components.params_form import check_shown, params_widget_values, plan_widget_values

P = "ss"            # SynthesisPlan's declared fields: ss_<field>
ME = "ss_me"        # the mean-estimation simulation's: ss_me_<field>
NO_TARGET = "(none)"
#: Where SynthesisPlan starts (its dataclass defaults): the page's pickers start from its strata and target.
START = {f.name: f.default for f in dataclasses.fields(SynthesisPlan) if f.default is not dataclasses.MISSING}


def epsilons_text(epsilons) -> str:
    """Epsilons as the page's text box shows them: "0.1, 1, 5"."""
    return ", ".join(f"{e:g}" for e in epsilons)


def plan_to_widgets(plan: SynthesisPlan) -> dict:
    """Widget values (and requested tabs) that rebuild ``plan`` on this page. A plan holding a value
    the page does not offer (a delta off its menu, say) raises ValueError saying which."""
    slug = plan.data.source
    sweep = plan.sweep or SweepPlan()
    means = plan.means or MeansPlan()
    check_shown(plan)
    check_shown(means)
    values = {**plan_widget_values(plan, P), **plan_widget_values(means, ME),
              **params_widget_values(SYNTHESIZERS[plan.synthesizer], P, plan.params)}
    values.update({
        "ss_dataset": slug, f"ss_columns_{slug}": list(plan.columns), f"ss_strata_{slug}": list(plan.strata),
        f"ss_target_{slug}": plan.target or NO_TARGET, f"ss_bounds_{slug}": bounds_text(plan.numeric_bounds),
        "ss_epsilons": epsilons_text(sweep.epsilons), "ss_seeds": len(sweep.seeds),
        "ss_requested": {"setup": plan.setup().digest(),
                         **{k: getattr(plan, k) for k in ("sweep", "marginals", "release") if getattr(plan, k)}},
    })
    if plan.release is not None:     # drawn by the release tab under its own keys
        values.update({"ss_rel_eps": plan.release.epsilon, "ss_rel_method": plan.release.method,
                       "ss_rel_seed": plan.release.seed})
    return values
