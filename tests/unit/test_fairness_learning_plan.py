"""The learning plan: plain-Python runs, validation, export/load/rerun and the command line."""
import json

import numpy as np
import pandas as pd
import pytest

from core.__main__ import main as cli
from core.contracts import DataRef, plan_from_dict
from core.fairness import (CompanionPlan, ConstraintTable, FrontierPlan, LearningPlan, LearningResult, run,
                           run_learning)
from core.report import build_report, load_plan, parse_report, report_json, tables_match

SWEEP = FrontierPlan(gammas=(0.0, 0.3, 1.0), T=100, oracle="ols")


def random_pairs(k, seed):
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, 7214, k), rng.integers(0, 7214, k)
    keep = i != j
    return pd.DataFrame({"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                         "n_judges": 3, "agreement": 2 / 3})


@pytest.fixture(scope="module")
def plan():
    return LearningPlan(constraints=ConstraintTable.from_frame(random_pairs(150, 5), "simulated panel"),
                        frontier=SWEEP, companion=CompanionPlan(at=0.3))


@pytest.fixture(scope="module")
def result(plan):
    return run(plan)


def test_plain_python_run_gives_the_page_numbers(plan, result):
    assert isinstance(result, LearningResult) and result.plan == plan
    pts = result.frontier.points
    assert list(pts["target"]) == [0.0, 0.3, 1.0]
    here = result.point()
    assert here["target"] == 0.3
    head = result.headline()
    assert head["people"] == 5829                                  # the paper's population by default
    assert head["error at the operating point"] == pytest.approx(here["error"])
    assert head["best constant error"] == pytest.approx(result.frontier.baseline["best_constant_error"])
    assert 0.30 <= head["least-constrained error"] <= 0.34
    tables = result.tables()
    assert {"frontier_points", "frontier_pairs", "group_rates", "fpr_gap", "trajectories",
            "companion_rates", "companion_calibration", "companion_roc"} == set(tables)
    # pair rows refer to the COMPAS file, and only pairs inside the population are used
    assert head["pairs used"] + result.frontier.baseline["dropped_pairs"] == len(plan.constraints.i)


def test_export_load_rerun_is_bit_for_bit(plan, result):
    report = parse_report(report_json(build_report(result, page="fairness_learning")))
    loaded = load_plan(report)
    assert loaded == plan and loaded.digest() == plan.digest()
    rerun = run_learning.uncached(loaded)
    assert tables_match(report, rerun.tables()) == []


def test_cli_reproduces_an_exported_report(result, tmp_path):
    path = tmp_path / "report.json"
    path.write_text(report_json(build_report(result, page="fairness_learning")))
    assert cli(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "frontier_points.csv").is_file()


def test_changing_the_companion_reuses_the_sweep(plan, result, monkeypatch):
    """The sweep is a cached sub-run keyed on its own plan and the constraints: no point is refitted."""
    import core.fairness.frontier as frontier
    from core.fairness.learning_plan import frontier_ready

    def refit(*args, **kwargs):
        raise AssertionError("the sweep was computed again")

    assert frontier_ready(plan)
    monkeypatch.setattr(frontier, "map_trials", refit)
    other = run(plan.replace(companion=CompanionPlan(at=0.3, cutoff=0.6)))
    pd.testing.assert_frame_equal(other.frontier.points, result.frontier.points)
    assert other.companion.rates is not None and other.plan.companion.cutoff == 0.6


def test_plan_round_trip_keeps_nested_plans_and_nan_agreement():
    cons = random_pairs(20, 1).assign(agreement=np.nan)
    plan = LearningPlan(constraints=ConstraintTable.from_frame(cons), frontier=SWEEP,
                        companion=CompanionPlan(mode="soft", penalty_fpr=0.0, penalty_tpr=3.0))
    back = plan_from_dict(json.loads(json.dumps(plan.to_dict())))
    assert back == LearningPlan(constraints=back.constraints, frontier=SWEEP, companion=plan.companion)
    assert back.digest() == plan.digest()
    assert np.isnan(back.constraints.agreement).all()
    assert LearningPlan(constraints=plan.constraints, frontier=SWEEP, companion=None).companion is None


@pytest.mark.parametrize("build, message", [
    (lambda c: LearningPlan(data=DataRef("adult"), constraints=c), "COMPAS"),
    (lambda c: LearningPlan(constraints=ConstraintTable()), "No pair carries a constraint"),
    (lambda c: LearningPlan(constraints=c, frontier=SWEEP, companion=CompanionPlan(at=0.5)), "not one of"),
    (lambda c: ConstraintTable(i=(0,), j=(0,), weight=(1.0,), w_ij=(1.0,), w_ji=(1.0,), agreement=(1.0,)),
     "different individuals"),
    (lambda c: ConstraintTable(i=(0,), j=(7214,), weight=(1.0,), w_ij=(1.0,), w_ji=(1.0,), agreement=(1.0,)),
     "whole row numbers"),
    (lambda c: ConstraintTable(i=(0,), j=(1,), weight=(float("nan"),), w_ij=(1.0,), w_ji=(1.0,),
                               agreement=(1.0,)), "finite"),
    (lambda c: ConstraintTable(i=(0,), j=(1, 2), weight=(1.0,), w_ij=(1.0,), w_ji=(1.0,), agreement=(1.0,)),
     "one value per pair"),
    (lambda c: ConstraintTable.from_frame(pd.DataFrame({"i": [0], "j": [1]})), "lacks column"),
    (lambda c: CompanionPlan(penalty_tpr=float("inf")), "finite"),
    (lambda c: CompanionPlan(mode="maybe"), "mode"),
    (lambda c: CompanionPlan(share_low=2.0), "share"),
    (lambda c: FrontierPlan(seed=-1), "seed"),
    (lambda c: FrontierPlan(oracle="svm"), "oracle"),
    (lambda c: FrontierPlan(etas=(0.0, 1e300), sweep="eta"), "eta"),
])
def test_bad_inputs_are_value_errors(build, message):
    cons = ConstraintTable.from_frame(random_pairs(10, 2))
    with pytest.raises(ValueError, match=message):
        build(cons)


def test_run_refuses_data_and_other_plans(plan):
    with pytest.raises(ValueError, match="pass no data"):
        run_learning.uncached(plan, b"abc")
    with pytest.raises(ValueError, match="LearningPlan"):
        run_learning.uncached(SWEEP)


def test_full_file_population_is_an_option():
    cons = ConstraintTable.from_frame(random_pairs(60, 9))
    res = run(LearningPlan(constraints=cons, frontier=FrontierPlan(population="full", gammas=(0.0, 1.0), T=30,
                                                                   oracle="ols"), companion=None))
    assert res.headline()["people"] == 7214 and res.frontier.baseline["dropped_pairs"] == 0
    assert res.headline()["pairs used"] == len(cons.i) and res.companion is None
    assert "companion_rates" not in res.tables()


# ---------------------------------------------------------------------- pairs of synthetic people

def synthetic_pairs(k, seed, n=2000):
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, k), rng.integers(0, n, k)
    keep = i != j
    return pd.DataFrame({"i": i[keep], "j": j[keep], "weight": 1.0, "n_judges": 4, "agreement": 0.75})


@pytest.fixture(scope="module")
def copy():
    from core.fairness.private_pairs import PrivatePairsPlan, simulated_synthetic_people
    return simulated_synthetic_people(PrivatePairsPlan(population="paper", epsilon=1.0), np.random.default_rng(2))


@pytest.fixture(scope="module")
def copy_plan(copy):
    return copy.plan


@pytest.fixture(scope="module")
def synthetic_plan(copy_plan):
    cons = ConstraintTable.from_frame(synthetic_pairs(200, 4), "synthetic panel", people=copy_plan)
    return LearningPlan(constraints=cons, frontier=SWEEP, companion=CompanionPlan(at=0.3))


@pytest.fixture(scope="module")
def synthetic_result(synthetic_plan, copy):
    return run(synthetic_plan, copy)        # the copy is the run's data: nothing is looked up elsewhere


def test_synthetic_constraint_people_run_and_tighten_as_gamma_falls(synthetic_plan, synthetic_result):
    res = synthetic_result
    pts = res.frontier.points.sort_values("target")
    unfair = pts["unfairness"].to_numpy()
    # Realised unfairness on the synthetic pairs falls (weakly at each step, strictly overall) as gamma falls.
    assert np.all(np.diff(unfair) >= -0.02) and unfair[0] < unfair[-1] - 0.2
    assert (pts["unfairness"] <= pts["target"] + 0.05).all()
    # Error and group rates are the real people's; the synthetic people add no error.
    head = res.headline()
    assert head["people"] == 5829 and head["synthetic constraint people"] == 2000
    assert res.frontier.p_hat.shape == (3, 5829)
    assert res.frontier.groups.groupby("target")["n"].sum().eq(2 * 5829).all()   # race and sex, real only
    # Every pair is used (none is dropped for being outside a population) and keeps its synthetic numbers.
    assert head["pairs used"] == len(synthetic_plan.constraints.i) and res.frontier.baseline["dropped_pairs"] == 0
    fitted = res.frontier.pairs
    named = set(zip(synthetic_plan.constraints.i, synthetic_plan.constraints.j))
    assert set(zip(fitted["i"], fitted["j"])) <= named and fitted["i"].max() < 2000
    # The export says the constraint people are synthetic.
    people = res.tables()["constraint_people"].iloc[0]
    assert "synthetic" in people["constraint_people"] and "sampling assumption does not hold" in people["note"]
    assert people["epsilon"] == 1.0 and people["synthetic_people"] == 2000
    # The export names the copy by its id (a stored release), not by a seed that would regenerate it.
    assert people["copy_id"] == synthetic_plan.constraints.people.copy_id and "seed" not in people
    assert "sampling assumption" in res.frontier.baseline["people_note"]


def test_a_synthetic_plan_never_shares_a_digest_or_cache_with_real_rows(synthetic_plan, synthetic_result, copy):
    from core.fairness.learning_plan import frontier_ready
    real = synthetic_plan.replace(constraints=synthetic_plan.constraints.replace(people=None))
    assert real.digest() != synthetic_plan.digest()
    assert frontier_ready(synthetic_plan, copy) and not frontier_ready(real)
    other_copy = synthetic_plan.constraints.people.replace(copy_id="0123456789abcdef")
    assert synthetic_plan.replace(constraints=synthetic_plan.constraints.replace(people=other_copy)).digest() \
        != synthetic_plan.digest()
    assert "constraint_people" not in run(real.replace(companion=None)).tables()


def test_a_synthetic_report_reloads_and_reruns_bit_for_bit(synthetic_plan, synthetic_result, copy):
    report = parse_report(report_json(build_report(synthetic_result, page="fairness_learning")))
    loaded = load_plan(report)
    assert loaded == synthetic_plan and loaded.constraints.people == synthetic_plan.constraints.people
    assert tables_match(report, run_learning.uncached(loaded, copy).tables()) == []


def test_a_synthetic_run_takes_its_copy_as_data_and_never_looks_it_up(synthetic_plan, copy):
    """The run depends on its arguments only: without the copy it says what to pass (no database is read,
    even in a process that made the copy), and another copy is refused."""
    from core.fairness.private_pairs import remember_copy, simulated_synthetic_people
    remember_copy(copy)
    with pytest.raises(ValueError, match="pass that copy as its data"):
        run_learning.uncached(synthetic_plan)
    other = simulated_synthetic_people(copy.plan.replace(copy_id=""), np.random.default_rng(3))
    with pytest.raises(ValueError, match="plan names copy"):
        run_learning.uncached(synthetic_plan, other)


def test_synthetic_positions_beyond_the_copy_are_refused(copy_plan):
    with pytest.raises(ValueError, match="positions of the synthetic people from 0 to 1999"):
        ConstraintTable.from_frame(pd.DataFrame({"i": [0], "j": [2000], "weight": [1.0]}), people=copy_plan)
    with pytest.raises(ValueError, match="PrivatePairsPlan"):
        ConstraintTable.from_frame(synthetic_pairs(5, 1), people="dp_synthetic")
    with pytest.raises(ValueError, match="copy id"):
        ConstraintTable.from_frame(synthetic_pairs(5, 1), people=copy_plan.replace(copy_id=""))
