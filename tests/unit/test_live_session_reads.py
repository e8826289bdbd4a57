"""What keeps a live session's clicks cheap, checked by behaviour: a stakeholder's card read (one joined
query) shows exactly the live answers the facilitator's reads do, and the server does not run a full
garbage collection after every script run."""
from __future__ import annotations

import tomllib
import uuid
from pathlib import Path

import pandas as pd

from core.fairness import ElicitationPlan
from core.fairness.elicitation import RETRACT
from core.fairness.store import ElicitationStore

ROOT = Path(__file__).resolve().parents[2]


def test_my_assignment_shows_each_cards_latest_answer_and_leaves_retracted_cards_open(tmp_path):
    store = ElicitationStore(f"sqlite:///{tmp_path / 's.db'}")
    created = store.create_session(ElicitationPlan(n_core=3, n_random=5, n_repeat=0), "t")
    ann, bob = (store.join(created.join_code, name) for name in ("Ann", "Bob"))
    for position in range(8):           # Bob answers every card: none of it may show on Ann's cards
        store.record_answer(bob.token, position, "differ", uuid.uuid4().hex)
    store.record_answer(ann.token, 0, "same", uuid.uuid4().hex)
    store.record_answer(ann.token, 0, "differ", uuid.uuid4().hex)       # revised: revision 2
    store.record_answer(ann.token, 1, "same", uuid.uuid4().hex)
    store.record_answer(ann.token, 1, RETRACT, uuid.uuid4().hex)        # undone: open again
    store.record_answer(ann.token, 2, "skip", uuid.uuid4().hex)
    store.record_answer(ann.token, 3, "same", uuid.uuid4().hex)
    store.record_answer(ann.token, 3, RETRACT, uuid.uuid4().hex)
    store.record_answer(ann.token, 3, "same", uuid.uuid4().hex)         # answered after an undo: revision 3

    cards = store.my_assignment(ann.token)
    assert list(cards.columns) == ["position", "a", "b", "kind", "repeat_of", "response", "revision"]
    assert list(cards["position"]) == list(range(8))
    assert list(cards["response"]) == ["differ", None, "skip", "same", None, None, None, None]
    assert cards["revision"].tolist() == [2, pd.NA, 1, 3, pd.NA, pd.NA, pd.NA, pd.NA]
    assert cards["response"].dtype == object and str(cards["revision"].dtype) == "Int64"
    # the facilitator's judgment rows for Ann name the same pairs and responses
    judged = store.judgments(created.session_id, created.facilitator_key)
    ann_rows = judged[judged["stakeholder"] == "Ann"].sort_values("position")
    mine = cards.dropna(subset=["response"])
    assert ann_rows["position"].tolist() == mine["position"].tolist() == [0, 2, 3]
    assert ann_rows["response"].tolist() == mine["response"].tolist()
    assert ann_rows["revision"].tolist() == mine["revision"].tolist()
    assert ann_rows[["a", "b"]].to_numpy().tolist() == mine[["a", "b"]].to_numpy().tolist()


def test_server_config_turns_off_the_collection_after_every_script_run():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
