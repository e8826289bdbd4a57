"""Fairness elicitation page end to end with Streamlit's AppTest (facilitator, stakeholder, demo)."""
from pathlib import Path

import pandas as pd

from streamlit.testing.v1 import AppTest
from core.fairness.store import format_code
from tests.release_steps import decide_cap, has_button, press

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "fairness_elicitation.py")



def _tables(at):
    """The page's tables with their machine column names (the page shows people-readable labels)."""
    from core.fairness.session_summary import DISPLAY_LABELS
    back = {label: name for name, label in DISPLAY_LABELS.items()}
    return [d.value.rename(columns=back) for d in at.dataframe if d.value is not None]

def _app(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    return at


def _progress(at) -> "object":
    return next(t for t in _tables(at) if "answered" in t.columns)


def _run_history(at) -> "object":
    return next(t for t in _tables(at) if "constraint set" in t.columns)


def test_default_view_is_facilitator_setup():
    at = _app()
    assert at.title[0].value == "Pairwise fairness elicitation"
    assert at.radio(key="fe_role").value == "Facilitator"
    assert at.button(key="fe_create") is not None and not at.error
    core = next(t for t in _tables(at) if "age (A)" in t.columns)
    assert len(core) == 10 and (core["i"] != core["j"]).all()
    from core.fairness import ElicitationPlan, run   # the page shows what the plain-Python plan gives
    pd.testing.assert_frame_equal(core.reset_index(drop=True), run(ElicitationPlan()).core_pairs,
                                  check_dtype=False)
    at.number_input(key="fe_n_core").set_value(4).run()
    assert len(next(t for t in _tables(at) if "age (A)" in t.columns)) == 4
    at.number_input(key="fe_n_random").set_value(0).run()
    at.number_input(key="fe_n_core").set_value(0).run()
    assert any("at least one core or random pair" in e.value for e in at.error)   # inputs kept
    assert at.number_input(key="fe_n_random").value == 0


def test_stakeholder_answers_three_cards_and_facilitator_sees_them():
    fac = _app()
    fac.text_input(key="fe_name").input("Workshop").run()
    fac.button(key="fe_create").click().run()
    assert not fac.exception and not fac.error
    session = fac.session_state["fe_fac"]
    # The key is shown once, then hidden after confirmation.
    assert any(session["key"] in c.value for c in fac.code)
    fac.button(key="fe_key_saved").click().run()
    assert not any(session["key"] in c.value for c in fac.code)
    assert _progress(fac).empty

    sh = _app(join=session["join_code"])
    _stakeholder_only(sh)                                 # a join link opens the stakeholder's view, no switch
    assert sh.text_input(key="fe_join_code").value == session["join_code"]
    sh.text_input(key="fe_join_name").input("Ann").run()
    sh.button(key="fe_join").click().run()
    assert "tick the box" in sh.error[0].value            # consent is required
    sh.checkbox(key="fe_consent").check().run()
    sh.button(key="fe_join").click().run()
    assert not sh.error
    assert any("Card 1 of 52" in m.value for m in sh.markdown)
    for _ in range(3):
        sh.button(key="fe_ans_same").click().run()
        assert not sh.exception and not sh.error
    assert any("Card 4 of 52" in m.value for m in sh.markdown)
    assert "3 of 52" in sh.get("progress")[0].proto.text

    # Back, change the third answer, and return to the first open card.
    sh.button(key="fe_back").click().run()
    assert any("Card 3 of 52" in m.value for m in sh.markdown)
    sh.button(key="fe_ans_differ").click().run()
    assert any("Card 4 of 52" in m.value for m in sh.markdown)

    fac.button(key="fe_refresh").click().run()
    table = _progress(fac)
    assert list(table["stakeholder"]) == ["Ann"]
    assert int(table["answered"].iloc[0]) == 3 and int(table["of"].iloc[0]) == 52
    assert abs(float(table["share_same"].iloc[0]) - 2 / 3) < 1e-9

    # A fresh browser session resumes with the resume code at the same card.
    again = _app()
    again.radio(key="fe_role").set_value("Stakeholder").run()
    again.text_input(key="fe_join_code").input(session["join_code"]).run()
    again.text_input(key="fe_resume_code").input(format_code(sh.session_state["fe_login"]["token"])).run()
    again.checkbox(key="fe_consent").check().run()
    again.button(key="fe_join").click().run()
    assert not again.error
    assert any("Card 4 of 52" in m.value for m in again.markdown)


def test_bad_join_code_and_wrong_key_show_errors_and_keep_inputs():
    sh = _app()
    sh.radio(key="fe_role").set_value("Stakeholder").run()
    sh.text_input(key="fe_join_code").input("NOPE").run()
    sh.text_input(key="fe_join_name").input("Bob").run()
    sh.checkbox(key="fe_consent").check().run()
    sh.button(key="fe_join").click().run()
    assert not sh.exception and "join code" in sh.error[0].value
    assert sh.text_input(key="fe_join_name").value == "Bob"
    fac = _app()
    fac.text_input(key="fe_open_code").input("ABCDEF")
    fac.text_input(key="fe_open_key").input("wrong")
    fac.button(key="fe_open").click().run()
    assert "facilitator key" in fac.error[0].value
    # the code and the key are one form: neither was sent before Open, and both are kept after it
    assert fac.text_input(key="fe_open_code").value == "ABCDEF"


def test_demo_fills_a_labelled_simulated_session():
    at = _app()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.number_input(key="fe_demo_stakeholders").set_value(6).run()
    at.button(key="fe_demo_run").click().run()
    assert not at.exception and not at.error
    assert any("Simulation, not a release" in w.value for w in at.warning)
    table = _progress(at)
    assert len(table) == 6 and (table["answered"] == 52).all() and table["simulated"].all()
    constraints = next(t for t in _tables(at) if "w_ij" in t.columns)
    assert (constraints["weight"] > 0).any()
    # The agreement tab's figures agree with core on the answers shown beside them.
    from core.fairness.elicitation import inter_rater_agreement
    judged = next(t for t in _tables(at) if "confidence" in t.columns)
    shown = {m.label: m.value for m in at.metric}
    assert shown["Answers"] == str(6 * 52)
    constrained = ((constraints["w_ij"] > 0) | (constraints["w_ji"] > 0)).sum()
    assert shown["Pairs with a constraint"] == str(constrained) and constrained > 0
    kappa = inter_rater_agreement(judged)["fleiss_kappa"]
    assert shown["Fleiss' kappa (core pairs)"] == f"{kappa:.2f}"
    assert shown["Self-agreement on repeats"] == f"{table['self_agreement'].mean():.2f}"
    at.radio(key="fe_weighting").set_value("judged").run()
    judged = next(t for t in _tables(at) if "w_ij" in t.columns)
    assert judged["weight"].max() <= 1.0 and judged["weight"].max() >= constraints["weight"].max()


def test_confidence_and_reason_are_stored_live_refresh_renders_and_withdrawal_removes_answers():
    import uuid

    from core.fairness.store import get_store

    fac = _app()
    fac.number_input(key="fe_n_random").set_value(0).run()       # core pairs only: everyone sees them
    fac.button(key="fe_create").click().run()
    session = fac.session_state["fe_fac"]
    sh = _app(join=session["join_code"])
    sh.text_input(key="fe_join_name").input("Cy").run()
    sh.checkbox(key="fe_consent").check().run()
    sh.button(key="fe_join").click().run()
    assert sh.text_area(key="fe_reason").label == "Why? (optional, only the facilitator sees it)"
    sh.select_slider(key="fe_confidence").set_value(4).run()
    sh.text_area(key="fe_reason").input("  Same priors, but one is far younger  ").run()
    sh.button(key="fe_ans_differ").click().run()
    assert not sh.exception and not sh.error
    # Confidence and reason belong to the card answered: the next card starts without them.
    assert sh.select_slider(key="fe_confidence").value == "not given"
    assert sh.text_area(key="fe_reason").value == ""
    sh.text_area(key="fe_reason").input("tab\tok, bell \a not").run()
    sh.button(key="fe_ans_same").click().run()
    assert "control character (U+0007)" in sh.error[0].value          # the card and the text stay
    assert "tab" in sh.text_area(key="fe_reason").value
    sh.text_area(key="fe_reason").input("").run()
    sh.button(key="fe_ans_same").click().run()
    assert not sh.error
    # A second stakeholder (through the store) judges Cy's first pair the other way, with a reason.
    store = get_store()
    cy = store.my_assignment(sh.session_state["fe_login"]["token"])
    dee = store.join(session["join_code"], "Dee")
    plan = store.my_assignment(dee.token)
    first = {int(cy["a"].iloc[0]), int(cy["b"].iloc[0])}
    position = int(plan[[{int(a), int(b)} == first for a, b in zip(plan["a"], plan["b"])]]["position"].iloc[0])
    store.record_answer(dee.token, position, "same", uuid.uuid4().hex, reason="Their records read alike")
    fac.toggle(key="fe_live").set_value(True).run()
    assert not fac.exception
    judged = next(t for t in _tables(fac) if "confidence" in t.columns)
    cys = judged[judged["stakeholder"] == "Cy"]
    assert list(cys["response"]) == ["differ", "same"]
    assert cys["confidence"].iloc[0] == 4 and cys["confidence"].isna().iloc[1]
    assert cys["reason"].iloc[0] == "Same priors, but one is far younger" and cys["reason"].isna().iloc[1]
    contested = next(t for t in _tables(fac) if "opposite_orientations" in t.columns)
    (quotes,) = contested["reasons"].dropna()
    assert quotes == "Cy: Same priors, but one is far younger | Dee: Their records read alike" \
        or quotes == "Dee: Their records read alike | Cy: Same priors, but one is far younger"
    assert any("keep them within the facilitation team" in c.value for c in fac.caption)
    store.delete_stakeholder(session["session_id"], session["key"], "Dee")
    fac.selectbox(key="fe_withdraw_name").select("Cy").run()
    fac.button(key="fe_withdraw").click().run()
    assert not fac.exception and not fac.error
    assert _progress(fac).empty


def test_pooling_one_stakeholder_uses_only_their_answers():
    at = _app()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.number_input(key="fe_demo_stakeholders").set_value(3).run()
    at.button(key="fe_demo_run").click().run()
    at.multiselect(key="fe_include").select("simulated-02").run()
    assert not at.exception
    cons = next(t for t in _tables(at) if "w_ij" in t.columns)
    judged = next(t for t in _tables(at) if "confidence" in t.columns)
    assert set(judged["stakeholder"]) == {"simulated-02"}
    assert (cons["n_judges"] == 1).all() and set(cons["weight"]) <= {0.0, 1.0}
    # Running the learner logs the run with the choices behind it, once across reruns.
    assert not any("constraint set" in t.columns for t in _tables(at))
    at.select_slider(key="fe_results_T").set_value(100)
    at.selectbox(key="fe_results_oracle").select("ols")
    at.button(key="fe_results_run").click().run()
    assert not at.exception and not at.error
    history = _run_history(at)
    assert len(history) == 1
    row = history.iloc[0]
    assert row["stakeholders"] == "simulated-02" and row["weighting"] == "panel" and row["status"] == "current"
    assert row["rounds"] == 100 and row["oracle"] == "ols"
    assert row["pairs"] == ((cons["w_ij"] > 0) | (cons["w_ji"] > 0)).sum()
    at.select_slider(key="fe_results_point").set_value(at.select_slider(key="fe_results_point").options[0]).run()
    at.button(key="fe_refresh").click().run()
    assert len(_run_history(at)) == 1
    from core.fairness.store import get_store
    demo = at.session_state["fe_demo"]
    (run,) = get_store().fit_runs(demo["session_id"], demo["key"])
    assert run["aggregation"] == {"weighting": "panel", "min_support": 0.0, "selection": "chosen",
                                  "stakeholders": ["simulated-02"]}
    assert run["learner"]["T"] == 100 and len(run["frontier"]) == 10


# ---------------------------------------------------------------------- navigation, links, plain text

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TOOL = "tools/fairness_elicitation.py"


def _app_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(TOOL).run()
    assert not at.exception
    return at


def _stakeholder_only(at: AppTest) -> None:
    """The stakeholder's view with no facilitator/stakeholder/demo switch (what a link opens)."""
    assert at.session_state["fe_role"] == "Stakeholder"
    assert not [r for r in at.radio if r.key == "fe_role"]


def _join_as(at: AppTest, code: str, name: str) -> None:
    if [r for r in at.radio if r.key == "fe_role"]:       # a page opened by a join link has no switch
        at.radio(key="fe_role").set_value("Stakeholder").run()
    at.text_input(key="fe_join_code").input(code).run()
    at.text_input(key="fe_join_name").input(name).run()
    at.checkbox(key="fe_consent").check().run()
    at.button(key="fe_join").click().run()
    assert not at.exception and not at.error


def _created_session(name: str = "Links") -> dict:
    from core.fairness import ElicitationPlan
    from core.fairness.store import get_store
    created = get_store().create_session(ElicitationPlan(n_core=2, n_random=3, n_repeat=0).session_config(), name)
    return {"session_id": created.session_id, "join_code": created.join_code, "key": created.facilitator_key}


def test_stakeholder_keeps_their_view_after_home_and_back_and_after_a_reload():
    session = _created_session()
    at = _app_page()
    _join_as(at, session["join_code"], "Eve")
    token = at.session_state["fe_login"]["token"]
    assert at.query_params["me"] in (token, [token])
    at.button(key="fe_ans_same").click().run()
    assert any("Card 2 of 5" in m.value for m in at.markdown)
    # Home and back: still the stakeholder, on the same card, never the facilitator's setup.
    at.switch_page("home.py").run()
    at.switch_page(TOOL).run()
    assert not at.exception
    _stakeholder_only(at)
    assert any("Card 2 of 5" in m.value for m in at.markdown)
    assert not any(s.value == "Create a session" for s in at.subheader)
    # A reload is a new browser session that only has the URL: the link brings the same view back.
    reload = _app(me=token)
    _stakeholder_only(reload)
    assert any("Card 2 of 5" in m.value for m in reload.markdown)
    assert not any(s.value == "Create a session" for s in reload.subheader)
    # The link opens only that stakeholder's own cards: no facilitator key, no other people.
    state = {k: reload.session_state[k] for k in ("fe_login", "fe_role")}
    assert session["key"] not in str(state) and "fe_fac" not in reload.session_state
    assert not any("Live progress" in str(t.label) for t in reload.get("tab"))


def test_a_bad_stakeholder_link_says_so_and_falls_back_to_joining():
    at = _app(me="not-a-real-resume-code")
    assert not at.exception
    assert any("resume code is not valid" in e.value for e in at.error)
    assert at.button(key="fe_join") is not None


def test_the_current_answer_is_highlighted_on_the_card():
    session = _created_session()
    at = _app(join=session["join_code"])
    _join_as(at, session["join_code"], "Flo")
    at.button(key="fe_ans_differ").click().run()
    at.button(key="fe_back").click().run()
    chosen, other = at.button(key="fe_ans_differ"), at.button(key="fe_ans_same")
    assert chosen.proto.type == "primary" and other.proto.type == "secondary"
    assert chosen.label.startswith("✓") and not other.label.startswith("✓")
    assert any("Your answer" in i.value for i in at.info)


def test_facilitator_widgets_persist_across_pages():
    at = _app_page()
    at.text_input(key="fe_name").input("Kept name").run()
    at.number_input(key="fe_n_core").set_value(3).run()
    at.multiselect(key="fe_features").set_value(["age", "priors_count"]).run()
    at.switch_page("home.py").run()
    at.switch_page(TOOL).run()
    assert not at.exception
    assert at.text_input(key="fe_name").value == "Kept name"
    assert at.number_input(key="fe_n_core").value == 3
    assert at.multiselect(key="fe_features").value == ["age", "priors_count"]
    preview = next(t for t in _tables(at) if "age (A)" in t.columns)
    assert len(preview) == 3


def test_names_are_shown_as_plain_text_never_as_markdown():
    session = _created_session("![pixel](http://example.invalid/p.png) **bold**")
    at = _app(join=session["join_code"])
    _join_as(at, session["join_code"], "[click](http://example.invalid)")
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.subheader]
    assert not any("![pixel](http" in v or "[click](http" in v for v in shown)
    assert any("\\!\\[pixel\\]" in v for v in shown)
    fac = _app()
    fac.text_input(key="fe_open_code").input(session["join_code"])
    fac.text_input(key="fe_open_key").input(session["key"])
    fac.button(key="fe_open").click().run()
    assert not fac.exception
    assert all("![pixel](http" not in s.value for s in fac.subheader)


def test_invisible_characters_in_a_name_are_refused_on_the_page():
    session = _created_session()
    at = _app(join=session["join_code"])
    at.text_input(key="fe_join_name").input("Ann\u200b").run()
    at.checkbox(key="fe_consent").check().run()
    at.button(key="fe_join").click().run()
    assert not at.exception and "invisible character" in at.error[0].value


def test_design_report_reopens_with_the_same_widgets():
    from core.fairness import ElicitationPlan, run
    from core.report import build_report, report_json
    plan = ElicitationPlan(n_core=5, n_random=7, n_repeat=1, seed=42, features=("age", "sex"),
                           response_mode="four_option", population="full")
    result = run(plan)
    raw = report_json(build_report(result, page="Fairness elicitation")).encode()
    at = _app()
    at.file_uploader(key="fe_design__report_file").set_value(("design.json", raw, "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert at.number_input(key="fe_n_core").value == 5 and at.number_input(key="fe_seed").value == 42
    assert at.number_input(key="fe_n_random").value == 7 and at.selectbox(key="fe_response_mode").value == "four_option"
    assert at.multiselect(key="fe_features").value == ["age", "sex"]
    assert at.selectbox(key="fe_population").value == "full"
    preview = next(t for t in _tables(at) if "age (A)" in t.columns)
    pd.testing.assert_frame_equal(preview.reset_index(drop=True), result.core_pairs, check_dtype=False)


def test_facilitator_session_and_pooling_survive_home_and_back():
    at = _app_page()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.number_input(key="fe_demo_stakeholders").set_value(4).run()
    at.button(key="fe_demo_run").click().run()
    at.radio(key="fe_weighting").set_value("judged").run()
    at.slider(key="fe_min_support").set_value(0.5).run()
    at.multiselect(key="fe_include").select("simulated-01").select("simulated-03").run()
    assert not at.exception and not at.error
    before = next(t for t in _tables(at) if "w_ij" in t.columns)
    demo = at.session_state["fe_demo"]
    at.switch_page("home.py").run()
    at.switch_page(TOOL).run()
    assert not at.exception
    assert at.radio(key="fe_role").value == "Demo with simulated stakeholders"
    assert at.session_state["fe_demo"] == demo
    assert at.radio(key="fe_weighting").value == "judged" and at.slider(key="fe_min_support").value == 0.5
    assert at.multiselect(key="fe_include").value == ["simulated-01", "simulated-03"]
    after = next(t for t in _tables(at) if "w_ij" in t.columns)
    pd.testing.assert_frame_equal(before, after)


def test_demo_session_matches_its_plan_run_in_plain_python():
    from core.fairness import ElicitationPlan, run
    at = _app()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.number_input(key="fe_demo_stakeholders").set_value(5).run()
    at.number_input(key="fe_demo_seed").set_value(7).run()
    at.selectbox(key="fe_demo_kind").select("score").run()
    at.button(key="fe_demo_run").click().run()
    assert not at.exception and not at.error
    plan = at.session_state["fe_demo_plan"]
    assert plan == ElicitationPlan(seed=7, demo_stakeholders=5, demo_kind="score", demo_seed=7)
    shown = next(t for t in _tables(at) if "w_ij" in t.columns)
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), run(plan).constraints, check_dtype=False)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Pairs with a constraint"] == str(int(run(plan).headline()["pairs with a constraint"]))


# ---------------------------------------------------------------------- populations

def test_new_sessions_draw_from_the_learners_people_and_the_demo_hands_over_every_pair():
    from core.datasets import compas_population
    at = _app()
    assert at.selectbox(key="fe_population").value == "paper"
    at.text_input(key="fe_name").input("Paper people").run()
    at.button(key="fe_create").click().run()
    assert not at.exception and not at.error
    from core.fairness.store import get_store
    fac = at.session_state["fe_fac"]
    assert get_store().open_session(fac["join_code"], fac["key"])["config"]["population"] == "paper"
    assert any("elicitation paper's data" in c.value for c in at.caption)

    demo = _app()
    demo.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    demo.number_input(key="fe_demo_stakeholders").set_value(4).run()
    demo.button(key="fe_demo_run").click().run()
    assert not demo.exception and not demo.error
    judged = next(t for t in _tables(demo) if "confidence" in t.columns)
    assert judged[["a", "b"]].isin(set(compas_population("paper").tolist())).all().all()
    # Same people as the learner: no note, nothing left out, every pooled pair reaches the results.
    assert not any("left out" in w.value for w in demo.warning)
    assert not any("drew its pairs" in i.value for i in demo.info)
    cons = next(t for t in _tables(demo) if "w_ij" in t.columns)
    constrained = int(((cons["w_ij"] > 0) | (cons["w_ji"] > 0)).sum())
    assert any(f"{constrained} pairs)" in c.value for c in demo.caption)
    # A learner fitting every row still gets them all, and the page says the people differ.
    demo.selectbox(key="fe_results_population").select("full").run()
    assert not demo.exception
    assert any("Every pooled pair shows people the learner fits" in i.value for i in demo.info)


def test_an_older_whole_file_session_opens_and_says_which_pairs_the_learner_leaves_out():
    import numpy as np
    from core.datasets import compas_population
    from core.fairness.elicitation import SessionConfig
    from core.fairness.store import get_store
    store = get_store()
    created = store.create_session(SessionConfig(population="full", n_core=4, n_random=40, n_repeat=0, seed=1),
                                   "Whole file")
    for name in ("Ann", "Bo"):
        me = store.join(created.join_code, name)
        cards = store.my_assignment(me.token)
        store.record_answers(me.token, pd.DataFrame({"position": cards["position"], "response": "same"}))
    judged = store.judgments(created.session_id, created.facilitator_key)
    all_pairs = {tuple(p) for p in np.sort(judged[["a", "b"]].to_numpy(), axis=1)}
    paper = set(compas_population("paper").tolist())
    outside = sum(1 for i, j in all_pairs if i not in paper or j not in paper)
    assert outside > 0
    at = _app()
    at.text_input(key="fe_open_code").input(created.join_code)
    at.text_input(key="fe_open_key").input(created.facilitator_key)
    at.button(key="fe_open").click().run()
    assert not at.exception and not at.error
    note = next(w.value for w in at.warning if "left out" in w.value)
    assert f"{outside} of {len(all_pairs)} pooled pair(s)" in note and "every row" in note
    assert any(f"{len(all_pairs) - outside} pairs)" in c.value for c in at.caption)
    # Choosing the session's people hands every pair to the learner.
    at.selectbox(key="fe_results_population").select("full").run()
    assert not at.exception and not any("left out" in w.value for w in at.warning)
    assert any(f"{len(all_pairs)} pairs)" in c.value for c in at.caption)


def _compas_releases():
    from core.privacy.project_ledger import ProjectLedger, data_key
    from core.contracts import DataRef
    return [r for r in ProjectLedger().releases(data_key(DataRef("compas")), "release")
            if r.page == "Fairness elicitation"]


def _secure_draws(monkeypatch) -> list:
    """Count the draws of OpenDP's sampler (SecureNoise) while still drawing them."""
    from core.synthesis.noise import SecureNoise
    calls, real = [], SecureNoise.gaussian

    def spy(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(SecureNoise, "gaussian", spy)
    return calls


def test_synthetic_copy_session_is_one_release_and_cards_show_synthetic_people(monkeypatch):
    from core.fairness.private_pairs import PAIR_DELTA, PrivatePairsPlan, copy_release
    from core.fairness.store import get_store
    from core.privacy.accounting import rho_for_epsilon
    draws = _secure_draws(monkeypatch)
    at = _app()
    before = len(_compas_releases())
    at.radio(key="fe_pair_source").set_value("dp_synthetic").run()
    at.number_input(key="fe_pair_epsilon").set_value(0.75).run()
    assert not at.exception and not at.error
    # No copy is made for a preview before its release: the core pairs wait for the session.
    assert not any("age (A)" in t.columns for t in _tables(at))
    assert len(_compas_releases()) == before and not draws
    assert any("new private synthetic copy" in c.value for c in at.caption)
    at.text_input(key="fe_name").input("Synthetic workshop").run()
    at.button(key="fe_create").click().run()
    assert len(_compas_releases()) == before and not draws     # nothing is released before the confirmation
    if has_button(at, "fe_create_cap_save"):                  # the data set's first release: decide its cap
        decide_cap(at, "fe_create")
    at.button(key="fe_create_confirm").click().run()
    assert not at.exception and not at.error
    assert draws                                   # the copy's noise came from OpenDP's sampler
    releases = _compas_releases()
    assert len(releases) == before + 1
    rel = releases[-1]
    session = at.session_state["fe_fac"]
    store = get_store()
    config = store.config(session["session_id"], session["key"])
    first = config.pair_copy
    sub = PrivatePairsPlan(population=config.population, epsilon=0.75, copy_id=first)
    assert first and rel.release_key == copy_release(sub).release_key and rel.release_key.endswith(first)
    assert rel.plan_digest == sub.replace(copy_id="").digest() and "seed" not in rel.label   # the copy, not its id
    assert abs(sum(s.amount for s in rel.spends) - rho_for_epsilon(0.75, PAIR_DELTA)) < 1e-12
    stored = store.load_copy(first)                # the copy the cards show is the stored one
    assert stored.secure and len(stored.cards) == 2000
    assert any("synthetic" in i.value for i in at.info)
    # Before any answer the learning view already states that the constraint people are synthetic.
    assert any("sampling assumption does not hold" in w.value for w in at.warning)
    # A stakeholder joins: the card says the people are synthetic and shows ranges.
    sh = _app(join=session["join_code"])
    sh.text_input(key="fe_join_name").input("Ana").run()
    sh.checkbox(key="fe_consent").check().run()
    sh.button(key="fe_join").click().run()
    assert not sh.exception and not sh.error
    assert any("synthetic" in c.value for c in sh.caption)
    card = sh.table[0].value                       # one table: features as rows, the two people as columns
    assert list(card.columns) == ["Person A", "Person B"]
    ages = list(card.loc["Age"])
    assert len(ages) == 2 and all("years old" in a and ("-" in a or "+" in a) for a in ages)
    a, b = store.my_assignment(sh.session_state["fe_login"]["token"])[["a", "b"]].iloc[0]
    assert ages[0].replace("\\", "").endswith(f"{stored.cards['age'].iloc[int(a)]} years old")
    # A second session reuses the released copy by default: the same people, nothing charged again.
    at.button(key="fe_leave").click().run()
    assert not at.exception
    assert at.checkbox(key="fe_reuse_copy").value is True
    assert any("already released" in c.value for c in at.caption)
    assert any("age (A)" in t.columns for t in _tables(at))   # the preview now shows the released copy
    n_draws = len(draws)
    at.button(key="fe_create").click().run()
    assert not at.exception and not at.error
    assert len(_compas_releases()) == before + 1 and len(draws) == n_draws
    again = at.session_state["fe_fac"]
    assert store.config(again["session_id"], again["key"]).pair_copy == first
    # Without reuse a new copy is released: new noise, another id, other people, one more release.
    at.button(key="fe_leave").click().run()
    at.checkbox(key="fe_reuse_copy").uncheck().run()
    at.button(key="fe_create").click().run()
    assert any("This is a repeat" in w.value for w in at.warning)     # a second copy of the same: said so
    at.button(key="fe_create_confirm").click().run()
    assert not at.exception and not at.error
    third = at.session_state["fe_fac"]
    second = store.config(third["session_id"], third["key"]).pair_copy
    assert second != first and len(_compas_releases()) == before + 2 and len(draws) > n_draws
    assert not store.load_copy(second).cards.equals(stored.cards)


def test_demo_on_a_synthetic_copy_works_and_records_the_copy_once():
    at = _app()
    before = len(_compas_releases())
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.radio(key="fe_pair_source").set_value("dp_synthetic").run()
    at.number_input(key="fe_pair_epsilon").set_value(1.25).run()    # a budget no other test releases
    at.number_input(key="fe_demo_stakeholders").set_value(4).run()
    press(at, "fe_demo_run")
    assert not at.exception and not at.error
    assert len(_compas_releases()) == before + 1
    progress = _progress(at)
    assert len(progress) == 4 and (progress["answered"] > 0).all()
    at.button(key="fe_demo_run").click().run()
    assert not at.exception and len(_compas_releases()) == before + 1


def test_learning_on_a_synthetic_copy_demo_draws_the_frontier_with_the_synthetic_note():
    import json
    at = _app()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.radio(key="fe_pair_source").set_value("dp_synthetic").run()
    at.number_input(key="fe_demo_stakeholders").set_value(4).run()
    press(at, "fe_demo_run")                 # a new copy is confirmed; an earlier one of the same is reused
    assert not at.exception and not at.error
    assert not any("cannot place" in i.value for i in at.info)          # no refusal any more
    released = len(_compas_releases())
    at.select_slider(key="fe_results_T").set_value(100)
    at.selectbox(key="fe_results_oracle").select("ols")
    at.button(key="fe_results_run").click().run()
    assert not at.exception and not at.error
    assert len(_compas_releases()) == released      # learning reuses the session's copy: no new release
    charts = [c for c in at.get("plotly_chart") if "frontier_chart" in c.proto.id]
    assert len(charts) == 1 and json.loads(charts[0].proto.spec)["data"]
    assert any("sampling assumption does not hold" in w.value for w in at.warning)
    assert any("private synthetic copy" in c.value for c in at.caption)
    # The plan behind the results carries the session's copy, and the exported tables say so.
    plan = at.session_state["fe_results_plan"]
    sub = at.session_state["fe_demo_plan"].private_pairs_plan()
    assert sub.copy_id and plan.constraints.people == sub and max(plan.constraints.i + plan.constraints.j) < 2000
    binding = next(d.value for d in at.dataframe if d.value is not None
                   and "person i (synthetic person number)" in d.value.columns)
    assert len(binding) > 0
    # The run is logged like a real-records one.
    assert len(_run_history(at)) == 1


def test_a_synthetic_session_stored_before_copies_were_kept_says_so_instead_of_failing():
    from core.fairness.elicitation import SessionConfig
    from core.fairness.store import get_store
    store = get_store()
    old = SessionConfig(n_core=1, n_random=1, n_repeat=0, pair_source="dp_synthetic")   # no copy id
    with store.write_tx() as conn:   # as such a session was stored (create_session now refuses it)
        created = store.insert_session(conn, old, "old synthetic", simulated=False, n_individuals=2000)
    sh = _app(join=created.join_code)
    sh.text_input(key="fe_join_name").input("Ana").run()
    sh.checkbox(key="fe_consent").check().run()
    sh.button(key="fe_join").click().run()
    assert not sh.exception
    assert any("never stored" in e.value for e in sh.error)
    assert not [m for m in sh.markdown if m.value.startswith("**Age:**")]
    # The facilitator still opens it: monitor and export work, the parts needing its people say why not.
    at = _app()
    at.text_input(key="fe_open_code").input(created.join_code)
    at.text_input(key="fe_open_key").input(created.facilitator_key)
    at.button(key="fe_open").click().run()
    assert not at.exception
    assert any("never stored" in e.value for e in at.error)


def test_facilitator_sees_the_join_code_once_in_its_read_aloud_form():
    from core.fairness.store import format_code
    fac = _app()
    fac.button(key="fe_create").click().run()
    code = fac.session_state["fe_fac"]["join_code"]
    fac.button(key="fe_key_saved").click().run()
    shown = [m.value for m in fac.markdown] + [c.value for c in fac.caption] + [c.value for c in fac.code]
    assert sum(format_code(code) in text for text in shown) == 1       # one place, one form
    assert not any(code in text for text in shown)                     # never the undivided form beside it
