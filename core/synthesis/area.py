"""Stratified synthesis, described once for the shared machinery (``core.areas``)."""
from __future__ import annotations

from core.areas import AreaSpec, CostModel, OverlaySpec, PlanParts, register_area
from core.synthesis.cost import DEFAULT_COSTS, estimate_synthesis
from core.synthesis.plan import SynthesisPlan
from core.synthesis.workflow import run


def synthesis_figure(plan: SynthesisPlan) -> tuple[str, str]:
    return ("the size of each stratum (the page's first chart)",
            "from core.figures import synthesis as figures\n\n"
            "fig = figures.strata_sizes_figure(result.overview, 0)")


AREA = register_area(AreaSpec(
    "synthesis", "Stratified synthesis", run,
    plans=(PlanParts(SynthesisPlan, CostModel("synthesis sweep", estimate_synthesis, DEFAULT_COSTS),
                     figure=synthesis_figure,
                     overlay=OverlaySpec("overall_metrics", "epsilon", ("value",), "Parity error against epsilon "
                                         "(mean over seeds)", "parity error", series="method",
                                         where={"metric": "parity_error"}, line=True),
                     words={"release": "Release of a synthetic file", "target": "Outcome column"}),)))

__all__ = ["AREA"]
