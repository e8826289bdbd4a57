"""The stakeholder report people read: a first page, the plan in sentences, A/B reports, clean print, headless.

Hand-checked values: the Budget allocation's default plan has a stylised geography of 20 x 10 x 4 x 12 =
9,600 blocks; raising its total epsilon from 1 to 4 divides every error sd by 4 (Laplace scale 1/epsilon),
so "error sd: one block" moves by -3/4 of A's value; a data set capped at epsilon 4 with one release of
0.25 has 3.75 left.
"""
from __future__ import annotations

import dataclasses
import html
import importlib
import json
import re
import shutil
import subprocess

import pytest

from core.contracts import PARAMS_TYPES, DataRef, Plan
from core.report import build_report, report_json
from core.report_words import plan_sections, plan_sentences
from core.compare import readable_name
from core.stakeholder_report import (FIRST_PAGE_NUMBERS, THEME_COLOURS, chromium_path, embedded_report,
                                     format_number, print_ready, report_html, report_html_from_json, restates_input)

QUESTION = "How should one privacy budget be shared?"


def _budget(total=1.0):
    from core.census import BudgetPlan, run
    return run(BudgetPlan(total=total))


def _districts():
    from core.districts import DistrictPlan, GreedyParams, run
    return run(DistrictPlan(generator="greedy", params=GreedyParams()))


@pytest.fixture(scope="module")
def budget_a():
    return _budget(1.0)


@pytest.fixture(scope="module")
def budget_b():
    return _budget(4.0)


@pytest.fixture(scope="module")
def districts():
    return _districts()


def first_page(text: str) -> str:
    return text.split("<section class='first-page'>", 1)[1].split("</section>", 1)[0]


def key_rows(page: str) -> list[str]:
    table = page.split("<h2>Key numbers</h2>", 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr><td>.*?</tr>", table.split("<tbody>", 1)[1])


def _project(tmp_path, key: str, releases: tuple[float, ...] = (), simulations: int = 0, cap: float | None = 4.0):
    from core.privacy.ledger import Spend
    from core.privacy.project_ledger import Cap, LedgerRelease, ProjectLedger
    book = ProjectLedger(f"sqlite:///{tmp_path / f'{key}-{len(releases)}-{simulations}.db'}")
    if cap is not None:
        book.set_cap(key, Cap(cap))
    for n, amount in enumerate(releases):
        book.record(LedgerRelease(key, f"r{n}", "release", "Budget allocation", "release", f"Release {n}", f"d{n}",
                                  (Spend("county totals", amount, "epsilon"),)))
    for n in range(simulations):
        book.record(LedgerRelease(key, f"s{n}", "simulation", "Budget allocation", "simulate", f"Preview {n}",
                                  f"p{n}", (Spend("county totals", 1.0, "epsilon"),)))
    return book.export(key)


# ------------------------------------------------------------------------------------------ first page

@pytest.mark.parametrize("which", ["budget", "districts"])
def test_first_page_has_question_answer_at_most_five_numbers_privacy_and_one_figure(which, budget_a, districts,
                                                                                     tmp_path):
    import plotly.graph_objects as go
    result, page = (budget_a, "Budget allocation") if which == "budget" else (districts, "District maps")
    report = build_report(result, page=page)
    report["project_ledger"] = _project(tmp_path, "cps", releases=(0.25,))
    figs = [go.Figure(go.Bar(x=[1, 2], y=[3, 4])), go.Figure(go.Scatter(x=[1, 2], y=[1, 0]))]
    text = report_html(result, page=page, question=QUESTION, report=report, figures=figs)
    page_text = first_page(text)
    assert QUESTION in page_text and "<h2>The answer</h2>" in page_text
    headline, words = result.headline(), result.headline_uncertainty()
    rows = key_rows(page_text)
    declared = result.takeaway().key if result.takeaway() is not None else ()
    findings = [k for k in headline if not restates_input(words[k])]
    if declared:                      # the result names the numbers that carry its verdict: those, in its order
        expected = list(declared)[:FIRST_PAGE_NUMBERS]
        assert len(rows) == len(expected) <= 5
    else:
        assert len(headline) > FIRST_PAGE_NUMBERS
        assert len(rows) == min(FIRST_PAGE_NUMBERS, len(headline)) <= 5
        # the result's own first findings, in order, then (only to fill the five) the numbers restating inputs
        expected = (findings + [k for k in headline if k not in findings])[:len(rows)]
    assert len(rows) == len(expected)
    for row, name in zip(rows, expected):
        assert f"<td class='value'>{format_number(headline[name])}</td>" in row
        assert words[name] in row.replace("&#x27;", "'")
    if len(findings) >= FIRST_PAGE_NUMBERS and not declared:       # no setting or size among them then
        assert not any(restates_input(words[k]) for k in expected)
    # each headline number is printed once: the rest follow in the "Headline numbers" section
    assert text.count("<td class='uncertainty'>") == len(headline)
    rest = text.split("<h2>Headline numbers</h2>", 1)[1].split("<h2>", 1)[0]
    for name in headline:
        assert (f"<td>{html.escape(readable_name(name))}</td>" in rest) == (name not in expected), name
    # privacy spent and left, from the data set's project ledger: cap 4, one release of 0.25
    assert "Spent on data set &#x27;CPS 1994-95 extract&#x27; so far: epsilon 0.25 over 1 release(s)." in page_text
    assert "Left under the curator&#x27;s cap of epsilon 4: epsilon 3.75." in page_text
    assert page_text.count("Plotly.newPlot") == 1                # one figure on the first page
    assert text.count("Plotly.newPlot") == 2                     # and every figure once in the report


def test_first_page_says_when_nothing_is_spent(budget_a, tmp_path):
    report = build_report(budget_a, page="Budget allocation")
    report["project_ledger"] = _project(tmp_path, "cps")
    page_text = first_page(report_html(budget_a, page="Budget allocation", report=report))
    assert "Nothing has been spent on data set &#x27;CPS 1994-95 extract&#x27; yet: no release is recorded." in page_text
    assert "epsilon 4: epsilon 4." in page_text                  # the whole cap is left
    report["project_ledger"] = None                              # the panel found no ledger for this geography
    page_text = first_page(report_html(budget_a, page="Budget allocation", report=report))
    assert "no privacy budget is spent" in page_text


def test_answer_quotes_numbers_the_plan_does_not_set(budget_a):
    text = first_page(report_html(budget_a, page="Budget allocation"))
    answer = text.split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Total budget is" not in answer                      # an input, not an answer
    assert "Leaves is" not in answer                             # a size of the geography
    assert answer.startswith("<p>Mean gain of the recommended split is 33.59%.")   # "%" said once, as the unit
    assert "Error sd: one block is 13.58 people." in answer       # four significant figures, with the unit


# ------------------------------------------------------------------------------------------ plan words

def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _example_plans() -> list:
    """Every Plan and registered Params class that builds with its defaults, and page plans that need data."""
    for module in ("core.census", "core.districts", "core.synthesis", "core.coherence", "core.fairness",
                   "core.privacy.mechanisms"):
        importlib.import_module(module)
    out = []
    for cls in sorted(set(_subclasses(Plan)) | set(PARAMS_TYPES.values()), key=lambda c: c.__name__):
        if not cls.__module__.startswith("core.") or not dataclasses.is_dataclass(cls):
            continue                    # a plan another test module made up (its process may have run it first)
        try:
            out.append(cls())
        except (TypeError, ValueError):
            continue
    import numpy as np
    import pandas as pd

    from core.districts import DistrictPlan, GENERATORS
    from core.fairness import ConstraintTable, LearningPlan
    from core.synthesis import SynthesisPlan
    from core.synthesis.mean_release import MeanReleasePlan
    pairs = pd.DataFrame({"i": np.arange(0, 20, 2), "j": np.arange(1, 21, 2), "weight": 1.0, "n_judges": 3,
                          "agreement": 2 / 3})
    out += [SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income")),
            MeanReleasePlan(data=DataRef("adult"), column="hours", strata=("sex",), value_range=(0.0, 99.0)),
            LearningPlan(constraints=ConstraintTable.from_frame(pairs, "simulated panel"))]
    out += [DistrictPlan(generator=key, params=spec.params()) for key, spec in GENERATORS.items()]
    return out


def _field_names(obj, seen: set) -> set:
    for f in dataclasses.fields(obj):
        seen.add(f.name)
        value = getattr(obj, f.name)
        for v in (value if isinstance(value, tuple) else (value,)):
            if dataclasses.is_dataclass(v) and not isinstance(v, type):
                _field_names(v, seen)
    return seen


def test_plan_sentences_never_show_a_raw_field_key():
    plans = _example_plans()
    assert len(plans) > 40
    for plan in plans:
        text = " ".join(plan_sentences(plan))
        for name in _field_names(plan, set()):
            if "_" in name:
                assert not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text), (type(plan).__name__, name)
        assert "__type__" not in text and not re.search(r"\b\w+(Params|Config|Plan)\(", text), type(plan).__name__


def test_budget_plan_reads_as_sentences_and_leaves_out_unset_tabs():
    from core.census import AlgorithmPlan, BudgetPlan
    plan = BudgetPlan(targets=("leaf", "unit:2", "greedy:4"))
    sections = plan_sections(plan)
    text = " ".join(plan_sentences(plan))
    assert "split equally among the five levels" in text and "of 9,600 blocks" in text
    assert "20 counties per state" in text and "Laplace mechanism" in text
    assert "one block, each whole tract and four districts that follow the geography" in text
    for raw in ("fanouts", "fig2", "greedy:4", "unit:2", "leaf,"):
        assert raw not in text
    assert [h for h, _ in sections] == [""]                    # no tab asked for: no tab in words
    with_tab = plan_sections(plan.replace(algorithms=AlgorithmPlan()))
    assert [h for h, _ in with_tab] == ["", "ToyDown against TopDown-lite"]


def test_nested_plugin_params_are_written_with_their_labels():
    from core.districts import DistrictPlan, GreedyParams
    text = " ".join(plan_sentences(DistrictPlan(generator="greedy", params=GreedyParams())))
    assert "Plan generator: Greedy" in text and "Settings of the method:" in text
    assert "GreedyParams" not in text


# ------------------------------------------------------------------------------------------------ A/B

def test_pinned_scenario_makes_an_ab_report_with_both_plans_and_signed_differences(budget_a, budget_b):
    from core.compare import compare_results
    from core.figures.overlays import overlay_figures
    report_a = build_report(budget_a, page="Budget allocation")
    overlays = overlay_figures(compare_results(budget_a, budget_b, page="Budget allocation"))
    text = report_html(budget_b, page="Budget allocation", compare=report_a, overlays=overlays)
    assert "<h2>Scenario A against scenario B</h2>" in text
    assert budget_a.plan.digest()[:16] in text and budget_b.plan.digest()[:16] in text      # both plans
    assert "A total privacy budget of 1 (epsilon)" in text and "A total privacy budget of 4 (epsilon)" in text
    delta = text.split("<table class='delta'>", 1)[1].split("</table>", 1)[0]
    a, b = budget_a.headline()["error sd: one block"], budget_b.headline()["error sd: one block"]
    assert b == pytest.approx(a / 4)
    assert f"<td class='num signed'>{b - a:+,.4g}</td>" in delta and "-75.0%" in delta
    assert "<td class='num signed'>+3</td>" in delta                     # total budget 1 -> 4
    page = first_page(text)
    assert "moves from" in page and "Budget per level" in page          # the overlay is the first figure
    assert text.count("Plotly.newPlot") == len(overlays)              # each overlay drawn once


def test_report_without_pin_is_not_ab(budget_b):
    text = report_html(budget_b, page="Budget allocation")
    assert "Scenario A against scenario B" not in text and "<table class='delta'>" not in text


# ------------------------------------------------------------------------------------------ print

def test_printed_html_has_no_toolbar_and_keeps_numbers_and_figures_whole(budget_a):
    import plotly.graph_objects as go
    text = report_html(budget_a, page="Budget allocation", figures=[go.Figure(go.Bar(x=[1], y=[2]))])
    config = re.findall(r"Plotly\.newPlot\([^;]*?(\{\"displayModeBar\"[^}]*\})", text)
    assert config and all('"displayModeBar": false' in c and '"staticPlot": true' in c for c in config)
    style = text.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "td.value,td.num,.num{white-space:nowrap" in style
    assert ".figure,table.headline,table.delta{break-inside:avoid" in style
    assert "<td class='num'>9600</td>" in text                  # a number cell that must not wrap


def test_each_table_once_and_simulations_in_one_line(budget_a, tmp_path):
    report = build_report(budget_a, page="Budget allocation")
    report["project_ledger"] = _project(tmp_path, "cps", releases=(0.5,), simulations=12)
    text = report_html(budget_a, page="Budget allocation", report=report)
    visible = re.sub(r"<script.*?</script>", "", text, flags=re.S)
    for name in budget_a.tables():                               # each table once, titled in words
        assert visible.count(f"<h3>{name}</h3>") <= 1, name
        if name != "ledger":
            assert visible.count(f"<h3>{html.escape(readable_name(name))}</h3>") == 1, name
    assert "<h3>ledger</h3>" not in visible                      # its spends are in the ledger section
    # no table title, column header or cell prints a machine name or a bare True/False
    assert any("_" in name for name in budget_a.tables())
    assert not re.findall(r"<h3>[^<]*_[^<]*</h3>|<th>[^<]*_[^<]*</th>", visible)
    assert not re.findall(r"<td[^>]*>(?:True|False)</td>", visible)
    tables_section = visible.split("<h2>Tables</h2>", 1)[1]
    assert "noisy count of every block group (Laplace)" in visible.split("<h2>Privacy ledger</h2>", 1)[1]
    assert "noisy count of every block group (Laplace)" not in tables_section
    line = visible.split("Simulations (listed apart, never counted in the total)", 1)[1].split("</p>", 1)[0]
    assert "12 seeded simulations recorded on Budget allocation; the latest: Preview" in line
    assert "Preview 3" not in visible.replace(line, "")          # not listed one by one


def test_theme_stand_in_colours_print_as_the_pages_colours():
    import plotly.express as px
    import streamlit  # noqa: F401  (sets the chart theme whose stand-in colours printed black)
    fig = px.bar(x=["a", "b"], y=[1, 2])
    assert fig.data[0].marker.color == "#000001"
    ready = print_ready(fig)
    assert ready.data[0].marker.color == THEME_COLOURS["#000001"] == "#0068c9"
    assert ready.data[0].marker.pattern.shape is None            # no empty fill pattern left
    assert "#000001" not in ready.to_json()


def test_wide_tables_print_in_column_groups_led_by_their_row_names():
    import pandas as pd

    from core.stakeholder_report import MAX_PRINT_COLUMNS, column_groups
    wide = pd.DataFrame({"plan": [1], "district": [2], **{f"m{i}": [0.5] for i in range(13)}})
    groups = column_groups(wide)
    assert all(len(g) <= MAX_PRINT_COLUMNS and g[:2] == ["plan", "district"] for g in groups)
    assert sorted({c for g in groups for c in g}) == sorted(wide.columns)     # every column, none lost
    assert sum(len(g) - 2 for g in groups) == 13                              # each value column once
    assert column_groups(wide.iloc[:, :MAX_PRINT_COLUMNS]) == [list(wide.columns[:MAX_PRINT_COLUMNS])]


def test_tick_labels_get_room_in_print():
    import plotly.graph_objects as go
    fig = go.Figure(go.Heatmap(z=[[1, 2]], y=["a very long subgroup name (n=1,500)"]))
    fig.update_layout(margin=dict(l=10))
    ready = print_ready(fig)
    assert ready.layout.yaxis.automargin is True and ready.layout.xaxis.automargin is True
    fixed = print_ready(go.Figure(go.Bar(x=[1], y=[1]), layout={"yaxis": {"automargin": False}}))
    assert fixed.layout.yaxis.automargin is False                 # a figure's own choice is kept


# ------------------------------------------------------------------------------------------ headless

def _saved(result, page: str, path):
    from dashboard.components.stakeholder_figures import with_figures
    report = build_report(result, page=page)
    from dashboard.components.stakeholder_buttons import page_question
    report["question"] = page_question(page)         # the page's own question, at its full length
    report = with_figures(report, result)
    path.write_text(report_json(report))
    return report


def same_but_ids(x: str, y: str) -> bool:
    """Two reports are the same apart from plotly's random div ids."""
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    return re.sub(uuid, "id", x) == re.sub(uuid, "id", y)


@pytest.mark.slow
def test_command_line_makes_the_same_report_from_saved_json(budget_a, budget_b, tmp_path):
    from core.__main__ import main
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _saved(budget_a, "Budget allocation", a)
    saved = _saved(budget_b, "Budget allocation", b)
    assert len(saved["figures"]) == 3
    out = tmp_path / "b.html"
    assert main(["report", str(b), "--html", str(out)]) == 0
    text = out.read_text()
    assert saved["question"].startswith("How should one privacy budget be shared among the levels")
    assert saved["question"] in first_page(text) and len(key_rows(first_page(text))) == FIRST_PAGE_NUMBERS
    assert text.count("Plotly.newPlot") == 3                     # the page's stored figures
    back = embedded_report(text)
    assert back["headline"] == saved["headline"] and "figures" not in back
    assert same_but_ids(text, report_html_from_json(json.loads(b.read_text()), file_name="b.json"))
    ab = tmp_path / "ab.html"
    assert main(["report", str(b), "--compare", str(a), "--html", str(ab)]) == 0
    ab_text = ab.read_text()
    assert "<h2>Scenario A against scenario B</h2>" in ab_text and "A total privacy budget of 1 (epsilon)" in ab_text
    assert "<table class='delta'>" in ab_text and "Budget per level" in first_page(ab_text)
    if chromium_path() is None:
        pytest.skip("Chromium is not installed: the PDF half of the round trip is not checked")
    pdf = tmp_path / "b.pdf"
    assert main(["report", str(b), "--html", str(out), "--pdf", str(pdf)]) == 0
    assert pdf.read_bytes().startswith(b"%PDF")
    if shutil.which("pdftoppm") is None:
        return
    # the first page, with the page's main figure (the budget bars that once printed solid black), as pixels
    subprocess.run(["pdftoppm", "-r", "30", "-png", "-f", "1", "-l", "1", str(pdf), str(tmp_path / "page")],
                   check=True, capture_output=True)
    from PIL import Image
    (png,) = sorted(tmp_path.glob("page-*.png"))
    histogram = Image.open(png).convert("L").histogram()
    dark = sum(histogram[:40]) / sum(histogram)
    assert dark < 0.03, dark
    colours = [c for _, c in Image.open(png).convert("RGB").getcolors(1 << 16)]
    assert any(r < 40 and 64 <= g <= 140 and b > 160 for r, g, b in colours)   # the theme's blue (#0068c9)


def test_command_line_refuses_a_file_that_is_not_a_report(tmp_path, capsys):
    from core.__main__ import main
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    assert main(["report", str(bad), "--html", str(tmp_path / "x.html")]) == 2
    assert "not a report" in capsys.readouterr().err


def test_headless_rerun_keeps_the_question_and_a_plan_file_alone_says_it_has_none(budget_a, tmp_path):
    from core.__main__ import main
    from core.stakeholder_report import NO_QUESTION
    saved = _saved(budget_a, "Budget allocation", tmp_path / "a.json")
    assert main(["reproduce", str(tmp_path / "a.json"), "--out", str(tmp_path / "rerun")]) == 0
    rerun = json.loads((tmp_path / "rerun" / "report.json").read_text())
    assert (rerun["page"], rerun["question"]) == ("Budget allocation", saved["question"])
    assert main(["report", str(tmp_path / "rerun" / "report.json"), "--html", str(tmp_path / "r.html")]) == 0
    page_text = first_page((tmp_path / "r.html").read_text())
    assert f"<h2>The question</h2><p>{html.escape(saved['question'])}</p>" in page_text
    # a bare plan carries no question: the report says so instead of pointing at a page it never came from
    (tmp_path / "plan.json").write_text(json.dumps(saved["plan"]))
    assert main(["run", str(tmp_path / "plan.json"), "--out", str(tmp_path / "bare")]) == 0
    assert main(["report", str(tmp_path / "bare" / "report.json"), "--html", str(tmp_path / "b.html")]) == 0
    bare = first_page((tmp_path / "b.html").read_text())
    assert f"<h2>The question</h2><p>{html.escape(NO_QUESTION)}</p>" in bare and "See the page" not in bare
