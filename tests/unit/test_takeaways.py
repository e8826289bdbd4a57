"""Take-aways that tell the truth: every table of every page compares without error, numbers that mean
different things under A and B are never subtracted, the worst-off group of A and of B is named, the
coherence report leads with its verdict and the audited run's numbers, every first-page number has its
unit and no machine key, and ``python -m core report`` writes a PDF alone.

Hand-checked: two learners of the Group fairness page measure eta_hat in different losses (the
Perturbed Leader in 0/1 error, the gradient surrogate in logistic loss), so their eta_hat is shown
side by side and never subtracted; the audited release's theory gamma is the ``theory_gamma`` of its
row of the verdicts table, not the calculator's gamma.
"""
from __future__ import annotations

import dataclasses
import html
import io
import re
import zipfile

import numpy as np
import pandas as pd
import pytest

from core.compare import NOT_COMPARABLE, compare_reports, compare_results, headline_delta, table_delta
from core.contracts import DataRef
from core.report import build_report, report_json, tables_zip
from core.stakeholder_report import embedded_report, format_answer, report_html, report_html_from_json
from core.takeaway import NO_UNIT, unit_of
from core.uncertainty_words import with_interval


def _budget(total, preset="equal"):
    from core.census import BudgetPlan, run
    return run(BudgetPlan(total=total, split="preset", preset=preset))


def _coherence(seed, trials):
    from core.coherence import AuditPlan, RowSample, run
    return run(AuditPlan(rows=RowSample(1500, seed), trials=trials))


def _districts(n_plans):
    from core.districts import DistrictPlan, GreedyParams, run
    return run(DistrictPlan(generator="greedy", params=GreedyParams(n_plans=n_plans)))


def _synthesis(synthesizer, strata=("race",)):
    from core.synthesis import SweepPlan, SynthesisPlan, run
    return run(SynthesisPlan(data=DataRef("cps"), columns=("education", "sex", "race", "income"), strata=strata,
                             synthesizer=synthesizer, sweep=SweepPlan(epsilons=(3.0,), seeds=(0,)), marginals=None,
                             means=None))


def _group_fairness(learner):
    from core.fairness import GroupFairnessPlan, LexifairPlan, run_group_fairness
    return run_group_fairness(GroupFairnessPlan(lexifair=LexifairPlan(rounds=30, levels=2, learner=learner),
                                                ranking=None, companion=None))


def _elicitation(stakeholders):
    from core.fairness import ElicitationPlan, run_elicitation
    return run_elicitation(ElicitationPlan(demo_stakeholders=stakeholders))


#: Two scenarios with different plans for every page: the noise table of two synthesizers whose two-way
#: noise is known for one and undefined for the other, and two lexifair learners with different losses.
PAIRS = {"Budget allocation": (lambda: _budget(1.0), lambda: _budget(4.0, "block-heavy")),
         "Coherence audit": (lambda: _coherence(0, 3), lambda: _coherence(1, 4)),
         "District maps": (lambda: _districts(2), lambda: _districts(3)),
         "Stratified synthesis": (lambda: _synthesis("independent"), lambda: _synthesis("mst", ("sex",))),
         "Group fairness and ranking": (lambda: _group_fairness("ftpl"), lambda: _group_fairness("ogd")),
         "Fairness elicitation": (lambda: _elicitation(0), lambda: _elicitation(5))}


@pytest.fixture(scope="module")
def pairs():
    return {page: (make_a(), make_b()) for page, (make_a, make_b) in PAIRS.items()}


def visible(text: str) -> str:
    return re.sub(r"<script.*?</script>", "", text, flags=re.S)


def first_page(text: str) -> str:
    page = text.split("<section class='first-page'>", 1)[1].split("</section>", 1)[0]
    return re.sub(r"<div class='figure'.*?</div></div>", "", page, flags=re.S)


def words_of(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


# ------------------------------------------------------------------------------ every table compares

@pytest.mark.slow
@pytest.mark.parametrize("page", list(PAIRS))
def test_every_table_of_every_page_compares_in_the_panel_the_zip_and_the_ab_report(pairs, page):
    a, b = pairs[page]
    assert a.plan.digest() != b.plan.digest()
    report_a, report_b = build_report(a, page=page), build_report(b, page=page)
    for comparison in (compare_results(a, b, page=page),
                       compare_reports(report_json(report_a), report_json(report_b))):  # as saved and reopened
        names = comparison.common_tables()
        assert names, page
        for name in names:
            if comparison.too_large(name):
                continue
            delta = comparison.table(name)
            assert {"column", "A", "B", "change", "direction"} <= set(delta.columns), name
        exported = comparison.tables()
        with zipfile.ZipFile(io.BytesIO(tables_zip(exported))) as archive:
            files = set(archive.namelist())
        assert {f"{n}.csv" for n in exported} <= files and "headline_delta.csv" in files
        names_worst_off = bool(comparison.a.takeaway["worst_off"] or comparison.b.takeaway["worst_off"])
        assert ("worst_off_groups.csv" in files) == names_worst_off
        assert names_worst_off == (page in ("Stratified synthesis", "Group fairness and ranking"))
    text = report_html(b, page=page, compare=report_a)
    assert "<h2>Scenario A against scenario B</h2>" in text
    assert "Traceback" not in text


def test_the_noise_table_of_two_synthesizers_compares_cell_by_cell(pairs):
    """A saved report keeps a column of NaN (a two-way noise the synthesizer does not measure) as nulls,
    which read back as text; B holds numbers there. The column is compared, not used to match rows."""
    a, b = pairs["Stratified synthesis"]
    assert a.tables()["noise"]["stratum two-way cell sd"].isna().all()
    assert b.tables()["noise"]["stratum two-way cell sd"].notna().all()
    comparison = compare_reports(report_json(build_report(a, page="x")), report_json(build_report(b, page="x")))
    delta = comparison.table("noise")
    two_way = delta[delta["column"] == "stratum two-way cell sd"]
    assert len(two_way) == len(b.tables()["noise"])
    assert two_way["A"].isna().all() and np.allclose(two_way["B"], b.tables()["noise"]["stratum two-way cell sd"])
    assert (two_way["direction"] == "n/a").all()
    eps = delta[delta["column"] == "rho"]
    assert list(eps["A"]) == list(a.tables()["noise"]["rho"])      # rows matched on epsilon, in order


def test_a_column_that_is_text_on_one_side_and_numbers_on_the_other_is_text_on_both():
    a = pd.DataFrame({"noise": ["laplace", "gaussian"], "sd": ["n/a", "n/a"], "error": [1.0, 2.0]})
    b = pd.DataFrame({"noise": ["laplace", "gaussian"], "sd": [0.5, 0.7], "error": [1.5, 1.0]})
    delta = table_delta(a, b)
    assert set(delta["column"]) == {"error"}
    # "sd" is text under A: it names rows, so no row of A matches one of B on it and nothing is subtracted
    assert delta["change"].isna().all() and len(delta) == 4
    same = table_delta(a, b, keys=["noise"])
    assert same.loc[same["column"] == "error"].set_index("noise")["change"].to_dict() == {"laplace": 0.5,
                                                                                         "gaussian": -1.0}


def test_matching_on_a_column_one_side_lacks_is_refused_in_words():
    with pytest.raises(ValueError, match="both tables"):
        table_delta(pd.DataFrame({"x": [1.0]}), pd.DataFrame({"y": [1.0], "x": [2.0]}), keys=["y"])


# ------------------------------------------------------------------ numbers that mean different things

def test_numbers_declared_with_different_meanings_are_not_subtracted():
    out = headline_delta({"eta": 0.3, "error": 0.2}, {"eta": 0.6, "error": 0.25},
                         {"eta": "an average 0/1 error"}, {"eta": "an average logistic loss"}).set_index("number")
    assert out.loc["eta", "direction"] == NOT_COMPARABLE
    assert np.isnan(out.loc["eta", "change"]) and np.isnan(out.loc["eta", "change_pct"])
    assert out.loc["eta", "why"] == "A is an average 0/1 error; B is an average logistic loss"
    assert out.loc["error", "change"] == pytest.approx(0.05) and out.loc["error", "why"] == ""


def test_group_fairness_eta_hat_under_two_losses_is_shown_side_by_side_with_why(pairs):
    a, b = pairs["Group fairness and ranking"]
    comparison = compare_results(a, b, page="Group fairness and ranking")
    etas = comparison.headline[comparison.headline["number"].str.startswith("eta_hat")]
    assert len(etas) == 2 and (etas["direction"] == NOT_COMPARABLE).all() and etas["change"].isna().all()
    assert etas["why"].str.contains("0/1 error").all() and etas["why"].str.contains("logistic loss").all()
    errors = comparison.headline[comparison.headline["number"].str.startswith("worst held-out")]
    assert errors["change"].notna().all()                  # the same measure under both: subtracted
    text = visible(report_html(b, page="Group fairness and ranking", compare=build_report(a, page="x")))
    delta = text.split("<table class='delta'>", 1)[1].split("</table>", 1)[0]
    for row in re.findall(r"<tr><td>eta_hat level \d</td>.*?</tr>", delta):
        assert "not subtracted" in row and "0/1 error" in row and "logistic loss" in row
        assert not re.search(r"[+-]\d+(\.\d+)?%", row)     # no percentage change printed
    answer = words_of(first_page(text).split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0])
    assert "higher" not in answer
    for name in etas["number"]:                                   # each side in its own loss, with why
        assert (f"Eta-hat {name.split(' ', 1)[1]} is {format_answer(a.headline()[name])} average 0/1 error (the "
                f"learner's loss) under A and {format_answer(b.headline()[name])} average logistic loss (the learner's "
                "loss) under B; they are not subtracted, because A is an average 0/1 error; B is an average logistic "
                "loss.") in answer


# ------------------------------------------------------------------------------------- worst-off group

@pytest.mark.parametrize("page", ["Group fairness and ranking", "Stratified synthesis"])
def test_the_ab_report_names_the_worst_off_group_of_a_and_b_and_says_if_it_changed(pairs, page):
    a, b = pairs[page]
    worst_a, worst_b = a.takeaway().worst_off, b.takeaway().worst_off
    assert worst_a and worst_b
    text = visible(report_html(b, page=page, compare=build_report(a, page=page)))
    table = text.split("<table class='worst-off'>", 1)[1].split("</table>", 1)[0]
    answer = words_of(first_page(text).split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0])
    for what in set(worst_a) & set(worst_b):
        ga, gb = worst_a[what], worst_b[what]
        row = re.search(rf"<tr><td>{re.escape(html.escape(what))}</td>.*?</tr>", table).group(0)
        assert html.escape(ga) in row and html.escape(gb) in row
        assert row.endswith(f"<td>{'yes' if ga != gb else 'no'}</td></tr>")
        if ga != gb:
            assert f"The worst-off group under {what} changed: it is {ga} under A and {gb} under B." in answer
        else:
            assert f"The worst-off group under {what} is {ga} under both A and B: it did not change." in answer


def test_the_worst_off_group_of_a_model_is_the_one_with_the_largest_held_out_error(pairs):
    a, _ = pairs["Group fairness and ranking"]
    groups = a.lexifair.groups
    for model, group in a.takeaway().worst_off.items():
        rows = groups[groups["model"] == model]
        assert rows.loc[rows["held_out_error"].idxmax(), "group"] == group


def test_group_names_of_an_upload_are_not_taken_away():
    """Worst-off groups read from a private file are not named in what a report carries."""
    from core.fairness.group_fairness_plan import GroupFairnessResult, LexifairResult
    from core.fairness import GroupFairnessPlan, LexifairPlan
    worst = pd.DataFrame({"model": ["ERM (plain accuracy)"], "rank_in_model": [1], "group": ["secret = x"],
                          "size": [50], "in_sample_error": [0.2], "held_out_error": [0.3], "held_out_low": [np.nan],
                          "held_out_high": [np.nan]})
    levels = pd.DataFrame({"level": [1], "eta_hat": [0.3]})
    plan = GroupFairnessPlan(lexifair=LexifairPlan(rounds=30, levels=1, bootstrap=0), ranking=None, companion=None)
    upload = DataRef("upload", fingerprint="0" * 64)
    result = GroupFairnessResult(plan=dataclasses.replace(plan, data=upload),
                                 lexifair=LexifairResult(worst, levels, pd.DataFrame(), worst))
    take = result.takeaway()
    assert take.worst_off == {} and "secret" not in " ".join(take.answer)


# ---------------------------------------------------------------------------------- coherence verdict

def test_the_coherence_ab_report_leads_with_the_verdicts_of_a_and_b(pairs):
    a, b = pairs["Coherence audit"]

    def verdict(result):
        v = result.tables()["verdicts"]
        return "Verdict: " + "; ".join(f"{s} for {r}" for r, s in zip(v["release"], v["verdict_shown"])) + "."
    text = report_html(b, page="Coherence audit", compare=build_report(a, page="Coherence audit"))
    answer = words_of(first_page(text).split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0]).strip()
    lead = (f"Under both A and B: {verdict(a)}" if verdict(a) == verdict(b) else
            f"Under A: {verdict(a)} Under B: {verdict(b)}")
    assert answer.startswith(lead)


def test_the_coherence_first_page_leads_with_the_verdict_and_the_audited_runs_numbers():
    from core.coherence import AuditPlan, RowSample, TheoryPlan, run
    from core.coherence.run import theory_key, worst_key
    result = run(AuditPlan(rows=RowSample(1500, 0), trials=3, theory=TheoryPlan()))
    verdicts = result.tables()["verdicts"]
    text = report_html(result, page="Coherence audit", question="Does the release keep the data coherent?")
    page = first_page(text)
    answer = words_of(page.split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0]).strip()
    shown = [f"{v} for {r}" for r, v in zip(verdicts["release"], verdicts["verdict_shown"])]
    assert answer.startswith(f"Verdict: {'; '.join(shown)}.")
    assert "Trials a pass needs" not in answer
    key = page.split("<h2>Key numbers</h2>", 1)[1].split("</table>", 1)[0]
    names = [html.unescape(n) for n in re.findall(r"<tr><td>(.*?)</td>", key)]
    private = verdicts[verdicts["theory_gamma"].notna()]
    assert len(private) >= 1
    assert names == ([worst_key(r) for r in verdicts["release"]] + [theory_key(r) for r in private["release"]]
                     + ["rows audited"])
    for _, row in private.iterrows():                  # the audited release's gamma, in people, in the answer
        assert f"a subgroup needs at least {row['theory_gamma']:,.0f} people" in answer
        assert result.headline()[theory_key(row["release"])] == pytest.approx(row["theory_gamma"])
    calculator = result.headline()["theory gamma (conservative)"]
    assert np.isfinite(calculator) and calculator not in set(private["theory_gamma"])
    assert "theory gamma" not in words_of(key)          # the calculator's example is not a key number
    assert unit_of("theory gamma (conservative)", result.takeaway().units).endswith("example settings)")


# ------------------------------------------------------------------------------- first page in words

FIRST_PAGE_PAGES = ["Budget allocation", "Coherence audit", "District maps", "Stratified synthesis",
                    "Group fairness and ranking", "Fairness elicitation"]


@pytest.mark.slow
@pytest.mark.parametrize("page", FIRST_PAGE_PAGES)
def test_first_page_numbers_have_units_and_no_machine_keys(pairs, page, tmp_path):
    from core.privacy.ledger import Spend
    from core.privacy.project_ledger import Cap, LedgerRelease, ProjectLedger
    result = pairs[page][1]
    report = build_report(result, page=page)
    book = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    book.set_cap("compas", Cap(4.0))
    book.record(LedgerRelease("compas", "r0", "release", page, "release", "Release 0", "d0",
                              (Spend("counts", 0.5, "epsilon"),)))
    report["project_ledger"] = book.export("compas")
    for text in (report_html(result, page=page, report=report, question="What does it answer?"),
                 report_html(result, page=page, report=report, compare=build_report(pairs[page][0], page=page))):
        page_text = first_page(text)
        key = page_text.split("<h2>Key numbers</h2>", 1)[1].split("</table>", 1)[0]
        units = re.findall(r"<td class='unit'>(.*?)</td>", key)
        assert units and len(units) == len(re.findall(r"<td class='value'>", key))
        assert all(u and u != html.escape(NO_UNIT) for u in units), (page, units)
        words = words_of(page_text)
        keys = re.findall(r"\b[a-z]+_[a-z_]+\b", words, flags=re.I)
        assert not keys, (page, keys)
        assert not re.search(r"\bnan\b", words, flags=re.I)
        assert "data set compas" not in words and "COMPAS" in words


def test_a_number_only_one_side_has_is_said_so_not_moved_from_nothing(pairs):
    a, b = pairs["Fairness elicitation"]                 # only B simulated a panel
    assert "pairs with a constraint" not in a.headline() and "pairs with a constraint" in b.headline()
    text = report_html(b, page="Fairness elicitation", compare=build_report(a, page="Fairness elicitation"))
    answer = words_of(first_page(text).split("<h2>The answer</h2>", 1)[1].split("<h2>", 1)[0])
    count = b.headline()["pairs with a constraint"]
    assert f"Pairs with a constraint is {format_answer(count)} pairs under B; A has no such number." in answer
    assert "n/a" not in answer


def test_answer_numbers_carry_their_units(pairs):
    result = pairs["District maps"][0]
    answer = first_page(report_html(result, page="District maps")).split("<h2>The answer</h2>", 1)[1]
    answer = words_of(answer.split("<h2>", 1)[0])
    head = result.headline()
    # the verdict first, with its standard in people and its source; the error rounded to its interval
    assert answer.strip().startswith(("Plan 1 passes:", "Plan 1 fails the checks:"))
    assert "people (\u00b1" in answer and "source:" in answer
    error = with_interval(head["mean_abs_district_error"], *result.mean_abs_error_interval(1), "people")
    assert f"by {error} on average" in answer
    assert f"{int(head['plans_passing_checks'])} of {int(head['plans'])} plans pass" in answer


# ------------------------------------------------------------------------------------ command line

def test_report_command_writes_a_pdf_without_html(pairs, tmp_path, monkeypatch):
    import core.stakeholder_report as stakeholder
    from core.__main__ import main
    result = pairs["Budget allocation"][0]
    source = tmp_path / "R.json"
    source.write_text(report_json(build_report(result, page="Budget allocation")))
    printed = []
    monkeypatch.setattr(stakeholder, "report_pdf", lambda text, paper: printed.append(text) or b"%PDF-1.4 test")
    out = tmp_path / "out.pdf"
    assert main(["report", str(source), "--pdf", str(out)]) == 0
    assert out.read_bytes() == b"%PDF-1.4 test"
    assert len(printed) == 1 and "<h2>The answer</h2>" in printed[0]         # the report's HTML, printed
    assert embedded_report(printed[0])["plan_digest"] == result.plan.digest()
    assert not list(tmp_path.glob("*.html"))


def test_report_command_without_an_output_says_what_to_give(tmp_path, capsys, pairs):
    from core.__main__ import main
    source = tmp_path / "R.json"
    source.write_text(report_json(build_report(pairs["Budget allocation"][0], page="Budget allocation")))
    assert main(["report", str(source)]) == 2
    assert "--html OUT.html, --pdf OUT.pdf or both" in capsys.readouterr().err


def test_a_hand_edited_takeaway_is_refused_or_read_safely(pairs):
    from core.report import parse_report
    result = pairs["Budget allocation"][0]
    report = build_report(result, page="Budget allocation")
    with pytest.raises(ValueError, match="'takeaway' must be an object or null"):
        parse_report(report_json({**report, "takeaway": "FAIL"}))
    odd = {**report, "takeaway": {"answer": "not a list", "key": ["no such number", 3], "units": ["x"],
                                  "worst_off": {"ERM": "<script>alert(1)</script>"}}}
    text = visible(report_html_from_json(parse_report(report_json(odd)),
                                         compare=build_report(pairs["Budget allocation"][1], page="x")))
    assert "<script>alert" not in text and "&lt;script&gt;" in text
    assert "no such number" not in first_page(text)
