"""What the facilitator sees of a live session: the pooled constraints, agreement, contested pairs with
their reasons, headline counts, and the fit-run history as a table.

The page reads the roster and answers from the store and passes them here with the pooling
choices (weighting, minimum support, which stakeholders); everything it shows is computed here,
including which pooled pairs the learner can use: only pairs whose two people are in the learner's
population reach it, and when the session drew from another population the page says so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.datasets import COMPAS_POPULATIONS, compas_population
from core.fairness.elicitation import (SKIP, WEIGHTINGS, ElicitationPlan, aggregate_constraints,
                                       contested_pairs, inter_rater_agreement)


@dataclass(frozen=True)
class Pooling:
    """Which answers are pooled and how: weighting ("panel" or "judged"), minimum support, stakeholders
    (empty = the whole panel)."""

    weighting: str = "panel"
    min_support: float = 0.0
    stakeholders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"Weighting must be one of {list(WEIGHTINGS)}, got {self.weighting!r}.")
        support = float(self.min_support)
        if not np.isfinite(support) or not 0.0 <= support <= 1.0:
            raise ValueError("Minimum support must lie between 0 and 1.")
        object.__setattr__(self, "stakeholders", tuple(self.stakeholders))


@dataclass
class SessionSummary:
    """The pooled view of a session's answers."""

    pooling: Pooling
    panel: list[str]
    judged: pd.DataFrame
    constraints: pd.DataFrame
    usable: pd.DataFrame
    agreement: dict
    contested: pd.DataFrame
    metrics: dict

    @property
    def aggregation(self) -> dict:
        """The pooling choices as logged with a fit run."""
        return {"weighting": self.pooling.weighting, "min_support": float(self.pooling.min_support),
                "selection": "chosen" if self.pooling.stakeholders else "whole panel",
                "stakeholders": sorted(self.panel)}

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"judgments": self.judged, "constraints": self.constraints, "contested_pairs": self.contested}


def with_reasons(contested: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
    """Contested pairs with what each stakeholder wrote about them ("name: reason" joined by " | ")."""
    if contested.empty or judged.empty:
        return contested.assign(reasons=pd.Series(dtype=object))
    given = judged[judged["reason"].notna()]
    quotes = pd.DataFrame({"i": np.minimum(given["a"], given["b"]), "j": np.maximum(given["a"], given["b"]),
                           "quote": given["stakeholder"] + ": " + given["reason"].astype(str)})
    joined = quotes.groupby(["i", "j"])["quote"].agg(" | ".join).rename("reasons").reset_index()
    return contested.merge(joined, on=["i", "j"], how="left")


def summarise_session(judged: pd.DataFrame, progress: pd.DataFrame, config: ElicitationPlan,
                      pooling: Pooling) -> SessionSummary:
    """Pool the chosen stakeholders' live answers into constraints and agreement diagnostics."""
    roster = list(progress["stakeholder"])
    unknown = sorted(set(pooling.stakeholders) - set(roster))
    if unknown:
        raise ValueError(f"Stakeholders {unknown} are not in this session.")
    panel = list(pooling.stakeholders) or roster
    judged = judged[judged["stakeholder"].isin(panel)].reset_index(drop=True)
    fav = config.favourable_label
    constraints = aggregate_constraints(judged, pooling.weighting, n_stakeholders=max(1, len(panel)),
                                        favourable_label=fav, min_support=pooling.min_support)
    agreement = inter_rater_agreement(judged, fav) if len(judged) else {"fleiss_kappa": float("nan")}
    contested = contested_pairs(judged, fav) if len(judged) else pd.DataFrame()
    contested = with_reasons(contested, judged)
    constrained = np.maximum(constraints["w_ij"], constraints["w_ji"]) > 0
    sa = progress.loc[progress["stakeholder"].isin(panel), "self_agreement"].dropna()
    metrics = {"answers": int((judged["response"] != SKIP).sum()) if len(judged) else 0,
               "pairs with a constraint": int(constrained.sum()),
               "fleiss_kappa": float(agreement.get("fleiss_kappa", float("nan"))),
               "self_agreement": float(sa.mean()) if len(sa) else float("nan")}
    return SessionSummary(pooling, panel, judged, constraints, constraints[constrained].reset_index(drop=True),
                          agreement, contested, metrics)


@dataclass(frozen=True)
class LearnerPairs:
    """The pooled pairs handed to the learner and what was left out on the way."""

    constraints: pd.DataFrame   # pairs whose two people are in the learner's population
    left_out: int               # pairs with someone outside it
    note: str | None            # what the page says when the session's and learner's people differ


def learner_pairs(constraints: pd.DataFrame, session_population: str, learner_population: str, *,
                  synthetic: bool = False) -> LearnerPairs:
    """Keep the pairs whose two people belong to the learner's population (i, j are file rows).

    A synthetic-copy session's pairs name synthetic people, not rows: they all go to the learner
    unchanged, as constraint people beside the real individuals it fits."""
    for name in (session_population, learner_population):
        if name not in COMPAS_POPULATIONS:
            raise ValueError(f"Unknown population {name!r}; choose one of {list(COMPAS_POPULATIONS)}.")
    if synthetic:
        note = None
        if session_population != learner_population:
            note = (f"The synthetic people on this session's cards copy {COMPAS_POPULATIONS[session_population]}; "
                    f"the learner fits {COMPAS_POPULATIONS[learner_population]}, with every pooled pair as a "
                    "constraint on synthetic people.")
        return LearnerPairs(constraints.reset_index(drop=True), 0, note)
    rows = compas_population(learner_population)
    inside = np.isin(constraints["i"].to_numpy(dtype=np.int64), rows) \
        & np.isin(constraints["j"].to_numpy(dtype=np.int64), rows)
    kept = constraints[inside].reset_index(drop=True)
    left_out = int((~inside).sum())
    note = None
    if session_population != learner_population:
        note = (f"This session drew its pairs from {COMPAS_POPULATIONS[session_population]}; the learner fits "
                f"{COMPAS_POPULATIONS[learner_population]}. ")
        note += (f"{left_out} of {len(constraints)} pooled pair(s) show someone the learner does not fit and "
                 f"are left out; choose the session's people under 'Learner settings' to use them all."
                 if left_out else "Every pooled pair shows people the learner fits.")
    return LearnerPairs(kept, left_out, note)


def run_history_table(runs: list[dict]) -> pd.DataFrame:
    """The session's logged learner runs as a table, newest first."""
    rows = []
    for run in reversed(runs):
        agg, learner = run["aggregation"], run["learner"]
        pooled = agg.get("stakeholders") or []
        hull = [p for p in run["frontier"] if p["on_hull"]] or run["frontier"]
        fairest = min(hull, key=lambda p: p["unfairness"]) if hull else {}
        rows.append({
            "when (UTC)": str(run["created_at"])[:19].replace("T", " "),
            "status": "superseded" if run["superseded"] else "current",
            "constraint set": str(run["constraint_hash"])[:12], "pairs": run["n_constraints"],
            "weighting": agg.get("weighting"), "min support": agg.get("min_support"),
            "stakeholders": (f"whole panel ({len(pooled)})" if agg.get("selection") == "whole panel"
                             else ", ".join(pooled)),
            "sweep": learner.get("sweep"), "rounds": learner.get("T"), "oracle": learner.get("oracle"),
            "averaging": learner.get("averaging"), "pairs held out": learner.get("pair_holdout"),
            "race and sex used": learner.get("use_protected"), "seed": learner.get("seed"),
            "least-constrained error": run["unconstrained_error"],
            "fairest hull point": (f"unfairness {fairest['unfairness']:.3f}, error {fairest['error']:.3f}"
                                   if fairest else ""),
            "code": run["code_version"], "note": run["note"] or ""})
    return pd.DataFrame(rows)


# Display names for the session tables (exports keep the machine names).
DISPLAY_LABELS = {
    "i": "Person A (row in COMPAS)", "j": "Person B (row in COMPAS)",
    "a": "Left person (row)", "b": "Right person (row)",
    "w_ij": "Weight: A at least as favourable as B (share of judges)",
    "w_ji": "Weight: B at least as favourable as A (share of judges)",
    "c_ij": "Judges: A at least B", "c_ji": "Judges: B at least A",
    "n_judges": "Judges who answered", "n_same": "Judges who said 'same'",
    "asserts_ij": "Asserts A at least B", "asserts_ji": "Asserts B at least A",
    "agreement": "Agreement (share)", "reasons": "Reasons given", "reason": "Reason",
    "stakeholder": "Stakeholder", "pseudonym": "Pseudonym", "position": "Card number",
    "response": "Answer", "confidence": "Confidence (1-5)", "revision": "Revision",
    "created_at": "Answered at (UTC)", "kind": "Card kind", "repeat_of": "Repeat of card",
    "answered": "Cards answered", "skipped": "Cards skipped", "latency_ms": "Time to answer (ms)",
}


def display_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """A session table with people-readable column names, for display only."""
    return frame.rename(columns=DISPLAY_LABELS)
