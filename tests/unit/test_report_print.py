"""The printed stakeholder report: readable figures on A4 and Letter, every series told apart without colour,
the main figure measuring what the answer names, no machine keys or "nan" anywhere a reader looks, and the
PDF's paper size.

Print arithmetic: a CSS pixel prints as 0.75 pt, so a 10 px font is 7.5 pt; A4's printable width is
210 - 2 x 12 = 186 mm = 703 px and Letter's 215.9 - 24 = 191.9 mm = 725 px (96 px per inch, 25.4 mm per inch).
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess

import plotly.graph_objects as go
import pytest

from core.report import build_report, report_json
from core.stakeholder_report import (MIN_FONT_PX, PAPERS, PRINT_WIDTH_PX, chromium_path, page_size_css,
                                     print_ready, report_html, report_html_from_json, report_pdf)

MM_PER_INCH, PX_PER_INCH = 25.4, 96
PRINTABLE_MM = {"A4": 210 - 2 * 12, "Letter": 215.9 - 2 * 12}


def _coherence():
    from core.coherence import AuditPlan, RowSample, TheoryPlan, run
    return run(AuditPlan(rows=RowSample(1500, 0), trials=3, theory=TheoryPlan()))


def _group_fairness():
    from core.fairness import GroupFairnessPlan, LexifairPlan, run_group_fairness
    return run_group_fairness(GroupFairnessPlan(lexifair=LexifairPlan(rounds=30, levels=2), ranking=None,
                                                companion=None))


def _synthesis():
    from core.contracts import DataRef
    from core.synthesis import SweepPlan, SynthesisPlan, run
    return run(SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income"), strata=("race",),
                             synthesizer="independent", sweep=SweepPlan(epsilons=(1.0, 3.0), seeds=(0,)),
                             marginals=None, means=None))


def _budget():
    from core.census import BudgetPlan, run
    return run(BudgetPlan())


def _districts():
    from core.districts import DistrictPlan, GreedyParams, run
    return run(DistrictPlan(generator="greedy", params=GreedyParams(n_plans=2)))


AREAS = {"Coherence audit": _coherence, "Group fairness and ranking": _group_fairness,
         "Stratified synthesis": _synthesis, "Budget allocation": _budget, "District maps": _districts}


@pytest.fixture(scope="module")
def results():
    return {page: make() for page, make in AREAS.items()}


def font_sizes(node, found=None) -> list[float]:
    """Every font size a figure's JSON sets (numbers and lists of numbers)."""
    found = [] if found is None else found
    if isinstance(node, list):
        for item in node:
            font_sizes(item, found)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("font") and isinstance(value, dict) and value.get("size") is not None:
                size = value["size"]
                found.extend(size if isinstance(size, list) else [size])
            font_sizes(value, found)
    return found


def visible(text: str) -> str:
    return re.sub(r"<script.*?</script>", "", text, flags=re.S)


def words_of(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def first_page(text: str) -> str:
    return text.split("<section class='first-page'>", 1)[1].split("</section>", 1)[0]


# ------------------------------------------------------------------------------------------ figures

@pytest.mark.slow
@pytest.mark.parametrize("page", list(AREAS))
def test_every_printed_figure_has_readable_text_and_fits_a4_and_letter(results, page):
    from dashboard.components.stakeholder_figures import default_figures
    figures = default_figures(results[page])
    assert figures, page
    for fig in figures:
        ready = print_ready(fig).to_plotly_json()
        sizes = font_sizes(ready)
        assert ready["layout"]["font"]["size"] >= MIN_FONT_PX
        assert sizes and min(sizes) >= MIN_FONT_PX, (page, sorted(sizes)[:3])
        assert MIN_FONT_PX * 0.75 >= 7                       # 10 px print as 7.5 pt
        assert ready["layout"]["width"] == PRINT_WIDTH_PX
        for paper, mm in PRINTABLE_MM.items():               # drawn at 100 %, never cut at the right edge
            assert PRINT_WIDTH_PX <= mm / MM_PER_INCH * PX_PER_INCH, paper
    text = report_html(results[page], page=page, figures=figures)
    assert "zoom:" not in visible(text)                      # no figure is printed smaller than drawn


def test_small_text_is_raised_in_every_place_a_figure_sets_it():
    fig = go.Figure(go.Heatmap(z=[[1, 2]], text=[["a", "b"]], texttemplate="%{text}", textfont={"size": 6},
                               colorbar={"tickfont": {"size": 5}, "title": {"text": "W1", "font": {"size": 4}}}))
    fig.update_layout(font={"size": 7}, legend={"font": {"size": 6}}, xaxis={"tickfont": {"size": 6}},
                      annotations=[{"text": "note", "font": {"size": 5}, "x": 0, "y": 0}])
    ready = print_ready(fig).to_plotly_json()
    assert min(font_sizes(ready)) == MIN_FONT_PX
    assert ready["layout"]["uniformtext"] == {"minsize": MIN_FONT_PX, "mode": "show"}   # bar labels not shrunk
    large = print_ready(go.Figure(go.Bar(x=[1], y=[1], text=["x"], textfont={"size": 14}))).to_plotly_json()
    assert large["data"][0]["textfont"]["size"] == 14                                  # larger text is kept


def test_every_series_has_its_own_colour_and_its_own_pattern_or_marker():
    bars = go.Figure([go.Bar(name=n, x=["a", "b"], y=[1, 2]) for n in ("ERM", "minimax", "lexifair 2", "lexifair 3")])
    ready = print_ready(bars)
    looks = {(t.marker.color, t.marker.pattern.shape or "") for t in ready.data}
    assert len(looks) == 4 and len({shape for _, shape in looks}) == 4
    assert len({t.marker.color for t in ready.data}) == 4
    lines = go.Figure([go.Scatter(name=n, x=list(range(50)), y=list(range(50))) for n in ("A", "B", "C")])
    lines.add_scatter(x=[0, 1, 1, 0], y=[0, 0, 1, 1], fill="toself", showlegend=False)      # a band: not a series
    ready = print_ready(lines)
    symbols = [t.marker.symbol for t in ready.data[:3]]
    assert len(set(symbols)) == 3 and all(t.mode == "lines+markers" for t in ready.data[:3])
    assert all(t.marker.maxdisplayed for t in ready.data[:3])     # a dense curve keeps its line, few markers
    assert ready.data[3].marker.symbol is None
    single = print_ready(go.Figure(go.Bar(x=[1], y=[1])))
    assert not single.data[0].marker.pattern.shape                # one series: nothing to tell apart
    panels = go.Figure([go.Bar(x=[1], y=[1], showlegend=False, xaxis=f"x{i or ''}") for i in range(3)])
    panels.update_layout(annotations=[{"text": t} for t in ("ERM", "minimax", "lexifair")])
    shapes = [t.marker.pattern.shape or "" for t in print_ready(panels).data]
    assert len(set(shapes)) == 3                                  # one series per titled panel


def test_the_coherence_main_figure_shows_the_failure_rate_the_verdict_is_judged_on(results):
    from dashboard.components.stakeholder_figures import default_figures
    result = results["Coherence audit"]
    figures = default_figures(result)
    answer = " ".join(result.takeaway().answer)
    assert "failure rate" in answer
    main = figures[0]
    assert main.layout.title.text.startswith("Failure rate against alpha")
    assert "share of trials" in main.layout.yaxis.title.text
    rates = {r: result.headline()[f"worst failure rate: {r}"] for r in result.tables()["verdicts"]["release"]}
    worst = max(rates, key=rates.get)
    assert main.layout.title.text.endswith(worst)                # the release with the highest failure rate first


# ------------------------------------------------------------------------------------------ words

MACHINE_KEYS = ("clear_half", "laplace_table", "nan trials", "nan_trials", "data set compas", "mean abs ",
                "parity_error", "_pct", "eta_hat")


@pytest.mark.parametrize("page", list(AREAS))
def test_no_machine_key_or_nan_where_a_reader_looks(results, page):
    text = visible(report_html(results[page], page=page, question="What does it answer?"))
    words = words_of(text)
    for key in MACHINE_KEYS:
        assert key not in words, (page, key)
    assert not re.search(r"\bnan\b", words, flags=re.I), page
    page_one = words_of(first_page(text))
    assert "(%) is" not in page_one                              # a percentage says "%" once, as its unit


def test_verdict_is_the_first_sentence_of_the_coherence_answer(results):
    result = results["Coherence audit"]
    page_one = first_page(report_html(result, page="Coherence audit", question="Is it coherent?"))
    answer = words_of(page_one.split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0]).strip()
    assert answer.startswith("Verdict: ") and result.takeaway().verdict.rstrip(".") in answer
    assert answer.index("Verdict") < answer.index("failure rate")


# ------------------------------------------------------------------------------------------ paper

def test_paper_sizes_are_a4_and_letter_and_anything_else_is_refused_in_words():
    assert PAPERS == ("A4", "Letter")
    assert page_size_css("Letter") == "@page{size:Letter;margin:14mm 12mm}"
    with pytest.raises(ValueError, match="A4, Letter"):
        report_pdf("<html></html>", paper="A5")
    assert page_size_css("A4") in report_html_from_json(build_report(_budget(), page="Budget allocation"))


@pytest.mark.skipif(chromium_path() is None or shutil.which("pdftotext") is None,
                    reason="needs Chromium and poppler's pdftotext")
@pytest.mark.slow
def test_the_printed_first_page_leads_with_the_verdict_on_a4_and_letter(results, tmp_path):
    from core.__main__ import main
    result = results["Coherence audit"]
    saved = tmp_path / "coherence.json"
    report = build_report(result, page="Coherence audit")
    report["question"] = "Does the release keep the data coherent?"
    saved.write_text(report_json(report))
    boxes = {"A4": (595, 842), "Letter": (612, 792)}             # points: 210 x 297 mm and 8.5 x 11 in
    for paper, (width, height) in boxes.items():
        pdf = tmp_path / f"{paper}.pdf"
        assert main(["report", str(saved), "--pdf", str(pdf), "--paper", paper]) == 0
        box = re.search(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", pdf.read_bytes())
        assert box and (round(float(box[1])), round(float(box[2]))) == (width, height), paper
        page_one = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(pdf), "-"], check=True,
                                  capture_output=True, text=True).stdout
        flat = " ".join(page_one.split())
        assert "Does the release keep the data coherent?" in flat
        assert "Verdict:" in flat and "Key numbers" in flat and "Privacy spent and left" in flat, paper
        assert not any(key in flat for key in MACHINE_KEYS), paper
