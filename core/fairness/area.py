"""The fairness tools (elicitation, the pairwise learner, group fairness), described once for the shared
machinery (``core.areas``), and the area's ``run``, which dispatches on the plan's type."""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.areas import AreaSpec, CostModel, OverlaySpec, PlanParts, register_area
from core.fairness.cost import DEFAULT_COSTS, estimate_elicitation, estimate_group_fairness, estimate_learner
from core.fairness.elicitation import ElicitationPlan
from core.fairness.elicitation_plan import run_elicitation
from core.fairness.group_fairness_plan import GroupFairnessPlan, run_group_fairness
from core.fairness.learning_plan import LearningPlan, run_learning

# Each plan class of the area maps to the run that computes it; `run` dispatches on the plan's type
# so `core.report.run_plan` and `python -m core reproduce` find every fairness plan.
RUNS = {ElicitationPlan: run_elicitation, LearningPlan: run_learning, GroupFairnessPlan: run_group_fairness}


def run(plan, data=None, *, progress=None):
    """Run a fairness plan with the run registered for its class."""
    for cls, func in RUNS.items():
        if isinstance(plan, cls):
            return func(plan, data, progress=progress)
    raise ValueError(f"No fairness run takes a {type(plan).__name__}.")


def stored_data(plan, store=None):
    """What ``run(plan, data)`` needs from the project database, fetched here for a caller that has no
    page to fetch it (``python -m core reproduce``): the synthetic copy a design's cards showed or a
    learning plan's pairs name, loaded from ``store`` (default: the sessions database). None for plans
    that read only bundled data. The run itself never opens the database."""
    from core.fairness.private_pairs import load_copy_for

    if isinstance(plan, ElicitationPlan):
        sub = plan.private_pairs_plan()
    elif isinstance(plan, LearningPlan):
        sub = plan.constraints.people
    else:
        return None
    if sub is None or not sub.copy_id:
        return None
    if store is None:
        from core.fairness.store import get_store
        store = get_store()
    return load_copy_for(sub, store)


AGREEMENT_BINS = np.linspace(0.0, 1.0, 6)


def agreement_distribution(constraints: pd.DataFrame) -> pd.DataFrame:
    """Pairs seen by two or more judges, counted by the share of judges who asked for equal treatment
    (five bins of width 0.2), so two designs with different pairs can be compared."""
    seen = constraints[constraints["n_judges"] >= 2]
    share = seen["n_same"] / seen["n_judges"]
    counts, _ = np.histogram(share, bins=AGREEMENT_BINS)
    labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(AGREEMENT_BINS[:-1], AGREEMENT_BINS[1:])]
    return pd.DataFrame({"share saying 'same'": labels, "pairs": counts})


def elicitation_figure(plan: ElicitationPlan) -> tuple[str, str] | None:
    if not (getattr(plan, "demo_stakeholders", 0) and getattr(plan, "response_mode", "") == "binary"):
        return None
    return ("for each core pair, the share of the simulated panel who said the two people should get the "
            "same prediction (drawn here from the result's table; the page shows the pairs as cards)",
            "import plotly.express as px\n\n"
            "judged = result.tables()[\"simulated_judgments\"]\n"
            "core = judged[judged[\"kind\"] == \"core\"].assign(same=lambda t: t[\"response\"] == \"same\")\n"
            "alike = core.groupby([\"a\", \"b\"], as_index=False)[\"same\"].mean()\n"
            "alike[\"pair\"] = \"people \" + alike[\"a\"].astype(str) + \" and \" + alike[\"b\"].astype(str)\n"
            "fig = px.bar(alike, x=\"pair\", y=\"same\", labels={\"same\": \"share answering 'same'\"},\n"
            "             title=\"Simulated panel: should the two people get the same prediction?\")")


def elicitation_notes(plan: ElicitationPlan) -> list[str]:
    return ["This is the session's design (the pairs every stakeholder sees"
            + (", and the simulated panel's answers" if getattr(plan, "demo_stakeholders", 0) else "")
            + "). The answers of real stakeholders are not part of the plan: they live in the sessions "
            "database, and the page's 'Export session (CSV)' button saves them."]


def group_fairness_figure(plan: GroupFairnessPlan) -> tuple[str, str] | None:
    if getattr(plan, "lexifair", None) is None:
        return None
    return ("each group's error under the lexicographically fair model (the page's first chart)",
            "from core.figures import group_fairness as figures\n\n"
            "fig = figures.group_error_figure(result.lexifair.groups)")


AREA = register_area(AreaSpec(
    "fairness", "Fairness", run,
    plans=(
        PlanParts(ElicitationPlan, CostModel("elicitation design", estimate_elicitation,
                                             {"elicitation": DEFAULT_COSTS["elicitation"]}),
                  figure=elicitation_figure, notes=elicitation_notes,
                  overlay=OverlaySpec("constraints", "share saying 'same'", ("pairs",),
                                      "Agreement of the simulated panel: pairs by share of judges saying 'same'",
                                      "pairs judged by two or more", derive=agreement_distribution)),
        PlanParts(LearningPlan, CostModel("elicitation learner and frontier", estimate_learner,
                                          {"learner": DEFAULT_COSTS["learner"]}),
                  overlay=OverlaySpec("frontier_points", "unfairness", ("error",),
                                      "Error against unfairness (frontier)", "error rate", line=True)),
        PlanParts(GroupFairnessPlan, CostModel("group-fairness learner", estimate_group_fairness,
                                               {"group_fairness": DEFAULT_COSTS["group_fairness"]}),
                  figure=group_fairness_figure,
                  overlay=OverlaySpec("lexifair_group_errors", "group", ("held_out_error",),
                                      "Held-out error per group", "error rate", series="model")),
    ),
    stored=stored_data))

__all__ = ["AGREEMENT_BINS", "AREA", "RUNS", "agreement_distribution", "run", "stored_data"]
