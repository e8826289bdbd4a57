"""Fairness elicitation: stakeholders judge pairs of real people; their answers become constraints."""
from __future__ import annotations

import dataclasses
import sys
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402

from core.datasets import load_compas  # noqa: E402
from core.fairness import elicitation as el  # noqa: E402
from core.fairness.store import (MAX_REASON_LENGTH, ElicitationStore, code_version,  # noqa: E402
                                 constraint_set_hash, frontier_summary, get_store)
from dashboard.components.export import export_panel  # noqa: E402
from dashboard.figures import fairness_sessions as figs  # noqa: E402

try:  # the learning results component lives in its own module
    from dashboard.components.fairness_results import render_fairness_results  # noqa: E402
except ImportError:  # pragma: no cover - only while the component is missing
    render_fairness_results = None

P = "fe_"
ROLES = ("Facilitator", "Stakeholder", "Demo with simulated stakeholders")
FAC, SH, DEMO = ROLES
REASON_NOTE = ("Reasons are free text written by stakeholders and may reveal personal views or "
               "details: keep them within the facilitation team. They are part of the session export.")
SIM_NOTE = (f"Simulation, not a release: {el.SIMULATION_LABEL.lower()}. Answers were drawn with a "
            "fixed seed by judges who compare records on a few features (spec section 2).")


@st.cache_resource(show_spinner=False)
def _store() -> ElicitationStore:
    return get_store()


def _people() -> pd.DataFrame:
    return load_compas()


def _state(name: str, default=None):
    return st.session_state.get(P + name, default)


def _set(name: str, value) -> None:
    st.session_state[P + name] = value


# ============================================================================ stakeholder

def _clear_card_inputs() -> None:
    """Confidence and reason belong to one card: clear them so they never ride along with the next."""
    st.session_state[P + "confidence"] = "not given"
    st.session_state[P + "reason"] = ""


def _answer(token: str, position: int, response: str, event_id: str) -> None:
    """Button callback: one answer, one transaction; the card advances only after the commit.

    The confidence and reason typed on this card go with it (an undo takes neither); if the
    write fails they stay on the card so the stakeholder can correct them.
    """
    confidence = st.session_state.get(P + "confidence", "not given")
    confidence = confidence if isinstance(confidence, int) and response not in (el.SKIP, el.RETRACT) else None
    reason = None if response == el.RETRACT else st.session_state.get(P + "reason") or None
    try:
        written = _store().record_answer(token, position, response, event_id, confidence=confidence,
                                         reason=reason)
    except (ValueError, PermissionError) as err:
        _set("answer_error", str(err))
        return
    _set("answer_error", None)
    if written:
        _set("view_pos", None)  # go to the first open card, computed from the database
        _clear_card_inputs()


def _goto(position: int | None) -> None:
    _set("view_pos", position)
    _clear_card_inputs()


def _join(code_key: str, name_key: str) -> None:
    if not st.session_state.get(P + "consent"):
        _set("join_error", "Please read the note on how your answers are used and tick the box to join.")
        return
    try:
        login = _store().join(st.session_state.get(code_key, ""), st.session_state.get(name_key, ""))
    except (ValueError, PermissionError) as err:
        _set("join_error", str(err))
        return
    _set("join_error", None)
    _set("login", {"token": login.token, "name": login.pseudonym})
    _set("view_pos", None)


def _resume(token_key: str) -> None:
    try:
        login = _store().resume(st.session_state.get(token_key, ""))
    except (ValueError, PermissionError) as err:
        _set("join_error", str(err))
        return
    _set("join_error", None)
    _set("login", {"token": login.token, "name": login.pseudonym})
    _set("view_pos", None)


def _person_column(container, title: str, card: pd.DataFrame, column: str) -> None:
    with container.container(border=True):
        st.markdown(f"### {title}")
        for feature, value in zip(card["Feature"], card[column]):
            st.markdown(f"**{feature}:** {value}")


def stakeholder_view(join_code: str | None) -> None:
    login = _state("login")
    if not login:
        st.subheader("Join a session")
        st.write("Your facilitator gives you a join code. Pick any name or nickname; it is only "
                 "used to show your progress to the facilitator.")
        if _state("join_error"):
            st.error(_state("join_error"))
        c1, c2 = st.columns(2)
        c1.text_input("Join code", value=join_code or "", key=P + "join_code", max_chars=12)
        c2.text_input("Your name or nickname", key=P + "join_name", max_chars=60)
        st.checkbox("I understand that my answers are stored under this name, shown to the facilitator, "
                    "and used, pooled with others, to constrain a statistical model. I can ask the "
                    "facilitator to withdraw them.", key=P + "consent")
        st.button("Join", key=P + "join", type="primary", on_click=_join,
                  args=(P + "join_code", P + "join_name"))
        with st.expander("Resume after a disconnect"):
            st.text_input("Your resume code", key=P + "resume_token", type="password")
            st.button("Resume", key=P + "resume", on_click=_resume, args=(P + "resume_token",))
        return

    store = _store()
    token = login["token"]
    try:
        plan = store.my_assignment(token)
        info = store.resume(token)
        session = store.my_session(token)
    except (ValueError, PermissionError) as err:
        st.error(str(err))
        st.button("Sign out", key=P + "signout_err", on_click=lambda: _set("login", None))
        return
    config = el.SessionConfig.from_dict(session["config"])
    n = len(plan)
    answered = int(plan["response"].notna().sum())
    st.subheader(f"Welcome, {info.pseudonym}")
    st.caption(f"Session: {session['name']}" + (" (simulated)" if session["simulated"] else ""))
    if session["status"] != "open":
        st.warning("The facilitator has closed this session; answers can no longer be changed.")
    with st.expander("Your resume code (keep it to continue later or on another device)"):
        st.code(token, language=None)
    st.progress(answered / n if n else 1.0, text=f"{answered} of {n} cards answered")
    if _state("answer_error"):
        st.error(_state("answer_error"))

    open_positions = plan.loc[plan["response"].isna(), "position"]
    view = _state("view_pos")
    if view is None or not 0 <= view < n:
        view = None if open_positions.empty else int(open_positions.iloc[0])
    if view is None:
        st.success("All cards answered. Thank you! You can go back and change any answer.")
        st.button("Review my answers from the start", key=P + "review", on_click=_goto, args=(0,))
        return

    row = plan.iloc[view]
    card = el.pair_card(_people(), int(row["a"]), int(row["b"]), config.features)
    st.markdown(f"#### Card {view + 1} of {n}")
    st.write(config.instructions)
    left, right = st.columns(2)
    _person_column(left, "Person A", card, "Person A")
    _person_column(right, "Person B", card, "Person B")
    current = row["response"]
    if current is not None:
        st.info(f"Your answer: **{el.RESPONSE_LABELS.get(current, current)}**. Choose again to change it.")

    event_id = uuid.uuid4().hex  # minted per drawn card: a re-delivered click is a no-op
    options = el.RESPONSE_MODES[config.response_mode]
    if config.response_mode == "four_option":
        better = "a risk prediction no higher" if config.favourable_label == 0 else "a prediction no less favourable"
        st.caption(f"'At least as well' means {better} than the other person's.")
    per_row = 2 if len(options) > 2 else len(options)  # long labels stay readable on a phone
    cols = [c for _ in range(0, len(options), per_row) for c in st.columns(per_row)]
    for col, option in zip(cols, options):
        col.button(el.RESPONSE_LABELS[option], key=f"{P}ans_{option}", type="primary",
                   use_container_width=True, on_click=_answer, args=(token, view, option, event_id))
    st.select_slider("How sure are you? (optional)", ["not given", 1, 2, 3, 4, 5], value="not given",
                     key=P + "confidence", help="1 = a guess, 5 = certain. Leave it if you prefer.")
    st.text_area("Why? (optional, only the facilitator sees it)", key=P + "reason", max_chars=MAX_REASON_LENGTH,
                 height=68, placeholder="A few words on what decided it for you",
                 help="Sent with your answer or skip. Avoid names or details that identify anyone.")
    nav = st.columns(4)
    nav[0].button("← Back", key=P + "back", disabled=view == 0, use_container_width=True,
                  on_click=_goto, args=(max(0, view - 1),))
    nav[1].button("Skip this card", key=P + "skip", use_container_width=True,
                  on_click=_answer, args=(token, view, el.SKIP, event_id))
    nav[2].button("Undo answer", key=P + "undo", disabled=current is None, use_container_width=True,
                  on_click=_answer, args=(token, view, el.RETRACT, event_id))
    nav[3].button("Next →", key=P + "next", disabled=current is None or view >= n - 1,
                  use_container_width=True, on_click=_goto, args=(view + 1,))
    st.caption("Labels and model scores are never shown. Your answers are stored as soon as you click; "
               "if you lose the connection, come back with your resume code.")


# ============================================================================ facilitator

def _create_session() -> None:
    try:
        config = el.SessionConfig(
            features=tuple(st.session_state[P + "features"]),
            n_core=int(st.session_state[P + "n_core"]), n_random=int(st.session_state[P + "n_random"]),
            n_repeat=int(st.session_state[P + "n_repeat"]),
            response_mode=st.session_state[P + "mode"], seed=int(st.session_state[P + "seed"]),
            instructions=st.session_state.get(P + "instructions", "").strip() or el.SessionConfig.instructions)
        created = _store().create_session(config, st.session_state.get(P + "name", ""))
    except ValueError as err:
        _set("create_error", str(err))
        return
    _set("create_error", None)
    _set("fac", {"session_id": created.session_id, "join_code": created.join_code,
                 "key": created.facilitator_key})
    _set("show_key", True)


def _open_session() -> None:
    try:
        info = _store().open_session(st.session_state.get(P + "open_code", ""),
                                     st.session_state.get(P + "open_key", ""))
    except (ValueError, PermissionError) as err:
        _set("open_error", str(err))
        return
    _set("open_error", None)
    _set("fac", {"session_id": info["session_id"], "join_code": info["join_code"],
                 "key": st.session_state[P + "open_key"].strip()})


def _import_session() -> None:
    upload = st.session_state.get(P + "import_file")
    if upload is None:
        _set("open_error", "Choose an exported session file first.")
        return
    try:
        created = _store().import_session(upload.getvalue())
    except ValueError as err:
        _set("open_error", str(err))
        return
    _set("open_error", None)
    _set("fac", {"session_id": created.session_id, "join_code": created.join_code,
                 "key": created.facilitator_key})
    _set("show_key", True)


def _design_preview() -> None:
    """The core pairs the chosen seed gives everyone, and an export of the planned design."""
    try:
        config = el.SessionConfig(
            features=tuple(st.session_state.get(P + "features", el.DEFAULT_FEATURES)),
            n_core=int(st.session_state.get(P + "n_core", 10)), n_random=int(st.session_state.get(P + "n_random", 40)),
            n_repeat=int(st.session_state.get(P + "n_repeat", 2)),
            response_mode=st.session_state.get(P + "mode", "binary"), seed=int(st.session_state.get(P + "seed", 0)))
    except ValueError as err:
        st.error(str(err))
        return
    people = _people()
    core = el.core_pairs(config, len(people))
    cols = list(config.features)
    left = people.iloc[core[:, 0]][cols].reset_index(drop=True).add_suffix(" (A)")
    right = people.iloc[core[:, 1]][cols].reset_index(drop=True).add_suffix(" (B)")
    table = pd.concat([pd.DataFrame({"i": core[:, 0], "j": core[:, 1]}), left, right], axis=1)
    with st.expander(f"Preview: the {len(core)} core pairs every stakeholder will see"):
        st.dataframe(table, hide_index=True, key=P + "core_preview")
        export_panel("Fairness elicitation design", config.to_dict(), {"core_pairs": table},
                     key=P + "design_export")


def facilitator_setup() -> None:
    st.subheader("Create a session")
    if _state("create_error"):
        st.error(_state("create_error"))
    st.text_input("Session name", key=P + "name", value="Risk tool workshop")
    st.multiselect("Features shown on each card (labels and scores are never shown)",
                   list(el.DISPLAYABLE_FEATURES), default=list(el.DEFAULT_FEATURES), key=P + "features",
                   format_func=lambda f: el.FEATURE_LABELS.get(f, f))
    c = st.columns(5)
    c[0].number_input("Core pairs (everyone)", 0, 100, 10, key=P + "n_core")
    c[1].number_input("Random pairs", 0, 400, 40, key=P + "n_random")
    c[2].number_input("Repeated pairs", 0, 20, 2, key=P + "n_repeat")
    c[3].selectbox("Answers", list(el.RESPONSE_MODES), key=P + "mode",
                   format_func=lambda m: "same / may differ" if m == "binary" else "four options")
    c[4].number_input("Seed", 0, 2**31 - 1, 0, key=P + "seed")
    st.text_area("Instructions shown to stakeholders (keep them neutral: no fairness guidance)",
                 el.SessionConfig.instructions, key=P + "instructions", height=80)
    st.button("Create session", key=P + "create", type="primary", on_click=_create_session)
    _design_preview()

    st.subheader("Open a session")
    if _state("open_error"):
        st.error(_state("open_error"))
    c1, c2 = st.columns(2)
    c1.text_input("Join code", key=P + "open_code")
    c2.text_input("Facilitator key", key=P + "open_key", type="password")
    st.button("Open", key=P + "open", on_click=_open_session)
    with st.expander("Import an exported session (JSON or CSV)"):
        st.file_uploader("Session file", type=["json", "csv"], key=P + "import_file")
        st.button("Import", key=P + "import", on_click=_import_session)


def _progress_block(store: ElicitationStore, fac: dict, progress: pd.DataFrame | None = None) -> None:
    """Progress table and chart; re-read from the store when refreshed live (progress None)."""
    if progress is None:
        progress = store.progress(fac["session_id"], fac["key"])
    st.dataframe(progress, hide_index=True, key=P + "progress_table",
                 column_config={"share_same": st.column_config.NumberColumn("share 'same'", format="%.2f"),
                                "self_agreement": st.column_config.NumberColumn("self-agreement",
                                                                                format="%.2f")})
    st.plotly_chart(figs.progress_figure(progress), key=P + "progress_fig")


def _withdraw(fac: dict) -> None:
    name = st.session_state.get(P + "withdraw_name")
    if not name:
        return
    try:
        _store().delete_stakeholder(fac["session_id"], fac["key"], name)
    except (ValueError, PermissionError) as err:
        _set("manage_error", str(err))
        return
    _set("manage_error", None)


def _set_status(fac: dict, status: str) -> None:
    try:
        _store().set_status(fac["session_id"], fac["key"], status)
    except (ValueError, PermissionError) as err:
        _set("manage_error", str(err))
        return
    _set("manage_error", None)


def facilitator_session(fac: dict, simulated: bool = False) -> None:
    store = _store()
    try:
        info = store.open_session(fac["join_code"], fac["key"])
    except (ValueError, PermissionError) as err:
        st.error(str(err))
        st.button("Forget this session", key=P + "forget_err", on_click=_set, args=("fac", None))
        return
    config = el.SessionConfig.from_dict(info["config"])
    if _state("manage_error"):
        st.error(_state("manage_error"))
    head = st.columns([3, 1, 1])
    head[0].subheader(info["name"])
    head[1].metric("Join code", info["join_code"])
    head[2].metric("Status", info["status"])
    if simulated or info["simulated"]:
        st.warning(SIM_NOTE)
    if _state("show_key"):
        st.warning("Facilitator key: copy it now. It is stored only as a hash and cannot be shown again; "
                   "you need it to reopen this session or see its results.")
        st.code(fac["key"], language=None)
        st.button("I have saved the key", key=P + "key_saved", on_click=_set, args=("show_key", False))
    st.caption(f"Stakeholders open this page with `?join={info['join_code']}` or enter the code under "
               "'Stakeholder'. Cards per stakeholder: "
               f"{config.n_core} core + {config.n_random} random + {config.n_repeat} repeated.")

    # One read of the roster and answers per run, shared by every tab.
    progress = store.progress(info["session_id"], fac["key"])
    judged = store.judgments(info["session_id"], fac["key"])
    tab_progress, tab_constraints, tab_results, tab_export = st.tabs(
        ["Live progress", "Agreement and constraints", "Learning results", "Export"])
    with tab_progress:
        live = st.toggle("Refresh every 5 seconds", key=P + "live", value=False)
        if live:
            st.fragment(run_every=5)(_progress_block)(store, fac)
        else:
            _progress_block(store, fac, progress)
        b = st.columns(3)
        b[0].button("Refresh now", key=P + "refresh")
        if info["status"] == "open":
            b[1].button("Close to new answers", key=P + "close", on_click=_set_status, args=(fac, "closed"))
        else:
            b[1].button("Reopen", key=P + "reopen", on_click=_set_status, args=(fac, "open"))
        b[2].button("Leave this session", key=P + "leave", on_click=_set, args=("fac", None))
        with st.expander("Withdraw a stakeholder (deletes all their answers)"):
            st.selectbox("Stakeholder", list(progress["stakeholder"]), key=P + "withdraw_name", index=None)
            st.button("Withdraw and delete", key=P + "withdraw", on_click=_withdraw, args=(fac,))

    with tab_constraints:
        c = st.columns(2)
        weighting = c[0].radio("Weighting", el.WEIGHTINGS, key=P + "weighting", horizontal=True,
                               format_func=lambda w: {"panel": "share of the whole panel (paper)",
                                                      "judged": "share of those who saw the pair"}[w])
        min_support = c[1].slider("Minimum support", 0.0, 1.0, 0.0, 0.05, key=P + "min_support",
                                  help="Drop pairs whose weight is below this share (a veto guard).")
        roster = list(progress["stakeholder"])
        chosen = st.multiselect("Stakeholders whose answers are pooled (empty = the whole panel)", roster,
                                key=P + "include", placeholder="the whole panel")
        panel = chosen or roster
        judged = judged[judged["stakeholder"].isin(panel)].reset_index(drop=True)
        constraints = el.aggregate_constraints(judged, weighting, n_stakeholders=max(1, len(panel)),
                                               favourable_label=config.favourable_label,
                                               min_support=min_support)
        agreement = el.inter_rater_agreement(judged, config.favourable_label) if len(judged) else {}
        contested = el.contested_pairs(judged, config.favourable_label) if len(judged) else pd.DataFrame()
        m = st.columns(4)
        m[0].metric("Answers", int((judged["response"] != el.SKIP).sum()) if len(judged) else 0)
        m[1].metric("Pairs with a constraint", int((np.maximum(constraints["w_ij"], constraints["w_ji"]) > 0).sum()))
        kappa = agreement.get("fleiss_kappa", float("nan"))
        m[2].metric("Fleiss' kappa (core pairs)", "n/a" if not np.isfinite(kappa) else f"{kappa:.2f}",
                    help="Agreement beyond chance on the pairs everyone saw; needs two or more judges.")
        sa = progress["self_agreement"].dropna()
        m[3].metric("Self-agreement on repeats", "n/a" if sa.empty else f"{sa.mean():.2f}")
        st.plotly_chart(figs.agreement_figure(constraints), key=P + "agreement_fig")
        st.markdown("**Contested pairs** (judges split, or opposite orientations asserted)")
        contested = _with_reasons(contested, judged)
        st.dataframe(contested, hide_index=True, key=P + "contested_table")
        if len(judged) and judged["reason"].notna().any():
            st.caption("The `reasons` column quotes what stakeholders wrote about the pair. " + REASON_NOTE)
        st.markdown("**Constraint set** (one row per pair; `weight` = treat alike, `w_ij`/`w_ji` ordered)")
        st.dataframe(constraints, hide_index=True, key=P + "constraints_table")
        with st.expander("Every live answer with its reason (facilitator only; pseudonyms)"):
            st.caption(REASON_NOTE)
            st.dataframe(judged, hide_index=True, key=P + "judgments_table")

    results: dict[str, pd.DataFrame] = {}
    with tab_results:
        usable = constraints[np.maximum(constraints["w_ij"], constraints["w_ji"]) > 0]
        if render_fairness_results is None:
            st.info("Not yet available: the learning results component is not installed in this build.")
        elif usable.empty:
            st.info("No constraints yet: results appear once stakeholders have asked for equal treatment "
                    "of at least one pair.")
        else:
            who = "whole panel" if not chosen else ", ".join(chosen[:3]) + ("..." if len(chosen) > 3 else "")
            label = f"{info['name']} ({who}, {weighting} weighting, {len(usable)} pairs)"
            if simulated or info["simulated"]:
                label += " - simulated stakeholders"
            aggregation = {"weighting": weighting, "min_support": float(min_support),
                           "selection": "chosen" if chosen else "whole panel", "stakeholders": sorted(panel)}
            usable = usable.reset_index(drop=True)
            try:
                results = render_fairness_results(
                    P + "results", usable, label, run_context=aggregation,
                    on_result=lambda cfg, res: _log_run(store, fac, usable, aggregation, cfg, res),
                    run_history=lambda: _run_history(store, fac)) or {}
            except ValueError as err:
                st.error(str(err))

    with tab_export:
        st.write("The session export holds settings, pseudonyms, cards, every answer event with its "
                 "reason, and the log of learner runs (no keys or resume codes). It can be imported "
                 "again as a new session; the CSV leaves the run log out.")
        st.caption(REASON_NOTE)
        d = st.columns(2)
        # Built only when clicked: every event of the session would otherwise be read on each rerun.
        sid, key = info["session_id"], fac["key"]
        d[0].download_button("Export session (JSON)", lambda: store.export_json(sid, key),
                             file_name=f"session_{info['join_code']}.json", mime="application/json",
                             key=P + "dl_session_json")
        d[1].download_button("Export session (CSV)", lambda: store.export_csv(sid, key),
                             file_name=f"session_{info['join_code']}.csv", mime="text/csv",
                             key=P + "dl_session_csv")
        tables = {"progress": progress, "judgments": judged, "constraints": constraints,
                  "contested_pairs": contested, **results}
        export_panel("Fairness elicitation",
                     {**config.to_dict(), "weighting": weighting, "min_support": min_support,
                      "stakeholders_pooled": sorted(panel),
                      "simulated": bool(simulated or info["simulated"])},
                     tables, extra={"agreement": agreement}, key=P + "export")


def _with_reasons(contested: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
    """Contested pairs with what each stakeholder wrote about them ("name: reason" joined by " | ")."""
    if contested.empty or judged.empty:
        return contested.assign(reasons=pd.Series(dtype=object))
    given = judged[judged["reason"].notna()]
    quotes = pd.DataFrame({"i": np.minimum(given["a"], given["b"]), "j": np.maximum(given["a"], given["b"]),
                           "quote": given["stakeholder"] + ": " + given["reason"].astype(str)})
    joined = quotes.groupby(["i", "j"])["quote"].agg(" | ".join).rename("reasons").reset_index()
    return contested.merge(joined, on=["i", "j"], how="left")


def _log_run(store: ElicitationStore, fac: dict, constraints: pd.DataFrame, aggregation: dict,
             config, result) -> bool:
    """Record a learner run in the session's audit log; False (retry on the next rerun) if it failed."""
    try:
        store.record_fit_run(fac["session_id"], fac["key"], constraint_hash=constraint_set_hash(constraints),
                             aggregation=aggregation, learner=dataclasses.asdict(config),
                             summary=frontier_summary(result.points, len(constraints)),
                             code_version=code_version())
    except (ValueError, PermissionError, SQLAlchemyError) as err:
        st.warning(f"This run could not be added to the run history: {err}")
        return False
    return True


def _run_history(store: ElicitationStore, fac: dict) -> pd.DataFrame:
    """The session's logged learner runs as a table, newest first."""
    runs = store.fit_runs(fac["session_id"], fac["key"])
    rows = []
    for run in reversed(runs):
        agg, learner = run["aggregation"], run["learner"]
        pooled = agg.get("stakeholders") or []
        hull = [p for p in run["frontier"] if p["on_hull"]] or run["frontier"]
        fairest = min(hull, key=lambda p: p["unfairness"]) if hull else {}
        rows.append({
            "when (UTC)": str(run["created_at"])[:19].replace("T", " "),
            "status": "superseded" if run["superseded"] else "current",
            "constraint set": str(run["constraint_hash"])[:12], "pairs": run["n_constraints"],
            "weighting": agg.get("weighting"), "min support": agg.get("min_support"),
            "stakeholders": (f"whole panel ({len(pooled)})" if agg.get("selection") == "whole panel"
                             else ", ".join(pooled)),
            "sweep": learner.get("sweep"), "rounds": learner.get("T"), "oracle": learner.get("oracle"),
            "averaging": learner.get("averaging"), "pairs held out": learner.get("pair_holdout"),
            "race and sex used": learner.get("use_protected"), "seed": learner.get("seed"),
            "least-constrained error": run["unconstrained_error"],
            "fairest hull point": (f"unfairness {fairest['unfairness']:.3f}, error {fairest['error']:.3f}"
                                   if fairest else ""),
            "code": run["code_version"], "note": run["note"] or ""})
    return pd.DataFrame(rows)


# ============================================================================ demo

def _fill_demo() -> None:
    try:
        n = int(st.session_state[P + "demo_n"])
        kind = st.session_state[P + "demo_kind"]
        seed = int(st.session_state[P + "demo_seed"])
        config = el.SessionConfig(n_core=10, n_random=40, n_repeat=2, seed=seed)
        store = _store()
        created = store.create_session(config, f"Demo panel ({n} simulated, {kind} judges)", simulated=True)
        frame = _people()
        rng = np.random.default_rng([seed, 11])
        logins = [store.join(created.join_code, f"simulated-{k + 1:02d}", simulated=True) for k in range(n)]
        plans = []
        for login in logins:
            plan = store.my_assignment(login.token).drop(columns=["response", "revision"])
            plans.append(plan.assign(stakeholder=login.pseudonym, token=login.token))
        answered = el.simulate_judgments(frame, pd.concat(plans, ignore_index=True), rng, kind=kind)
        for token, part in answered.groupby("token", sort=False):
            store.record_answers(token, part[["position", "response"]])
    except ValueError as err:
        _set("demo_error", str(err))
        return
    _set("demo_error", None)
    _set("demo", {"session_id": created.session_id, "join_code": created.join_code,
                  "key": created.facilitator_key})


def demo_view() -> None:
    st.info("The demo opens a session filled by simulated stakeholders (labelled as such everywhere) so "
            "the monitor and results can be explored without a live room.")
    if _state("demo_error"):
        st.error(_state("demo_error"))
    c = st.columns(3)
    c[0].number_input("Simulated stakeholders", 2, 60, 12, key=P + "demo_n")
    c[1].selectbox("Judges", ["metric", "score"], key=P + "demo_kind",
                   format_func=lambda k: {"metric": "similarity on record features",
                                          "score": "similar risk score"}[k])
    c[2].number_input("Seed", 0, 2**31 - 1, 0, key=P + "demo_seed")
    st.button("Fill a demo session", key=P + "demo_run", type="primary", on_click=_fill_demo)
    demo = _state("demo")
    if demo:
        facilitator_session(demo, simulated=True)


# ============================================================================ page

st.title("Pairwise fairness elicitation")
st.caption("Which pairs of real people do stakeholders say must be treated alike, and what does "
           "honouring those judgments cost a recidivism risk model?")

join_param = st.query_params.get("join")
if join_param and P + "role" not in st.session_state:
    st.session_state[P + "role"] = SH
role = st.radio("Open as", ROLES, key=P + "role", horizontal=True)

if role == SH:
    stakeholder_view(join_param)
elif role == FAC:
    fac = _state("fac")
    if fac:
        facilitator_session(fac)
    else:
        facilitator_setup()
        st.caption("Data: ProPublica COMPAS two-year file (7,214 people, identifiers removed). Pairs are "
                   "drawn uniformly at random plus shared core pairs; see the export for the full design.")
else:
    demo_view()
