"""The overlays a page draws when a scenario is pinned (A) and compared with the current one (B).

Plain plotly from the two scenarios' tables, no streamlit: the page's comparison panel and the A/B
stakeholder report (also made headless by ``python -m core report``) draw the same figures.
"""
from __future__ import annotations

from core.areas import parts_for
from core.compare import Comparison
from core.figures import compare as figs


def overlay_for(comparison: Comparison):
    """The page's main figure with A and B overlaid when both scenarios hold its table and something to draw
    from it; the headline numbers side by side otherwise."""
    parts = parts_for(comparison.a.plan_type)
    spec = parts.overlay if parts is not None else None
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
    if district_outlines is not None and "districts" in comparison.common_tables():
        figures.append(district_difference_figure(comparison, *district_outlines))
    return figures
