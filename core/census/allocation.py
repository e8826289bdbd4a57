"""A privacy budget split across the levels of a hierarchy, exchanged between pages as JSON."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from core.privacy.mechanisms import MECHANISMS

_FORMAT = "census-budget-allocation"
_VERSION = 1


@dataclass(frozen=True)
class Allocation:
    """Per-level budgets (top level first) in one unit: epsilon (pure DP) or rho (zCDP).

    Levels compose sequentially and units within a level in parallel, so the total is the sum.
    ``delta`` is only meaningful for rho, where it fixes the (epsilon, delta) statement.
    """

    level_names: tuple[str, ...]
    budgets: tuple[float, ...]
    unit: str
    mechanism: str
    sensitivity: float = 2.0
    delta: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "level_names", tuple(str(n) for n in self.level_names))
        object.__setattr__(self, "budgets", tuple(float(b) for b in self.budgets))
        if len(self.level_names) == 0 or len(self.level_names) != len(self.budgets):
            raise ValueError(f"An allocation needs one budget per level; got {len(self.level_names)} level names "
                             f"and {len(self.budgets)} budgets.")
        if any(not math.isfinite(b) or b <= 0 for b in self.budgets):
            raise ValueError(f"Every level's budget must be a positive number; got {list(self.budgets)}.")
        if self.unit not in ("epsilon", "rho"):
            raise ValueError(f"The unit must be 'epsilon' or 'rho'; got {self.unit!r}.")
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"Unknown mechanism {self.mechanism!r}; choose one of {sorted(MECHANISMS)}.")
        if MECHANISMS[self.mechanism].unit != self.unit:
            raise ValueError(f"The {self.mechanism} mechanism is calibrated in {MECHANISMS[self.mechanism].unit}, "
                             f"not {self.unit}.")
        if not (math.isfinite(float(self.sensitivity)) and float(self.sensitivity) > 0):
            raise ValueError(f"The sensitivity must be positive; got {self.sensitivity}.")
        if self.delta is not None and not 0 < float(self.delta) < 1:
            raise ValueError(f"delta must lie strictly between 0 and 1; got {self.delta}.")

    @property
    def total(self) -> float:
        """Total budget in ``unit`` (sequential composition over levels)."""
        return float(sum(self.budgets))

    @property
    def eps_by_level(self) -> np.ndarray:
        """Budgets as an array, in ``unit`` (what toydown and district_variance take)."""
        return np.asarray(self.budgets, dtype=float)

    @property
    def shares(self) -> np.ndarray:
        """Each level's fraction of the total."""
        return self.eps_by_level / self.total

    def epsilon_total(self) -> float:
        """Total as epsilon: itself for pure DP; for rho the tight (epsilon, delta) conversion."""
        if self.unit == "epsilon":
            return self.total
        if self.delta is None:
            raise ValueError("A rho allocation needs delta to be stated as (epsilon, delta).")
        from core.privacy.accounting import rho_to_epsilon
        return rho_to_epsilon(self.total, float(self.delta))

    def ledger(self):
        """A BudgetLedger with one spend per level; a level's units are disjoint, so they compose in parallel."""
        from core.privacy.ledger import BudgetLedger
        book = BudgetLedger()
        for name, budget in zip(self.level_names, self.budgets):
            book.spend(f"{name} counts", budget, self.unit, composition="parallel", group=f"{name} units",
                       part="every unit", measured=f"noisy count of every {name} ({self.mechanism})")
        return book

    def to_json(self) -> str:
        """JSON text another page can load with Allocation.from_json."""
        return json.dumps({"format": _FORMAT, "version": _VERSION, "level_names": list(self.level_names),
                           "budgets": list(self.budgets), "unit": self.unit, "mechanism": self.mechanism,
                           "sensitivity": float(self.sensitivity), "delta": self.delta,
                           "total": self.total}, indent=2)

    @classmethod
    def from_json(cls, text: str | bytes, level_names=None) -> "Allocation":
        """Parse exported JSON; ValueError says what is wrong (bad JSON, fields, or other level names)."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
            raise ValueError(f"This file is not valid JSON ({exc}); export an allocation from the "
                             "Budget allocation page and load that file.") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError("This JSON is not a budget allocation (missing format "
                             f"'{_FORMAT}'); export one from the Budget allocation page.")
        needed = ("level_names", "budgets", "unit", "mechanism")
        missing = [k for k in needed if k not in data]
        if missing:
            raise ValueError(f"The allocation is missing the fields {missing}.")
        if not isinstance(data["budgets"], list) or not all(isinstance(b, (int, float)) for b in data["budgets"]):
            raise ValueError("The allocation's budgets must be a list of numbers.")
        alloc = cls(tuple(data["level_names"]), tuple(data["budgets"]), data["unit"], data["mechanism"],
                    float(data.get("sensitivity", 2.0)), data.get("delta"))
        if level_names is not None and tuple(level_names) != alloc.level_names:
            raise ValueError(f"The allocation is for levels {list(alloc.level_names)} but this geography has "
                             f"{list(level_names)}; make an allocation for this geography on the Budget page.")
        return alloc
