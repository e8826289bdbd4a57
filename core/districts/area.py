"""The district maps, described once for the shared machinery (``core.areas``)."""
from __future__ import annotations

from core.areas import AreaSpec, CostModel, OverlaySpec, PlanParts, register_area
from core.districts.cost import DEFAULT_COSTS, estimate_districts
from core.districts.workflow import DistrictPlan, run


def district_figure(plan: DistrictPlan) -> tuple[str, str]:
    return ("each district's noisy population error in the first plan (the page's district chart)",
            "from core.figures import districts as figures\n\n"
            "fig = figures.district_error_figure(result.plan_districts(1))")


AREA = register_area(AreaSpec(
    "districts", "District maps", run,
    plans=(PlanParts(DistrictPlan, CostModel("district plans and ensembles", estimate_districts, DEFAULT_COSTS),
                     figure=district_figure,
                     overlay=OverlaySpec("districts", "district", ("mean_abs_error",),
                                         "Mean absolute population error by district (plan 1)", "people",
                                         where={"plan": 1})),)))

__all__ = ["AREA"]
