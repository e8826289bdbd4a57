"""Stratified synthesis: pooled or per-group private synthesis and means, and who pays for each choice.

The page turns widgets into a ``core.synthesis.SynthesisPlan``, calls ``core.synthesis.run`` and draws
the result. Tabs that have been asked to run keep their sub-plan in the session, so their results
survive navigation and come back from the cache.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.contracts import Cancelled  # noqa: E402
from core.privacy.project_ledger import cumulative_frame, data_key, statement  # noqa: E402
from core.report import guarded_csv  # noqa: E402
from core.releases import release_entry, stratified_mean_release, synthetic_data_release  # noqa: E402
from core.synthesis import (SYNTHESIZERS, MarginalsPlan, MeansPlan, ReleasePlan, SweepPlan,  # noqa: E402
                            SynthesisPlan, run)
from core.synthesis.plan import parse_bounds, parse_epsilons  # noqa: E402
from core.synthesis.mean_release import MeanReleasePlan, projected_ledger  # noqa: E402
from core.synthesis.release import budget_statement_text, projected_release_ledger  # noqa: E402
from core.synthesis.workflow import CURATOR, prepared_view  # noqa: E402
from core.synthesis.sweep import smallest_strata  # noqa: E402
from dashboard.components.chart_table import EXPANDER_PREFIX, chart_numbers  # noqa: E402
from dashboard.components.dataset_picker import (declared_public, declared_ranges,  # noqa: E402
                                                 pick_microdata)
from dashboard.components.ledger_badge import ledger_delta, project_ledger, record_release  # noqa: E402
from dashboard.components.params_form import declared_state, field_widget, params_widgets  # noqa: E402
from dashboard.components.plain_text import plain  # noqa: E402
from dashboard.components.progress import run_with_progress  # noqa: E402
from dashboard.components.release_confirm import ReleaseJob, release_button, stated_spend  # noqa: E402
from dashboard.components.run_estimate import run_estimate_notice  # noqa: E402
from dashboard.components.report_panel import report_panel, saved_report_loader  # noqa: E402
from dashboard.components.synthesis_widgets import (ME, MR, NO_TARGET, REL, START, P, epsilons_text,  # noqa: E402
                                                   numeric_range_widgets, plan_to_widgets)
from dashboard.components.wide_table import wide_table  # noqa: E402
from core.figures import synthesis as figs  # noqa: E402

PAGE = "Stratified synthesis"
MEAN_LABELS = {  # the mean release's table: machine names -> what the page shows
    "group": "Stratum", "size": "Size (rows; declared public)", "noisy_size": "Noisy size (DP count, rows)",
    "weight": "Weight", "mean": "Private mean", "se": "Std. error",
    "ci_low": "95% low", "ci_high": "95% high", "note": "Note", "estimate": "Estimate",
}
SIM = "Simulation, not a release: seeded floating-point noise for illustration only."
S = "session"
KEEP = {"persist_state": S}
LABELS = {  # machine column names -> what the page shows, with units
    "group": "Group", "real_rows": "Real rows (curator only)", "share": "Share of rows",
    "flag": "Flag", "epsilon": "Epsilon", "rho": "rho (zCDP)", "method": "Method", "seeds": "Seeds",
    "mean": "Mean over seeds", "min": "Min over seeds", "max": "Max over seeds",
    "size_used": "Size used (rows; noisy under DP counts)", "sample_share": "Share of synthetic rows",
    "fate": "Fate", "population": "Population error", "worst_group": "Worst group's error",
    "worst_group_name": "Worst group", "label": "Spend", "measured": "What was measured", "amount": "Amount",
    "unit": "Unit", "composition": "Composition", "part": "Part", "rho_equivalent": "As rho", "charged": "Counts toward total",
    "release": "Release", "page": "Page", "created_utc": "Time (UTC)", "size": "Group size (rows)", "true mean": "True mean",
    "stratified mean |error|": "Stratified: mean |error|", "stratified theory sd": "Stratified: closed-form sd",
    "pooled mean |error|": "Pooled: mean |error|",
    "stratum one-way cell sd": "Stratum one-way cell sd (rows)", "stratum two-way cell sd":
    "Stratum two-way cell sd (rows)", "pooled one-way cell sd": "Pooled one-way cell sd (rows)",
    "stratum count sd": "Stratum count sd (rows)",
}


def show(df: pd.DataFrame, **kwargs) -> None:
    """A table with human column labels (the data keep their stable machine names)."""
    config = {c: st.column_config.Column(LABELS[c]) for c in df.columns if c in LABELS}
    wide_table(df, width="stretch", column_config=config, **kwargs)


def requested() -> dict:
    """Sub-plans the user asked for, kept with the setup they were asked under."""
    return st.session_state.setdefault("ss_requested", {})


st.title("Stratified synthesis")
st.caption("Should a curator release private synthetic microdata and means pooled, or one model per "
           "demographic group (stratified), and which groups pay for each choice?")

loaded = saved_report_loader("ss", accepts=(SynthesisPlan,), to_widgets=plan_to_widgets)

# ------------------------------------------------------------------------------- data
with st.container(border=True):
    picked = pick_microdata("ss")
if picked is None:
    st.stop()
ref, raw = picked.ref, picked.frame
slug = ref.source
if loaded is not None and loaded.data != ref:
    st.warning("The opened report ran on other data; choose that data (a declared data set comes back from the Data step) to rerun it.")

# ------------------------------------------------------------------------------- settings, action beside them
plan_error = None
with st.container(border=True):
    declared = declared_ranges(ref)     # a data set declared on the Data step brings its public ranges
    wide_numeric = [c for c in raw.columns if pd.api.types.is_numeric_dtype(raw[c]) and raw[c].nunique() > 40
                    and c not in declared]
    bounds = ()
    if declared:
        st.caption("Public ranges from the declaration (Data step): " + "; ".join(
            f"{c}: {lo:g} to {hi:g}" for c, (lo, hi) in declared.items()) + ".")
    numeric_cols = [c for c in raw.columns if c not in declared and pd.api.types.is_numeric_dtype(raw[c])
                    and not pd.api.types.is_bool_dtype(raw[c])]
    bins = ()
    if numeric_cols:
        bounds, bins, plan_error = numeric_range_widgets(st, numeric_cols, slug, wide=wide_numeric, persist_state=S)
    try:
        data, notes, identifiers = prepared_view(raw, {**dict((c, (lo, hi)) for c, lo, hi in bounds), **declared},
                                                 bins=dict(bins))
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    for note in notes:
        st.caption(note)
    domain_public = False   # bundled data: documented categories, nothing to declare
    if declared_public(ref):
        domain_public = True
        st.caption("Category lists and ranges are public by the declaration (Data step): every category "
                   "column lists its public categories and every number column its public range.")
    elif ref.is_upload:
        domain_public = field_widget(SynthesisPlan, "domain_declared_public", P, **KEEP)
    cols = list(data.columns)
    candidates = [c for c in cols if c not in identifiers]
    narrow = [c for c in candidates if data[c].nunique() <= 16]
    if len(candidates) <= 10:
        default_cols = candidates
    else:  # the usual strata and target first, then the narrowest-domain columns, at most ten in data order
        musts = [c for c in (*START["strata"], START["target"]) if c in candidates]
        pick = set(musts + [c for c in (narrow or candidates) if c not in musts][: 10 - len(musts)])
        default_cols = [c for c in candidates if c in pick]
    c1, c2, c3 = st.columns([2.2, 1.3, 1])
    columns = c1.multiselect("Columns to synthesise", cols, default=default_cols, key=f"ss_columns_{slug}",
                             persist_state=S, help="Each column is treated as categorical with the public "
                             "domain of its categories.")
    chosen_ids = [c for c in columns if c in identifiers]
    if chosen_ids:
        st.warning(f"{', '.join(chosen_ids)} looks like an identifier (one value per row): synthesising it "
                   "publishes its category list and models nothing shared.")
    strata_default = [c for c in START["strata"] if c in columns] or columns[:1]
    strata = c2.multiselect("Strata columns", columns, default=strata_default, max_selections=3,
                            key=f"ss_strata_{slug}", persist_state=S,
                            help="Every combination of their categories is one stratum.")
    target_opts = [NO_TARGET] + [c for c in columns if c not in strata]
    target = c3.selectbox("Target for ML utility", target_opts,
                          index=target_opts.index(START["target"]) if START["target"] in target_opts else 0,
                          key=f"ss_target_{slug}", persist_state=S,
                          help="A classifier trained on synthetic rows predicts whether this column's code is "
                               "above its first category, and is tested on real held-out rows.")
    d1, d2, d3, d4 = st.columns([1.3, 1.4, 0.8, 0.9])
    synth_key = field_widget(SynthesisPlan, "synthesizer", P, container=d1, options=list(SYNTHESIZERS),
                             format_func=lambda k: SYNTHESIZERS[k].label, **KEEP)
    eps_text = d2.text_input("Epsilons for the sweep", epsilons_text(SweepPlan().epsilons), key="ss_epsilons",
                             persist_state=S, help="Comma-separated; each is a total (epsilon, delta) budget for one "
                                                   "release.")
    n_seeds = int(d3.number_input("Seeds", 1, 10, len(SweepPlan().seeds), key="ss_seeds", persist_state=S))
    delta = field_widget(SynthesisPlan, "delta", P, container=d4, **KEEP)
    synth_params = params_widgets(SYNTHESIZERS[synth_key], P, container=d1, persist_state=S) \
        if SYNTHESIZERS[synth_key].params.__dataclass_fields__ else None
    e1, e2, e3, e4 = st.columns([1.4, 1.4, 1, 1])
    size_policy = field_widget(SynthesisPlan, "size_policy", P, container=e1, **KEEP)
    public_ok = field_widget(SynthesisPlan, "sizes_declared_public", P, container=e2,
                             disabled=size_policy != "public", **KEEP)
    count_share = field_widget(SynthesisPlan, "count_share", P, container=e2, disabled=size_policy != "dp_count",
                               **KEEP)
    min_size = field_widget(SynthesisPlan, "min_stratum_size", P, container=e3, **KEEP)
    small_action = field_widget(SynthesisPlan, "small_action", P, container=e4, **KEEP)

    if domain_public and declared_public(ref) and ref.schema.person_id in columns:
        domain_public = False
        plan_error = (f"{ref.schema.person_id} is the person id: its values are private, not a public category "
                      "list; leave it out of the columns to synthesise.")
    plan = None
    try:
        epsilons = parse_epsilons(eps_text)
        plan = SynthesisPlan(
            data=ref, columns=tuple(columns), strata=tuple(strata), target=None if target == NO_TARGET else target,
            synthesizer=synth_key, synth_params=synth_params, delta=delta, size_policy=size_policy,
            sizes_declared_public=public_ok, count_share=count_share, min_stratum_size=min_size,
            small_action=small_action, domain_declared_public=domain_public, numeric_bounds=bounds,
            numeric_bins=bins or None)
        sweep_plan = SweepPlan(epsilons=epsilons, seeds=tuple(range(n_seeds)))
    except ValueError as exc:
        plan, plan_error = None, plan_error or str(exc)

    setup_digest = plan.setup().digest() if plan is not None else None
    asked = requested()
    if asked.get("setup") != setup_digest:   # new settings: earlier requests belong to the old plan
        asked.clear()
        asked["setup"] = setup_digest
    may_start = plan is None or run_estimate_notice(plan.replace(sweep=sweep_plan), data, key="ss_estimate")
    a1, a2 = st.columns([1, 3])
    run_clicked = a1.button("Run sweep", type="primary", key="ss_run", disabled=plan is None or not may_start,
                            help="Fits stratified and pooled synthesizers at every epsilon and seed.")
    a2.caption("The sweep fits 2 x epsilons x seeds models and scores each; results are cached, so plot "
               "options and coming back to this page never recompute.")
    progress_slot = st.empty()
    if plan_error:
        st.error(plan_error)
    if run_clicked and plan is not None:
        asked["sweep"] = sweep_plan
        asked.pop("marginals", None)
    if plan is not None and "sweep" in asked and asked["sweep"] != sweep_plan:
        shown_eps = ", ".join(f"{e:g}" for e in asked["sweep"].epsilons)
        st.caption(f"The sweep below ran at epsilons {shown_eps} with {len(asked['sweep'].seeds)} seed(s); press "
                   "**Run sweep** to run it at the new values.")

# ------------------------------------------------------------------------------- run
means_sub = None
result = None
run_error = None    # a simulation-tab setting in error or a failed run: the real releases wait for it too
if plan is not None:
    # the mean-estimation widgets live in their tab; their values from the last run shape the plan (the
    # per-group comparison starts at the curves' second epsilon, the rest at MeansPlan's defaults)
    try:
        me_eps = asked["sweep"].epsilons if "sweep" in asked else parse_epsilons(eps_text)
        means_sub = MeansPlan(**{"epsilons": me_eps, "group_epsilon": me_eps[min(1, len(me_eps) - 1)],
                                 **declared_state(MeansPlan, ME, st.session_state)})
    except ValueError as exc:
        st.error(str(exc))
        run_error = str(exc)
    if "sweep" in asked and "marginals" not in asked:
        asked["marginals"] = MarginalsPlan(asked["sweep"].epsilons[0], asked["sweep"].seeds[0])
    full = plan.replace(means=means_sub, **{k: v for k, v in asked.items() if k in ("sweep", "marginals", "release")})
    st.session_state["ss_plan"] = full      # what the numbers below were computed from
    try:
        with progress_slot.container():
            result = run_with_progress(run, full, picked.raw, label="Computing", cancel_key="ss_cancel",
                                       restart=run_clicked)
    except Cancelled:
        st.info("The computation was cancelled; your settings are kept. Change one, or rerun to start again.")
    except ValueError as exc:
        st.error(str(exc))
        run_error = run_error or str(exc)
    progress_slot.empty()

if result is not None and result.sweep is not None:   # seeded sweep fits: listed apart, never counted
    sweep_spend = result.sweep_ledger()
    record_release(release_entry(result.plan.setup().replace(sweep=result.plan.sweep), PAGE, "seeded sweep",
                                 f"sweep of {result.plan.synthesizer.upper()} at {len(result.plan.sweep.epsilons)} "
                                 "epsilons (simulation)", sweep_spend, kind="simulation", data_label=picked.name))

if result is not None:
    st.info(result.accounting)
overview = result.overview if result is not None else pd.DataFrame(columns=["group", "real_rows", "share"])
if not overview.empty:
    overview = overview.assign(flag=["empty" if r == 0 else ("small" if r < max(min_size, 1) else "")
                                     for r in overview["real_rows"]])
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Strata (public domain)", f"{len(overview)}")
    m2.metric("Smallest stratum (curator only)", f"{int(overview['real_rows'].min()):,} rows")
    m3.metric("Largest stratum (curator only)", f"{int(overview['real_rows'].max()):,} rows")
    m4.metric("Rows (curator only)", f"{len(data):,}")

sweep = result.sweep if result is not None else None
if sweep is not None:   # the headline's numbers: the main measure's worst group and population, per method
    st.caption(f"At the sweep's largest epsilon, {sweep.main_measure_name} (mean over seeds; curator-only "
               "diagnostics): the worst group's, and the whole table's on the same marginals.")
    shown = [(r[f"{part}_name"], r[part]) for r in sweep.headline_rows() for part in ("worst", "population")]
    # two a row: the names are long, and a narrower column would cut them short
    columns = [c for _ in range(0, len(shown), 2) for c in st.columns(2)]
    for column, (name, value) in zip(columns, shown):
        column.metric(name[0].upper() + name[1:], f"{value:.4f}")

tab_setup, tab_curves, tab_marg, tab_disp, tab_small, tab_ml, tab_mean, tab_release, tab_export = st.tabs(
    ["Strata setup", "Per-group curves", "Marginals", "Disparity", "Smallest strata", "ML utility",
     "Mean estimation", "Synthetic release", "Export"])
NOT_RUN = "Press **Run sweep** beside the settings to fit stratified and pooled synthesizers for these settings."

with tab_setup:
    if overview.empty:
        st.info("Choose valid settings to see the strata.")
    else:
        st.caption(CURATOR)
        left, right = st.columns([1, 1.4])
        with left:
            show(overview)
        right.plotly_chart(figs.strata_sizes_figure(overview, min_size), width="stretch", key="ss_sizes_chart")
        noise = result.noise
        st.markdown("**Noise per measured cell against the strata** (standard deviations, in rows)")
        show(noise)
        positive = overview.loc[overview["real_rows"] > 0, "real_rows"]
        smallest = int(positive.min()) if len(positive) else 0
        loud = noise[noise["stratum one-way cell sd"] * 3 > smallest]
        if not loud.empty:
            st.warning(f"At epsilon {', '.join(f'{e:g}' for e in loud['epsilon'])} the noise on a single cell "
                       "(times 3) exceeds the smallest stratum's size: its model will be mostly noise there. "
                       "Stratification tends to hurt below epsilon 0.1.")

with tab_curves:
    if sweep is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR + " " + SIM)
        p1, p2, p3, p4 = st.columns([2, 1, 1, 1])
        metric = p1.selectbox("Error measure", list(sweep.measures), format_func=lambda m: figs.METRIC_LABELS[m],
                              key="ss_metric", persist_state=S)
        bands = p2.checkbox("Bands over seeds", True, key="ss_bands", persist_state=S)
        log_y = p3.checkbox("Log y axis", False, key="ss_logy", persist_state=S)
        facets = p4.checkbox("One panel per group", False, key="ss_facets", persist_state=S,
                             help="Small multiples: each group in its own panel, stratified and pooled together.")
        group_curves = sweep.curves(metric)
        sizes = group_curves.groupby("group")["real_rows"].first().to_dict()
        group_curves = group_curves.drop(columns="real_rows")
        # the worst groups are the result's own view (defined for the error measures, not accuracy)
        marked = figs.highlighted_groups(sweep.worst_groups(metric) if metric != "accuracy" else None, sizes)
        st.plotly_chart(figs.group_curves_figure(group_curves, metric, sizes, bands, log_y, marked, facets),
                        width="stretch", key="ss_group_chart")
        st.caption(figs.SIZE_NOTE + (" With many groups, the worst (" + ("largest error" if metric != "accuracy"
                   else "not defined for accuracy") + ") and the smallest are coloured and named; the others are grey."
                   if len(sizes) > figs.ALL_COLOURED and not facets else ""))
        with st.expander(f"{EXPANDER_PREFIX} the curves"):
            show(group_curves)
        if metric == "tvd_2way":
            st.caption("Two-way TVD inside each group among the non-strata columns, against the group's real "
                       "training rows. Stratification does not always help: with MST the smallest groups often "
                       "lose at small epsilon because each cell's noise is large against their size.")

with tab_marg:
    if sweep is None or result.marginals is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR + " " + SIM)
        g1, g2 = st.columns(2)
        current = asked["marginals"]
        mg_eps = float(g1.selectbox("Epsilon", list(asked["sweep"].epsilons),
                                    index=list(asked["sweep"].epsilons).index(current.epsilon), key="ss_mg_eps"))
        mg_seed = int(g2.selectbox("Seed", list(asked["sweep"].seeds), index=list(asked["sweep"].seeds).index(
            current.seed), key="ss_mg_seed"))
        if (mg_eps, mg_seed) != (current.epsilon, current.seed):
            asked["marginals"] = MarginalsPlan(mg_eps, mg_seed)
            st.rerun()
        shares, col_tvd = result.marginals
        st.plotly_chart(figs.tvd_heatmap_figure(col_tvd), width="stretch", key="ss_heatmap")
        chart_numbers(col_tvd, key="ss_heatmap_numbers", what="the heat map")
        h1, h2 = st.columns(2)
        groups_by_size = col_tvd.groupby("group")["real_rows"].first().sort_values().index.tolist()
        mg_group = h1.selectbox("Group", groups_by_size, key="ss_mg_group", persist_state=S)
        mg_col = h2.selectbox("Column", list(pd.unique(col_tvd["column"])), key="ss_mg_col", persist_state=S)
        st.plotly_chart(figs.marginal_bars_figure(shares, mg_group, mg_col), width="stretch", key="ss_mg_bars")
        chart_numbers(shares[(shares["group"] == mg_group) & (shares["column"] == mg_col)],
                      key="ss_mg_bars_numbers", what="the bars")

with tab_disp:
    if sweep is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR + " " + SIM)
        oc = sweep.overall_curves()
        st.plotly_chart(figs.method_curves_figure(oc, ("parity_error", "max_disparity"),
                                                  "Disparity against the privacy budget (category proportions)"),
                        width="stretch", key="ss_disp_chart")
        chart_numbers(oc, key="ss_disp_numbers", what="the disparity curves")
        worst = sweep.worst_groups()
        st.plotly_chart(figs.worst_vs_population_figure(worst, sweep.main_measure_name), width="stretch",
                        key="ss_pareto_chart")
        show(worst)
        st.caption("The population error is the same measure on the same marginals as each group's (the columns "
                   "besides the strata), computed over every row at once, so the two compare like with like.")
        with st.expander("The paper's parity error on means of integer codes"):
            st.plotly_chart(figs.method_curves_figure(oc, ("parity_error_codes", "max_disparity_codes"),
                                                      "Disparity as the paper defines it (Rosenblatt et al., Def. 11)"),
                            width="stretch", key="ss_disp_codes_chart")
            st.caption("Kept for comparison with the published figures. It averages category codes as if they "
                       "were numbers: relabelling a column's categories can leave it unchanged, and a few rows "
                       "moved in a column whose mean is near zero can make it explode.")
        st.caption("Parity error sums, over columns, each group's relative error of every category's share "
                   "(divided by at least 0.05, so near-empty categories do not explode) plus 1/k times that of "
                   "the population; max disparity is the largest such group error. Choose MST, AIM or GEM "
                   "under Synthesizer to compare them. Published GEM figures were not at their stated budgets "
                   "(the authors' wrapper spent the nominal epsilon in every round: a nominal 0.1 was in fact about 2.9 "
                   "at delta 1e-9 by the tight conversion, 3.1 by the usual bound); ours spends exactly the stated total.")

with tab_small:
    if sweep is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR)
        small_tab = smallest_strata(sweep, sweep.main_measure)
        show(small_tab)
        dropped = sweep.strata[sweep.strata["fate"] == "dropped"]["group"].unique()
        merged = sweep.strata[sweep.strata["fate"] == "merged"]["group"].unique()
        if len(dropped):
            st.warning(f"Dropped by your choice, absent from the synthetic data: {', '.join(dropped)}.")
        if len(merged):
            st.info(f"Merged into one shared model: {', '.join(merged)}.")
        if not len(dropped) and not len(merged):
            st.success("Every stratum has its own model; none was dropped or merged.")
        st.caption("Size used is what steered the sample sizes: the DP count (averaged over seeds) or the public "
                   "size; share of synthetic rows is 0 when dropped, or when its DP count came out at zero.")
        starved = small_tab[(small_tab["sample_share"] == 0) & (small_tab["real_rows"] > 0)]
        if len(starved):
            st.warning(f"Present in the data but given no synthetic rows: {', '.join(starved['group'])}.")

with tab_ml:
    if sweep is None:
        st.info(NOT_RUN)
    elif plan.target is None:
        st.info("Choose a target column to measure machine-learning utility.")
    else:
        st.caption(CURATOR + " " + SIM)
        oc = sweep.overall_curves()
        base = sweep.real_baseline
        st.plotly_chart(figs.method_curves_figure(oc, ("accuracy", "fpr_gap", "fnr_gap"),
                                                  "Train on synthetic, test on real held-out rows", base),
                        width="stretch", key="ss_ml_chart")
        chart_numbers(oc, key="ss_ml_numbers", what="the utility curves")
        b1, b2, b3 = st.columns(3)
        b1.metric("Real-data accuracy", f"{base.get('accuracy', float('nan')):.3f}")
        b2.metric("Majority-class accuracy", f"{base.get('majority_accuracy', float('nan')):.3f}")
        b3.metric("Real-data FNR gap", f"{base.get('fnr_gap', float('nan')):.3f}")
        st.caption("Random forest (20 trees, depth 12, seed 42) on the synthetic training rows; gaps are the largest "
                   "minus the smallest rate over strata (fairlearn MetricFrame). The positive class is any code "
                   "above the target's first category.")


def mean_release_section() -> None:
    """A real release of one column's stratified mean on the loaded data, recorded like the synthetic
    release: cap check first, then each press is a new release in the project ledger."""
    st.markdown("#### Release a private stratified mean (real data)")
    st.caption("One noisy mean per stratum of the strata chosen above, recombined with the size policy "
               "chosen above, and a pooled mean beside it for comparison. Every noise value comes from "
               "OpenDP's secure sampler; the release is recorded in this data set's ledger.")
    if plan is None:
        st.info("Fix the settings above to release a mean.")
        release_button("Release the stratified mean", key="ss_mr_release", release=None,
                       error=plan_error or run_error or "the settings above are in error.")
        return
    options = [c for c in raw.columns if c not in strata and c not in identifiers]
    if not options:
        st.info("Every column is a strata column or an identifier: there is no column left to average.")
        return
    n1, n2, n3, n4 = st.columns([1.2, 1.4, 1, 1.2])
    column = n1.selectbox("Column", options, index=options.index("income") if "income" in options else 0,
                          key=f"ss_mr_column_{slug}", persist_state=S,
                          help="A categorical column releases the share of rows in one category; a numeric "
                               "one its mean, clipped to a public range.")
    series = raw[column]
    numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series) \
        and series.nunique() > 2
    category, value_range, range_error = None, None, None
    if numeric and column in plan.bounds:     # a range declared above (or on the Data step) is the clipping range
        value_range = plan.bounds[column]
        n2.caption(f"Clipped to the declared public range of {column}: {value_range[0]:g} to {value_range[1]:g}.")
    elif numeric:
        range_text = n2.text_input(f"Public range of {column}", "", key=f"ss_mr_range_{slug}_{column}",
                                   persist_state=S, placeholder="e.g. 0-100",
                                   help="Known without looking at the data (a questionnaire's limits, a "
                                        "published top code); values outside are clipped into it. Never the "
                                        "data's own minimum and maximum.")
        try:
            parsed = parse_bounds(f"{column}: {range_text}") if range_text.strip() else ()
            value_range = (parsed[0][1], parsed[0][2]) if parsed else None
        except ValueError as exc:
            range_error = str(exc)
    else:
        cats = [str(c) for c in (series.cat.categories if isinstance(series.dtype, pd.CategoricalDtype)
                                 else sorted(series.astype(str).unique()))]
        category = n2.selectbox("Share of rows in", cats, index=len(cats) - 1 if column == "income" else 0,
                                key=f"ss_mr_category_{slug}_{column}", persist_state=S,
                                help="The released mean is the share of each stratum in this category.")
    mr_eps = field_widget(MeanReleasePlan, "epsilon", MR, container=n3, **KEEP)
    mr_noise = field_widget(MeanReleasePlan, "noise", MR, container=n4, **KEEP)
    pooled_share = field_widget(MeanReleasePlan, "pooled_share", MR, **KEEP)
    try:
        if range_error:
            raise ValueError(range_error)
        mr_plan = MeanReleasePlan(
            data=ref, column=column, strata=tuple(strata), epsilon=mr_eps, delta=delta, noise=mr_noise,
            category=category, value_range=value_range, size_policy=size_policy,
            sizes_declared_public=bool(public_ok), count_share=float(count_share),
            pooled_share=float(pooled_share), numeric_bounds=bounds, domain_declared_public=bool(domain_public))
    except ValueError as exc:
        st.error(str(exc))
        return
    what = f"share {column} = {category}" if category is not None else f"mean of {column}"
    mr_spend = projected_ledger(mr_plan)
    # one figure for this release everywhere: a zCDP spend is stated at the ledger's delta, not the page's
    label = f"stratified {what}, " + (stated_spend(mr_spend, data_key(ref)) if mr_plan.unit == "rho"
                                      else f"epsilon {mr_eps:g}")
    released = release_button(
        "Release the stratified mean", key="ss_mr_release", what=label, error=plan_error or run_error,
        release=stratified_mean_release(mr_plan, picked.raw, page=PAGE, label=label, data_name=picked.name),
        help="Each release draws fresh OpenDP noise and adds its spend to this data set's ledger.")
    if released is not None:                     # committed in the ledger: shown from now on
        st.session_state["ss_mean_release"] = (label, released)
        st.rerun()      # the sidebar total then includes this release
    kept = st.session_state.get("ss_mean_release")
    if kept is None or kept[1].plan.data != ref:
        return
    shown_label, rel = kept
    mp = rel.plan
    shown_what = f"share in {mp.category}" if mp.category is not None else f"mean of {mp.column}"
    st.markdown(f"##### Released: {plain(shown_label)}")
    (st.success if rel.secure else st.warning)(rel.statement)
    cols = st.columns(len(rel.overall))
    for col, (_, row) in zip(cols, rel.overall.iterrows()):
        col.metric(f"Overall, {row['estimate']}", f"{row['mean']:.4g}",
                   help=f"95% interval {row['ci_low']:.4g} to {row['ci_high']:.4g}; standard error "
                        f"{row['se']:.2g} from the privacy noise.")
    st.plotly_chart(figs.mean_release_figure(rel.strata, rel.overall, shown_what), width="stretch",
                    key="ss_mr_chart")
    config = {c: st.column_config.NumberColumn(MEAN_LABELS[c], format="%d") if c in ("size", "noisy_size")
              else st.column_config.Column(MEAN_LABELS[c]) for c in rel.strata.columns if c in MEAN_LABELS}
    st.dataframe(rel.strata, hide_index=True, width="stretch", column_config=config, key="ss_mr_table")
    st.caption("Standard errors (std. error) and 95% intervals describe the privacy noise only (the target is this data's own "
               "stratum mean, not a wider population). " +
               ("Sizes are public, so they are exact; Laplace intervals use the noise's exact 95% point."
                if mp.sizes_public else "Sizes are the DP counts; with them the errors are first-order "
                "approximations computed from the released numbers only. Where the count's noise is large "
                "against the size (noted in the table) the interval can cover less than 95% of the time."))
    show(rel.ledger_table)
    stem = f"stratified_{mp.column}_eps{mp.epsilon:g}"
    st.download_button("Download the stratified means (CSV)", guarded_csv(rel.export()), file_name=f"{stem}.csv",
                       mime="text/csv", key="ss_mr_download")


with tab_mean:
    with st.container(border=True):
        try:
            mean_release_section()
        except ValueError as exc:   # the release ledger cannot be reached: nothing is released
            st.error(str(exc))
    st.markdown("#### Simulation: how the privacy error of a mean scales")
    st.caption(SIM + " Group sizes are those of the chosen strata (curator only); values are N(mu_i, 1) draws.")
    q1, q2, q3, q4 = st.columns(4)
    field_widget(MeansPlan, "R", ME, container=q1, **KEEP)
    field_widget(MeansPlan, "gamma", ME, container=q2, number_format="%.3f", **KEEP)
    field_widget(MeansPlan, "runs", ME, container=q3, **KEEP)
    field_widget(MeansPlan, "noise", ME, container=q4, **KEEP)
    means = result.means if result is not None else None
    if means is None:
        st.info("Choose strata with at least two non-empty groups." if plan is not None else
                "Fix the settings above to simulate the means.")
    else:
        st.plotly_chart(figs.mean_error_figure(means.curves), width="stretch", key="ss_mean_chart")
        chart_numbers(means.curves, key="ss_mean_numbers", what="the error curves")
        summ = means.summary
        k1, k2, k3 = st.columns(3)
        k1.metric("Stratification cost multiplier", f"{summ['cost_multiplier']:.2f}x",
                  help="sd of the stratified population error over the pooled one, sqrt(sum b_i^2)/b_0 "
                       "(same for every epsilon).")
        k2.metric("Bounds", f"[{summ['cost_bound_low']:.2f}, {summ['cost_bound_high']:.2f}]")
        k3.metric("Sampling sd of the mean, 1/sqrt(n)", f"{summ['sampling_sd']:.2e}")
        st.caption(f"At epsilon 1 the stratified privacy error sd is {summ['stratified_sd_at_eps1']:.2e}, against "
                   f"a sampling error sd of {summ['sampling_sd']:.2e}: both privacy errors shrink like "
                   "1/(n epsilon), usually far below the sampling error.")
        st.markdown("#### Who pays for each choice")
        w1, w2, w3, w4 = st.columns(4)
        field_widget(MeansPlan, "group_epsilon", ME, container=w1, options=means_sub.epsilons,
                     default=means_sub.group_epsilon, **KEEP)
        field_widget(MeansPlan, "spread", ME, container=w2, **KEEP)
        weights = field_widget(MeansPlan, "weights", ME, container=w3, **KEEP)
        field_widget(MeansPlan, "count_epsilon", ME, container=w4, disabled=weights != "dp", **KEEP)
        names = [g for g, s in zip(overview["group"], overview["real_rows"]) if s > 0]
        st.plotly_chart(figs.group_error_figure(means.group_errors, names), width="stretch",
                        key="ss_group_error_chart")
        pop = means.population
        st.caption(f"Population mean |error|: stratified {pop['stratified']:.2e}, pooled {pop['pooled']:.2e}. "
                   f"{means.guarantee} The pooled mean is accurate for the population but wrong for groups whose "
                   "mean differs from it.")
        with st.expander(f"{EXPANDER_PREFIX} the per-group errors"):
            show(means.group_errors.assign(group=names))

        st.markdown("#### Adaptive means: univariate COINPRESS")
        v1, v2 = st.columns(2)
        field_widget(MeansPlan, "coinpress_alpha", ME, container=v1, **KEEP)
        field_widget(MeansPlan, "coinpress_k", ME, container=v2, **KEEP)
        st.plotly_chart(figs.coinpress_figure(means.coinpress), width="stretch", key="ss_cp_chart")
        chart_numbers(means.coinpress, key="ss_cp_numbers", what="the COINPRESS curves")
        st.caption("Two steps (rho 0.125 then 0.375, total 0.5 zCDP) from the interval [-3, 3], sigma 1, 20 runs "
                   "per point; PubStrat takes weights from an equal-size public half. Every stratum runs the whole "
                   "schedule (parallel composition) and the strata are recombined with normalised weights.")

        st.markdown("#### How skewed group sizes soften the cost")
        ds = means.dirichlet_summary
        st.plotly_chart(figs.dirichlet_figure(means.dirichlet, ds["observed"], ds["worst"], ds["best"],
                                              ds["alpha_mle"]), width="stretch", key="ss_dirichlet_chart")
        chart_numbers(means.dirichlet, key="ss_dirichlet_numbers", what="the size-skew curve")
        st.caption(f"Theorem 10 (an equality, not only a bound) at the fitted alpha {ds['alpha_mle']:.3g}: "
                   f"{ds['theorem10_at_mle']:.2f}; observed sum of log sizes {ds['observed']:.2f} (the "
                   "maximum-likelihood alpha puts the observed point on the curve by construction); "
                   f"worst case {ds['worst']:.2f}; best case {ds['best']:.2f}. The stratified error "
                   "grows with this sum: the further below the worst case, the cheaper stratifying is.")

def release_section() -> None:
    """Seeded simulations (listed apart in the project ledger, never counted) and secure releases (counted);
    nothing is shown for download unless its spends are in the project ledger."""
    r1, r2, r3 = st.columns(3)
    rel_plan = ReleasePlan(**{name: field_widget(ReleasePlan, name, REL, container=at, **KEEP)
                              for name, at in (("epsilon", r1), ("method", r2), ("seed", r3))})
    rel_eps, rel_method = rel_plan.epsilon, rel_plan.method
    b1, b2 = st.columns(2)
    if b1.button("Generate a seeded simulation", key="ss_rel_run",
                 help="Reproducible from the plan, for exploring; its noise is not cryptographically secure."):
        asked["release"] = rel_plan
        st.rerun()
    secure_plan = plan.replace(release=rel_plan)
    projected = projected_release_ledger(plan, rel_eps, rel_method)
    # one figure for this release everywhere: its rho stated at the ledger's delta, not the synthesizer's
    secure_label = f"secure {rel_method}, {stated_spend(projected, data_key(ref))}"

    secured = release_button(      # a job out of the server process: it outlives this run of the page
        "Release synthetic data", key="ss_rel_secure", what=secure_label, error=plan_error or run_error,
        container=b2,
        release=synthetic_data_release(secure_plan, picked.raw, page=PAGE, label=secure_label, data_name=picked.name),
        job=ReleaseJob("Fitting with OpenDP's secure sampler", cancel_key="ss_rel_cancel", n_jobs=1),
        help="Draws every privacy noise value with OpenDP's secure sampler. Each release adds its spend to "
             "this data set's ledger.")
    if secured is not None:                      # committed in the ledger: shown from now on
        st.session_state["ss_secure_release"] = (setup_digest, secured)
        st.rerun()      # the sidebar total then includes this release
    shown = []
    if result is not None and result.release is not None:
        rel = result.release
        if record_release(release_entry(full.replace(marginals=None, sweep=None, means=None), PAGE,
                                        "seeded synthetic preview", f"seeded {rel.method}, epsilon {rel.epsilon:g}",
                                        rel.ledger, kind="simulation", data_label=picked.name)):
            shown.append(("Seeded simulation", rel, "ss_rel"))
    secure_kept = st.session_state.get("ss_secure_release")
    if secure_kept is not None and secure_kept[0] == setup_digest:
        shown.append(("Release (OpenDP secure sampler)", secure_kept[1], "ss_sec"))
    made = project_ledger().releases(data_key(ref), "release")
    log_statement = statement(made, ledger_delta(data_key(ref)), picked.name)   # the ledger's delta, as everywhere
    if not shown:
        st.info("Generate a seeded simulation to explore, or release synthetic data with the secure sampler.")
    for title, rel, key in shown:
        st.markdown(f"#### {title}")
        (st.success if rel.secure else st.warning)(rel.statement)
        show(rel.ledger_table)
        st.caption("The first 20 synthetic rows (columns as in the data; the CSV keeps their names).")
        st.dataframe(rel.data.head(20), hide_index=True, width="stretch",
                     column_config={c: st.column_config.Column(str(c).replace("_", " ").capitalize())
                                    for c in rel.data.columns})
        stem = f"synthetic_{rel.method}_{plan.synthesizer}_eps{rel.epsilon:g}{'' if rel.secure else '_simulation'}"
        dl1, dl2 = st.columns(2)
        if rel.secure or not ref.is_upload:
            dl1.download_button("Download synthetic data (CSV)", guarded_csv(rel.data), file_name=f"{stem}.csv",
                                mime="text/csv", key=f"{key}_download")
        else:   # a seeded draw from the curator's private rows is not a release: it stays on this screen
            dl1.caption("A seeded simulation of your own data is not a release (its noise is reproducible from "
                        "the seed in the plan), so it is not offered as a file; release it with the secure "
                        "sampler to download it.")
        dl2.download_button("Download its budget statement (TXT)",
                            budget_statement_text(plan, rel, log_statement),
                            file_name=f"{stem}_budget.txt", mime="text/plain", key=f"{key}_statement")
    if made:
        st.markdown("#### Every release from this data set (all pages and sessions)")
        st.caption(log_statement + " Seeded simulations are listed apart on the Privacy ledger page.")
        show(cumulative_frame(made, ledger_delta(data_key(ref))))


with tab_release:
    if plan is None:
        st.info("Fix the settings above to generate a synthetic data set.")
        release_button("Release synthetic data", key="ss_rel_secure", release=None,
                       error=plan_error or run_error or "the settings above are in error.")
    else:
        try:
            release_section()
        except ValueError as exc:   # the release ledger cannot be reached: nothing is offered for download
            st.error(str(exc))

with tab_export:
    if result is None:
        st.info("Fix the settings above to export a report.")
    else:
        report_panel(result, page="Stratified synthesis", key="ss_report",
                     extra={"dataset": picked.name, "preparation_notes": list(result.notes)})
