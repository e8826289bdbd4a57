"""Widget keys of the Stratified synthesis page and their values for a saved plan ("Open a saved report").

Declared plan fields are keyed ``ss_<field>`` (SynthesisPlan), ``ss_me_<field>`` (MeansPlan), ``ss_rel_<field>``
(ReleasePlan) and ``ss_mr_<field>`` (MeanReleasePlan, drawn only) and are
restored from their declaration; the rest are restored here by hand: the per-data-set pickers
(``ss_columns_<data>``, ``ss_strata_<data>``, ``ss_target_<data>``), the public range of each numeric column
(``ss_lo_<data>_<column>``, ``ss_hi_<data>_<column>`` and its bin count ``ss_nbins_<data>_<column>``), the
sweep's epsilons (typed as text) and seed count, the synthesizer's Params and the requested tabs.
"""
from __future__ import annotations

import dataclasses

from core.synthesis import SYNTHESIZERS, MeansPlan, SweepPlan, SynthesisPlan
from core.synthesis.encoding import DEFAULT_BINS
from core.synthesis.plan import MAX_BINS, check_public_range
from dashboard.components.dataset_picker import choice_of
from dashboard.components.params_form import check_shown, params_widget_values, plan_widget_values

P = "ss"            # SynthesisPlan's declared fields: ss_<field>
ME = "ss_me"        # the mean-estimation simulation's: ss_me_<field>
REL = "ss_rel"      # the release tab's ReleasePlan: ss_rel_<field>
MR = "ss_mr"        # the stratified-mean release's MeanReleasePlan: ss_mr_<field>
NO_TARGET = "(none)"
#: Where SynthesisPlan starts (its dataclass defaults): the page's pickers start from its strata and target.
START = {f.name: f.default for f in dataclasses.fields(SynthesisPlan) if f.default is not dataclasses.MISSING}


def epsilons_text(epsilons) -> str:
    """Epsilons as the page's text box shows them: "0.1, 1, 5"."""
    return ", ".join(f"{e:g}" for e in epsilons)


def range_keys(slug: str, column: str) -> tuple[str, str, str]:
    """Widget keys of one numeric column's public range: low, high and bin count."""
    return f"ss_lo_{slug}_{column}", f"ss_hi_{slug}_{column}", f"ss_nbins_{slug}_{column}"


def numeric_range_widgets(st, columns, slug: str, *, wide=(), persist_state=None):
    """A low and a high number input and a bin count per numeric column, in an expander.

    Returns the plan's ``numeric_bounds`` ((column, low, high) for each column with both ends given),
    its ``numeric_bins`` ((column, count) for those columns) and an error text (None when fine): one
    end without the other, or a high not above the low. ``wide`` lists the columns left out without a
    range (too many values to keep as categories).
    """
    bounds, bins, errors = [], [], []
    keep = {} if persist_state is None else {"persist_state": persist_state}
    open_now = any(st.session_state.get(range_keys(slug, c)[0]) is not None for c in columns)
    with st.expander("Public ranges of numeric columns", expanded=bool(wide) or open_now):
        st.caption("A range must be known without looking at the data (a questionnaire's limits, a published "
                   "top code); values outside are clipped into it. A column with a range is synthesised as its "
                   "equal-width bins and comes back in its units (a value drawn within its bin)."
                   + (f" Without a range these are left out: {', '.join(wide)}." if wide else ""))
        for col in columns:
            lo_key, hi_key, bins_key = range_keys(slug, col)
            c0, c1, c2, c3 = st.columns([1.2, 1, 1, 0.8])
            c0.markdown(f"**{col}**")
            low = c1.number_input(f"Lowest {col}", value=None, key=lo_key, placeholder="low", **keep)
            high = c2.number_input(f"Highest {col}", value=None, key=hi_key, placeholder="high", **keep)
            count = c3.number_input(f"Bins of {col}", 1, MAX_BINS, DEFAULT_BINS, 1, key=bins_key, **keep)
            if low is None and high is None:
                continue
            if low is None or high is None:
                errors.append(f"Give both ends of the public range of {col}, or neither.")
                continue
            try:
                lo, hi = check_public_range(col, low, high)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            bounds.append((col, lo, hi))
            bins.append((col, int(count)))
    return tuple(bounds), tuple(bins), (" ".join(errors) or None)


def plan_to_widgets(plan: SynthesisPlan) -> dict:
    """Widget values (and requested tabs) that rebuild ``plan`` on this page. A plan holding a value
    the page does not offer (a delta off its menu, say) raises ValueError saying which."""
    slug = plan.data.source
    sweep = plan.sweep or SweepPlan()
    means = plan.means or MeansPlan()
    check_shown(plan)
    check_shown(means)
    values = {**plan_widget_values(plan, P), **plan_widget_values(means, ME),
              **params_widget_values(SYNTHESIZERS[plan.synthesizer], P, plan.params)}
    values.update({
        "ss_dataset": choice_of(plan.data), f"ss_columns_{slug}": list(plan.columns), f"ss_strata_{slug}": list(plan.strata),
        f"ss_target_{slug}": plan.target or NO_TARGET,
        "ss_epsilons": epsilons_text(sweep.epsilons), "ss_seeds": len(sweep.seeds),
        "ss_requested": {"setup": plan.setup().digest(),
                         **{k: getattr(plan, k) for k in ("sweep", "marginals", "release") if getattr(plan, k)}},
    })
    counts = dict(plan.numeric_bins or ())
    for col, low, high in plan.numeric_bounds:      # reports saved before the widgets load the same way
        lo_key, hi_key, bins_key = range_keys(slug, col)
        values.update({lo_key: float(low), hi_key: float(high), bins_key: int(counts.get(col, DEFAULT_BINS))})
    if plan.release is not None:     # drawn by the release tab from its declared fields
        check_shown(plan.release)
        values.update(plan_widget_values(plan.release, REL))
    return values
