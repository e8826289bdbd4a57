"""Against a real dashboard server: a stakeholder's answer reruns only the card's fragment (as a browser
sends it), the answer is stored once, and the fragment's run shows the next card and the new count."""
from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("websockets")


def test_an_answer_is_a_fragment_run_that_stores_it_and_shows_the_next_card(tmp_path):
    import session_load_bench as bench
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit_ws_client import StreamlitSession

    from core.fairness.store import ElicitationStore

    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    store = ElicitationStore(url)
    created = store.create_session(bench.design(3), "Fragment")

    async def answer_two(base: str) -> list:
        page = StreamlitSession(base, bench.PAGE, f"join={created.join_code}")
        await page.open()
        try:
            await page.run()
            page.set_value("text_input", "fe_join_name", string_value="Gus")
            page.set_value("checkbox", "fe_consent", bool_value=True)
            joined = await page.click("fe_join")
            seen = [(joined.status, bench.answered_count(page), "#### Card 1 of 3" in page.texts())]
            for _ in range(2):
                outcome = await page.click("fe_ans_same")
                seen.append((outcome.status, bench.answered_count(page),
                             any(t.startswith("#### Card") for t in page.texts()), page.texts()))
            return seen
        finally:
            await page.close()

    with tempfile.TemporaryDirectory() as folder:
        with bench.dashboard(Path(folder), DASHBOARD_DB_URL=url, DASHBOARD_CACHE_DIR=str(tmp_path / "cache")) as base:
            seen = asyncio.run(answer_two(base))
    assert seen[0] == (ForwardMsg.FINISHED_SUCCESSFULLY, 0, True)
    for k, (status, count, card, texts) in enumerate(seen[1:], start=1):
        assert status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY      # only the card reran
        assert count == k and card and f"#### Card {k + 1} of 3" in texts
        assert "Pairwise fairness elicitation" in texts     # the page around the card stays drawn
    events = store.event_log(created.session_id, created.facilitator_key)
    assert len(events) == 2 and list(events["position"]) == [0, 1]
    store.dispose()
