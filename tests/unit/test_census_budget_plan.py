"""The Budget allocation page's core run."""
import numpy as np
import pytest

from core.census import BudgetPlan
from core.census.budget_plan import figure2_curves
from core.census.targets import target_labels
from core.census.geography_data import Hierarchy
from core.contracts import DataRef


def BudgetConfig(**kw):
    """The allocation alone (the tabs' sub-runs are covered by their own tests)."""
    if "hierarchy" in kw:
        kw["data"] = DataRef(kw.pop("hierarchy"))
    kw.setdefault("algorithms", None)
    kw.setdefault("mechanisms", None)
    kw.setdefault("public", None)
    return BudgetPlan(**kw)


def run_budget_plan(plan, data=None):
    from core.census.budget_plan import run
    return run.uncached(plan, data)


def test_levels_table_equal_laplace():
    r = run_budget_plan(BudgetConfig(fanouts=(4, 3, 5), runs=0))
    lv = r.levels.set_index("level")
    assert np.allclose(lv["noise scale"], 2 / 0.25)
    assert np.allclose(lv["node noise variance"], 8 / 0.25 ** 2)
    assert lv["whole-unit error sd"].iloc[0] == pytest.approx(np.sqrt(128))
    assert r.allocation.total == pytest.approx(1.0)


def test_stylised_allocation_loads_on_the_grid_county_of_the_maps_page():
    from core.census.allocation import Allocation
    from core.geography.grid import GRID_LEVEL_NAMES
    r = run_budget_plan(BudgetConfig(fanouts=(64, 4, 16), runs=0, targets=("leaf",)))
    assert r.allocation.level_names == GRID_LEVEL_NAMES
    assert Allocation.from_json(r.allocation.to_json(), GRID_LEVEL_NAMES).budgets == r.allocation.budgets
    five = run_budget_plan(BudgetConfig(runs=0, targets=("leaf",))).allocation.level_names
    assert five == ("state", "county", "tract", "block group", "block")


def test_simulation_agrees_with_closed_form():
    r = run_budget_plan(BudgetConfig(fanouts=(5, 4, 6), runs=200, targets=("leaf", "unit:1", "scattered:3")))
    t = r.targets
    inside = (t["analytic sd"] >= t["sd 95% low"] * 0.97) & (t["analytic sd"] <= t["sd 95% high"] * 1.03)
    assert inside.all(), t


def test_recommended_split_beats_equal_and_optimise_uses_it():
    cfg = BudgetConfig(fanouts=(5, 4, 6), runs=0, targets=("leaf",), split="optimise")
    r = run_budget_plan(cfg)
    assert np.allclose(r.allocation.budgets, r.recommended_budgets)
    rec = r.recommendation.iloc[0]
    assert rec["sd recommended"] < rec["sd equal split"] and rec["gain over equal (%)"] > 0


def test_target_weights_steer_the_recommended_split():
    base = dict(fanouts=(5, 4, 6), runs=0, targets=("leaf", "unit:0"), split="optimise")
    equal = run_budget_plan(BudgetConfig(**base))
    leaf_first = run_budget_plan(BudgetConfig(**base, target_weights=(10.0, 1.0)))
    top_first = run_budget_plan(BudgetConfig(**base, target_weights=(1.0, 10.0)))
    sd = lambda r, i: r.recommendation.iloc[i]["sd recommended"]  # noqa: E731
    # weighting a target lowers its error at the other's expense
    assert sd(leaf_first, 0) < sd(equal, 0) < sd(top_first, 0)
    assert sd(top_first, 1) < sd(equal, 1) < sd(leaf_first, 1)
    # a zero weight is the same as optimising for the other target alone
    alone = run_budget_plan(BudgetConfig(fanouts=(5, 4, 6), runs=0, targets=("leaf",), split="optimise"))
    zero = run_budget_plan(BudgetConfig(**base, target_weights=(1.0, 0.0)))
    assert np.allclose(zero.recommended_budgets, alone.recommended_budgets)
    for bad in ((1.0,), (-1.0, 1.0), (0.0, 0.0)):
        with pytest.raises(ValueError, match="one non-negative weight per target"):
            run_budget_plan(BudgetConfig(**base, target_weights=bad))


def test_split_changes_table_and_errors():
    a = run_budget_plan(BudgetConfig(fanouts=(5, 4, 6), runs=0, preset="block-heavy"))
    b = run_budget_plan(BudgetConfig(fanouts=(5, 4, 6), runs=0, split="custom", custom_shares=(1, 1, 1, 5)))
    assert a.levels["whole-unit error sd"].iloc[-1] != b.levels["whole-unit error sd"].iloc[-1]
    with pytest.raises(ValueError, match="positive share"):
        run_budget_plan(BudgetConfig(fanouts=(5, 4, 6), split="custom", custom_shares=(0, 1, 1, 1)))
    with pytest.raises(ValueError, match="spends"):
        BudgetConfig(mechanism="gaussian")


def test_figure2_optimum():
    _, opt = figure2_curves()
    assert opt["leaf variance"].iloc[0] == pytest.approx(14.5237, abs=1e-4)
    assert opt["bottom share"].iloc[0] == pytest.approx(0.79144, abs=1e-5)


def test_greedy_targets_are_equal_runs_of_leaves():
    h = Hierarchy.homogeneous([4, 5])
    name, labels = target_labels(h, "greedy:4", 0)
    assert np.bincount(labels).tolist() == [5, 5, 5, 5]


def test_a_district_plan_is_a_target_on_the_georgia_blocks():
    import io

    from core.census.analytic import district_variances
    from core.census.budget_plan import load_geography
    from core.geography.assignments import plan_from_csv, plan_to_frame
    geo = load_geography("georgia", (1,), 0)
    h = geo.hierarchy
    county = h.ancestors_at(1) - h.level_offsets[1]
    labels = county % 14                                   # 14 districts of whole counties
    csv = plan_to_frame(geo.leaf_ids, labels).to_csv(index=False).encode()
    plan = plan_from_csv(io.BytesIO(csv), geo.leaf_ids)     # the District maps page's export format
    from core.contracts import bytes_fingerprint
    cfg = BudgetConfig(data=DataRef("upload", bytes_fingerprint(csv)), runs=0, targets=("leaf", "plan"),
                       split="optimise")
    r = run_budget_plan(cfg, csv)
    row = r.targets.set_index("target").loc["your 14-district plan"]
    assert row["units"] == 14
    v = district_variances(h, plan, r.allocation.budgets)
    assert row["analytic sd"] == pytest.approx(np.sqrt(v.mean()))
    with pytest.raises(ValueError, match="fingerprint differs"):
        run_budget_plan(cfg, csv + b"\n")
    with pytest.raises(ValueError, match="needs an uploaded district plan"):
        BudgetConfig(hierarchy="georgia", targets=("plan",))


def test_optimised_split_for_an_approximate_mechanism_refines_the_closed_form():
    from core.census.analytic import level_node_variance, split_for_coefficients
    from core.census.budget_plan import recommended_split
    from core.privacy.mechanisms import AnalyticGaussianParams
    plan = BudgetConfig(fanouts=(5, 4, 6), runs=0, targets=("leaf", "unit:1"), split="optimise",
                        mechanism="analytic_gaussian", mechanism_params=AnalyticGaussianParams(), delta=1e-6)
    r = run_budget_plan(plan)
    mech = r.allocation.mechanism
    assert sum(r.allocation.budgets) == pytest.approx(1.0)
    a = np.array([1.0, 2.0, 3.0, 4.0])
    start = split_for_coefficients(a, 1.0, "epsilon", min_share=0.005)
    refined = recommended_split(plan, [a], mech)
    obj = lambda x: float(np.dot(a, level_node_variance(x, mech, 2.0, estimate=True)))  # noqa: E731
    assert refined.sum() == pytest.approx(1.0) and obj(refined) <= obj(start)


def test_a_targets_numbers_do_not_depend_on_the_targets_listed_before_it():
    """Each random district target draws from its own stream of the seed: listing another target first
    leaves its districts, closed-form error and simulated error exactly as they were alone."""
    alone = run_budget_plan(BudgetConfig(runs=5, targets=("greedy:4",))).targets.set_index("target")
    after = run_budget_plan(BudgetConfig(runs=5, targets=("scattered:4", "unit:1", "greedy:4"))).targets
    after = after.set_index("target")
    name = "4 hierarchy-following districts"
    for column in ("analytic sd", "simulated sd", "simulated mean |error|"):
        assert after.loc[name, column] == alone.loc[name, column]
    scattered = run_budget_plan(BudgetConfig(runs=5, targets=("scattered:4",))).targets.set_index("target")
    both = run_budget_plan(BudgetConfig(runs=5, targets=("greedy:4", "scattered:4"))).targets.set_index("target")
    assert both.loc["4 scattered districts", "analytic sd"] == scattered.loc["4 scattered districts", "analytic sd"]


@pytest.mark.parametrize("mechanism, unit, params, delta", [
    ("laplace", "epsilon", None, None), ("analytic_gaussian", "epsilon", "analytic", 1e-6)])
def test_the_budget_run_builds_its_mechanism_once_and_never_parses_an_id(monkeypatch, mechanism, unit, params, delta):
    """The plan's key and Params build the mechanism; the run passes that object on, so no id string is parsed
    back into the same mechanism (the allocation still stores the id, its exchanged form)."""
    from core.privacy import mechanisms
    from core.privacy.mechanisms import AnalyticGaussianParams
    kw = {} if params is None else {"mechanism_params": AnalyticGaussianParams()}
    plan = BudgetConfig(fanouts=(5, 4, 6), runs=3, mechanism=mechanism, unit=unit, delta=delta, split="optimise", **kw)
    parsed = []
    real = mechanisms.parse_mechanism_id
    monkeypatch.setattr(mechanisms, "parse_mechanism_id", lambda text: parsed.append(text) or real(text))
    r = run_budget_plan(plan)
    assert parsed == []
    assert r.allocation.noise is plan.level_mechanism(4)
    assert isinstance(r.allocation.mechanism, str) and r.allocation.mechanism == r.allocation.noise.id


def _every_tab():
    from core.census.algorithm_comparison import AlgorithmPlan
    from core.census.mechanism_comparison import MECHANISM_CHOICES, MechanismSweepPlan
    from core.census.public_info import PublicInfoPlan
    return dict(algorithms=AlgorithmPlan(runs=2), mechanisms=MechanismSweepPlan(mechanisms=tuple(MECHANISM_CHOICES)),
                public=PublicInfoPlan())


def _spy_on_parsing(monkeypatch) -> list:
    """Every mechanism id parsed from here on (get_mechanism parses through parse_mechanism_id)."""
    from core.privacy import mechanisms
    parsed = []
    real = mechanisms.parse_mechanism_id
    monkeypatch.setattr(mechanisms, "parse_mechanism_id", lambda text: parsed.append(text) or real(text))
    return parsed


@pytest.mark.parametrize("mechanism, unit, delta, sensitivity", [
    ("laplace", "epsilon", None, 2.0), ("gaussian", "rho", 1e-6, 1.4142)])
def test_every_tab_of_the_budget_run_hands_the_built_mechanism_on(monkeypatch, tmp_path, mechanism, unit, delta,
                                                                  sensitivity):
    """With the Algorithms, Mechanisms and Public information tabs on, ToyDown, TopDown-lite, the mechanism
    sweep and the invariants table all use mechanisms built from a key and Params: no id is parsed."""
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path))    # the tabs' sub-runs compute, not load
    plan = BudgetConfig(fanouts=(5, 4, 6), runs=3, mechanism=mechanism, unit=unit, delta=delta,
                        sensitivity=sensitivity, **_every_tab())
    parsed = _spy_on_parsing(monkeypatch)
    r = run_budget_plan(plan)
    assert parsed == []
    tables = r.tables()
    assert {"algorithms", "mechanism_sweep", "invariants"} <= set(tables)
    assert set(tables["algorithms"]["algorithm"]) == {"ToyDown (negatives allowed)", "ToyDown non-negative integer",
                                                      "TopDown-lite"}
    assert r.allocation.noise is plan.level_mechanism(4)


def test_an_allocation_loaded_from_the_cache_rebuilds_its_mechanism_without_parsing_an_id(monkeypatch, tmp_path):
    """The allocation sub-run and the whole result come back from the disk cache with the mechanism rebuilt
    from its key and Params: the tabs computed on the loaded allocation, its ledger and its deltas parse no
    id, and the numbers equal those of the fresh run."""
    from core.census.budget_plan import run
    from core.privacy.mechanisms import AnalyticGaussianParams
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path))
    base = BudgetConfig(fanouts=(5, 4, 6), runs=3, mechanism="analytic_gaussian", delta=1e-6,
                        mechanism_params=AnalyticGaussianParams(delta=1e-7))
    first = run(base)                                   # computes and stores the allocation sub-run
    plan = BudgetConfig(fanouts=(5, 4, 6), runs=3, mechanism="analytic_gaussian", delta=1e-6,
                        mechanism_params=AnalyticGaussianParams(delta=1e-7), **_every_tab())
    parsed = _spy_on_parsing(monkeypatch)
    fresh = run_budget_plan(plan)                       # the tabs computed on the allocation loaded from disk
    with_tabs = run_budget_plan(plan)                   # every sub-run loaded from disk
    again = run(plan)
    loaded = run(plan)                                  # the whole result loaded from disk
    for r in (fresh, with_tabs, again, loaded):
        assert r.allocation is not first.allocation and r.allocation == first.allocation
        assert r.allocation.noise is plan.level_mechanism(4)
        assert r.allocation.total_delta == pytest.approx(1e-6) and len(r.ledger().to_frame()) == 4
        assert r.allocation.statement()
    assert loaded is not again
    assert parsed == []
    for name, table in fresh.tables().items():
        for r in (with_tabs, loaded):
            assert r.tables()[name].equals(table), name
