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
    at.select_slider(key="fx_rounds").set_value(100)
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
    binding = at.dataframe[0].value
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
    (frontier,) = at.session_state["fx_results"].values()
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
    table = at.dataframe[0].value
    assert table.empty or table["over its slack"].all()
