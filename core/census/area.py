"""The budget allocation, described once for the shared machinery (``core.areas``)."""
from __future__ import annotations

from core.areas import AreaSpec, CostModel, OverlaySpec, PlanParts, register_area
from core.census.budget_plan import BudgetPlan, run
from core.census.cost import DEFAULT_COSTS, estimate_budget
from core.census.words import budget_lead


def budget_figure(plan: BudgetPlan) -> tuple[str, str]:
    return ("how the budget is split across the geography's levels (the page's first chart)",
            "from core.figures import census as figures\n\n"
            "fig = figures.budget_shares_figure(result.levels, result.allocation.unit)")


AREA = register_area(AreaSpec(
    "census", "Budget allocation", run,
    plans=(PlanParts(BudgetPlan, CostModel("budget allocation", estimate_budget, DEFAULT_COSTS),
                     figure=budget_figure,
                     overlay=OverlaySpec("levels", "level", ("budget (rho)", "budget (epsilon)"),
                                         "Budget per level", "budget"),
                     lead=budget_lead),)))

__all__ = ["AREA"]
