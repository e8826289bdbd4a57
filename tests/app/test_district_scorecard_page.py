"""District maps page: numbers drawn on the map, a scorecard beside it, two plans side by side."""
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.districts import run
from core.districts.scorecard import SCORECARD_LABELS, compare_plans, comparison_words, error_sd_words, scorecard

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "district_maps.py")


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert not at.exception and not at.error
    return at


def _cards(at):
    """The scorecards in page order: plan shown, then the two of the side-by-side comparison."""
    return [d.value for d in at.dataframe if "Polsby-Popper compactness (0 to 1)" in d.value.columns]


def test_the_scorecard_beside_the_map_is_the_runs_view(app):
    result = run(app.session_state["dm_plan"])
    card = scorecard(result.plan_districts(1))
    expected = card.drop(columns=["error_sd_low", "error_sd_high"]).rename(columns=SCORECARD_LABELS)
    shown = _cards(app)[0]
    assert list(shown.columns) == list(expected.columns)
    sd = SCORECARD_LABELS["error_sd"]
    for col in expected.columns.drop(sd):
        np.testing.assert_allclose(shown[col].to_numpy(float), expected[col].to_numpy(float))
    # the error sd comes from a few runs: shown rounded to its chi-square interval, with the interval
    assert shown[sd].to_list() == error_sd_words(card)
    assert all(w.endswith(")") and " to " in w for w in shown[sd])
    assert shown["Deviation from ideal (people)"].sum() == pytest.approx(0.0, abs=1e-6)
    spec = json.loads(next(c for c in app.get("plotly_chart") if "choroplethmap" in c.proto.spec).proto.spec)
    assert any(t.get("name") == "district numbers" for t in spec["data"])
    assert any("number is drawn inside it" in c.value for c in app.caption)


def test_two_plans_side_by_side(app):
    result = run(app.session_state["dm_plan"])
    assert result.labels.shape[0] > 1
    both = next(d.value for d in app.dataframe if "measure" in d.value.columns)
    names = ("plan 1", "plan 2")
    expected = compare_plans(result.districts, result.runs, 1, 2, result.plan.noise.seed, names)
    assert list(both.columns) == ["measure", "plan 1", "plan 2", "plan 2 - plan 1"]
    assert both.equals(comparison_words(expected, names))
    noisy = both.set_index("measure").loc["Mean noisy-count error sd (people)"]
    assert all(noisy[c].endswith(")") and " to " in noisy[c] for c in names + ("plan 2 - plan 1",))
    # one colour scale for both maps
    specs = [json.loads(c.proto.spec) for c in app.get("plotly_chart") if "dm_map_side" in (c.proto.id or "")]
    ranges = {(s["data"][0]["zmin"], s["data"][0]["zmax"]) for s in specs}
    assert len(specs) == 2 and len(ranges) == 1
    assert any("one colour scale" in c.value for c in app.caption)
    cards = _cards(app)
    assert len(cards) == 3
    np.testing.assert_allclose(cards[2]["Population (people)"], result.plan_districts(2)["population"])
