"""Learning under elicited constraints as a plan: the people, the constraint table, the sweep, the companion.

``LearningPlan`` holds every choice behind the learning results: the data (``DataRef('compas')``),
the constraint table itself (``ConstraintTable``: pair rows of ``load_compas()`` and their
weights, so a saved plan reruns without the session database; or, for a session whose cards
showed a private synthetic copy, positions among that copy's people with the copy's plan), the
sweep (``FrontierPlan``: population, slack values, oracle, rounds, averaging, held-out shares,
seed) and the companion panel (``CompanionPlan`` or None). ``run_learning`` computes the frontier as a disk-cached sub-run
keyed on (sweep plan, constraint table), so changing only the companion settings reuses it, and
post-processes the scores of the chosen sweep point (Reich & Vijaykumar). A result already in hand
takes other companion settings without running the learner again (``LearningResult.with_companion``).

Pairs that name people of a synthetic copy run on that copy, passed as the run's ``data``
(``run_learning(plan, copy)``): the run never opens the sessions database.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.cache import cached
from core.contracts import DataRef, Plan, Progress, Result
from core.fairness.companion import CompanionPlan, CompanionResult, equal_error_rate_scores
from core.fairness.frontier import FrontierPlan, FrontierResult, fpr_gap, is_cached, trade_off_frontier
from core.fairness.private_pairs import PAIR_DELTA, SAMPLING_NOTE, SYNTHETIC_PEOPLE, PrivatePairsPlan, SyntheticPeople

COMPAS_ROWS = 7_214          # rows of the bundled two-year file: pair indices refer to them
MAX_PAIRS = 20_000


def _column(frame: pd.DataFrame, name: str, fallback: str | None = None) -> np.ndarray:
    source = name if name in frame else fallback
    if source is None or source not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[source], errors="coerce").to_numpy(dtype=float)


@dataclass(frozen=True)
class ConstraintTable(Plan):
    """Elicited pair constraints: rows i, j of load_compas(), 'treat alike' weight, ordered weights
    w_ij ("j at least as well as i") and w_ji, and the judges' agreement (display only).

    ``people`` is None when i, j are rows of the data; for a synthetic-copy session it is the plan
    of the copy the cards showed, and i, j are positions among its people (the learner then adds
    them as zero-cost constraint people)."""

    i: tuple[int, ...] = ()
    j: tuple[int, ...] = ()
    weight: tuple[float, ...] = ()
    w_ij: tuple[float, ...] = ()
    w_ji: tuple[float, ...] = ()
    agreement: tuple[float, ...] = ()
    source: str = ""
    people: PrivatePairsPlan | None = None

    def __post_init__(self) -> None:
        if self.people is not None and not isinstance(self.people, PrivatePairsPlan):
            raise ValueError("Constraint people come from a PrivatePairsPlan (the session's synthetic copy) or None.")
        if self.people is not None and not self.people.copy_id:
            raise ValueError("Constraint people name a released synthetic copy by its copy id; this plan has none.")
        n = len(self.i)
        if n > MAX_PAIRS:
            raise ValueError(f"At most {MAX_PAIRS:,} pairs can be learned from; this table has {n:,}.")
        if any(len(getattr(self, c)) != n for c in ("j", "weight", "w_ij", "w_ji", "agreement")):
            raise ValueError("Every column of the constraint table needs one value per pair.")
        try:
            idx = {c: np.asarray(getattr(self, c), dtype=float) for c in ("i", "j")}
            num = {c: np.asarray(getattr(self, c), dtype=float) for c in ("weight", "w_ij", "w_ji", "agreement")}
        except (TypeError, ValueError, OverflowError):
            raise ValueError("Constraint table entries must be numbers.") from None
        bound, what = ((COMPAS_ROWS, "whole row numbers") if self.people is None
                       else (SYNTHETIC_PEOPLE, "whole positions of the synthetic people"))
        for c, v in idx.items():
            if not np.isfinite(v).all() or (v != np.round(v)).any() or (v < 0).any() or (v >= bound).any():
                raise ValueError(f"Pair column {c} must hold {what} from 0 to {bound - 1}.")
        if n and (idx["i"] == idx["j"]).any():
            raise ValueError("A pair must join two different individuals (found i == j).")
        for c in ("weight", "w_ij", "w_ji"):
            if not np.isfinite(num[c]).all() or (num[c] < 0).any():
                raise ValueError(f"Constraint weights ({c}) must be finite numbers >= 0.")
        object.__setattr__(self, "i", tuple(int(v) for v in idx["i"]))
        object.__setattr__(self, "j", tuple(int(v) for v in idx["j"]))
        for c in ("weight", "w_ij", "w_ji", "agreement"):
            object.__setattr__(self, c, tuple(float(v) for v in num[c]))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, source: str = "",
                   people: PrivatePairsPlan | None = None) -> "ConstraintTable":
        """From a pooled constraint frame (columns i, j, weight; optional w_ij, w_ji, agreement);
        ``people``: the synthetic copy whose positions i, j name, or None for rows of the data."""
        missing = {"i", "j", "weight"} - set(frame.columns)
        if missing:
            raise ValueError(f"The constraint table lacks column(s) {sorted(missing)}; it needs i, j and weight.")
        weight = _column(frame, "weight")
        return cls(i=tuple(_column(frame, "i")), j=tuple(_column(frame, "j")), weight=tuple(weight),
                   w_ij=tuple(_column(frame, "w_ij", "weight")), w_ji=tuple(_column(frame, "w_ji", "weight")),
                   agreement=tuple(_column(frame, "agreement")), source=str(source), people=people)

    def frame(self) -> pd.DataFrame:
        """The table as the learner reads it."""
        return pd.DataFrame({"i": np.array(self.i, dtype=np.int64), "j": np.array(self.j, dtype=np.int64),
                             "weight": np.array(self.weight, dtype=float),
                             "w_ij": np.array(self.w_ij, dtype=float), "w_ji": np.array(self.w_ji, dtype=float),
                             "agreement": np.array(self.agreement, dtype=float)})

    @property
    def synthetic(self) -> bool:
        """Whether the pairs name people of a private synthetic copy."""
        return self.people is not None

    def people_table(self) -> pd.DataFrame:
        """Who the pairs name, as one row for exports (a public count of synthetic people, never a private one)."""
        if self.people is None:
            return pd.DataFrame({"constraint_people": ["real records (rows of the COMPAS file)"],
                                 "note": [""]})
        p = self.people
        return pd.DataFrame({"constraint_people": ["synthetic (private synthetic copy)"],
                             "copy": [p.label()], "population": [p.population], "epsilon": [p.epsilon],
                             "delta": [PAIR_DELTA], "copy_id": [p.copy_id], "synthetic_people": [SYNTHETIC_PEOPLE],
                             "note": [SAMPLING_NOTE]})

    @property
    def n_constrained(self) -> int:
        """Pairs with positive weight in some orientation."""
        f = self.frame()
        return int(((f["weight"] > 0) | (f["w_ij"] > 0) | (f["w_ji"] > 0)).sum())


@dataclass(frozen=True)
class LearningPlan(Plan):
    """Everything behind the learning results: data, constraints, the sweep and the companion panel."""

    data: DataRef = field(default_factory=lambda: DataRef("compas"))
    constraints: ConstraintTable = field(default_factory=ConstraintTable)
    frontier: FrontierPlan = field(default_factory=FrontierPlan)
    companion: CompanionPlan | None = field(default_factory=CompanionPlan)

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataRef) or self.data.source != "compas":
            raise ValueError("The pairwise-fair learner runs on the bundled COMPAS data (DataRef('compas')).")
        for name, cls in (("constraints", ConstraintTable), ("frontier", FrontierPlan)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__}.")
        if self.companion is not None and not isinstance(self.companion, CompanionPlan):
            raise ValueError("companion must be a CompanionPlan or None.")
        if self.constraints.n_constrained == 0:
            raise ValueError("No pair carries a constraint yet: the learner needs at least one "
                             "'treat alike' or ordered judgment.")
        at = self.companion.at if self.companion is not None else None
        if at is not None and not any(math.isclose(at, v) for v in self.frontier.values):
            raise ValueError(f"The companion's operating point {at:g} is not one of the swept values "
                             f"{self.frontier.values}.")

    def operating_point(self) -> float:
        """The swept value whose scores the companion post-processes (default: nearest 0.3)."""
        values = self.frontier.values
        at = self.companion.at if self.companion is not None else None
        if at is None:
            return float(values[int(np.argmin(np.abs(np.array(values) - 0.3)))])
        return float(min(values, key=lambda v: abs(v - at)))


@dataclass
class LearningResult(Result):
    """The frontier of the plan's sweep and, when asked, the companion panel at its operating point."""

    plan: LearningPlan
    frontier: FrontierResult
    companion: CompanionResult | None = None

    def with_companion(self, companion: CompanionPlan | None) -> "LearningResult":
        """The result of this plan with ``companion`` instead: the same frontier (the learner does not run
        again), the companion computed at its operating point; equal to ``run_learning`` of that plan."""
        plan = self.plan.replace(companion=companion)
        return LearningResult(plan, self.frontier, companion_at(plan, self.frontier))

    def point(self) -> pd.Series:
        """The frontier row of the operating point."""
        pts = self.frontier.points
        return pts.iloc[int(np.argmin(np.abs(pts["target"].to_numpy() - self.plan.operating_point())))]

    def tables(self) -> dict[str, pd.DataFrame]:
        f = self.frontier
        out = {"frontier_points": f.points, "frontier_pairs": f.pairs, "group_rates": f.groups,
               "fpr_gap": fpr_gap(f.groups), "trajectories": f.trajectories}
        if self.plan.constraints.synthetic:
            out["constraint_people"] = self.plan.constraints.people_table()
        if self.companion is not None:
            out.update(self.companion.tables())
        return out

    def headline(self) -> dict[str, float]:
        pts, base = self.frontier.points, self.frontier.baseline
        here = self.point()
        out = {"people": float(base["n_individuals"]),
               "pairs used": float(base["n_pairs"]),
               "best constant error": float(base["best_constant_error"]),
               "least-constrained error": float(pts.loc[pts["target"].idxmax(), "error"]),
               "error at the operating point": float(here["error"]),
               "realised unfairness at the operating point": float(here["unfairness"])}
        if self.plan.constraints.synthetic:
            out["synthetic constraint people"] = float(SYNTHETIC_PEOPLE)
        if self.companion is not None:
            out.update(self.companion.headline())
        return out

    def headline_uncertainty(self) -> dict[str, str]:
        """Counts and the constant baseline are exact; each fitted number comes from one seeded fit, so
        it is set beside the same number on the held-out people or pairs (frontier_points)."""
        from core.uncertainty_words import num
        pts = self.frontier.points
        here = self.point()
        least = pts.loc[pts["target"].idxmax()]
        fit = "one seeded fit, no spread measured"

        def error(row) -> str:
            n, e = row.get("heldout_individuals", float("nan")), row.get("error_heldout", float("nan"))
            if not (np.isfinite(n) and n >= 1 and np.isfinite(e)):
                return fit
            se = np.sqrt(e * (1 - e) / n)
            return f"{fit}; held-out error {num(e)} on {int(n):,} people (binomial se {num(se, 2)})"

        unfair_col = "heldout_realized_gamma" if self.frontier.baseline.get("sweep", "gamma") == "gamma" \
            else "heldout_mean_excess"
        held, n_pairs = here.get(unfair_col, float("nan")), here.get("heldout_pairs", float("nan"))
        unfair = (f"{fit}; {num(held)} on {int(n_pairs)} held-out pairs"
                  if np.isfinite(held) and np.isfinite(n_pairs) and n_pairs >= 1 else f"{fit}; no held-out pairs")
        out = {"people": "exact (count)", "pairs used": "exact (count)",
               "best constant error": "exact (from the base rate, no fit)",
               "least-constrained error": error(least), "error at the operating point": error(here),
               "realised unfairness at the operating point": unfair}
        if self.plan.constraints.synthetic:
            out["synthetic constraint people"] = "exact (size of the synthetic copy)"
        if self.companion is not None:
            out.update(self.companion.headline_uncertainty())
        return out


def frontier_ready(plan: LearningPlan, data: SyntheticPeople | None = None) -> bool:
    """Whether the plan's sweep is already cached (a page may then show it without a click)."""
    return is_cached(plan.constraints.frame(), plan.frontier, plan.constraints.people, data)


def companion_at(plan: LearningPlan, frontier: FrontierResult) -> CompanionResult | None:
    """The plan's companion panel on the scores of its operating point (None without a companion)."""
    if plan.companion is None:
        return None
    pts = frontier.points
    k = int(np.argmin(np.abs(pts["target"].to_numpy() - plan.operating_point())))
    learning = plan.frontier.learning_data()
    return equal_error_rate_scores(frontier.p_hat[k], learning.y, learning.groups, plan.companion)


@cached
def run_learning(plan: LearningPlan, data: SyntheticPeople | None = None, *,
                 progress: Progress | None = None) -> LearningResult:
    """The frontier of the plan's sweep (cached sub-run) and the companion at its operating point.

    ``data`` is None when the pairs name rows of the bundled COMPAS file, and the synthetic copy
    (``SyntheticPeople``) whose people they name otherwise, loaded by the caller."""
    if not isinstance(plan, LearningPlan):
        raise ValueError("run_learning needs a LearningPlan.")
    frontier = trade_off_frontier(plan.constraints.frame(), plan.frontier, progress=progress,
                                  people=plan.constraints.people, copy=data)
    return LearningResult(plan, frontier, companion_at(plan, frontier))
