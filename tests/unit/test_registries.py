"""Every plugin of every registry passes through every consumer it has.

A plugin is one Spec line in its registry. Here each key is built with its default Params and taken
through what the product does with it: the widgets a page draws from its Params, the plan that holds
it (saved to JSON and read back with the same digest), a small run of that plan, and its report. A
plugin registered by half (a Params class a plan cannot rebuild, a synthesizer without its planned
noise, a mechanism whose calibration is missing) fails here rather than on a user's screen.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import math
import pkgutil

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import core
from core.contracts import Registry, Spec, _from_fields, plan_from_dict, plan_to_dict
from core.report import build_report, load_plan

from tests.unit.synthesis_toys import DOMAIN, correlated


def _registries() -> dict[str, Registry]:
    """Every Registry instance at module level anywhere in ``core``, by ``module.NAME``."""
    found = {}
    for info in pkgutil.walk_packages(core.__path__, "core."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Registry):
                found.setdefault(id(value), (f"{info.name}.{name}", value))
    return {name: reg for name, reg in found.values()}


def _walked() -> dict[str, Registry]:
    from core.coherence.adversaries import ADVERSARIES
    from core.coherence.releases import RELEASES
    from core.districts.generators import GENERATORS
    from core.districts.noise import ALGORITHMS
    from core.fairness.learner import ORACLES
    from core.fairness.lexifair import LEARNERS
    from core.privacy.mechanisms import MECHANISMS
    from core.synthesis.plan import NOISES
    from core.synthesis.registry import SYNTHESIZERS
    return {"adversary": ADVERSARIES, "release": RELEASES, "generator": GENERATORS, "algorithm": ALGORITHMS,
            "learner": LEARNERS, "mechanism": MECHANISMS, "mean noise": NOISES, "synthesizer": SYNTHESIZERS,
            "oracle": ORACLES}


WALKED = _walked()
CASES = [(kind, key) for kind, reg in WALKED.items() for key in reg]
# The smallest settings that still exercise a plugin end to end (GEM trains a network, ReCom runs a chain).
QUICK = {"rounds": 2, "steps": 2, "batch": 16, "thin": 1}


def quick(spec: Spec, **extra):
    """``spec``'s default Params with the costly fields it has set to :data:`QUICK` (and ``extra``)."""
    names = {f.name for f in dataclasses.fields(spec.params)}
    return spec.params(**{k: v for k, v in {**QUICK, **extra}.items() if k in names})


def test_every_registry_in_core_is_walked_here():
    walked = {id(r) for r in WALKED.values()}
    missing = sorted(name for name, reg in _registries().items() if id(reg) not in walked)
    assert missing == [], f"registries no consumer test walks: {missing}"


def test_every_registry_is_exported_by_a_package():
    packages = [importlib.import_module(info.name) for info in pkgutil.iter_modules(core.__path__, "core.")
                if info.ispkg]
    exported = {id(getattr(p, n)) for p in packages for n in getattr(p, "__all__", ()) if hasattr(p, n)}
    missing = sorted(name for name, reg in _registries().items() if id(reg) not in exported)
    assert missing == [], f"registries no package exports: {missing}"


@pytest.mark.parametrize("kind, key", CASES)
def test_spec_builds_and_its_params_round_trip(kind, key):
    spec: Spec = WALKED[kind][key]
    params = spec.params()
    assert spec.build(params) is not None
    body = json.loads(json.dumps(plan_to_dict(params)))
    assert _from_fields(spec.params, body) == params
    assert spec.label and spec.help, f"{kind} {key} needs a label and a help text for its widget"


# ------------------------------------------------------------------------------- page widgets
def _draw_every_spec():
    import streamlit as st

    from core.contracts import param_info
    from dashboard.components.params_form import params_widgets
    from tests.unit.test_registries import WALKED
    drawn = {}
    for kind, reg in WALKED.items():
        for key, spec in reg.items():
            value = params_widgets(spec, f"w_{kind.replace(' ', '_')}", columns=("a", "b", "c"), lens=("a", "b"))
            pickers = any(meta.get("kind") in ("columns", "column", "lens") for _, meta in param_info(spec.params))
            drawn[f"{kind}:{key}"] = (type(value) is spec.params, value == spec.params(), pickers)
    st.session_state["drawn"] = drawn


def test_every_spec_draws_its_widgets_with_its_defaults():
    at = AppTest.from_function(_draw_every_spec, default_timeout=60).run()
    assert not at.exception, at.exception
    drawn = at.session_state["drawn"]
    assert set(drawn) == {f"{kind}:{key}" for kind, key in CASES}
    assert all(built for built, _, _ in drawn.values())
    # untouched widgets give the Params defaults; column pickers offer the page's columns instead
    wrong = sorted(k for k, (_, same, pickers) in drawn.items() if not same and not pickers)
    assert wrong == []


# ------------------------------------------------------------------------------- plans, runs, reports
def _round_trip(plan):
    back = plan_from_dict(json.loads(json.dumps(plan.to_dict())))
    assert back == plan and back.digest() == plan.digest()
    return back


def _report_round_trip(result, page: str):
    report = json.loads(json.dumps(build_report(result, page=page), default=str))
    assert load_plan(report).digest() == result.plan.digest()


def _synthesis_frame(n=800, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(["A", "B"], n),
                         "income": rng.choice(["lo", "hi"], n), "edu": rng.choice(["x", "y", "z"], n)}
                        ).astype("category")


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WALKED["synthesizer"]))
def test_synthesizer_fits_plans_its_noise_rides_in_a_plan_and_is_an_audit_release(key):
    from core.coherence.releases import RELEASES
    from core.contracts import DataRef
    from core.synthesis import SweepPlan, SynthesisPlan
    from core.synthesis.workflow import run
    spec = WALKED["synthesizer"][key]
    synth = spec.build(quick(spec))
    one_way, two_way = synth.planned_sds(3, 0.5)
    assert math.isfinite(one_way) and one_way > 0
    assert math.isnan(two_way) or two_way > 0          # NaN: it measures no two-way marginal
    synth.fit(correlated(600), DOMAIN, 2.0, np.random.default_rng(0))
    rows = synth.sample(50, np.random.default_rng(1))
    assert list(rows.columns) == list(DOMAIN) and len(rows) == 50
    plan = SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income", "edu"), synthesizer=key,
                         synth_params=quick(spec), sweep=SweepPlan(epsilons=(1.0,), seeds=(0,), n_trees=2))
    result = run.uncached(_round_trip(plan), _synthesis_frame())
    assert result.headline()
    _report_round_trip(result, "Stratified synthesis")
    audit_keys = [k for k, s in RELEASES.items() if spec.label in s.label]
    assert len(audit_keys) >= 2, f"{key}: no pooled and stratified audit release"


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WALKED["mechanism"]))
def test_mechanism_rides_in_a_budget_plan_runs_and_reports(key):
    from core.census import BudgetPlan
    from core.census.budget_plan import run
    spec = WALKED["mechanism"][key]
    unit = spec.build(spec.params()).unit
    plan = BudgetPlan(fanouts=(3, 4), unit=unit, mechanism=key, mechanism_params=spec.params(), runs=2,
                      delta=1e-6, algorithms=None, mechanisms=None, public=None)
    result = run.uncached(_round_trip(plan))
    assert np.isfinite(result.levels["noise scale"]).all()
    _report_round_trip(result, "Budget allocation")


def _district_plan(**changes):
    from core.districts import DistrictPlan
    from core.districts.noise import NoiseConfig
    base = DistrictPlan(grid_fanouts=(16, 4, 4), geo_seed=3, noise=NoiseConfig((0.25,) * 4, runs=2))
    return base.replace(**changes)


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WALKED["generator"]))
def test_generator_rides_in_a_district_plan_runs_and_reports(key):
    from core.districts.workflow import run
    spec = WALKED["generator"][key]
    unit = "tract" if key == "exact" else "block group"     # exact enumeration takes at most 40 units
    plan = _district_plan(generator=key, params=quick(spec, unit=unit, tolerance_pct=10.0), k=4,
                          balance_tolerance_pct=10.0)
    result = run.uncached(_round_trip(plan))
    assert result.headline()
    _report_round_trip(result, "District maps")


@pytest.mark.parametrize("key", list(WALKED["algorithm"]))
def test_noising_algorithm_rides_in_a_district_plan_and_runs(key):
    from core.districts.noise import NoiseConfig
    from core.districts.workflow import run
    plan = _district_plan(noise=NoiseConfig((0.25,) * 4, algorithm=key, runs=2))
    result = run.uncached(_round_trip(plan))
    assert result.headline()


def _audit_frame(n=600, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 6, n)
    sex = rng.integers(0, 2, n)
    y = rng.random(n) < 1 / (1 + np.exp(-(-1 + 0.3 * age + 0.5 * sex)))
    return pd.DataFrame({"age": age, "sex": sex, "y": np.where(y, "yes", "no")})


def _audit(releases, adversaries):
    from core.coherence import AuditPlan
    from core.coherence.run import run
    from core.contracts import DataRef, bytes_fingerprint
    raw = _audit_frame().to_csv(index=False).encode()
    plan = AuditPlan(data=DataRef("upload", bytes_fingerprint(raw)), target="y", positive="yes",
                     lens=("age", "sex"), subgroup_columns=("sex",), releases=releases, adversaries=adversaries,
                     alpha=0.3, trials=2, gamma=50)
    result = run.uncached(_round_trip(plan), raw)
    _report_round_trip(result, "Coherence audit")
    return result.comparison


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WALKED["release"]))
def test_release_rides_in_an_audit_plan_and_runs(key):
    from core.coherence import AdversaryChoice, ReleaseChoice
    res = _audit((ReleaseChoice(key, quick(WALKED["release"][key], strata=("sex",))),),
                 (AdversaryChoice("logistic"),))
    assert len(res.releases) == 1


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WALKED["adversary"]))
def test_adversary_rides_in_an_audit_plan_and_runs(key):
    from core.coherence import AdversaryChoice, ReleaseChoice
    res = _audit((ReleaseChoice("clear_half"),), (AdversaryChoice(key),))
    assert len(res.maxima)


@pytest.mark.parametrize("key", list(WALKED["learner"]))
def test_learner_rides_in_a_group_fairness_plan_runs_and_reports(key):
    from core.fairness.group_fairness_plan import GroupFairnessPlan, LexifairPlan, run_group_fairness
    plan = GroupFairnessPlan(seed=0, ranking=None, companion=None,
                             lexifair=LexifairPlan(learner=key, rounds=10, levels=1, bootstrap=20))
    result = run_group_fairness.uncached(_round_trip(plan))
    assert result.headline()
    _report_round_trip(result, "Group fairness and ranking")


@pytest.mark.slow
@pytest.mark.parametrize("key", list(WALKED["oracle"]))
def test_oracle_rides_in_a_learning_plan_runs_and_reports(key):
    from core.fairness import ConstraintTable, FrontierPlan, LearningPlan, run_learning
    rng = np.random.default_rng(5)
    i, j = rng.integers(0, 7214, 120), rng.integers(0, 7214, 120)
    pairs = pd.DataFrame({"i": np.minimum(i, j), "j": np.maximum(i, j), "weight": 1.0,
                          "n_judges": 3, "agreement": 2 / 3})[i != j]
    plan = LearningPlan(constraints=ConstraintTable.from_frame(pairs, "registry walk"), companion=None,
                        frontier=FrontierPlan(gammas=(0.0, 1.0), T=20, oracle=key))
    result = run_learning.uncached(_round_trip(plan))
    assert result.frontier.points["error"].between(0.0, 1.0).all()
    _report_round_trip(result, "fairness_learning")


@pytest.mark.parametrize("key", list(WALKED["mean noise"]))
def test_mean_noise_rides_in_a_means_plan_and_runs(key):
    from core.synthesis.mean_study import run_means
    from core.synthesis.plan import MeansPlan
    plan = MeansPlan(noise=key, runs=3, coinpress_runs=2, epsilons=(1.0,))
    study = run_means(_round_trip(plan), (200, 300), 1e-9)
    assert study is not None


def test_a_plugin_added_with_one_registry_line_round_trips_in_its_plan():
    """The plan's annotation lists the Params classes known when it was written; a Params class added
    later by one Spec line is rebuilt from its registered name."""
    from dataclasses import dataclass

    from core.contracts import DataRef, param
    from core.synthesis import SynthesisPlan
    from core.synthesis.registry import SYNTHESIZERS

    @dataclass(frozen=True)
    class OneLineParams:
        strength: float = param(0.5, label="Strength", low=0.0, high=1.0)

    key = "one_line_walk"
    SYNTHESIZERS.register(Spec(key, "One line", lambda p: None, OneLineParams, help="for the test"))
    try:
        plan = SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income"), synthesizer=key,
                             synth_params=OneLineParams(0.25))
        assert _round_trip(plan).synth_params == OneLineParams(0.25)
    finally:
        SYNTHESIZERS._specs.pop(key)
