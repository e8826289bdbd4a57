"""The synthesis page's headline metrics are the result's own headline numbers, formatted."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.synthesis import run

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")
FORMATS = {"strata": ("Strata (public domain)", lambda v: str(int(v))),
           "stratification cost multiplier": ("Stratification cost multiplier", lambda v: f"{v:.2f}x")}


def _shown_against_headline(at) -> dict:
    """Every headline number of the page's result, as the page formats it, beside what the page shows."""
    head = run(at.session_state["ss_plan"]).headline()
    shown = {m.label: m.value for m in at.metric}
    pairs = {}
    for key, value in head.items():
        label, fmt = FORMATS.get(key, (key[0].upper() + key[1:], lambda v: f"{v:.4f}"))
        pairs[key] = (shown.get(label), fmt(value))
    return pairs


def _check(at, expected_keys: set) -> None:
    pairs = _shown_against_headline(at)
    assert expected_keys <= set(pairs)
    for key, (shown, wanted) in pairs.items():
        assert shown == wanted, key


def test_page_metrics_are_the_results_headline_on_defaults_and_after_a_change():
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.run()
    assert not at.exception and not at.error
    _check(at, {"strata"})
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    # the default columns leave eight besides the strata: the page leads with two-way TVD, and so does the headline
    worst = {f"worst-group two-way TVD, {m}, epsilon 5" for m in ("stratified", "pooled")}
    population = {f"population two-way TVD, {m}, epsilon 5" for m in ("stratified", "pooled")}
    _check(at, {"strata"} | worst | population)
    # one setting changed: stratum sizes declared public (the cost multiplier joins the headline), on a
    # sweep cut to the one epsilon and seed the headline quotes
    at.text_input(key="ss_epsilons").input("5").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.radio(key="ss_size_policy").set_value("public").run()
    at.checkbox(key="ss_sizes_declared_public").check().run()
    at.button(key="ss_run").click().run()
    assert not at.exception and not at.error
    _check(at, {"strata", "stratification cost multiplier"} | worst | population)
