"""The facilitator's reads of a live session are built once per session revision: a refresh with no new
answer reuses the progress and answer tables, and any answer, undo, join or withdrawal is seen at once."""
from __future__ import annotations

import uuid

import pandas as pd
import pytest

from core.fairness import ElicitationPlan
from core.fairness.elicitation import RETRACT
from core.fairness.store import ElicitationStore


def _counting(store: ElicitationStore) -> list:
    """Count the store's builds of the answer table (judgment_frame) from now on."""
    calls = []
    built = store.judgment_frame

    def counted(conn, session_id):
        calls.append(session_id)
        return built(conn, session_id)
    store.judgment_frame = counted
    return calls


def _fresh(url: str, session_id: str, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Progress and answers read by a store that keeps nothing yet (a second process)."""
    other = ElicitationStore(url)
    try:
        return other.progress(session_id, key), other.judgments(session_id, key)
    finally:
        other.dispose()


def test_progress_and_answers_share_one_read_per_revision_and_follow_every_change(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = ElicitationStore(url)
    created = store.create_session(ElicitationPlan(n_core=3, n_random=3, n_repeat=0), "t")
    sid, key = created.session_id, created.facilitator_key
    ann = store.join(created.join_code, "Ann")
    calls = _counting(store)

    store.record_answer(ann.token, 0, "same", uuid.uuid4().hex)
    first = store.live_reads(sid, key)
    assert len(calls) == 1                                   # progress and answers from one table
    assert store.progress(sid, key).equals(first.progress) and store.judgments(sid, key).equals(first.judgments)
    assert len(calls) == 1                                   # nothing changed: nothing rebuilt
    assert int(first.progress["answered"].iloc[0]) == 1 and list(first.judgments["response"]) == ["same"]

    # A caller changing its copy does not change what the next caller gets.
    first.judgments.loc[0, "response"] = "differ"
    assert list(store.judgments(sid, key)["response"]) == ["same"]

    steps = [lambda: store.record_answer(ann.token, 1, "differ", uuid.uuid4().hex),     # an answer
             lambda: store.record_answer(ann.token, 1, RETRACT, uuid.uuid4().hex),      # an undo
             lambda: store.join(created.join_code, "Bob"),                              # a join
             lambda: store.delete_stakeholder(sid, key, "Ann")]                         # a withdrawal
    for n, step in enumerate(steps, start=2):
        before = store.live_reads(sid, key).revision
        step()
        now = store.live_reads(sid, key)
        assert now.revision != before and len(calls) == n
        progress, judged = _fresh(url, sid, key)
        pd.testing.assert_frame_equal(now.progress, progress)
        pd.testing.assert_frame_equal(now.judgments, judged)
    assert list(now.progress["stakeholder"]) == ["Bob"] and now.judgments.empty


def test_the_key_is_checked_on_every_read_even_when_the_tables_are_kept(tmp_path):
    store = ElicitationStore(f"sqlite:///{tmp_path / 's.db'}")
    created = store.create_session(ElicitationPlan(n_core=2, n_random=0, n_repeat=0), "t")
    store.live_reads(created.session_id, created.facilitator_key)
    with pytest.raises(PermissionError):
        store.live_reads(created.session_id, "not-the-key-" + "x" * 20)
