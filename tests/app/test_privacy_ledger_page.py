"""The Privacy ledger page, the sidebar badge and the cap warning on a release button, with AppTest."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.privacy.accounting import rho_to_epsilon
from core.privacy.ledger import Spend
from core.privacy.project_ledger import DEFAULT_DELTA, Cap, LedgerRelease, ProjectLedger

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
PAGE = "tools/privacy_ledger.py"


@pytest.fixture()
def seeded():
    """A data set (an upload's fingerprint) with two releases and one seeded simulation in the project ledger."""
    key = "upload:" + uuid.uuid4().hex * 2
    ledger = ProjectLedger()
    spends = [
        ("counts", (Spend("county counts", 0.5, "epsilon", "parallel", "counties", "every unit", "counts"),
                    Spend("tract counts", 0.25, "epsilon", "parallel", "counties", "every unit", "counts"))),
        ("synth", (Spend("marginals", 0.02, "rho", measured="two-way marginals"),)),
    ]
    for action, group in spends:
        ledger.record(LedgerRelease(key, f"{action}:d", "release", "Test page", action, f"{action} release", "d" * 64,
                                    group, "Ledger test data"))
    ledger.record(LedgerRelease(key, "preview:d", "simulation", "Test page", "preview", "seeded preview", "d" * 64,
                                (Spend("preview", 3.0, "epsilon"),), "Ledger test data"))
    yield key
    ledger.set_cap(key, None)


def _ledger_page(key: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    at.selectbox(key="pl_data").set_value(key).run()
    assert not at.exception and not at.error
    return at


def test_the_page_shows_the_composed_total_the_chart_and_simulations_apart(seeded):
    at = _ledger_page(seeded)
    metrics = {m.label: m.value for m in at.metric}
    # one parallel group whose single part holds epsilon 0.5 + 0.25 (rho 0.5²/2 + 0.25²/2), then rho 0.02
    rho = 0.5 ** 2 / 2 + 0.25 ** 2 / 2 + 0.02
    expected = min(0.75 + rho_to_epsilon(0.02, DEFAULT_DELTA), rho_to_epsilon(rho, DEFAULT_DELTA))
    assert metrics["Releases"] == "2"
    assert metrics["Total epsilon"] == f"{expected:.4g}"
    assert metrics["Total rho (zCDP)"] == f"{rho:.4g}"
    tables = [d.value for d in at.dataframe]
    releases = next(t for t in tables if "counts release" in set(t.get("release_label", [])))
    simulations = next(t for t in tables if "seeded preview" in set(t.get("release_label", [])))
    assert len(releases) == 3 and len(simulations) == 1
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert chart["data"][0]["x"] == [0, 1, 2]                  # from nothing, then two releases; no preview
    sidebar = " ".join(m.value for m in at.sidebar.markdown) + " ".join(c.value for c in at.sidebar.caption)
    assert "Ledger test data" in sidebar


def test_a_cap_set_on_the_page_is_kept_and_checked(seeded):
    at = _ledger_page(seeded)
    assert any("No budget cap" in i.value for i in at.info)
    at.number_input(key=f"pl_cap_amount_{seeded}").set_value(0.5).run()
    at.button(key="pl_cap_save").click().run()
    assert not at.exception
    assert ProjectLedger().cap(seeded) == Cap(0.5, "epsilon", DEFAULT_DELTA)
    assert any("over the cap" in e.value for e in at.error)
    # navigate away and back: the data set and the cap's inputs are as they were
    at.switch_page("home.py").run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert at.selectbox(key="pl_data").value == seeded
    assert at.number_input(key=f"pl_cap_amount_{seeded}").value == 0.5
    assert any("over the cap" in e.value for e in at.error)


def test_a_release_over_the_cap_is_refused_with_what_to_change():
    ledger = ProjectLedger()
    ledger.set_cap("stylised", Cap(0.01, "epsilon", DEFAULT_DELTA))
    try:
        at = AppTest.from_file(str(ROOT / "dashboard" / "tools" / "budget_allocation.py"), default_timeout=240)
        at.run()
        at.session_state["ba_tab"] = "Export & release"     # the page runs only the open tab
        at.run()
        assert not at.exception
        before = len(ledger.releases("stylised", "release"))
        at.button(key="ba_release").click().run()
        assert not at.exception
        # the confirmation says it would go over, and what to change; confirming is blocked
        assert any("past its cap" in e.value and "raise the cap" in e.value for e in at.error)
        assert at.button(key="ba_release_confirm").disabled
        assert len(ledger.releases("stylised", "release")) == before
        ledger.set_cap("stylised", Cap(1000.0, "epsilon", DEFAULT_DELTA))   # the cap raised on the ledger page
        at.run()
        assert not at.button(key="ba_release_confirm").disabled
        at.button(key="ba_release_confirm").click().run()
        assert not at.exception and not at.error
        assert len(ledger.releases("stylised", "release")) == before + 1
        assert ledger.releases("stylised", "release")[-1].page == "Budget allocation"
    finally:
        ledger.set_cap("stylised", None)


def test_every_report_carries_its_data_sets_ledger(seeded):
    """What report_panel adds to every report: the project ledger of the plan's data set."""
    from core.census import BudgetPlan
    from core.contracts import DataRef
    from types import SimpleNamespace
    from dashboard.components.ledger_badge import ledger_for_report

    fingerprint = seeded.split(":", 1)[1]
    plan = SimpleNamespace(data=DataRef("upload", fingerprint))     # any plan naming the upload
    exported = ledger_for_report(plan)
    json.dumps(exported, allow_nan=False)
    assert exported["data_key"] == seeded
    assert len(exported["releases"]) == 3 and len(exported["simulations"]) == 1
    assert {r["plan_digest"] for r in exported["releases"]} == {"d" * 64}
    # a census plan's releases are those of its geography
    assert ledger_for_report(BudgetPlan())["data_key"] == "stylised"


def test_sidebar_labels_are_plain_text_and_tell_uploads_with_one_name_apart():
    """A file name reaches every page's sidebar: it must not render as an image or link, and two
    uploads that share a name must not look like one data set."""
    import pandas as pd
    from dashboard.components.ledger_badge import badge_labels
    from dashboard.components.plain_text import plain
    sets = pd.DataFrame({"data_key": ["upload:" + "a" * 64, "upload:" + "b" * 64, "cps"],
                         "data_label": ["people.csv", "people.csv", "CPS 1994-95 extract"]})
    labels = badge_labels(sets)
    assert labels["upload:" + "a" * 64] == "people.csv (aaaaaaaa)"
    assert labels["upload:" + "b" * 64] == "people.csv (bbbbbbbb)"
    assert labels["cps"] == "CPS 1994-95 extract"
    assert "![" not in plain("![x](https://example.invalid/p.png)")


def test_the_page_says_which_curator_spent_what_and_who_decided_the_cap(seeded):
    """Two curators released from one data set (one budget); the tables name each one, and the cap decision
    saved on the page names the signed-in curator (the test's, see tests/app/conftest.py)."""
    ProjectLedger().record(LedgerRelease(seeded, "grace:d", "release", "Test page", "grace", "Grace's release",
                                         "d" * 64, (Spend("counts", 0.1, "epsilon"),), "Ledger test data",
                                         curator="Grace"))
    at = _ledger_page(seeded)
    releases = next(d.value for d in at.dataframe if "Grace's release" in set(d.value.get("release_label", [])))
    assert set(releases["curator"]) == {"local", "Grace"}
    at.number_input(key=f"pl_cap_amount_{seeded}").set_value(5.0).run()
    at.button(key="pl_cap_save").click().run()
    assert ProjectLedger().cap_decided_by(seeded)[0] == "test curator"
    assert any("by test curator" in m.value for m in at.markdown)
