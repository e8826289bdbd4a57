"""The coherence audit, described once for the shared machinery (``core.areas``)."""
from __future__ import annotations

from core.areas import AreaSpec, CostModel, OverlaySpec, PlanParts, register_area
from core.coherence.cost import DEFAULT_COSTS, estimate_audit
from core.coherence.plan import AuditPlan, SweepPlan
from core.coherence.publish import PublishPlan
from core.coherence.run import run


def audit_figure(plan: AuditPlan) -> tuple[str, str] | None:
    if getattr(plan, "compare", False):
        return ("the distance of each subgroup for the worst adversary (the page's heat map)",
                "from core.figures import coherence as figures\n\n"
                "comparison = result.comparison\n"
                "worst = comparison.worst_adversary()[\"adversary\"]\n"
                "fig = figures.distance_heatmap(comparison.subgroups, worst, comparison.settings[\"alpha\"])")
    if getattr(plan, "sweep", None) is not None:
        return ("the audit's outcome across epsilons",
                "from core.figures import coherence as figures\n\n"
                "sweep = result.sweep\n"
                "fig = figures.epsilon_figure(sweep.audit.summary, sweep.audit.releases, sweep.theory,\n"
                "                             sweep.audit.settings[\"beta\"])")
    return None


AREA = register_area(AreaSpec(
    "coherence", "Coherence audit", run,
    plans=(PlanParts(AuditPlan, CostModel("coherence audit", estimate_audit, DEFAULT_COSTS),
                     figure=audit_figure,
                     overlay=OverlaySpec("theory_gamma", "epsilon", ("gamma",), "Subgroup size the theory needs",
                                         "gamma", series="constants"),
                     words={"target": "Target attribute"}),),
    sub_words={PublishPlan: {"release": "Release method"}, SweepPlan: {"release": "Release method swept"}}))

__all__ = ["AREA"]
