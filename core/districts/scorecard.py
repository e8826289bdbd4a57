"""A district scorecard: the numbers a redistricting reader checks per district, and two plans side by side.

Every number is read from the run's district table (``DistrictResult.plan_districts``); the only
arithmetic here is the deviation in people, population minus the ideal (total / number of districts),
so deviations sum to zero over a plan.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: Scorecard columns and what a reader calls them (the page and the report use these labels).
SCORECARD_LABELS = {
    "district": "District",
    "population": "Population (people)",
    "deviation": "Deviation from ideal (people)",
    "deviation_pct": "Deviation from ideal (%)",
    "error_sd": "Noisy-count error sd (people)",
    "polsby_popper": "Polsby-Popper compactness (0 to 1)",
    "split_counties": "Counties split",
    "minority_share_pct": "Black share (%)",
}
SCORECARD_HELP = {
    "deviation": "Population minus the ideal (the plan's total over its number of districts); sums to zero.",
    "error_sd": "Standard deviation of the district's noisy count minus its true count over the seeded runs.",
    "polsby_popper": "4 pi area / perimeter squared: 1 for a circle, 0.785 for a square, near 0 for a thin strip.",
    "split_counties": "Counties this district shares with at least one other district.",
    "minority_share_pct": "Black residents as a share of the district's true population.",
}
#: Per-plan summary rows: label -> (scorecard column, how it is summarised).
SUMMARY = {
    "Largest |deviation| (%)": ("deviation_pct", "max_abs"),
    "Mean noisy-count error sd (people)": ("error_sd", "mean"),
    "Least compact district (Polsby-Popper)": ("polsby_popper", "min"),
    "Mean Polsby-Popper": ("polsby_popper", "mean"),
    "Districts that split a county": ("split_counties", "count_positive"),
    "Largest Black share (%)": ("minority_share_pct", "max"),
}


def scorecard(districts: pd.DataFrame) -> pd.DataFrame:
    """One row per district of one plan: population, deviation (people and %), the noisy count's error
    sd, Polsby-Popper compactness, counties split and the Black share. ``districts`` is one plan's table."""
    need = {"district", "population", "deviation_pct", "empirical_sd", "polsby_popper", "split_counties",
            "black_share_pct"}
    missing = need - set(districts.columns)
    if missing:
        raise ValueError(f"The district table lacks {sorted(missing)}; pass one plan's table from the run.")
    if "plan" in districts.columns and districts["plan"].nunique() > 1:
        raise ValueError("Pass the table of one plan (result.plan_districts(n)), not the whole ensemble's.")
    d = districts.sort_values("district")
    pop = d["population"].to_numpy(dtype=float)
    ideal = pop.sum() / max(len(pop), 1)
    return pd.DataFrame({
        "district": d["district"].to_numpy(dtype=np.int64),
        "population": d["population"].to_numpy(dtype=np.int64),
        "deviation": pop - ideal,
        "deviation_pct": d["deviation_pct"].to_numpy(dtype=float),
        "error_sd": d["empirical_sd"].to_numpy(dtype=float),
        "polsby_popper": d["polsby_popper"].to_numpy(dtype=float),
        "split_counties": d["split_counties"].to_numpy(dtype=np.int64),
        "minority_share_pct": d["black_share_pct"].to_numpy(dtype=float),
    })


def _summarise(values: pd.Series, how: str) -> float:
    if how == "max_abs":
        return float(values.abs().max())
    if how == "count_positive":
        return float((values > 0).sum())
    return float(getattr(values, how)())


def plan_summary(card: pd.DataFrame) -> pd.Series:
    """The plan's scorecard in one column: the SUMMARY rows, in their order."""
    return pd.Series({label: _summarise(card[col], how) for label, (col, how) in SUMMARY.items()}, dtype=float)


def compare_scorecards(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """Two plans' summaries side by side with the signed difference (second minus first), one row per
    SUMMARY measure. District numbers of two plans name different areas, so plans compare as wholes."""
    first, second = plan_summary(a), plan_summary(b)
    return pd.DataFrame({"measure": list(SUMMARY), names[0]: first.to_numpy(), names[1]: second.to_numpy(),
                         f"{names[1]} - {names[0]}": (second - first).to_numpy()})
