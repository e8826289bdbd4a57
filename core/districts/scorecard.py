"""A district scorecard: the numbers a redistricting reader checks per district, and two plans side by side.

Every number is read from the run's district table (``DistrictResult.plan_districts``); the only
arithmetic here is the deviation in people, population minus the ideal (total / number of districts),
so deviations sum to zero over a plan. The noisy-count error is measured over a few seeded runs, so it
carries an interval (chi-square per district; a paired bootstrap over the runs for two plans compared) and
is shown rounded to what that interval supports.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.contracts import make_rng
from core.uncertainty_words import rounding_step, with_interval

#: Scorecard columns and what a reader calls them (the page and the report use these labels).
SCORECARD_LABELS = {
    "district": "District",
    "population": "Population (people)",
    "deviation": "Deviation from ideal (people)",
    "deviation_pct": "Deviation from ideal (%)",
    "error_sd": "Noisy-count error sd (people)",
    "error_sd_low": "Error sd, 95% interval low (people)",
    "error_sd_high": "Error sd, 95% interval high (people)",
    "polsby_popper": "Polsby-Popper compactness (0 to 1)",
    "split_counties": "Counties split",
    "minority_share_pct": "Black share (%)",
}
SCORECARD_HELP = {
    "deviation": "Population minus the ideal (the plan's total over its number of districts); sums to zero.",
    "error_sd": "Standard deviation of the district's noisy count minus its true count over the seeded runs.",
    "error_sd_low": "Lower end of the chi-square 95% interval of the error sd (few runs give a wide interval).",
    "error_sd_high": "Upper end of the chi-square 95% interval of the error sd.",
    "polsby_popper": "4 pi area / perimeter squared: 1 for a circle, 0.785 for a square, near 0 for a thin strip.",
    "split_counties": "Counties this district shares with at least one other district.",
    "minority_share_pct": "Black residents as a share of the district's true population.",
}
#: Per-plan summary rows: label -> (scorecard column, how it is summarised). The error sd is the one
#: measured over noisy runs; the others are exact on the true counts.
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
        "error_sd_low": d.get("empirical_sd_low", pd.Series(np.nan, index=d.index)).to_numpy(dtype=float),
        "error_sd_high": d.get("empirical_sd_high", pd.Series(np.nan, index=d.index)).to_numpy(dtype=float),
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


NOISY_MEASURE = "Mean noisy-count error sd (people)"
#: decimals an exact summary is shown with (the noisy one is rounded to its interval instead)
SUMMARY_DECIMALS = {"Largest |deviation| (%)": 2, "Least compact district (Polsby-Popper)": 3,
                    "Mean Polsby-Popper": 3, "Districts that split a county": 0, "Largest Black share (%)": 1}
BOOTSTRAP_DRAWS = 1000


def plan_run_errors(runs: pd.DataFrame, plan_no: int) -> np.ndarray:
    """(runs, districts) noisy minus true district counts of one plan, from the result's long runs table."""
    one = runs[runs["plan"] == int(plan_no)]
    if one.empty:
        raise ValueError(f"The runs table has no plan {plan_no}.")
    return one.pivot(index="run", columns="district", values="error").sort_index().to_numpy(dtype=float)


def mean_sd_intervals(errors_a: np.ndarray, errors_b: np.ndarray, rng: np.random.Generator,
                      draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
    """95% percentile-bootstrap intervals of the mean district error sd of plan A, of plan B and of B - A.

    Both plans are measured on the same noisy runs of the whole hierarchy, so the runs are resampled
    together (a paired bootstrap): the difference's interval keeps the runs' shared noise out. Returns
    a (3, 2) array of (low, high) rows for A, B and B - A."""
    n_runs = errors_a.shape[0]
    if errors_b.shape[0] != n_runs:
        raise ValueError("Both plans must come from the same noisy runs.")
    if n_runs < 2:
        return np.full((3, 2), np.nan)
    idx = rng.integers(0, n_runs, size=(draws, n_runs))
    sd_a = errors_a[idx].std(axis=1, ddof=1).mean(axis=1)
    sd_b = errors_b[idx].std(axis=1, ddof=1).mean(axis=1)
    return np.percentile(np.vstack([sd_a, sd_b, sd_b - sd_a]), [2.5, 97.5], axis=1).T


def compare_scorecards(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str] = ("A", "B"),
                       intervals: np.ndarray | None = None) -> pd.DataFrame:
    """Two plans' summaries side by side with the signed difference (second minus first), one row per
    SUMMARY measure. District numbers of two plans name different areas, so plans compare as wholes.
    ``intervals`` (from ``mean_sd_intervals``) adds the 95% interval of the noisy measure, of each side
    and of the difference; exact measures have none."""
    first, second = plan_summary(a), plan_summary(b)
    out = pd.DataFrame({"measure": list(SUMMARY), names[0]: first.to_numpy(), names[1]: second.to_numpy(),
                        f"{names[1]} - {names[0]}": (second - first).to_numpy()})
    if intervals is not None:
        row = out["measure"] == NOISY_MEASURE
        for i, col in enumerate((names[0], names[1], f"{names[1]} - {names[0]}")):
            out[f"{col}, 95% low"] = np.where(row, intervals[i, 0], np.nan)
            out[f"{col}, 95% high"] = np.where(row, intervals[i, 1], np.nan)
    return out


def comparison_words(table: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """The comparison as a reader sees it: exact measures to their own decimals, the noisy measure and
    its difference rounded to what their 95% intervals support, with the interval in brackets."""
    cols = (names[0], names[1], f"{names[1]} - {names[0]}")
    shown = {"measure": table["measure"].to_list()}
    for col in cols:
        words = []
        for _, r in table.iterrows():
            low, high = r.get(f"{col}, 95% low", np.nan), r.get(f"{col}, 95% high", np.nan)
            if np.isfinite(low) and np.isfinite(high):
                words.append(with_interval(r[col], low, high, short=True))
            else:
                words.append(f"{r[col]:,.{SUMMARY_DECIMALS.get(r['measure'], 2)}f}".replace("-", "\u2212"))
        shown[col] = words
    return pd.DataFrame(shown)


def error_sd_words(card: pd.DataFrame) -> list[str]:
    """Each district's error sd rounded to its chi-square 95% interval, with the interval in brackets."""
    return [with_interval(v, lo, hi, short=True) if np.isfinite(lo) and np.isfinite(hi) and rounding_step((hi - lo) / 2)
            else f"{v:,.0f}" for v, lo, hi in card[["error_sd", "error_sd_low", "error_sd_high"]].to_numpy(float)]


def compare_plans(districts: pd.DataFrame, runs: pd.DataFrame, plan_a: int, plan_b: int, seed: int,
                  names: tuple[str, str] | None = None) -> pd.DataFrame:
    """Plans ``plan_a`` and ``plan_b`` of one run compared as wholes, with the bootstrap intervals of the
    noisy measure; the bootstrap is seeded from the run's noise seed and the two plan numbers, so the
    same comparison always shows the same interval."""
    names = names or (f"plan {plan_a}", f"plan {plan_b}")
    cards = [scorecard(districts[districts["plan"] == int(p)]) for p in (plan_a, plan_b)]
    rng = make_rng([int(seed), int(plan_a), int(plan_b)], what="the comparison's bootstrap")
    intervals = mean_sd_intervals(plan_run_errors(runs, plan_a), plan_run_errors(runs, plan_b), rng)
    return compare_scorecards(cards[0], cards[1], names, intervals)
