"""The dashboard's pages: file (relative to dashboard/), title, URL path, icon.

Plain data so that the browser test can visit every page without importing streamlit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageEntry:
    file: str
    title: str
    url_path: str
    icon: str
    ready_selector: str = "[data-testid='stMarkdownContainer']"


HOME = PageEntry("home.py", "Home", "home", ":material/home:")
PAGES: tuple[PageEntry, ...] = (
    PageEntry("tools/coherence_audit.py", "Coherence audit", "coherence-audit", ":material/fact_check:"),
    PageEntry("tools/budget_allocation.py", "Budget allocation", "budget-allocation", ":material/account_tree:"),
    PageEntry("tools/stratified_synthesis.py", "Stratified synthesis", "stratified-synthesis", ":material/stacked_bar_chart:"),
    PageEntry("tools/fairness_elicitation.py", "Fairness elicitation", "fairness-elicitation", ":material/balance:"),
    PageEntry("tools/district_maps.py", "District maps", "district-maps", ":material/map:"),
)
ALL_PAGES: tuple[PageEntry, ...] = (HOME, *PAGES)
