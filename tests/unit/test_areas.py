"""Each area describes itself once (``core.areas``), every plan type a page runs has a cost model, and the
interactive/batch decision is the plan's own estimate's (``core.estimates.work_class``).

The walks below find plan types and synthesizers from the code itself (every ``Plan`` subclass in
``core``, every key of ``SYNTHESIZERS``), so a new one without a cost model fails here instead of being
timed as another. The work-class checks use a cost model registered here with a fixed number of seconds
and the speed correction given explicitly: nothing is timed."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass

import pytest

import core
from core import estimates
from core.areas import AREAS, AreaRegistry, AreaSpec, CostModel, PlanParts, parts_for
from core.contracts import DataRef, Plan, Registry, Spec
from core.estimates import BATCH, ESTIMATORS, INTERACTIVE, Work, work_class


def _import_core() -> None:
    for info in pkgutil.walk_packages(core.__path__, "core."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)


def _subclasses(cls: type):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _top_level_plans() -> list[type]:
    """Every plan type of a ``core`` area that names its own data (a ``data`` field): the plans a run takes."""
    _import_core()
    return sorted({c for c in _subclasses(Plan) if c.__module__.startswith("core.")
                   and "data" in {f.name for f in dataclasses.fields(c)}}, key=lambda c: c.__name__)


def _area_package(cls: type):
    return importlib.import_module(".".join(cls.__module__.split(".")[:2]))


@pytest.mark.parametrize("cls", _top_level_plans(), ids=lambda c: c.__name__)
def test_every_plan_an_area_runs_is_described_with_a_cost_model(cls):
    """A plan type its area's ``run`` takes is listed in the area's descriptor with a cost model; one that
    is not listed must be refused by that ``run`` (a release's own plan, which the release path runs)."""
    parts = parts_for(cls)
    if parts is not None:
        assert ESTIMATORS.find(cls) is not None and isinstance(parts.cost, CostModel)
        assert AREAS.area_for(cls).run is not None
        return
    run = _area_package(cls).run
    run = getattr(run, "uncached", run)             # past the result cache, which would hash the plan first
    stand_in = object.__new__(cls)                  # no field is read before the type check refuses it
    with pytest.raises(ValueError):
        run(stand_in)


def test_every_area_package_registers_its_descriptor_and_exports_it():
    _import_core()
    for key, spec in AREAS.items():
        package = importlib.import_module(f"core.{key}")
        assert package.AREA is spec and "AREA" in package.__all__
        assert spec.plans, f"{key} lists no plan"


def test_every_synthesizer_has_its_own_cost_model():
    from core.synthesis.cost import FIT_COSTS, uncosted
    from core.synthesis.registry import SYNTHESIZERS

    assert uncosted() == []
    assert set(FIT_COSTS) == set(SYNTHESIZERS)


def test_a_new_synthesizer_without_a_cost_model_is_flagged_and_never_timed_as_mst():
    from core.synthesis.cost import estimate_synthesis, fit_features, uncosted
    from core.synthesis.registry import SYNTHESIZERS, MSTParams

    fake = Registry("synthesizer", [*SYNTHESIZERS.values()])
    fake.register(Spec("copycat", "Copycat", lambda p: None, MSTParams))   # one registry line, no cost model
    assert uncosted(fake) == ["copycat"]
    with pytest.raises(ValueError, match="'copycat' has no cost model"):
        fit_features("copycat", MSTParams(), 1000, [2, 3])
    plan = type("Plan", (), {"synthesizer": "copycat"})()
    with pytest.raises(ValueError, match="no cost model"):
        estimate_synthesis(plan, None, estimates.load_costs())


def test_plan_types_are_looked_up_by_type_and_a_subclass_by_its_base():
    from core.synthesis import SynthesisPlan

    @dataclass(frozen=True)
    class Variant(SynthesisPlan):
        pass

    assert parts_for(Variant) is parts_for(SynthesisPlan) is not None
    assert AREAS.plan_type("SynthesisPlan") is SynthesisPlan and AREAS.plan_type("Nothing") is None
    assert parts_for(object()) is None


def test_an_area_refuses_a_plan_without_a_cost_model_and_a_plan_listed_twice():
    @dataclass(frozen=True)
    class Lonely(Plan):
        data: DataRef = dataclasses.field(default_factory=lambda: DataRef("cps"))

    areas = AreaRegistry()
    with pytest.raises(ValueError, match="needs a cost model"):
        areas.register(AreaSpec("lonely", "Lonely", lambda *a, **k: None, (PlanParts(Lonely, None),)))
    assert "lonely" not in areas and ESTIMATORS.find(Lonely) is None

    @dataclass(frozen=True)
    class Twice(Plan):
        data: DataRef = dataclasses.field(default_factory=lambda: DataRef("cps"))

    cost = CostModel("twice", lambda plan, data, costs: Work("once", 1, 1.0))
    areas.register(AreaSpec("one", "One", lambda *a, **k: None, (PlanParts(Twice, cost),)))
    with pytest.raises(ValueError, match="already belongs to the area 'one'"):
        areas.register(AreaSpec("two", "Two", lambda *a, **k: None, (PlanParts(Twice, cost),)))
    assert list(areas) == ["one"] and areas.area_for(Twice).key == "one"


# --------------------------------------------------------------------------------------------------
# The work class: the plan's estimate decides, in one place
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Timed(Plan):
    """A plan whose cost model predicts exactly ``seconds``."""

    seconds: float = 1.0


class Untimed(Plan):
    """A plan type no area describes."""


class Broken(Plan):
    """A plan whose cost model fails."""


def _fails(plan, data, costs):
    raise ValueError("the estimate needs data this plan does not have")


@pytest.fixture(autouse=True)
def _no_corrections(monkeypatch):
    if Timed not in ESTIMATORS:
        ESTIMATORS.register(Timed, "a timed plan")(lambda plan, data, costs: Work("wait", 1, plan.seconds))
        ESTIMATORS.register(Broken, "a broken cost model")(_fails)
    estimates.OBSERVED.reset()
    monkeypatch.setattr(estimates, "speed_factor", lambda costs=None: 1.0)
    yield
    estimates.OBSERVED.reset()


def test_a_plan_estimated_within_the_threshold_is_interactive_and_a_longer_one_batch():
    limit = estimates.INTERACTIVE_SECONDS
    assert work_class(Timed(limit)) == INTERACTIVE
    assert work_class(Timed(limit * 1.01)) == BATCH
    assert work_class(Timed(1.0), threshold=0.5) == BATCH


def test_the_work_class_follows_the_machine_speed_and_the_observed_runs(monkeypatch):
    plan = Timed(estimates.INTERACTIVE_SECONDS / 2)
    assert work_class(plan) == INTERACTIVE
    monkeypatch.setattr(estimates, "speed_factor", lambda costs=None: 3.0)   # a loaded machine
    assert work_class(plan) == BATCH
    monkeypatch.setattr(estimates, "speed_factor", lambda costs=None: 1.0)
    estimates.OBSERVED.add(1.0, 3.0)             # runs here took three times their estimate
    assert work_class(plan) == BATCH


def test_a_plan_without_a_cost_model_or_whose_estimate_fails_is_batch():
    assert work_class(Untimed()) == BATCH
    assert work_class(Broken()) == BATCH
    assert work_class(Timed(seconds=float("nan"))) == BATCH


def test_the_page_plans_on_their_defaults_are_interactive_and_the_long_ones_batch():
    """The opening plans of the pages with a first render are short by the tests' fixed coefficients."""
    from core.census import BudgetPlan
    from core.coherence import AuditPlan
    from core.districts import DistrictPlan
    from core.fairness import ElicitationPlan, GroupFairnessPlan
    from core.fairness.frontier import FrontierPlan
    from core.fairness.learning_plan import ConstraintTable, LearningPlan

    for plan in (BudgetPlan(), DistrictPlan(), GroupFairnessPlan(), ElicitationPlan()):
        assert work_class(plan) == INTERACTIVE, type(plan).__name__
    table = ConstraintTable(i=(0,), j=(1,), weight=(1.0,), w_ij=(0.0,), w_ji=(0.0,), agreement=(1.0,))
    assert work_class(LearningPlan(constraints=table, frontier=FrontierPlan(T=3000))) == BATCH
    assert work_class(AuditPlan(trials=200)) == BATCH


@pytest.mark.slow
def test_the_estimates_and_the_consumers_of_the_descriptors_import_no_area():
    """Run-time estimates, the descriptors' registry and the tables that used to be keyed by plan-class names
    (script export, report words, overlays, pin/compare) reach an area only through its descriptor: no
    import of an area package, imports inside functions included."""
    from tests.unit.test_import_graph import import_graph

    graph = import_graph()
    areas = ("core.census", "core.districts", "core.synthesis", "core.coherence", "core.fairness")
    shared = ("core.estimates", "core.areas", "core.script_export", "core.report_words", "core.figures.overlays",
              "core.figures.compare", "core.compare")
    up = sorted((m, d) for m in shared for d in graph[m] if d.startswith(areas))
    assert up == [], f"shared modules import area packages: {up}"


def test_a_first_plan_estimated_long_is_batch_like_any_other():
    """District maps' ReCom chain on the Georgia geography: 1 chain x 40 steps and 16 noisy runs on 20,000
    blocks, past the threshold on the default coefficients, so even as a page's first plan it is queued."""
    from core.districts import GENERATORS, DistrictPlan

    plan = DistrictPlan(data=DataRef("georgia"), generator="recom", params=GENERATORS["recom"].params())
    c = estimates.load_costs()["districts"]
    seconds = c["fixed"] + 20_000 / 4096 * (c["per_run"] * plan.noise.runs + c["per_step"] * plan.params.steps)
    assert estimates.estimate(plan).seconds == pytest.approx(seconds)
    assert work_class(plan) == (INTERACTIVE if seconds <= estimates.INTERACTIVE_SECONDS else BATCH)


def test_the_threshold_can_be_set_for_the_installation(monkeypatch):
    from core.estimates import INTERACTIVE_SECONDS, interactive_seconds
    monkeypatch.delenv("DASHBOARD_INTERACTIVE_SECONDS", raising=False)
    assert interactive_seconds() == INTERACTIVE_SECONDS
    monkeypatch.setenv("DASHBOARD_INTERACTIVE_SECONDS", "0")
    assert interactive_seconds() == 0.0
    for bad in ("ten", "-1", "nan"):
        monkeypatch.setenv("DASHBOARD_INTERACTIVE_SECONDS", bad)
        with pytest.raises(ValueError, match="DASHBOARD_INTERACTIVE_SECONDS"):
            interactive_seconds()
