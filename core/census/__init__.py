"""Census budget allocation: ToyDown, TopDown-lite, analytic error, split optimiser, public information.

The Budget allocation page's one entry point is ``run(BudgetPlan(...))`` -> ``BudgetResult``.
"""
from core.census.algorithm_comparison import AlgorithmPlan
from core.census.allocation import Allocation
from core.census.budget_plan import BudgetPlan, BudgetResult, run
from core.census.mechanism_comparison import MechanismSweepPlan
from core.census.public_info import PublicInfoPlan, WemPlan
from core.census.release import CountRelease, release_noisy_counts

# the area's descriptor, registered for the shared machinery (core.areas); last, as it reads the above
from core.census.area import AREA  # noqa: E402

__all__ = ["AREA", "AlgorithmPlan", "Allocation", "BudgetPlan", "BudgetResult", "CountRelease", "MechanismSweepPlan",
           "PublicInfoPlan", "WemPlan", "release_noisy_counts", "run"]
