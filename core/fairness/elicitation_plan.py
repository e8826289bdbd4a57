"""The elicitation design as a plan: which data, which pairs, which seeds (and an optional simulated panel).

``ElicitationPlan`` holds every choice that shapes the cards a facilitator hands out: the data
(``DataRef``), the population pairs are drawn from (the learner's "paper" people by default), the
features shown, how many core, random and repeated pairs each stakeholder
gets, the answer options and the session seed. When ``demo_stakeholders`` is positive it also
fixes a simulated panel (how many judges, which kind, their seed), so the whole demo reproduces
from the plan. ``run_elicitation`` turns a plan into an ``ElicitationDesign``: the core pairs with
the people they show, and for a simulated panel its answers and pooled constraints (Jung et al.
2021, 2.1 weights).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from core.cache import cached
from core.contracts import DataRef, Plan, Progress, Result
from core.datasets import compas_population
from core.fairness.private_pairs import (PAIR_DELTA, SYNTHETIC_PEOPLE, PrivatePairsPlan, SyntheticPeople,
                                        check_pair_epsilon, synthetic_people)
from core.fairness.elicitation import (DEFAULT_FEATURES, SIMULATION_LABEL, SessionConfig,
                                       aggregate_constraints, core_pairs, demo_panel, inter_rater_agreement,
                                       simulate_judgments, simulated_answer_stream, simulated_roster)

DEMO_KINDS = ("metric", "score")
MAX_DEMO_STAKEHOLDERS = 60


@dataclass(frozen=True)
class ElicitationPlan(Plan):
    """A session design: data, card features, pair sampling, answer options, seeds, optional simulated panel."""

    data: DataRef = field(default_factory=lambda: DataRef("compas"))
    population: str = "paper"
    features: tuple[str, ...] = DEFAULT_FEATURES
    n_core: int = 10
    n_random: int = 40
    n_repeat: int = 2
    response_mode: str = "binary"
    favourable_label: int = 0
    seed: int = 0
    instructions: str = SessionConfig.instructions
    demo_stakeholders: int = 0
    demo_kind: str = "metric"
    demo_seed: int = 0
    pair_source: str = "real"      # "real" records, or "dp_synthetic": a private synthetic copy
    pair_epsilon: float = 1.0      # the copy's epsilon; its delta is PAIR_DELTA
    pair_copy: str = ""            # the released copy's id ("" before it is made)

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "pair_epsilon", check_pair_epsilon(self.pair_epsilon))
        if not isinstance(self.data, DataRef) or self.data.source != "compas":
            raise ValueError("Elicitation runs on the bundled COMPAS data (DataRef('compas')).")
        self.session_config()  # validates the design fields with SessionConfig's messages
        n = self.demo_stakeholders
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_DEMO_STAKEHOLDERS:
            raise ValueError(f"Simulated stakeholders must be a whole number from 0 to {MAX_DEMO_STAKEHOLDERS}.")
        if self.demo_kind not in DEMO_KINDS:
            raise ValueError(f"Simulated judges are {list(DEMO_KINDS)}, not {self.demo_kind!r}.")
        if isinstance(self.demo_seed, bool) or not isinstance(self.demo_seed, int) or self.demo_seed < 0:
            raise ValueError("The demo seed must be a non-negative whole number.")

    def session_config(self) -> SessionConfig:
        """The settings a live session stores for this design."""
        return SessionConfig(dataset=self.data.source, population=self.population, features=self.features,
                             n_core=self.n_core,
                             n_random=self.n_random, n_repeat=self.n_repeat, response_mode=self.response_mode,
                             favourable_label=self.favourable_label, seed=self.seed,
                             instructions=self.instructions, pair_source=self.pair_source,
                             pair_epsilon=self.pair_epsilon, pair_copy=self.pair_copy)

    @property
    def synthetic(self) -> bool:
        return self.pair_source == "dp_synthetic"

    def private_pairs_plan(self) -> PrivatePairsPlan | None:
        """The synthetic copy the cards show (None for real records): its population, budget and,
        once released, its copy id (designs that differ in anything else can share one copy)."""
        return private_pairs_plan(self.session_config())

    @classmethod
    def from_session_config(cls, config: SessionConfig, **demo) -> "ElicitationPlan":
        return cls(data=DataRef(config.dataset), population=config.population, features=config.features,
                   n_core=config.n_core,
                   n_random=config.n_random, n_repeat=config.n_repeat, response_mode=config.response_mode,
                   favourable_label=config.favourable_label, seed=config.seed,
                   instructions=config.instructions, pair_source=config.pair_source,
                   pair_epsilon=config.pair_epsilon, pair_copy=config.pair_copy, **demo)


def private_pairs_plan(config: SessionConfig) -> PrivatePairsPlan | None:
    """The synthetic copy a session's cards show, or None when they show real records."""
    if not config.synthetic:
        return None
    return PrivatePairsPlan(population=config.population, epsilon=config.pair_epsilon, copy_id=config.pair_copy)


def session_people(config: SessionConfig) -> tuple[pd.DataFrame, pd.DataFrame, SyntheticPeople | None]:
    """(card frame, numeric frame, synthetic copy or None) of the people a session's pairs index:
    load_compas() twice for real records; the stored synthetic copy's card text and bin midpoints
    otherwise (loaded by its id, never made here)."""
    sub = private_pairs_plan(config)
    if sub is None:
        from core.datasets import load_compas
        people = load_compas()
        return people, people, None
    if not sub.copy_id:
        raise ValueError("This session shows a synthetic copy that was never stored (sessions made before "
                         "copies were stored drew theirs from a seed, which is not private); its people "
                         "cannot be shown. Create a new session to release and store a copy.")
    copy = synthetic_people(sub)
    return copy.cards, copy.people, copy


@dataclass
class ElicitationDesign(Result):
    """The core pairs of a design and, for a simulated panel, its answers and pooled constraints."""

    plan: ElicitationPlan
    core_pairs: pd.DataFrame
    judgments: pd.DataFrame | None = None
    constraints: pd.DataFrame | None = None
    agreement: dict | None = None
    copy: SyntheticPeople | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        out = {"core_pairs": self.core_pairs}
        if self.judgments is not None:
            out["simulated_judgments"] = self.judgments
            out["constraints"] = self.constraints
        if self.copy is not None:
            out["synthetic_ledger"] = self.copy.spent.to_frame()
        return out

    def headline(self) -> dict[str, float]:
        out = {"core pairs": float(len(self.core_pairs)),
               "people pairs are drawn from": float(SYNTHETIC_PEOPLE if self.plan.synthetic
                                                    else len(compas_population(self.plan.population))),
               "cards per stakeholder": float(self.plan.n_core + self.plan.n_random + self.plan.n_repeat)}
        if self.constraints is not None:
            c = self.constraints
            out["pairs with a constraint"] = float(((c["w_ij"] > 0) | (c["w_ji"] > 0)).sum())
            out["Fleiss' kappa (core pairs)"] = float(self.agreement["fleiss_kappa"])
        return out

    def headline_uncertainty(self) -> dict[str, str]:
        """The design's sizes are exact; the simulated panel's numbers come from one seeded draw."""
        from core.uncertainty_words import SET_BY_PLAN
        out = {"core pairs": SET_BY_PLAN,
               "people pairs are drawn from": ("exact (size of the synthetic copy)" if self.plan.synthetic
                                               else "exact (size of the public COMPAS population)"),
               "cards per stakeholder": SET_BY_PLAN}
        if self.constraints is not None:
            draw = (f"simulated panel: one draw ({self.plan.demo_stakeholders} stakeholders, seed "
                    f"{self.plan.demo_seed}); no spread measured")
            out["pairs with a constraint"] = draw
            out["Fleiss' kappa (core pairs)"] = draw
        return out

    def ledger(self):
        """The synthetic copy's spends when the cards show one (what stakeholders see is a release)."""
        return None if self.copy is None else self.copy.spent

    @property
    def label(self) -> str:
        return SIMULATION_LABEL if self.judgments is not None else ""


def core_pair_table(people: pd.DataFrame, config: SessionConfig) -> pd.DataFrame:
    """The shared core pairs with the features each card shows for both people."""
    core = core_pairs(config)
    cols = list(config.features)
    left = people.iloc[core[:, 0]][cols].reset_index(drop=True).add_suffix(" (A)")
    right = people.iloc[core[:, 1]][cols].reset_index(drop=True).add_suffix(" (B)")
    return pd.concat([pd.DataFrame({"i": core[:, 0], "j": core[:, 1]}), left, right], axis=1)


@cached
def run_elicitation(plan: ElicitationPlan, data: pd.DataFrame | None = None, *,
                    progress: Progress | None = None) -> ElicitationDesign:
    """The design's core pairs; with a simulated panel, its answers, constraints and agreement."""
    if not isinstance(plan, ElicitationPlan):
        raise ValueError("run_elicitation needs an ElicitationPlan.")
    if data is not None:
        raise ValueError("Elicitation runs on the bundled COMPAS data; it takes no data file.")
    config = plan.session_config()
    cards, people, copy = session_people(config)
    table = core_pair_table(cards, config)
    if plan.demo_stakeholders == 0:
        return ElicitationDesign(plan, table, copy=copy)
    if progress is not None:
        progress(0, 1, "Simulating the panel's answers")
    judged = demo_panel(plan.demo_stakeholders, config, seed=plan.demo_seed, kind=plan.demo_kind, frame=people)
    judged = judged[["stakeholder", "position", "a", "b", "kind", "repeat_of", "response"]]
    constraints = aggregate_constraints(judged, "panel", n_stakeholders=plan.demo_stakeholders,
                                        favourable_label=config.favourable_label)
    agreement = inter_rater_agreement(judged, config.favourable_label)
    if progress is not None:
        progress(1, 1, "Panel simulated")
    return ElicitationDesign(plan, table, judged, constraints, agreement, copy)


def simulated_answers(plan: ElicitationPlan, cards: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    """The simulated panel's answers to `cards` (stakeholders in roster order, cards by position):
    the plan's demo stream, so a store session and run_elicitation hold the same answers."""
    return simulate_judgments(people, cards, simulated_answer_stream(plan.demo_seed), kind=plan.demo_kind,
                              response_mode=plan.response_mode)


def demo_name(plan: ElicitationPlan) -> str:
    return f"Demo panel ({plan.demo_stakeholders} simulated, {plan.demo_kind} judges)"


def fill_demo_session(store, plan: ElicitationPlan, people: pd.DataFrame | None = None):
    """Open a session of simulated stakeholders in `store` and answer every card (labelled simulated).

    `people` are the numeric people the cards index (default: the plan's, real or synthetic).

    The roster is "simulated-01".. and the answers come from the plan's demo seed, so the same
    plan gives the same session.
    """
    if plan.demo_stakeholders < 2:
        raise ValueError("A demo panel needs at least two simulated stakeholders.")
    config = plan.session_config()
    if people is None:
        people = session_people(config)[1]
    created = store.create_session(config, demo_name(plan), simulated=True)
    logins = [store.join(created.join_code, name, simulated=True)
              for name in simulated_roster(plan.demo_stakeholders)]
    cards = pd.concat([store.my_assignment(login.token).drop(columns=["response", "revision"])
                       .assign(stakeholder=login.pseudonym, token=login.token) for login in logins],
                      ignore_index=True)
    answered = simulated_answers(plan, cards, people)
    for token, part in answered.groupby("token", sort=False):
        store.record_answers(token, part[["position", "response"]])
    return created


__all__ = ["DEMO_KINDS", "PAIR_DELTA", "private_pairs_plan", "session_people", "ElicitationDesign", "ElicitationPlan", "core_pair_table", "demo_name",
           "fill_demo_session", "run_elicitation", "simulated_answers"]
