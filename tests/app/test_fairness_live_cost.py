"""What keeps a live elicitation cheap on the server, checked by behaviour: a stakeholder's answer goes
through the card's fragment, is stored and the next card shown; a facilitator's refresh builds the
session's answer table once and pools nothing again while no answer came in; the design's report is
drawn when asked."""
from __future__ import annotations

import uuid
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.fairness.store import SessionStore, get_store

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "fairness_elicitation.py")


def _app(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    return at


def _session() -> tuple[AppTest, dict]:
    fac = _app()
    fac.number_input(key="fe_n_random").set_value(2).run()
    fac.number_input(key="fe_n_core").set_value(3).run()
    fac.button(key="fe_create").click().run()
    assert not fac.exception and not fac.error
    return fac, fac.session_state["fe_fac"]


def test_an_answer_through_the_card_fragment_is_stored_and_the_next_card_shown():
    _, session = _session()
    sh = _app(join=session["join_code"])
    sh.text_input(key="fe_join_name").input("Flo").run()
    sh.checkbox(key="fe_consent").check().run()
    sh.button(key="fe_join").click().run()
    assert any("Card 1 of " in m.value for m in sh.markdown)
    sh.button(key="fe_ans_differ").click().run()
    assert not sh.exception and not sh.error
    assert any("Card 2 of " in m.value for m in sh.markdown)
    assert sh.get("progress")[0].proto.text.startswith("1 of ")
    token = sh.session_state["fe_login"]["token"]
    cards = get_store().my_assignment(token)
    assert list(cards["response"].iloc[:2]) == ["differ", None]
    # Signing out from inside the fragment brings the whole page back to the join form.
    sh.button(key="fe_signout").click().run()
    assert not sh.exception and sh.button(key="fe_join") is not None


def test_a_refresh_builds_the_answer_table_once_and_pools_again_only_after_new_answers(monkeypatch):
    fac, session = _session()
    store = get_store()
    ann = store.join(session["join_code"], "Ann")
    store.record_answer(ann.token, 0, "same", uuid.uuid4().hex)

    built, pooled = [], []
    frame = SessionStore.judgment_frame

    def counted_frame(self, conn, session_id):
        built.append(session_id)
        return frame(self, conn, session_id)
    monkeypatch.setattr(SessionStore, "judgment_frame", counted_frame)
    import core.fairness.session_summary as summary_module
    summarise = summary_module.summarise_session

    def counted_summary(*args, **kwargs):
        pooled.append(1)
        return summarise(*args, **kwargs)
    monkeypatch.setattr(summary_module, "summarise_session", counted_summary)

    fac.button(key="fe_refresh").click().run()
    assert not fac.exception and not fac.error
    assert len(built) == 1 and len(pooled) == 1          # progress, answers and the summary share one read
    shown = {m.label: m.value for m in fac.metric}
    assert shown["Answers"] == "1"
    fac.button(key="fe_refresh").click().run()
    assert len(built) == 1 and len(pooled) == 1          # no new answer: nothing rebuilt or pooled again
    store.record_answer(ann.token, 1, "differ", uuid.uuid4().hex)
    fac.button(key="fe_refresh").click().run()
    assert len(built) == 2 and len(pooled) == 2
    assert {m.label: m.value for m in fac.metric}["Answers"] == "2"
    progress = next(d.value for d in fac.dataframe if d.value is not None and "answered" in d.value.columns)
    assert int(progress["answered"].iloc[0]) == 2
    # Other pooling choices pool again, from the same kept answers.
    fac.radio(key="fe_weighting").set_value("judged").run()
    assert len(built) == 2 and len(pooled) == 3


def test_the_designs_report_is_drawn_when_asked():
    fac, _ = _session()
    assert fac.get("download_button") is not None
    labels = [b.label for b in fac.get("download_button")]
    assert "Download report (JSON)" not in labels
    fac.toggle(key="fe_show_design").set_value(True).run()
    assert not fac.exception and not fac.error
    assert "Download report (JSON)" in [b.label for b in fac.get("download_button")]
