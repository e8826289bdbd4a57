"""Stakeholder report: one per page's result, with its headline numbers, offline, and as a PDF."""
from __future__ import annotations

import html
import re

import plotly.graph_objects as go
import pytest

from core.compare import readable_name
from core.contracts import DataRef
from core.datasets import DATASETS
from core.report import build_report
from core.stakeholder_report import (PDF_NEEDS_CHROMIUM, chromium_path, embedded_report, format_number,
                                     plan_lines, report_html, report_pdf, uncertainty_columns)


def _budget():
    from core.census import BudgetPlan, run
    return run(BudgetPlan())


def _coherence():
    from core.coherence import AuditPlan, RowSample, run
    return run(AuditPlan(rows=RowSample(1500, 0), trials=3))


def _districts():
    from core.districts import DistrictPlan, GreedyParams, run
    return run(DistrictPlan(generator="greedy", params=GreedyParams()))


def _synthesis():
    from core.synthesis import SweepPlan, SynthesisPlan, run
    return run(SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income"),
                             sweep=SweepPlan(epsilons=(3.0,), seeds=(0,)), marginals=None, means=None))


def _group_fairness():
    from core.fairness import GroupFairnessPlan, LexifairPlan, run_group_fairness
    return run_group_fairness(GroupFairnessPlan(lexifair=LexifairPlan(rounds=30, levels=2), ranking=None,
                                                companion=None))


def _elicitation():
    from core.fairness import ElicitationPlan, run_elicitation
    return run_elicitation(ElicitationPlan())


PAGES = {"Budget allocation": _budget, "Coherence audit": _coherence, "District maps": _districts,
         "Stratified synthesis": _synthesis, "Group fairness and ranking": _group_fairness,
         "Fairness elicitation": _elicitation}


@pytest.fixture(scope="module")
def results():
    return {page: make() for page, make in PAGES.items()}


@pytest.mark.slow
@pytest.mark.parametrize("page", list(PAGES))
def test_one_report_per_page_holds_its_headline_numbers(results, page):
    result = results[page]
    report = build_report(result, page=page)
    text = report_html(result, page=page, question="What does it answer?", report=report, file_name="x.json")
    headline = result.headline()
    assert headline, "every page's result quotes some numbers"
    units = report["takeaway"]["units"]
    assert set(units) == set(headline) and all(units.values()), "a unit for every headline number"
    for name, value in headline.items():
        assert f"<td>{html.escape(readable_name(name))}</td><td class='value'>{format_number(value)}</td>" in text, name
    # every headline number carries its unit and its uncertainty in words, in the same row, before the tables
    words = result.headline_uncertainty()
    assert set(words) == set(headline), "one statement per headline number, no more"
    for name, value in headline.items():
        assert words[name].strip() and words[name] != "not stated", name
        row = (f"<td>{html.escape(readable_name(name))}</td><td class='value'>{format_number(value)}</td>"
               f"<td class='unit'>{html.escape(units[name])}</td><td class='uncertainty'>{html.escape(words[name])}</td>")
        assert row in text, name
    assert "<th>uncertainty</th>" in text
    assert text.index("<h2>Headline numbers</h2>") < text.index("<h2>Uncertainty in the tables</h2>")
    assert embedded_report(text)["headline_uncertainty"] == words       # the JSON report carries them too
    back = embedded_report(text)
    assert back["headline"] == report["headline"] and back["plan_digest"] == result.plan.digest()
    assert "python -m core reproduce x.json --out results/" in text
    assert "What does it answer?" in text
    for section in ("The plan in plain words", "Headline numbers", "Privacy ledger", "Simulation or release",
                    "Where the data came from", "Package versions", "Reproduce these numbers"):
        assert f"<h2>{section}</h2>" in text
    ref = getattr(result.plan, "data", None)
    if isinstance(ref, DataRef) and ref.source in DATASETS:
        assert DATASETS[ref.source].provenance.replace("'", "&#x27;") in text
    # nothing is fetched: no external scripts, stylesheets, fonts or images
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=\s*['\"]?(https?:)?//", text, re.I)
    assert "@import" not in text and "@font-face" not in text


def test_figures_are_embedded_with_plotly_inlined_once(results):
    figs = [go.Figure(go.Bar(x=[1, 2], y=[3, 4])), go.Figure(go.Scatter(x=[1, 2], y=[1, 0]))]
    text = report_html(results["Budget allocation"], page="Budget allocation", figures=figs)
    assert text.count("plotly.js v") == 1            # the library once, with the first figure
    assert text.count("Plotly.newPlot") == 2         # both figures drawn by it
    assert "cdn.plot.ly" not in text.split("<script type='application/json'")[0].split("plotly.js v")[0]


def test_plan_in_plain_words_and_uncertainty_columns(results):
    lines = plan_lines(results["District maps"].plan)
    labels = [label for _, label, _ in lines]
    # a field's declared label (param metadata) names it, not its Python name
    assert "Plan generator" in labels and "generator" not in labels and any(depth > 0 for depth, _, _ in lines)
    import pandas as pd
    df = pd.DataFrame({"district": [1], "error sd": [2.0], "95% CI low": [0.1], "mean": [3.0]})
    assert uncertainty_columns(df) == ["error sd", "95% CI low"]


@pytest.mark.slow
def test_pdf_needs_chromium_and_prints_when_present(results, tmp_path):
    text = report_html(results["District maps"], page="District maps",
                       figures=[go.Figure(go.Bar(x=[1, 2], y=[3, 4]))])
    with pytest.raises(ValueError, match="Chromium"):
        report_pdf(text, chromium=str(tmp_path / "no-such-chromium"))
    if chromium_path() is None:
        pytest.skip(PDF_NEEDS_CHROMIUM)
    pdf = report_pdf(text)
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000


@pytest.mark.parametrize("page,least", [("Budget allocation", 3), ("District maps", 1), ("Coherence audit", 1),
                                        ("Stratified synthesis", 1), ("Group fairness and ranking", 2)])
@pytest.mark.slow
def test_default_figures_are_the_pages_own(results, page, least):
    from dashboard.components.stakeholder_figures import default_figures
    figs = default_figures(results[page])
    assert len(figs) >= least and all(isinstance(f, go.Figure) for f in figs)
    text = report_html(results[page], page=page, figures=figs)
    assert text.count("Plotly.newPlot") == len(figs) and text.count("plotly.js v") == 1


def _visible(text: str) -> str:
    """The HTML a reader sees: without the embedded JSON report and plotly's script."""
    return re.sub(r"<script.*?</script>", "", text, flags=re.S)


def test_html_shows_the_data_sets_project_ledger_with_simulations_apart(results, tmp_path):
    from core.privacy.ledger import Spend
    from core.privacy.project_ledger import LedgerRelease, ProjectLedger
    book = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    spend = (Spend("county totals", 0.25, "epsilon"),)
    book.record(LedgerRelease("cps", "r1", "release", "Stratified synthesis", "release", "Spring tract release",
                              "d1", spend))
    book.record(LedgerRelease("cps", "s1", "simulation", "Stratified synthesis", "simulate",
                              "What-if rehearsal", "d2", (Spend("county totals", 4.0, "epsilon"),)))
    result = results["Stratified synthesis"]
    report = build_report(result, page="Stratified synthesis")
    report["project_ledger"] = book.export("cps")
    shown = _visible(report_html(result, page="Stratified synthesis", report=report))
    assert "<h2>Project privacy ledger of this data set</h2>" in shown
    section = shown.split("<h2>Project privacy ledger of this data set</h2>")[1].split("<h2>")[0]
    for header in ("release", "page", "time (UTC)", "unit", "amount", "composition"):
        assert f"<th>{header}</th>" in section
    releases, simulations = section.split("Simulations (listed apart, never counted in the total)")
    assert "Spring tract release" in releases and "What-if rehearsal" not in releases
    assert "What-if rehearsal" in simulations
    assert "epsilon 0.25 over 1 release(s)" in releases          # the simulation's 4.0 is not counted
    # a report without a data set, or with an unreadable ledger, says so instead of omitting it
    report["project_ledger"] = {"data_key": "cps", "unavailable": "database is down"}
    assert "could not be read" in _visible(report_html(result, page="Stratified synthesis", report=report))
    report.pop("project_ledger")
    assert "no project ledger applies" in _visible(report_html(result, page="Stratified synthesis", report=report))


def test_plan_lines_read_as_words_and_leave_out_what_the_plan_did_not_ask_for():
    from core.stakeholder_report import plan_lines
    from core.synthesis import SynthesisPlan

    plan = SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income"), strata=("sex",))
    lines = plan_lines(plan)
    assert plan.sweep is None and all(value != "not set" for _, _, value in lines)
    assert not any(value.endswith("Params") or value.endswith("Config") for _, _, value in lines)
    assert any(depth == 1 for depth, _, _ in lines)            # nested settings indented under their group


@pytest.mark.slow
@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_gives_an_ab_report_with_its_overlay(results, page):
    from core.compare import compare_results
    from core.figures.overlays import overlay_figures
    result = results[page]
    overlays = overlay_figures(compare_results(result, result, page=page))
    text = report_html(result, page=page, compare=build_report(result, page=page), overlays=overlays)
    assert "<h2>Scenario A against scenario B</h2>" in text and "<table class='delta'>" in text
    assert "A and B have the same settings." in text
    assert text.count("<h3>Plan A (pinned)</h3>") == 1 and text.count("<h3>Plan B (current)</h3>") == 1
    names = [n for n in result.headline()]
    delta = text.split("<table class='delta'>", 1)[1].split("</table>", 1)[0]
    assert delta.count("<tr><td>") == len(names)                # one signed row per headline number
    assert text.count("Plotly.newPlot") == len(overlays) >= 1
