"""Results of learning under elicited pairwise constraints: frontier, binding pairs, group rates."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd
import streamlit as st

from core.cache import config_digest, data_fingerprint
from core.fairness.companion import CompanionConfig, cost_ratio, equal_error_rate_scores
from core.fairness.frontier import (SWEEPS, FrontierConfig, FrontierResult, fpr_gap, is_cached,
                                   trade_off_frontier)
from core.fairness.learner import AVERAGING, ORACLES
from core.fairness.learning_data import compas_learning_data
from dashboard.components.progress import session_memo
from dashboard.figures import fairness as figs

ROUND_CHOICES = (100, 300, 1000, 2000)
ORACLE_LABELS = {"logistic": "weighted logistic regression (scikit-learn)",
                 "ols": "least-squares threshold (fast heuristic)"}


def _settings(key: str) -> FrontierConfig:
    """Learner settings as widgets; returns the frozen sweep configuration."""
    with st.expander("Learner settings", expanded=False):
        c1, c2, c3 = st.columns(3)
        averaging = c1.radio("Averaging of the iterates", list(AVERAGING), index=1,
                             format_func=lambda a: AVERAGING[a], key=f"{key}_averaging")
        rounds = c2.select_slider("Rounds per slack value", ROUND_CHOICES, value=1000,
                                  key=f"{key}_rounds",
                                  help="The paper reports convergence after about 1,000 rounds.")
        oracle = c3.selectbox("Learner (cost-sensitive oracle)", list(ORACLES),
                              format_func=ORACLE_LABELS.get, key=f"{key}_oracle")
        sweep = st.radio("Trade-off traced by", list(SWEEPS), format_func=SWEEPS.get, horizontal=True,
                         key=f"{key}_sweep",
                         help="γ: each elicited pair may differ by at most γ. η: pairs may exceed the "
                              "slack as long as the average excess per judgment stays within η "
                              "(2,000+ rounds recommended).")
        c4, c5, c6 = st.columns(3)
        holdout = c4.slider("Share of pairs held out", 0.0, 0.5, 0.25, 0.05, key=f"{key}_holdout",
                            help="Held-out pairs and 30% held-out individuals estimate how the "
                                 "fairness and the error carry over to people not used in fitting.")
        protected = c5.checkbox("Learner sees race and sex", value=True, key=f"{key}_protected",
                                help="A normative choice the paper leaves open; it is logged in the export.")
        seed = int(c6.number_input("Seed", 0, 10_000, 0, key=f"{key}_seed"))
    return FrontierConfig(sweep=sweep, T=int(rounds), averaging=averaging, oracle=oracle,
                          pair_holdout=float(holdout), individual_holdout=True,
                          use_protected=bool(protected), seed=seed)


def _pick_point(key: str, points: pd.DataFrame, symbol: str) -> pd.Series:
    """Operating-point slider over the frontier's hull points."""
    hull = points[points["on_hull"]].sort_values("unfairness").reset_index(drop=True)
    labels = [f"{symbol}={r.target:g} · unfairness {r.unfairness:.2f} · error {r.error:.3f}"
              for r in hull.itertuples()]
    start = int(np.argmin(np.abs(hull["target"].to_numpy() - 0.3)))   # a middle value by default
    choice = st.select_slider("Operating point on the frontier", labels, value=labels[start],
                              key=f"{key}_point",
                              help="Move right for more accuracy and less fairness to the elicited pairs.")
    return hull.iloc[labels.index(choice)]


def _has_constraints(constraints: pd.DataFrame | None) -> bool:
    """Whether any pair carries positive weight in either orientation."""
    if constraints is None or len(constraints) == 0 or "weight" not in constraints:
        return False
    cols = [c for c in ("weight", "w_ij", "w_ji") if c in constraints]
    return bool((constraints[cols].apply(pd.to_numeric, errors="coerce") > 0).to_numpy().any())


ResultHook = Callable[[FrontierConfig, FrontierResult], "bool | None"]


def render_fairness_results(key: str, constraints: pd.DataFrame, label: str, *,
                            on_result: ResultHook | None = None, run_context: Any = None,
                            run_history: Callable[[], pd.DataFrame] | None = None) -> dict[str, pd.DataFrame]:
    """Frontier, operating point, binding constraints and group rates for a constraint frame.

    Work runs behind a button with a progress bar and is cached on disk; returns the tables
    shown, for the page's export. `on_result(config, result)` is called once per browser session
    for each (constraints, learner settings, `run_context`) when its result is first obtained,
    e.g. to log the run (returning False asks again on the next rerun); `run_history()` gives a
    table of logged runs shown under the results.
    """
    tables = _render_results(key, constraints, label, on_result, run_context)
    if run_history is not None:
        _run_history_table(key, run_history)
    return tables


def _report_once(key: str, digest: str, run_context: Any, on_result: ResultHook | None,
                 config: FrontierConfig, result: FrontierResult) -> None:
    """Hand a result to `on_result` the first time it is seen with this context (not on every rerun)."""
    if on_result is None:
        return
    marker = config_digest({"result": digest, "context": run_context})
    reported = st.session_state.get(f"{key}_reported", set())
    if marker in reported:
        return
    if on_result(config, result) is not False:
        st.session_state[f"{key}_reported"] = reported | {marker}


def _run_history_table(key: str, run_history: Callable[[], pd.DataFrame]) -> None:
    """The logged runs of these results, newest first."""
    st.markdown("#### Run history")
    history = run_history()
    if history is None or history.empty:
        st.caption("No run logged yet: each run of the learner is recorded with the choices behind it.")
        return
    st.caption("Every run of the learner with the aggregation choices and settings behind it "
               "(also in the session export). Superseded runs pooled answers since withdrawn.")
    st.dataframe(history, hide_index=True, key=f"{key}_run_history")


def _render_results(key: str, constraints: pd.DataFrame, label: str, on_result: ResultHook | None,
                    run_context: Any) -> dict[str, pd.DataFrame]:
    """The results proper; see render_fairness_results."""
    st.subheader("Learning under the elicited constraints")
    st.caption(f"Constraints: {label}. Individuals are the 7,214 rows of the bundled COMPAS file; "
               "the label is two-year reoffence and every classifier is a randomised mixture.")
    if not _has_constraints(constraints):
        st.info("No 'treat alike' constraints yet: once stakeholders have answered, the trade-off "
                "between accuracy and their pairwise judgments appears here.")
        return {}
    config = _settings(key)
    n_pairs = len(constraints)
    cols = [c for c in ("weight", "w_ij", "w_ji") if c in constraints]
    n_alike = int((constraints[cols].apply(pd.to_numeric, errors="coerce") > 0).any(axis=1).sum())
    st.caption(f"{n_pairs} elicited pairs, {n_alike} of them with a constraint; slack values swept: "
               + ", ".join(f"{g:g}" for g in config.values) + ".")
    digest = config_digest({"config": config, "constraints": data_fingerprint(
        constraints[[c for c in ("i", "j", "weight", "w_ij", "w_ji", "n_judges", "agreement")
                     if c in constraints]]
        .reset_index(drop=True))})
    memo_key = f"{key}_results"
    clicked = st.button("Run the learner", key=f"{key}_run", type="primary",
                        help="Fits one mixture per slack value; results are cached for these settings.")
    result = None
    if digest in st.session_state.get(memo_key, {}) or clicked or is_cached(constraints, config):
        try:
            result = session_memo(memo_key, digest,
                                  lambda progress: trade_off_frontier(constraints, config, progress=progress),
                                  "Learning under the elicited constraints", limit=6)
        except ValueError as exc:
            st.error(str(exc))
            return {}
    if result is None:
        st.info("Press **Run the learner** to trace the accuracy-fairness frontier "
                f"({len(config.values)} values × {config.T} rounds).")
        return {}
    _report_once(key, digest, run_context, on_result, config, result)

    points = result.points
    base = result.baseline
    best_const = base["best_constant_error"]
    symbol = base["symbol"]
    unconstrained = float(points.loc[points["target"].idxmax(), "error"])
    point = _pick_point(key, points, symbol)
    target = float(point["target"])
    here = f"{symbol}={target:g}"
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Error at this point", f"{point['error']:.3f}",
              delta=f"{point['error'] - unconstrained:+.3f} vs least constrained", delta_color="inverse")
    m2.metric("Held-out error", "n/a" if pd.isna(point["error_heldout"]) else f"{point['error_heldout']:.3f}")
    m3.metric("Realised unfairness", f"{point['unfairness']:.3f}", help=base["unfairness"].capitalize())
    m4.metric("Pairs over their slack", f"{int(point['violated_pairs'])} of {int(point['pairs'])}")
    st.plotly_chart(figs.frontier_figure(points, best_const, target, symbol, base["unfairness"]),
                    key=f"{key}_frontier_chart")
    st.caption(f"Best constant classifier error {best_const:.3f}; least-constrained error "
               f"{unconstrained:.3f}. Averaging: {base['averaging']}. "
               "Every point on the hull is reached by mixing its two neighbouring fits. "
               "Sample a decision per person from the mixture: thresholding its probability "
               "breaks the pairwise guarantee.")
    notes = [n for n in points["notes"] if n]
    if notes:
        st.caption(" ".join(sorted(set(notes))))

    pairs = result.pairs[np.isclose(result.pairs["target"], target)]
    st.markdown("**Binding constraints at this operating point**")
    only = st.checkbox("Show only pairs over their slack", key=f"{key}_only_violated")
    fitted = pairs[(pairs["split"] == "fit") & (pairs["violated"] | (not only))]
    binding = (fitted.sort_values("shadow_price", ascending=False)
               .loc[:, ["i", "j", "weight", "agreement", "p_i", "p_j", "gap", "violated", "shadow_price"]]
               .rename(columns={"shadow_price": "error cost per unit of slack"}))
    st.caption("Error cost per unit of slack is the pair's averaged multiplier: how much error the "
               "learner would save if this pair's slack were loosened by one unit (a shadow price). "
               "Pairs are ordered by it; violated means the gap exceeds the slack by more than 0.02.")
    st.dataframe(binding.head(25), hide_index=True, key=f"{key}_binding")
    held = pairs[pairs["split"] == "held-out"]
    if len(held):
        st.caption(f"Held-out pairs: largest gap {point['heldout_realized_gamma']:.3f}, "
                   f"{int(held['violated'].sum())} of {len(held)} over the slack "
                   "(pairs not used in fitting; the paper reports in-sample figures only). "
                   "Neither figure says how a different panel of stakeholders would judge.")

    groups = result.groups[np.isclose(result.groups["target"], target)]
    st.plotly_chart(figs.group_rates_figure(groups, f"Error rates by group at {here} (95% intervals)"),
                    key=f"{key}_groups_chart")
    st.caption("Rates of the randomised classifier on all 7,214 individuals; groups with few people "
               "(Asian, Native American) have wide intervals and should not be read as gaps.")
    gap = fpr_gap(result.groups)
    if not gap.empty:
        st.plotly_chart(figs.fpr_gap_figure(gap, points, symbol,
                                            "False positive rate gap, African-American minus Caucasian"),
                        key=f"{key}_gap_chart")
        st.caption("Does fairness to the elicited pairs go with a smaller gap in false positive rates "
                   "between the two largest groups? (The paper's Fig. 2e asks this across subjects.)")
    with st.expander("Convergence of the learner", expanded=False):
        st.plotly_chart(figs.trajectory_figure(result.trajectories, symbol), key=f"{key}_traj_chart")
    scores = result.p_hat[int(np.flatnonzero(np.isclose(points["target"], target))[0])]
    companion = _companion(key, scores, here, config.seed)
    settings = pd.DataFrame({"setting": list(base["config"]) + ["averaging used", "constraints"],
                             "value": [str(v) for v in base["config"].values()]
                             + [base["averaging"], label]})
    return {"fairness_learner_settings": settings,
            "fairness_frontier": points, "fairness_pairs": pairs.reset_index(drop=True),
            "fairness_groups": groups.reset_index(drop=True), "fairness_fpr_gap": gap,
            "fairness_trajectories": result.trajectories, **companion}


GROUP_PAIRS = {"race": ("African-American", "Caucasian"), "sex": ("Male", "Female")}


def _companion(key: str, scores: np.ndarray, here: str, seed: int) -> dict[str, pd.DataFrame]:
    """Reich and Vijaykumar panel: calibrated scores whose decisions have equal error rates."""
    st.markdown("#### Companion: calibrated scores with equal error rates")
    st.caption(f"Post-processes the learned scores at {here} (Reich and Vijaykumar, FORC 2021): "
               "scores stay calibrated within each group while the decision 'score ≥ cut-off' "
               "(flagged high risk = predicted to reoffend) has the same false and true positive "
               "rates in both groups.")
    c1, c2, c3 = st.columns(3)
    attribute = c1.selectbox("Groups compared", list(GROUP_PAIRS), key=f"{key}_rv_attribute",
                             format_func=lambda a: " vs ".join(GROUP_PAIRS[a]))
    cutoff = c2.slider("Cut-off for flagging high risk", 0.05, 0.95, 0.5, 0.01, key=f"{key}_rv_cutoff",
                       help="A cut-off c is optimal when a false positive costs c/(1−c) false negatives.")
    bins = int(c3.slider("Score bins", 2, 20, 10, key=f"{key}_rv_bins"))
    data = compas_learning_data(seed=seed)
    try:
        res = equal_error_rate_scores(scores, data.y, data.groups,
                                      CompanionConfig(cutoff=cutoff, bins=bins, attribute=attribute,
                                                      groups=GROUP_PAIRS[attribute], seed=seed))
    except ValueError as exc:
        st.error(str(exc))
        return {}
    k = cost_ratio(cutoff)
    if res.feasible and res.nonconstant:
        st.success(f"Feasible: both groups can share FPR {res.target['fpr']:.3f} and TPR "
                   f"{res.target['tpr']:.3f} with calibrated scores (a false positive costs {k:.2f}).")
    elif res.feasible:
        st.warning("Only a constant decision (flag nobody or everybody) has equal error rates with "
                   "calibrated scores at this cut-off.")
    else:
        st.warning(res.message)
    if res.message and res.feasible:
        st.caption(res.message)
    c5 = res.corollary5
    st.caption("Corollary 5 check: " + (f"trivially feasible ({c5['trivial']})" if c5.get("trivial")
               else c5["note"] or f"both ROC curves must pass above ({c5['a1']:.3f}, {c5['a2']:.3f}): "
               + ("yes" if c5.get("both_above") else "no")))
    left, right = st.columns(2)
    left.plotly_chart(figs.roc_figure(res.roc, res.target, cutoff), key=f"{key}_rv_roc")
    right.plotly_chart(figs.calibration_figure(res.calibration), key=f"{key}_rv_calibration")
    st.dataframe(res.rates.round(4), hide_index=True, key=f"{key}_rv_rates")
    st.caption("Each person's post-processed score is drawn from their score bin's row of the "
               "transport kernel (a randomised, mean-preserving contraction); rates in the table are "
               "expected values, the right-hand chart shows one draw (simulation, not a release).")
    return {"companion_rates": res.rates, "companion_calibration": res.calibration}
