"""Budget allocation: split a privacy budget across a census hierarchy and see what it does to every level.

The page turns its widgets into one ``BudgetPlan``, calls ``core.census.run`` and draws the result;
every number comes from core. A real release of noisy counts (OpenDP) is a separate, explicit action.
"""
from __future__ import annotations


import pandas as pd
import streamlit as st

from core.census import AlgorithmPlan, BudgetPlan, MechanismSweepPlan, PublicInfoPlan, WemPlan, run
from core.census.algorithm_comparison import LARGE_TREE, runtime_estimate
from core.census.budget_plan import SIMULATION, TargetSettings, sweep_part
from core.census.geography_data import GEOGRAPHIES, georgia_is_cached, load_geography, parse_fanouts
from core.census.release import POST_PROCESSING_NOTE, RELEASE_NOTE, can_release
from core.contracts import Cancelled, DataRef
from core.privacy.project_ledger import data_key
from core.releases import census_counts_release, ledger_ref, release_entry
from core.report import guarded_csv
from dashboard.components.chart_table import chart_numbers
from dashboard.components.budget_input import (ALGO, MECH, PUBLIC, budget_input, plan_to_widgets, target_widgets,
                                               weight_prefix)
from dashboard.components.ledger_badge import record_release
from dashboard.components.params_form import field_key, field_widget
from dashboard.components.progress import attached_job, job_key, run_job, run_with_progress
from dashboard.components.release_confirm import ReleaseJob, release_button, stated_spend
from dashboard.components.report_panel import report_panel, saved_report_loader
from dashboard.components.uploads_kept import kept_files, upload_kept
from dashboard.components.wide_table import wide_table
from core.figures import census as figs

KEEP = {"persist_state": "session"}
PAGE = "Budget allocation"
TABS = ["Levels & targets", "Best split", "ToyDown vs TopDown-lite", "Mechanisms", "Public information",
        "Export & release"]
SUBPLANS = "ba_subplans"               # the last sub-plan of every tab opened in this session
DEFAULT_SWEEP = ("laplace", "geometric", "analytic_gaussian", "discrete_gaussian")

GLOSSARY = """
- **Invariant**: a count published exactly, with no noise (for example the state's total population).
- **Public information Z**: everything published exactly. Guarantees are then stated *relative to Z*:
  an attacker who already knows Z learns little more about any one person, but secrets that Z itself
  settles (such as whether a block with an exact count of 0 has residents) are not protected.
- **Delta_z (sensitivity given Z)**: how far one person's record can move a statistic once Z is known.
  It is 2 for a count when records are independent (one person moves between two cells) and grows
  when records depend on each other; the noise must grow with it.
- **WEM (Wasserstein exponential mechanism)**: draws a noisy release with probability falling off
  with its distance from the true counts. **kappa** is how steeply it falls off: epsilon / Delta_z,
  halved (epsilon / (2 Delta_z)) when the release is restricted to a bounded set such as counts that
  add up to the public total.
- **Congenial WEM**: the WEM drawn directly among releases that already agree with the public
  information (non-negative counts adding up to the published total), instead of noising freely
  and repairing afterwards.
- **Lemma 3** (Seeman, Slavkovic and Reimherr 2022): adjusting noisy counts to fit the invariants
  afterwards is post-processing and costs no extra privacy relative to Z.
- **Lemma 4**: budgets add up only across releases made with the same public information Z.
- **Lemma 5**: forcing invariants by redrawing noise until it fits can cost up to twice the budget.
- **E max error**: the expected size of the largest error among the k counts released together;
  it matters when any single badly wrong count is a problem.
"""

LEVEL_LABELS = {"level": "Level", "units": "Units", "mean children": "Children per unit (mean)",
                "share": "Share of the budget", "noise scale": "Noise scale (b or sigma, people)",
                "node noise variance": "Noise variance per unit (people²)",
                "whole-unit error sd": "Error sd of a whole unit (people)"}
TARGET_LABELS = {"target": "Target", "units": "Districts or units", "analytic sd": "Error sd, closed form (people)",
                 "simulated sd": "Error sd, ToyDown runs (people)", "sd 95% low": "95% low (people)",
                 "sd 95% high": "95% high (people)", "simulated mean |error|": "Mean |error|, ToyDown runs (people)",
                 "runs": "ToyDown runs"}
REC_LABELS = {"target": "Target", "sd equal split": "Error sd, equal split (people)",
              "sd recommended": "Error sd, recommended split (people)",
              "sd current": "Error sd, your split (people)", "gain over equal (%)": "Gain over the equal split (%)"}
LEDGER_LABELS = {"label": "Spend", "measured": "What was measured", "amount": "Amount", "unit": "Unit",
                 "delta": "delta", "composition": "Composition", "group": "Group", "part": "Part",
                 "rho_equivalent": "As rho (zCDP)", "charged": "Counts toward the total"}
ALGO_LABELS = {"algorithm": "Algorithm", "level": "Level", "MAE of unit totals": "Mean |error| of a unit's total (people)",
               "share of negative cells": "Share of negative cells", "leaf L1 error": "Leaf L1 error (share of people)",
               "total error": "Error of the total (people)"}
SWEEP_LABELS = {"label": "Mechanism", "calibration": "Calibration", "epsilon": "epsilon",
                "scale": "Noise scale (counts)", "MAE": "Mean |error| per query (counts)",
                "RMSE": "RMSE per query (counts)", "E max error": "Expected largest error (counts)",
                "95th pct of max error": "95th percentile of the largest error (counts)"}
INV_LABELS = {"invariant": "Published exactly", "level": "Level",
              "sd (same budgets)": "Error sd, same budgets (people)",
              "sd (freed budget re-spent)": "Error sd, freed budget re-spent (people)",
              "statistics published exactly": "Statistics published exactly",
              "units with exact count 0 or 1": "Units whose exact count is 0 or 1", "budget freed": "Budget freed"}
WEM_LABELS = {"method": "Method", "mean L1 error": "Mean total |error| (people)",
              "runs meeting the public total": "Share of runs matching the public total",
              "runs with no negative cell": "Share of runs with no negative count",
              "zeros created (true > 0, release 0)": "Counts wrongly released as 0 (per run)"}
RELEASE_LABELS = {"level": "Level", "unit": "Unit", "count": "Published count (people)",
                  "noisy measurement (raw)": "Noisy measurement (raw, not consistent)"}


def _table(df: pd.DataFrame, labels: dict, key: str, **kwargs) -> None:
    wide_table(df.rename(columns={c: labels.get(c, c) for c in df.columns}), key=key, **kwargs)


# ------------------------------------------------------------------ plan <-> widgets
def tab_plans(subplans: dict, h, seed: int) -> dict:
    """The sub-plans of the tabs opened so far, fitted to the current tree and seed (a tab that is not
    open keeps its last settings)."""
    algo, public = subplans.get("algorithms"), subplans.get("public")
    if algo is not None:
        algo = algo.replace(seed=seed, exact_level=algo.exact_level if algo.exact_level < h.depth - 1 else -1)
        if h.n_leaves > LARGE_TREE and not st.session_state.get("ba_algo_large"):
            algo = None
    if public is not None:
        public = public.replace(exact_through=min(public.exact_through, h.depth - 1),
                                wem=public.wem.replace(seed=seed))
    return {"algorithms": algo, "mechanisms": subplans.get("mechanisms"), "public": public}


def _district_plan_upload(geography: str) -> tuple[DataRef, bytes | None]:
    """The uploaded district plan (Georgia only), kept in the session by fingerprint so it survives navigation."""
    if geography != "georgia":
        return DataRef(geography), None
    with st.expander("Your district plan as a target (block-assignment CSV from the District maps page)"):
        kept = upload_kept("Plan CSV (columns GEOID, district)", "ba_plan_csv", type=["csv"])
        if kept is not None:
            if not kept.fresh:
                st.caption(f"Using {kept.name}, uploaded earlier in this session.")
            use = st.checkbox(f"Use {kept.name} as a target", value=True, key="ba_plan_use", **KEEP)
            if use:
                return DataRef(DataRef.UPLOAD, kept.fingerprint), kept.raw
        else:
            st.caption("Export a plan on the District maps page (Georgia, same seed there and here) and load it to "
                       "see and optimise the error of your own districts.")
    return DataRef(geography), None


# ----------------------------------------------------------------------------- page
st.title(PAGE)
st.caption("Split a privacy budget over the levels of a census geography (nation to block) and see the error "
           "it leaves at every level and in districts that cut across the hierarchy. Errors follow ToyDown "
           "(Cohen et al. 2021): noise at every node, then a top-down fit so children add up to their parent.")
loaded = saved_report_loader("ba_report", (BudgetPlan,), plan_to_widgets)
if loaded is not None and loaded.data.is_upload and loaded.data.fingerprint not in kept_files("ba_plan_csv"):
    st.warning("The saved report used an uploaded district plan: upload the same CSV below to include it.")

with st.container(border=True):
    g1, g2, g3 = st.columns([1.2, 1.4, 1])
    kind = g1.radio("Geography", list(GEOGRAPHIES), key="ba_geo", horizontal=True, format_func=GEOGRAPHIES.get,
                    **KEEP)
    fan_text = g2.text_input("Fan-outs below the root (stylised)", ", ".join(map(str, BudgetPlan.fanouts)),
                             key="ba_fanouts",
                             disabled=kind != "stylised", **KEEP,
                             help="Children per node at each level, e.g. 20 counties, 10 tracts per county, ... "
                                  "At most six levels and 2,000,000 leaves.")
    seed = field_widget(BudgetPlan, "seed", "ba", container=g3, **KEEP)
    try:
        fanouts = parse_fanouts(fan_text) if kind == "stylised" else BudgetPlan.fanouts
        if kind == "georgia" and not georgia_is_cached(seed):
            with st.spinner("Loading Georgia's 30,000 synthetic blocks for the first time (10 to 20 s); later "
                            "visits and other sessions read them from the cache.", show_time=True):
                geo = load_geography(kind, (), seed)
        else:
            geo = load_geography(kind, fanouts if kind == "stylised" else (), seed)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    h = geo.hierarchy
    st.caption(geo.source)
    choice = budget_input("ba", h.level_names)
    target_options = ["leaf"] + [f"unit:{lvl}" for lvl in range(h.depth - 1)] + ["greedy", "scattered"]
    target_names = {"leaf": f"one {h.level_names[-1]}", "greedy": "k hierarchy-following districts",
                    "scattered": "k scattered districts",
                    **{f"unit:{lvl}": f"whole {h.level_names[lvl]}" for lvl in range(h.depth - 1)}}
    start_targets, _ = target_widgets(BudgetPlan())
    default_targets = [t for t in start_targets if t in target_options]
    picked = st.pills("Targets", target_options, selection_mode="multi", default=default_targets,
                      format_func=target_names.get, key=f"ba_targets_{h.depth}", **KEEP,
                      help="What the split should make accurate: one leaf, whole units of a level, or k districts "
                           "that follow the hierarchy or are scattered across it.")
    t2, t3 = st.columns(2)
    k_districts = field_widget(TargetSettings, "k", "ba", container=t2, **KEEP)
    runs = field_widget(BudgetPlan, "runs", "ba", container=t3, **KEEP)
    nonneg = field_widget(BudgetPlan, "nonnegative", "ba", **KEEP)
    data_ref, plan_bytes = _district_plan_upload(kind)

if k_districts > h.n_leaves and any(t in ("greedy", "scattered") for t in picked):
    st.warning(f"This tree has only {h.n_leaves:,} {h.level_names[-1]}(s), so the district targets use "
               f"k = {h.n_leaves:,} instead of {k_districts:,}.")
    k_districts = h.n_leaves
picked = list(picked or [])
targets = tuple(f"{t}:{k_districts}" if t in ("greedy", "scattered") else t for t in picked)
if plan_bytes is not None:
    picked, targets = [*picked, "plan"], (*targets, "plan")
    target_names["plan"] = "your district plan"
if not targets:
    st.error("Pick at least one target.")
    st.stop()
with st.expander("Importance of each target in the recommended split"):
    st.caption("Each target's variance is measured against its own equal-split variance, so a weight of 2 makes "
               "that target count twice as much; 0 leaves it out of the optimisation (it is still reported).")
    wcols = st.columns(max(len(picked), 1))
    weights = tuple(field_widget(TargetSettings, "weight", weight_prefix(t), container=wcols[i],
                                 label=target_names[t], **KEEP) for i, t in enumerate(picked))
progress_slot = st.empty()

# Only the open tab runs and draws (lazy tabs): a tab's sub-plan joins the plan once the curator has
# opened it, so work nobody asked for never holds up the page.
tab_levels, tab_split, tab_algo, tab_mech, tab_public, tab_export = st.tabs(TABS, key="ba_tab", on_change="rerun")
subplans = st.session_state.setdefault(SUBPLANS, {})
if loaded is not None and st.session_state.get(f"{SUBPLANS}_from") != loaded.digest():
    subplans.update(algorithms=loaded.algorithms, mechanisms=loaded.mechanisms, public=loaded.public)
    st.session_state[f"{SUBPLANS}_from"] = loaded.digest()

# ------------------------------------------------------------------ the tabs' own inputs
with tab_algo:
    if tab_algo.open:
        st.markdown("**TopDown-lite** is this dashboard's feasible stand-in for the Census TopDown algorithm, not the "
                    "Bureau's code: several histograms per unit with budget shares, the total population held exact, "
                    "a least-squares fit, then non-negative integer counts that add up. Its invariants and constraints "
                    "depend on the data, so its end-to-end guarantee does not follow from the noise alone "
                    "(see Public information). Person types are simulated from the populations. " + SIMULATION)
        a1, a2, a3, a4 = st.columns(4)
        n_types = field_widget(AlgorithmPlan, "n_types", ALGO, container=a1, **KEEP)
        det_share = field_widget(AlgorithmPlan, "detailed_share", ALGO, container=a2, **KEEP)
        exact = field_widget(AlgorithmPlan, "exact_level", ALGO, container=a3, options=[-1, *range(h.depth - 1)],
                             format_func=lambda m: "only the total" if m < 0 else f"all counts through {h.level_names[m]}",
                             **KEEP)
        algo_runs = field_widget(AlgorithmPlan, "runs", ALGO, container=a4, **KEEP)
        weighted = st.checkbox("Inverse-variance weights in the least-squares fit", key="ba_algo_weights", **KEEP)
        algo_plan = AlgorithmPlan(n_types=n_types, detailed_share=det_share, exact_level=exact, runs=algo_runs,
                                  weights="inverse_variance" if weighted else "unweighted", seed=seed)
        if h.n_leaves > LARGE_TREE:
            secs = runtime_estimate(h.n_leaves, algo_runs, n_types)
            if not st.toggle(f"Run the comparison on this tree of {h.n_leaves:,} {h.level_names[-1]}s (about {secs} s on "
                             "each change of the budget)", value=False, key="ba_algo_large", **KEEP):
                st.info(f"Trees above {LARGE_TREE:,} leaves run this comparison only on request (switch above).")
                algo_plan = None
        subplans["algorithms"] = algo_plan
    algo_out = st.container()

with tab_mech:
    if tab_mech.open:
        st.markdown("Error of **k overlapping counting queries** (one person can change every query by 1, e.g. "
                    "cumulative age counts or the same district in k plans). Every line is calibrated as tightly as "
                    "its guarantee allows at the same (epsilon, delta): pure-DP mechanisms use scale k/epsilon, the "
                    "Gaussian the analytic calibration (Balle and Wang 2018), the Generalized Gaussian a numerical "
                    "privacy-loss calibration. Gaussians calibrated through zCDP and a conversion are looser and "
                    "drawn as their own lines when asked for.")
        c1, c2, c3 = st.columns(3)
        k = field_widget(MechanismSweepPlan, "k", MECH, container=c1, **KEEP)
        mdelta = field_widget(MechanismSweepPlan, "delta", MECH, container=c2, **KEEP)
        orders = field_widget(MechanismSweepPlan, "gg_orders", MECH, container=c3, **KEEP)
        s1, s2, s3 = st.columns(3)
        with_gg = s1.toggle("Generalized Gaussian", value=False, key="ba_mech_gg", **KEEP)
        with_zcdp = s2.toggle("Gaussians via zCDP", value=False, key="ba_mech_zcdp", **KEEP,
                              help="The Gaussian and discrete Gaussian with rho chosen so the CKS conversion gives "
                                   "(epsilon, delta): a valid but looser calibration than the analytic one.")
        # the page starts without the proven bound (a plan in a script draws it unless told not to)
        show_bound = field_widget(MechanismSweepPlan, "include_bound", MECH, container=s3, default=False, **KEEP)
        mechs = ["laplace", "geometric", "analytic_gaussian"] + (["gaussian_zcdp", "discrete_gaussian"] if with_zcdp else [])
        sweep_plan = MechanismSweepPlan(k=k, delta=mdelta, gg_orders=tuple(sorted(orders or MechanismSweepPlan.gg_orders)),
                                        mechanisms=tuple(mechs), include_bound=show_bound)
        if with_gg:
            wanted = sweep_plan.replace(mechanisms=(*mechs, "generalized_gaussian"))
            pending = wanted.pending_calibrations()
            if not pending:
                sweep_plan = wanted
            else:
                st.warning(f"{pending} Generalized Gaussian scale(s) for these settings are not calibrated yet (about "
                           f"{2 * pending} s); the chart shows the other mechanisms until you ask for them.")
                calib_slot = st.empty()
                calib_key = job_key(sweep_part, wanted.digest())     # a background job, found again on return
                if st.button(f"Calibrate {pending} scale(s) now", key="ba_mech_calibrate", icon=":material/tune:") \
                        or attached_job(calib_key) is not None:
                    try:
                        with calib_slot.container():
                            run_job(sweep_part, wanted, key=calib_key, label="Calibrating Generalized Gaussian scales",
                                    cancel_key="ba_mech_calibrate_cancel")
                        sweep_plan = wanted
                    except Cancelled:
                        st.info("Calibration stopped; the chart shows the other mechanisms.")
                    calib_slot.empty()
        subplans["mechanisms"] = sweep_plan
    mech_out = st.container()

with tab_public:
    if tab_public.open:
        st.markdown("Invariants are counts published **exactly** (for example the state total). They become public "
                    "information Z; the guarantee is then stated relative to Z (Seeman, Slavkovic and Reimherr 2022).")
        with st.expander("What the terms on this tab mean", icon=":material/menu_book:"):
            st.markdown(GLOSSARY)
        inv_level = field_widget(PublicInfoPlan, "exact_through", PUBLIC, options=list(range(-1, h.depth)),
                                 format_func=lambda m: "nothing" if m < 0 else h.level_names[m], **KEEP)
        wem = field_key(PUBLIC, "wem")
        w1, w2, w3 = st.columns(3)
        wem_eps = field_widget(WemPlan, "epsilon", wem, container=w1, **KEEP)
        dz = field_widget(WemPlan, "delta_z", wem, container=w2, **KEEP)
        wem_runs = field_widget(WemPlan, "runs", wem, container=w3, **KEEP)
        safe = field_widget(WemPlan, "normalizer_safe", wem, **KEEP)
        d1, d2 = st.columns(2)
        n_dz = field_widget(PublicInfoPlan, "dz_records", PUBLIC, container=d1, **KEEP)
        corr = field_widget(PublicInfoPlan, "correlation", PUBLIC, container=d2, **KEEP)
        public_plan = PublicInfoPlan(exact_through=inv_level, wem=WemPlan(epsilon=wem_eps, delta_z=dz, runs=wem_runs,
                                                                          seed=seed, normalizer_safe=safe),
                                     dz_records=n_dz, correlation=corr)
        subplans["public"] = public_plan
    public_out = st.container()

# --------------------------------------------------------------------- plan and run
try:
    plan = BudgetPlan(
        data=data_ref, fanouts=fanouts, total=choice.total, unit=choice.unit, delta=choice.delta,
        split=choice.split, preset=choice.preset,
        custom_shares=tuple(choice.shares) if choice.split == "custom" else (),
        mechanism=choice.mechanism, mechanism_params=choice.params, sensitivity=choice.sensitivity,
        targets=targets, target_weights=weights if any(w != 1.0 for w in weights) else (),
        runs=runs, seed=seed, nonnegative=nonneg, **tab_plans(subplans, h, seed))
    st.session_state["ba_plan"] = plan
    with progress_slot.container():          # the bar sits above the tabs
        result = run_with_progress(run, plan, plan_bytes, label="Allocating the budget and running ToyDown")
except ValueError as exc:
    st.error(str(exc))
    st.stop()
alloc = result.allocation
if plan.runs or plan.algorithms is not None:   # seeded ToyDown / TopDown-lite runs: listed apart, never counted
    seeded = ([f"ToyDown, {plan.runs} seeded runs"] if plan.runs else []) + \
        ([f"ToyDown vs TopDown-lite, {plan.algorithms.runs} seeded runs"] if plan.algorithms is not None else [])
    record_release(release_entry(plan.replace(mechanisms=None, public=None), PAGE, "seeded ToyDown runs",
                                 f"{'; '.join(seeded)}; {alloc.mechanism} at {alloc.unit} {alloc.total:g} (simulation)",
                                 alloc.ledger(), kind="simulation"))

st.session_state["census_allocation_json"] = alloc.to_json()   # the District maps page offers it
headline = result.headline()            # the numbers shown here are the result's own headline view
m1, m2, m3 = st.columns(3)
m1.metric(f"Total ({alloc.unit})", f"{headline['total budget']:.4g}")
if alloc.unit == "rho":
    m2.metric("As (epsilon, delta)", f"({headline['epsilon (tight conversion)']:.3f}, {alloc.delta:.0e})")
elif alloc.noise.approximate:
    m2.metric("Guarantee", f"({headline['total budget']:.3g}, {alloc.total_delta:.0e})-DP")
else:
    m2.metric("Guarantee", f"{headline['total budget']:.3g}-DP")
m3.metric("Leaves", f"{int(headline['leaves']):,}")

# ------------------------------------------------------------------------- levels/targets
with tab_levels:
    if tab_levels.open:
        st.subheader("Per level")
        levels = result.levels.assign(**{"mean children": result.levels["mean children"].map(
            lambda x: "" if pd.isna(x) else f"{x:,.2f}")})
        _table(levels, {**LEVEL_LABELS, f"budget ({alloc.unit})": f"Budget ({alloc.unit})"}, "ba_levels_table")
        st.plotly_chart(figs.budget_shares_figure(result.levels, alloc.unit), key="ba_fig_budget")
        st.subheader("Targets")
        st.caption("Bars: closed-form error sd (Cohen et al. 2021, Cor. 3, with the mechanism's node variance). "
                   "Diamonds: ToyDown runs with a 95% interval. " + SIMULATION)
        st.plotly_chart(figs.target_error_figure(result.targets), key="ba_fig_targets")
        _table(result.targets, TARGET_LABELS, "ba_targets_table")
        st.subheader("Budget ledger")
        ledger = result.ledger()
        st.caption(ledger.statement(alloc.delta))
        _table(ledger.to_frame(), LEDGER_LABELS, "ba_ledger")

# ---------------------------------------------------------------------------- best split
with tab_split:
    if tab_split.open:
        st.subheader("Recommended split for your targets")
        st.markdown("Minimises the (importance-weighted) sum of each target's variance relative to its equal-split "
                    f"variance ({'cube-root' if alloc.unit == 'epsilon' else 'square-root'} rule; every level keeps at "
                    "least 0.5%).")
        if alloc.noise.approximate:
            st.caption(f"The {alloc.noise.label}'s variance is close to, not exactly, proportional to 1/epsilon², "
                       "so the cube-root rule is only the starting point: the split is then refined numerically "
                       "on its own calibrated variance.")
        _table(result.recommended_split, {"level": "Level", "budget": f"Recommended budget ({alloc.unit})",
                                          "share": "Share of the budget"}, "ba_rec_split")
        _table(result.recommendation, REC_LABELS, "ba_rec_gain")
        if len(result.recommendation):
            st.metric("Mean gain over the equal split (error sd)",
                      f"{headline['mean gain of the recommended split (%)']:.1f}%",
                      help="Mean reduction of the targets' error sd against splitting the budget equally.")
        st.subheader("Figure 2 analogue")
        st.caption("Three-level tree with 10 x 10 fan-outs and the chosen total and mechanism; the star is the optimum "
                   "(for epsilon = 1 and Laplace: budgets 0.038, 0.171, 0.791, variance 14.52).")
        st.plotly_chart(figs.figure2_figure(result.figure2, result.figure2_optimum), key="ba_fig2")
        chart_numbers(result.figure2, key="ba_fig2_numbers", what="the budget-split surface")
        st.subheader("Presets of the paper")
        st.plotly_chart(figs.presets_figure(result.presets_levels, "level"), key="ba_fig_presets_levels")
        chart_numbers(result.presets_levels, key="ba_presets_levels_numbers", what="the presets by level")
        st.plotly_chart(figs.presets_figure(result.presets_targets, "target"), key="ba_fig_presets_targets")
        chart_numbers(result.presets_targets, key="ba_presets_targets_numbers", what="the presets by target")

# ------------------------------------------------------------------------ TopDown-lite
with algo_out:
    if tab_algo.open:
        if result.algorithms is not None:
            st.plotly_chart(figs.algorithm_figure(result.algorithms), key="ba_fig_algo")
            _table(result.algorithm_summary, ALGO_LABELS, "ba_algo_table")

# ----------------------------------------------------------------------------- mechanisms
with mech_out:
    if tab_mech.open:
        sweep = result.sweep
        st.plotly_chart(figs.mechanism_figure(sweep, show_bound), key="ba_fig_mech")
        adv = result.gg_advantage
        if adv is not None and len(adv):
            row = adv.iloc[(adv["epsilon"] - 1.0).abs().argmin()]
            st.info(f"At epsilon {row['epsilon']:g} and k = {k}, the best Generalized Gaussian ({row['best order']}) has "
                    f"a {row['advantage (%)']:.1f}% smaller expected largest error than the analytic Gaussian; both are "
                    "calibrated tightly, so this is the like-for-like gain.")
        wide = sweep.pivot_table(index=["label", "calibration", "epsilon", "scale"], columns="metric",
                                 values="value").reset_index()
        _table(wide, SWEEP_LABELS, "ba_mech_table")
        st.caption("Numeric calibration rounds privacy losses up, so its scale is slightly conservative. The proven "
                   "bound holds only for even p >= 4 up to ln k and delta <= 1/k; outside that range it is drawn for "
                   "scale only.")

# ---------------------------------------------------------------------- public information
with public_out:
    if tab_public.open:
        pub = result.public
        st.info(pub["statement"])
        if pub["conditioning_bound"] is not None:
            st.caption(f"If an invariant were enforced by conditioning (redrawing until the noisy counts meet it), the "
                       f"guarantee could only be stated as up to {pub['conditioning_bound']:.3g} (twice the budget, "
                       "Lemma 5). Projecting noisy counts onto the invariant, as ToyDown and TopDown-lite do, is "
                       "post-processing given Z and costs nothing more relative to Z (Lemma 3).")
        st.plotly_chart(figs.invariant_figure(pub["invariants"], "sd (freed budget re-spent)"), key="ba_fig_inv")
        _table(pub["invariants"].drop(columns="exact through level"), INV_LABELS, "ba_inv_table")
        st.subheader("Wasserstein exponential mechanism with a public total")
        st.caption(f"Count vector: {pub['wem_vector']} (public total {pub['wem_total']:,}). " + SIMULATION)
        _table(pub["wem_summary"], WEM_LABELS, "ba_wem_table")
        st.plotly_chart(figs.wem_cells_figure(pub["wem_cells"]), key="ba_fig_wem")
        chart_numbers(pub["wem_cells"], key="ba_wem_numbers", what="the cell errors")
        st.subheader("Sensitivity under dependence (Example 3), exact in log space")
        st.plotly_chart(figs.delta_z_heatmap(pub["delta_z"], n_dz), key="ba_fig_dz")
        chart_numbers(pub["delta_z"], key="ba_dz_numbers", what="the heat map")
        st.markdown(f"With {n_dz} equicorrelated records at correlation {corr:.2f}, one record moves the mean by up to "
                    f"**{pub['dependence_factor']:.2f}x** what it moves it under independence, so the noise must grow by "
                    "the same factor.")

# ------------------------------------------------------------------------- export & release
with tab_export:
    if tab_export.open:
        st.markdown("**Report**: the plan, ledger, versions and every table; open it again above or rerun it with "
                    "`python -m core reproduce FILE --out DIR`. **Allocation**: loads on the District maps page.")
        report_panel(result, page=PAGE, key="budget_allocation",
                     extra={"allocation": alloc.to_json(), "source": result.source,
                            "note": "Monte Carlo columns are simulations, not releases."})
        st.download_button("Download allocation (JSON)", alloc.to_json(), file_name="budget_allocation.json",
                           mime="application/json", key="ba_alloc_json", icon=":material/download:")
        with st.expander("Allocation JSON"):
            st.code(alloc.to_json(), language="json")
        st.subheader("Release noisy counts")
        st.caption(RELEASE_NOTE + " " + POST_PROCESSING_NOTE)
        if not can_release(alloc):
            st.info(f"The {alloc.noise.label} has no secure sampler here; choose Laplace, geometric, a Gaussian or "
                    "the analytic Gaussian to release counts.")
        else:
            made = st.session_state.get("ba_releases_made", 0)
            if made:
                st.warning(f"{made} release(s) already made in this session; each further release spends the "
                           "budget again and adds to what the public can combine.")
            # one figure for this release everywhere: a rho total is stated at the ledger's delta
            what = f"noisy counts, {alloc.mechanism}, " + stated_spend(alloc.ledger(), data_key(ledger_ref(plan)))
            release_slot = st.empty()
            released = release_button(    # a job out of the server process: it outlives this run of the page
                "Release noisy counts", key="ba_release", what=what,
                release=census_counts_release(plan, alloc, page=PAGE, label=what),
                job=ReleaseJob("Releasing noisy counts", cancel_key="ba_release_cancel", slot=release_slot),
                help="A real release: it spends the budget above and cannot be repeated with the same noise.")
            release_slot.empty()
            if released is not None:                                  # committed in the ledger: shown from now on
                st.session_state["ba_release_result"] = released
                st.session_state["ba_releases_made"] = made + 1
                st.rerun()
        released = st.session_state.get("ba_release_result")
        if released is not None:
            st.success(f"Released at {released.created_utc} (UTC). {released.statement()}")
            _table(released.ledger().to_frame(), LEDGER_LABELS, "ba_release_ledger")
            st.download_button("Download released counts (CSV)", guarded_csv(released.counts),
                               file_name="released_counts.csv", mime="text/csv", key="ba_release_csv",
                               icon=":material/download:")
            _table(released.counts.head(200), RELEASE_LABELS, "ba_release_table")
            if released.measurements is not None:
                with st.expander("Raw noisy measurements (before post-processing)"):
                    st.caption("What the mechanism drew: fractional or negative values are possible, and a "
                               "parent need not equal the sum of its children. Same release, same spend.")
                    st.download_button("Download raw noisy measurements (CSV)", guarded_csv(released.measurements),
                                       file_name="released_raw_measurements.csv", mime="text/csv",
                                       key="ba_release_raw_csv", icon=":material/download:")
                    _table(released.measurements.head(200), RELEASE_LABELS, "ba_release_raw_table")
