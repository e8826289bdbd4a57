"""Fairness elicitation page end to end with Streamlit's AppTest (facilitator, stakeholder, demo)."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "fairness_elicitation.py")


def _app(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    return at


def _progress(at) -> "object":
    return next(d.value for d in at.dataframe if "answered" in d.value.columns)


def _run_history(at) -> "object":
    return next(d.value for d in at.dataframe if "constraint set" in d.value.columns)


def test_default_view_is_facilitator_setup():
    at = _app()
    assert at.title[0].value == "Pairwise fairness elicitation"
    assert at.radio(key="fe_role").value == "Facilitator"
    assert at.button(key="fe_create") is not None and not at.error
    core = next(d.value for d in at.dataframe if "age (A)" in d.value.columns)
    assert len(core) == 10 and (core["i"] != core["j"]).all()
    at.number_input(key="fe_n_core").set_value(4).run()
    assert len(next(d.value for d in at.dataframe if "age (A)" in d.value.columns)) == 4
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
    assert sh.radio(key="fe_role").value == "Stakeholder"
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
    again.text_input(key="fe_resume_token").input(sh.session_state["fe_login"]["token"]).run()
    again.button(key="fe_resume").click().run()
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
    fac.text_input(key="fe_open_code").input("ABCDEF").run()
    fac.text_input(key="fe_open_key").input("wrong").run()
    fac.button(key="fe_open").click().run()
    assert "facilitator key" in fac.error[0].value


def test_demo_fills_a_labelled_simulated_session():
    at = _app()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.number_input(key="fe_demo_n").set_value(6).run()
    at.button(key="fe_demo_run").click().run()
    assert not at.exception and not at.error
    assert any("Simulation, not a release" in w.value for w in at.warning)
    table = _progress(at)
    assert len(table) == 6 and (table["answered"] == 52).all() and table["simulated"].all()
    constraints = next(d.value for d in at.dataframe if "w_ij" in d.value.columns)
    assert (constraints["weight"] > 0).any()
    # The agreement tab's figures agree with core on the answers shown beside them.
    from core.fairness.elicitation import inter_rater_agreement
    judged = next(d.value for d in at.dataframe if "confidence" in d.value.columns)
    shown = {m.label: m.value for m in at.metric}
    assert shown["Answers"] == str(6 * 52)
    constrained = ((constraints["w_ij"] > 0) | (constraints["w_ji"] > 0)).sum()
    assert shown["Pairs with a constraint"] == str(constrained) and constrained > 0
    kappa = inter_rater_agreement(judged)["fleiss_kappa"]
    assert shown["Fleiss' kappa (core pairs)"] == f"{kappa:.2f}"
    assert shown["Self-agreement on repeats"] == f"{table['self_agreement'].mean():.2f}"
    at.radio(key="fe_weighting").set_value("judged").run()
    judged = next(d.value for d in at.dataframe if "w_ij" in d.value.columns)
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
    judged = next(d.value for d in fac.dataframe if "confidence" in d.value.columns)
    cys = judged[judged["stakeholder"] == "Cy"]
    assert list(cys["response"]) == ["differ", "same"]
    assert cys["confidence"].iloc[0] == 4 and cys["confidence"].isna().iloc[1]
    assert cys["reason"].iloc[0] == "Same priors, but one is far younger" and cys["reason"].isna().iloc[1]
    contested = next(d.value for d in fac.dataframe if "opposite_orientations" in d.value.columns)
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
    at.number_input(key="fe_demo_n").set_value(3).run()
    at.button(key="fe_demo_run").click().run()
    at.multiselect(key="fe_include").select("simulated-02").run()
    assert not at.exception
    cons = next(d.value for d in at.dataframe if "w_ij" in d.value.columns)
    judged = next(d.value for d in at.dataframe if "confidence" in d.value.columns)
    assert set(judged["stakeholder"]) == {"simulated-02"}
    assert (cons["n_judges"] == 1).all() and set(cons["weight"]) <= {0.0, 1.0}
    # Running the learner logs the run with the choices behind it, once across reruns.
    assert not any(d.value is not None and "constraint set" in d.value.columns for d in at.dataframe)
    at.select_slider(key="fe_results_rounds").set_value(100)
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
