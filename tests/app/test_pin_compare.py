"""Pin and compare on two pages with Streamlit's AppTest: pin A, change settings, see B beside A;
the pin survives leaving the page, is never rerun, saves by name and reopens; two report files compare."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import core.census
from core.compare import Snapshot
from core.report import build_report, report_json

DASH = Path(__file__).resolve().parents[2] / "dashboard"
BUDGET = str(DASH / "tools" / "budget_allocation.py")
APP = str(DASH / "app.py")
EXPORT_TAB = "Export & release"
KEY = "budget_allocation"          # the budget page's report panel key
DELTA = "Headline number"


def _ok(at):
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def _delta(at):
    return next(d.value for d in at.dataframe if DELTA in d.value.columns).set_index(DELTA)


def _budget_page():
    at = AppTest.from_file(BUDGET, default_timeout=240)
    _ok(at.run())
    at.session_state["ba_tab"] = EXPORT_TAB
    return _ok(at.run())


@pytest.fixture(scope="module")
def pinned_budget():
    """The budget page with its default results pinned as A and the split then changed to block-heavy."""
    at = _budget_page()
    _ok(at.button(key=f"{KEY}__pin_a").click().run())
    pin = at.session_state[f"{KEY}__pin"]
    at.selectbox(key="ba_preset").set_value("block-heavy")
    _ok(at.run())
    return at, pin


def test_pin_then_change_shows_b_beside_a_with_sign_and_percentage(pinned_budget):
    at, pin = pinned_budget
    assert isinstance(pin, Snapshot) and pin.plan_class == "BudgetPlan"
    current = at.session_state["ba_plan"] if "ba_plan" in at.session_state else None
    delta = _delta(at)
    for name, value in pin.headline.items():                      # A is the pinned report, as it was
        assert delta.loc[name, "A (pinned)"] == pytest.approx(value, nan_ok=True)
    sd_rows = [n for n in delta.index if n.startswith("error sd:")]
    assert sd_rows and any(delta.loc[n, "B − A"] != 0 for n in sd_rows)
    row = delta.loc[sd_rows[0]]
    assert row["B − A"] == pytest.approx(row["B (current)"] - row["A (pinned)"])
    assert row["Change (% of A)"] == pytest.approx(100 * row["B − A"] / abs(row["A (pinned)"]))
    assert delta.loc["total budget", "Direction"] == "same"
    assert current is None or current.digest() != pin.plan_digest
    overlay = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    names = {t.get("name") for fig in overlay for t in fig["data"]}
    assert {"A (pinned)", "B (current)"} <= names                 # the budget per level, A and B overlaid


def test_comparison_does_not_rerun_a(pinned_budget, monkeypatch):
    at, pin = pinned_budget
    seen = []
    real = core.census.run

    @functools.wraps(real)         # keeps the cache's helpers the page uses
    def spy(plan, *args, **kwargs):
        seen.append(plan.digest())
        return real(plan, *args, **kwargs)

    monkeypatch.setattr(core.census, "run", spy)
    _ok(at.run())
    assert seen and pin.plan_digest not in seen
    assert at.session_state[f"{KEY}__pin"] is pin


def test_saved_by_name_and_reopened_as_a(pinned_budget):
    at, pin = pinned_budget
    at.text_input(key=f"{KEY}__save_name").input("default split")
    _ok(at.button(key=f"{KEY}__save").click().run())
    assert any("Saved as 'default split'" in s.value for s in at.success)
    _ok(at.button(key=f"{KEY}__unpin").click().run())
    assert f"{KEY}__pin" not in at.session_state
    at.selectbox(key=f"{KEY}__open_name").set_value("default split")
    _ok(at.button(key=f"{KEY}__open").click().run())
    reopened = at.session_state[f"{KEY}__pin"]
    assert reopened.plan_digest == pin.plan_digest and reopened.headline == pin.headline
    assert _delta(at).loc["total budget", "A (pinned)"] == pin.headline["total budget"]


def _reopen(at, name: str) -> Snapshot:
    at.selectbox(key=f"{KEY}__open_name").set_value(name)
    _ok(at.button(key=f"{KEY}__open").click().run())
    return at.session_state[f"{KEY}__pin"]


def test_saving_under_a_used_name_asks_before_replacing(pinned_budget):
    at, pin = pinned_budget
    at.text_input(key=f"{KEY}__save_name").input("asked first")
    _ok(at.button(key=f"{KEY}__save").click().run())              # A (the default split) saved
    _ok(at.button(key=f"{KEY}__unpin").click().run())              # now "these results": block-heavy
    at.text_input(key=f"{KEY}__save_name").input("asked first")
    _ok(at.button(key=f"{KEY}__save").click().run())
    assert any("Replace the saved scenario 'asked first'?" in w.value for w in at.warning)
    assert not any("Saved as" in s.value for s in at.success)
    _ok(at.button(key=f"{KEY}__replace_no").click().run())         # cancel: the earlier one stays
    assert not any("Replace the saved scenario" in w.value for w in at.warning)
    assert _reopen(at, "asked first").plan_digest == pin.plan_digest
    _ok(at.button(key=f"{KEY}__unpin").click().run())
    at.text_input(key=f"{KEY}__save_name").input("asked first")
    _ok(at.button(key=f"{KEY}__save").click().run())
    _ok(at.button(key=f"{KEY}__replace_yes").click().run())        # replace, once confirmed
    assert any("Saved as 'asked first'" in s.value for s in at.success)
    assert _reopen(at, "asked first").plan_digest != pin.plan_digest


def test_two_report_files_compare(tmp_path):
    from core.census import BudgetPlan

    plan = BudgetPlan()
    raw_a = report_json(build_report(core.census.run(plan), page="Budget allocation")).encode()
    other = plan.replace(total=plan.total * 2)
    raw_b = report_json(build_report(core.census.run(other), page="Budget allocation")).encode()
    at = _budget_page()
    at.file_uploader(key=f"{KEY}__file_a").set_value(("a.json", raw_a, "application/json"))
    at.file_uploader(key=f"{KEY}__file_b").set_value(("b.json", raw_b, "application/json"))
    _ok(at.run())
    delta = _delta(at)
    assert "total budget" in delta.index
    assert delta.loc["total budget", "B − A"] == pytest.approx(plan.total)
    at.file_uploader(key=f"{KEY}__file_a").set_value(None)        # uploaders forget; the session keeps the bytes
    _ok(at.run())
    assert any("Using a.json" in c.value for c in at.caption)
    assert _delta(at).equals(delta)
    _ok(at.button(key=f"{KEY}__file_a__forget").click().run())
    assert not any(DELTA in d.value.columns for d in at.dataframe)
    at.file_uploader(key=f"{KEY}__file_a").set_value(("a.json", raw_a, "application/json"))
    at.file_uploader(key=f"{KEY}__file_b").set_value(("bad.json", b'{"x": 1}', "application/json"))
    at.run()
    assert not at.exception
    assert any("Cannot compare" in e.value or "not a report" in e.value for e in at.error)


def test_district_pin_survives_navigation_and_maps_the_difference():
    at = AppTest.from_file(APP, default_timeout=300)
    _ok(at.run())
    _ok(at.switch_page("tools/district_maps.py").run())
    _ok(at.button(key="dm_report__pin_a").click().run())
    pin = at.session_state["dm_report__pin"]
    at.number_input(key="dm_k").set_value(2)
    _ok(at.run())
    before = _delta(at)
    assert before.loc["districts", "A (pinned)"] == 4 and before.loc["districts", "B (current)"] == 2
    assert before.loc["districts", "Change (% of A)"] == pytest.approx(-50.0)
    assert "largest true deviation (%)" in before.index          # machine names read as words
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    maps = [f for f in figures if "B − A" in f["layout"].get("title", {}).get("text", "")
            and any(t["type"] == "choroplethmap" for t in f["data"])]
    assert len(maps) == 1 and len(maps[0]["data"][0]["locations"]) == 2      # B's two districts
    # the A/B report draws the same figures as the panel: the overlay and the difference map
    html = at.session_state["dm_report__html_builder"]()
    assert "Per-district difference, B \\u2212 A: mean absolute population error (people)" in html
    _ok(at.switch_page("home.py").run())
    _ok(at.switch_page("tools/district_maps.py").run())
    assert at.session_state["dm_report__pin"] is pin
    after = _delta(at)
    assert after.equals(before)


def test_overlay_figures_draw_a_and_b_on_one_set_of_axes():
    import pandas as pd

    from core.figures.compare import OverlaySpec, headline_change_figure, overlay_figure
    from core.compare import headline_delta

    a = pd.DataFrame({"unfairness": [0.3, 0.1, 0.2], "error": [0.30, 0.36, 0.33]})
    b = a.assign(error=a["error"] - 0.01)
    fig = overlay_figure(a, b, OverlaySpec("frontier_points", "unfairness", ("error",), "Frontier", line=True))
    assert [t.name for t in fig.data] == ["A (pinned)", "B (current)"]
    assert list(fig.data[0].x) == [0.1, 0.2, 0.3] and fig.data[0].line.dash == "dash"   # sorted along x
    bars = overlay_figure(a.assign(level=["x", "y", "z"]), b.assign(level=["x", "y", "z"]),
                          OverlaySpec("t", "level", ("missing", "error"), "By level"))
    assert {t.type for t in bars.data} == {"bar"}
    change = headline_change_figure(headline_delta({"n": 2.0, "z": 0.0}, {"n": 3.0, "z": 1.0}))
    assert list(change.data[0].x) == [0.0, 50.0]           # no percentage from 0: listed without a bar


def _snapshots(result_a, result_b, page):
    from core.compare import compare, snapshot_of_result

    return compare(snapshot_of_result(result_a, page=page, label="A"), snapshot_of_result(result_b, page=page, label="B"))


def _trace_names(fig) -> set:
    return {t.name for t in fig.data}


def test_synthesis_overlay_draws_parity_error_curves_of_a_and_b():
    """The synthesis page's main figure: parity error against epsilon per method, seeds averaged, A and B."""
    from core.contracts import DataRef
    from core.datasets import load_cps
    from core.synthesis import SweepPlan, SynthesisPlan
    from core.synthesis.workflow import run
    from dashboard.components.pin_compare import overlay_for

    cols = ("sex", "race", "income", "education")
    base = SynthesisPlan(data=DataRef("cps"), columns=cols, strata=("sex",), sizes_declared_public=True,
                         sweep=SweepPlan(epsilons=(0.5, 2.0), seeds=(0, 1), n_trees=5))
    frame = load_cps()[list(cols)]
    a, b = run(base, frame), run(base.replace(strata=("race",)), frame)
    fig = overlay_for(_snapshots(a, b, "Stratified synthesis"))
    assert fig.layout.title.text.startswith("Parity error")
    assert {"A (pinned): pooled", "A (pinned): stratified", "B (current): pooled",
            "B (current): stratified"} <= _trace_names(fig)
    om = a.tables()["overall_metrics"]
    want = om[(om["metric"] == "parity_error") & (om["method"] == "pooled")].groupby("epsilon")["value"].mean()
    drawn = next(t for t in fig.data if t.name == "A (pinned): pooled")
    assert list(drawn.x) == [0.5, 2.0] and list(drawn.y) == pytest.approx(list(want))   # seeds averaged


def test_elicitation_overlay_counts_pairs_by_agreement():
    from core.fairness.elicitation_plan import ElicitationPlan, run_elicitation
    from core.fairness.area import agreement_distribution
    from dashboard.components.pin_compare import overlay_for

    a = run_elicitation(ElicitationPlan(demo_stakeholders=6, demo_kind="metric"))
    b = run_elicitation(ElicitationPlan(demo_stakeholders=6, demo_kind="score"))
    fig = overlay_for(_snapshots(a, b, "Fairness elicitation"))
    assert _trace_names(fig) == {"A (pinned)", "B (current)"} and fig.layout.title.text.startswith("Agreement")
    dist = agreement_distribution(a.constraints)
    seen = a.constraints[a.constraints["n_judges"] >= 2]
    assert dist["pairs"].sum() == len(seen)
    drawn = next(t for t in fig.data if t.name == "A (pinned)")
    assert list(drawn.y) == list(dist["pairs"])


def test_overlay_falls_back_to_headline_bars_without_a_demo_panel():
    from core.fairness.elicitation_plan import ElicitationPlan, run_elicitation
    from dashboard.components.pin_compare import overlay_for

    a, b = run_elicitation(ElicitationPlan()), run_elicitation(ElicitationPlan(n_core=8))
    fig = overlay_for(_snapshots(a, b, "Fairness elicitation"))
    assert fig.layout.title.text == "Headline numbers, A and B"


def test_two_synthesis_reports_compare_on_every_table_and_name_the_worst_off_groups():
    """The noise table of a synthesizer that measures no two-way marginal (a column of nulls in its report)
    against one that does: chosen under "Differences in the table", it shows its cells, not an error."""
    from core.contracts import DataRef
    from core.synthesis import SweepPlan, SynthesisPlan, run

    def raw(synthesizer: str) -> bytes:
        plan = SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income"), strata=("race",),
                             synthesizer=synthesizer, sweep=SweepPlan(epsilons=(3.0,), seeds=(0,)), marginals=None,
                             means=None)
        return report_json(build_report(run(plan), page="Stratified synthesis")).encode()

    at = _budget_page()
    at.file_uploader(key=f"{KEY}__file_a").set_value(("a.json", raw("independent"), "application/json"))
    at.file_uploader(key=f"{KEY}__file_b").set_value(("b.json", raw("mst"), "application/json"))
    _ok(at.run())
    box = at.selectbox(key=f"{KEY}__files__delta_table")
    assert "noise" in box.options
    for name in box.options:
        _ok(box.set_value(name).run())
        assert any("Quantity" in d.value.columns for d in at.dataframe), name      # the table's cell deltas
    worst = next(d.value for d in at.dataframe if "Under" in d.value.columns)
    assert {"Under", "A (pinned)", "B (current)", "Changed"} <= set(worst.columns) and len(worst) == 2
