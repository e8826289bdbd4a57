"""The Fairness elicitation page's learning results show the result's own headline numbers, formatted."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.fairness import run

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "fairness_elicitation.py")


def _results_of_a_demo() -> AppTest:
    """A demo session on the default design, then the learner on its answers (the default learner
    settings but for a short, fast sweep)."""
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.run()
    at.radio(key="fe_role").set_value("Demo with simulated stakeholders").run()
    at.button(key="fe_demo_run").click().run()
    assert not at.exception and not at.error
    at.select_slider(key="fe_results_T").set_value(100)
    at.selectbox(key="fe_results_oracle").select("ols")
    at.button(key="fe_results_run").click().run()
    assert not at.exception and not at.error
    return at


def _assert_headline_shown(at: AppTest) -> None:
    head = run(at.session_state["fe_results_plan"]).headline()     # the same plan, in plain Python
    metrics = {m.label: m for m in at.metric}
    error, least = head["error at the operating point"], head["least-constrained error"]
    assert metrics["Error at this point"].value == f"{error:.3f}"
    assert metrics["Error at this point"].delta == f"{error - least:+.3f} vs least constrained"
    assert metrics["Realised unfairness"].value == f"{head['realised unfairness at the operating point']:.3f}"
    assert any(c.value.startswith(f"{int(head['people']):,} people; best constant classifier error "
                                  f"{head['best constant error']:.3f}; least-constrained error {least:.3f}.")
               for c in at.caption)
    if "equal error rates: FPR" in head:
        assert any(f"false positive rate {head['equal error rates: FPR']:.3f} and true positive rate "
                   f"{head['equal error rates: TPR']:.3f}" in s.value for s in at.success)


def test_results_metrics_are_the_learning_results_headline_on_the_defaults():
    at = _results_of_a_demo()
    _assert_headline_shown(at)


def test_results_metrics_follow_the_headline_after_moving_the_operating_point():
    at = _results_of_a_demo()
    before = {m.label: m.value for m in at.metric}
    slider = at.select_slider(key="fe_results_point")
    slider.set_value(slider.options[-1]).run()
    assert not at.exception and not at.error
    _assert_headline_shown(at)
    assert {m.label: m.value for m in at.metric}["Error at this point"] != before["Error at this point"]
