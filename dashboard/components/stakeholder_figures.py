"""The main figures of each page, rebuilt from a result for the stakeholder report.

Each builder uses the same figure function the page draws (``core/figures/<area>.py``) on the
result's own parts, so the report shows what the page shows. A page may pass its figures to
``report_panel(figures=...)`` instead; these are the default when it does not. A builder that
cannot draw (a tab not run, a part missing) gives no figure rather than an error.

Figures follow the rule the result's ``tables()`` follow for shared reports: where those quote no exact
size of an uploaded file (subgroup sizes, rows per stratum), the figures draw the same shared tables
(sizes as bands) or are left out, so no private count reaches a report's figures or its JSON export.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from core.areas import area_for
from core.contracts import Result
from core.sharing import withholds


def _budget(result) -> list:
    from core.figures import census as figs
    return [figs.budget_shares_figure(result.levels, result.allocation.unit),
            figs.target_error_figure(result.targets),
            figs.figure2_figure(result.figure2, result.figure2_optimum)]


def _districts(result) -> list:
    from core.figures import districts as figs
    out = [figs.district_error_figure(result.plan_districts(1))]
    study = getattr(result, "ensemble", None)
    if study is not None:
        out += [figs.ensemble_histogram(study), figs.fragmentation_histogram(study)]
    return out


def _group_fairness(result) -> list:
    from core.figures import group_fairness as figs
    out = []
    lex = getattr(result, "lexifair", None)
    if lex is not None:
        groups = lex.groups
        ref = getattr(result.plan, "data", None)
        if getattr(ref, "is_upload", False):     # the hover's head counts of an uploaded file, as bands
            from core.report import banded
            groups = banded(groups, "size")
        out += [figs.group_error_figure(groups), figs.eta_figure(lex.trajectory)]
    return out


def _coherence(result) -> list:
    from core.figures import coherence as figs
    out = []
    shared = result.tables()        # on an upload its sizes are bands ("50 <= n < 100"), never exact
    private = bool(getattr(result, "private_sizes", True))
    comparison = getattr(result, "comparison", None)
    if comparison is not None and "curve" in shared:   # first what the verdict is judged on: the failure rate
        out += failure_rate_figures(result, shared["curve"], comparison.settings)
    if comparison is not None:
        worst = comparison.worst_adversary()["adversary"]       # the page's heat map opens on the same one
        out.append(figs.distance_heatmap(shared["subgroups"], worst, comparison.settings["alpha"]))
    sweep = getattr(result, "sweep", None)
    if sweep is not None:
        out.append(figs.epsilon_figure(sweep.audit.summary, sweep.audit.releases, shared["sweep_theory"],
                                       sweep.audit.settings["beta"]))
    theory = getattr(result, "theory", None)
    if theory is not None and not theory.gamma_curve.empty:     # the rug of subgroup sizes only when public
        sizes = comparison.subgroups["size"].unique() if comparison is not None and not private else []
        out.append(figs.gamma_figure(theory.gamma_curve, sizes))
    return out


def failure_rate_figures(result, curve, settings) -> list:
    """The failure rate against alpha of each audited release (the measure its verdict is judged on), the
    release with the highest worst failure rate first."""
    from core.coherence.run import worst_key
    from core.figures import coherence as figs
    headline = result.headline()
    releases = list(dict.fromkeys(curve["release"]))
    releases.sort(key=lambda r: -np.nan_to_num(float(headline.get(worst_key(r), 0.0))))
    return [figs.coherence_curve_figure(curve, r, settings["alpha"], settings["beta"]) for r in releases]


def _synthesis(result) -> list:
    from core.figures import synthesis as figs
    out = []
    public = bool(getattr(result.plan, "sizes_public", False))  # rows per stratum are curator-only unless declared
    overview = getattr(result, "overview", None)
    if public and overview is not None and len(overview):
        out.append(figs.strata_sizes_figure(overview, 0))
    sweep = getattr(result, "sweep", None)
    if sweep is not None:       # the page's per-group curves, the worst groups coloured and the rest grey;
        measure = sweep.main_measure    # the groups' real sizes are curator-only, so the report leaves them out
        marked = figs.highlighted_groups(sweep.worst_groups(measure), {})
        out.append(figs.group_curves_figure(sweep.curves(measure).drop(columns="real_rows"), measure, None,
                                            highlight=marked))
    means = getattr(result, "means", None)
    if means is not None and public:        # its closed forms are functions of the exact sizes, as in tables()
        out.append(figs.mean_error_figure(means.curves))
    return out


#: The main figures of each area's page, by the area's key (``core.areas``): a result is looked up by its plan's
#: area, so a plan type of the area without those parts draws nothing rather than failing.
BUILDERS: dict[str, Callable[[Any], list]] = {
    "census": _budget,
    "districts": _districts,
    "fairness": _group_fairness,
    "coherence": _coherence,
    "synthesis": _synthesis,
}


def default_figures(result: Result) -> list:
    """The page's main figures for ``result`` (an empty list when none can be drawn)."""
    area = area_for(getattr(result, "plan", None))
    build = BUILDERS.get(area.key) if area is not None else None
    if build is None:
        return []
    try:
        return [f for f in build(result) if f is not None]
    except (AttributeError, KeyError, TypeError, ValueError):
        return []


def with_figures(report: dict, result: Result, figures=()) -> dict:
    """The report with the page's main figures stored as plotly JSON, so ``python -m core report`` draws the
    same stakeholder report from the file alone (made when the download is clicked). A shared report of private
    data carries no figure: they are drawn from numbers computed on the private rows."""
    if withholds(report):
        return dict(report)
    shown = list(figures) or default_figures(result)
    return {**report, "figures": [json.loads(f.to_json()) for f in shown]}
