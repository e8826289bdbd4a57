"""Stratified synthesis: pooled or per-group private synthesis and means, and who pays for each choice."""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.cache import config_digest, data_fingerprint  # noqa: E402
from core.parallel import default_n_jobs  # noqa: E402
from core.synthesis import mean_estimation as me  # noqa: E402
from core.synthesis.encoding import categorical_view  # noqa: E402
from core.synthesis.registry import SYNTHESIZERS  # noqa: E402
from core.synthesis.stratified import SMALL_ACTIONS  # noqa: E402
from core.synthesis.sweep import (SweepConfig, check_strata_count, curve_table, marginal_comparison,  # noqa: E402
                                  noise_table, run_sweep, smallest_strata, strata_overview, synthesize_release,
                                  worst_group_table)
from dashboard.components.dataset_picker import pick_microdata  # noqa: E402
from dashboard.components.export import export_panel  # noqa: E402
from dashboard.components.progress import progress_bar, remember  # noqa: E402
from dashboard.figures import synthesis as figs  # noqa: E402

SIM = "Simulation, not a release: seeded floating-point noise for illustration only."
CURATOR = ("Curator-only diagnostics: every error below is measured against the real data and is not "
           "itself private; share only the synthetic release and its budget statement.")
SLUGS = {"CPS": "cps", "Adult": "adult"}


def _slug(name: str) -> str:
    return next((v for k, v in SLUGS.items() if k.lower() in name.lower()), "upload")


@st.cache_data(show_spinner=False, max_entries=6)
def _prepared(fingerprint: str, _raw: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    return categorical_view(_raw)


@st.cache_data(show_spinner=False, max_entries=16)
def _overview(fingerprint: str, strata: tuple[str, ...], _data: pd.DataFrame) -> pd.DataFrame:
    return strata_overview(_data, strata)


@st.cache_data(show_spinner=False, max_entries=16)
def _mean_curves(sizes: tuple[int, ...], R: float, gamma: float, eps: tuple[float, ...], runs: int, seed: int,
                 noise: str, delta: float):
    return me.mean_estimation_curves(list(sizes), R, gamma, list(eps), runs, np.random.default_rng(seed),
                                     noise=noise, delta=delta)


@st.cache_data(show_spinner=False, max_entries=16)
def _group_errors(sizes, mus, R, gamma, eps, runs, policy, count_eps, noise, delta):
    return me.group_error_table(list(sizes), list(mus), R, gamma, eps, runs, np.random.default_rng(1), policy,
                                count_eps, noise=noise, delta=delta)


@st.cache_data(show_spinner=False, max_entries=16)
def _coinpress(alpha: float, k: int, runs: int) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.concat([me.simulate_mixture_coinpress(n, alpha, k, runs, rng) for n in (1000, 4000, 10000, 20000)],
                     ignore_index=True)


def _parse_epsilons(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(sorted({float(p) for p in text.replace(";", ",").split(",") if p.strip()}))
    except ValueError:
        raise ValueError("Epsilons must be numbers separated by commas, e.g. 0.1, 1, 5.") from None
    if not vals or any(v <= 0 or v > 50 for v in vals):
        raise ValueError("Give between one and eight epsilons, each above 0 and at most 50.")
    if len(vals) > 8:
        raise ValueError("Give at most eight epsilons, so the sweep stays interactive.")
    return vals


st.title("Stratified synthesis")
st.caption("Should a curator release private synthetic microdata and means pooled, or one model per "
           "demographic group (stratified), and which groups pay for each choice?")

# ------------------------------------------------------------------------------- data and controls
with st.container(border=True):
    picked = pick_microdata("ss")
if picked is None:
    st.stop()
name, raw = picked
slug = _slug(name)
fp = data_fingerprint(raw)
try:
    data, notes = _prepared(fp, raw)
except ValueError as exc:
    st.error(str(exc))
    st.stop()
for note in notes:
    st.caption(note)

cols = list(data.columns)
narrow = [c for c in cols if data[c].nunique() <= 16]
if len(cols) <= 10:
    default_cols = cols
else:  # the usual strata and target first, then the narrowest-domain columns, at most ten in data order
    musts = [c for c in ("sex", "race", "income") if c in cols]
    pick = set(musts + [c for c in (narrow or cols) if c not in musts][: 10 - len(musts)])
    default_cols = [c for c in cols if c in pick]
with st.container(border=True):
    c1, c2, c3 = st.columns([2.2, 1.3, 1])
    columns = c1.multiselect("Columns to synthesise", cols, default=default_cols, key=f"ss_columns_{slug}",
                             help="Each column is treated as categorical with the public domain of its categories.")
    strata_default = [c for c in ("sex", "race") if c in columns] or columns[:1]
    strata = c2.multiselect("Strata columns", columns, default=strata_default, max_selections=3,
                            key=f"ss_strata_{slug}", help="Every combination of their categories is one stratum.")
    target_opts = ["(none)"] + [c for c in columns if c not in strata]
    target_default = target_opts.index("income") if "income" in target_opts else 0
    target = c3.selectbox("Target for ML utility", target_opts, index=target_default, key=f"ss_target_{slug}",
                          help="A classifier trained on synthetic rows predicts whether this column's code is above "
                               "its first category, and is tested on real held-out rows.")
    d1, d2, d3, d4 = st.columns([1.3, 1.4, 0.8, 0.9])
    synth_key = d1.selectbox("Synthesizer", list(SYNTHESIZERS), index=list(SYNTHESIZERS).index("mst"),
                             format_func=lambda k: SYNTHESIZERS[k][0], key="ss_synth",
                             help="MST (McKenna et al. 2021): a third of the budget on all one-way marginals (rare "
                                  "values merged), a third to pick a spanning tree of column pairs with the "
                                  "exponential mechanism, a third on the tree's two-way marginals; the tree model is "
                                  "fitted by weighted least squares onto consistent non-negative marginals and "
                                  "sampled parents first. Independent marginals: noisy one-way marginals only.")
    eps_text = d2.text_input("Epsilons for the sweep", "0.1, 1, 5", key="ss_epsilons",
                             help="Comma-separated; each is a total (epsilon, delta) budget for one release.")
    n_seeds = int(d3.number_input("Seeds", 1, 10, 2, key="ss_seeds"))
    delta = float(d4.selectbox("delta", [1e-9, 1e-7, 1e-5], index=0, format_func=lambda x: f"{x:.0e}",
                               key="ss_delta"))
    e1, e2, e3, e4 = st.columns([1.4, 1.4, 1, 1])
    size_policy = e1.radio("Stratum sizes", ["dp_count", "public"], key="ss_size_policy",
                           format_func={"dp_count": "Estimate with a DP count (charged)",
                                        "public": "Public (e.g. census totals)"}.get)
    public_ok = e2.checkbox("I confirm the stratum sizes are public knowledge", key="ss_public_ok",
                            disabled=size_policy != "public",
                            help="Only then may exact sizes steer the release without being charged.")
    count_share = e2.slider("Share of the budget for the counts", 0.02, 0.5, 0.1, 0.02, key="ss_count_share",
                            disabled=size_policy != "dp_count")
    min_size = int(e3.number_input("Small-stratum threshold (rows)", 0, 100_000, 0, 10, key="ss_min_size",
                                   help="Strata whose size (public or DP) is below this are flagged."))
    small_action = e4.selectbox("Small strata are", SMALL_ACTIONS, key="ss_small_action",
                                format_func={"keep": "kept (own model)", "merge": "merged into one model",
                                             "drop": "dropped (absent from output)"}.get)

config_error = None
try:
    epsilons = _parse_epsilons(eps_text)
    config = SweepConfig(columns=tuple(columns), strata_columns=tuple(strata),
                         target=None if target == "(none)" else target, synthesizer=synth_key,
                         epsilons=epsilons, seeds=tuple(range(n_seeds)), delta=delta, size_policy=size_policy,
                         sizes_declared_public=bool(public_ok), count_share=float(count_share),
                         min_stratum_size=min_size, small_action=small_action,
                         n_jobs=default_n_jobs())  # the fits of a sweep spread over the cores
    config.validate()
except ValueError as exc:
    config, config_error = None, str(exc)
    st.error(config_error)

# ------------------------------------------------------------------------------- strata setup (cheap)
overview = pd.DataFrame(columns=["group", "real_rows", "share"])
if strata:
    try:
        overview = _overview(fp, tuple(strata), data)
    except ValueError as exc:
        st.error(str(exc))
if not overview.empty and config is not None:
    try:
        check_strata_count(len(overview))
    except ValueError as exc:
        config = None
        st.error(str(exc))
if not overview.empty:
    overview = overview.assign(
        flag=np.where(overview["real_rows"] == 0, "empty",
                      np.where(overview["real_rows"] < max(min_size, 1), "small", "")))
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Strata (public domain)", f"{len(overview)}")
    m2.metric("Smallest stratum", f"{int(overview['real_rows'].min()):,} rows")
    m3.metric("Largest stratum", f"{int(overview['real_rows'].max()):,} rows")
    m4.metric("Rows", f"{len(data):,}")

if config is not None:
    n_strata = len(overview)
    if size_policy == "dp_count":
        budget_text = (f"{count_share:.0%} of each budget buys a Gaussian histogram of the {n_strata} stratum "
                       f"sizes (one person moves one count by one); the remaining {1 - count_share:.0%} goes to "
                       "every stratum's synthesizer in full.")
    else:
        budget_text = ("Stratum sizes are declared public, so they cost nothing; each stratum's synthesizer gets "
                       "the full budget.")
    st.info(f"**Accounting.** Each person belongs to exactly one stratum and strata come from the public "
            f"categories, so one model per stratum composes in parallel: the release costs one budget, not "
            f"{n_strata}. {budget_text} Neighbouring data sets differ by adding or removing one person; if "
            "instead one person's group may change (replace-one), a stratified release costs twice the budget.")

tab_setup, tab_curves, tab_marg, tab_disp, tab_small, tab_ml, tab_mean, tab_release, tab_export = st.tabs(
    ["Strata setup", "Per-group curves", "Marginals", "Disparity", "Smallest strata", "ML utility",
     "Mean estimation", "Synthetic release", "Export"])

with tab_setup:
    if overview.empty:
        st.info("Choose at least one strata column to see the strata.")
    else:
        st.caption(CURATOR)
        left, right = st.columns([1, 1.4])
        left.dataframe(overview, hide_index=True, width="stretch",
                       column_config={"share": st.column_config.NumberColumn(format="%.4f")})
        right.plotly_chart(figs.strata_sizes_figure(overview, min_size), width="stretch", key="ss_sizes_chart")
        if config is not None:
            noise = noise_table(config, len(data))
            st.markdown("**Noise per measured cell against the strata** (standard deviations, in rows)")
            st.dataframe(noise, hide_index=True, width="stretch",
                         column_config={"rho": st.column_config.NumberColumn(format="%.3g")})
            smallest = int(overview.loc[overview["real_rows"] > 0, "real_rows"].min()) if (overview["real_rows"] > 0).any() else 0
            loud = noise[noise["stratum one-way cell sd"] * 3 > smallest]
            if not loud.empty:
                st.warning(f"At epsilon {', '.join(f'{e:g}' for e in loud['epsilon'])} the noise on a single cell "
                           f"(times 3) exceeds the smallest stratum's {smallest} rows: its model will be mostly "
                           "noise there. Stratification tends to hurt below epsilon 0.1.")

# ------------------------------------------------------------------------------- sweep behind a button
store = st.session_state.setdefault("ss_results", {})
digest = config_digest({"config": config, "data": fp}) if config is not None else None
run_clicked = st.sidebar.button("Run sweep", type="primary", key="ss_run", disabled=config is None,
                                help="Fits stratified and pooled synthesizers at every epsilon and seed.")
st.sidebar.caption("The sweep fits 2 x epsilons x seeds models and scores each; results are cached, so "
                   "plot options never recompute.")
slot = st.empty()
if run_clicked and config is not None and digest not in store:
    try:
        with slot.container():
            with progress_bar("Running the privacy-utility sweep") as progress:
                remember("ss_results", digest, run_sweep(config, data, progress=progress), 6)
        slot.empty()
    except ValueError as exc:
        st.error(str(exc))
result = store.get(digest) if digest else None
# per-group measures need enough columns besides the strata: two for a two-way TVD, three for the workload
n_other = len(config.columns) - len(config.strata_columns) if config is not None else 0
defined_metrics = {"tvd_1way"} | ({"tvd_2way"} if n_other >= 2 else set()) | ({"workload_3way"} if n_other >= 3 else set())
main_metric = "tvd_2way" if "tvd_2way" in defined_metrics else "tvd_1way"
MEASURE = {"tvd_2way": "two-way TVD", "tvd_1way": "one-way TVD"}
NOT_RUN = "Press **Run sweep** in the sidebar to fit stratified and pooled synthesizers for these settings."

with tab_curves:
    if result is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR + " " + SIM)
        metrics = ([m for m in ("tvd_2way", "tvd_1way", "workload_3way") if m in defined_metrics]
                   + (["accuracy"] if config.target else []))
        p1, p2, p3 = st.columns([2, 1, 1])
        metric = p1.selectbox("Error measure", metrics, format_func=lambda m: figs.METRIC_LABELS[m], key="ss_metric")
        bands = p2.checkbox("Bands over seeds", True, key="ss_bands")
        log_y = p3.checkbox("Log y axis", False, key="ss_logy")
        gm = result.group_metrics[result.group_metrics["metric"] == metric]
        sizes = gm.groupby("group")["real_rows"].first().to_dict()
        group_curves = curve_table(gm)
        st.plotly_chart(figs.group_curves_figure(group_curves, metric, sizes, bands, log_y), width="stretch",
                        key="ss_group_chart")
        with st.expander("Values behind the curves"):
            st.dataframe(group_curves, hide_index=True, width="stretch")
        if metric == "tvd_2way":
            st.caption("Two-way TVD inside each group among the non-strata columns, against the group's real "
                       "training rows. Stratification does not always help: with MST the smallest groups often "
                       "lose at small epsilon because each cell's noise is large against their size.")

with tab_marg:
    if result is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR + " " + SIM)
        g1, g2 = st.columns(2)
        mg_eps = float(g1.selectbox("Epsilon", list(config.epsilons), key="ss_mg_eps"))
        mg_seed = int(g2.selectbox("Seed", list(config.seeds), key="ss_mg_seed"))
        memo = st.session_state.setdefault("ss_marginals", {})
        mg_key = (digest, mg_eps, mg_seed)
        if mg_key not in memo:
            remember("ss_marginals", mg_key, marginal_comparison(config, data, mg_eps, mg_seed), 12)
        shares, col_tvd = memo[mg_key]
        st.plotly_chart(figs.tvd_heatmap_figure(col_tvd), width="stretch", key="ss_heatmap")
        h1, h2 = st.columns(2)
        groups_by_size = col_tvd.groupby("group")["real_rows"].first().sort_values().index.tolist()
        mg_group = h1.selectbox("Group", groups_by_size, key="ss_mg_group")
        mg_col = h2.selectbox("Column", list(pd.unique(col_tvd["column"])), key="ss_mg_col")
        st.plotly_chart(figs.marginal_bars_figure(shares, mg_group, mg_col), width="stretch", key="ss_mg_bars")

with tab_disp:
    if result is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR + " " + SIM)
        oc = curve_table(result.overall_metrics, by=("epsilon", "method", "metric"))
        st.plotly_chart(figs.method_curves_figure(oc, ("parity_error", "max_disparity"),
                                                  "Disparity against the privacy budget (Rosenblatt et al., Def. 11)"),
                        width="stretch", key="ss_disp_chart")
        worst = worst_group_table(result, main_metric)
        st.plotly_chart(figs.worst_vs_population_figure(worst, MEASURE[main_metric]), width="stretch",
                        key="ss_pareto_chart")
        st.dataframe(worst, hide_index=True, width="stretch")
        st.caption("Not yet available: the AIM and GEM synthesizers (AIM takes minutes per fit; GEM needs a GPU). "
                   "The three-way workload error of the paper's Figure 9 is under Per-group curves.")
        st.caption("Parity error sums, over columns, the relative error of each group's column mean plus 1/k times "
                   "that of the population mean; max disparity is the largest relative error of any group's mean.")

with tab_small:
    if result is None:
        st.info(NOT_RUN)
    else:
        st.caption(CURATOR)
        small_tab = smallest_strata(result, main_metric)
        st.dataframe(small_tab, hide_index=True, width="stretch")
        dropped = result.strata[result.strata["fate"] == "dropped"]["group"].unique()
        merged = result.strata[result.strata["fate"] == "merged"]["group"].unique()
        if len(dropped):
            st.warning(f"Dropped by your choice, absent from the synthetic data: {', '.join(dropped)}.")
        if len(merged):
            st.info(f"Merged into one shared model: {', '.join(merged)}.")
        if not len(dropped) and not len(merged):
            st.success("Every stratum has its own model; none was dropped or merged.")
        st.caption("size_used is what steered the sample sizes: the DP count (averaged over seeds) or the public "
                   "size; sample_share is the stratum's share of the synthetic rows (0 when dropped, or when its "
                   "DP count came out at zero).")
        starved = small_tab[(small_tab["sample_share"] == 0) & (small_tab["real_rows"] > 0)]
        if len(starved):
            st.warning(f"Present in the data but given no synthetic rows: {', '.join(starved['group'])}.")

with tab_ml:
    if result is None:
        st.info(NOT_RUN)
    elif config.target is None:
        st.info("Choose a target column to measure machine-learning utility.")
    else:
        st.caption(CURATOR + " " + SIM)
        oc = curve_table(result.overall_metrics, by=("epsilon", "method", "metric"))
        st.plotly_chart(figs.method_curves_figure(oc, ("accuracy", "fpr_gap", "fnr_gap"),
                                                  "Train on synthetic, test on real held-out rows",
                                                  result.real_baseline),
                        width="stretch", key="ss_ml_chart")
        base = result.real_baseline
        b1, b2, b3 = st.columns(3)
        b1.metric("Real-data accuracy", f"{base.get('accuracy', float('nan')):.3f}")
        b2.metric("Majority-class accuracy", f"{base.get('majority_accuracy', float('nan')):.3f}")
        b3.metric("Real-data FNR gap", f"{base.get('fnr_gap', float('nan')):.3f}")
        st.caption("Random forest (20 trees, depth 12, seed 42) on the synthetic training rows; gaps are the largest "
                   "minus the smallest rate over strata (fairlearn MetricFrame). The positive class is any code "
                   "above the target's first category.")

with tab_mean:
    st.caption(SIM + " Group sizes are those of the chosen strata; values are N(mu_i, 1) draws.")
    sizes = tuple(int(s) for s in overview["real_rows"] if s > 0) if not overview.empty else ()
    q1, q2, q3, q4 = st.columns(4)
    R = float(q1.number_input("Bound R on |mean|", 0.1, 100.0, 1.0, 0.5, key="ss_me_R"))
    gamma = float(q2.number_input("gamma (failure probability)", 0.001, 0.5, 0.1, 0.01, key="ss_me_gamma",
                                  format="%.3f"))
    runs = int(q3.slider("Simulated runs per epsilon", 10, 200, 40, 10, key="ss_me_runs"))
    me_noise = q4.radio("Noise", ["laplace", "gaussian"], key="ss_me_noise",
                        format_func={"laplace": "Laplace (pure epsilon-DP)",
                                     "gaussian": "Gaussian (zCDP at the page's delta)"}.get,
                        help="Gaussian noise runs at the largest rho that is (epsilon, delta)-DP, so both noises "
                             "are compared at the same epsilon.")
    if len(sizes) < 2:
        st.info("Choose strata with at least two non-empty groups.")
    else:
        eps_me = epsilons if config_error is None else (0.1, 1.0, 5.0)
        curves = _mean_curves(sizes, R, gamma, tuple(eps_me), runs, 0, me_noise, delta)
        st.plotly_chart(figs.mean_error_figure(curves), width="stretch", key="ss_mean_chart")
        n = sum(sizes)
        b1 = me.noise_budget(1.0, me_noise, delta)
        sd1 = me.population_error_sd(sizes, R, gamma, b1, True, me_noise)
        ratio = sd1 / me.population_error_sd(sizes, R, gamma, b1, False, me_noise)
        lo, hi = me.cost_ratio_bounds(len(sizes), n, R, gamma)
        k1, k2, k3 = st.columns(3)
        k1.metric("Stratification cost multiplier", f"{ratio:.2f}x", help="sd of the stratified population "
                  "error over the pooled one, sqrt(sum b_i^2)/b_0 (same for every epsilon).")
        k2.metric("Bounds", f"[{lo:.2f}, {hi:.2f}]")
        k3.metric("Sampling sd of the mean, 1/sqrt(n)", f"{1 / np.sqrt(n):.2e}")
        st.caption(f"At epsilon 1 the stratified privacy error sd is {sd1:.2e}, "
                   f"against a sampling error sd of {1 / np.sqrt(n):.2e}: both privacy errors shrink like 1/(n epsilon), "
                   "usually far below the sampling error.")
        st.markdown("#### Who pays for each choice")
        names = [g for g, s in zip(overview["group"], overview["real_rows"]) if s > 0]
        w1, w2, w3, w4 = st.columns(4)
        eps_g = float(w1.selectbox("Epsilon", list(eps_me), index=min(1, len(eps_me) - 1), key="ss_me_eps"))
        spread = float(w2.slider("Spread of the group means", 0.0, 2.0, 0.5, 0.1, key="ss_me_spread",
                                 help="Group means are drawn once as spread x N(0, 1), clipped to [-R, R]."))
        weights = w3.radio("Recombination weights", ["exact", "dp"], key="ss_me_weights",
                           format_func={"exact": "public exact sizes", "dp": "DP-noised sizes"}.get)
        count_eps = float(w4.number_input("Epsilon for the size counts", 0.01, 10.0, 0.1, 0.05, key="ss_me_count_eps",
                                          disabled=weights != "dp"))
        mus = np.clip(spread * np.random.default_rng(11).normal(0, 1, len(sizes)), -R, R)
        gtab = _group_errors(sizes, tuple(mus.round(6)), R, gamma, eps_g, runs, weights,
                             count_eps if weights == "dp" else None, me_noise, delta)
        st.plotly_chart(figs.group_error_figure(gtab, names), width="stretch", key="ss_group_error_chart")
        pop = gtab.attrs["population"]
        spent = eps_g + (count_eps if weights == "dp" else 0.0)
        guarantee = f"{spent:g}-DP" if me_noise == "laplace" else f"({spent:g}, {delta:g})-DP"
        per_group = (f"the full epsilon {eps_g:g}" if me_noise == "laplace" else
                     f"Gaussian noise at rho {me.noise_budget(eps_g, me_noise, delta):.3g}, which is "
                     f"({eps_g:g}, {delta:g})-DP")
        st.caption(f"Population mean |error|: stratified {pop['stratified']:.2e}, pooled {pop['pooled']:.2e}. "
                   f"Budget: every group's mean uses {per_group} (disjoint groups, parallel "
                   f"composition){f', plus {count_eps:g} for the DP size counts' if weights == 'dp' else ''}: "
                   f"{guarantee} in total. Publishing a separate pooled mean as well would cost epsilon "
                   f"{spent + eps_g:g}. The pooled mean is accurate for the population but wrong for groups whose "
                   "mean differs from it.")
        with st.expander("Per-group numbers"):
            st.dataframe(gtab.assign(group=names), hide_index=True, width="stretch")

        st.markdown("#### Adaptive means: univariate COINPRESS")
        v1, v2 = st.columns(2)
        cp_alpha = float(v1.select_slider("Dirichlet alpha of group sizes", [0.1, 0.3, 1.0, 3.0], 0.3, key="ss_cp_alpha"))
        cp_k = int(v2.select_slider("Groups k", [2, 3, 6, 12], 3, key="ss_cp_k"))
        st.plotly_chart(figs.coinpress_figure(_coinpress(cp_alpha, cp_k, 20)), width="stretch", key="ss_cp_chart")
        st.caption("Two steps (rho 0.125 then 0.375, total 0.5 zCDP) from the interval [-3, 3], sigma 1, 20 runs "
                   "per point; PubStrat takes weights from an equal-size public half. Every stratum runs the whole "
                   "schedule (parallel composition) and the strata are recombined with normalised weights.")

        st.markdown("#### How skewed group sizes soften the cost")
        summary, table = me.dirichlet_summary(sizes)
        st.plotly_chart(figs.dirichlet_figure(table, summary["observed"], summary["worst"], summary["best"],
                                              summary["alpha_mle"]), width="stretch", key="ss_dirichlet_chart")
        st.caption(f"Theorem 10 (an equality, not only a bound) at the fitted alpha {summary['alpha_mle']:.3g}: "
                   f"{summary['theorem10_at_mle']:.2f}; observed sum of log sizes {summary['observed']:.2f} (the "
                   "maximum-likelihood alpha puts the observed point on the curve by construction); "
                   f"worst case {summary['worst']:.2f}; best case {summary['best']:.2f}. The stratified error "
                   "grows with this sum: the further below the worst case, the cheaper stratifying is.")

with tab_release:
    if config is None:
        st.info("Fix the settings above to generate a synthetic release.")
    else:
        r1, r2, r3 = st.columns(3)
        rel_eps = float(r1.selectbox("Epsilon", list(config.epsilons), index=len(config.epsilons) - 1,
                                     key="ss_rel_eps"))
        rel_method = r2.radio("Method", ["stratified", "pooled"], key="ss_rel_method", horizontal=True)
        rel_seed = int(r3.number_input("Seed", 0, 2**31 - 1, 0, key="ss_rel_seed"))
        rel_key = config_digest({"config": config, "data": fp, "eps": rel_eps, "m": rel_method, "s": rel_seed})
        releases = st.session_state.setdefault("ss_releases", {})
        if st.button("Generate synthetic data", key="ss_rel_run"):
            try:
                remember("ss_releases", rel_key, synthesize_release(config, data, rel_eps, rel_seed, rel_method), 3)
            except ValueError as exc:
                st.error(str(exc))
        if rel_key in releases:
            synth, ledger, statement = releases[rel_key]
            st.success(statement)
            st.caption("Seeded with numpy's floating-point noise: a demonstration of the method. A production "
                       "release should draw its noise from a secure sampler (OpenDP).")
            st.dataframe(ledger, hide_index=True, width="stretch")
            st.dataframe(synth.head(20), hide_index=True, width="stretch")
            stem = f"synthetic_{rel_method}_{config.synthesizer}_eps{rel_eps:g}"
            note = (f"{statement}\n\nMethod: {rel_method}; synthesizer: {SYNTHESIZERS[config.synthesizer][0]}; "
                    f"epsilon {rel_eps:g}, delta {config.delta:g}; seed {rel_seed}; size policy {config.size_policy}; "
                    f"columns {', '.join(config.columns)}; strata {', '.join(config.strata_columns)}.\n"
                    "Neighbouring data sets differ by adding or removing one person.\n\n"
                    + ledger.to_csv(index=False))
            dl1, dl2 = st.columns(2)
            dl1.download_button("Download synthetic data (CSV)", synth.to_csv(index=False), file_name=f"{stem}.csv",
                                mime="text/csv", key="ss_rel_download")
            dl2.download_button("Download its budget statement (TXT)", note, file_name=f"{stem}_budget.txt",
                                mime="text/plain", key="ss_rel_statement")
        else:
            st.info("Press **Generate synthetic data** to fit on all rows and draw a data set of the same size.")

with tab_export:
    tables = {"strata": overview}
    if result is not None:
        tables.update({"group_metrics": result.group_metrics, "overall_metrics": result.overall_metrics,
                       "strata_fates": result.strata, "ledger": result.ledger})
    extra = {"dataset": name, "preparation_notes": notes, "config_error": config_error,
             "budget_statement": result.budget_statement if result is not None else None,
             "real_baseline": result.real_baseline if result is not None else None}
    export_panel("Stratified synthesis", config, tables, extra=extra, key="ss_export")
