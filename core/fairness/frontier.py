"""Accuracy-fairness frontier under elicited constraints: a sweep of the slack gamma or budget eta.

Each swept value gives one fitted mixture; the page shows the lower convex hull of (realised
unfairness, error), every point of which a mixture of two fitted models attains (spec 0, 2).

The sweep points are independent fits fanned out through ``core.parallel.map_trials``. Each
point's logistic oracle starts its first Newton solve from the unconstrained fit's coefficients
(computed once per sweep from the plan alone), so a point's numbers never depend on which other
points ran, or in what order: the warm start saves time only. The whole sweep is memoised on disk
on (sweep plan, constraint table, constraint people, ``RESULT_VERSION``, code digest).

A session whose cards showed a private synthetic copy names its pairs by positions among that
copy's people. Such a sweep gets the copy's plan (``people``): the synthetic people are appended
to the real individuals at zero cost (``learning_data.with_constraint_people``, spec 4.4), so
they shape the model only through their pair multipliers, and error and group rates stay the real
people's. The copy itself (the one the session showed) is passed in by the caller: nothing is loaded
from a database and nothing new is released here.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from core.cache import cached_call, memory
from core.contracts import Plan, Progress, finite_number, named_rng, param
from core.datasets import COMPAS_POPULATIONS
from core.fairness.learner import (AVERAGING, FAST_FALLBACK_TOL, MAX_MULTIPLIER_BOUND, ORACLES, LearnerConfig,
                                   best_constant_error, fit_with_holdout, unconstrained_coefficients)
from core.fairness.learning_data import LearningData, compas_learning_data, with_constraint_people
from core.fairness.private_pairs import SAMPLING_NOTE, PrivatePairsPlan, SyntheticPeople, matching_copy
from core.parallel import map_trials

DEFAULT_GAMMAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
DEFAULT_ETAS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)
SWEEPS = {"gamma": "per-pair slack γ (every pair within γ; η = 0)",
          "eta": "violation budget η (average excess per judgment at most η; γ fixed)"}
Z95 = 1.959963984540054
MAX_ROUNDS = 20_000
#: What the learning page offers (a plan may hold any value its own checks accept).
ROUND_MENU = (100, 300, 1000, 2000, 3000)


@dataclass(frozen=True)
class FrontierPlan(Plan):
    """A slack sweep: the people, the learner settings shared by every point, the held-out design.

    The fields a person sets on the learning page are declared with ``param(...)``: label, help and
    what the page offers (a menu, a slider's range). The checks below are the plan's rules; they
    accept everything the page offers and more, so a plan saved or scripted outside the page's offer
    still loads and runs (the page then says it cannot redraw it)."""

    population: str = param(
        "paper", label="People the learner fits", choices=COMPAS_POPULATIONS, kind="select",
        help="The paper's population is ProPublica's filtered file without race 'Other'. Pairs with someone "
             "outside the population are left out.")
    gammas: tuple[float, ...] = DEFAULT_GAMMAS
    sweep: str = param(                      # "gamma" or "eta" (spec R4 and R6)
        "gamma", label="Trade-off traced by", choices=SWEEPS,
        help="γ: each elicited pair may differ by at most γ. η: pairs may exceed the slack as long as the "
             "average excess per judgment stays within η (2,000+ rounds recommended).")
    etas: tuple[float, ...] = DEFAULT_ETAS
    eta_gamma: float = 0.0                   # the fixed slack of an eta sweep
    T: int = param(1000, label="Rounds per slack value", low=1, high=MAX_ROUNDS, choices=ROUND_MENU,
                   kind="select_slider", help="The paper reports convergence after about 1,000 rounds.")
    C_lambda: float = 10.0
    averaging: str = param("fast", label="Averaging of the iterates", choices=AVERAGING, kind="radio")
    oracle: str = param("logistic", label="Learner (cost-sensitive oracle)", choices=ORACLES.labels(), kind="select")
    pair_holdout: float = param(
        0.25, label="Share of pairs held out", low=0.0, high=0.5, step=0.05, kind="slider",
        help="Held-out pairs and 30% held-out individuals estimate how the fairness and the error carry over "
             "to people not used in fitting.")
    individual_holdout: bool = True
    use_protected: bool = param(True, label="Learner sees race and sex",
                                help="A normative choice the paper leaves open; it is logged in the export.")
    seed: int = param(0, label="Seed", low=0, high=10_000)
    tol: float = FAST_FALLBACK_TOL

    def __post_init__(self) -> None:
        if self.population not in COMPAS_POPULATIONS:
            raise ValueError(f"Choose a COMPAS population among {list(COMPAS_POPULATIONS)}.")
        if self.sweep not in SWEEPS:
            raise ValueError(f"sweep must be one of {sorted(SWEEPS)}.")
        for name in ("gammas", "etas"):
            values = getattr(self, name)
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise ValueError(f"{name} must be a list of numbers.")
            object.__setattr__(self, name, tuple(finite_number(v, f"Every value in {name}") for v in values))
        for name in ("eta_gamma", "C_lambda", "pair_holdout", "tol"):
            object.__setattr__(self, name, finite_number(getattr(self, name), name))
        if isinstance(self.T, bool) or not isinstance(self.T, (int, np.integer)) or not 1 <= self.T <= MAX_ROUNDS:
            raise ValueError(f"Rounds (T) must be a whole number from 1 to {MAX_ROUNDS:,}.")
        object.__setattr__(self, "T", int(self.T))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2 ** 32:
            raise ValueError("The seed must be a whole number from 0 to 4294967295.")
        object.__setattr__(self, "seed", int(self.seed))
        if len(self.values) < 2:
            raise ValueError("Give at least two slack values to trace a frontier.")
        if any(not 0 <= g <= 1 for g in self.gammas) or not 0 <= self.eta_gamma <= 1:
            raise ValueError("Slack values (gamma) must lie in [0, 1].")
        if any(not 0 <= e <= 10 for e in self.etas):
            raise ValueError("Budget values (eta) must lie in [0, 10].")
        if not 0 < self.C_lambda <= MAX_MULTIPLIER_BOUND:
            raise ValueError(f"C_lambda (bound of the pair multipliers) must be positive and at most "
                             f"{MAX_MULTIPLIER_BOUND:g}; the default is 10.")
        if self.averaging not in AVERAGING:
            raise ValueError(f"averaging must be one of {sorted(AVERAGING)}.")
        if self.oracle not in ORACLES:
            raise ValueError(f"The learner (oracle) must be one of {list(ORACLES)}; got {self.oracle!r}.")
        if not 0.0 <= self.pair_holdout < 1.0:
            raise ValueError("The held-out share of pairs must be in [0, 1).")
        if not 0.0 <= self.tol <= 1.0:
            raise ValueError("The violation tolerance must lie in [0, 1].")

    @property
    def values(self) -> list[float]:
        """The swept values, ascending and distinct."""
        return sorted(set(float(v) for v in (self.gammas if self.sweep == "gamma" else self.etas)))

    def learner(self, value: float) -> LearnerConfig:
        """Learner settings of the point at this swept value."""
        gamma, eta = (value, 0.0) if self.sweep == "gamma" else (self.eta_gamma, value)
        return LearnerConfig(gamma=float(gamma), eta=float(eta), T=int(self.T), C_lambda=self.C_lambda,
                             averaging=self.averaging, oracle=self.oracle)

    def learning_data(self) -> LearningData:
        """The population's features, labels and split of individuals."""
        return compas_learning_data(seed=self.seed, use_protected=self.use_protected,
                                    population=self.population)


@dataclass
class FrontierResult:
    """Tidy tables of a sweep; ``p_hat`` holds each point's scores (rows = the population's people)."""

    points: pd.DataFrame         # one row per slack: error, realised unfairness, hull flag, ...
    pairs: pd.DataFrame          # one row per slack x elicited pair: gap, violated, shadow price
    groups: pd.DataFrame         # one row per slack x attribute x group: FPR, FNR with intervals
    trajectories: pd.DataFrame   # learner trajectories per slack
    p_hat: np.ndarray            # (points, n)
    baseline: dict = field(default_factory=dict)


def lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the decreasing lower convex hull of points (x = unfairness, y = error), by x."""
    order = np.lexsort((y, x))
    hull: list[int] = []
    for k in order:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (x[b] - x[a]) * (y[k] - y[a]) - (y[b] - y[a]) * (x[k] - x[a])
            if cross <= 0:
                hull.pop()
            else:
                break
        hull.append(int(k))
    best = int(np.argmin([y[k] for k in hull]))
    return np.array(hull[:best + 1], dtype=int)


def _wilson(successes: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95% Wilson interval for a rate of randomised decisions (each draw is Bernoulli)."""
    n = np.maximum(n, 1)
    p = successes / n
    denom = 1 + Z95 ** 2 / n
    centre = (p + Z95 ** 2 / (2 * n)) / denom
    half = Z95 * np.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n ** 2)) / denom
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def group_rates(p: np.ndarray, y: np.ndarray, groups: pd.DataFrame) -> pd.DataFrame:
    """False positive and false negative rates of a randomised classifier by race and by sex."""
    rows = []
    for attribute in ("race", "sex"):
        labels = groups[attribute].to_numpy()
        frame = pd.DataFrame({"g": labels, "p": p, "y": y})
        neg = frame[frame.y == 0].groupby("g", observed=True)["p"].agg(["sum", "count"])
        pos = frame[frame.y == 1].groupby("g", observed=True)["p"].agg(["sum", "count"])
        table = pd.concat([neg.add_suffix("_neg"), pos.add_suffix("_pos")], axis=1).fillna(0.0)
        n_neg, n_pos = table["count_neg"].to_numpy(), table["count_pos"].to_numpy()
        fpr_lo, fpr_hi = _wilson(table["sum_neg"].to_numpy(), n_neg)
        fnr_lo, fnr_hi = _wilson(n_pos - table["sum_pos"].to_numpy(), n_pos)
        with np.errstate(invalid="ignore", divide="ignore"):   # a group without negatives has no FPR
            fpr = np.where(n_neg > 0, table["sum_neg"].to_numpy() / n_neg, np.nan)
            fnr = np.where(n_pos > 0, 1 - table["sum_pos"].to_numpy() / n_pos, np.nan)
        rows.append(pd.DataFrame({
            "attribute": attribute, "group": table.index.astype(str),
            "n": (n_neg + n_pos).astype(int), "n_negative": n_neg.astype(int),
            "n_positive": n_pos.astype(int), "fpr": fpr,
            "fpr_low": np.where(n_neg > 0, fpr_lo, np.nan), "fpr_high": np.where(n_neg > 0, fpr_hi, np.nan),
            "fnr": fnr, "fnr_low": np.where(n_pos > 0, fnr_lo, np.nan),
            "fnr_high": np.where(n_pos > 0, fnr_hi, np.nan)}))
    return pd.concat(rows, ignore_index=True)


def _pair_table(p: np.ndarray, report, constraints: pd.DataFrame, gamma: float, tol: float,
                rows_of: np.ndarray) -> pd.DataFrame:
    """Per elicited pair: worse asserted gap, whether it exceeds the slack, and its shadow price.

    ``constraints`` holds learner positions; ``rows_of`` turns them back into COMPAS file rows."""
    frames = []
    for split, prs, lam in (("fit", report.train_pairs, report.fit.lambda_bar),
                            ("held-out", report.test_pairs, None)):
        if prs.m == 0:
            continue
        ordered = pd.DataFrame({"row": prs.row, "gap": p[prs.I] - p[prs.J],
                                "price": lam if lam is not None else np.nan})
        per_row = ordered.groupby("row").agg(gap=("gap", "max"), shadow_price=("price", "sum"))
        rows = per_row.index.to_numpy()
        i = constraints["i"].to_numpy(dtype=np.int64)[rows]
        j = constraints["j"].to_numpy(dtype=np.int64)[rows]
        gap = per_row["gap"].to_numpy()
        frames.append(pd.DataFrame({
            "gamma": gamma, "split": split, "i": rows_of[i], "j": rows_of[j],
            "weight": constraints["weight"].to_numpy(dtype=float)[rows], "p_i": p[i], "p_j": p[j],
            "gap": gap, "excess": np.maximum(gap - gamma, 0.0), "violated": gap > gamma + tol,
            "shadow_price": per_row["shadow_price"].to_numpy() if lam is not None else np.nan,
            "agreement": constraints["agreement"].to_numpy(dtype=float)[rows]
            if "agreement" in constraints else np.nan}))
    if not frames:
        return pd.DataFrame(columns=["gamma", "split", "i", "j", "weight", "p_i", "p_j", "gap",
                                     "excess", "violated", "shadow_price", "agreement"])
    return pd.concat(frames, ignore_index=True)


#: Bumped whenever the result tables change shape, so stale disk-cache entries are not reused.
RESULT_VERSION = 3


def _fit_point(value: float, plan: FrontierPlan, data: LearningData, constraints: pd.DataFrame,
               start: np.ndarray, rows_of: np.ndarray | None = None, fit_rows: np.ndarray | None = None,
               n_real: int | None = None) -> dict:
    """One sweep point: the fit with its held-out figures, pair table, group rates and trajectory.

    With constraint people appended, ``fit_rows`` are the real individuals whose error is fitted,
    ``n_real`` how many real individuals come first, and ``rows_of`` names every position (file
    rows for the real ones, copy positions for the synthetic ones)."""
    lcfg = plan.learner(value)
    report = fit_with_holdout(data, constraints, lcfg, pair_holdout=plan.pair_holdout,
                              individual_holdout=plan.individual_holdout,
                              rng=named_rng(plan.seed, "held-out pairs"),   # the same pair split at every point
                              warm_start=start, fit_rows=fit_rows)
    p = report.fit.p_hat
    n = data.n if n_real is None else int(n_real)
    unfair = report.summary["realized_gamma" if plan.sweep == "gamma" else "mean_excess"]
    pairs = _pair_table(p, report, constraints, lcfg.gamma, plan.tol, data.rows if rows_of is None else rows_of)
    pairs.insert(0, "target", value)
    p = p[:n]                                   # scores of the real individuals only
    groups = group_rates(p, data.y[:n], data.groups.iloc[:n])
    groups.insert(0, "gamma", lcfg.gamma)
    groups.insert(0, "target", value)
    traj = report.fit.trajectory.copy()
    traj.insert(0, "target", value)
    return {"point": {"target": value, **report.summary, "unfairness": unfair,
                      "notes": " ".join(report.fit.notes)},
            "pairs": pairs, "groups": groups, "trajectory": traj, "p": p}


def constraint_people_pairs(constraints: pd.DataFrame, n_people: int, offset: int) -> pd.DataFrame:
    """The constraint table with i, j (positions among ``n_people`` constraint people) moved past the
    ``offset`` real individuals they are appended to; ValueError when a position is not a person."""
    shifted = constraints.copy()
    for col in ("i", "j"):
        k = pd.to_numeric(shifted[col], errors="coerce").to_numpy(dtype=float)
        if np.isnan(k).any() or (k < 0).any() or (k >= n_people).any() or (k != np.round(k)).any():
            raise ValueError(f"Pair column {col} must hold positions of the synthetic people "
                             f"(0 to {n_people - 1}).")
        shifted[col] = k.astype(np.int64) + int(offset)
    return shifted.reset_index(drop=True)


def _frontier(constraints: pd.DataFrame, plan: FrontierPlan, version: int = RESULT_VERSION,
              people: PrivatePairsPlan | None = None, crowd: pd.DataFrame | None = None,
              progress: Progress | None = None) -> FrontierResult:
    """The sweep proper; ``constraints`` index people by their row in load_compas(), or with
    ``people`` by their position in that synthetic copy, whose numeric people are ``crowd``."""
    data = plan.learning_data()
    values = plan.values
    symbol = "γ" if plan.sweep == "gamma" else "η"
    fit_rows = data.train if plan.individual_holdout else np.arange(data.n)
    start = unconstrained_coefficients(data, fit_rows) if ORACLES[plan.oracle].build().warm_starts else None
    extra: dict = {}
    if people is None:
        local, dropped = data.local_constraints(constraints)
        fitted = data
    else:
        copy = crowd                                   # the copy the session showed: never a new release
        fitted, _ = with_constraint_people(data, copy)
        local, dropped = constraint_people_pairs(constraints, len(copy), data.n), 0
        extra = {"rows_of": np.r_[data.rows, np.arange(len(copy))], "fit_rows": fit_rows, "n_real": data.n}
    fits = map_trials(functools.partial(_fit_point, plan=plan, data=fitted, constraints=local, start=start,
                                        **extra),
                      values, progress=progress, label=f"frontier points ({symbol})")
    pts = pd.DataFrame([f["point"] for f in fits])
    hull = lower_hull(pts["unfairness"].to_numpy(), pts["error"].to_numpy())
    pts["on_hull"] = False
    pts.loc[hull, "on_hull"] = True
    pairs = pd.concat([f["pairs"] for f in fits], ignore_index=True)
    viol = pairs[pairs.split == "fit"].groupby("target")["violated"].sum()
    pts["violated_pairs"] = pts["target"].map(viol).fillna(0).astype(int)
    baseline = {"best_constant_error": best_constant_error(data.y[fit_rows]),
                "n_individuals": data.n, "n_pairs": int(len(local)), "dropped_pairs": dropped,
                "population": COMPAS_POPULATIONS[plan.population],
                "averaging": AVERAGING[plan.averaging], "sweep": plan.sweep, "symbol": symbol,
                "unfairness": "largest gap p_i − p_j over elicited pairs" if plan.sweep == "gamma"
                else "average excess over the slack per judgment", "config": asdict(plan)}
    if people is not None:
        baseline.update({"constraint_people": people.label(), "n_constraint_people": len(extra["rows_of"]) - data.n,
                         "people_note": SAMPLING_NOTE})
    return FrontierResult(pts, pairs, pd.concat([f["groups"] for f in fits], ignore_index=True),
                          pd.concat([f["trajectory"] for f in fits], ignore_index=True),
                          np.vstack([f["p"] for f in fits]), baseline)


_cached_frontier = cached_call(_frontier)


def canonical_constraints(constraints: pd.DataFrame) -> pd.DataFrame:
    """The columns of a constraint table the learner reads, in a fixed order, with a fresh index."""
    cols = [c for c in ("i", "j", "weight", "w_ij", "w_ji", "n_judges", "agreement")
            if c in constraints.columns]
    if not {"i", "j", "weight"} <= set(cols):
        raise ValueError("The constraint table needs columns i, j and weight.")
    return constraints[cols].reset_index(drop=True)


def check_people(people) -> PrivatePairsPlan | None:
    if people is not None and not isinstance(people, PrivatePairsPlan):
        raise ValueError("Constraint people come from a PrivatePairsPlan (the session's synthetic copy) or None.")
    return people


def people_of(people: PrivatePairsPlan | None, copy: SyntheticPeople | None) -> pd.DataFrame | None:
    """The numeric people of the copy ``people`` names (None for real records, which take no copy)."""
    if check_people(people) is None:
        if copy is not None:
            raise ValueError("Pairs that name rows of the bundled COMPAS file read it themselves; pass no data.")
        return None
    return matching_copy(people, copy).people


def trade_off_frontier(constraints: pd.DataFrame, plan: FrontierPlan = FrontierPlan(),
                       progress: Progress | None = None, people: PrivatePairsPlan | None = None,
                       copy: SyntheticPeople | None = None) -> FrontierResult:
    """Sweep gamma (or eta), fit one mixture per value and mark the lower convex hull (cached on disk).

    ``constraints`` index people by their row in ``core.datasets.load_compas()``; pairs with
    someone outside the plan's population are left out (counted in ``baseline['dropped_pairs']``).
    With ``people`` (the plan of a session's synthetic copy) they index that copy's people instead,
    who join the fit as zero-cost constraint people; ``copy`` is that copy, passed by the caller.
    """
    return _cached_frontier(canonical_constraints(constraints), plan, RESULT_VERSION, check_people(people),
                            people_of(people, copy), progress=progress)


def is_cached(constraints: pd.DataFrame, plan: FrontierPlan, people: PrivatePairsPlan | None = None,
              copy: SyntheticPeople | None = None) -> bool:
    """Whether this sweep is already in the result cache (the page then shows it at once)."""
    try:
        crowd = people_of(people, copy)
        cache = memory().cache(_frontier, ignore=["progress"])
        return bool(cache.check_call_in_cache(canonical_constraints(constraints), plan, RESULT_VERSION,
                                              check_people(people), crowd, progress=None))
    except Exception:
        return False


def fpr_gap(groups: pd.DataFrame, a: str = "African-American", b: str = "Caucasian",
            attribute: str = "race") -> pd.DataFrame:
    """FPR of group a minus group b at every swept value, with a 95% normal interval (spec R7)."""
    part = groups[groups["attribute"] == attribute].set_index(["target", "group"])
    rows = []
    for target in sorted(groups["target"].unique()):
        if (target, a) not in part.index or (target, b) not in part.index:
            continue
        ra, rb = part.loc[(target, a)], part.loc[(target, b)]
        neg_a, neg_b = max(int(ra["n_negative"]), 1), max(int(rb["n_negative"]), 1)
        se = float(np.sqrt(ra["fpr"] * (1 - ra["fpr"]) / neg_a + rb["fpr"] * (1 - rb["fpr"]) / neg_b))
        gap = float(ra["fpr"] - rb["fpr"])
        rows.append({"target": float(target), "fpr_gap": gap, "low": gap - Z95 * se, "high": gap + Z95 * se})
    return pd.DataFrame(rows, columns=["target", "fpr_gap", "low", "high"])

