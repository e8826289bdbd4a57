"""The Budget allocation page's headline numbers are the result's own headline numbers, formatted."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.census import run

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "budget_allocation.py")
CLOSED_FORM = "Error sd, closed form (people)"


def _shown_matches_headline(at):
    head = run(at.session_state["ba_plan"]).headline()
    shown = {m.label: m.value for m in at.metric}
    unit = at.session_state["ba_plan"].unit
    total = head["total budget"]
    assert shown[f"Total ({unit})"] == f"{total:.4g}"
    if unit == "rho":
        assert shown["As (epsilon, delta)"].startswith(f"({head['epsilon (tight conversion)']:.3f}, ")
    else:
        assert shown["Guarantee"] == f"{total:.3g}-DP"
    assert shown["Leaves"] == f"{int(head['leaves']):,}"
    assert shown["Mean gain over the equal split (error sd)"] == \
        f"{head['mean gain of the recommended split (%)']:.1f}%"
    return head


def _open_both_tabs(at):
    """The targets table is on the first tab and the gain on the second; the page draws only the open tab."""
    at.session_state["ba_tab"] = "Levels & targets"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = next(d.value for d in at.dataframe if CLOSED_FORM in d.value.columns)
    at.session_state["ba_tab"] = "Best split"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return table


def test_page_metrics_are_the_results_headline_on_the_defaults_and_after_a_change():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    for change in (None, "rho"):
        if change == "rho":
            at.radio(key="ba_unit").set_value("rho").run()
        table = _open_both_tabs(at)
        head = _shown_matches_headline(at)
        targets = [k.removeprefix("error sd: ") for k in head if k.startswith("error sd: ")]
        assert list(table["Target"]) == targets
        for _, row in table.iterrows():
            assert row[CLOSED_FORM] == head[f"error sd: {row['Target']}"]
    assert at.session_state["ba_plan"].unit == "rho"
