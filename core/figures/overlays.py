"""The overlays a page draws when a scenario is pinned (A) and compared with the current one (B).

Plain plotly from the two scenarios' tables, no streamlit: the page's comparison panel and the A/B
stakeholder report (also made headless by ``python -m core report``) draw the same figures.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.compare import Comparison
from core.figures import compare as figs
from core.figures.compare import OverlaySpec

# each page's main figure, drawn from the tables both scenarios hold (keyed by the plan's class)
OVERLAYS: dict[str, OverlaySpec] = {
    "DistrictPlan": OverlaySpec("districts", "district", ("mean_abs_error",),
                                "Mean absolute population error by district (plan 1)", "people", where={"plan": 1}),
    "BudgetPlan": OverlaySpec("levels", "level", ("budget (rho)", "budget (epsilon)"), "Budget per level",
                              "budget"),
    "GroupFairnessPlan": OverlaySpec("lexifair_group_errors", "group", ("held_out_error",),
                                     "Held-out error per group", "error rate", series="model"),
    "LearningPlan": OverlaySpec("frontier_points", "unfairness", ("error",), "Error against unfairness (frontier)",
                                "error rate", line=True),
    "AuditPlan": OverlaySpec("theory_gamma", "epsilon", ("gamma",), "Subgroup size the theory needs",
                             "gamma", series="constants"),
    "SynthesisPlan": OverlaySpec("overall_metrics", "epsilon", ("value",), "Parity error against epsilon "
                                 "(mean over seeds)", "parity error", series="method",
                                 where={"metric": "parity_error"}, line=True),
    "ElicitationPlan": OverlaySpec("constraints", "share saying 'same'", ("pairs",),
                                   "Agreement of the simulated panel: pairs by share of judges saying 'same'",
                                   "pairs judged by two or more", derive=lambda t: agreement_distribution(t)),
}
AGREEMENT_BINS = np.linspace(0.0, 1.0, 6)


def agreement_distribution(constraints: pd.DataFrame) -> pd.DataFrame:
    """Pairs seen by two or more judges, counted by the share of judges who asked for equal treatment
    (five bins of width 0.2), so two designs with different pairs can be compared."""
    seen = constraints[constraints["n_judges"] >= 2]
    share = seen["n_same"] / seen["n_judges"]
    counts, _ = np.histogram(share, bins=AGREEMENT_BINS)
    labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(AGREEMENT_BINS[:-1], AGREEMENT_BINS[1:])]
    return pd.DataFrame({"share saying 'same'": labels, "pairs": counts})

def overlay_for(comparison: Comparison):
    """The page's main figure with A and B overlaid when both scenarios hold its table and something to draw
    from it; the headline numbers side by side otherwise."""
    spec = OVERLAYS.get(comparison.a.plan_class)
    if spec is not None and spec.table in comparison.a.tables and spec.table in comparison.b.tables:
        a, b = comparison.a.tables[spec.table], comparison.b.tables[spec.table]
        if not (spec.rows(a).empty and spec.rows(b).empty):
            return figs.overlay_figure(a, b, spec)
    return figs.headline_overlay_figure(comparison.headline)


# district numbers the difference map can be coloured by (the first is what the report draws)
DIFFERENCE_COLUMNS = {"mean_abs_error": "mean absolute population error (people)",
                      "deviation_pct": "deviation from the ideal population (%)",
                      "p95_abs_error": "95th percentile absolute error (people)",
                      "balanced_on_noisy_max_abs_dev_pct": "worst deviation if balanced on noisy counts (%)"}


def district_difference_figure(comparison: Comparison, outlines, outline_geojson: dict,
                               column: str = "mean_abs_error"):
    """B's plan-1 districts coloured by B − A of ``column`` (districts matched by number)."""
    from core.figures.maps import difference_map

    if column not in DIFFERENCE_COLUMNS:
        raise ValueError(f"Colour the difference map by one of {list(DIFFERENCE_COLUMNS)}, not {column!r}.")
    delta = comparison.table("districts", keys=["plan", "district"])
    delta = delta[(delta["plan"] == 1) & (delta["column"] == column)]
    return difference_map(outlines, outline_geojson, delta, DIFFERENCE_COLUMNS[column])


def overlay_figures(comparison: Comparison, district_outlines: tuple | None = None) -> list:
    """Every figure the comparison panel draws for ``comparison``: its main figure with A and B, and for two
    district results whose geography is at hand (``district_outlines``: B's plan-1 polygons and their
    GeoJSON) the per-district difference map, so the page and the A/B report show the same set."""
    figures = [overlay_for(comparison)]
    if district_outlines is not None and comparison.a.plan_class == "DistrictPlan" \
            and "districts" in comparison.common_tables():
        figures.append(district_difference_figure(comparison, *district_outlines))
    return figures
