"""The fairness area's cost models: how long the pairwise learner, the group-fairness learner and an
elicitation design take, said before they start (registered by ``core/fairness/area.py``).

The pairwise learner traces its frontier one fit per slack value, fanned out over the local workers
(``core.parallel.map_trials``): a fit is ``T`` rounds of the regulator/learner game (one
cost-sensitive oracle call on every person each round), and a point where no pair constraint can bind
(a slack of 1) is solved directly, without rounds. So the run lasts about ``ceil(fits / lanes)`` waves
of ``T`` rounds, each round in proportion to the people fitted (the population, plus the synthetic
constraint people a private design appends). Counting ``values x T`` as if every fit ran one after
another on one worker, as an earlier model did, mistimes every sweep whose fits do not divide evenly
among the workers.
"""
from __future__ import annotations

from typing import Any

from core.estimates import Work, fewer, lanes_seconds, workers

#: People in each bundled COMPAS population (public: the bundled file's row counts); the learner's
#: ``per_round`` coefficient is one round on the paper's population.
POPULATION_PEOPLE = {"paper": 5_829, "propublica": 6_172, "full": 7_214}
REFERENCE_PEOPLE = POPULATION_PEOPLE["paper"]

#: Each model's section of the coefficients until the benchmark has fitted them on this machine.
DEFAULT_COSTS: dict[str, Any] = {
    "learner": {"fixed": 1.0, "per_round": 0.008},
    "group_fairness": {"fixed": 2.0, "per_round": 0.003},
    "elicitation": {"fixed": 1.0},
}


def learner_fits(plan) -> int:
    """Fits of the frontier that run the game: every swept value but those where no constraint can bind
    (a slack gamma of 1 or more is solved directly)."""
    frontier = plan.frontier
    if frontier.sweep == "gamma":
        return sum(1 for v in frontier.values if v < 1.0)
    return len(frontier.values) if frontier.eta_gamma < 1.0 else 0


def learner_people(plan, data=None) -> int:
    """People each round's oracle fits: the plan's population plus the synthetic constraint people
    appended to it (the copy passed as ``data``; without it, as many as the pairs name)."""
    base = POPULATION_PEOPLE.get(plan.frontier.population, REFERENCE_PEOPLE)
    if getattr(plan.constraints, "people", None) is None:
        return base
    copy = getattr(data, "people", None)
    named = max(max(plan.constraints.i, default=-1), max(plan.constraints.j, default=-1)) + 1
    return base + (len(copy) if copy is not None else int(named))


def estimate_learner(plan, data, costs, n_workers: int | None = None) -> Work:
    """``fixed + per_round x T x waves x people / REFERENCE_PEOPLE``: ``per_round`` is one round of
    one fit on the reference population, ``waves`` = ``ceil(fits / lanes)`` with the fits spread over
    the local workers (:func:`core.estimates.lanes_seconds`)."""
    c = costs["learner"]
    values, rounds = len(plan.frontier.values), int(plan.frontier.T)
    fits = learner_fits(plan)
    size = learner_people(plan, data) / REFERENCE_PEOPLE
    n_workers = workers() if n_workers is None else n_workers
    seconds = float(c["fixed"]) + lanes_seconds(fits, float(c["per_round"]) * rounds * size, n_workers)
    units = values * rounds
    tips = []
    if rounds > 200:
        tips.append(fewer("rounds per slack value", rounds, 200, seconds, 200 / rounds))
    if values > 4:
        four = float(c["fixed"]) + lanes_seconds(min(fits, 4), float(c["per_round"]) * rounds * size, n_workers)
        tips.append(fewer("slack values", values, 4, four, 1.0))
    return Work(f"{values} slack values x {rounds:,} rounds = {units:,} learner rounds", units, seconds, tuple(tips))


def estimate_group_fairness(plan, data, costs) -> Work:
    """Levels x rounds of the lexicographic learner (one weighted classifier per round), plus the ranking
    and calibration tabs' fixed cost."""
    c = costs["group_fairness"]
    lex = plan.lexifair
    levels, rounds = (int(lex.levels), int(lex.rounds)) if lex is not None else (0, 0)
    units = levels * rounds
    seconds = float(c["fixed"]) + float(c["per_round"]) * units
    tips = []
    if rounds > 200:
        tips.append(fewer("rounds per level", rounds, 200, seconds, 200 / rounds))
    if levels > 1:
        tips.append(fewer("levels", levels, 1, seconds, 1 / levels))
    sentence = (f"{levels} level{'s' if levels != 1 else ''} x {rounds:,} rounds = {units:,} classifier calls"
                if lex is not None else "the ranking and calibration tabs (no lexicographic learner)")
    return Work(sentence, units, seconds, tuple(tips))


def estimate_elicitation(plan, data, costs) -> Work:
    """Drawing a design's pairs (and its simulated panel's answers): a fixed few seconds."""
    judges = int(getattr(plan, "demo_stakeholders", 0) or 0)
    sentence = "draw the design's pairs" + (f" and {judges} simulated stakeholders' answers" if judges else "")
    return Work(sentence, 1, float(costs["elicitation"]["fixed"]))


__all__ = ["DEFAULT_COSTS", "POPULATION_PEOPLE", "REFERENCE_PEOPLE", "estimate_elicitation", "estimate_group_fairness",
           "estimate_learner", "learner_fits", "learner_people"]
