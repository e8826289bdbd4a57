"""Pairwise fairness elicitation: pair sampling, the session store, the learner and its frontier."""
from __future__ import annotations

from core.fairness.companion import CompanionPlan
from core.fairness.elicitation import ElicitationPlan
from core.fairness.elicitation_plan import ElicitationDesign, run_elicitation
from core.fairness.frontier import FrontierPlan
from core.fairness.group_fairness_plan import (GroupFairnessPlan, GroupFairnessResult, LexifairPlan, RankingPlan,
                                               run_group_fairness)
from core.fairness.causal_ranking import MediatorRole
from core.fairness.learning_plan import ConstraintTable, LearningPlan, LearningResult, run_learning
from core.fairness.learner import ORACLES
from core.fairness.lexifair import LEARNERS

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


# the area's descriptor, registered for the shared machinery (core.areas); last, as it reads the above
from core.fairness.area import AREA  # noqa: E402

__all__ = ["AREA", "CompanionPlan", "ConstraintTable", "ElicitationDesign", "ElicitationPlan", "FrontierPlan",
           "LearningPlan", "LearningResult", "RUNS", "run", "run_elicitation", "run_learning",
           "GroupFairnessPlan", "GroupFairnessResult", "LexifairPlan", "RankingPlan", "MediatorRole",
           "run_group_fairness", "stored_data", "LEARNERS", "ORACLES"]
