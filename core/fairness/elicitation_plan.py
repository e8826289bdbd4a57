"""The elicitation design as a plan: which data, which pairs, which seeds (and an optional simulated panel).

``ElicitationPlan`` (declared in ``core.fairness.elicitation``, where the sampling that reads it lives;
the settings a live session stores are the same class) holds every choice that shapes the cards a
facilitator hands out: the data (``DataRef``), the population pairs are drawn from (the learner's
"paper" people by default), the features shown, how many core, random and repeated pairs each
stakeholder gets, the answer options and the session seed. When ``demo_stakeholders`` is positive it
also fixes a simulated panel (how many judges, which kind, their seed), so the whole demo reproduces
from the plan. ``run_elicitation`` turns a plan into an ``ElicitationDesign``: the core pairs with
the people they show, and for a simulated panel its answers and pooled constraints (Jung et al.
2021, 2.1 weights).

A design whose cards show a private synthetic copy runs on that copy, passed as the run's ``data``
(``run_elicitation(plan, copy)``): the run never opens the sessions database. Callers fetch it first
(``load_copy_for(plan.private_pairs_plan(), store)``; ``python -m core reproduce`` loads it from the
project database through ``core.fairness.stored_data``).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from core.cache import cached
from core.contracts import Progress, Result
from core.datasets import compas_population
from core.fairness.elicitation import (DEMO_KINDS, MAX_DEMO_STAKEHOLDERS, SIMULATION_LABEL, ElicitationPlan,
                                       SessionConfig, aggregate_constraints, core_pairs, demo_panel,
                                       inter_rater_agreement, simulate_judgments, simulated_answer_stream,
                                       simulated_roster)
from core.fairness.private_pairs import (PAIR_DELTA, SYNTHETIC_PEOPLE, PrivatePairsPlan, SyntheticPeople,
                                        load_copy_for, matching_copy)


def private_pairs_plan(config: ElicitationPlan) -> PrivatePairsPlan | None:
    """The synthetic copy a session's cards show, or None when they show real records."""
    return config.private_pairs_plan()


NEVER_STORED = ("This session shows a synthetic copy that was never stored (sessions made before copies were "
                "stored drew theirs from a seed, which is not private); its people cannot be shown. Create a "
                "new session to release and store a copy.")


def design_copy(config: ElicitationPlan, copy: SyntheticPeople | None) -> SyntheticPeople | None:
    """The copy a design's cards show, as its caller passed it: None for real records (which take no
    data); for a synthetic-copy design, the copy its id names (ValueError saying what to pass otherwise)."""
    sub = config.private_pairs_plan()
    if sub is None:
        if copy is not None:
            raise ValueError("This design shows real records from the bundled COMPAS data; it takes no data.")
        return None
    if not sub.copy_id:
        raise ValueError(NEVER_STORED)
    return matching_copy(sub, copy)


def session_people(config: ElicitationPlan, copy: SyntheticPeople | None = None,
                   ) -> tuple[pd.DataFrame, pd.DataFrame, SyntheticPeople | None]:
    """(card frame, numeric frame, synthetic copy or None) of the people a session's pairs index:
    load_compas() twice for real records; the given synthetic copy's card text and bin midpoints
    otherwise (the copy its id names, fetched by the caller; never made here)."""
    copy = design_copy(config, copy)
    if copy is None:
        from core.datasets import load_compas
        people = load_compas()
        return people, people, None
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


def core_pair_table(people: pd.DataFrame, config: ElicitationPlan) -> pd.DataFrame:
    """The shared core pairs with the features each card shows for both people."""
    core = core_pairs(config)
    cols = list(config.features)
    left = people.iloc[core[:, 0]][cols].reset_index(drop=True).add_suffix(" (A)")
    right = people.iloc[core[:, 1]][cols].reset_index(drop=True).add_suffix(" (B)")
    return pd.concat([pd.DataFrame({"i": core[:, 0], "j": core[:, 1]}), left, right], axis=1)


@cached
def run_elicitation(plan: ElicitationPlan, data: SyntheticPeople | None = None, *,
                    progress: Progress | None = None) -> ElicitationDesign:
    """The design's core pairs; with a simulated panel, its answers, constraints and agreement.

    ``data`` is None for real records (the bundled COMPAS file) and, for a design showing a synthetic
    copy, that copy (``SyntheticPeople``), which the caller loads: the run reads nothing else."""
    if not isinstance(plan, ElicitationPlan):
        raise ValueError("run_elicitation needs an ElicitationPlan.")
    config = plan
    cards, people, copy = session_people(config, data)
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

    `people` are the numeric people the cards index (default: the plan's: real records, or its
    synthetic copy loaded from `store`).

    The roster is "simulated-01".. and the answers come from the plan's demo seed, so the same
    plan gives the same session.
    """
    if plan.demo_stakeholders < 2:
        raise ValueError("A demo panel needs at least two simulated stakeholders.")
    config = plan.session_config()
    if people is None:
        people = session_people(config, load_copy_for(config.private_pairs_plan(), store))[1]
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


__all__ = ["DEMO_KINDS", "MAX_DEMO_STAKEHOLDERS", "NEVER_STORED", "PAIR_DELTA", "ElicitationDesign",
           "ElicitationPlan", "SessionConfig", "core_pair_table", "demo_name", "design_copy", "fill_demo_session",
           "private_pairs_plan", "run_elicitation", "session_people", "simulated_answers"]
