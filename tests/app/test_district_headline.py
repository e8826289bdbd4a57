"""The district page's headline metrics are the result's own headline numbers, formatted."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.districts import run
from core.uncertainty_words import rounded

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "district_maps.py")


def _check(at):
    assert not at.exception and not at.error
    result = run(at.session_state["dm_plan"])
    head = result.headline()
    shown = {m.label: m.value for m in at.metric}
    assert shown["Districts"] == str(int(head["districts"]))
    assert shown["Largest true deviation (plan 1)"] == f"{head['largest_true_deviation_pct']:.2f}%"
    # a mean over a few noisy runs, rounded to what its 95% interval supports
    assert shown["Mean absolute district error (people)"] == rounded(head["mean_abs_district_error"],
                                                                     *result.mean_abs_error_interval(1))
    assert shown["Worst deviation if balanced on noisy counts"] == \
        f"{head['worst_deviation_if_balanced_on_noisy_pct']:.3f}%"
    assert shown["Plans passing the checks"] == f"{int(head['plans_passing_checks'])} of {int(head['plans'])}"


def test_page_metrics_are_the_results_headline():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    _check(at)
    at.number_input(key="dm_plan_seed").set_value(3).run()       # one changed setting: another plan
    assert at.session_state["dm_plan"].plan_seed == 3
    _check(at)
