"""Against a real dashboard server (the session's, ``tests/conftest.py``), spoken to in Streamlit's own
protocol by the light client the load benchmark uses (``tests/streamlit_ws_client.py``): a stakeholder's
answer reruns only the card's fragment (as a browser sends it), the answer is stored once, and the
fragment's run shows the next card and the new count; stakeholders answering at the same time each have
every acknowledged answer stored, once."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("websockets")

pytestmark = pytest.mark.slow   # a dashboard server: left out of make test-quick

PAGE = "fairness-elicitation"


def answered_count(page) -> int | None:
    """The '<k> of <n> cards answered' count the stakeholder's page shows (None if absent)."""
    for text in page.texts():
        if text.endswith("cards answered"):
            return int(text.split(" of ")[0])
    return None


def new_session(db_url: str, cards: int, name: str):
    """An elicitation session of ``cards`` core cards in the server's database: (store, created)."""
    from core.fairness import ElicitationPlan
    from core.fairness.store import ElicitationStore

    store = ElicitationStore(db_url)
    return store, store.create_session(ElicitationPlan(n_core=cards, n_random=0, n_repeat=0), name)


async def join(base: str, code: str, name: str):
    """A stakeholder's tab opened from the join link, joined under ``name``: (page, the join's outcome)."""
    from tests.streamlit_ws_client import StreamlitSession

    page = StreamlitSession(base, PAGE, f"join={code}")
    await page.open()
    await page.run()
    page.set_value("text_input", "fe_join_name", string_value=name)
    page.set_value("checkbox", "fe_consent", bool_value=True)
    return page, await page.click("fe_join")


def test_an_answer_is_a_fragment_run_that_stores_it_and_shows_the_next_card(session_server):
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    base, db_url = session_server
    store, created = new_session(db_url, 3, "Fragment")

    async def answer_two() -> list:
        page, joined = await join(base, created.join_code, "Gus")
        try:
            seen = [(joined.status, answered_count(page), "#### Card 1 of 3" in page.texts())]
            for _ in range(2):
                outcome = await page.click("fe_ans_same")
                seen.append((outcome.status, answered_count(page),
                             any(t.startswith("#### Card") for t in page.texts()), page.texts()))
            return seen
        finally:
            await page.close()

    seen = asyncio.run(answer_two())
    assert seen[0] == (ForwardMsg.FINISHED_SUCCESSFULLY, 0, True)
    for k, (status, count, card, texts) in enumerate(seen[1:], start=1):
        assert status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY      # only the card reran
        assert count == k and card and f"#### Card {k + 1} of 3" in texts
        assert "Pairwise fairness elicitation" in texts     # the page around the card stays drawn
    events = store.event_log(created.session_id, created.facilitator_key)
    assert len(events) == 2 and list(events["position"]) == [0, 1]
    store.dispose()


def test_two_stakeholders_answering_at_once_have_every_acknowledged_answer_stored_once(session_server):
    from tests.streamlit_ws_client import FINISHED_OK

    base, db_url = session_server
    store, created = new_session(db_url, 2, "Two at once")

    async def answer(name: str) -> list:
        page, joined = await join(base, created.join_code, name)
        try:
            seen = [(joined.status in FINISHED_OK, answered_count(page))]
            for _ in range(2):
                outcome = await page.click("fe_ans_same")
                seen.append((outcome.status in FINISHED_OK, answered_count(page)))
            return seen
        finally:
            await page.close()

    async def both() -> list:
        return await asyncio.gather(answer("Ada"), answer("Bo"))

    for seen in asyncio.run(both()):
        assert seen == [(True, 0), (True, 1), (True, 2)]     # joined, then each answer counted after its click
    events = store.event_log(created.session_id, created.facilitator_key)
    assert len(events) == 4                                   # the store holds each acknowledged answer, once
    assert sorted(events.groupby("pseudonym").size()) == [2, 2]   # two answers from each of the two
    store.dispose()
