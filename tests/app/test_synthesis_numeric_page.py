"""Stratified synthesis page: public ranges of numeric columns are number inputs, and the synthetic
table shows numbers in their units."""
import json
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from core.contracts import DataRef
from core.report import build_report, load_plan, report_json
from core.synthesis import SynthesisPlan, run

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "stratified_synthesis.py")


def _adult_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    at.selectbox(key="ss_dataset").set_value("adult").run()
    assert not at.exception
    return at


def test_numeric_ranges_are_number_inputs_and_the_synthetic_table_shows_numbers():
    at = _adult_page()
    keys = {w.key for w in at.number_input}
    for col in ("age", "hours_per_week"):
        assert {f"ss_lo_adult_{col}", f"ss_hi_adult_{col}", f"ss_nbins_adult_{col}"} <= keys
    assert not any(w.key == "ss_bounds_adult" for w in at.text_input)      # no free-text ranges any more
    at.number_input(key="ss_lo_adult_age").set_value(0).run()
    at.number_input(key="ss_hi_adult_age").set_value(100).run()
    at.number_input(key="ss_nbins_adult_age").set_value(10).run()
    assert not at.exception and not at.error
    assert any("age: 10 equal-width bins over the declared public range [0, 100]" in c.value for c in at.caption)
    at.multiselect(key="ss_columns_adult").set_value(["sex", "race", "age", "income"]).run()
    at.multiselect(key="ss_strata_adult").set_value(["sex"]).run()
    at.selectbox(key="ss_synthesizer").set_value("independent").run()
    at.button(key="ss_rel_run").click().run()
    assert not at.exception and not at.error
    synth = next(d.value for d in at.dataframe if {"age", "sex", "income"} <= set(d.value.columns))
    assert pd.api.types.is_integer_dtype(synth["age"])
    assert synth["age"].between(0, 100).all() and synth["age"].nunique() > 3   # values, not 10 bins


def test_a_report_saved_with_typed_ranges_restores_the_number_inputs():
    """Reports saved before the widgets hold ``numeric_bounds`` only: they load into the number inputs."""
    from dashboard.components.synthesis_widgets import plan_to_widgets

    plan = SynthesisPlan(data=DataRef("adult"), columns=("sex", "race", "age", "income"), strata=("sex",),
                         numeric_bounds=(("age", 10.0, 90.0),))
    text = report_json(build_report(_result(plan), page="Stratified synthesis"))
    assert "numeric_bins" not in text
    body = json.loads(text)
    at = AppTest.from_file(PAGE, default_timeout=240)
    for key, value in plan_to_widgets(load_plan(body)).items():
        at.session_state[key] = value
    at.run()
    assert not at.exception and not at.error
    assert at.number_input(key="ss_lo_adult_age").value == 10.0
    assert at.number_input(key="ss_hi_adult_age").value == 90.0
    assert at.number_input(key="ss_nbins_adult_age").value == 8
    assert any("declared public range [10, 90]" in c.value for c in at.caption)
    assert at.multiselect(key="ss_columns_adult").value == ["sex", "race", "age", "income"]


def _result(plan):
    from core.datasets import load_dataset
    return run(plan, load_dataset("adult").sample(2_000, random_state=0))
