"""Results of learning under elicited pairwise constraints: frontier, binding pairs, group rates, companion.

The component turns its widgets into a ``core.fairness.LearningPlan`` (the constraint table it is
given, the population, the sweep settings and the companion settings), calls
``core.fairness.run_learning`` once and draws the result. The sweep is the slow part: behind the
button it runs as a background job of the session (``core.jobs``: its own process, listed in the
sidebar, with Cancel; a page left meanwhile attaches to it again), is kept per session and on disk
(keyed on the sweep settings and the constraint table), and is shown at once when already computed;
the companion settings then
post-process that same result (``LearningResult.with_companion``), so the learner never runs twice.
The figures at the operating point are the result's ``headline()``. For a session whose cards
showed a private synthetic copy, the plan of that copy travels with the constraint table and the
copy itself (fetched by the page) is the run's data: its people join the fit as zero-cost
constraint people, and the results say so.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd
import streamlit as st

from core.cache import config_digest
from core.contracts import Cancelled
from core.datasets import COMPAS_POPULATIONS
from core.fairness import CompanionPlan, ConstraintTable, FrontierPlan, LearningPlan, run_learning
from core.fairness.companion import (PARITY, PENALTY_MENU, CompanionResult, cost_ratio, default_penalty, penalties,
                                     penalty_and_parity)
from core.fairness.frontier import FrontierResult, fpr_gap
from core.fairness.learning_plan import frontier_ready
from core.fairness.learning_plan import LearningResult
from core.fairness.private_pairs import SAMPLING_NOTE, PrivatePairsPlan, SyntheticPeople
from core.jobs import run_key
from dashboard.components.chart_table import chart_numbers
from dashboard.components.params_form import check_shown, field_widget, plan_widget_values
from dashboard.components.progress import attached_job, remember, run_with_progress
from dashboard.components.report_panel import report_panel, saved_report_loader
from dashboard.components.run_estimate import run_estimate_notice
from core.figures import fairness as figs

KEEP = "session"
PAGE = "fairness_learning"
LEARNING = "Learning under the elicited constraints"
"""The label of the learner's background job (bar and sidebar)."""
KEPT_RUNS = 6
"""Learner results kept in a browser session (oldest out)."""
GROUP_PAIRS = {"race": ("African-American", "Caucasian"), "sex": ("Male", "Female")}

PAIR_LABELS = {"i": "person i (COMPAS row)", "j": "person j (COMPAS row)",
               "weight": "weight 'treat alike' (0 to 1)", "agreement": "judges' agreement (share)",
               "p_i": "P(flagged) for i (probability)", "p_j": "P(flagged) for j (probability)",
               "gap": "gap P(i) − P(j)", "violated": "over its slack",
               "shadow_price": "error cost per unit of slack"}
RATE_LABELS = {"group": "group", "stage": "scores", "base_rate": "reoffence rate", "fpr": "false positive rate",
               "tpr": "true positive rate", "ppv": "positive predictive value",
               "npv": "negative predictive value", "mse_to_calibrated": "mean squared change of score",
               "loss": "decision-maker's loss per person"}
RUN_LABELS = {"when (UTC)": "When (UTC)", "status": "Status", "constraint set": "Constraint set (hash)",
              "pairs": "Pairs pooled (count)", "weighting": "Weighting",
              "min support": "Minimum support (share of judges)", "stakeholders": "Stakeholders pooled",
              "sweep": "Sweep", "rounds": "Rounds (T)", "oracle": "Oracle", "averaging": "Averaging",
              "pairs held out": "Pairs held out (share)", "race and sex used": "Race and sex used",
              "seed": "Seed", "least-constrained error": "Least-constrained error (share misclassified)",
              "fairest hull point": "Fairest hull point (unfairness, error)", "code": "Code version",
              "note": "Note"}

#: Column names of the binding-pairs table when the pairs name people of a synthetic copy.
SYNTHETIC_PAIR_LABELS = {**PAIR_LABELS, "i": "person i (synthetic person number)",
                         "j": "person j (synthetic person number)"}

ResultHook = Callable[[FrontierPlan, FrontierResult], "bool | None"]


def _settings(key: str) -> FrontierPlan:
    """Learner settings as widgets drawn from the sweep plan's declared fields (keys ``<key>_<field>``);
    returns the frozen sweep plan."""
    def draw(name: str, container=st):
        return field_widget(FrontierPlan, name, key, container=container, persist_state=KEEP)

    with st.expander("Learner settings", expanded=False):
        values = {"population": draw("population")}
        c1, c2, c3 = st.columns(3)
        values.update(averaging=draw("averaging", c1), T=draw("T", c2), oracle=draw("oracle", c3),
                      sweep=draw("sweep"))
        c4, c5, c6 = st.columns(3)
        values.update(pair_holdout=draw("pair_holdout", c4), use_protected=draw("use_protected", c5),
                      seed=draw("seed", c6))
    return FrontierPlan(**values, individual_holdout=True)


def companion_widget_values(key: str, plan: CompanionPlan,
                            pairs: dict[str, tuple[str, str]] = GROUP_PAIRS) -> dict[str, Any]:
    """Widget values that redraw ``plan`` in :func:`companion_settings` (ValueError when its groups or
    settings are not among those the panel offers)."""
    if set(pairs.get(plan.attribute, ())) != set(plan.groups):
        attribute = next((a for a, g in pairs.items() if set(g) == set(plan.groups)), None)
        if attribute is None:
            raise ValueError(f"This page compares {list(pairs.values())}; the report compared {plan.groups}.")
        plan = plan.replace(attribute=attribute)
    check_shown(plan)
    penalty, parity = penalty_and_parity(plan)
    if penalty not in PENALTY_MENU:
        raise ValueError(f"This page offers a disparity penalty of {list(PENALTY_MENU)}; the report used {penalty:g}.")
    prefix = f"{key}_rv"
    return {**plan_widget_values(plan, prefix), f"{prefix}_penalty": penalty, f"{prefix}_parity": parity}


def plan_widgets(key: str, plan: LearningPlan) -> dict[str, Any]:
    """Widget values that rebuild a saved plan's learner and companion settings: the declared fields of
    its sweep and companion plans (ValueError names a setting this page cannot show)."""
    check_shown(plan.frontier)
    values = plan_widget_values(plan.frontier, key)
    if plan.companion is not None:
        values.update(companion_widget_values(key, plan.companion))
    return values


def _pick_point(key: str, points: pd.DataFrame, symbol: str) -> pd.Series:
    """Operating-point slider over the frontier's hull points."""
    hull = points[points["on_hull"]].sort_values("unfairness").reset_index(drop=True)
    labels = [f"{symbol}={r.target:g} · unfairness {r.unfairness:.2f} · error {r.error:.3f}"
              for r in hull.itertuples()]
    start = int(np.argmin(np.abs(hull["target"].to_numpy() - 0.3)))   # a middle value by default
    if st.session_state.get(f"{key}_point") not in labels:
        st.session_state.pop(f"{key}_point", None)                    # another sweep: its own points
    choice = st.select_slider("Operating point on the frontier", labels, value=labels[start],
                              key=f"{key}_point", persist_state=KEEP,
                              help="Move right for more accuracy and less fairness to the elicited pairs.")
    return hull.iloc[labels.index(choice)]


def _has_constraints(constraints: pd.DataFrame | None) -> bool:
    """Whether any pair carries positive weight in either orientation."""
    if constraints is None or len(constraints) == 0 or "weight" not in constraints:
        return False
    cols = [c for c in ("weight", "w_ij", "w_ji") if c in constraints]
    return bool((constraints[cols].apply(pd.to_numeric, errors="coerce") > 0).to_numpy().any())


def render_fairness_results(key: str, constraints: pd.DataFrame, label: str, *,
                            on_result: ResultHook | None = None, run_context: Any = None,
                            run_history: Callable[[], pd.DataFrame] | None = None,
                            people: PrivatePairsPlan | None = None,
                            copy: SyntheticPeople | None = None) -> dict[str, pd.DataFrame]:
    """Frontier, operating point, binding constraints, group rates and companion for a constraint frame.

    ``people`` is the plan of the synthetic copy whose positions the pairs name (None: rows of the
    COMPAS file) and ``copy`` that copy, as the caller loaded it (the run's data). Returns the result's tables (for the page's export). `on_result(frontier_plan, frontier_result)`
    is called once per browser session for each (constraints, learner settings, `run_context`)
    when its result is first obtained, e.g. to log the run (returning False asks again on the next
    rerun); `run_history()` gives a table of logged runs shown under the results.
    """
    tables = _render_results(key, constraints, label, on_result, run_context, people, copy)
    if run_history is not None:
        _run_history_table(key, run_history)
    return tables


def _report_once(key: str, digest: str, run_context: Any, on_result: ResultHook | None,
                 plan: FrontierPlan, result: FrontierResult) -> None:
    """Hand a result to `on_result` the first time it is seen with this context (not on every rerun)."""
    if on_result is None:
        return
    marker = config_digest({"result": digest, "context": run_context})
    reported = st.session_state.get(f"{key}_reported", set())
    if marker in reported:
        return
    if on_result(plan, result) is not False:
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
    labels = {c: st.column_config.Column(RUN_LABELS[c]) for c in history.columns if c in RUN_LABELS}
    st.dataframe(history, hide_index=True, key=f"{key}_run_history", column_config=labels)


def _render_results(key: str, constraints: pd.DataFrame, label: str, on_result: ResultHook | None,
                    run_context: Any, people: PrivatePairsPlan | None = None,
                    copy: SyntheticPeople | None = None) -> dict[str, pd.DataFrame]:
    """The results proper; see render_fairness_results."""
    st.subheader("Learning under the elicited constraints")
    if people is not None:
        st.warning(SAMPLING_NOTE)
    if not _has_constraints(constraints):
        st.info("No 'treat alike' constraints yet: once stakeholders have answered, the trade-off "
                "between accuracy and their pairwise judgments appears here.")
        return {}
    saved_report_loader(f"{key}_saved", (LearningPlan,), lambda p: plan_widgets(key, p))
    st.caption("A saved report restores the learner and companion settings; the constraints stay this "
               "session's (the report itself reruns with its own: `python -m core reproduce report.json`).")
    sweep = _settings(key)
    try:
        base = LearningPlan(constraints=ConstraintTable.from_frame(constraints, label, people=people),
                            frontier=sweep, companion=None)
    except ValueError as exc:
        st.error(str(exc))
        return {}
    st.caption(f"Constraints: {label}. People: {COMPAS_POPULATIONS[sweep.population]}; the label is "
               f"two-year reoffence and every classifier is a randomised mixture. "
               + (f"The pairs name people of a private synthetic copy ({people.label()}); they join the fit "
                  "as constraint people who add no error, so error and group rates are the real people's. "
                  if people is not None else "")
               + f"{len(constraints)} "
               f"elicited pairs, {base.constraints.n_constrained} with a constraint; values swept: "
               + ", ".join(f"{g:g}" for g in sweep.values) + ".")
    digest = base.digest()
    memo_key = f"{key}_results"
    job_key = run_key(run_learning, base, copy)     # the background job of this sweep, if one was started
    ready = (digest in st.session_state.get(memo_key, {}) or frontier_ready(base, copy)
             or attached_job(job_key) is not None)
    may_start = ready or run_estimate_notice(base, key=f"{key}_estimate")
    clicked = st.button("Run the learner", key=f"{key}_run", type="primary", disabled=not may_start,
                        help="Fits one mixture per slack value; results are kept for these settings.")
    if not (ready or clicked):
        st.info("Press **Run the learner** to trace the accuracy-fairness frontier "
                f"({len(sweep.values)} values × {sweep.T} rounds).")
        return {}
    try:    # the one run of the learner; the companion below post-processes this result
        learned = _learned(memo_key, digest, base, copy, key, restart=clicked)
    except Cancelled:
        st.info("The learner was stopped; nothing was kept. Press **Run the learner** to start it again.")
        return {}
    except ValueError as exc:
        st.error(str(exc))
        return {}
    frontier = learned.frontier
    _report_once(key, digest, run_context, on_result, sweep, frontier)
    point = _pick_point(key, frontier.points, frontier.baseline["symbol"])
    figures = st.container()        # drawn once the result with its companion is known (just below)
    _pairs_and_groups(key, frontier, point, synthetic=people is not None)
    companion = companion_settings(key, float(point["target"]), sweep.seed)
    try:
        result = learned.with_companion(companion)
    except ValueError as exc:
        st.error(str(exc))
        return {}
    st.session_state[f"{key}_plan"] = result.plan   # the plan behind what is shown (export, tests)
    with figures:
        _frontier_block(key, result)
    companion_panel(key, result.companion, result.plan.companion)
    report_panel(result, page=PAGE, key=f"{key}_report")
    return result.tables()


def _learned(memo_key: str, digest: str, base: LearningPlan, copy: SyntheticPeople | None,
             key: str, restart: bool = False) -> LearningResult:
    """The learner's result for ``base``: kept in this session (at most :data:`KEPT_RUNS`), else read from
    the result cache when its sweep is there, else computed as a background job (followed behind a bar
    with Cancel; a page left meanwhile attaches to the same job when it comes back)."""
    slot = st.empty()       # made on every run, so the elements below keep their places with or without a bar
    kept = st.session_state.get(memo_key, {})
    if digest in kept:
        return kept[digest]
    if frontier_ready(base, copy):      # the sweep is cached: the rest is quick, no job needed
        learned = run_learning(base, copy)
    else:
        with slot.container():
            learned = run_with_progress(run_learning, base, copy, label=LEARNING, cancel_key=f"{key}_cancel",
                                        restart=restart)
        slot.empty()
    return remember(memo_key, digest, learned, KEPT_RUNS)


def _frontier_block(key: str, result: LearningResult) -> None:
    """The operating point's four figures, the frontier chart and its caption: the result's headline
    numbers and its operating-point row (``result.point()``)."""
    head, here = result.headline(), result.point()
    points, base = result.frontier.points, result.frontier.baseline
    symbol = base["symbol"]
    error, least = head["error at the operating point"], head["least-constrained error"]
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Error at this point", f"{error:.3f}",
              delta=f"{error - least:+.3f} vs least constrained", delta_color="inverse")
    m2.metric("Held-out error", "n/a" if pd.isna(here["error_heldout"]) else f"{here['error_heldout']:.3f}")
    m3.metric("Realised unfairness", f"{head['realised unfairness at the operating point']:.3f}",
              help=base["unfairness"].capitalize())
    m4.metric("Pairs over their slack", f"{int(here['violated_pairs'])} of {int(here['pairs'])}")
    st.plotly_chart(figs.frontier_figure(points, head["best constant error"], float(here["target"]), symbol,
                                         base["unfairness"]),
                    key=f"{key}_frontier_chart")
    chart_numbers(points, key=f"{key}_frontier_numbers", what="the frontier")
    dropped = int(base.get("dropped_pairs", 0))
    st.caption(f"{int(head['people']):,} people; best constant classifier error {head['best constant error']:.3f}; "
               f"least-constrained error {least:.3f}. Averaging: {base['averaging']}. "
               + (f"{dropped} pair(s) involve someone outside this population and are left out. " if dropped else "")
               + (f"Pairs name {base['n_constraint_people']:,} synthetic constraint people, who add no error. "
                  if "n_constraint_people" in base else "")
               + "Every point on the hull is reached by mixing its two neighbouring fits. "
               "Sample a decision per person from the mixture: thresholding its probability "
               "breaks the pairwise guarantee.")
    notes = [n for n in points["notes"] if n]
    if notes:
        st.caption(" ".join(sorted(set(notes))))


def _pairs_and_groups(key: str, f: FrontierResult, point: pd.Series, synthetic: bool = False) -> None:
    """Binding pairs, held-out pairs, group error rates, the FPR gap and convergence at the point."""
    target, symbol = float(point["target"]), f.baseline["symbol"]
    here = f"{symbol}={target:g}"
    pairs = f.pairs[np.isclose(f.pairs["target"], target)]
    st.markdown("**Binding constraints at this operating point**")
    only = st.checkbox("Show only pairs over their slack", key=f"{key}_only_violated", persist_state=KEEP)
    fitted = pairs[(pairs["split"] == "fit") & (pairs["violated"] | (not only))]
    binding = (fitted.sort_values("shadow_price", ascending=False)
               .loc[:, ["i", "j", "weight", "agreement", "p_i", "p_j", "gap", "violated", "shadow_price"]]
               .rename(columns=SYNTHETIC_PAIR_LABELS if synthetic else PAIR_LABELS))
    st.caption("Error cost per unit of slack is the pair's averaged multiplier: how much error the "
               "learner would save if this pair's slack were loosened by one unit (a shadow price). "
               "Pairs are ordered by it; 'over its slack' means the gap exceeds the slack by more than 0.02. "
               "P(flagged) is the mixture's probability of predicting reoffence.")
    st.dataframe(binding.head(25), hide_index=True, key=f"{key}_binding")
    held = pairs[pairs["split"] == "held-out"]
    if len(held):
        st.caption(f"Held-out pairs: largest gap {point['heldout_realized_gamma']:.3f}, "
                   f"{int(held['violated'].sum())} of {len(held)} over the slack "
                   "(pairs not used in fitting; the paper reports in-sample figures only). "
                   "Neither figure says how a different panel of stakeholders would judge.")
    groups = f.groups[np.isclose(f.groups["target"], target)]
    st.plotly_chart(figs.group_rates_figure(groups, f"Error rates by group at {here} (95% intervals)"),
                    key=f"{key}_groups_chart")
    chart_numbers(groups, key=f"{key}_groups_numbers", what="the group error rates")
    st.caption(f"Rates of the randomised classifier on all {f.baseline['n_individuals']:,} people; groups "
               "with few people (Asian, Native American) have wide intervals and should not be read as gaps.")
    gap = fpr_gap(f.groups)
    if not gap.empty:
        st.plotly_chart(figs.fpr_gap_figure(gap, f.points, symbol,
                                            "False positive rate gap, African-American minus Caucasian"),
                        key=f"{key}_gap_chart")
        st.caption("Does fairness to the elicited pairs go with a smaller gap in false positive rates "
                   "between the two largest groups? (The paper's Fig. 2e asks this across subjects.)")
    with st.expander("Convergence of the learner", expanded=False):
        st.plotly_chart(figs.trajectory_figure(f.trajectories, symbol), key=f"{key}_traj_chart")


def companion_settings(key: str, at: float | None, seed: int,
                       pairs: dict[str, tuple[str, str]] = GROUP_PAIRS) -> CompanionPlan:
    """Widgets of the Reich and Vijaykumar panel, drawn from the companion plan's declared fields (keys
    ``<key>_rv_<field>``), as a companion plan at the chosen point (``pairs``: attribute -> the two
    groups compared, as the data spell them)."""
    st.markdown("#### Companion: calibrated scores with equal error rates")
    st.caption("Post-processes the learned scores at the operating point (Reich and Vijaykumar, FORC 2021): "
               "scores stay calibrated within each group while the decision 'score ≥ cut-off' "
               "(flagged high risk = predicted to reoffend) has the same false and true positive "
               "rates in both groups. When no such rates exist, or when you ask for it, a soft trade-off "
               "lets the rates differ at a price.")
    prefix = f"{key}_rv"

    def draw(name: str, container, **kw):
        return field_widget(CompanionPlan, name, prefix, container=container, persist_state=KEEP, **kw)

    c1, c2, c3 = st.columns(3)
    attribute = draw("attribute", c1, options=list(pairs), format_func=lambda a: " vs ".join(pairs[a]))
    cutoff, bins = draw("cutoff", c2), draw("bins", c3)
    c4, c5, c6 = st.columns(3)
    mode = draw("mode", c4)
    penalty = c5.select_slider("Disparity penalty (soft trade-off)", PENALTY_MENU, value=default_penalty(),
                               key=f"{prefix}_penalty", persist_state=KEEP,
                               help="Loss units charged per squared difference in rates between the groups: "
                                    "0 lets each group take its own best rates, large values approach parity.")
    parity = c6.radio("Penalise differences in", list(PARITY), format_func=PARITY.get,
                      key=f"{prefix}_parity", persist_state=KEEP)
    return CompanionPlan(cutoff=cutoff, bins=bins, attribute=attribute, groups=pairs[attribute], seed=seed, at=at,
                         mode=mode, **penalties(penalty, parity))


def companion_panel(key: str, res: CompanionResult, plan: CompanionPlan) -> None:
    """Feasibility badge, ROC and calibration charts and the rates table of the companion."""
    k = cost_ratio(plan.cutoff)
    if res.feasible and res.nonconstant:
        st.success(f"Feasible: both groups can share false positive rate {res.target['fpr']:.3f} and true "
                   f"positive rate {res.target['tpr']:.3f} with calibrated scores (a false positive costs "
                   f"{k:.2f} false negatives).")
    elif res.feasible:
        st.warning("Only a constant decision (flag nobody or everybody) has equal error rates with "
                   "calibrated scores at this cut-off.")
    else:
        st.warning(res.message)
    if res.used == "soft":
        low, high = [g for g in res.soft if g not in ("objective", "share_low")]
        st.info(f"Soft trade-off (weight {res.soft['share_low']:.2f} on {low}'s loss): "
                + "; ".join(f"{g}: false positive rate {res.soft[g]['fpr']:.3f}, true positive rate "
                            f"{res.soft[g]['tpr']:.3f}" for g in (low, high))
                + f". Objective {res.soft['objective']:.4f} (losses plus penalty).")
    if res.message and res.feasible:
        st.caption(res.message)
    c5 = res.corollary5
    st.caption("Corollary 5 check: " + (f"trivially feasible ({c5['trivial']})" if c5.get("trivial")
               else c5["note"] or f"both ROC curves must pass above ({c5['a1']:.3f}, {c5['a2']:.3f}): "
               + ("yes" if c5.get("both_above") else "no")))
    left, right = st.columns(2)
    left.plotly_chart(figs.roc_figure(res.roc, res.target, plan.cutoff, res.soft), key=f"{key}_rv_roc")
    right.plotly_chart(figs.calibration_figure(res.calibration, "after: soft trade-off" if res.used == "soft"
                                               else "after: equal error rates"),
                       key=f"{key}_rv_calibration")
    st.dataframe(res.rates.rename(columns=RATE_LABELS).round(4), hide_index=True, key=f"{key}_rv_rates")
    st.caption("Each person's post-processed score is drawn from their score bin's row of the "
               "transport kernel (a randomised, mean-preserving contraction); rates in the table are "
               "expected values, the right-hand chart shows one seeded draw (simulation, not a release).")
