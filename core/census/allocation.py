"""A privacy budget split across the levels of a hierarchy, exchanged between pages as JSON."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from core.census.checks import choice, number
from core.privacy.ledger import BudgetLedger
from core.privacy.mechanisms import NoiseMechanism, get_mechanism
from core.uploads import parse_json_text, read_text

_FORMAT = "census-budget-allocation"
_VERSION = 1


@dataclass(frozen=True)
class Allocation:
    """Per-level budgets (top level first) in one unit: epsilon (pure DP) or rho (zCDP).

    Levels compose sequentially and units within a level in parallel, so the total is the sum.
    ``mechanism`` is a mechanism id from ``core.privacy.mechanisms`` (a key, or a key with its
    parameters); it may be given as the mechanism itself, which is then kept as :attr:`noise` (and the
    id stored, the allocation's exchanged form). A pickled allocation carries the mechanism's key and
    Params and rebuilds :attr:`noise` from them when loaded, so code reading a cached allocation never
    parses the id. ``delta``: for rho it fixes the (epsilon, delta) statement; for an (epsilon, delta)
    mechanism it is the release's total delta (each level's mechanism carries its share).
    """

    level_names: tuple[str, ...]
    budgets: tuple[float, ...]
    unit: str
    mechanism: str
    sensitivity: float = 2.0
    delta: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.level_names, (list, tuple)) or not isinstance(self.budgets, (list, tuple)):
            raise ValueError("An allocation needs a list of level names and a list of budgets.")
        if len(self.budgets) > 20:
            raise ValueError("An allocation has at most 20 levels.")
        object.__setattr__(self, "level_names", tuple(str(n) for n in self.level_names))
        object.__setattr__(self, "budgets", tuple(number(b, "Every level's budget", 0.0, 1e6, open_low=True)
                                                  for b in self.budgets))
        if len(self.level_names) == 0 or len(self.level_names) != len(self.budgets):
            raise ValueError(f"An allocation needs one budget per level; got {len(self.level_names)} level names "
                             f"and {len(self.budgets)} budgets.")
        if any(not math.isfinite(b) or b <= 0 for b in self.budgets):
            raise ValueError(f"Every level's budget must be a positive number; got {list(self.budgets)}.")
        choice(self.unit, "The unit", ("epsilon", "rho"))
        if not isinstance(self.mechanism, (str, NoiseMechanism)):
            raise ValueError(f"The mechanism must be named by text; got {self.mechanism!r:.40}.")
        mech = get_mechanism(self.mechanism)
        object.__setattr__(self, "mechanism", mech.id)
        object.__setattr__(self, "_noise", mech)   # not a field: digests and equality see the id only
        if mech.unit != self.unit:
            raise ValueError(f"The {mech.label} mechanism is calibrated in {mech.unit}, not {self.unit}.")
        number(self.sensitivity, "The sensitivity", 0.0, 100.0, open_low=True)
        if self.delta is not None:
            number(self.delta, "delta", 1e-15, 0.5)    # below 1e-15 no calibration keeps its precision

    def __getstate__(self) -> dict:
        # the mechanism object holds functions, so a pickle (a copy, the disk cache, a cache key) keeps
        # its registry key and Params instead: plain frozen values, so keys hashed from it stay stable
        noise = self.__dict__.get("_noise")
        built_from = (noise.key, noise.params) if noise is not None and noise.key else None
        return {**self.__dict__, "_noise": None, "_built_from": built_from}

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        built_from = state.pop("_built_from", None)
        self.__dict__.update(state)
        if built_from is not None:   # rebuilt once here from its key and Params; no id is parsed
            object.__setattr__(self, "_noise", get_mechanism(*built_from))

    @property
    def noise(self) -> NoiseMechanism:
        """The mechanism (from the registry) that noises every level."""
        if getattr(self, "_noise", None) is None:
            object.__setattr__(self, "_noise", get_mechanism(self.mechanism))
        return self._noise

    @property
    def level_delta(self) -> float | None:
        """delta of each level's measurement for an (epsilon, delta) mechanism, else None."""
        return self.noise.delta

    @property
    def total_delta(self) -> float | None:
        """delta of the whole release: the rho statement's delta, or the levels' deltas added up."""
        if self.noise.approximate:
            return float(self.noise.delta) * len(self.budgets)
        return None if self.delta is None else float(self.delta)

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

    def ledger(self) -> "AllocationLedger":
        """One spend per level; a level's units are disjoint, so they compose in parallel."""
        book = AllocationLedger(self.noise.delta, None if self.unit != "rho" else self.delta)
        for name, budget in zip(self.level_names, self.budgets):
            book.spend(f"{name} counts", budget, self.unit, composition="parallel", group=f"{name} units",
                       part="every unit", measured=f"noisy count of every {name} ({self.noise.label})")
        return book

    def statement(self) -> str:
        """The guarantee of the whole allocation in plain words."""
        return self.ledger().statement(self.delta)

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
            data = parse_json_text(read_text(bytes(text)) if isinstance(text, (bytes, bytearray)) else str(text))
        except ValueError as exc:
            raise ValueError(f"This file is not a usable allocation. {exc} Export an allocation from the "
                             "Budget allocation page and load that file.") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError("This JSON is not a budget allocation (missing format "
                             f"'{_FORMAT}'); export one from the Budget allocation page.")
        needed = ("level_names", "budgets", "unit", "mechanism")
        missing = [k for k in needed if k not in data]
        if missing:
            raise ValueError(f"The allocation is missing the fields {missing}.")
        if not isinstance(data["budgets"], list) or \
                not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in data["budgets"]):
            raise ValueError("The allocation's budgets must be a list of numbers.")
        if not isinstance(data["level_names"], list):
            raise ValueError("The allocation's level names must be a list.")
        alloc = cls(tuple(data["level_names"]), tuple(data["budgets"]), data["unit"], data["mechanism"],
                    data.get("sensitivity", 2.0), data.get("delta"))
        if level_names is not None and tuple(level_names) != alloc.level_names:
            raise ValueError(f"The allocation is for levels {list(alloc.level_names)} but this geography has "
                             f"{list(level_names)}; make an allocation for this geography on the Budget page.")
        return alloc


class AllocationLedger(BudgetLedger):
    """A budget ledger whose spends may each carry a delta (an (epsilon, delta) mechanism per level).

    Without a delta it is the plain ledger. With one, every spend is an (epsilon, delta)-DP
    measurement and the levels add up by basic composition: the epsilons add, and so do the deltas.
    """

    def __init__(self, level_delta: float | None = None, statement_delta: float | None = None) -> None:
        super().__init__()
        self.level_delta = level_delta
        self.statement_delta = statement_delta   # the delta a zCDP total is stated at (the allocation's)

    def to_frame(self):
        frame = super().to_frame()
        if self.level_delta is not None:
            frame.insert(frame.columns.get_loc("unit") + 1, "delta", self.level_delta)
        return frame

    def statement(self, delta: float | None = None) -> str:
        if self.level_delta is None:
            return super().statement(self.statement_delta if delta is None else delta)
        n = len(self)
        eps = sum(s.amount for s in self.spends)
        return (f"The release makes {n} measurement{'s' if n != 1 else ''} (one per level; the units within a "
                f"level are disjoint, so each level counts once). Each level is (epsilon, "
                f"{self.level_delta:.3g})-DP at its own epsilon; added up one after another they give "
                f"(epsilon = {eps:.4g}, delta = {self.level_delta * n:.3g})-differential privacy.")
