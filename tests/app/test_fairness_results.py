"""The fairness results component end to end through a tiny Streamlit script (AppTest)."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = str(Path(__file__).resolve().parents[2])

SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import numpy as np, pandas as pd, streamlit as st
from dashboard.components.fairness_results import render_fairness_results
st.title("Results")
kind = st.session_state.get("kind", "random")
if kind == "empty":
    cons = pd.DataFrame(columns=["i", "j", "weight", "n_judges", "agreement"])
elif kind == "bad":
    cons = pd.DataFrame({{"i": [3], "j": [3], "weight": [1.0], "n_judges": [1], "agreement": [1.0]}})
else:
    rng = np.random.default_rng(5)
    i, j = rng.integers(0, 7214, 150), rng.integers(0, 7214, 150)
    keep = i != j
    cons = pd.DataFrame({{"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                         "n_judges": 3, "agreement": 2 / 3}})
logged = st.session_state.setdefault("logged", [])
context = st.session_state.get("context", {{"weighting": "panel"}})
tables = render_fairness_results(
    "fx", cons, "simulated panel", run_context=context,
    on_result=lambda cfg, res: logged.append({{"sweep": cfg.sweep, "T": cfg.T, "points": len(res.points),
                                              **context}}),
    run_history=lambda: pd.DataFrame(logged))
st.session_state["tables"] = {{k: v.shape for k, v in tables.items()}}
"""


def app(kind="random"):
    at = AppTest.from_string(SCRIPT.format(root=ROOT), default_timeout=120)
    at.session_state["kind"] = kind
    at.run()
    assert not at.exception
    return at


def run_small(at):
    at.select_slider(key="fx_T").set_value(100)
    at.selectbox(key="fx_oracle").select("ols")
    at.button(key="fx_run").click().run()
    assert not at.exception
    return at


def test_empty_constraints_explain_and_return_nothing():
    at = app("empty")
    assert any("No 'treat alike' constraints" in i.value for i in at.info)
    assert at.session_state["tables"] == {}


def test_waits_for_the_button_then_shows_frontier_tables_and_companion():
    at = app()
    assert any("Run the learner" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 0
    assert any("No run logged yet" in c.value for c in at.caption) and at.session_state["logged"] == []
    run_small(at)
    # The result is handed over once, with the caller's context, and shown in the run history.
    assert at.session_state["logged"] == [{"sweep": "gamma", "T": 100, "points": 10, "weighting": "panel"}]
    history = next(d.value for d in at.dataframe if "points" in d.value.columns)
    assert len(history) == 1 and any(m.value == "#### Run history" for m in at.markdown)
    assert len(at.get("plotly_chart")) >= 4          # frontier, groups, trajectories, ROC, calibration
    labels = [m.label for m in at.metric]
    assert "Error at this point" in labels and "Pairs over their slack" in labels
    binding = next(d.value for d in at.dataframe if "over its slack" in d.value.columns)  # after the frontier's numbers
    assert {"person i (COMPAS row)", "person j (COMPAS row)", "gap P(i) − P(j)", "over its slack",
            "error cost per unit of slack"} <= set(binding.columns)
    assert binding["error cost per unit of slack"].is_monotonic_decreasing
    tables = at.session_state["tables"]
    assert {"frontier_points", "frontier_pairs", "group_rates", "fpr_gap", "trajectories",
            "companion_rates", "companion_calibration", "companion_roc"} <= set(tables)
    assert tables["frontier_points"][0] == 10
    assert at.success or at.warning                 # the companion feasibility badge


def test_operating_point_slider_moves_the_metrics():
    at = run_small(app())
    slider = at.select_slider(key="fx_point")
    first = [m.value for m in at.metric]
    options = slider.options
    slider.set_value(options[-1]).run()
    assert not at.exception
    last = [m.value for m in at.metric]
    assert first != last
    assert len(at.session_state["logged"]) == 1           # a rerun on the same result logs nothing
    at.session_state["context"] = {"weighting": "judged"}
    at.run()                                              # other choices upstream: the same result, logged again
    assert [r["weighting"] for r in at.session_state["logged"]] == ["panel", "judged"]
    assert float(last[0]) < 0.35                   # least-constrained end of the frontier
    # The four figures are the chosen hull point's row of the frontier table.
    (learned,) = at.session_state["fx_results"].values()      # the one run of the learner
    frontier = learned.frontier
    hull = frontier.points[frontier.points["on_hull"]].sort_values("unfairness")
    row = hull.iloc[-1]
    assert last == [f"{row['error']:.3f}", f"{row['error_heldout']:.3f}", f"{row['unfairness']:.3f}",
                    f"{int(row['violated_pairs'])} of {int(row['pairs'])}"]


def test_companion_cutoff_changes_the_badge():
    at = run_small(app())
    at.select_slider(key="fx_point").set_value(at.select_slider(key="fx_point").options[-1]).run()
    at.slider(key="fx_rv_cutoff").set_value(0.5).run()
    assert not at.exception
    assert any("Feasible" in s.value for s in at.success)
    rates = next(d.value for d in at.dataframe if "true positive rate" in d.value.columns)
    after = rates[rates["scores"] == "equal error rates"]
    assert after["false positive rate"].nunique() == 1 and after["true positive rate"].nunique() == 1


def test_bad_constraints_show_an_error_not_a_crash():
    at = app("bad")
    assert not at.exception
    assert any("different individuals" in e.value for e in at.error)


def test_eta_sweep_from_the_settings():
    at = app()
    at.radio(key="fx_sweep").set_value("eta")
    at = run_small(at)
    labels = at.select_slider(key="fx_point").options
    assert all(label.startswith("η=") for label in labels)
    assert at.session_state["tables"]["frontier_points"][0] == 10


def test_only_violated_filter():
    at = run_small(app())
    at.select_slider(key="fx_point").set_value(at.select_slider(key="fx_point").options[0]).run()
    at.checkbox(key="fx_only_violated").check().run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "over its slack" in d.value.columns)
    assert table.empty or table["over its slack"].all()


def test_page_numbers_equal_a_plain_python_run_of_its_plan(tmp_path):
    """The plan the component shows is rebuilt in plain Python; run() gives the metrics on screen,
    its report reruns bit for bit and reproduces from the command line."""
    import numpy as np
    import pandas as pd

    from core.__main__ import main as cli
    from core.fairness import CompanionPlan, ConstraintTable, FrontierPlan, LearningPlan, run
    from core.fairness.learning_plan import run_learning
    from core.report import build_report, load_plan, parse_report, report_json, tables_match

    at = run_small(app())
    shown = at.session_state["fx_plan"]
    rng = np.random.default_rng(5)
    i, j = rng.integers(0, 7214, 150), rng.integers(0, 7214, 150)
    keep = i != j
    cons = pd.DataFrame({"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                         "n_judges": 3, "agreement": 2 / 3})
    plan = LearningPlan(constraints=ConstraintTable.from_frame(cons, "simulated panel"),
                        frontier=FrontierPlan(T=100, oracle="ols"),
                        companion=CompanionPlan(at=shown.companion.at))
    assert plan == shown
    result = run(plan)
    point = result.point()
    assert [m.value for m in at.metric] == [f"{point['error']:.3f}", f"{point['error_heldout']:.3f}",
                                            f"{point['unfairness']:.3f}",
                                            f"{int(point['violated_pairs'])} of {int(point['pairs'])}"]
    report = parse_report(report_json(build_report(result, page="fairness_learning")))
    assert tables_match(report, run_learning.uncached(load_plan(report)).tables()) == []
    path = tmp_path / "report.json"
    path.write_text(report_json(report))
    assert cli(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0


def test_leaving_and_coming_back_keeps_settings_and_results():
    at = run_small(app())
    at.slider(key="fx_rv_cutoff").set_value(0.6).run()
    before = [m.value for m in at.metric]
    plan = at.session_state["fx_plan"]
    at.session_state["kind"] = "empty"                  # another view: the component is not drawn
    at.run()
    assert not at.exception and len(at.metric) == 0
    at.session_state["kind"] = "random"                 # back again: no click needed
    at.run()
    assert not at.exception
    assert at.select_slider(key="fx_T").value == 100 and at.selectbox(key="fx_oracle").value == "ols"
    assert at.slider(key="fx_rv_cutoff").value == 0.6
    assert [m.value for m in at.metric] == before
    assert at.session_state["fx_plan"] == plan
    assert len(at.get("plotly_chart")) >= 4


def test_soft_tradeoff_on_request_answers_with_both_charts():
    at = run_small(app())
    at.radio(key="fx_rv_mode").set_value("soft").run()
    assert not at.exception
    assert any("Soft trade-off" in i.value for i in at.info)
    rates = next(d.value for d in at.dataframe if "true positive rate" in d.value.columns)
    assert (rates["scores"] == "soft trade-off").sum() == 2
    assert at.session_state["fx_plan"].companion.mode == "soft"
    assert at.get("plotly_chart")[-1].proto.spec                 # the right-hand (calibration) chart is drawn


def test_saved_plan_maps_back_onto_the_widgets():
    from core.fairness import CompanionPlan, ConstraintTable, FrontierPlan, LearningPlan
    from dashboard.components.fairness_results import plan_widgets
    plan = LearningPlan(constraints=ConstraintTable(i=(1,), j=(2,), weight=(1.0,), w_ij=(1.0,), w_ji=(1.0,),
                                                    agreement=(1.0,)),
                        frontier=FrontierPlan(population="full", T=300, oracle="ols", sweep="eta", seed=4),
                        companion=CompanionPlan(cutoff=0.6, bins=8, attribute="sex", groups=("Male", "Female"),
                                                mode="soft", penalty_fpr=0.0, penalty_tpr=10.0))
    values = plan_widgets("fx", plan)
    assert values["fx_population"] == "full" and values["fx_T"] == 300 and values["fx_sweep"] == "eta"
    assert values["fx_rv_attribute"] == "sex" and values["fx_rv_parity"] == "tpr"
    assert values["fx_rv_penalty"] == 10.0 and values["fx_rv_mode"] == "soft"
    with pytest.raises(ValueError, match="rounds"):
        plan_widgets("fx", plan.replace(frontier=FrontierPlan(T=123)))


def test_the_learner_runs_once_and_companion_settings_reuse_its_result(monkeypatch, tmp_path):
    """One sweep per plan: the companion is applied to the result in hand, never by a second run."""
    import core.fairness.learning_plan as learning_plan
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))    # nothing answered from disk
    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")     # the job runs here, where the spy is
    calls, real = [], learning_plan.trade_off_frontier
    monkeypatch.setattr(learning_plan, "trade_off_frontier", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    at = run_small(app())
    assert len(calls) == 1
    at.slider(key="fx_rv_cutoff").set_value(0.6).run()
    at.select_slider(key="fx_point").set_value(at.select_slider(key="fx_point").options[-1]).run()
    assert not at.exception and len(calls) == 1
    assert at.session_state["fx_plan"].companion.cutoff == 0.6
