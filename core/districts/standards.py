"""Which population-balance standard a tolerance stands for, named with its source.

A district "passes within 5%" says little to a reader who must defend it: which rule allows 5%, and for
which kind of body? The named standards below are the ones a redistricting practitioner cites; any other
tolerance is called what it is, a setting of this page.

Sources (cited, not quoted):
- Reynolds v. Sims, 377 U.S. 533 (1964): districts of a state legislature must be of substantially equal
  population ("one person, one vote"); the rule reaches county, city and school-board districts through
  Avery v. Midland County, 390 U.S. 474 (1968).
- Brown v. Thomson, 462 U.S. 835 (1983), following White v. Regester (1973): a state or local plan whose
  largest and smallest districts differ by under 10% of the ideal is presumed to meet that rule; every
  district within +-5% of the ideal keeps the spread at most 10%.
- Karcher v. Daggett, 462 U.S. 725 (1983): congressional districts must be as nearly equal as practicable;
  deviations well under 1% were struck down, so plans are drawn to within a person or so.
- French law for departmental districts, as reported by Cohen-Addad, Klein, Marx, Wheeler and Wolfram
  (FORC 2021): each district within 20% of the department's mean population.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BalanceStandard", "STANDARDS", "standard_for", "balance_sentence"]


@dataclass(frozen=True)
class BalanceStandard:
    """A named population-balance rule: each district within ``tolerance_pct`` of the ideal."""
    tolerance_pct: float
    name: str
    applies_to: str
    source: str


STANDARDS: tuple[BalanceStandard, ...] = (
    BalanceStandard(0.0, "exact equality", "U.S. congressional districts (as nearly equal as practicable)",
                    "Karcher v. Daggett, 462 U.S. 725 (1983)"),
    BalanceStandard(5.0, "the 10% total-deviation rule", "U.S. state legislative and local districts "
                    "(every district within \u00b15% keeps the largest-to-smallest spread at most 10%)",
                    "Brown v. Thomson, 462 U.S. 835 (1983); Reynolds v. Sims, 377 U.S. 533 (1964)"),
    BalanceStandard(20.0, "the French departmental rule", "districts of a French department (within 20% of "
                    "the department's mean)", "French electoral law, as reported by Cohen-Addad et al., "
                    "FORC 2021"),
)


def standard_for(tolerance_pct: float) -> BalanceStandard | None:
    """The named standard whose tolerance this is, or None for a tolerance no named rule uses."""
    return next((s for s in STANDARDS if abs(s.tolerance_pct - float(tolerance_pct)) < 1e-9), None)


def balance_sentence(tolerance_pct: float, ideal_population: float) -> str:
    """What "within the tolerance" means for this plan: the band in percent and in people, and the
    standard it stands for with its source, or that it is a setting of this page."""
    people = abs(float(ideal_population)) * float(tolerance_pct) / 100
    band = (f"within \u00b1{tolerance_pct:g}% of the ideal district population of {ideal_population:,.0f} "
            f"people (\u00b1{people:,.0f} people)")
    named = standard_for(tolerance_pct)
    if named is None:
        return (f"{band}; this tolerance is a setting of this page, not a named legal standard (U.S. state and "
                f"local plans use \u00b15%, congressional plans near-exact equality)")
    return f"{band}, {named.name} for {named.applies_to}; source: {named.source}"
