"""An outsider receives the shared report of a curator's upload and tries to read a private count back.

For each area that can run on a curator's own data, the upload has sizes we know (a total, subgroup sizes,
a train/test split, strata). The attacker reads every number of every artefact a page offers by default
(the JSON report with its figures, the CSV zip, the stakeholder HTML, the script and the notebook) and
tries: each number as a size; each number times a public or known multiplier (k, the total, another size);
ratios of two numbers; each number as a fraction p/q whose denominator is a size (statistics such as KS
distances, selection rates and accuracies are such fractions), and the least common multiple of such
denominators. Any size recovered fails the test. Bundled data is public and out of scope here; the
confidential report holds the numbers and says so.
"""
from __future__ import annotations

import io
import json
import math
import re
import zipfile
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef, bytes_fingerprint
from core.report import build_report, report_json, tables_zip
from core.script_export import notebook_json, script_text
from core.sharing import CONFIDENTIAL, CONFIDENTIAL_MARK
from core.stakeholder_report import report_html

# -------------------------------------------------------------------------------------------- the attacker

_HEX = re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")        # fingerprints and digests, not counts
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")
_VERSION = re.compile(r"\b\d+\.\d+\.\d+(?:[.\w+-]*)")          # package versions
_COLOUR = re.compile(r"rgba?\([^)]*\)|#[0-9a-fA-F]{3,8}\b")
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STYLE = re.compile(r"<style>.*?</style>", re.S)
_PLOTLY_JS = re.compile(r"<script[^>]*>\s*/\*\*?\s*\n?\s*\* plotly\.js.*?</script>", re.S)


def numbers_in(text: str) -> list[tuple[float, float]]:
    """Every number written in ``text`` with how far its digits let it move (half a unit in its last place)."""
    text = _PLOTLY_JS.sub("", _STYLE.sub("", text))
    for pattern in (_TIME, _HEX, _VERSION, _COLOUR):
        text = pattern.sub(" ", text)
    out = []
    for token in _NUMBER.findall(text):
        plain = token.replace(",", "")
        mantissa = plain.lower().split("e")[0]
        exponent = int(plain.lower().split("e")[1]) if "e" in plain.lower() else 0
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        out.append((float(plain), 0.5 * 10.0 ** (exponent - decimals)))
    return out


def attack(text: str, sizes: set[int], multipliers: set[float]) -> list[str]:
    """Every way the attacker finds a private size in ``text`` (empty when the artefact gives none back)."""
    hits: list[str] = []
    numbers = sorted(set(numbers_in(text)))
    factors = set(multipliers) | {float(s) for s in sizes} | {1.0}
    largest = max(sizes)
    exact = []
    for x, slack in numbers:
        if x == 0:
            continue
        if slack <= 0.5 and round(x) in sizes and abs(x - round(x)) <= slack:
            hits.append(f"{x!r} is a size")
        for m in factors:
            for y, spread in ((x * m, slack * m), (x / m, slack / m)):
                if spread < 0.5 and y != x and round(y) in sizes and abs(y - round(y)) <= max(spread, 1e-9 * abs(y)):
                    hits.append(f"{x!r} with {m!r} gives {round(y)}")
        if slack <= 1e-12 * max(abs(x), 1.0) and 0 < abs(x) < largest * largest:   # full precision
            exact.append(x)
    # ratios of two numbers written in full precision
    values = np.array(sorted(set(exact)))
    if len(values) > 1:
        ratio = np.abs(values[:, None] / values[None, :])
        for s in sizes:
            close = np.isclose(ratio, s, rtol=1e-12, atol=0)
            if close.any():
                i, j = np.argwhere(close)[0]
                hits.append(f"{values[i]!r} / {values[j]!r} = {s}")
    # fractions whose denominators are sizes (or reach one through their least common multiple)
    denominators = []
    for x in exact:
        frac = Fraction(abs(x) % 1).limit_denominator(largest * largest)
        if frac.denominator > 1 and abs(float(frac) - abs(x) % 1) <= 2e-16 * max(abs(x), 1.0):
            q = frac.denominator
            denominators.append(q)
            for s in sizes:
                if q == s or (q % s == 0 and q // s in sizes):
                    hits.append(f"{x!r} = {frac} has denominator {q} from size {s}")
    for s in sizes:
        dividing = [q for q in denominators if q > 20 and s % q == 0]
        if dividing and math.lcm(*dividing) == s:
            hits.append(f"denominators {sorted(set(dividing))} have least common multiple {s}")
    return hits


def shared_artefacts(result, page: str) -> dict[str, str]:
    """What a page offers by default for download, as text: the JSON report (with its figures), the CSV zip,
    the stakeholder HTML (with the page's figures), the script and the notebook."""
    from dashboard.components.stakeholder_figures import with_figures
    from dashboard.components.stakeholder_figures import default_figures
    report = build_report(result, page=page)
    out = {"report.json": report_json(with_figures(report, result))}
    with zipfile.ZipFile(io.BytesIO(tables_zip(result.tables(), report))) as archive:
        out.update({f"zip/{name}": archive.read(name).decode() for name in archive.namelist()})
    out["report.html"] = report_html(result, page=page, report=report, figures=default_figures(result))
    out["script.py"] = script_text(report)
    out["notebook.ipynb"] = notebook_json(report)
    return out


def assert_nothing_recovered(result, page: str, sizes: set[int], multipliers: set[float] = frozenset()) -> None:
    found = {name: attack(text, sizes, multipliers) for name, text in shared_artefacts(result, page).items()}
    found = {name: hits[:5] for name, hits in found.items() if hits}
    assert not found, f"the shared report gives private sizes back: {found}"


def test_the_attacker_finds_what_a_careless_report_gives_away():
    """The attacker itself: each trick on a number that carries a size (so a pass below means something)."""
    sizes = {1151, 1445, 2840}
    assert attack("rows audited 2,840", sizes, set())
    assert attack(f"selection rate {37 / 1445!r}", sizes, set())                 # count / size
    assert attack(f"rate {50 / 1151!r}", sizes, {50.0})                           # rate x k
    assert attack(f"share {1445 / 2840!r}", sizes, set())                         # size / total
    assert attack(f"KS {abs(3 / 1151 - 7 / 1445)!r}", sizes, set())               # difference of two fractions
    assert attack(f"tvd {113 / 568!r} accuracy {401 / 710!r}", {2840}, set())    # denominators' lcm: 568 x 5
    assert attack("noisy 1147.8 true 1151", sizes, set())
    assert not attack("epsilon 0.5 delta 1e-06 alpha 0.3 trials 3 k 50 seed 20240601 band 1000 <= n < 2000",
                      sizes, {50.0})


# ------------------------------------------------------------------------------------------ the uploads

SEX = {"F": 1395, "M": 1445}                    # 2,840 rows in all
RACE = {"A": 1151, "B": 1676, "C": 13}
N_ROWS = 2840


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    sex = np.array(["F"] * SEX["F"] + ["M"] * SEX["M"])
    race = np.array(["A"] * RACE["A"] + ["B"] * RACE["B"] + ["C"] * RACE["C"])
    rng.shuffle(race)
    age = rng.integers(0, 18, N_ROWS)
    y = np.where(rng.random(N_ROWS) < 1 / (1 + np.exp(-(0.1 * age - 1))), "yes", "no")
    experience = rng.integers(0, 30, N_ROWS)
    income = 40_000 + 1_000 * experience + (sex == "M") * 3_000 + rng.integers(0, 997, N_ROWS) * 7 + 1
    return pd.DataFrame({"age": age, "sex": sex, "race": race, "y": y, "experience": experience, "income": income})


@pytest.fixture(scope="module")
def people():
    frame = _people()
    raw = frame.to_csv(index=False).encode()
    return raw, frame, DataRef("upload", bytes_fingerprint(raw))


def _sizes(frame: pd.DataFrame, *columns: str, least: int = 13) -> set[int]:
    """The total and every subgroup size (each column, and every pair of them) of at least ``least`` rows."""
    out = {len(frame)}
    for c in columns:
        out |= set(frame[c].value_counts())
    for i, a in enumerate(columns):
        for b in columns[i + 1:]:
            out |= set(frame.groupby([a, b]).size())
    return {int(s) for s in out if s >= least}


def test_coherence_audit(people):
    from core.coherence.calculator import TheoryPlan
    from core.coherence.plan import AdversaryChoice, AuditPlan, ReleaseChoice, RowSample
    from core.coherence.run import run
    raw, frame, ref = people
    plan = AuditPlan(data=ref, rows=RowSample(None, 0), target="y", positive="yes", lens=("age", "sex"),
                     subgroup_columns=("sex", "race"), releases=(ReleaseChoice("clear_half"),),
                     adversaries=(AdversaryChoice("logistic"),), alpha=0.3, gamma=50, trials=3, theory=TheoryPlan())
    result = run.uncached(plan, raw)
    sizes = _sizes(frame, "sex", "race") | {N_ROWS // 2}
    assert_nothing_recovered(result, "Coherence audit", sizes)
    # what the calculator computes from its own settings is shared; nothing computed on the rows is
    shared = build_report(result, page="Coherence audit")
    assert set(shared["tables"]) == {"theory", "theory_gamma"}
    assert set(shared["headline"]) == {"trials a PASS needs at least", "theory gamma (conservative)"}


def test_group_fairness_ranking(people):
    from core.fairness.causal_ranking import MediatorRole
    from core.fairness.group_fairness_plan import GroupFairnessPlan, RankingPlan, run_group_fairness
    raw, frame, ref = people
    rp = RankingPlan(attributes=("sex",), mediators=(MediatorRole("experience", ()),), outcome="income",
                     ascending=False, ks=(50,))
    plan = GroupFairnessPlan(data=ref, lexifair=None, companion=None, ranking=rp)
    result = run_group_fairness.uncached(plan, raw)
    assert_nothing_recovered(result, "Group fairness", _sizes(frame, "sex"), {50.0})


def test_stratified_synthesis(people):
    from core.synthesis import MarginalsPlan, ReleasePlan, SweepPlan, SynthesisPlan, run
    raw, frame, ref = people
    plan = SynthesisPlan(data=ref, columns=("sex", "race", "y"), strata=("sex",), target="y",
                         domain_declared_public=True, release=ReleasePlan(epsilon=2.0),
                         sweep=SweepPlan(epsilons=(1.0,), seeds=(0,), n_trees=5), marginals=MarginalsPlan())
    result = run.uncached(plan, raw)
    test_rows = round(N_ROWS * plan.sweep.test_fraction)
    sizes = _sizes(frame, "sex", "race", "y") | {test_rows, N_ROWS - test_rows}
    sizes |= {int(n) for n in result.sweep.group_metrics["real_rows"] if n >= 13}
    assert_nothing_recovered(result, "Stratified synthesis", sizes)


def test_budget_allocation_with_an_uploaded_district_plan():
    from core.census import BudgetPlan
    from core.census.budget_plan import load_geography, run
    from core.geography.assignments import plan_to_frame
    geo = load_geography("georgia", (1,), 0)
    county = geo.hierarchy.ancestors_at(1) - geo.hierarchy.level_offsets[1]
    labels = county % 14
    csv = plan_to_frame(geo.leaf_ids, labels).to_csv(index=False).encode()
    plan = BudgetPlan(data=DataRef("upload", bytes_fingerprint(csv)), runs=0, targets=("leaf", "plan"),
                      split="optimise")
    result = run.uncached(plan, csv)
    blocks = {int(n) for n in np.bincount(labels) if n >= 13}      # the uploaded plan's blocks per district
    assert_nothing_recovered(result, "Census budget allocation", blocks)


def test_district_maps_on_uploaded_blocks(tmp_path):
    from core.districts import DistrictPlan, NoiseConfig, ReComParams, run
    from tests.unit.test_districts_uploads import _counts, _csv, _shapes, _zip
    counts = _counts().assign(total=lambda d: d["total"] * 37 + 1151)
    zipped, table = _zip(_shapes(), tmp_path), _csv(counts)
    plan = DistrictPlan(data=DataRef("upload", bytes_fingerprint(zipped, table)), generator="recom",
                        params=ReComParams("block group", 40.0, 4, 2), k=2, noise=NoiseConfig((0.2,) * 5, runs=3))
    result = run.uncached(plan, (zipped, table))
    sizes = {int(v) for v in counts["total"]} | {int(counts["total"].sum())}
    sizes |= {int(v) for v in result.plan_districts(1)["population"]}           # the districts' head counts
    assert_nothing_recovered(result, "District maps", sizes)


def test_the_confidential_report_is_marked_in_every_file(people):
    from core.fairness.causal_ranking import MediatorRole
    from core.fairness.group_fairness_plan import GroupFairnessPlan, RankingPlan, run_group_fairness
    raw, _, ref = people
    rp = RankingPlan(attributes=("sex",), mediators=(MediatorRole("experience", ()),), outcome="income",
                     ascending=False, ks=(50,))
    result = run_group_fairness.uncached(GroupFairnessPlan(data=ref, lexifair=None, companion=None, ranking=rp), raw)
    report = build_report(result, page="Group fairness", audience=CONFIDENTIAL)
    assert report["confidential"] == CONFIDENTIAL_MARK
    assert report["tables"].keys() == result.tables().keys()
    with zipfile.ZipFile(io.BytesIO(tables_zip(result.tables(), report))) as archive:
        assert CONFIDENTIAL_MARK in archive.read("README.txt").decode()
    page = report_html(result, page="Group fairness", report=report)
    assert page.count(CONFIDENTIAL_MARK) >= 3 and "<title>Confidential:" in page
    assert json.loads(report_json(report))["sharing"]["audience"] == CONFIDENTIAL
    # ... and the default is the shared report, which holds none of those tables
    shared = build_report(result, page="Group fairness")
    assert "confidential" not in shared and not shared["tables"] and not shared["headline"]
    assert set(shared["sharing"]["withheld_tables"]) == set(result.tables())
