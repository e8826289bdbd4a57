"""The one list of the dashboard's pages.

Each entry names the page file (relative to dashboard/), its title, URL path and icon, the question
it answers (the home page shows it) and a selector (CSS, plus Playwright's `:has-text()`) of the
figure that shows the page has finished drawing (the browser test waits for it). Plain data: importing this module needs neither
streamlit nor a browser.
"""
from __future__ import annotations

from dataclasses import dataclass


def plotly_in(key: str) -> str:
    """Selector of the plotly figure drawn by the element with Streamlit key `key`."""
    return f".st-key-{key} .js-plotly-plot .main-svg"


@dataclass(frozen=True)
class PageEntry:
    file: str
    title: str
    url_path: str
    icon: str
    question: str
    main_figure: str


HOME = PageEntry(
    "home.py", "Home", "home", ":material/home:",
    "What can each tool answer, and on which bundled data?",
    plotly_in("home_map"),
)
PAGES: tuple[PageEntry, ...] = (
    PageEntry(
        "tools/data_step.py", "Data step", "data-step", ":material/upload_file:",
        "Which of my own data can the tools use, and how is each column read, cleaned and protected? "
        "Upload a table once, see every problem at once, declare each column (public categories and "
        "bounds, missing values, label merges, unit of protection) and use it on every microdata page.",
        ".st-key-ds_start",
    ),
    PageEntry(
        "tools/coherence_audit.py", "Coherence audit", "coherence-audit", ":material/fact_check:",
        "If we publish this table or synthetic file, can someone use it to draw conclusions about "
        "groups of people that the real data would not support? The audit runs simulated "
        "adversaries against a release method on real microdata and reports, group by group, how "
        "far their conclusions move; a calculator shows what a privacy guarantee promises.",
        plotly_in("coh_th_chart"),
    ),
    PageEntry(
        "tools/budget_allocation.py", "Budget allocation", "budget-allocation", ":material/account_tree:",
        "How should one privacy budget be shared among the levels of a census geography (state, "
        "county, tract, block) so that the numbers people rely on, such as district populations, "
        "stay accurate? Compare noise mechanisms and see what publishing some totals exactly "
        "(invariants) changes.",
        plotly_in("ba_fig_budget"),
    ),
    PageEntry(
        "tools/stratified_synthesis.py", "Stratified synthesis", "stratified-synthesis",
        ":material/stacked_bar_chart:",
        "Does running a private estimator or synthetic-data generator separately inside each "
        "demographic group give small groups better accuracy than one run on everybody, and what "
        "does it cost for the population as a whole?",
        plotly_in("ss_sizes_chart"),
    ),
    PageEntry(
        "tools/fairness_elicitation.py", "Fairness elicitation", "fairness-elicitation", ":material/balance:",
        "Which people should a decision rule treat alike? Gather pairwise judgements from "
        "stakeholders, train a classifier that respects them, and see how much accuracy each "
        "level of fairness costs, on the COMPAS recidivism data.",
        # the facilitator's first view is a form; its computed result is the design preview
        "[data-testid='stExpander'] summary:has-text('core pairs every stakeholder will see')",
    ),
    PageEntry(
        "tools/district_maps.py", "District maps", "district-maps", ":material/map:",
        "What does privacy noise do to redistricting? See how far district populations drift, "
        "whether plans still pass the population-balance rule, and how districting methods "
        "compare on the Georgia counties.",
        plotly_in("dm_map"),
    ),
    PageEntry(
        "tools/group_fairness.py", "Group fairness and ranking", "group-fairness", ":material/groups:",
        "Who is worst off under a classifier, and what does lifting them cost the others? Would a "
        "ranking change if these people belonged to another group? Lexicographically fair learning "
        "and counterfactual ranking on COMPAS, Adult or your own table, with calibrated scores that "
        "have equal error rates.",
        plotly_in("gf_lex_errors"),
    ),
    PageEntry(
        "tools/privacy_ledger.py", "Privacy ledger", "privacy-ledger", ":material/receipt_long:",
        "How much privacy has each data set spent so far, over every release made on any page, and "
        "how much is left under the cap the curator set?",
        "[data-testid='stMetricValue']",
    ),
    PageEntry(
        "tools/reproductions.py", "Reproductions", "reproductions", ":material/verified:",
        "Does this tool reproduce the numbers the papers behind it printed? Each headline result is "
        "recomputed now with the tool's own code and compared with the paper within a stated "
        "tolerance; a second table lists the errors found in the papers and how the tool handles them.",
        plotly_in("rp_chart"),
    ),
)
ALL_PAGES: tuple[PageEntry, ...] = (HOME, *PAGES)
ROOM: PageEntry = next(p for p in PAGES if p.file == "tools/fairness_elicitation.py")
"""The one page a browser without a curator's sign-in can open: the room (stakeholder cards through a
join link, a facilitator's console through a session's key)."""
