"""Home page end to end with Streamlit's AppTest."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.page_registry import PAGES

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")  # the entry point opens on Home


def map_spec(at: AppTest) -> dict:
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    return json.loads(charts[0].proto.spec)


def values(array) -> np.ndarray:
    """Plotly serialises numeric arrays as base64 typed arrays; decode either form."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
    return np.asarray(array)


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def test_renders_tools_with_links_and_questions(app):
    text = " ".join(m.value for m in app.markdown)
    assert "redistricting" in text and "stratum" in text.lower()
    links = [el for el in app.get("page_link")]
    assert [el.proto.label for el in links] == [p.title for p in PAGES]
    shown = [m.value for m in app.markdown]
    assert all(p.question in shown for p in PAGES)  # the questions come from the page registry


def test_registry_lists_each_page_once_with_a_question_and_a_figure():
    from dashboard.page_registry import ALL_PAGES

    root = Path(PAGE).parent
    assert all((root / p.file).is_file() for p in ALL_PAGES)
    for field in ("file", "title", "url_path", "main_figure"):
        values = [getattr(p, field) for p in ALL_PAGES]
        assert len(set(values)) == len(values), field
    assert all(p.question.strip().endswith("?") or "?" in p.question for p in ALL_PAGES)


def test_dataset_table_lists_the_bundled_sets(app):
    summary = next(d.value for d in app.dataframe if "rows" in d.value.columns)
    rows = dict(zip(summary["data set"], summary["rows"]))
    assert rows == {"CPS 1994-95 extract": 50_000, "UCI Adult": 48_842,
                    "COMPAS two-year recidivism": 7_214, "Georgia counties 1990": 159}
    preview = next(d.value for d in app.dataframe if "age_band" in d.value.columns)
    assert len(preview) == 100


def test_preview_switches_data_set():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.selectbox(key="home_preview").set_value("compas").run()
    assert not at.exception
    assert any("priors_count" in d.value.columns for d in at.dataframe)


def test_map_colour_radio_changes_the_figure():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    before = map_spec(at)
    trace = before["data"][0]
    assert trace["type"] == "choroplethmap" and before["layout"]["map"]["style"] == "white-bg"
    population = values(trace["z"])
    assert len(trace["locations"]) == 159 and population.sum() == 6_478_216
    assert population.max() == 648_951  # Fulton County, 1990 census
    at.radio(key="home_map_metric").set_value("PctBlack").run()
    assert not at.exception
    after = map_spec(at)
    share = values(after["data"][0]["z"])
    assert len(share) == 159 and 0 <= share.min() and share.max() < 100
    assert not np.array_equal(share, population)
    assert "Black" in after["layout"]["coloraxis"]["colorbar"]["title"]["text"]


def test_glossary_defines_the_key_terms(app):
    text = " ".join(m.value for m in app.markdown)
    for term in ("Epsilon", "Rho", "Delta", "Stratum", "Invariant", "District", "Sensitivity",
                 "zCDP", "ToyDown"):
        assert f"**{term}" in text, term
