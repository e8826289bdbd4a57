"""The coherence page's headline numbers are the result's own headline numbers, formatted."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.coherence import run

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "coherence_audit.py")
WORST = "worst failure rate: "


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))


def _check_page_against_headline(at) -> dict:
    assert not at.exception and not at.error
    result = run(at.session_state["coh_plan"])
    head, words = result.headline(), result.headline_uncertainty()
    releases = [k[len(WORST):] for k in head if k.startswith(WORST)]
    assert releases == list(result.comparison.releases["release"])
    shown = [m.value for m in at.metric if m.label == "Worst failure rate"]
    assert shown == [f"{head[WORST + r]:.2f}" for r in releases]
    # the adversary each card names is the one the headline's uncertainty words name
    cards = [md.value for md in at.markdown if "worst adversary: " in md.value]
    for release, card in zip(releases, cards):
        adversary = re.search(r"\(adversary (.+?); upper at", words[WORST + release]).group(1)
        assert f"worst adversary: {adversary} (" in card
    # the heat map opens on the worst adversary over every release
    assert at.selectbox(key="coh_heat_adv").value == result.comparison.worst_adversary()["adversary"]
    captions = " ".join(c.value for c in at.caption)
    assert f"n = {int(head['rows audited']):,} rows" in captions
    assert f"needs at least {int(head['trials a PASS needs at least'])} trials" in captions
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["gamma, conservative"] == f"{head['theory gamma (conservative)']:,.1f}"
    return head


def test_headline_numbers_on_the_defaults_and_after_changing_alpha():
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.run()
    at.button(key="coh_run").click().run()
    before = _check_page_against_headline(at)
    at.number_input(key="coh_alpha").set_value(0.2)
    at.button(key="coh_run").click().run()
    after = _check_page_against_headline(at)
    assert at.session_state["coh_plan"].alpha == 0.2
    assert any(after[k] != before[k] for k in before if k.startswith(WORST))     # the change reached the page
