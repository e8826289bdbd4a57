"""Fairness elicitation: stakeholders judge pairs of people; their answers become constraints.

The cards show real records, or people of a private synthetic copy of them: a release made with
OpenDP's noise, recorded once per copy in the data set's project ledger and stored in the sessions
database under its copy id, so every later view loads the same people instead of drawing new ones.

The page turns widgets into an ElicitationPlan (the design) or into pooling choices, calls core,
and draws what comes back. A stakeholder's view lives in the URL (`?join=CODE&me=RESUME-CODE`), so
a reload or a trip to another page comes back to their cards; that link opens only their own view. The
browser she joined on keeps a device token (an HttpOnly cookie), so the bare join link reopens her cards
there too; on another device her resume code, shown at the foot of every card, brings her back.
"""
from __future__ import annotations

import dataclasses
import html
import json
import sys
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402

from core.datasets import COMPAS_POPULATIONS, load_compas  # noqa: E402
from core.fairness import ElicitationPlan, FrontierPlan, run  # noqa: E402
from core.fairness import elicitation as el  # noqa: E402
from core.fairness.elicitation_plan import (design_copy, fill_demo_session, private_pairs_plan,  # noqa: E402
                                           run_elicitation, session_people)
from core.fairness.private_pairs import SyntheticPeople, synthetic_people  # noqa: E402
from core.fairness.private_pairs import (PAIR_DELTA, SAMPLING_NOTE,  # noqa: E402
                                         SYNTHETIC_NOTE, SYNTHETIC_PEOPLE, PrivatePairsPlan, new_copy_id,
                                         planned_ledger)
from core.fairness.session_summary import (Pooling, display_labels, learner_pairs,  # noqa: E402
                                           run_history_table, summarise_session)
from core.fairness.store import (MAX_NAME_LENGTH, MAX_REASON_LENGTH, MAX_SESSION_NAME_LENGTH,  # noqa: E402
                                 ElicitationStore, code_version, constraint_set_hash, format_code,
                                 frontier_summary, get_store)
from core.fairness.store.devices import shown_resume_code  # noqa: E402
from core.privacy.project_ledger import data_key  # noqa: E402
from core.releases import pairs_copy_release  # noqa: E402
from core.report import tables_zip  # noqa: E402
from dashboard.components.params_form import check_shown, field_key, field_widget, plan_widget_values  # noqa: E402
from dashboard.components.plain_text import bare, plain  # noqa: E402
from dashboard.components.progress import run_with_progress  # noqa: E402
from dashboard.components.report_panel import report_panel, saved_report_loader  # noqa: E402
from core.figures import fairness_sessions as figs  # noqa: E402
from dashboard.page_registry import PAGES  # noqa: E402

from dashboard.components.access import current_role, identity_provider_configured  # noqa: E402
from dashboard.components.fairness_results import render_fairness_results  # noqa: E402
from dashboard.components.join_link import browser_page_url, join_panel, join_url, projector_qr  # noqa: E402
from dashboard.components.ledger_badge import project_ledger  # noqa: E402
from dashboard.components.release_confirm import release_button, stated_spend  # noqa: E402
from dashboard.components.room_device import (card_layout, device_token, forget_device, keep_device,  # noqa: E402
                                              scroll_to_card)
from dashboard.components.wide_table import wide_table  # noqa: E402

P = "fe_"
PAGE = "Fairness elicitation"
#: The page's address under the dashboard, as the navigation registers it (the join link points there).
TOOL_PATH = next(entry.url_path for entry in PAGES if entry.file == "tools/fairness_elicitation.py")
ROLES = ("Facilitator", "Stakeholder", "Demo with simulated stakeholders")
FAC, SH, DEMO = ROLES
KEEP = "session"  # widget values survive a trip to another page
REASON_NOTE = ("Reasons are free text written by stakeholders and may reveal personal views or "
               "details: keep them within the facilitation team. They are part of the session export.")
SIM_NOTE = (f"Simulation, not a release: {el.SIMULATION_LABEL.lower()}. Answers were drawn with a "
            "fixed seed by judges who compare records on a few features (spec section 2).")



def _store() -> ElicitationStore:
    """The project database's store for the configured URL (core keeps one per URL and process; a
    Streamlit cache here would keep the first URL's store after the configuration changes)."""
    return get_store()


#: The design's defaults, declared once in core (ElicitationPlan); the widgets start from them.
DEFAULT = ElicitationPlan()


def _copy(config: ElicitationPlan) -> SyntheticPeople | None:
    """The synthetic copy a design's cards show, loaded from the sessions database: what its runs take as
    data (None for real records, or for a copy never stored: core then says why it cannot be shown)."""
    sub = config.private_pairs_plan()
    if sub is None or not sub.copy_id:
        return None
    return synthetic_people(sub, _store())


def _people(config: ElicitationPlan | None = None) -> pd.DataFrame:
    """The card frame a session's pairs index: real rows, or its synthetic copy's card text."""
    if config is None or not config.synthetic:
        return load_compas()
    return session_people(config, _copy(config))[0]


def existing_copy(sub: PrivatePairsPlan | None) -> str | None:
    """The newest stored copy of this population and epsilon (None when there is none, or no store)."""
    if sub is None:
        return None
    try:
        found = _store().find_copies(sub)
    except ValueError:
        return None
    return found[0]["copy_id"] if found else None


def copy_button(label: str, key: str, plan_of, then) -> None:
    """The button that creates a session: a plain button for real records or a reused copy; when a new
    synthetic copy is needed, a release (one confirmation, then reserve -> make the copy -> commit), and
    the copy is stored and the session made only once the release is committed."""
    try:
        sub, error = plan_of().private_pairs_plan(), None
    except ValueError as exc:
        sub, error = None, str(exc)
    synthetic = st.session_state.get(P + "pair_source") == "dp_synthetic"
    if (sub is None and not (synthetic and error)) or (sub is not None and sub.copy_id):
        if sub is not None:
            st.caption(f"The cards show synthetic copy {sub.copy_id} (epsilon {sub.epsilon:g}, delta "
                       f"{PAIR_DELTA:g}), already released and recorded; reusing it adds nothing to the ledger.")
        st.button(label, key=key, type="primary", on_click=then)
        return
    copy_id = st.session_state.setdefault(P + "next_copy_id", new_copy_id())
    earlier = existing_copy(sub)      # a copy of this population and epsilon already released: a repeat
    release = what = None
    if sub is not None:               # its rho stated at the ledger's delta, as the confirmation states it
        spend = stated_spend(planned_ledger(sub), data_key(sub.data))
        what = f"synthetic pair people (MST, {spend})"
        release = pairs_copy_release(sub, copy_id, label=f"synthetic pair people (MST, {spend}, copy {copy_id})")
        st.caption(f"{label} makes a new private synthetic copy of the people ({SYNTHETIC_PEOPLE:,} synthetic "
                   f"people, {spend}) with OpenDP's noise, stores it, and records it as a release of the COMPAS "
                   "data in the project ledger.")
    made = release_button(label, key=key, error=error, what=what, release=release,
                          same_as=None if earlier is None else lambda r: r.release_key.endswith(earlier))
    if made is None:
        return
    st.session_state.pop(P + "next_copy_id", None)
    try:
        _store().save_copy(made)
    except ValueError as exc:
        st.error(f"The copy was released and recorded, but it could not be stored: {exc}")
        return
    st.session_state[P + "released_copy"] = made
    then()
    st.rerun()


def release_copy(plan: ElicitationPlan) -> ElicitationPlan | None:
    """The plan with its copy: real records and a reused copy as they are; otherwise the copy just released
    through the confirmation (recorded in the project ledger and stored before anyone sees it)."""
    sub = plan.private_pairs_plan()
    if sub is None or sub.copy_id:
        return plan
    made = st.session_state.pop(P + "released_copy", None)
    if made is None or made.plan.replace(copy_id=sub.copy_id) != sub:
        raise ValueError("A new synthetic copy is made only through its release confirmation: press the button "
                         "again and confirm.")
    return plan.replace(pair_copy=made.copy_id)


def _state(name: str, default=None):
    return st.session_state.get(P + name, default)


def _set(name: str, value) -> None:
    st.session_state[P + name] = value


def _client() -> str:
    """Who is trying a code, for the guessing limit: this browser session, with its address.

    Not the address alone: a workshop room often shares one address (behind a reverse proxy,
    everyone does), and typos there must not lock everyone out. Only this browser session is ever
    refused for its own wrong codes; past the address or overall limit the store answers wrong
    codes slowly, and a right code or a `?me=` link always opens.
    """
    if P + "client" not in st.session_state:
        st.session_state[P + "client"] = uuid.uuid4().hex[:16]
    try:
        address = st.context.ip_address or ""
    except Exception:  # noqa: BLE001 - not available outside a served session
        address = ""
    return f"{address}/{st.session_state[P + 'client']}"


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


def _signed_in(login, *, bound: bool = False) -> None:
    """Remember the stakeholder in this browser session and in the URL (reloads keep their view), and let
    this browser's device token reopen her cards from the join link: bound here when the browser sent one,
    else the server sets one when the card view asks it to (``keep_device``)."""
    _set("join_error", None)
    _set("login", {"token": login.token, "name": login.pseudonym})
    _set("view_pos", None)
    _set("scrolled_to", None)
    _set("forget_device", None)
    st.query_params["me"] = login.token
    device = device_token()
    if device is not None and not bound:
        try:
            _store().bind_device(login.token, device)
        except (ValueError, PermissionError):
            device = None
    _set("keep_device", None if device is not None else login.token)


def _join(code_key: str, name_key: str) -> None:
    if not st.session_state.get(P + "consent"):
        _set("join_error", "Please read the note on how your answers are used and tick the box to join.")
        return
    try:
        login = _store().join(st.session_state.get(code_key, ""), st.session_state.get(name_key, ""),
                              resume_code=st.session_state.get(P + "resume_code") or None,
                              device=device_token(), client=_client())
    except (ValueError, PermissionError) as err:
        _set("join_error", str(err))
        return
    st.session_state[P + "resume_code"] = ""
    _signed_in(login)


def _sign_out() -> None:
    """Sign out on this device: the join link no longer reopens her cards here."""
    login = _state("login")
    _set("login", None)
    _set("signed_out", True)
    st.query_params.pop("me", None)
    device = device_token()
    if login and device is not None:
        try:
            _store().forget_device(login["token"], device)
        except (ValueError, PermissionError):
            pass
    elif login:                   # a token the server set after this connection opened: it forgets it
        _set("forget_device", login["token"])
    _set("keep_device", None)


def restore_stakeholder() -> None:
    """A stakeholder link (`?me=...`) signs this browser session in as that stakeholder, once; a join link
    (`?join=CODE`) does when this browser's device token is bound to a stakeholder of that session."""
    token = st.query_params.get("me")
    login = _state("login")
    if login and (not token or login["token"] == token):
        return
    if not token:
        join_code, device = st.query_params.get("join"), device_token()
        if not join_code or device is None or _state("signed_out"):
            return
        try:
            found = _store().device_login(join_code, device)
        except ValueError:        # a malformed join code: the join form says so when it is used
            return
        if found is not None:
            st.session_state[P + "role"] = SH
            _signed_in(found, bound=True)
        return
    st.session_state[P + "role"] = SH  # a stakeholder link never opens the facilitator's screens
    try:
        _signed_in(_store().resume(token, client=_client()))
    except (ValueError, PermissionError) as err:
        _set("join_error", f"{err} (from the link you opened)")
        st.query_params.pop("me", None)


def card_table(config: dict, a: int, b: int) -> pd.DataFrame:
    """The two people of one card in one compact table: the features as rows, Person A and Person B as
    columns, so a phone shows both at once (no scrolling from one person to the other).

    Kept per session design (its stored settings, which name the population, the synthetic copy and the
    features) and pair: a card's people never change, and every stakeholder of a session sees the core
    pairs. A copy this database does not hold raises ValueError (not kept). The table is shared, not
    copied: callers only draw it."""
    return _card_table(json.dumps(config, sort_keys=True, default=str), int(a), int(b))


@st.cache_resource(max_entries=20_000, show_spinner=False)
def _card_table(config: str, a: int, b: int) -> pd.DataFrame:
    plan = ElicitationPlan.from_dict(json.loads(config))
    card = el.pair_card(_people(plan), a, b, plan.features)
    table = card.set_index("Feature")[["Person A", "Person B"]].map(lambda v: bare(str(v)))
    table.index = [bare(str(f)) for f in table.index]
    table.index.name = "Feature"
    return table


def stakeholder_join(join_code: str | None) -> None:
    st.subheader("Join a session")
    st.write("Your facilitator gives you a join code. Pick any name or nickname; it is only "
             "used to show your progress to the facilitator.")
    if _state("join_error"):
        st.error(_state("join_error"))
    if join_code and P + "join_code" not in st.session_state:
        st.session_state[P + "join_code"] = join_code
    c1, c2 = st.columns(2)
    c1.text_input("Join code", key=P + "join_code", max_chars=20, persist_state=KEEP)
    c2.text_input("Your name or nickname", key=P + "join_name", max_chars=MAX_NAME_LENGTH, persist_state=KEEP)
    st.text_input("Resume code (if you started on another device)", key=P + "resume_code",
                  max_chars=40, placeholder="e.g. K7QM-2XPA-R4TB-9CHD",
                  help="Shown at the foot of each of your cards. With it your answers continue where you "
                       "left them, under your name; on the device you joined on the join link is enough.")
    st.checkbox("I understand that my answers are stored under this name, shown to the facilitator, "
                "and used, pooled with others, to constrain a statistical model. I can ask the "
                "facilitator to withdraw them.", key=P + "consent", persist_state=KEEP)
    st.button("Join", key=P + "join", type="primary", on_click=_join, args=(P + "join_code", P + "join_name"))
    st.caption("When you join you get a resume code, shown at the foot of every card: keep it to continue "
               "on another device.")
    if _state("forget_device"):
        forget_device(_state("forget_device"))


def stakeholder_view(join_code: str | None) -> None:
    login = _state("login")
    if not login:
        stakeholder_join(join_code)
        return
    st.query_params["me"] = login["token"]  # keep the link current after a trip to another page
    if _state("keep_device") == login["token"]:
        keep_device(login["token"])
    card_layout()
    with st.container(key=P + "card"):
        stakeholder_cards()


@st.fragment
def stakeholder_cards() -> None:
    """The signed-in stakeholder's progress, card and answer buttons. A fragment: a click reruns this
    part alone (the page around it, its navigation and sidebar are not drawn again), and every value
    it shows is read from the store on that run."""
    login = _state("login")
    if not login:                 # signed out from this part: the whole page draws the join form
        st.rerun()
    store = _store()
    token = login["token"]
    try:
        plan = store.my_assignment(token)
        session = store.my_session(token)
    except (ValueError, PermissionError) as err:
        st.error(str(err))
        st.button("Sign out", key=P + "signout_err", on_click=_sign_out)
        return
    config = ElicitationPlan.from_dict(session["config"])
    n = len(plan)
    answered = int(plan["response"].notna().sum())
    with st.container(key=P + "card_head"):
        st.subheader(f"Welcome, {plain(login['name'])}")
        st.progress(answered / n if n else 1.0, text=f"{answered} of {n} cards answered")
    if session["status"] != "open":
        st.warning("The facilitator has closed this session; answers can no longer be changed.")
    if _state("answer_error"):
        st.error(_state("answer_error"))

    open_positions = plan.loc[plan["response"].isna(), "position"]
    view = _state("view_pos")
    if view is None or not 0 <= view < n:
        view = None if open_positions.empty else int(open_positions.iloc[0])
    if view is None:
        st.success("All cards answered. Thank you! You can go back and change any answer.")
        st.button("Review my answers from the start", key=P + "review", on_click=_goto, args=(0,))
        _card_footer(token, session)
        return
    if _state("scrolled_to") != view:   # a new card opens at its own header
        scroll_to_card(view)
        _set("scrolled_to", view)

    row = plan.iloc[view]
    try:
        table = card_table(session["config"], int(row["a"]), int(row["b"]))
    except ValueError as err:          # a synthetic copy this database does not hold
        st.error(str(err))
        return
    st.markdown(f"#### Card {view + 1} of {n}")
    st.text(config.instructions)
    if config.synthetic:
        st.caption(SYNTHETIC_NOTE + " Ages and counts are shown as ranges.")
    st.table(table)
    current = row["response"]
    if current is not None:
        st.info(f"Your answer: **{el.RESPONSE_LABELS.get(current, current)}** (highlighted below). "
                "Choose again to change it.")
    # The optional notes come first: an answer button sends them with it and moves to the next card.
    with st.expander("Add how sure you are or why (optional)",
                     expanded=_state("confidence", "not given") != "not given" or bool(_state("reason"))):
        st.select_slider("How sure are you? (optional)", ["not given", 1, 2, 3, 4, 5], value="not given",
                         key=P + "confidence", persist_state=KEEP,
                         help="1 = a guess, 5 = certain. Leave it if you prefer.")
        st.text_area("Why? (optional, only the facilitator sees it)", key=P + "reason", max_chars=MAX_REASON_LENGTH,
                     persist_state=KEEP, height=68, placeholder="A few words on what decided it for you",
                     help="Sent with your answer or skip. Avoid names or details that identify anyone.")

    event_id = uuid.uuid4().hex  # minted per drawn card: a re-delivered click is a no-op
    options = el.RESPONSE_MODES[config.response_mode]
    if config.response_mode == "four_option":
        better = "a risk prediction no higher" if config.favourable_label == 0 else "a prediction no less favourable"
        st.caption(f"'At least as well' means {better} than the other person's.")
    with st.container(key=P + "answers"):
        per_row = 2   # side by side even on a phone; four options make two rows
        cols = [c for _ in range(0, len(options), per_row) for c in st.columns(per_row)]
        for col, option in zip(cols, options):
            chosen = option == current
            label = ("✓ " if chosen else "") + el.RESPONSE_LABELS[option]
            # The current choice is the one filled button; before any answer all options look alike.
            col.button(label, key=f"{P}ans_{option}", type="primary" if chosen or current is None else "secondary",
                       icon=":material/check_circle:" if chosen else None, use_container_width=True,
                       on_click=_answer, args=(token, view, option, event_id),
                       help="Your current answer" if chosen else None)
    with st.container(key=P + "nav"):
        nav = st.columns(4)
        nav[0].button("← Back", key=P + "back", disabled=view == 0, use_container_width=True,
                      on_click=_goto, args=(max(0, view - 1),))
        nav[1].button("Skip", key=P + "skip", use_container_width=True, help="Skip this card",
                      on_click=_answer, args=(token, view, el.SKIP, event_id))
        nav[2].button("Undo", key=P + "undo", disabled=current is None, use_container_width=True,
                      help="Undo your answer to this card", on_click=_answer, args=(token, view, el.RETRACT, event_id))
        nav[3].button("Next →", key=P + "next", disabled=current is None or view >= n - 1,
                      use_container_width=True, on_click=_goto, args=(view + 1,))
    _card_footer(token, session)


def _card_footer(token: str, session: dict) -> None:
    """The foot of every card: the resume code in full view, and how answers are kept."""
    st.markdown(f'Your resume code: <span class="resume-code">{html.escape(shown_resume_code(token))}</span>',
                unsafe_allow_html=True)
    st.caption(f"Session: {plain(session['name'])}" + (" (simulated)" if session["simulated"] else "")
               + ". Type the resume code on another device to continue there; keep it to yourself, as anyone "
               "with it can answer as you. Labels and model scores are never shown; each answer is stored "
               "as soon as you click.")
    st.button("Sign out on this device", key=P + "signout", on_click=_sign_out)


# ============================================================================ facilitator

FE = P.rstrip("_")   # the design's declared fields are drawn under keys fe_<field> (field_key)
#: The design fields the facilitator's widgets set: those a session stores that are declared with param(...).
DESIGN_WIDGETS = tuple(f.name for f in dataclasses.fields(ElicitationPlan)
                       if f.name in el.DESIGN_FIELDS and "label" in f.metadata)
DEMO_WIDGETS = ("demo_stakeholders", "demo_kind", "demo_seed")
DEMO_PANEL = 12   # simulated stakeholders the demo offers first (a plan's own default is no panel)
#: The design fields the demo takes from its widgets; the rest of its cards keep the plan's defaults.
DEMO_DESIGN = ("population", "pair_source", "pair_epsilon")


def _design_value(name: str, default=None):
    """A declared design field as its widget holds it; before the widget is drawn, ``default`` or the
    plan's declared default."""
    return st.session_state.get(field_key(FE, name), getattr(DEFAULT, name) if default is None else default)


def design_plan(demo: bool = False) -> ElicitationPlan:
    """The design the facilitator's widgets describe (ValueError names the field to change)."""
    s = st.session_state
    if demo:   # the demo keeps the default cards; its panel and seed come from the demo widgets
        values = {name: _design_value(name) for name in DEMO_DESIGN}
        values.update({name: _design_value(name, DEMO_PANEL if name == "demo_stakeholders" else None)
                       for name in DEMO_WIDGETS})
        values["seed"] = values["demo_seed"]
    else:
        values = {name: _design_value(name) for name in DESIGN_WIDGETS}
        values["instructions"] = (values["instructions"] or "").strip() or DEFAULT.instructions
    plan = ElicitationPlan(**values)
    if plan.synthetic and s.get(P + "reuse_copy", True):
        found = existing_copy(plan.private_pairs_plan())
        if found:
            plan = plan.replace(pair_copy=found)
    return plan


def plan_to_widgets(plan: ElicitationPlan) -> dict:
    """Widget values that rebuild `plan` (for 'Open a saved report'): its declared design fields, and its
    simulated panel's when it has one (the demo then opens). ValueError names a setting the page cannot show."""
    shown = DESIGN_WIDGETS + (DEMO_WIDGETS if plan.demo_stakeholders else ())
    check_shown(plan, shown)
    keys = {field_key(FE, name) for name in shown}
    out = {k: v for k, v in plan_widget_values(plan, FE).items() if k in keys}
    if plan.demo_stakeholders:
        out[P + "role"] = DEMO
    return out


def _create_session() -> None:
    try:
        plan = release_copy(design_plan())   # the copy is released (and stored) before anyone can see it
        if plan is None:
            return
        created = _store().create_session(plan.session_config(), st.session_state.get(P + "name", ""))
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
                                     st.session_state.get(P + "open_key", ""), client=_client())
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
        # a carried synthetic copy is recorded in this machine's project ledger (once per copy)
        created = _store().import_session(upload.getvalue(), ledger=project_ledger())
    except ValueError as err:
        _set("open_error", str(err))
        return
    _set("open_error", None)
    _set("fac", {"session_id": created.session_id, "join_code": created.join_code,
                 "key": created.facilitator_key})
    _set("show_key", True)


def _design_preview() -> None:
    """The core pairs the chosen seed gives everyone, and the design as a reloadable report.

    A synthetic copy not yet released is not made for a preview: creating the session releases it."""
    try:
        plan = design_plan()
        sub = plan.private_pairs_plan()
        if sub is not None and not sub.copy_id:
            st.info("The core pairs of synthetic people are shown once the copy is released (when the "
                    "session is created).")
            return
        result = run_with_progress(run_elicitation, plan, _copy(plan), label="Drawing the core pairs")
    except ValueError as err:
        st.error(str(err))
        return
    with st.expander(f"Preview: the {len(result.core_pairs)} core pairs every stakeholder will see"):
        st.dataframe(display_labels(result.core_pairs), hide_index=True, key=P + "core_preview")
        report_panel(result, page=PAGE, key=P + "design_report")


def _pair_source_widget() -> None:
    """Real records or a private synthetic copy (and its epsilon) on the cards."""
    eps = st.session_state.get(P + "pair_epsilon", DEFAULT.pair_epsilon)
    labels = {"real": "Show real records",
              "dp_synthetic": f"Show a private synthetic copy (epsilon {eps:g}, delta {PAIR_DELTA:g})"}
    field_widget(ElicitationPlan, "pair_source", FE, format_func=labels.get, persist_state=KEEP)
    if st.session_state.get(P + "pair_source") == "dp_synthetic":
        field_widget(ElicitationPlan, "pair_epsilon", FE, persist_state=KEEP)
        try:
            sub = PrivatePairsPlan(population=st.session_state.get(P + "population", DEFAULT.population),
                                   epsilon=st.session_state.get(P + "pair_epsilon", DEFAULT.pair_epsilon))
        except ValueError:
            sub = None
        found = existing_copy(sub)
        if found:
            st.checkbox("Use the copy already released for this population and epsilon", value=True,
                        key=P + "reuse_copy", persist_state=KEEP,
                        help=f"Copy {found} is stored here; reusing it spends nothing. Untick to release a new copy.")


def _population_widget() -> None:
    field_widget(ElicitationPlan, "population", FE, persist_state=KEEP)


def facilitator_setup() -> None:
    st.subheader("Create a session")
    saved_report_loader(P + "design", accepts=(ElicitationPlan,), to_widgets=plan_to_widgets)
    if _state("create_error"):
        st.error(_state("create_error"))
    st.text_input("Session name", key=P + "name", value="Risk tool workshop", max_chars=MAX_SESSION_NAME_LENGTH,
                  persist_state=KEEP)
    _population_widget()
    _pair_source_widget()
    field_widget(ElicitationPlan, "features", FE, persist_state=KEEP)
    for col, name in zip(st.columns(5), ("n_core", "n_random", "n_repeat", "response_mode", "seed")):
        field_widget(ElicitationPlan, name, FE, container=col, persist_state=KEEP)
    field_widget(ElicitationPlan, "instructions", FE, height=80, persist_state=KEEP)
    copy_button("Create session", P + "create", design_plan, _create_session)
    _design_preview()

    st.subheader("Open a session")
    open_session_form()
    with st.expander("Import an exported session (JSON or CSV)"):
        st.file_uploader("Session file", type=["json", "csv"], key=P + "import_file")
        st.button("Import", key=P + "import", on_click=_import_session)




def open_session_form() -> None:
    """Join code and facilitator key in one form: typing sends nothing until Open, so no rerun can drop a
    half-typed key."""
    if _state("open_error"):
        st.error(_state("open_error"))
    with st.form(P + "open_form", border=False):
        c1, c2 = st.columns(2)
        c1.text_input("Join code", key=P + "open_code", persist_state=KEEP)
        c2.text_input("Facilitator key", key=P + "open_key", type="password", persist_state=KEEP)
        st.form_submit_button("Open", key=P + "open", on_click=_open_session)


def guest_view() -> None:
    """What a browser without a curator's sign-in sees: how to join as a stakeholder, and how a facilitator
    opens the console of the session whose key they hold. Creating, importing and demo sessions, and every
    other page, are the curator's."""
    fac = _state("fac")
    if fac:
        facilitator_session(fac)
        return
    stakeholder_join(None)
    with st.expander("Facilitators: open your session", expanded=bool(_state("open_error"))):
        st.write("Type the session's join code and the facilitator key you were given when it was created.")
        open_session_form()
    st.divider()
    if identity_provider_configured():
        st.button("Curator sign-in", key=P + "oidc_login", on_click=st.login)
    else:
        st.caption("Curators: open the sign-in link that came with your curator key.")


def _progress_block(store: ElicitationStore, fac: dict, progress: pd.DataFrame | None = None) -> None:
    """Progress table and chart; re-read from the store when refreshed live (progress None)."""
    if progress is None:
        try:
            progress = store.progress(fac["session_id"], fac["key"])
        except (ValueError, PermissionError) as err:
            st.error(str(err))
            return
    wide_table(progress, key=P + "progress_table",
               column_config={"share_same": st.column_config.NumberColumn("share 'same'", format="%.2f"),
                                "self_agreement": st.column_config.NumberColumn("self-agreement",
                                                                                format="%.2f")})
    st.plotly_chart(figs.progress_figure(progress), key=P + "progress_fig")


def _join_panel(join_code: str) -> None:
    """The code, once, in its read-aloud form; the link carries the same form (joining ignores the dashes)."""
    shown = format_code(join_code)
    try:
        link = join_url(browser_page_url(), TOOL_PATH, shown)
    except ValueError:            # no browser address (a script run): the code alone
        st.markdown(f"**Join code:** `{shown}`")
        return
    join_panel(shown, link)
    if _state("qr_full"):
        projector_qr(shown, link)
        st.button("Close the full-screen QR code", key=P + "qr_close", icon=":material/close:",
                  on_click=_set, args=("qr_full", False))
    else:
        st.button("Show the QR code full screen", key=P + "qr_open", icon=":material/fullscreen:",
                  on_click=_set, args=("qr_full", True), help="For a projector: the QR code as large as the "
                  "screen allows, dark on white, with the join link and code in large text.")


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
        # one read of roster and answers per run, kept by the store while the session does not change
        revision, progress, judged = store.live_reads(info["session_id"], fac["key"])
    except (ValueError, PermissionError) as err:
        st.error(str(err))
        st.button("Forget this session", key=P + "forget_err", on_click=_set, args=("fac", None))
        return
    config = ElicitationPlan.from_dict(info["config"])
    if _state("manage_error"):
        st.error(_state("manage_error"))
    head = st.columns([4, 1])
    head[0].subheader(plain(info["name"]))
    head[1].metric("Status", info["status"])
    _join_panel(info["join_code"])
    if simulated or info["simulated"]:
        st.warning(SIM_NOTE)
    if _state("show_key"):
        st.warning("Facilitator key: copy it now. It is stored only as a hash and cannot be shown again; "
                   "you need it to reopen this session or see its results.")
        st.code(fac["key"], language=None)
        st.button("I have saved the key", key=P + "key_saved", on_click=_set, args=("show_key", False))
    st.caption("Stakeholders open the link (or scan its QR code), or enter the code under 'Stakeholder'. "
               "Cards per stakeholder: "
               f"{config.n_core} core + {config.n_random} random + {config.n_repeat} repeated. "
               f"People: {COMPAS_POPULATIONS[config.population]}"
               + (f", as a private synthetic copy ({SYNTHETIC_PEOPLE:,} synthetic people, epsilon "
                  f"{config.pair_epsilon:g}, delta {PAIR_DELTA:g})." if config.synthetic else "."))
    if config.synthetic:
        st.info(SYNTHETIC_NOTE + " Pair numbers name synthetic people, not rows of the data.")

    tab_progress, tab_constraints, tab_results, tab_export = st.tabs(
        ["Live progress", "Agreement and constraints", "Learning results", "Export"])
    with tab_progress:
        live = st.toggle("Refresh every 5 seconds", key=P + "live", value=False, persist_state=KEEP)
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
            st.selectbox("Stakeholder", list(progress["stakeholder"]), key=P + "withdraw_name", index=None,
                         persist_state=KEEP)
            st.button("Withdraw and delete", key=P + "withdraw", on_click=_withdraw, args=(fac,))

    with tab_constraints:
        c = st.columns(2)
        weighting = c[0].radio("Weighting", el.WEIGHTINGS, key=P + "weighting", horizontal=True, persist_state=KEEP,
                               format_func=lambda w: {"panel": "share of the whole panel (paper)",
                                                      "judged": "share of those who saw the pair"}[w])
        min_support = c[1].slider("Minimum support", 0.0, 1.0, 0.0, 0.05, key=P + "min_support", persist_state=KEEP,
                                  help="Drop pairs whose weight is below this share (a veto guard).")
        roster = list(progress["stakeholder"])
        if any(name not in roster for name in st.session_state.get(P + "include", [])):
            st.session_state[P + "include"] = [n for n in st.session_state[P + "include"] if n in roster]
        chosen = st.multiselect("Stakeholders whose answers are pooled (empty = the whole panel)", roster,
                                key=P + "include", placeholder="the whole panel", persist_state=KEEP)
        summary = _summary(info["session_id"], revision, judged, progress, config,
                           Pooling(weighting, float(min_support), tuple(chosen)))
        m = st.columns(4)
        m[0].metric("Answers", summary.metrics["answers"])
        m[1].metric("Pairs with a constraint", summary.metrics["pairs with a constraint"])
        kappa, sa = summary.metrics["fleiss_kappa"], summary.metrics["self_agreement"]
        m[2].metric("Fleiss' kappa (core pairs)", "n/a" if kappa != kappa else f"{kappa:.2f}",
                    help="Agreement beyond chance on the pairs everyone saw; needs two or more judges.")
        m[3].metric("Self-agreement on repeats", "n/a" if sa != sa else f"{sa:.2f}")
        st.plotly_chart(figs.agreement_figure(summary.constraints), key=P + "agreement_fig")
        st.markdown("**Contested pairs** (judges split, or opposite orientations asserted)")
        st.dataframe(display_labels(summary.contested), hide_index=True, key=P + "contested_table")
        if len(summary.judged) and summary.judged["reason"].notna().any():
            st.caption("The `reasons` column quotes what stakeholders wrote about the pair. " + REASON_NOTE)
        st.markdown("**Constraint set** (one row per pair; `weight` = treat alike, `w_ij`/`w_ji` ordered)")
        st.dataframe(display_labels(summary.constraints), hide_index=True, key=P + "constraints_table")
        with st.expander("Every live answer with its reason (facilitator only; pseudonyms)"):
            st.caption(REASON_NOTE)
            st.dataframe(display_labels(summary.judged), hide_index=True, key=P + "judgments_table")

    results: dict[str, pd.DataFrame] = {}
    with tab_results:
        # The learner's population is its own widget (drawn inside the results); read it first so
        # the results get only pairs of people it fits, and say so when the session drew elsewhere.
        fitted = st.session_state.get(P + "results_population", FrontierPlan.population)
        # A synthetic-copy session's pairs name people of its copy: they reach the learner as
        # zero-cost constraint people (the copy the cards showed, loaded here and passed to the run).
        handed = learner_pairs(summary.usable, config.population, fitted, synthetic=config.synthetic)
        usable = handed.constraints
        if handed.note:
            (st.warning if handed.left_out else st.info)(handed.note)
        if usable.empty:
            if config.synthetic:       # with results, the results themselves carry this note
                st.warning(SAMPLING_NOTE)
            st.info("No constraints yet: results appear once stakeholders have asked for equal treatment "
                    "of at least one pair.")
        else:
            who = "whole panel" if not chosen else ", ".join(chosen[:3]) + ("..." if len(chosen) > 3 else "")
            label = f"{bare(info['name'])} ({bare(who)}, {weighting} weighting, {len(usable)} pairs)"
            if simulated or info["simulated"]:
                label += " - simulated stakeholders"
            aggregation = summary.aggregation
            try:
                results = render_fairness_results(
                    P + "results", usable, label, run_context=aggregation,
                    on_result=lambda cfg, res: _log_run(store, fac, usable, aggregation, cfg, res),
                    run_history=lambda: run_history_table(store.fit_runs(fac["session_id"], fac["key"])),
                    people=private_pairs_plan(config), copy=_copy(config)) or {}
            except ValueError as err:
                st.error(str(err))

    with tab_export:
        st.write("The session export holds settings, pseudonyms, cards, every answer event with its "
                 "reason, and the log of learner runs (no keys or resume codes). It can be imported "
                 "again as a new session; the CSV leaves the run log out.")
        st.caption(REASON_NOTE)
        d = st.columns(3)
        # Built only when clicked: every event of the session would otherwise be read on each rerun.
        sid, key = info["session_id"], fac["key"]
        d[0].download_button("Export session (JSON)", lambda: store.export_json(sid, key),
                             file_name=f"session_{info['join_code']}.json", mime="application/json",
                             key=P + "dl_session_json")
        d[1].download_button("Export session (CSV)", lambda: store.export_csv(sid, key),
                             file_name=f"session_{info['join_code']}.csv", mime="text/csv",
                             key=P + "dl_session_csv")
        tables = {"progress": progress, **summary.tables(), **results}
        d[2].download_button("Tables shown here (CSV, zipped)", lambda: tables_zip(tables),
                             file_name=f"session_{info['join_code']}_tables.zip", mime="application/zip",
                             key=P + "dl_tables")
        st.markdown("**The session's design** (open it again under 'Open a saved report' to run the same design)")
        # A demo session is its plan's simulated panel: the report reruns to the same answers.
        design = _state("demo_plan") if simulated and _state("demo_plan") else ElicitationPlan.from_session_config(config)
        try:
            copy = design_copy(design, _copy(design))
        except ValueError as err:      # a synthetic copy this database does not hold
            st.error(str(err))
            return
        # Drawn when asked: its report buttons are built on every run that draws them, and a refresh
        # of the progress has no need of them.
        if not st.toggle("Show the design's report", key=P + "show_design", value=False, persist_state=KEEP):
            return
        try:
            designed = run(design, copy)
        except ValueError as err:
            st.error(str(err))
        else:
            report_panel(designed, page=PAGE, key=P + "session_design")


def _summary(session_id: str, revision: tuple, judged: pd.DataFrame, progress: pd.DataFrame,
             config: ElicitationPlan, pooling: Pooling):
    """``summarise_session`` of these answers, kept in this browser session while the session's revision
    and the pooling choices stay the same (a refresh with no new answer pools nothing again)."""
    key = (session_id, revision, pooling)
    kept = _state("summary")
    if kept is None or kept[0] != key:
        kept = (key, summarise_session(judged, progress, config, pooling))
        _set("summary", kept)
    return kept[1]


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


# ============================================================================ demo

def _fill_demo() -> None:
    try:
        plan = release_copy(design_plan(demo=True))
        if plan is None:
            return
        created = fill_demo_session(_store(), plan)
    except ValueError as err:
        _set("demo_error", str(err))
        return
    _set("demo_error", None)
    _set("demo_plan", plan)
    _set("demo", {"session_id": created.session_id, "join_code": created.join_code,
                  "key": created.facilitator_key})


def demo_view() -> None:
    st.info("The demo opens a session filled by simulated stakeholders (labelled as such everywhere) so "
            "the monitor and results can be explored without a live room.")
    saved_report_loader(P + "demo_design", accepts=(ElicitationPlan,), to_widgets=plan_to_widgets)
    if _state("demo_error"):
        st.error(_state("demo_error"))
    _population_widget()
    _pair_source_widget()
    for col, name in zip(st.columns(3), DEMO_WIDGETS):
        field_widget(ElicitationPlan, name, FE, container=col, persist_state=KEEP,
                     default=DEMO_PANEL if name == "demo_stakeholders" else None)
    copy_button("Fill a demo session", P + "demo_run", lambda: design_plan(demo=True), _fill_demo)
    demo = _state("demo")
    if demo:
        facilitator_session(demo, simulated=True)


# ============================================================================ page

st.title("Pairwise fairness elicitation")
if not (st.query_params.get("join") or st.query_params.get("me") or _state("login")):   # a phone's card comes first
    st.caption("Which pairs of people do stakeholders say must be treated alike, and what does "
               "honouring those judgments cost a recidivism risk model?")

try:
    _store()
except (ValueError, SQLAlchemyError) as err:  # the database cannot be opened: say so, in plain words
    st.error(str(err) if isinstance(err, ValueError) else "The session database cannot be opened; "
             "tell the operator. Nothing can be stored until it is fixed.")
    st.stop()
restore_stakeholder()
join_param = st.query_params.get("join")
if join_param or st.query_params.get("me") or _state("login"):
    # Came through a join or stakeholder link (or signed in as one): the stakeholder's view only, with no
    # switch to the facilitator's or the demo's screens. Signing out of a page without a link brings it back.
    st.session_state[P + "role"] = role = SH
elif not current_role().is_curator:
    role = None
else:
    role = st.radio("Open as", ROLES, key=P + "role", horizontal=True, persist_state=KEEP)

if role is None:
    guest_view()
elif role == SH:
    stakeholder_view(join_param)
elif role == FAC:
    fac = _state("fac")
    if fac:
        facilitator_session(fac)
    else:
        facilitator_setup()
        st.caption("Data: ProPublica COMPAS two-year file (7,214 people, identifiers removed). Pairs are "
                   "drawn uniformly at random from the chosen people plus shared core pairs; see the design "
                   "report for the full design.")
else:
    demo_view()
