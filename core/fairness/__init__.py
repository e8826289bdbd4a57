"""Pairwise fairness elicitation: pair sampling, the session store, the learner and its frontier."""
from __future__ import annotations

from core.fairness.companion import CompanionPlan
from core.fairness.elicitation_plan import ElicitationDesign, ElicitationPlan, run_elicitation
from core.fairness.frontier import FrontierPlan
from core.fairness.group_fairness_plan import (GroupFairnessPlan, GroupFairnessResult, LexifairPlan, RankingPlan,
                                               run_group_fairness)
from core.fairness.causal_ranking import MediatorRole
from core.fairness.learning_plan import ConstraintTable, LearningPlan, LearningResult, run_learning

# Each plan class of the area maps to the run that computes it; `run` dispatches on the plan's type
# so `core.report.run_plan` and `python -m core reproduce` find every fairness plan.
RUNS = {ElicitationPlan: run_elicitation, LearningPlan: run_learning, GroupFairnessPlan: run_group_fairness}


def run(plan, data=None, *, progress=None):
    """Run a fairness plan with the run registered for its class."""
    for cls, func in RUNS.items():
        if isinstance(plan, cls):
            return func(plan, data, progress=progress)
    raise ValueError(f"No fairness run takes a {type(plan).__name__}.")


__all__ = ["CompanionPlan", "ConstraintTable", "ElicitationDesign", "ElicitationPlan", "FrontierPlan",
           "LearningPlan", "LearningResult", "RUNS", "run", "run_elicitation", "run_learning",
           "GroupFairnessPlan", "GroupFairnessResult", "LexifairPlan", "RankingPlan", "MediatorRole",
           "run_group_fairness"]
