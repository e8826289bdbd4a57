"""Coherence audit: do predictors built from a release treat people in the data differently from similar people not in it?

Widgets -> ``core.coherence.AuditPlan`` -> ``core.coherence.run`` -> figures. Nothing is computed here.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.coherence import (ADVERSARIES, DEFAULT_LENS, NOT_PRIVATE_PASS, RELEASES,  # noqa: E402
                            VERDICT_MEANING, AdversaryChoice, AuditPlan, Condition, CustomSubgroup,
                            ReleaseChoice, RowSample, SweepPlan, TheoryPlan, calculate, is_private,
                            min_trials_for_pass, run, usable_columns)
from core.coherence.publish import (PublishPlan, refuse_if_not_private, simulation_label,  # noqa: E402
                                    sweep_ledger, trial_ledger)
from core.contracts import Cancelled, DataRef, Spec  # noqa: E402
from core.privacy.protection import ProtectionUnit  # noqa: E402
from core.releases import audited_output_release, release_entry  # noqa: E402
from core.report import guarded_csv  # noqa: E402
from dashboard.components.chart_table import chart_numbers  # noqa: E402
from dashboard.components.ledger_badge import record_release  # noqa: E402
from dashboard.components.params_form import (check_shown, field_key, field_widget, params_widgets,  # noqa: E402
                                              plan_widget_values)
from dashboard.components.progress import run_with_progress  # noqa: E402
from dashboard.components.run_estimate import run_estimate_notice  # noqa: E402
from dashboard.components.release_confirm import ReleaseJob, release_button  # noqa: E402
from dashboard.components.report_panel import report_panel, saved_report_loader  # noqa: E402
from dashboard.components.dataset_picker import choice_of, pick_microdata  # noqa: E402
from dashboard.components.wide_table import wide_table  # noqa: E402
from core.figures import coherence as figs  # noqa: E402

KEEP = {"persist_state": "session"}
SIM = ("Simulation, not a release: every split and every release of the audit is a seeded draw for auditing. "
       "Only the last section, Release, publishes an algorithm's output.")
PAGE = "Coherence audit"
LEDGER_COLUMNS = {"label": "Spend", "measured": "What was measured", "amount": "Amount", "unit": "Unit",
                  "composition": "Composition"}
DEFAULTS = AuditPlan()                    # the plan's defaults, stated once in core
DEFAULT_RELEASES = tuple(c.key for c in DEFAULTS.releases)
DEFAULT_ADVERSARIES = tuple(c.key for c in DEFAULTS.adversaries)
P = "coh"                                 # widget keys of the plan's declared fields: coh_<field>
SWEEP = "coh_sweep"                       # ... of the sweep's: coh_sweep_<field>
TH = "coh_th"                             # ... of the calculator's: coh_th_<field>
MAX_CUSTOM = 3
WORST_LABEL = "Worst failure rate"
SLIDER_MIN_VALUES = 20   # numeric columns with more distinct values get a range slider
CAVEATS = """**What coherence does not cover.** It is a necessary condition for privacy, not a sufficient one: a
single leaked record (singling out) is usually invisible to it, and accuracy is deliberately not measured. The
audit runs each release on half of the data, as the definition does; a mechanism whose noise does not shrink
with n is relatively noisier here than on the full file."""


# ------------------------------------------------------------------------------------------------
# Data: bundled, or declared on the Data step (the shared picker)
# ------------------------------------------------------------------------------------------------

def _pick_data() -> tuple[DataRef, bytes | None, pd.DataFrame, str] | None:
    """The shared picker: bundled data or a data set declared on the Data step (cleaned by its schema);
    (reference, bytes, table, label for the ledger) or None."""
    picked = pick_microdata("coh")
    if picked is None:
        return None
    return picked.ref, picked.raw, picked.frame, picked.name if picked.ref.is_upload else ""


# ------------------------------------------------------------------------------------------------
# A saved report -> widget values (the inverse of the widgets below)
# ------------------------------------------------------------------------------------------------

def _params_values(prefix: str, key: str, params) -> dict:
    return {f"{prefix}_{key}_{f.name}": (list(v) if isinstance(v, tuple) else v)
            for f in dataclasses.fields(params) for v in [getattr(params, f.name)]}


def plan_to_widgets(plan: AuditPlan) -> dict:
    """Widget values that rebuild ``plan`` on this page: the declared fields from the plans themselves, plus
    the data, the row sample, the positive value, the releases and adversaries with every Params, the custom
    subgroups and which parts ran. A plan made in a script may hold values the widgets do not offer (they
    are narrower than the plans' own checks): that raises ``ValueError`` naming the value, rather than the
    page quietly showing other settings."""
    for part in (plan, plan.sweep, plan.theory):
        if part is not None:
            check_shown(part)
    out = plan_widget_values(plan, P)
    out.update({
        "coh_dataset": choice_of(plan.data), "coh_rows": plan.rows.size or 10**8,
        "coh_releases": [r.key for r in plan.releases],
        "coh_adversaries": [a.key for a in plan.adversaries], "coh_n_custom": len(plan.custom_subgroups),
        "coh_compare_on": plan.compare, "coh_sweep_on": plan.sweep is not None,
    })
    if plan.positive is not None:
        out["coh_positive"] = plan.positive
    for r in plan.releases:
        out.update(_params_values("coh_rel", r.key, r.params))
    for a in plan.adversaries:
        out.update(_params_values("coh_adv", a.key, a.params))
    for i, custom in enumerate(plan.custom_subgroups):
        out[f"coh_custom_name_{i}"] = custom.name
        out[f"coh_custom_cols_{i}"] = [c.column for c in custom.conditions]
        for c in custom.conditions:
            out[f"coh_custom_{i}_{c.column}"] = (c.low, c.high) if c.is_range else list(c.values)
    if plan.sweep is not None:
        s = plan.sweep
        out.update(plan_widget_values(s, SWEEP))
        out[field_key(SWEEP, "release")] = s.release.key
        out.update({k: v for k, v in _params_values(SWEEP, s.release.key, s.release.params).items()
                    if not k.endswith("_epsilon")})
    if plan.theory is not None:
        out.update(plan_widget_values(plan.theory, TH))
    return out


# ------------------------------------------------------------------------------------------------
# Widgets -> sub-plans
# ------------------------------------------------------------------------------------------------

def _custom_subgroups(frame: pd.DataFrame) -> tuple[CustomSubgroup, ...]:
    """Up to MAX_CUSTOM named subgroups, each an AND of per-column conditions (values or a range)."""
    n = int(st.number_input("Custom subgroups (conditions on any column, combined with AND)", 0, MAX_CUSTOM, 0,
                            key="coh_n_custom", **KEEP, help="For example women aged 65 or over with no degree. "
                            "Each must still have at least gamma members to be audited."))
    out = []
    for i in range(n):
        c1, c2 = st.columns([1, 3])
        name = c1.text_input(f"Name of custom subgroup {i + 1}", key=f"coh_custom_name_{i}", **KEEP,
                             placeholder="spelled out if empty")
        cols = c2.multiselect(f"Columns of custom subgroup {i + 1}", list(frame.columns),
                              key=f"coh_custom_cols_{i}", **KEEP)
        conds, undecided = [], []
        for where, col in zip(st.columns(len(cols)) if cols else [], cols):
            values = frame[col].dropna()
            if pd.api.types.is_numeric_dtype(values) and values.nunique() > SLIDER_MIN_VALUES:
                lo, hi = float(values.min()), float(values.max())
                low, high = where.slider(f"{col} between (subgroup {i + 1})", lo, hi, (lo, hi),
                                         key=f"coh_custom_{i}_{col}", **KEEP)
                conds.append(Condition(col, low=float(low), high=float(high)))
                continue
            options = [str(v) for v in pd.unique(values.sort_values())]
            chosen = where.multiselect(f"{col} is one of (subgroup {i + 1})", options,
                                       key=f"coh_custom_{i}_{col}", **KEEP)
            if chosen:
                conds.append(Condition(col, tuple(chosen)))
            else:
                undecided.append(col)
        if conds and not undecided:
            out.append(CustomSubgroup(name, tuple(conds)))
        elif cols:
            st.caption(f"Custom subgroup {i + 1} is left out until it has values for: {', '.join(undecided)}.")
    return tuple(out)


def _without_field(spec: Spec, name: str) -> Spec:
    """The spec with one Params field hidden (the sweep sets epsilon itself)."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata))
              for f in dataclasses.fields(spec.params) if f.name != name]
    params = dataclasses.make_dataclass(f"{spec.params.__name__}Rest", fields, frozen=True)
    return Spec(spec.key, spec.label, spec.factory, params, spec.help)


def _field(plan_cls: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(plan_cls) if f.name == name)


def _sweep_epsilons(container, word: str) -> tuple[float, ...]:
    """The sweep's epsilons from the menu and default declared on ``SweepPlan``, named in the swept release's
    own unit ("zCDP epsilons" for a zCDP release), which the plan cannot know."""
    f = _field(SweepPlan, "epsilons")
    chosen = container.multiselect(f"{word}s", list(f.metadata["choices"]), default=list(f.default),
                                   key=field_key(SWEEP, "epsilons"), **KEEP,
                                   help=None if word == "epsilon" else "This release is zCDP: each epsilon means "
                                                                       "rho = epsilon²/2.")
    return tuple(chosen)


def _seed_strata(prefix: str, key: str, default: tuple[str, ...]) -> None:
    """A release whose Params take strata columns starts with the first subgroup column as its stratum."""
    wkey = f"{prefix}_{key}_strata"
    takes_strata = any(f.name == "strata" for f in dataclasses.fields(RELEASES[key].params))
    if takes_strata and wkey not in st.session_state and default:
        st.session_state[wkey] = list(default[:1])


def score_bins(scores: np.ndarray, in_release: np.ndarray) -> pd.DataFrame:
    """The histograms' bars: share of each half of the subgroup per 0.05-wide score bin from -1 to 1."""
    edges = np.round(np.linspace(-1.0, 1.0, 41), 2)
    share = [np.histogram(np.clip(part, -1.0, 1.0), bins=edges)[0] / max(part.size, 1)
             for part in (scores[in_release], scores[~in_release])]
    return pd.DataFrame({"score from": edges[:-1], "score to": edges[1:], "share in the release's half": share[0],
                         "share held out": share[1]})


def _verdict_card(row: pd.Series, summary: pd.DataFrame, worst: pd.Series) -> None:
    """One release's verdict; ``worst`` is its row of ``AuditResult.worst_adversaries`` (the headline's)."""
    with st.container(border=True):
        st.markdown(f"**{row['release']}**")
        private = row["privacy"] not in ("none", "finite_outputs")
        if private or row["verdict"] != "PASS":
            st.metric(f"Verdict: {row['release']}", row["verdict_shown"], label_visibility="collapsed")
        else:   # a PASS without a guarantee is not set beside a guarantee in the same large type
            st.markdown(f"Verdict: **{row['verdict_shown']}**")
            st.caption(NOT_PRIVATE_PASS)
        if not private:
            st.caption("This release has no privacy guarantee: no verdict here certifies it.")
        st.metric(WORST_LABEL, f"{worst['beta_hat']:.2f}",
                  help="Share of trials in which some eligible subgroup's W1 exceeded alpha, for the worst "
                       "adversary (largest failure rate; ties to the larger W1 at the beta quantile, then the "
                       "adversary listed first).")
        colour = figs.VERDICT_COLOURS[row["verdict"]]
        st.markdown(f"<span style='color:{colour};font-weight:600'>worst adversary: {worst['adversary']} "
                    f"(one-sided bounds {worst['ci_low']:.2f} at {100 * worst['lower_confidence']:.3g}% to "
                    f"{worst['ci_high']:.2f} at {100 * worst['upper_confidence']:.3g}%); null "
                    f"{worst['null_beta_hat']:.2f}</span>", unsafe_allow_html=True)
        st.caption(f"Privacy: {row['privacy_statement']}")
        if pd.notna(row["theory_gamma"]):
            st.caption(f"Theory ({row['theory_basis']}): subgroups of at least {row['theory_gamma']:,.0f} people "
                       f"are certified at this (alpha, beta); {row['certified_subgroups']} of "
                       f"{row['eligible_subgroups']} eligible subgroups qualify.")
        else:
            st.caption(f"Theory: {row['theory_note']}")
        for _, r in summary.iterrows():
            if r["verdict"] == "INCONCLUSIVE" and pd.notna(r["trials_needed"]):
                st.caption(f"{r['adversary']}: about {int(r['trials_needed'])} trials would decide at the "
                           "observed failure rate.")
            if r["warnings"]:
                st.warning(f"{r['adversary']}: {r['warnings']}")


@st.fragment
def _result_tabs(comparison, curve: pd.DataFrame) -> None:
    """The comparison's charts and tables; choosing what to show reruns only this part."""
    s = comparison.settings
    adv_names = list(dict.fromkeys(comparison.summary["adversary"]))
    rel_names = list(comparison.releases["release"])
    worst_adv = comparison.worst_adversary()["adversary"]
    tab_heat, tab_hist, tab_curve, tab_size, tab_excl = st.tabs(
        ["Subgroup heat map", "Score histograms", "Failure rate against alpha", "Size against incoherence",
         "Excluded subgroups"])
    with tab_heat:
        heat_adv = st.selectbox("Adversary", adv_names, index=adv_names.index(worst_adv), key="coh_heat_adv", **KEEP)
        st.plotly_chart(figs.distance_heatmap(comparison.subgroups, heat_adv, s["alpha"]), key="coh_heat_chart")
        st.caption("Cells: median W1 over trials between the released and held-out halves of each subgroup, with "
                   "the 5-95% range of trials in brackets; subgroups with the worst (1 - beta) quantile on top.")
        table = comparison.subgroups[comparison.subgroups["adversary"] == heat_adv].sort_values("q_w1", ascending=False)
        st.dataframe(figs.readable(table, figs.SUBGROUP_COLUMNS), hide_index=True, width="stretch")
    with tab_hist:
        h1, h2, h3 = st.columns(3)
        hist_group = h1.selectbox("Subgroup", list(comparison.subgroup_masks), key="coh_hist_group", **KEEP)
        hist_rel = h2.selectbox("Release", rel_names, key="coh_hist_release", **KEEP)
        hist_adv = h3.selectbox("Adversary", adv_names, index=adv_names.index(worst_adv), key="coh_hist_adv", **KEEP)
        mask = comparison.subgroup_masks[hist_group]
        scores = comparison.example_scores[(hist_rel, hist_adv)]
        st.plotly_chart(figs.score_histograms(scores[mask], comparison.example_half[mask], hist_group,
                                              f"{hist_rel} / {hist_adv}"), key="coh_hist_chart")
        chart_numbers(score_bins(scores[mask], comparison.example_half[mask]), key="coh_hist_numbers",
                      what="the histograms")
        st.caption("The two mounds of scores of the first trial: the half whose records fed the release against "
                   "the held-out half. W1 is the work needed to move one mound onto the other.")
    with tab_curve:
        curve_rel = st.selectbox("Release", rel_names, key="coh_curve_release", **KEEP)
        st.plotly_chart(figs.coherence_curve_figure(curve, curve_rel, s["alpha"], s["beta"]),
                        key="coh_curve_chart")
        chart_numbers(curve[curve["release"] == curve_rel], key="coh_curve_numbers",
                      what="the failure-rate curves")
        st.caption("Solid: share of trials in which some eligible subgroup exceeds alpha, with its one-sided 95% "
                   "band; dotted: the same predictors on an independent split (the noise floor).")
    with tab_size:
        size_adv = st.selectbox("Adversary", adv_names, index=adv_names.index(worst_adv), key="coh_size_adv", **KEEP)
        st.plotly_chart(figs.size_scatter(comparison.subgroups, size_adv, s["alpha"]), key="coh_size_chart")
        chart_numbers(figs.readable(comparison.subgroups.loc[comparison.subgroups["adversary"] == size_adv,
                                                             ["release", "subgroup", "size", "q_w1", "q_null"]],
                                    figs.SUBGROUP_COLUMNS), key="coh_size_numbers", what="the scatter")
    with tab_excl:
        if comparison.excluded.empty:
            st.write("Every subgroup has at least gamma members.")
        else:
            st.write(f"{len(comparison.excluded)} subgroups have fewer than gamma = {s['gamma']} members and are "
                     "not checked (sampling alone would make them look incoherent).")
            st.dataframe(figs.readable(comparison.excluded, figs.EXCLUDED_COLUMNS), hide_index=True, width="stretch")


# ------------------------------------------------------------------------------------------------
# The project ledger: audit runs as simulations, and the one real release
# ------------------------------------------------------------------------------------------------

def _record_simulations(plan: AuditPlan, data_label: str) -> None:
    """One simulation entry per audited DP release (and one per sweep) with what a single trial's release
    would spend; listed apart on the Privacy ledger page and never counted."""
    if plan.compare:
        for choice in plan.releases:
            one = trial_ledger(choice, protection=ProtectionUnit.of(plan.data))
            if one is not None:
                record_release(release_entry(plan.setup().replace(releases=(choice,)), PAGE, "audit trials",
                                             simulation_label(choice, plan.trials), one, kind="simulation",
                                             data_label=data_label))
    if plan.sweep is not None:
        swept = sweep_ledger(plan.sweep.releases(), protection=ProtectionUnit.of(plan.data))
        if swept is not None:
            label = (f"audit of {RELEASES[plan.sweep.release.key].label} at {len(plan.sweep.epsilons)} epsilons, "
                     f"{plan.sweep.trials} seeded trials (simulation)")
            record_release(release_entry(plan.for_sweep, PAGE, "epsilon sweep trials", label, swept,
                                         kind="simulation", data_label=data_label))


def _release_section(audited: AuditPlan | None, data: bytes | None, data_label: str) -> None:
    """Release one audited DP algorithm's output on every row of the file, with OpenDP's noise; recorded in the
    project ledger before anything is shown for download."""
    st.subheader("Release")
    st.caption("After the audit, a curator can publish one audited algorithm's output: it runs once on every row "
               "of the loaded file (not the audit's sample), with every privacy noise value drawn by OpenDP's "
               "secure sampler. Each press is a new release and adds its spend to this data set's privacy ledger.")
    if audited is None or not audited.compare or not audited.releases:
        st.info("Run the audit first; the algorithms it compared can then be released.")
        return
    choices = {c.build().name: c for c in audited.releases}
    private = [n for n, c in choices.items() if trial_ledger(c) is not None]
    name = st.selectbox("Audited algorithm to release", list(choices), key="coh_pub_release",
                        index=list(choices).index(private[0]) if private else 0,
                        help="Only algorithms with a differential privacy guarantee can be released.")
    choice = choices[name]
    try:
        refuse_if_not_private(choice)
        pub_plan = PublishPlan.from_audit(audited, choice)
    except ValueError as err:
        st.info(str(err))
        return
    label = f"release of {name}"
    current = st.session_state.get("coh_plan")      # the plan of the settings on screen (None: in error)
    error = None
    if current is None:
        error = "the settings above are in error; fix them first."
    elif (current.data, current.target, current.positive, current.lens) != (
            audited.data, audited.target, audited.positive, audited.lens) or choice not in current.releases:
        error = "the settings changed since the audit ran; run the audit again to release with them."

    with st.container(key="coh_pub_guard"):
        released = release_button(
            "Release this algorithm's output", key="coh_pub_run", what=label, error=error,
            release=audited_output_release(pub_plan, data, page=PAGE, label=label, data_name=data_label),
            job=ReleaseJob("Releasing with OpenDP's secure sampler", cancel_key="coh_pub_cancel", n_jobs=1),
            help="Runs the algorithm once on the whole file with secure noise.")   # a job that outlives this run
    if released is not None:
        st.session_state["coh_published"] = released     # committed in the ledger: shown from now on
        st.rerun()                                         # the sidebar total then includes it
    released = st.session_state.get("coh_published")
    if released is None:
        return
    st.markdown(f"#### Released: {released.plan.release.build().name}")
    st.success(f"Released at {released.created_utc} (UTC). {released.statement}")
    st.dataframe(figs.readable(released.budget.to_frame(), LEDGER_COLUMNS), hide_index=True, width="stretch")
    what = "noisy counts of every lens cell" if released.kind == "table" else "synthetic rows"
    st.caption(f"The first 20 {what}; the CSV holds the whole release.")
    st.dataframe(released.table.head(20), hide_index=True, width="stretch")
    st.download_button("Download the release (CSV)", guarded_csv(released.table), file_name=released.csv_name(),
                       mime="text/csv", key="coh_pub_csv", icon=":material/download:")


# ------------------------------------------------------------------------------------------------
# The page
# ------------------------------------------------------------------------------------------------

st.title("Coherence audit")
st.caption("Would predictors built from this release score the people in it differently from similar people "
           "who are not, in any subgroup? Verdicts with their uncertainty, next to what theory guarantees.")
st.caption(SIM)

saved_report_loader("coh", accepts=(AuditPlan,), to_widgets=plan_to_widgets)
picked = _pick_data()
if picked is None:
    st.stop()
data_ref, raw, full, upload_name = picked
usable = usable_columns(full)
if len(usable) < 2:
    st.error("This file needs at least two columns with at most 255 distinct values and no missing values; "
             "bin numeric columns first.")
    st.stop()

with st.expander("Data, target, lens and subgroups", expanded=True):
    c1, c2, c3 = st.columns(3)
    n_rows = int(c1.number_input("Rows audited (random sample of the file)", min(200, len(full)), len(full),
                                 min(DEFAULTS.rows.size, len(full)),
                                 step=1000, key="coh_rows", **KEEP))
    seed = field_widget(AuditPlan, "seed", P, container=c2, **KEEP)
    # the target's, the lens's and the subgroups' options and starting values depend on the data
    binaryish = [c for c in usable if full[c].nunique() >= 2]
    t_default = DEFAULTS.target if DEFAULTS.target in binaryish else binaryish[-1]
    target = field_widget(AuditPlan, "target", P, container=c3, columns=binaryish, default=t_default, **KEEP)
    values = [str(v) for v in full[target].astype("category").cat.categories]
    positive = c3.selectbox("Positive value (one-vs-rest)", values, index=len(values) - 1, key="coh_positive", **KEEP)
    others = [c for c in usable if c != target]
    lens_default = [c for c in DEFAULT_LENS.get(data_ref.source, others[:4]) if c in others] or others[:4]
    lens = field_widget(AuditPlan, "lens", P, columns=others, default=lens_default, **KEEP)
    g1, g2 = st.columns([3, 1])
    group_default = [c for c in DEFAULTS.subgroup_columns if c in usable] or usable[:1]
    group_cols = field_widget(AuditPlan, "subgroup_columns", P, container=g1, columns=usable, default=group_default,
                              **KEEP)
    order = field_widget(AuditPlan, "subgroup_order", P, container=g2, **KEEP)
    custom = _custom_subgroups(full)

with st.expander("Coherence parameters", expanded=True):
    p1, p2, p3, p4, p5, p6 = st.columns(6)
    alpha = field_widget(AuditPlan, "alpha", P, container=p1, **KEEP)
    beta = field_widget(AuditPlan, "beta", P, container=p2, **KEEP)
    gamma = field_widget(AuditPlan, "gamma", P, container=p3, **KEEP)
    need = min_trials_for_pass(beta)
    trials = field_widget(AuditPlan, "trials", P, container=p4, default=max(DEFAULTS.trials, need), **KEEP)
    n_null = field_widget(AuditPlan, "null_splits", P, container=p5, **KEEP)
    constants = field_widget(AuditPlan, "constants", P, container=p6, **KEEP)

with st.expander("Releases and adversaries", expanded=True):
    rel_keys = st.multiselect("Release algorithms to compare", list(RELEASES), default=list(DEFAULT_RELEASES),
                              format_func=RELEASES.labels().get, key="coh_releases", **KEEP)
    release_errors: list[str] = []
    releases = []
    for key in rel_keys:
        _seed_strata("coh_rel", key, tuple(group_cols))
    cols = st.columns(min(len(rel_keys), 3)) if rel_keys else []
    for i, key in enumerate(rel_keys):
        with cols[i % len(cols)]:
            if not dataclasses.fields(RELEASES[key].params):
                st.caption(f"{RELEASES[key].label}: no settings. {RELEASES[key].help}")
            try:
                releases.append(ReleaseChoice(key, params_widgets(RELEASES[key], "coh_rel", columns=usable,
                                                                  lens=lens, persist_state="session")))
            except ValueError as err:
                release_errors.append(f"{RELEASES[key].label}: {err}")
    adv_keys = st.multiselect("Adversaries", list(ADVERSARIES), default=list(DEFAULT_ADVERSARIES),
                              format_func=ADVERSARIES.labels().get, key="coh_adversaries", **KEEP)
    adversaries = []
    with st.popover("Adversary settings", icon=":material/tune:"):
        for key in adv_keys:
            try:
                adversaries.append(AdversaryChoice(key, params_widgets(ADVERSARIES[key], "coh_adv",
                                                                       persist_state="session")))
            except ValueError as err:
                release_errors.append(f"{ADVERSARIES[key].label}: {err}")
    st.caption("Each release and adversary draws from its own random stream of the seed, so adding or removing "
               "one leaves the others' numbers unchanged. New ones are one class and one registry line in "
               "core.coherence; the page draws their settings from their parameters.")

if trials < need:
    st.warning(f"With {trials} trials no verdict can be PASS: at beta = {beta:g} and 95% confidence a PASS needs "
               f"at least {need} trials with no exceedance. Only FAIL or INCONCLUSIVE can come out.")

# the sweep's and calculator's widgets sit below the results but are read now, so the plan is whole
run_area, results_area, sweep_box, theory_box = st.container(), st.container(), st.container(), st.container()

with sweep_box:
    st.subheader("Incoherence against epsilon")
    st.caption("One differentially private release audited at several epsilons on the same splits, next to the "
               "alpha that theory certifies for subgroups of the smallest, median and largest eligible size.")
    dp_keys = [k for k in RELEASES if is_private(k)]
    e1, e2, e3 = st.columns([2, 2, 1])
    sweep_key = e1.selectbox("DP release", dp_keys, format_func=RELEASES.labels().get,
                             key=field_key(SWEEP, "release"), **KEEP)
    word = RELEASES[sweep_key].build().epsilon_word        # "zCDP epsilon" for zCDP releases
    sweep_eps = _sweep_epsilons(e2, word)
    sweep_trials = field_widget(SweepPlan, "trials", SWEEP, container=e3,
                                default=max(_field(SweepPlan, "trials").default, need), **KEEP)
    _seed_strata(SWEEP, sweep_key, tuple(group_cols))
    sweep_plan = None
    try:
        rest = params_widgets(_without_field(RELEASES[sweep_key], "epsilon"), SWEEP, columns=usable,
                              lens=lens, persist_state="session")
        first = (sorted(sweep_eps) or [1.0])[0]
        swept = RELEASES[sweep_key].params(**{**rest.__dict__, "epsilon": first})
        sweep_plan = SweepPlan(ReleaseChoice(sweep_key, swept), tuple(sweep_eps), sweep_trials)
    except ValueError as err:
        st.error(str(err))
    if sweep_trials < need:
        st.warning(f"With {sweep_trials} trials every verdict of the sweep will be FAIL or INCONCLUSIVE: a PASS "
                   f"needs at least {need} trials at beta = {beta:g}.")
    sweep_clicked = st.button("Run epsilon sweep", key="coh_sweep_run", icon=":material/show_chart:",
                              disabled=sweep_plan is None)
    sweep_slot = st.container()

with theory_box:
    st.subheader("Theory calculator")
    st.caption("The subgroup size gamma that guarantees (alpha, beta)-coherence for every adversary, and back "
               "again. Conservative constants evaluate the paper's formulas at alpha/2, repairing a factor-2 slip "
               "in its Claim 2; 'as printed' reproduces the paper's numbers, which are unproven.")
    th = {}
    for row in (("guarantee", "epsilon", "delta", "zeta", "k_records"), ("n", "alpha", "beta", "n_groups", "size")):
        for col, name in zip(st.columns(5), row):
            th[name] = field_widget(TheoryPlan, name, TH, container=col, **KEEP)
    try:
        theory_plan = TheoryPlan(**th)
    except ValueError as err:
        st.error(str(err))
        theory_plan = None
    theory_slot = st.container()

with run_area:
    run_clicked = st.button("Run audit", type="primary", key="coh_run", icon=":material/play_arrow:")
if run_clicked:
    st.session_state["coh_compare_on"] = True
if sweep_clicked:
    st.session_state["coh_sweep_on"] = True

with run_area:   # messages, progress and errors sit by the Run button
    plan = None
    for message in release_errors:
        st.error(message)
    try:
        plan = AuditPlan(
            data=data_ref, rows=RowSample(n_rows, seed), target=target, positive=positive, lens=tuple(lens),
            subgroup_columns=tuple(group_cols), subgroup_order=order, custom_subgroups=custom,
            releases=tuple(releases), adversaries=tuple(adversaries), alpha=alpha, beta=beta, gamma=gamma,
            trials=trials, null_splits=n_null, seed=seed, constants=constants,
            compare=bool(st.session_state.get("coh_compare_on")),
            sweep=sweep_plan if st.session_state.get("coh_sweep_on") else None, theory=theory_plan)
    except ValueError as err:
        st.error(str(err))
    st.session_state["coh_plan"] = plan

    # Results belong to the plan that made them: reuse the session's result when only the calculator
    # changed, or the on-disk cache when this exact plan ran before; otherwise the earlier result is
    # shown with a warning until the user runs again.
    result = None
    stored = st.session_state.get("coh_result")
    may_start = plan is None or run_estimate_notice(plan.replace(compare=True, theory=None), raw,
                                                    key="coh_estimate", run=run)
    if plan is not None and (plan.compare or plan.sweep is not None):
        heavy = plan.replace(theory=None)
        fresh = (run_clicked or sweep_clicked) and may_start
        same = stored is not None and stored.plan.replace(theory=None) == heavy
        try:
            if not fresh and stored is not None and stored.plan == plan:
                result = stored                     # an output widget changed: nothing to recompute
            elif fresh or same or run.is_cached(plan, raw):
                with sweep_slot if sweep_clicked else st.container():      # progress by the button pressed
                    result = run_with_progress(run, plan, raw, label="Running the audit", cancel_key="coh_cancel")
                st.session_state["coh_result"] = result
                _record_simulations(result.plan, upload_name)
        except Cancelled:
            st.info("Stopped; the settings are kept.")
        except ValueError as err:
            st.error(str(err))
    if result is None and stored is not None:
        result = stored
        st.warning("The settings changed since these results were computed; they are for the earlier settings "
                   "(their report holds that plan). Press Run audit or Run epsilon sweep to update.")

with results_area:
    st.markdown("**What a verdict means**")
    m1, m2, m3 = st.columns(3)
    for col, verdict in zip((m1, m2, m3), ("PASS", "FAIL", "INCONCLUSIVE")):
        with col.container(border=True):
            st.markdown(f"**{verdict}**")
            st.caption(VERDICT_MEANING[verdict])
    st.caption(f"At beta = {beta:g} and 95% confidence a PASS needs at least {need} trials with no exceedance; "
               f"this audit is set to {trials}. {NOT_PRIVATE_PASS}")
    st.info(CAVEATS)

    comparison = result.comparison if result is not None else None
    if comparison is None:
        st.info(f"Set up the audit above and press **Run audit** ({n_rows:,} rows, {trials} trials, "
                f"{len(releases)} release(s) x {len(adversaries)} adversary(ies)).")
    else:
        s = comparison.settings
        st.subheader("Verdicts")
        head = result.headline()
        st.caption(f"n = {result.n_rows:,} rows, releases see n/2 = {s['n_half']:,}; {s['trials']} trials with "
                   f"{s['n_null_splits']} null split(s) each; {s['n_eligible']} of {s['n_subgroups']} subgroups have "
                   f"at least gamma = {s['gamma']} members; alpha = {s['alpha']:g}, beta = {s['beta']:g}.")
        rels = comparison.releases
        worst = comparison.worst_adversaries().set_index("release")
        for start in range(0, len(rels), 3):
            for col, (_, row) in zip(st.columns(3), rels.iloc[start:start + 3].iterrows()):
                with col:
                    _verdict_card(row, comparison.summary[comparison.summary["release"] == row["release"]],
                                  worst.loc[row["release"]])

        st.markdown("**Per adversary** (FAIL uses Bonferroni-corrected lower bounds across adversaries)")
        st.dataframe(figs.readable(comparison.summary, figs.SUMMARY_COLUMNS), hide_index=True, width="stretch",
                     column_config={"Verdict": st.column_config.TextColumn(width="medium")})

        _result_tabs(comparison, result.tables()["curve"])

    if result is not None:
        st.subheader("Export")
        report_panel(result, page="Coherence audit", key="coh_report")

    _release_section(result.plan if result is not None else None,
                     raw if result is not None and result.plan.data == data_ref else None, upload_name)

with sweep_slot:
    sweep = result.sweep if result is not None else None
    if sweep is not None:
        st.plotly_chart(figs.epsilon_figure(sweep.audit.summary, sweep.audit.releases, sweep.theory,
                                            sweep.audit.settings["beta"]), key="coh_sweep_chart")
        st.dataframe(figs.readable(sweep.audit.summary, figs.SWEEP_COLUMNS), hide_index=True, width="stretch",
                     column_config={"Verdict": st.column_config.TextColumn(width="medium")})
        if sweep.theory["certified_alpha"].isna().all():
            st.caption("Theory certifies nothing at these sizes and epsilons (the black-box conversion is very "
                       "demanding); try smaller epsilons or larger subgroups.")

with theory_slot:
    calc = result.theory if result is not None and result.plan.theory == theory_plan else None
    if calc is None and theory_plan is not None:
        calc = calculate(theory_plan)      # instant, needs no data: shown before any run
    if calc is not None:
        cons, printed = calc.summary.iloc[0], calc.summary.iloc[1]
        m = st.columns(4)
        for col, row, label in ((m[0], cons, "gamma, conservative"), (m[1], printed, "gamma, as printed")):
            col.metric(label, "outside theorem" if pd.isna(row["gamma"]) else f"{row['gamma']:,.1f}",
                       help=row["note"] or f"binding: {row['binding']}; zeta = {row['zeta']:.4g}")
        m[2].metric("certified alpha at that size", "vacuous" if pd.isna(cons["certified_alpha"])
                    else f"{cons['certified_alpha']:.4f}", help="conservative constants")
        m[3].metric("largest epsilon at that size",
                    "not a DP guarantee" if th["guarantee"] not in ("pure_dp", "approx_dp")
                    else "none" if pd.isna(cons["max_epsilon"]) else f"{cons['max_epsilon']:.5f}",
                    help="conservative constants; Thm 8 (delta at or below its cap) for approximate DP, else Thm 7")
        wide_table(figs.readable(calc.summary, figs.THEORY_COLUMNS), key="coh_th_table", width="stretch")
        if not calc.gamma_curve.empty:
            sizes = comparison.subgroups["size"].unique() if comparison is not None else [th["size"]]
            st.plotly_chart(figs.gamma_figure(calc.gamma_curve, sizes), key="coh_th_chart")
            chart_numbers(calc.gamma_curve, key="coh_th_numbers", what="the size curve")
        if calc.delta_cap is not None:
            st.caption(f"Thm 8 admits delta up to {calc.delta_cap:.3g} at these settings; deployed systems rarely "
                       "meet it.")
