"""Reports of an uploaded file carry no exact size of it and no row-level value: the shared report withholds
every table computed on its rows (tests/unit/test_shared_report_attacker.py attacks it), and even the
curator's confidential report quotes sizes as bands; bundled data keeps every table exact; every report's
budget statement names the unit of protection."""
from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest

from core.coherence.plan import AdversaryChoice, AuditPlan, ReleaseChoice, RowSample
from core.coherence.run import run as run_audit
from core.contracts import DataRef, bytes_fingerprint
from core.fairness.causal_ranking import MediatorRole
from core.fairness.group_fairness_plan import GroupFairnessPlan, RankingPlan, run_group_fairness
from core.intake import ColumnSchema, DataSchema
from core.privacy.ledger import BudgetLedger
from core.report import build_report, report_json, size_band
from core.sharing import CONFIDENTIAL
from core.stakeholder_report import report_html

# Sizes chosen so none of them is a band edge, a k, a trial count or another setting of the plans.
N_ROWS = 347
SEX = {"F": 163, "M": 184}
RACE = {"A": 215, "B": 109, "C": 23}            # C is below gamma = 50: an excluded subgroup


def _upload() -> tuple[bytes, pd.DataFrame]:
    rng = np.random.default_rng(4)
    sex = np.array(["F"] * SEX["F"] + ["M"] * SEX["M"])
    race = np.array(["A"] * RACE["A"] + ["B"] * RACE["B"] + ["C"] * RACE["C"])
    rng.shuffle(race)
    age = rng.integers(0, 18, N_ROWS)
    y = np.where(rng.random(N_ROWS) < 1 / (1 + np.exp(-(0.1 * age - 1))), "yes", "no")
    experience = rng.integers(0, 30, N_ROWS)
    # five-digit incomes none of which any other number in a report could equal by chance
    income = 40_000 + 1_000 * experience + (sex == "M") * 3_000 + rng.integers(0, 997, N_ROWS) * 7 + 1
    frame = pd.DataFrame({"age": age, "sex": sex, "race": race, "y": y, "experience": experience,
                          "income": income})
    return frame.to_csv(index=False).encode(), frame


def _audit_plan(ref: DataRef) -> AuditPlan:
    return AuditPlan(data=ref, rows=RowSample(None, 0), target="y", positive="yes", lens=("age", "sex"),
                     subgroup_columns=("sex", "race"), releases=(ReleaseChoice("clear_half"),),
                     adversaries=(AdversaryChoice("logistic"),), alpha=0.3, gamma=50, trials=3)


def _ranking_plan(ref: DataRef, **ranking) -> GroupFairnessPlan:
    rp = RankingPlan(attributes=("sex",), mediators=(MediatorRole("experience", ()),), outcome="income",
                     ascending=False, ks=(50,), **ranking)
    return GroupFairnessPlan(data=ref, lexifair=None, companion=None, ranking=rp)


def _numbers(report: dict) -> tuple[set[float], str]:
    """Every number stored in the report (cells, headline, ledger) and all of its text."""
    found: set[float] = set()
    texts: list[str] = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                texts.append(str(k))
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, bool):
            return
        elif isinstance(x, (int, float)):
            found.add(float(x))
        elif isinstance(x, str):
            texts.append(x)

    shared = json.loads(report_json(report))
    for member in ("plan", "plan_digest", "created_utc", "versions"):   # the settings, not results
        shared.pop(member, None)
    walk(shared)
    return found, "\n".join(texts)


def _assert_absent(report: dict, secrets) -> None:
    numbers, text = _numbers(report)
    for s in secrets:
        assert float(s) not in numbers, f"{s} is stored in the report"
        assert not re.search(rf"(?<![\d.]){s}(?![\d])", text), f"{s} is written in the report's text"


@pytest.fixture(scope="module")
def upload():
    raw, frame = _upload()
    return raw, frame, DataRef("upload", bytes_fingerprint(raw))


def test_size_bands():
    assert size_band(3) == "n < 10"
    assert size_band(50) == "50 <= n < 100" and size_band(99) == "50 <= n < 100"
    assert size_band(1653) == "1000 <= n < 2000"
    assert size_band(5_000_000) == "n >= 1000000"


def test_coherence_report_of_an_upload_has_no_exact_size(upload):
    raw, _, ref = upload
    result = run_audit.uncached(_audit_plan(ref), raw)
    # the curator's view still holds the exact sizes ...
    c = result.comparison
    sizes = {*c.subgroups["size"], *c.excluded["size"]}          # sex, race and their crossings
    assert {*SEX.values(), *RACE.values()} <= sizes and result.n_rows == N_ROWS
    assert RACE["C"] in set(c.excluded["size"])
    # ... the shared report none of them (crossings under 20 are left out of the search: such small
    # numbers also occur as settings, trial counts and the like)
    assert not build_report(result, page="Coherence audit")["tables"]      # the shared report: none of them
    report = build_report(result, page="Coherence audit", audience=CONFIDENTIAL)
    secrets = {N_ROWS, N_ROWS // 2, *SEX.values(), *RACE.values(), *(s for s in sizes if s >= 20)}
    secrets -= {result.plan.gamma, result.headline()["trials a PASS needs at least"]}   # settings, not the file
    _assert_absent(report, sorted(secrets))
    assert "rows audited" not in report["headline"] and "rows audited" not in report["headline_uncertainty"]
    sub = report["tables"]["subgroups"]
    assert {r[sub["columns"].index("size")] for r in sub["rows"]} == {size_band(s) for s in c.subgroups["size"]}
    exc = report["tables"]["excluded"]
    assert [r[exc["columns"].index("size")] for r in exc["rows"]] == [size_band(s) for s in c.excluded["size"]]
    assert "p" not in report["tables"]["trials"]["columns"]
    # the HTML report embeds and prints the same tables
    html_text = report_html(result, page="Coherence audit", report=report)
    tables_html = html_text.split("<h2>Headline numbers</h2>")[1].split("<script")[0]
    for s in sorted(secrets):
        assert not re.search(rf"(?<![\d.,]){s}(?![\d])", tables_html), s


def test_coherence_on_bundled_data_keeps_exact_sizes(upload):
    raw, _, ref = upload
    result = run_audit.uncached(_audit_plan(ref), raw)
    public = dataclasses.replace(result, plan=result.plan.replace(data=DataRef("cps")))
    tables = public.tables()
    pd.testing.assert_frame_equal(tables["subgroups"], result.comparison.subgroups)
    pd.testing.assert_frame_equal(tables["excluded"], result.comparison.excluded)
    pd.testing.assert_frame_equal(tables["trials"], result.comparison.trials)
    assert public.headline()["rows audited"] == N_ROWS


def test_rows_the_plan_itself_fixed_are_quoted(upload):
    raw, _, ref = upload
    plan = _audit_plan(ref).replace(rows=RowSample(300, 1))
    result = run_audit.uncached(plan, raw)
    assert result.headline()["rows audited"] == 300          # the plan's own number, not the file's
    assert "rows audited" not in run_audit.uncached(_audit_plan(ref), raw).headline()


def test_ranking_report_of_an_upload_has_no_head_count_or_income(upload):
    raw, frame, ref = upload
    result = run_group_fairness.uncached(_ranking_plan(ref), raw)
    rk = result.ranking
    assert dict(zip(rk.composition["group"], rk.composition["people"])) == SEX      # the curator's view
    assert set(rk.rank_changes["score"]) <= set(frame["income"].astype(float))
    assert not build_report(result, page="Group fairness")["tables"]       # the shared report: none of them
    report = build_report(result, page="Group fairness", audience=CONFIDENTIAL)
    tables = report["tables"]
    assert "ranking_rank_changes" not in tables
    comp = tables["ranking_composition"]
    assert comp["columns"] == ["group", "people"]
    assert sorted(r[1] for r in comp["rows"]) == ["100 <= n < 200", "100 <= n < 200"]
    _assert_absent(report, [N_ROWS, *SEX.values(), *sorted(set(frame["income"]))])


def test_ranking_on_bundled_data_keeps_its_tables():
    rp = RankingPlan(attributes=("gender", "race"), mediators=(MediatorRole("lifting", ("gender",)),),
                     outcome="score", ascending=False, ks=(50,), synthetic_rows=200)
    plan = GroupFairnessPlan(data=DataRef("moving-company"), lexifair=None, companion=None, ranking=rp)
    result = run_group_fairness.uncached(plan)
    tables = result.tables()
    pd.testing.assert_frame_equal(tables["ranking_rank_changes"], result.ranking.rank_changes)
    pd.testing.assert_frame_equal(tables["ranking_composition"], result.ranking.composition)
    assert tables["ranking_composition"]["people"].sum() == 200


def _declared(k: int) -> DataRef:
    schema = DataSchema("toy", (ColumnSchema("pid", "person_id"), ColumnSchema("sex", categories=("F", "M"))),
                        person_id="pid", max_rows_per_person=k)
    return DataRef("upload", "f" * 64, schema=schema)


def test_every_report_statement_names_the_unit(upload):
    raw, _, ref = upload
    result = run_group_fairness.uncached(_ranking_plan(ref), raw)
    ledger = BudgetLedger()
    ledger.spend("counts", 0.5, "epsilon")
    plain = build_report(result, ledger=ledger)
    assert plain["ledger"]["statement"].endswith(
        "Unit of protection: per row (no person id is declared, so each row is treated as one person).")
    assert plain["data"]["unit_of_protection"].startswith("Unit of protection: per row")
    declared = dataclasses.replace(result, plan=result.plan.replace(data=_declared(3)))
    report = build_report(declared, ledger=ledger)
    assert "Unit of protection: per person, up to 3 rows each" in report["ledger"]["statement"]
    html_text = report_html(declared, page="Group fairness", ledger=ledger)
    assert "Unit of protection: per person, up to 3 rows each" in html_text.split("<script")[0]
    # a result that spends nothing still says whom a budget on this data set would protect
    assert "Unit of protection: per row" in report_html(result, page="Group fairness").split("<script")[0]


_COLOUR = re.compile(r"rgba?\([^)]*\)|#[0-9a-fA-F]{3,8}\b")     # colour specs, not counts
_DIV_ID = re.compile(r"\b[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\b")   # the random id of a figure's div


def _without_colours(x):
    if isinstance(x, dict):
        return {k: _without_colours(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_without_colours(v) for v in x]
    return _COLOUR.sub("", x) if isinstance(x, str) else x


def _assert_absent_with_figures(report: dict, secrets) -> None:
    """No secret is a number or a word of the report or any of its stored figures (labels, legend names,
    titles, hover text); colour specifications such as rgb(254,215,...) are not counts and are skipped."""
    assert report.get("figures"), "the report should still carry the page's figures"
    _assert_absent(_without_colours(json.loads(report_json(report))), secrets)


@pytest.fixture(scope="module")
def audit_of_upload(upload):
    raw, _, ref = upload
    return run_audit.uncached(_audit_plan(ref), raw)


def heat_map(figures):
    """The subgroup heat map among a coherence report's figures (the failure-rate curves come first)."""
    return next(f.data[0] for f in figures if f.data and f.data[0].type == "heatmap")


def test_coherence_figures_of_an_upload_have_no_exact_size(audit_of_upload):
    from dashboard.components.stakeholder_figures import with_figures
    from dashboard.components.stakeholder_figures import default_figures
    result = audit_of_upload
    c = result.comparison
    secrets = {N_ROWS, *SEX.values(), *RACE.values(), *(s for s in c.subgroups["size"] if s >= 20)}
    secrets -= {result.plan.gamma, result.headline()["trials a PASS needs at least"]}
    figures = default_figures(result)
    heat = heat_map(figures)
    assert all(label.endswith(f"({size_band(s)})") for label, s in
               zip(heat.y, c.subgroups.groupby("subgroup")["size"].first().reindex(
                   [y.rsplit(" (", 1)[0] for y in heat.y])))
    # the downloadable JSON report with its figures, and the HTML report drawn with them
    assert "figures" not in with_figures(build_report(result, page="Coherence audit"), result)   # shared: none
    report = build_report(result, page="Coherence audit", audience=CONFIDENTIAL)
    _assert_absent_with_figures(with_figures(report, result), sorted(secrets))
    html_text = report_html(result, page="Coherence audit", report=report, figures=figures)
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", html_text, flags=re.S)
    drawn = _DIV_ID.sub("", _COLOUR.sub("", "\n".join(s for s in scripts
                                                      if "Plotly.newPlot" in s and "plotly.js v" not in s[:2000])))
    assert "Plotly.newPlot" in drawn
    for s in sorted(secrets):
        assert not re.search(rf"(?<![\d.,]){s}(?![\d])", drawn), s


def test_coherence_figures_on_bundled_data_keep_exact_sizes(audit_of_upload):
    from dashboard.components.stakeholder_figures import default_figures
    result = audit_of_upload
    public = dataclasses.replace(result, plan=result.plan.replace(data=DataRef("cps")))
    labels = list(heat_map(default_figures(public)).y)
    assert any(label.endswith(f"(n={RACE['A']:,})") for label in labels)


def test_synthesis_figures_leave_rows_per_stratum_out_unless_declared_public():
    from dashboard.components.stakeholder_figures import BUILDERS
    overview = pd.DataFrame({"group": ["a", "b"], "real_rows": [RACE["A"], RACE["B"]], "share": [0.66, 0.34]})

    class Plan:
        def __init__(self, public):
            self.sizes_public = public

    class SynthesisResult:
        def __init__(self, public):
            self.plan, self.overview, self.sweep, self.means = Plan(public), overview, None, None

    assert BUILDERS["synthesis"](SynthesisResult(False)) == []
    shown = BUILDERS["synthesis"](SynthesisResult(True))
    assert [list(f.data[0].y) for f in shown] == [[RACE["A"], RACE["B"]]]


def test_group_error_figure_of_an_upload_quotes_head_counts_as_bands():
    from dashboard.components.stakeholder_figures import BUILDERS
    groups = pd.DataFrame({"model": "lexifair", "group": ["sex=F", "sex=M"], "size": [SEX["F"], SEX["M"]],
                           "in_sample_error": [0.21, 0.24], "held_out_error": [0.22, 0.25],
                           "held_out_low": [0.2, 0.23], "held_out_high": [0.24, 0.27]})
    trajectory = pd.DataFrame({"level": [1, 1], "round": [1, 2], "eta_running_average": [0.5, 0.4]})

    class Plan:
        def __init__(self, data):
            self.data = data

    class Lexifair:
        def __init__(self):
            self.groups, self.trajectory = groups, trajectory

    class GroupFairnessResult:
        def __init__(self, data):
            self.plan, self.lexifair = Plan(data), Lexifair()

    shared = BUILDERS["fairness"](GroupFairnessResult(DataRef("upload", "f" * 64)))
    _assert_absent_with_figures({"figures": [json.loads(f.to_json()) for f in shared]}, sorted(SEX.values()))
    assert [row[1] for row in shared[0].data[0].customdata] == [size_band(SEX["F"]), size_band(SEX["M"])]
    public = BUILDERS["fairness"](GroupFairnessResult(DataRef("moving-company")))
    assert [float(row[1]) for row in public[0].data[0].customdata] == [SEX["F"], SEX["M"]]
