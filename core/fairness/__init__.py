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

# the area's descriptor (registered for the shared machinery, core.areas) and its run
from core.fairness.area import AREA, RUNS, run, stored_data

__all__ = ["AREA", "CompanionPlan", "ConstraintTable", "ElicitationDesign", "ElicitationPlan", "FrontierPlan",
           "LearningPlan", "LearningResult", "RUNS", "run", "run_elicitation", "run_learning",
           "GroupFairnessPlan", "GroupFairnessResult", "LexifairPlan", "RankingPlan", "MediatorRole",
           "run_group_fairness", "stored_data", "LEARNERS", "ORACLES"]
