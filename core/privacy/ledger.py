"""A ledger of privacy spends that composes them and states the total in epsilon and rho.

Sequential spends add up. Parallel spends that share a ``group`` (a partition of the data
into disjoint strata or geographic units) count once: the group costs the largest total
over its ``part``s (spends in the same part of a group add up first; the part defaults to
the label). Pure-epsilon spends enter zCDP totals as epsilon^2 / 2 (Bun-Steinke 2016,
Prop. 1.4); zCDP totals become epsilon with the tight conversion at a given delta.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from core.privacy.accounting import epsilon_to_rho, rho_to_epsilon

Unit = Literal["epsilon", "rho"]
Composition = Literal["sequential", "parallel"]
UNITS = ("epsilon", "rho")
COMPOSITIONS = ("sequential", "parallel")


@dataclass(frozen=True)
class Spend:
    """One measurement's privacy cost, in its own unit, with how it composes.

    ``delta`` > 0 only for an (epsilon, delta) mechanism (the project ledger stores such spends; a
    page's :class:`BudgetLedger` records pure epsilon and zCDP spends only).
    """

    label: str
    amount: float
    unit: Unit
    composition: Composition = "sequential"
    group: str | None = None
    part: str | None = None
    measured: str = ""
    delta: float = 0.0

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be 'epsilon' or 'rho'; got {self.unit!r}.")
        if not (math.isfinite(self.amount) and self.amount > 0):
            raise ValueError(f"The spend on {self.label!r} must be a positive finite number; got {self.amount}.")
        if not (math.isfinite(self.delta) and 0.0 <= self.delta < 1.0):
            raise ValueError(f"delta of {self.label!r} must be in [0, 1); got {self.delta}.")
        if self.delta > 0 and self.unit != "epsilon":
            raise ValueError("Only epsilon spends carry a delta; a zCDP spend is stated in rho alone.")
        if self.composition not in COMPOSITIONS:
            raise ValueError(f"composition must be 'sequential' or 'parallel'; got {self.composition!r}.")
        if self.composition == "parallel" and not self.group:
            raise ValueError(f"Parallel spend {self.label!r} needs the group of disjoint parts it belongs to.")

    @property
    def approximate(self) -> bool:
        """True for an (epsilon, delta) spend, which has no pure or zCDP cost."""
        return self.delta > 0

    @property
    def rho(self) -> float:
        """The cost as zCDP rho (pure epsilon converts to epsilon^2 / 2)."""
        if self.approximate:
            raise ValueError(f"The spend on {self.label!r} is (epsilon, delta)-DP and has no zCDP cost.")
        return epsilon_to_rho(self.amount) if self.unit == "epsilon" else self.amount


@dataclass(frozen=True)
class _Charge:
    """What one sequential spend or one parallel group adds to the total."""

    name: str
    epsilon: float | None  # None when some of it is only zCDP
    rho: float


class BudgetLedger:
    """Records privacy spends and reports the composed total in epsilon and rho."""

    def __init__(self) -> None:
        self._spends: list[Spend] = []

    @property
    def spends(self) -> tuple[Spend, ...]:
        """The recorded spends, in the order they were made."""
        return tuple(self._spends)

    def __len__(self) -> int:
        return len(self._spends)

    def spend(self, label: str, amount: float, unit: Unit, composition: Composition = "sequential",
              group: str | None = None, measured: str = "", part: str | None = None) -> Spend:
        """Record a spend of ``amount`` in ``unit`` ("epsilon" or "rho") and return it.

        Parallel spends need a ``group`` naming the partition they split; a group cannot mix
        parallel and sequential spends. ``measured`` says what was released.
        """
        label = str(label).strip()
        if not label:
            raise ValueError("Give the spend a label saying what it pays for.")
        if unit not in UNITS:
            raise ValueError(f"unit must be 'epsilon' (pure DP) or 'rho' (zCDP); got {unit!r}.")
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be 'sequential' or 'parallel'; got {composition!r}.")
        try:
            amount = float(amount)
        except (TypeError, ValueError):
            raise ValueError(f"The amount spent must be a number; got {amount!r}.") from None
        if not math.isfinite(amount) or amount <= 0:
            raise ValueError(f"The amount spent on {label!r} must be a positive finite {unit}; got {amount}.")
        if composition == "parallel" and not group:
            raise ValueError(f"Parallel spend {label!r} needs a group naming the disjoint partition it "
                             "belongs to (e.g. 'counties').")
        if group is not None:
            clash = [s for s in self._spends if s.group == group and s.composition != composition]
            if clash:
                raise ValueError(f"Group {group!r} already holds {clash[0].composition} spends; use another "
                                 f"group name for {composition} spends.")
        record = Spend(label, amount, unit, composition, group,
                       (part if part is not None else label) if composition == "parallel" else None,
                       str(measured))
        self._spends.append(record)
        return record

    def _charges(self) -> list[_Charge]:
        """Sequential spends one by one, and each parallel group as the max over its parts."""
        charges: list[_Charge] = []
        groups: dict[str, dict[str, list[Spend]]] = {}
        for s in self._spends:
            if s.composition == "sequential":
                charges.append(_Charge(s.label, s.amount if s.unit == "epsilon" else None, s.rho))
            else:
                groups.setdefault(s.group, {}).setdefault(s.part, []).append(s)
        for group, parts in groups.items():
            part_rho = [math.fsum(s.rho for s in spends) for spends in parts.values()]
            pure = all(s.unit == "epsilon" for spends in parts.values() for s in spends)
            part_eps = [math.fsum(s.amount for s in spends) for spends in parts.values()] if pure else None
            charges.append(_Charge(group, max(part_eps) if pure else None, max(part_rho)))
        return charges

    def is_pure(self) -> bool:
        """True when every spend is pure epsilon-DP (the total then needs no delta)."""
        return all(s.unit == "epsilon" for s in self._spends)

    def total(self, unit: Unit, delta: float | None = None) -> float:
        """Composed total in ``unit``.

        "rho": the zCDP total. "epsilon": the pure-DP sum when every spend is pure epsilon;
        otherwise an (epsilon, delta) bound, which needs ``delta``: the smaller of (i) the pure
        part summed plus the tight conversion of the zCDP part and (ii) the tight conversion of
        everything turned into rho. Both are valid, so their minimum is.
        """
        if unit not in UNITS:
            raise ValueError(f"unit must be 'epsilon' or 'rho'; got {unit!r}.")
        charges = self._charges()
        if not charges:
            return 0.0
        if unit == "rho":
            return math.fsum(c.rho for c in charges)
        if all(c.epsilon is not None for c in charges):
            return math.fsum(c.epsilon for c in charges)
        if delta is None:
            raise ValueError("This ledger mixes in zCDP (rho) spends, so an epsilon total needs a delta; "
                             "pass delta (e.g. 1e-6) or ask for the total in 'rho'.")
        pure_eps = math.fsum(c.epsilon for c in charges if c.epsilon is not None)
        zcdp_rho = math.fsum(c.rho for c in charges if c.epsilon is None)
        split = pure_eps + rho_to_epsilon(zcdp_rho, delta)
        pooled = rho_to_epsilon(math.fsum(c.rho for c in charges), delta)
        return float(min(split, pooled))

    def summary(self, delta: float | None = None) -> dict:
        """Both totals in one dict for exports: rho, epsilon (None when it would need a missing delta),
        the delta used (0 for a pure ledger) and whether the ledger is pure."""
        pure = self.is_pure()
        eps = self.total("epsilon") if pure else (self.total("epsilon", delta) if delta is not None else None)
        return {"rho": self.total("rho"), "epsilon": eps, "delta": 0.0 if pure else delta,
                "pure": pure, "n_spends": len(self._spends)}

    def to_frame(self) -> pd.DataFrame:
        """One row per spend: what it measured, its amount and unit, how it composes, its rho,
        and whether it sets its parallel group's cost (``charged``)."""
        columns = ["label", "measured", "amount", "unit", "composition", "group", "part",
                   "rho_equivalent", "charged"]
        if not self._spends:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
        charged_parts: dict[str, str] = {}
        for group in {s.group for s in self._spends if s.composition == "parallel"}:
            totals: dict[str, float] = {}
            for s in self._spends:
                if s.group == group:
                    totals[s.part] = totals.get(s.part, 0.0) + s.rho
            charged_parts[group] = max(totals, key=totals.get)
        rows = [{
            "label": s.label, "measured": s.measured, "amount": s.amount, "unit": s.unit,
            "composition": s.composition, "group": s.group, "part": s.part,
            "rho_equivalent": s.rho,
            "charged": s.composition == "sequential" or charged_parts.get(s.group) == s.part,
        } for s in self._spends]
        return pd.DataFrame(rows, columns=columns)

    def statement(self, delta: float | None = None) -> str:
        """A plain-language statement of what was spent and the guarantee it adds up to."""
        if not self._spends:
            return "No privacy budget has been spent."
        n_seq = sum(s.composition == "sequential" for s in self._spends)
        # groups in the order they were first spent on, so the text follows the table
        groups = list(dict.fromkeys(s.group for s in self._spends if s.composition == "parallel"))
        parts = [f"{len(self._spends)} measurement{'s' if len(self._spends) != 1 else ''}"]
        detail = []
        if n_seq:
            detail.append(f"{n_seq} composed one after another")
        for g in groups:
            k = len({s.part for s in self._spends if s.group == g})
            detail.append(f"'{g}': one spend shared by disjoint units, counted once" if k == 1 else
                          f"'{g}': {k} disjoint parts, of which only the largest counts")
        if len(groups) + (n_seq > 0) > 1:
            detail.append("these add up one after another")
        rho = self.total("rho")
        text = f"The release makes {parts[0]} ({'; '.join(detail)}). "
        if self.is_pure():
            eps = self.total("epsilon")
            text += (f"Together they satisfy pure differential privacy with epsilon = {eps:.4g} "
                     f"(equivalently rho = {rho:.4g} zero-concentrated DP).")
        elif delta is None:
            text += (f"Together they satisfy zero-concentrated DP with rho = {rho:.4g}; "
                     "choose a delta to state it as (epsilon, delta)-DP.")
        else:
            eps = self.total("epsilon", delta=delta)
            text += (f"Together they satisfy zero-concentrated DP with rho = {rho:.4g}, which implies "
                     f"(epsilon = {eps:.4g}, delta = {delta:.3g})-differential privacy.")
        return text

