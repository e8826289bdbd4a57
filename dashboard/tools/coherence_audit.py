"""Coherence audit: do predictors built from a release treat people in the data differently from similar people not in it?"""
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
from core.coherence import theory  # noqa: E402
from core.coherence.adversaries import ADVERSARIES  # noqa: E402
from core.coherence.audit import AuditConfig, Range, coherence_curve, epsilon_sweep, run_audit  # noqa: E402
from core.coherence.releases import MAX_DOMAIN, NEIGHBOURS, RELEASES  # noqa: E402
from dashboard.components.dataset_picker import pick_microdata  # noqa: E402
from dashboard.components.export import export_panel  # noqa: E402
from dashboard.components.progress import session_memo  # noqa: E402
from dashboard.figures import coherence as figs  # noqa: E402

SIM = "Simulation, not a release: every split and every release on this page is a seeded draw for auditing."
DEFAULT_LENS = {"cps": ["age_band", "education", "marital", "race", "sex"],
                "adult": ["education", "marital_status", "race", "sex", "relationship"]}
DEFAULT_GROUPS = ["race", "sex"]
CAVEATS = """**What a verdict means.**
- **FAIL**: with 95% confidence, more than beta of the runs let at least one tested adversary score the
  released half of some subgroup differently (W1 > alpha) from the held-out half. That is evidence the
  release does not enforce (alpha, beta)-coherence here.
- **PASS** covers *only the adversaries tested*, this data set and these subgroups: it is not a certificate.
  Certificates come only from the theory panel, for differentially private releases.
- Coherence is necessary for privacy, not sufficient: a single leaked record (singling out) is usually
  invisible to it, and accuracy is deliberately not measured.
- The audit runs each release on half of the data, as the definition does; a mechanism whose noise does not
  shrink with n is relatively noisier here than on the full file.
"""



def _usable_columns(df: pd.DataFrame) -> list[str]:
    """Columns with no missing values and at most MAX_DOMAIN distinct values."""
    return [c for c in df.columns if not df[c].isna().any() and df[c].nunique() <= MAX_DOMAIN]


def _release_params(key: str, lens: list[str], columns: list[str], groups: list[str]) -> tuple:
    """Widgets for one release's parameters; returns ((name, value), ...)."""
    spec = RELEASES[key]
    out = []
    for name, default in spec.defaults.items():
        wkey = f"coh_param_{key}_{name}"
        if name == "epsilon":
            out.append((name, float(st.number_input(f"epsilon ({spec.label})", 0.001, 100.0, float(default),
                                                    format="%.3f", key=wkey))))
        elif name == "k":
            label = "records published" if key == "clear_sample" else "minimum cell size k"
            out.append((name, int(st.number_input(f"{label} ({spec.label})", 1, 100_000, int(default), key=wkey))))
        elif name == "generalise":
            out.append((name, tuple(st.multiselect(f"lens columns generalised away ({spec.label})", lens,
                                                   default=[], key=wkey))))
        elif name == "neighbour":
            out.append((name, st.radio(f"neighbours the noise is calibrated for ({spec.label})", list(NEIGHBOURS),
                                       format_func=NEIGHBOURS.get, key=wkey, horizontal=True,
                                       help="Add/remove halves the noise; the theory then reads the budget as "
                                            "2 epsilon (pure DP) or 4 rho (zCDP) under replace-one.")))
        elif name == "strata":
            dflt = [g for g in groups[:1] if g in columns]
            out.append((name, tuple(st.multiselect(f"strata columns, public sizes ({spec.label})", columns,
                                                   default=dflt, key=wkey))))
    return tuple(out)


MAX_CUSTOM = 3
SLIDER_MIN_VALUES = 20   # numeric columns with more distinct values get a range slider


def _custom_subgroups(frame: pd.DataFrame) -> tuple:
    """Up to MAX_CUSTOM named subgroups, each an AND of per-column conditions (values or a range)."""
    n = int(st.number_input("Custom subgroups (conditions on any column, combined with AND)", 0, MAX_CUSTOM, 0,
                            key="coh_n_custom", help="For example women aged 65 or over with no degree. "
                            "Each must still have at least gamma members to be audited."))
    out = []
    for i in range(n):
        c1, c2 = st.columns([1, 3])
        name = c1.text_input(f"Name of custom subgroup {i + 1}", key=f"coh_custom_name_{i}",
                             placeholder="spelled out if empty").strip()
        cols = c2.multiselect(f"Columns of custom subgroup {i + 1}", list(frame.columns), key=f"coh_custom_cols_{i}")
        conds = []
        places = st.columns(len(cols)) if cols else []
        for where, col in zip(places, cols):
            values = frame[col].dropna()
            if pd.api.types.is_numeric_dtype(values) and values.nunique() > SLIDER_MIN_VALUES:
                lo, hi = float(values.min()), float(values.max())
                low, high = where.slider(f"{col} between (subgroup {i + 1})", lo, hi, (lo, hi), key=f"coh_custom_{i}_{col}")
                conds.append((col, Range(low, high)))
            else:
                options = [str(v) for v in pd.unique(values.sort_values())]
                chosen = where.multiselect(f"{col} is one of (subgroup {i + 1})", options, key=f"coh_custom_{i}_{col}")
                conds.append((col, tuple(chosen)))
        undecided = [col for col, cond in conds if not isinstance(cond, Range) and not cond]
        if conds and not undecided:
            out.append((name, tuple(conds)))
        elif cols:
            st.caption(f"Custom subgroup {i + 1} is left out until it has values for: {', '.join(undecided)}.")
    return tuple(out)


st.title("Coherence audit")
st.caption("Would predictors built from this release score the people in it differently from similar people "
           "who are not, in any subgroup? Verdicts with their uncertainty, next to what theory guarantees.")
st.caption(SIM)

picked = pick_microdata("coh")
if picked is None:
    st.stop()
data_name, full = picked
slug = "cps" if "CPS" in data_name else ("adult" if "Adult" in data_name else "upload")
usable = _usable_columns(full)
if len(usable) < 2:
    st.error("This file needs at least two columns with at most "
             f"{MAX_DOMAIN} distinct values and no missing values; bin numeric columns first.")
    st.stop()

with st.expander("Data, target, lens and subgroups", expanded=True):
    c1, c2, c3 = st.columns(3)
    n_rows = int(c1.number_input("Rows audited (random sample of the file)", 200, len(full),
                                 min(10_000, len(full)), step=1000, key="coh_rows"))
    seed = int(c2.number_input("Seed", 0, 2**31 - 1, 0, key="coh_seed"))
    binaryish = [c for c in usable if full[c].nunique() >= 2]
    t_default = "income" if "income" in binaryish else binaryish[-1]
    target = c3.selectbox("Target attribute (what the adversary predicts)", binaryish,
                          index=binaryish.index(t_default), key="coh_target")
    values = [str(v) for v in full[target].astype("category").cat.categories]
    positive = c3.selectbox("Positive value (one-vs-rest)", values, index=len(values) - 1, key="coh_positive")
    others = [c for c in usable if c != target]
    lens_default = [c for c in DEFAULT_LENS.get(slug, others[:4]) if c in others] or others[:4]
    lens = st.multiselect("Lens: columns the predictor sees about a person", others, default=lens_default,
                          key="coh_lens")
    g1, g2 = st.columns([3, 1])
    group_default = [c for c in DEFAULT_GROUPS if c in usable] or usable[:1]
    group_cols = g1.multiselect("Subgroup columns (levels and intersections; membership uses full records)",
                                usable, default=group_default, key="coh_groups")
    order = int(g2.selectbox("Intersections up to order", [1, 2, 3], index=1, key="coh_order"))
    custom = _custom_subgroups(full)

with st.expander("Coherence parameters", expanded=True):
    p1, p2, p3, p4, p5, p6 = st.columns(6)
    alpha = float(p1.number_input("alpha (max W1)", 0.01, 2.0, 0.4, 0.01, key="coh_alpha",
                                 help="The spec default 0.1 lies below the sampling noise floor of groups near "
                                 "gamma = 80 at 10,000 rows; 0.4 separates a leaky release from a private one."))
    beta = float(p2.number_input("beta (max failure rate)", 0.001, 0.5, 0.05, 0.01, format="%.3f", key="coh_beta"))
    gamma = int(p3.number_input("gamma (min subgroup size)", 1, 1_000_000, 80, key="coh_gamma"))
    trials = int(p4.number_input("trials", 1, 2000, 60, key="coh_trials",
                                 help="At 95% confidence a PASS at beta = 0.05 needs at least 59 trials."))
    n_null = int(p5.number_input("null splits per trial", 1, 10, 1, key="coh_null_splits",
                                 help="Extra independent splits scored by the same predictors: a steadier noise "
                                      "floor for little extra time (the rate pools them; intervals use the first)."))
    constants = p6.selectbox("Theory constants", ["conservative", "paper"], key="coh_constants",
                             format_func=lambda m: "conservative (repaired)" if m == "conservative"
                             else "as printed (unproven)")

with st.expander("Releases and adversaries", expanded=True):
    rel_keys = st.multiselect("Release algorithms to compare", list(RELEASES), default=["clear_half", "laplace_table"],
                              format_func=lambda k: RELEASES[k].label, key="coh_releases")
    rel_specs = []
    if rel_keys:
        cols = st.columns(min(len(rel_keys), 3))
        for i, key in enumerate(rel_keys):
            with cols[i % len(cols)]:
                rel_specs.append((key, _release_params(key, lens, usable, group_cols)))
    adv_keys = st.multiselect("Adversaries", list(ADVERSARIES), default=["logistic", "naive_bayes", "nearest_neighbour"],
                              format_func=lambda k: ADVERSARIES[k].label, key="coh_adversaries")

config = AuditConfig(target=target, positive=positive, lens=tuple(lens), subgroup_columns=tuple(group_cols),
                     releases=tuple(rel_specs), adversaries=tuple(adv_keys), subgroup_order=order, alpha=alpha,
                     beta=beta, gamma=gamma, trials=trials, seed=seed, constants=constants,
                     n_null_splits=n_null, custom_subgroups=custom)


@st.cache_data(max_entries=4, show_spinner=False)
def _sample(frame: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    return frame.sample(n, random_state=seed).reset_index(drop=True) if n < len(frame) else frame.reset_index(drop=True)


data = _sample(full, n_rows, seed)
digest = config_digest({"config": config, "data": data_fingerprint(data)})
run = st.button("Run audit", type="primary", key="coh_run", icon=":material/play_arrow:")
result = None
if run:
    try:
        result = session_memo("coh_results", digest, lambda pr: run_audit(config, data, progress=pr),
                       "Running the audit")
        st.session_state["coh_last"] = digest
    except ValueError as err:
        st.error(str(err))
elif st.session_state.get("coh_last") in st.session_state.get("coh_results", {}):
    last = st.session_state["coh_last"]
    result = st.session_state["coh_results"][last]
    if last != digest:
        st.warning("The settings changed since this audit ran; the results below are for the earlier settings. "
                   "Press Run audit to update.")

st.info(CAVEATS)
st.caption("New release algorithms and adversaries are one class each in core.coherence (releases.py, "
           "adversaries.py); the page lists every registered one. Code is never uploaded through the page.")

if result is None:
    st.info(f"Set up the audit above and press **Run audit** ({len(data):,} rows, {trials} trials, "
            f"{len(rel_specs)} release(s) x {len(adv_keys)} adversary(ies)).")
else:
    s = result.settings
    st.subheader("Verdicts")
    st.caption(f"n = {s['n']:,} rows, releases see n/2 = {s['n_half']:,}; {s['trials']} trials with "
               f"{s['n_null_splits']} null split(s) each; "
               f"{s['n_eligible']} of {s['n_subgroups']} subgroups have at least gamma = {s['gamma']} members; "
               f"alpha = {s['alpha']:g}, beta = {s['beta']:g}. Runtime {result.runtime_s:.1f} s.")
    rels = result.releases
    per_row = 3
    for start in range(0, len(rels), per_row):
        cols = st.columns(per_row)
        for col, (_, row) in zip(cols, rels.iloc[start:start + per_row].iterrows()):
            with col.container(border=True):
                summ = result.summary[result.summary["release"] == row["release"]]
                worst = summ.sort_values("beta_hat", ascending=False).iloc[0]
                colour = figs.VERDICT_COLOURS[row["verdict"]]
                st.markdown(f"**{row['release']}**")
                st.metric(f"Verdict: {row['release']}", row["verdict"], label_visibility="collapsed")
                if row["verdict"] == "PASS":
                    st.caption("for the tested adversaries only")
                st.markdown(f"<span style='color:{colour};font-weight:600'>worst adversary: {worst['adversary']}, "
                            f"failure rate {worst['beta_hat']:.2f} (one-sided 95% bounds {worst['ci_low']:.2f}"
                            f"-{worst['ci_high']:.2f}); null {worst['null_beta_hat']:.2f}</span>",
                            unsafe_allow_html=True)
                st.caption(f"Privacy: {row['privacy_statement']}")
                if pd.notna(row["theory_gamma"]):
                    st.caption(f"Theory ({row['theory_basis']}): subgroups of at least {row['theory_gamma']:,.0f} "
                               f"are certified at this (alpha, beta); {row['certified_subgroups']} of "
                               f"{row['eligible_subgroups']} eligible subgroups qualify.")
                else:
                    st.caption(f"Theory: {row['theory_note']}")
                for _, r in summ.iterrows():
                    if r["verdict"] == "INCONCLUSIVE" and pd.notna(r["trials_needed"]):
                        st.caption(f"{r['adversary']}: about {int(r['trials_needed'])} trials would decide "
                                   "at the same failure rate.")
                    if r["warnings"]:
                        st.warning(f"{r['adversary']}: {r['warnings']}")

    st.markdown("**Per adversary** (FAIL uses Bonferroni-corrected lower bounds across adversaries)")
    show = result.summary[["release", "adversary", "verdict", "beta_hat", "ci_low", "ci_high", "null_beta_hat",
                           "alpha_hat", "alpha_hat_null", "excess_median", "sign_test_p", "trials_needed"]]
    st.dataframe(show, hide_index=True, width="stretch")

    adv_names = list(dict.fromkeys(result.summary["adversary"]))
    rel_names = list(rels["release"])
    worst_adv = result.summary.sort_values(["beta_hat", "alpha_hat"], ascending=False)["adversary"].iloc[0]
    tab_heat, tab_hist, tab_curve, tab_size, tab_excl = st.tabs(
        ["Subgroup heat map", "Score histograms", "Failure rate against alpha", "Size against incoherence",
         "Excluded subgroups"])
    with tab_heat:
        heat_adv = st.selectbox("Adversary", adv_names, index=adv_names.index(worst_adv), key="coh_heat_adv")
        st.plotly_chart(figs.distance_heatmap(result.subgroups, heat_adv, s["alpha"]), key="coh_heat_chart")
        st.caption("Cells: median W1 over trials between the released and held-out halves of each subgroup, with "
                   "the 5-95% range of trials in brackets; subgroups with the worst (1 - beta) quantile on top. "
                   "Hover for that quantile and the null's.")
        table = result.subgroups[result.subgroups["adversary"] == heat_adv].sort_values("q_w1", ascending=False)
        st.dataframe(table, hide_index=True, width="stretch")
    with tab_hist:
        h1, h2, h3 = st.columns(3)
        hist_group = h1.selectbox("Subgroup", list(result.subgroup_masks), key="coh_hist_group")
        hist_rel = h2.selectbox("Release", rel_names, key="coh_hist_release")
        hist_adv = h3.selectbox("Adversary", adv_names, index=adv_names.index(worst_adv), key="coh_hist_adv")
        mask = result.subgroup_masks[hist_group]
        scores = result.example_scores[(hist_rel, hist_adv)]
        st.plotly_chart(figs.score_histograms(scores[mask], result.example_half[mask], hist_group,
                                              f"{hist_rel} / {hist_adv}"), key="coh_hist_chart")
        st.caption("The two mounds of scores of the first trial: the half whose records fed the release against "
                   "the held-out half. W1 is the work needed to move one mound onto the other.")
    with tab_curve:
        curve_rel = st.selectbox("Release", rel_names, key="coh_curve_release")
        curve = coherence_curve(result.maxima[result.maxima["release"] == curve_rel])
        st.plotly_chart(figs.coherence_curve_figure(curve, curve_rel, s["alpha"], s["beta"]), key="coh_curve_chart")
        st.caption("Solid: share of trials in which some eligible subgroup exceeds alpha, with its one-sided 95% "
                   "band; dotted: the same predictors on an independent split (the noise floor).")
    with tab_size:
        size_adv = st.selectbox("Adversary", adv_names, index=adv_names.index(worst_adv), key="coh_size_adv")
        st.plotly_chart(figs.size_scatter(result.subgroups, size_adv, s["alpha"]), key="coh_size_chart")
    with tab_excl:
        if result.excluded.empty:
            st.write("Every subgroup has at least gamma members.")
        else:
            st.write(f"{len(result.excluded)} subgroups have fewer than gamma = {s['gamma']} members and are not checked "
                     "(sampling alone would make them look incoherent).")
            st.dataframe(result.excluded, hide_index=True, width="stretch")

    st.subheader("Export")
    export_panel("Coherence audit", {"config": config, "data": data_name, "rows": len(data)},
                 {"summary": result.summary, "releases": result.releases, "subgroups": result.subgroups,
                  "maxima": result.maxima, "trials": result.trials, "excluded": result.excluded},
                 extra={"settings": result.settings, "runtime_s": result.runtime_s,
                        "data_fingerprint": data_fingerprint(data)}, key="coh_export")

st.subheader("Incoherence against epsilon")
st.caption("One differentially private release audited at several epsilons on the same splits, next to the "
           "alpha that theory certifies for subgroups of the smallest, median and largest eligible size.")
dp_keys = [k for k, v in RELEASES.items() if v.dp]
e1, e2, e3 = st.columns([2, 2, 1])
sweep_key = e1.selectbox("DP release", dp_keys, format_func=lambda k: RELEASES[k].label, key="coh_sweep_release")
sweep_eps = e2.multiselect("epsilons", [0.001, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0],
                           default=[0.01, 0.1, 1.0, 10.0], key="coh_sweep_eps")
sweep_trials = int(e3.number_input("trials", 1, 1000, 20, key="coh_sweep_trials"))
# the release's other parameters as set above when it is among the compared releases, else its defaults
chosen = dict(rel_specs).get(sweep_key, tuple(RELEASES[sweep_key].defaults.items()))
sweep_params = tuple((k, v) for k, v in chosen if k != "epsilon")
if sweep_key not in dict(rel_specs) and "strata" in dict(sweep_params):
    strata = st.multiselect("strata columns for the sweep (public sizes)", usable,
                            default=[g for g in group_cols[:1] if g in usable] or usable[:1], key="coh_sweep_strata")
    sweep_params = tuple((k, tuple(strata) if k == "strata" else v) for k, v in sweep_params)
elif sweep_key in dict(rel_specs):
    st.caption("The sweep uses this release's settings from 'Releases and adversaries' (epsilon aside).")
if st.button("Run epsilon sweep", key="coh_sweep_run", icon=":material/show_chart:"):
    sweep_cfg = AuditConfig(**{**config.__dict__, "trials": sweep_trials, "releases": ()})
    sweep_digest = config_digest({"sweep": sweep_cfg, "key": sweep_key, "eps": sorted(sweep_eps),
                                  "params": sweep_params, "data": data_fingerprint(data)})
    try:
        st.session_state["coh_sweep"] = session_memo(
            "coh_sweeps", sweep_digest,
            lambda pr: epsilon_sweep(sweep_cfg, data, sweep_key, sweep_eps, sweep_params, progress=pr),
            "Sweeping epsilon")
    except ValueError as err:
        st.error(str(err))
if "coh_sweep" in st.session_state:
    sweep_res, sweep_theory = st.session_state["coh_sweep"]
    st.plotly_chart(figs.epsilon_figure(sweep_res.summary, sweep_res.releases, sweep_theory, sweep_res.settings["beta"]),
                    key="coh_sweep_chart")
    st.dataframe(sweep_res.summary[["release", "adversary", "verdict", "alpha_hat", "alpha_hat_null", "beta_hat"]],
                 hide_index=True, width="stretch")
    if sweep_theory["certified_alpha"].isna().all():
        st.caption("Theory certifies nothing at these sizes and epsilons (the black-box conversion is very "
                   "demanding); try smaller epsilons or larger subgroups.")

st.subheader("Theory calculator")
st.caption("The subgroup size gamma that guarantees (alpha, beta)-coherence for every adversary, and back again. "
           "Conservative constants evaluate the paper's formulas at alpha/2, repairing a factor-2 slip in its "
           "Claim 2; 'as printed' reproduces the paper's numbers, which are unproven.")
k1, k2, k3, k4 = st.columns(4)
mech = k1.selectbox("Guarantee", ["pure DP (Thm 7)", "approximate DP (Thm 8)", "max-information zeta (Thm 6)",
                                  "k records in the clear (derived)"], key="coh_th_mech")
th_eps = float(k2.number_input("epsilon", 1e-5, 1.0, 0.01, format="%.5f", key="coh_th_eps"))
th_delta = float(k3.number_input("delta", 0.0, 1e-3, 0.0, format="%.3e", key="coh_th_delta"))
th_zeta = float(k4.number_input("zeta (nats) / k records", 0.0, 1e7, 10.0, key="coh_th_zeta"))
k5, k6, k7, k8 = st.columns(4)
th_n = int(k5.number_input("n (audit view |X|; production view 2N)", 100, 10**10, 200_000, key="coh_th_n"))
th_alpha = float(k6.number_input("alpha", 0.01, 2.0, 0.5, key="coh_th_alpha"))
th_beta = float(k7.number_input("beta", 0.001, 0.5, 0.05, format="%.3f", key="coh_th_beta"))
th_groups = int(k8.number_input("number of subgroups |C|", 1, 10**6, 10, key="coh_th_groups"))
th_size = int(st.number_input("subgroup size to certify (for the inverse)", 1, 10**10, 10_000, key="coh_th_size"))


def _gamma(mode: str, a: float = th_alpha, e: float = th_eps) -> theory.TheoryResult:
    if mech.startswith("pure"):
        return theory.gamma_pure_dp(e, th_n, a, th_beta, th_groups, constants=mode)
    if mech.startswith("approximate"):
        return theory.gamma_approx_dp(e, th_delta, th_n, a, th_beta, th_groups, constants=mode)
    if mech.startswith("max-information"):
        return theory.gamma_from_zeta(th_zeta, a, th_beta, th_groups, constants=mode)
    k = max(1, int(th_zeta))
    z = theory.zeta_description_length(theory.log_binomial(th_n // 2, min(k, th_n // 2)), th_beta, th_groups)
    return theory.gamma_from_zeta(z, a, th_beta, th_groups, constants=mode)


m_cols = st.columns(4)
calc_rows = []
for i, mode in enumerate(theory.CONSTANTS):
    res = _gamma(mode)
    label = "gamma, conservative" if mode == "conservative" else "gamma, as printed"
    m_cols[i].metric(label, "outside theorem" if res.gamma is None else f"{res.gamma:,.1f}",
                     help=res.reason or f"binding: {res.binding}; zeta = {res.zeta:.4g}")
    ca = theory.certified_alpha(th_size, lambda a, mode=mode: _gamma(mode, a=a), mode)
    # an epsilon bound only means something for the DP guarantees; zeta and k records have none
    me = theory.max_epsilon(th_size, th_n, th_alpha, th_beta, th_groups, constants=mode,
                            mechanism="approx_dp" if mech.startswith("approximate") else "pure_dp") \
        if mech.startswith(("pure", "approximate")) else None
    calc_rows.append({"constants": mode, "gamma": res.gamma, "binding": res.binding, "zeta": res.zeta,
                      "note": res.reason, "certified_alpha_at_size": ca, "max_epsilon_at_size": me})
m_cols[2].metric("certified alpha at that size", "vacuous" if calc_rows[0]["certified_alpha_at_size"] is None
                 else f"{calc_rows[0]['certified_alpha_at_size']:.4f}", help="conservative constants")
m_cols[3].metric("largest epsilon at that size",
                 "not a DP guarantee" if not mech.startswith(("pure", "approximate"))
                 else "none" if calc_rows[0]["max_epsilon_at_size"] is None
                 else f"{calc_rows[0]['max_epsilon_at_size']:.5f}",
                 help="conservative constants; Thm 8 (delta at or below its cap) for approximate DP, else Thm 7")
st.dataframe(pd.DataFrame(calc_rows), hide_index=True, width="stretch")
if mech.startswith(("pure", "approximate")):
    grid = np.geomspace(1e-4, 0.5 if mech.startswith("approximate") else 1.0, 40)
    rows = [{"epsilon": e, "constants": mode, "gamma": _gamma(mode, e=float(e)).gamma}
            for e in grid for mode in theory.CONSTANTS]
    gdf = pd.DataFrame(rows).dropna()
    sizes = result.subgroups["size"].unique() if result is not None else np.array([th_size])
    if not gdf.empty:
        st.plotly_chart(figs.gamma_figure(gdf, sizes), key="coh_th_chart")
    if mech.startswith("approximate"):
        st.caption(f"Thm 8 admits delta up to {theory.delta_cap(th_eps, th_n, th_beta, th_groups):.3g} at these "
                   "settings; deployed systems rarely meet it.")
