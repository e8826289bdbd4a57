"""The unit of protection: whom a stated privacy budget protects.

Without a person id every row is its own person and a budget is stated per row. A curator's data set
may declare a person id and ``max_rows_per_person = k``; contribution bounding (``core.intake.apply``)
then keeps at most k rows of anyone, and a budget the curator states holds per PERSON: every mechanism
runs at the per-row budget (:func:`core.privacy.accounting.per_row_budget`: epsilon / k, rho / k^2), or
equivalently with its sensitivity scaled by k, and the ledger records the per-person amount.

Both views of one release: the mechanisms' own spends at the per-row budget, turned into the per-person
ledger by :meth:`ProtectionUnit.person_ledger` (amounts times k, or k^2 for rho, by the same group
privacy bound), whose every line says the unit. With k = 1 nothing changes: the same amounts and texts.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.privacy.accounting import per_person_budget, per_row_budget
from core.privacy.ledger import BudgetLedger


@dataclass(frozen=True)
class ProtectionUnit:
    """Up to ``rows_per_person`` rows per person; ``person_id`` says whether a column names the person."""

    rows_per_person: int = 1
    person_id: bool = False

    def __post_init__(self) -> None:
        k = self.rows_per_person
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"rows_per_person must be a whole number of at least 1; got {k!r}.")
        if k > 1 and not self.person_id:
            raise ValueError("Several rows per person need a person-id column: without one each row is one person.")

    @classmethod
    def of(cls, ref) -> "ProtectionUnit":
        """The unit a plan's data reference declares (its schema's person id and row limit); per row
        when the reference carries no schema (bundled data, schema-less uploads)."""
        schema = getattr(ref, "schema", None)
        if schema is None:
            return cls()
        return cls(int(getattr(schema, "max_rows_per_person", 1)), getattr(schema, "person_id", None) is not None)

    @property
    def grouped(self) -> bool:
        """True when a person may hold more than one row (the mechanisms then run at the per-row budget)."""
        return self.rows_per_person > 1

    @property
    def words(self) -> str:
        """'per person, up to 3 rows each', 'per person (one row each)' or 'per row'."""
        if not self.person_id:
            return "per row"
        if self.grouped:
            return f"per person, up to {self.rows_per_person} rows each"
        return "per person (one row each)"

    def sentence(self) -> str:
        """The statement's line on the unit of protection."""
        k = self.rows_per_person
        if not self.person_id:
            return ("Unit of protection: per row (no person id is declared, so each row is treated as one "
                    "person).")
        if not self.grouped:
            return "Unit of protection: per person (one row each, by contribution bounding)."
        return (f"Unit of protection: per person, up to {k} rows each (contribution bounding kept at most {k} "
                f"rows of anyone); every mechanism's noise covers a whole person's rows (sensitivity times {k}, "
                f"the same as running it at the per-row budget epsilon / {k} or rho / {k * k}), so the budget "
                "stated holds per person.")

    def row_budget(self, amount: float, unit: str) -> float:
        """The budget a mechanism is run at so that ``amount`` holds per person (unchanged at k = 1)."""
        return float(amount) if not self.grouped else per_row_budget(amount, unit, self.rows_per_person)

    def sensitivity(self, per_row: float) -> float:
        """A per-row sensitivity scaled to a whole person's rows (L1 and L2 at most k times one row's)."""
        return float(per_row) * self.rows_per_person

    def person_ledger(self, ledger: BudgetLedger, *, scale: bool = True) -> BudgetLedger:
        """``ledger`` as a person's spends: with ``scale`` every amount (spent at the per-row budget)
        becomes its per-person cost, k epsilon or k^2 rho; without, the amounts are already per person
        (sensitivity scaled). Every line then says the unit. The same ledger at k = 1."""
        if not self.grouped:
            return ledger
        out = BudgetLedger()
        for s in ledger.spends:
            amount = per_person_budget(s.amount, s.unit, self.rows_per_person) if scale else s.amount
            measured = f"{s.measured} ({self.words})" if s.measured else self.words
            out.spend(s.label, amount, s.unit, s.composition, s.group, measured, s.part)
        return out
