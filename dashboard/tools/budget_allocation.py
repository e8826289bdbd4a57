"""Budget allocation: split a privacy budget across a census hierarchy and see what it does to every level."""
from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import streamlit as st

from core.cache import config_digest
from core.census.algorithm_comparison import AlgorithmConfig, compare_algorithms
from core.census.budget_plan import BudgetConfig, load_geography, run_budget_plan
from core.census.mechanism_comparison import MechanismSweepConfig, mechanism_sweep
from core.districts.plans import plan_from_csv
from core.census.public_info import (WemConfig, beta_equicorrelated, delta_z_grid, dpz_statement,
                                     invariant_effects, wem_comparison)
from dashboard.components.budget_input import budget_input
from dashboard.components.export import export_panel
from dashboard.components.progress import session_memo
from dashboard.figures import census as figs

SIM = "Simulation, not a release: seeded floating-point noise for illustration only."
# Above this many leaves the ToyDown / TopDown-lite comparison (several typed runs) takes seconds, so it
# waits for the curator to ask for it instead of rerunning on every change of the budget.
LARGE_TREE = 200_000



def _plan(digest: str, config: BudgetConfig):
    return session_memo("ba_plans", digest, lambda progress: run_budget_plan(config, progress=progress),
                 "Analytic error and ToyDown runs")


def _sweep(digest: str, config: MechanismSweepConfig) -> pd.DataFrame:
    """Mechanism sweep, kept per session by its digest (the calibration itself is cached in core)."""
    return session_memo("ba_sweeps", digest, lambda progress: mechanism_sweep(config, progress=progress),
                 "Calibrating mechanisms")


@st.cache_data(show_spinner=False, max_entries=16)
def _wem(counts: tuple[int, ...], digest: str, _config: WemConfig):
    return wem_comparison(np.asarray(counts), _config)


@st.cache_data(show_spinner=False, max_entries=16)
def _algorithms(digest: str, _plan: BudgetConfig, _config: AlgorithmConfig, budgets: tuple[float, ...]):
    geo = load_geography(_plan.hierarchy, tuple(_plan.fanouts), int(_plan.seed))
    return compare_algorithms(geo.hierarchy, geo.leaf_counts, np.asarray(budgets), _config,
                              _plan.mechanism, _plan.sensitivity)


@st.cache_data(show_spinner=False, max_entries=8)
def _dz_grid(n: int) -> pd.DataFrame:
    return delta_z_grid(n)


def _parse_fanouts(text: str) -> tuple[int, ...]:
    try:
        fan = tuple(int(p) for p in text.replace("x", ",").split(",") if p.strip())
    except ValueError:
        raise ValueError("Fan-outs must be whole numbers separated by commas, e.g. 20, 10, 4, 12.") from None
    if not fan or any(f < 1 for f in fan):
        raise ValueError("Give at least one fan-out, each at least 1.")
    if len(fan) > 6:
        raise ValueError("At most six levels below the root.")
    return fan


@st.cache_data(max_entries=4, show_spinner=False)
def _parse_plan(data: bytes, geo_key: str, _leaf_ids: np.ndarray) -> np.ndarray:
    """The uploaded plan's district per leaf, parsed once per file and geography (not on every rerun)."""
    return plan_from_csv(io.BytesIO(data), _leaf_ids)


def _district_plan(geo, geo_key: str) -> np.ndarray | None:
    """A block-assignment CSV from the District maps page as one more target (Georgia only)."""
    if geo.leaf_ids is None:
        return None
    with st.expander("Your district plan as a target (block-assignment CSV from the District maps page)"):
        upload = st.file_uploader("Plan CSV (columns GEOID, district)", type=["csv"], key="ba_plan_csv")
        if upload is None:
            st.caption("Export a plan on the District maps page (Georgia, seed 0 there and here) and load it to "
                       "see and optimise the error of your own districts.")
            return None
        try:
            return _parse_plan(upload.getvalue(), geo_key, geo.leaf_ids)
        except ValueError as exc:
            st.error(f"{upload.name}: {exc}")
            return None


st.title("Budget allocation")
st.caption("Split a privacy budget over the levels of a census geography (nation to block) and see the error "
           "it leaves at every level and in districts that cut across the hierarchy. Errors follow ToyDown "
           "(Cohen et al. 2021): noise at every node, then a top-down fit so children add up to their parent.")

# ------------------------------------------------------------------------------- inputs
with st.container(border=True):
    g1, g2, g3 = st.columns([1.2, 1.4, 1])
    kind = g1.radio("Hierarchy", ["stylised", "georgia"], key="ba_hier", horizontal=True,
                    format_func={"stylised": "Stylised fan-outs", "georgia": "Georgia"}.get)
    fan_text = g2.text_input("Fan-outs below the root (stylised)", "20, 10, 4, 12", key="ba_fanouts",
                             disabled=kind != "stylised",
                             help="Children per node at each level, e.g. 20 counties, 10 tracts per county, ...")
    seed = int(g3.number_input("Seed", 0, 2**31 - 1, 0, key="ba_seed"))
    try:
        fanouts = _parse_fanouts(fan_text) if kind == "stylised" else (1,)
        geo = load_geography(kind, fanouts, seed)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    h = geo.hierarchy
    st.caption(geo.source)
    choice = budget_input("ba", h.level_names)
    t1, t2, t3 = st.columns([2, 1, 1])
    target_options = ["leaf"] + [f"unit:{lvl}" for lvl in range(h.depth - 1)] + ["greedy", "scattered"]
    target_names = {"leaf": f"one {h.level_names[-1]}", "greedy": "k hierarchy-following districts",
                    "scattered": "k scattered districts",
                    **{f"unit:{lvl}": f"whole {h.level_names[lvl]}" for lvl in range(h.depth - 1)}}
    default_targets = [t for t in ["leaf", "unit:2", "greedy", "scattered"] if t in target_options]
    picked = t1.multiselect("Targets", target_options, default=default_targets, format_func=target_names.get,
                            key=f"ba_targets_{h.depth}")
    k_districts = int(t2.number_input("k districts", 1, 10_000, 4, key="ba_k"))
    runs = int(t3.slider("ToyDown runs", 0, 300, 30, 10, key="ba_runs"))
    nonneg = st.checkbox("Non-negative ToyDown in the simulation (adds bias; the closed form assumes none)",
                         key="ba_nonneg")

if k_districts > h.n_leaves and any(t in ("greedy", "scattered") for t in picked):
    st.warning(f"This tree has only {h.n_leaves:,} {h.level_names[-1]}(s), so the district targets use "
               f"k = {h.n_leaves:,} instead of {k_districts:,}.")
    k_districts = h.n_leaves
targets = tuple(f"{t}:{k_districts}" if t in ("greedy", "scattered") else t for t in picked)
plan = _district_plan(geo, f"{kind}:{seed}")
if plan is not None:
    picked, targets = [*picked, "plan"], (*targets, "plan")
    target_names["plan"] = f"your {len(np.unique(plan))}-district plan"
with st.expander("Importance of each target in the recommended split"):
    st.caption("Each target's variance is measured against its own equal-split variance, so a weight of 2 makes "
               "that target count twice as much; 0 leaves it out of the optimisation (it is still reported).")
    wcols = st.columns(max(len(picked), 1))
    weights = tuple(float(wcols[i].number_input(target_names[t], 0.0, 100.0, 1.0, 0.5, key=f"ba_weight_{t}"))
                    for i, t in enumerate(picked))
config = BudgetConfig(total=choice.total, unit=choice.unit, delta=choice.delta, hierarchy=kind,
                      fanouts=fanouts, split=choice.split, preset=choice.preset,
                      custom_shares=tuple(choice.shares) if choice.split == "custom" else (),
                      targets=targets, target_weights=weights if any(w != 1.0 for w in weights) else (),
                      district_plan=tuple(plan.tolist()) if plan is not None else (),
                      mechanism=choice.mechanism, sensitivity=choice.sensitivity,
                      runs=runs, seed=seed, nonnegative=nonneg)
try:
    result = _plan(config_digest(config), config)
except ValueError as exc:
    st.error(str(exc))
    st.stop()
alloc = result.allocation

m1, m2, m3 = st.columns(3)
m1.metric(f"Total ({alloc.unit})", f"{alloc.total:.4g}")
if alloc.unit == "rho":
    m2.metric("As (epsilon, delta)", f"({alloc.epsilon_total():.3f}, {alloc.delta:.0e})")
else:
    m2.metric("Guarantee", f"{alloc.total:.3g}-DP")
m3.metric("Leaves", f"{h.n_leaves:,}")

tab_levels, tab_split, tab_algo, tab_mech, tab_public, tab_export = st.tabs(
    ["Levels & targets", "Best split", "ToyDown vs TopDown-lite", "Mechanisms", "Public information", "Export"])

# ------------------------------------------------------------------------- levels/targets
with tab_levels:
    st.subheader("Per level")
    leaves_have_none = result.levels["mean children"].map(lambda x: "" if pd.isna(x) else f"{x:,.2f}")
    st.dataframe(result.levels.assign(**{"mean children": leaves_have_none}), hide_index=True, key="ba_levels_table")
    st.plotly_chart(figs.budget_shares_figure(result.levels, alloc.unit), key="ba_fig_budget")
    st.subheader("Targets")
    st.caption("Bars: closed-form error sd (Cohen et al. 2021, Cor. 3, with the mechanism's node variance). "
               "Diamonds: ToyDown runs with a 95% interval. " + SIM)
    st.plotly_chart(figs.target_error_figure(result.targets), key="ba_fig_targets")
    st.dataframe(result.targets, hide_index=True, key="ba_targets_table")
    st.subheader("Budget ledger")
    ledger = alloc.ledger()
    st.caption(ledger.statement(alloc.delta))
    st.dataframe(ledger.to_frame(), hide_index=True, key="ba_ledger")

# ---------------------------------------------------------------------------- best split
with tab_split:
    rec = result.recommendation
    rec_budgets = list(result.recommended_budgets)
    st.subheader("Recommended split for your targets")
    st.markdown("Minimises the (importance-weighted) sum of each target's variance relative to its equal-split variance "
                f"({'cube-root' if alloc.unit == 'epsilon' else 'square-root'} rule; every level keeps at least 0.5%).")
    st.dataframe(pd.DataFrame({"level": list(h.level_names), f"recommended ({alloc.unit})": rec_budgets,
                               "share": np.asarray(rec_budgets) / alloc.total}), hide_index=True,
                 key="ba_rec_split")
    st.dataframe(rec, hide_index=True, key="ba_rec_gain")
    if len(rec):
        st.metric("Mean gain over the equal split (error sd)", f"{rec['gain over equal (%)'].mean():.1f}%")
    st.subheader("Figure 2 analogue")
    st.caption("Three-level tree with 10 x 10 fan-outs and the chosen total and mechanism; the star is the optimum "
               "(for epsilon = 1 and Laplace: budgets 0.038, 0.171, 0.791, variance 14.52).")
    st.plotly_chart(figs.figure2_figure(result.figure2, result.figure2_optimum), key="ba_fig2")
    st.subheader("Presets of the paper")
    st.plotly_chart(figs.presets_figure(result.presets_levels, "level"), key="ba_fig_presets_levels")
    st.plotly_chart(figs.presets_figure(result.presets_targets, "target"), key="ba_fig_presets_targets")

# ------------------------------------------------------------------------ TopDown-lite
with tab_algo:
    st.markdown("**TopDown-lite** is this dashboard's feasible stand-in for the Census TopDown algorithm, not the "
                "Bureau's code: several histograms per unit with budget shares, the total population held exact, "
                "a least-squares fit, then non-negative integer counts that add up. Its invariants and constraints "
                "depend on the data, so its end-to-end guarantee does not follow from the noise alone "
                "(see Public information). Person types are simulated from the populations. " + SIM)
    a1, a2, a3, a4 = st.columns(4)
    n_types = int(a1.number_input("Person types", 1, 12, 4, key="ba_algo_types"))
    det_share = float(a2.slider("Detailed histogram share", 0.05, 1.0, 0.5, 0.05, key="ba_algo_share",
                                help="The rest goes to the total-population histogram."))
    exact = int(a3.selectbox("Also publish exactly", [-1] + list(range(h.depth - 1)),
                             format_func=lambda m: "only the total" if m < 0 else f"all counts through {h.level_names[m]}",
                             key="ba_algo_exact"))
    algo_runs = int(a4.slider("Runs", 1, 20, 3, key="ba_algo_runs"))
    weighted = st.checkbox("Inverse-variance weights in the least-squares fit", key="ba_algo_weights")
    algo_cfg = AlgorithmConfig(n_types, det_share, True, exact, "inverse_variance" if weighted else "unweighted",
                               algo_runs, seed)
    # Only what the comparison reads goes into its key: changing targets, k or the ToyDown runs above
    # must not rerun it.
    algo_key = config_digest([kind, fanouts, seed, tuple(alloc.budgets), alloc.mechanism, alloc.sensitivity,
                              algo_cfg])
    run_algo = h.n_leaves <= LARGE_TREE or st.toggle(
        f"Run the comparison on this tree of {h.n_leaves:,} {h.level_names[-1]}s (about "
        f"{math.ceil(h.n_leaves * algo_runs * n_types / 500_000)} s on each change of the budget)",
        value=False, key="ba_algo_large")
    if not run_algo:
        st.info(f"Trees above {LARGE_TREE:,} leaves run this comparison only on request (switch above).")
    else:
        try:
            errors = _algorithms(algo_key, config, algo_cfg, tuple(alloc.budgets))
            st.plotly_chart(figs.algorithm_figure(errors), key="ba_fig_algo")
            summary = errors.groupby(["algorithm", "level"], sort=False).mean(numeric_only=True).drop(columns="run")
            st.dataframe(summary.reset_index(), hide_index=True, key="ba_algo_table")
        except ValueError as exc:
            st.error(str(exc))

# ----------------------------------------------------------------------------- mechanisms
with tab_mech:
    st.markdown("Error of **k overlapping counting queries** (one person can change every query by 1, e.g. "
                "cumulative age counts or the same district in k plans). Pure-DP mechanisms use scale k/epsilon; "
                "the Gaussians use the rho whose tight conversion gives (epsilon, delta); the Generalized Gaussian "
                "is calibrated numerically with a privacy-loss distribution, beside the paper's proven scale.")
    c1, c2, c3 = st.columns(3)
    k = int(c1.select_slider("k queries", [1, 3, 10, 30, 100, 300, 1000], value=100, key="ba_mech_k"))
    mdelta = float(c2.select_slider("delta", [1e-4, 1e-5, 1e-6, 1e-8, 1e-10], value=1e-6,
                                    format_func=lambda d: f"{d:.0e}", key="ba_mech_delta"))
    orders = c3.multiselect("Generalized Gaussian orders p", [1.0, 2.0, 3.0, 4.0, 6.0, 8.0], default=[3.0],
                            key="ba_mech_p")
    show_bound = st.toggle("Show the paper's proven bound beside the numeric calibration", value=False,
                           key="ba_mech_bound")
    calibrate = st.toggle("Include the Generalized Gaussian (numeric calibration: instant at delta 1e-6 for "
                          "orders 2-4, shipped precomputed; otherwise about 2 s per order and epsilon the first "
                          "time, then cached)", value=False, key="ba_mech_gg")
    mechs = ("laplace", "geometric", "gaussian", "discrete_gaussian") + (
        ("generalized_gaussian",) if calibrate and orders else ())
    sweep_cfg = MechanismSweepConfig(k=k, delta=mdelta, gg_orders=tuple(sorted(orders)), mechanisms=mechs,
                                     include_bound=True)
    try:
        sweep = _sweep(config_digest(sweep_cfg), sweep_cfg)
        st.plotly_chart(figs.mechanism_figure(sweep, show_bound), key="ba_fig_mech")
        wide = sweep.pivot_table(index=["label", "calibration", "epsilon", "scale"], columns="metric",
                                 values="value")
        st.dataframe(wide.reset_index(), hide_index=True, key="ba_mech_table")
    except ValueError as exc:
        st.error(str(exc))
    st.caption("Numeric calibration rounds privacy losses up, so its scale is slightly conservative. The proven "
               "bound holds only for even p >= 4 up to ln k and delta <= 1/k; outside that range it is drawn for "
               "scale only.")

# ---------------------------------------------------------------------- public information
with tab_public:
    st.markdown("Invariants are counts published **exactly** (for example the state total). They become public "
                "information Z; the guarantee is then stated relative to Z (Seeman, Slavkovic and Reimherr 2022).")
    inv_level = st.select_slider("Publish exactly through level", options=list(range(-1, h.depth)), value=0,
                                 format_func=lambda m: "nothing" if m < 0 else h.level_names[m], key="ba_inv_level")
    inv_names = [] if inv_level < 0 else (["the total population"] if inv_level == 0 else
                                          [f"every count at the {h.level_names[inv_level]} level and above"])
    st.info(dpz_statement(alloc.total, alloc.unit, inv_names))
    if inv_names:
        st.caption(f"If an invariant were enforced by conditioning (redrawing until the noisy counts meet it), the "
                   f"guarantee could only be stated as up to {2 * alloc.total:.3g} (twice the budget, Lemma 5). "
                   "Projecting noisy counts onto the invariant, as ToyDown and TopDown-lite do, is post-processing "
                   "given Z and costs nothing more relative to Z (Lemma 3).")
    effects = session_memo("ba_invariants", config_digest([kind, fanouts, seed, alloc]),
                    lambda progress: invariant_effects(h, h.aggregate(geo.leaf_counts), alloc.eps_by_level,
                                                       alloc.mechanism, alloc.sensitivity),
                    "Invariant effects")
    chosen = effects[effects["exact through level"].isin([-1, inv_level])]
    st.plotly_chart(figs.invariant_figure(chosen, "sd (freed budget re-spent)"), key="ba_fig_inv")
    st.dataframe(chosen, hide_index=True, key="ba_inv_table")
    st.subheader("Wasserstein exponential mechanism with a public total")
    parent = h.level_offsets[h.depth - 2] if h.depth >= 2 else 0
    lo, hi = h.child_ptr[parent], h.child_ptr[parent + 1]
    counts = h.aggregate(geo.leaf_counts)[lo:hi]
    w1, w2, w3 = st.columns(3)
    wem_eps = float(w1.number_input("epsilon", 0.01, 10.0, 0.5, key="ba_wem_eps"))
    dz = float(w2.number_input("Delta_z (2 when records are independent)", 1.0, 1000.0, 2.0, key="ba_wem_dz"))
    wem_runs = int(w3.slider("runs", 5, 200, 30, key="ba_wem_runs"))
    safe = st.checkbox("Normaliser-safe kappa = epsilon / (2 Delta_z) for the bounded base measure",
                       value=True, key="ba_wem_safe")
    st.caption(f"Count vector: the {hi - lo} {h.level_names[-1]} counts of the first {h.level_names[-2] if h.depth >= 2 else 'unit'} "
               f"(public total {int(counts.sum()):,}). " + SIM)
    try:
        wem_cfg = WemConfig(wem_eps, dz, wem_runs, seed, safe)
        summary, cells = _wem(tuple(int(c) for c in counts), config_digest(wem_cfg), wem_cfg)
        st.dataframe(summary, hide_index=True, key="ba_wem_table")
        st.plotly_chart(figs.wem_cells_figure(cells), key="ba_fig_wem")
    except ValueError as exc:
        st.error(str(exc))
    st.subheader("Sensitivity under dependence (Example 3), exact in log space")
    n_dz = int(st.select_slider("records n", [10, 100, 200, 500], value=10, key="ba_dz_n"))
    st.plotly_chart(figs.delta_z_heatmap(_dz_grid(n_dz), n_dz), key="ba_fig_dz")
    rho = st.slider("Correlation between records (Example 2)", 0.0, 1.0, 0.1, 0.05, key="ba_corr")
    st.markdown(f"With {n_dz} equicorrelated records at correlation {rho:.2f}, one record moves the mean by up to "
                f"**{beta_equicorrelated(n_dz, rho) * n_dz:.2f}x** what it moves it under independence, so the noise "
                "must grow by the same factor.")

# ------------------------------------------------------------------------------------ export
with tab_export:
    st.markdown("The allocation below can be loaded on the District maps page.")
    st.download_button("Download allocation (JSON)", alloc.to_json(), file_name="budget_allocation.json",
                       mime="application/json", key="ba_alloc_json", icon=":material/download:")
    st.code(alloc.to_json(), language="json")
    st.session_state["census_allocation_json"] = alloc.to_json()
    export_panel("Budget allocation", config,
                 {"levels": result.levels, "targets": result.targets, "presets_levels": result.presets_levels,
                  "presets_targets": result.presets_targets, "recommendation": result.recommendation,
                  "figure2": result.figure2, "ledger": alloc.ledger().to_frame()},
                 extra={"allocation": alloc.to_json(), "source": result.source,
                        "note": "Monte Carlo columns are simulations, not releases."}, key="budget_allocation")
