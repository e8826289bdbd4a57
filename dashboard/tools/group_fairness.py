"""Group fairness and ranking: who is worst off and what lifting them costs; would a ranking change
if people belonged to another group; calibrated scores with equal error rates.

Widgets -> ``core.fairness.GroupFairnessPlan`` -> ``core.fairness.run_group_fairness`` -> figures.
Nothing is computed here.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.contracts import Cancelled, DataRef  # noqa: E402
from core.fairness import GroupFairnessPlan, LexifairPlan, MediatorRole, RankingPlan, run_group_fairness  # noqa: E402
from core.fairness.declared_learning import LearningColumns  # noqa: E402
from core.fairness.group_fairness_plan import DECLARED, RANKING_DATA, RANKING_DEFAULTS, ranking_table  # noqa: E402
from dashboard.components.chart_table import chart_numbers  # noqa: E402
from dashboard.components.dataset_picker import (DATA_STEP_HINT, choice_of, data_selectbox,  # noqa: E402
                                                 declared_key, declared_name, declared_options, pick_declared)
from dashboard.components.fairness_results import (companion_panel, companion_settings,  # noqa: E402
                                                   companion_widget_values)
from dashboard.components.plain_text import plain  # noqa: E402
from dashboard.components.params_form import field_widget, plan_widget_values  # noqa: E402
from dashboard.components.progress import run_with_progress  # noqa: E402
from dashboard.components.run_estimate import run_estimate_notice  # noqa: E402
from dashboard.components.report_panel import report_panel, saved_report_loader  # noqa: E402
from core.figures import group_fairness as figs  # noqa: E402

KEEP = {"persist_state": "session"}
PAGE = "Group fairness and ranking"
P = "gf"                     # widget keys of the plan's own fields: gf_<field>
LX = "gf_lx"                 # ... of the lexifair tab's: gf_lx_<field>
LXD = "gf_lxd"               # ... its group columns on a declared data set (their menu is the data set's)
LC = "gf_lc"                 # the declared data set's learning columns: gf_lc_<field>
RVD = "gfd"                  # the calibration tab's widgets on a declared data set (its groups are the data's)
FIT = ""                     # the score menu's entry for "fit a logistic score"
#: Where a declared table's ranking widgets start (a bundled table starts from RANKING_DEFAULTS).
UPLOAD_START = {"ascending": False, "ks": (50, 100), "outcome": ""}
DEFAULT_BASELINE = "(most disadvantaged group)"
COMPANION_PAIRS = {"compas": {"race": ("African-American", "Caucasian"), "sex": ("Male", "Female")},
                   "adult": {"race": ("Black", "White"), "sex": ("Female", "Male")}}
WARNING = """**Read this before trusting a counterfactual ranking.** The result is only as good as the causal
graph you draw here: the tool cannot check it. It assumes every arrow you left out is truly absent, that no
hidden cause drives both a sensitive attribute and a mediator, and that straight-line equations (with
interactions between the attributes) describe the data. Marking a mediator **resolving** says it is a
legitimate basis for the decision (its differences between groups are kept); **non-resolving** says the
differences it carries are themselves discrimination (they are removed). That is a value judgement, not a
statistical fact: it belongs to the people accountable for the decision and those affected by it, and it
should be written down with its reasons."""


# ------------------------------------------------------------------------------------------------
# A saved report -> widget values
# ------------------------------------------------------------------------------------------------

def _ranking_prefix(source: str) -> str:
    """Each table keeps its own ranking widgets (its columns differ): gf_rk_<source>_<field>."""
    return f"gf_rk_{source}"


def plan_to_widgets(plan: GroupFairnessPlan) -> dict:
    """Widget values that rebuild ``plan`` on this page: the declared fields from the plans themselves,
    plus the table choice, the mediators, their roles and the baseline (keys that depend on the data)."""
    out = plan_widget_values(plan, P)
    out["gf_rk_source"] = choice_of(plan.data)
    declared = plan.learning == DECLARED
    if declared:
        lc = plan.learning_columns
        out.update({"gf_learn_source": choice_of(plan.data), f"{LC}_label": lc.label, f"{LC}_positive": lc.positive,
                    f"{LC}_groups": list(lc.groups), f"{LC}_score": lc.score})
    if plan.lexifair is not None:
        out.update(plan_widget_values(plan.lexifair, LX))
        if declared:
            out[f"{LXD}_columns"] = out.pop(f"{LX}_columns")
    rk = plan.ranking
    if rk is not None:
        p = _ranking_prefix(choice_of(plan.data))
        out.update(plan_widget_values(rk, p))
        out[f"{p}_mediators"] = [m.name for m in rk.mediators]
        for m in rk.mediators:
            out[f"{p}_resolve_{m.name}"] = list(m.resolving_for)
        for a, v in zip(rk.attributes, rk.baseline or (DEFAULT_BASELINE,) * len(rk.attributes)):
            out[f"{p}_baseline_{a}"] = v
    if plan.companion is not None:    # ValueError (the loader shows it) when the panel cannot redraw it
        if declared:
            out.update(companion_widget_values(RVD, plan.companion, {plan.companion.attribute: plan.companion.groups}))
        else:
            out.update(companion_widget_values("gf", plan.companion, COMPANION_PAIRS[plan.learning]))
    return out


# ------------------------------------------------------------------------------------------------
# Widgets -> sub-plans
# ------------------------------------------------------------------------------------------------

def _lexifair_widgets(groups: tuple[str, ...] | None = None) -> LexifairPlan:
    """The lexifair sub-plan; ``groups``: the declared data set's group columns (None: the bundled data's)."""
    st.markdown("**Who is worst off, and what does lifting them cost?** Minimax fairness first lowers the "
                "largest error any group suffers; lexicographic fairness then lowers the second largest "
                "without giving that back, then the third. Compare their group errors with the plain "
                "most-accurate model (ERM).")
    layout = {"columns": 0, "pairs": 0, "min_size": 1, "levels": 1, "alpha": 2, "rounds": 2, "learner": 3,
              "bound": 3}
    cols = st.columns(4)           # layout: field -> the column it sits in, top to bottom
    values = {}
    for name, at in layout.items():
        if name == "columns" and groups is not None:
            key = f"{LXD}_columns"    # groups chosen anew: keep those still offered, else offer them all
            current = st.session_state.get(key)
            if current is not None and not set(current) <= set(groups):
                st.session_state[key] = [c for c in current if c in groups] or list(groups)
            values[name] = field_widget(LexifairPlan, name, LXD, container=cols[at], options=groups,
                                        default=groups, **KEEP)
        else:
            values[name] = field_widget(LexifairPlan, name, LX, container=cols[at], **KEEP)
    return LexifairPlan(**values)


def _declared_learning():
    """The declared data set every tab uses and the columns the learning tabs read from it (label, its
    positive value, groups, an optional score), or None when none is declared or chosen yet."""
    if not declared_options()[0]:
        st.info("No data set is declared in this session yet. " + DATA_STEP_HINT)
        return None
    choice = data_selectbox("Declared data set (every tab)", [], {}, key="gf_learn_source", **KEEP)
    name = declared_name(choice)
    if name is None:
        return None
    try:
        picked = pick_declared(name)
    except ValueError as exc:
        st.error(str(exc))
        return None
    schema = picked.ref.schema
    used = [c for c in schema.used_columns() if c.role != "person_id"]
    labels = [c.name for c in used if c.role == "category" or c.bins is not None]
    numbers = [c.name for c in used if c.role == "number" and c.bins is None]
    if not labels:
        st.error(f"{name} has no category column to predict or to form groups from; declare one on the Data step.")
        return None
    c1, c2, c3, c4 = st.columns(4)
    label = c1.selectbox("Label (what is predicted)", labels, key=f"{LC}_label", **KEEP)
    values = [str(v) for v in (schema.column(label).categories or picked.frame[label].astype(str).unique())]
    positive = c2.selectbox("Its positive value", sorted(values), key=f"{LC}_positive", **KEEP)
    others = [c for c in labels if c != label]
    groups = c3.multiselect("Group columns", others, default=others[:2], key=f"{LC}_groups", **KEEP)
    score = c4.selectbox("Score to calibrate", [FIT, *numbers], key=f"{LC}_score", **KEEP,
                         format_func=lambda c: c or "(fit a logistic score)",
                         help="A number column in [0, 1] (or within its public bounds), post-processed by the "
                              "calibration tab; or a plain logistic score fitted to the label.")
    st.caption(f"{name}: cleaned by its declaration (Data step); the label, groups and score are its columns. "
               + ("People are counted by its person id, not by rows." if schema.person_id else ""))
    try:
        return picked, LearningColumns(label, positive, tuple(groups), score)
    except ValueError as exc:
        st.error(str(exc))
        return None


def _declared_pairs(frame: pd.DataFrame, groups: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """The two largest groups of each group column with two groups at least (the calibration tab compares
    two groups)."""
    pairs = {}
    for g in groups:
        top = frame[g].astype(str).value_counts().index[:2]
        if len(top) == 2:
            pairs[g] = (str(top[0]), str(top[1]))
    return pairs


# ranking_table is not cached in core (the ranking sub-run is, the table it reads is not): the widgets
# below need the table's columns on every rerun, so it is kept here.
@st.cache_data(max_entries=6, show_spinner="Reading the table...")
def _table(source: str, fingerprint: str, raw: bytes | None, rows: int | None, seed: int, schema_digest: str = "",
           _schema=None) -> pd.DataFrame:
    ranking = RankingPlan() if rows is None else RankingPlan(synthetic_rows=rows)
    plan = GroupFairnessPlan(data=DataRef(source, fingerprint, schema=_schema), seed=seed, lexifair=None, companion=None,
                             ranking=ranking)
    return ranking_table(plan, raw)


def _ranking_data() -> tuple[DataRef, bytes | None, int | None, str] | None:
    """The table to rank, its bytes (a declared data set's file), the synthetic size (None: not a synthetic
    table) and the choice's key (a bundled key, or a data set declared on the Data step: the one intake)."""
    source = data_selectbox("Table to rank", [k for k in RANKING_DATA if k != "upload"], RANKING_DATA,
                            key="gf_rk_source", **KEEP)
    name = declared_name(source)
    if name is not None:
        try:
            picked = pick_declared(name)
        except ValueError as exc:
            st.error(str(exc))
            return None
        st.caption(f"{name}: cleaned by its declaration (Data step). Numeric columns can be mediators and the score.")
        return picked.ref, picked.raw, None, source
    rows = None
    if source == "moving-company":
        rows = field_widget(RankingPlan, "synthetic_rows", _ranking_prefix(source), **KEEP)
        st.caption("Synthetic data: drawn from the paper's causal graph with its edge weights and standard "
                   "normal errors (our choice). Women score lower on lifting; the score is lower for women "
                   "and for Black applicants.")
    return DataRef(source), None, rows, source


def _ranking_widgets(frame: pd.DataFrame, source: str) -> RankingPlan:
    """The causal model's widgets; their menus are the table's columns, their starting values the table's
    preset (``RANKING_DEFAULTS``; a declared table starts from its first column and ``UPLOAD_START``)."""
    default = RANKING_DEFAULTS.get(source)
    start = ({"attributes": default.attributes, "outcome": default.outcome, "ascending": default.ascending,
              "ks": default.ks} if default else {**UPLOAD_START, "attributes": tuple(frame.columns[:1])})
    cols = list(frame.columns)
    numeric = [c for c in cols if pd.api.types.is_numeric_dtype(frame[c])]
    p = _ranking_prefix(source)

    def draw(name: str, container, columns=()):
        return field_widget(RankingPlan, name, p, container=container, columns=columns, default=start[name], **KEEP)

    c1, c2, c3 = st.columns(3)
    attrs = draw("attributes", c1, cols)
    mediators = c2.multiselect("Mediators (in causal order)", [c for c in numeric if c not in attrs],
                               default=[m.name for m in default.mediators] if default else [], key=f"{p}_mediators",
                               **KEEP, help="Variables the attributes may affect and that affect the score.")
    outcome = draw("outcome", c3, [c for c in numeric if c not in attrs and c not in mediators])
    roles = []
    for m in mediators:
        preset = next((r.resolving_for for r in default.mediators if r.name == m), ()) if default else ()
        kept = st.multiselect(f"'{m}' is a legitimate basis (resolving) for", attrs,
                              default=[a for a in preset if a in attrs], key=f"{p}_resolve_{m}", **KEEP,
                              help="All attributes: resolving. None: non-resolving. Some: semi-resolving.")
        roles.append(MediatorRole(m, tuple(kept)))
    c4, c5, c6 = st.columns(3)
    baseline = []
    for a in attrs:
        values = [DEFAULT_BASELINE] + sorted(frame[a].astype(str).unique().tolist())[:50]
        baseline.append(c4.selectbox(f"Everybody scored as if {a} were", values, key=f"{p}_baseline_{a}", **KEEP))
    ascending = draw("ascending", c5)
    ks = draw("ks", c6)
    use_baseline = () if any(b == DEFAULT_BASELINE for b in baseline) else tuple(baseline)
    return RankingPlan(attributes=attrs, mediators=tuple(roles), outcome=outcome or "",
                       baseline=use_baseline, ascending=bool(ascending), ks=tuple(int(k) for k in ks))


# ------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------

def _draw_lexifair(result) -> None:
    res = result.lexifair
    levels = res.levels
    st.markdown("**Worst-off group per model** (largest held-out error):\n\n"
                + figs.worst_off_lines(result.worst_off()))
    st.plotly_chart(figs.group_error_figure(res.groups), key="gf_lex_errors")
    chart_numbers(res.groups, key="gf_lex_error_numbers", what="the group errors")
    st.caption("Bars: held-out error of each group (share of its people misclassified by the randomised "
               "classifier, in expectation), worst at the top. Intervals: 90% bootstrap over held-out people "
               "with the model fixed; overlapping intervals are not evidence of a difference.")
    left, right = st.columns(2)
    left.dataframe(levels.rename(columns=figs.LEVEL_COLUMNS).round(4), hide_index=True, key="gf_lex_levels")
    left.caption("eta-hat j bounds the sum of the j largest training errors. Theory (Theorem 12): every such "
                 "sum is at most eta-hat plus (j L + 2 nu) / B; the realised excess is what the output "
                 "actually exceeds it by (negative: within the bound).")
    right.plotly_chart(figs.eta_figure(res.trajectory), key="gf_lex_eta")
    with st.expander("Every group and model (table)"):
        st.dataframe(res.groups.rename(columns=figs.GROUP_COLUMNS).round(4), hide_index=True, key="gf_lex_table")


def _draw_ranking(res) -> None:
    base = ", ".join(f"{a} = {v}" for a, v in res.baseline.items())
    st.markdown(f"**Baseline group:** {plain(base)}. {res.ranked_words()} ranked.")
    m = res.measures
    top_k = res.counterfactual_at_top()          # the result's own view, as in its headline
    k = top_k.k
    c1, c2, c3 = st.columns(3)
    c1.metric(f"Utility loss at k = {k}", f"{100 * top_k.utility_loss:.1f}%",
              help="Observed score given up (or taken on, ranking low to high) in the top k.")
    c2.metric(f"AP@{k} against the original top k", f"{top_k.ap_at_k:.3f}")
    c3.metric("Selection-rate range at that k", f"{top_k.rate_low:.2f} – {top_k.rate_high:.2f}",
              help=f"Lowest: {top_k.rate_low_group}; highest: {top_k.rate_high_group}. 1 is parity: a group's "
                   "share in the top k equals its share of everybody.")
    st.plotly_chart(figs.selection_rate_figure(m), key="gf_rk_rates")
    top = min(k, 200)
    st.plotly_chart(figs.slope_figure(res.rank_changes, top), key="gf_rk_slope")
    st.caption(f"Each line is one person in the top {top} of either ranking: their place on the original "
               "scores (left) and on the counterfactual scores (right). Tied scores are ordered by row, so "
               "with many ties (COMPAS decile scores) the original top k, sensitivity and AP@k depend on "
               "that order.")
    with st.expander("Measures at every k (table)"):
        st.dataframe(m.rename(columns=figs.MEASURE_COLUMNS).round(4), hide_index=True, key="gf_rk_table")


# ------------------------------------------------------------------------------------------------
# Page
# ------------------------------------------------------------------------------------------------

st.title(PAGE)
st.caption("Group-level fairness for classifiers and rankings: lexicographically fair learning (Diana et al., "
           "FORC 2021), causal intersectional ranking (Yang, Loftus and Stoyanovich, FORC 2021) and calibrated "
           "scores with equal error rates (Reich and Vijaykumar, FORC 2021).")
saved_report_loader("gf", accepts=(GroupFairnessPlan,), to_widgets=plan_to_widgets)

c1, c2, c3 = st.columns(3)
learning = field_widget(GroupFairnessPlan, "learning", P, container=c1, **KEEP)
population = field_widget(GroupFairnessPlan, "population", P, container=c2, disabled=learning != "compas", **KEEP)
seed = field_widget(GroupFairnessPlan, "seed", P, container=c3, **KEEP)
learn = None
if learning == DECLARED:
    learn = _declared_learning()
else:
    st.caption("The learning data of the lexicographic-fairness and calibration tabs are the bundled COMPAS or "
               "Adult files; choose 'The declared data set' to run every tab on a data set declared on the Data "
               "step (a declared data set is also offered in the ranking tab).")
learn_columns = learn[1] if learn is not None else None

tab_lex, tab_rank, tab_cal = st.tabs(["Lexicographic fairness", "Counterfactual ranking",
                                      "Calibration and equal error rates"])
with tab_lex:
    try:
        lex_plan = _lexifair_widgets(learn_columns.groups if learn_columns is not None else None)
    except ValueError as exc:
        lex_plan = None
        st.error(str(exc))
with tab_rank:
    st.markdown("**Would this ranking change if these people belonged to another group?** Draw the causal "
                "model, mark which mediators are a legitimate basis, and rank everybody by the score they "
                "would have had as members of one baseline group.")
    st.warning(WARNING, icon=":material/warning:")
    if learning == DECLARED:      # one data set for every tab: the declared one
        picked = None if learn is None else (learn[0].ref, learn[0].raw, None, declared_key(learn[0].name))
        if learn is not None:
            st.caption(f"Ranking {plain(learn[0].name)}, the declared data set chosen above.")
    else:
        picked = _ranking_data()
    rank_plan, data_ref, raw = None, DataRef("compas"), None
    if picked is not None:
        data_ref, raw, rows, choice = picked
        try:
            schema = data_ref.schema
            frame = _table(data_ref.source, data_ref.fingerprint, raw, rows, seed,
                           schema.digest() if schema is not None else "", schema)
            if schema is not None and schema.person_id in frame:   # who a row belongs to is no attribute
                frame = frame.drop(columns=[schema.person_id])
            rank_plan = _ranking_widgets(frame, choice)
            if rows is not None:
                rank_plan = rank_plan.replace(synthetic_rows=rows)
        except ValueError as exc:
            st.error(str(exc))
with tab_cal:
    st.markdown("**Can scores stay calibrated within each group while flagging people with the same error "
                "rates?** A plain logistic risk score of the learning data is post-processed.")
    comp_plan = None
    try:
        if learning != DECLARED:
            comp_plan = companion_settings("gf", None, seed, pairs=COMPANION_PAIRS[learning])
        elif learn is not None:
            pairs = _declared_pairs(learn[0].frame, learn_columns.groups)
            if pairs:
                comp_plan = companion_settings(RVD, None, seed, pairs=pairs)
            else:
                st.info("No group column has two groups to compare.")
    except ValueError as exc:
        st.error(str(exc))

result = None
plan = None
try:
    if learning != DECLARED or learn is not None:    # a declared data set not chosen yet: the page said so
        plan = GroupFairnessPlan(data=data_ref, learning=learning, population=population, seed=seed,
                                 lexifair=lex_plan, ranking=rank_plan, companion=comp_plan,
                                 learning_columns=learn_columns)
except ValueError as exc:
    st.error(f"Settings: {exc}")
if plan is not None:
    st.session_state["gf_plan"] = plan
if plan is not None and run_estimate_notice(plan, raw, key="gf_estimate", run=run_group_fairness):
    try:
        result = run_with_progress(run_group_fairness, plan, raw, label="Training and ranking",
                                   cancel_key="gf_cancel")
    except Cancelled:
        st.info("Stopped; change a setting or rerun to start again.")
    except ValueError as exc:
        st.error(str(exc))
if result is not None:
    with tab_lex:
        if result.lexifair is not None:
            _draw_lexifair(result)
    with tab_rank:
        if result.ranking is not None:
            _draw_ranking(result.ranking)
    with tab_cal:
        if result.companion is not None:
            companion_panel("gf", result.companion, plan.companion)
    st.divider()
    report_panel(result, page=PAGE, key="gf_report")
