"""Reproductions page: the table the page shows is the core table; filters; leaving and coming back."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.reproductions import REPRODUCTIONS, reproductions_table

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "reproductions.py")
HOME = str(Path(__file__).resolve().parents[2] / "dashboard" / "home.py")


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(PAGE, default_timeout=240).run()
    assert not at.exception and not at.error
    return at


def test_page_shows_the_core_table_and_every_row_passes(app):
    table = app.session_state["rp_table"]
    assert table["key"].tolist() == [r.key for r in REPRODUCTIONS]
    assert app.metric[0].value == f"{len(REPRODUCTIONS)} / {len(REPRODUCTIONS)}"
    shown = app.dataframe[0].value
    assert shown["key"].tolist() == table["key"].tolist()
    # the same rows computed in plain Python give the same numbers
    plain = reproductions_table(["toydown_split_1", "enum_5x5", "coh_gamma_paper"]).set_index("key")
    page = table.set_index("key")
    for key in plain.index:
        assert page.loc[key, "ours"] == plain.loc[key, "ours"]
    errors = app.dataframe[1].value
    assert len(errors) >= 10 and "how the tool handles it" in errors.columns
    printed = sum(r.source == "paper" for r in REPRODUCTIONS)
    assert app.metric[1].value == f"{printed} / {printed}  ·  {len(REPRODUCTIONS) - printed} / {len(REPRODUCTIONS) - printed}"


def test_choosing_papers_filters_both_tables(app):
    paper = REPRODUCTIONS[0].paper
    app.multiselect(key="rp_papers").set_value([paper]).run()
    assert not app.exception
    shown = app.dataframe[0].value
    assert set(shown["paper"]) == {paper}
    assert len(shown) == sum(r.paper == paper for r in REPRODUCTIONS)
    assert app.metric[0].value == f"{len(shown)} / {len(shown)}"


@pytest.fixture
def table_calls(monkeypatch):
    """Count the page's calls of the core table (the page imports it afresh on every run)."""
    import core.reproductions as module
    calls = []
    real = module.reproductions_table

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "reproductions_table", counted)
    return calls


def test_leaving_and_returning_keeps_the_results_and_the_filter(app, table_calls):
    before = app.session_state["rp_table"]
    chosen = app.multiselect(key="rp_papers").value
    app.switch_page(HOME).run()
    assert not app.exception
    app.switch_page(PAGE).run()
    assert not app.exception
    assert table_calls == []   # not recomputed on return
    assert app.session_state["rp_table"]["ours"].tolist() == before["ours"].tolist()
    assert app.multiselect(key="rp_papers").value == chosen


def test_recompute_button_reruns_the_chosen_papers_rows_only(app, table_calls):
    chosen = set(app.multiselect(key="rp_papers").value)
    app.button(key="rp_run").click().run()
    assert not app.exception
    assert len(table_calls) == 1
    assert set(table_calls[0][0]) == {r.key for r in REPRODUCTIONS if r.paper in chosen}
    assert app.session_state["rp_table"]["key"].tolist() == [r.key for r in REPRODUCTIONS]   # others kept


def test_a_fresh_visit_computes_only_the_chosen_papers(table_calls):
    at = AppTest.from_file(PAGE, default_timeout=240)
    paper = REPRODUCTIONS[0].paper
    at.session_state["rp_papers"] = [paper]
    at.run()
    assert not at.exception
    assert [set(c[0]) for c in table_calls] == [{r.key for r in REPRODUCTIONS if r.paper == paper}]


def test_code_column_names_the_file_as_text(app):
    import json
    config = json.loads(app.dataframe[0].proto.columns)
    code = config["code"]
    assert code["type_config"]["type"] == "text"          # a path in this repository, not a link into the app
    table = app.session_state["rp_table"].set_index("key")
    assert table.loc["mc_top_white_men", "code"] == "core/fairness/causal_ranking.py:measures"
    assert not table["code"].str.contains("://").any()       # paths in this repository, no remote URL
