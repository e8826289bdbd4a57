"""The load benchmark's light client speaks Streamlit's protocol well enough to answer cards: against a
real dashboard server, two stakeholders join from the link and answer two cards each, and every answer
the page acknowledged is in the store (no timing is asserted)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("websockets")


def test_two_stakeholders_answer_two_cards_each_and_every_answer_is_stored(capsys):
    import session_load_bench

    out = session_load_bench.main(["--stakeholders", "2", "--cards", "2", "--no-sweep", "--arrival", "0.5",
                                   "--think", "0.1", "0.3"])
    printed = capsys.readouterr().out.strip().splitlines()
    assert out["failures"] == []
    assert out["expected"] == 4
    assert out["acknowledged"] == 4          # the page counted each answer after its click
    assert out["stored"] == 4                # and the store holds each one, once
    assert len(out["joins"]) == 2
    assert printed[-1].startswith("session load: stored 4/4 answers; answer p95 ")
    assert "; refresh p95 " in printed[-1] and "; load " in printed[-1]
