"""On a page with a pinned scenario, the stakeholder report the page offers is the A/B report: both plans
in words, the signed differences of the headline numbers and the overlay the comparison panel draws."""
from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.stakeholder_report import embedded_report
from dashboard.components.stakeholder_buttons import builder_key

BUDGET = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "budget_allocation.py")
KEY = "budget_allocation"


def _ok(at):
    assert not at.exception, at.exception
    return at


def test_pinned_budget_page_offers_an_ab_report():
    at = AppTest.from_file(BUDGET, default_timeout=240)
    _ok(at.run())
    at.session_state["ba_tab"] = "Export & release"
    _ok(at.run())
    single = at.session_state[builder_key(KEY)]()
    assert "Scenario A against scenario B" not in single                 # nothing pinned yet
    _ok(at.button(key=f"{KEY}__pin_a").click().run())
    pin = at.session_state[f"{KEY}__pin"]
    at.selectbox(key="ba_preset").set_value("block-heavy")
    _ok(at.run())
    text = at.session_state[builder_key(KEY)]()
    visible = re.sub(r"<script.*?</script>", "", text, flags=re.S)
    assert "<h2>Scenario A against scenario B</h2>" in visible
    b = embedded_report(text)
    assert b["plan_digest"] != pin.plan_digest
    assert pin.plan_digest[:16] in visible and b["plan_digest"][:16] in visible    # both plans, in words
    assert "split equally" in visible and "split by the paper&#x27;s &#x27;block-heavy&#x27; rule" in visible
    delta = visible.split("<table class='delta'>", 1)[1].split("</table>", 1)[0]
    assert re.search(r"<td class='num signed'>[+-]\d", delta)                  # signed differences
    assert "Budget per level" in text and "A (pinned)" in text                # the panel's overlay
    assert "How should one privacy budget be shared" in visible               # the page's question
