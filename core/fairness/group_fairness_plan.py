"""Group fairness and ranking as one plan: lexicographically fair learning, counterfactual ranking
and the calibration / equal-error companion, each a tab with its own sub-plan (None = not asked).

``GroupFairnessPlan.data`` names the ranking's table (bundled COMPAS, the synthetic moving company
or an upload); ``learning`` names the data of the learning tabs (COMPAS with a population, Adult, or
``"declared"``: the plan's own ``data``, a data set declared on the Data step, with the label, groups
and score chosen from its columns in ``learning_columns``). Where the declaration names a person id,
every count of people (group sizes, people ranked) counts distinct persons, not rows.
``run_group_fairness`` computes each tab as a disk-cached sub-run, so changing one tab
does not recompute the others.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.cache import cached, cached_call
from core.contracts import (DataRef, Plan, Progress, Result, check_params, finite_number,
                            named_rng, param, whole_number)
from core.datasets import COMPAS_POPULATIONS, compas_population, load_adult, load_compas
from core.fairness.causal_ranking import (AT_K_NAMES, MediatorRole, RankingAtK, at_k, compas_ranking_frame,
                                          counterfactual_scores, fit_scm, intersectional_labels, measures,
                                          most_disadvantaged, moving_company, quota_ranking, ranking)
from core.fairness.companion import CompanionPlan, CompanionResult, equal_error_rate_scores
from core.fairness.declared_learning import GroupData, LearningColumns, declared_learning, distinct_people
from core.fairness.learner import cost_sensitive_oracle
from core.fairness.lexifair import (LEARNERS, LevelTask, MergedOracle, bootstrap_group_errors, default_B,
                                    excess_over, group_errors, level_gap, membership_matrix)

DECLARED = "declared"
LEARNING_DATA = {"compas": "COMPAS two-year recidivism", "adult": "UCI Adult income",
                 DECLARED: "The declared data set (Data step) chosen as the plan's data"}
RANKING_DATA = {"compas": "COMPAS: Black and White defendants with at least one prior",
                "moving-company": "Moving company (synthetic, the paper's edge weights)",
                "upload": "Your own table (CSV)"}
GROUP_COLUMNS = {"compas": ("sex", "race", "age band"), "adult": ("sex", "race", "age band")}
MAX_ROUNDS = 20_000
MAX_SYNTHETIC = 200_000
#: Menus the page offers (suggested values: a plan may hold any value within the field's bounds).
ALPHA_MENU = (0.01, 0.02, 0.05, 0.1, 0.2)
ROUND_MENU = (100, 200, 500, 1000, 2000, 5000)
BOUND_MENU = {2.0: "2", 5.0: "5", 20.0: "20", None: "paper: (alpha + j) / alpha"}
K_MENU = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
SYNTHETIC_MENU = (2000, 10_000, 100_000)


def check_declared(plan) -> None:
    """Check every field declared with ``param(...)``: a whole-number field must hold an int (not a bool,
    float or text) and a real-number field a finite number (text that reads as one is stored as a float),
    each within its declared bounds; then the choices, as :func:`core.contracts.check_params` does.
    Messages name the field by its label."""
    for f in dataclasses.fields(plan):
        meta = f.metadata
        value = getattr(plan, f.name)
        if "label" not in meta or value is None or isinstance(f.default, bool):
            continue
        if isinstance(f.default, int):
            whole_number(value, meta["label"], int(meta["low"]), int(meta["high"]))
        elif isinstance(f.default, float):
            object.__setattr__(plan, f.name, finite_number(value, meta["label"], meta.get("low"), meta.get("high")))
    check_params(plan)


# ---------------------------------------------------------------- sub-plans

@dataclass(frozen=True)
class LexifairPlan(Plan):
    """Groups (columns, pairwise intersections, minimum size), levels, slack alpha, the learner,
    rounds, the multiplier bound B (None: the paper's (alpha + j) / alpha) and bootstrap draws."""

    columns: tuple[str, ...] = param(
        ("sex", "race"), label="Form groups from", choices=GROUP_COLUMNS["compas"], kind="multiselect",
        help="The two largest values of each column are groups; with intersections, so are their pairs "
             "(e.g. 'sex = Male & race = Caucasian'). Groups may overlap.")
    pairs: bool = param(True, label="Add pairwise intersections")
    min_size: int = param(50, label="Smallest group (people)", low=1, high=100_000, step=10)
    top_values: int = 2
    levels: int = param(3, label="Levels (1 = minimax)", low=1, high=3, kind="slider")
    alpha: float = param(0.05, label="Slack alpha (error share)", low=1e-4, high=1.0, choices=ALPHA_MENU,
                         kind="select_slider", help="How far later levels may let an earlier level's target slip.")
    rounds: int = param(500, label="Rounds per level", low=10, high=MAX_ROUNDS, choices=ROUND_MENU,
                        kind="select_slider", help="Each round is one call of the weighted classifier.")
    learner: str = param("ftpl", label="Learner", choices=LEARNERS.labels(), kind="radio",
                         help=" ".join(f"{s.label}: {s.help}" for s in LEARNERS.values()))
    bound: float | None = param(2.0, label="Multiplier bound B", low=1.0, high=1e6, choices=BOUND_MENU, kind="select",
                                help="Larger B enforces the bounds more tightly but the game settles more slowly.")
    bootstrap: int = 200

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(str(c) for c in self.columns))
        if not self.columns:
            raise ValueError("Choose at least one column to form groups from.")
        whole_number(self.top_values, "Values per column", 1, 10)
        if self.learner not in LEARNERS:
            raise ValueError(f"The learner must be one of {list(LEARNERS)}.")
        check_declared(self)
        whole_number(self.bootstrap, "Bootstrap draws", 0, 2000)


@dataclass(frozen=True)
class RankingPlan(Plan):
    """The causal model (attributes, mediators in causal order with the attributes each is
    resolving for, outcome), the baseline group (values in attribute order; empty = the most
    disadvantaged group), the direction, the k values and the synthetic generator's size."""

    attributes: tuple[str, ...] = param(("sex", "race"), label="Sensitive attributes", kind="columns")
    mediators: tuple[MediatorRole, ...] = (MediatorRole("priors_count", ()),)
    outcome: str = param("decile_score", label="Score to rank by", kind="column")
    baseline: tuple[str, ...] = ()
    ascending: bool = param(True, label="Rank from", kind="radio",
                            choices={True: "low to high (lower score first)", False: "high to low"})
    ks: tuple[int, ...] = param((100, 200, 500, 1000), label="Top k to measure", choices=K_MENU, kind="multiselect")
    synthetic_rows: int = param(2000, label="Synthetic applicants", low=100, high=MAX_SYNTHETIC,
                                choices=SYNTHETIC_MENU, kind="select_slider")

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", tuple(str(a) for a in self.attributes))
        object.__setattr__(self, "baseline", tuple(str(b) for b in self.baseline))
        if not self.attributes:
            raise ValueError("Choose at least one sensitive attribute.")
        if not all(isinstance(m, MediatorRole) for m in self.mediators):
            raise ValueError("Mediators must be MediatorRole entries.")
        names = [m.name for m in self.mediators]
        used = [*self.attributes, *names, self.outcome]
        if len(set(used)) != len(used):
            raise ValueError("A column can play only one role: sensitive attribute, mediator or outcome.")
        for m in self.mediators:
            unknown = set(m.resolving_for) - set(self.attributes)
            if unknown:
                raise ValueError(f"{m.name} is marked resolving for {sorted(unknown)}, which are not "
                                 "sensitive attributes.")
        if self.baseline and len(self.baseline) != len(self.attributes):
            raise ValueError("Give one baseline value per sensitive attribute, or none.")
        if not self.ks:
            raise ValueError("Give at least one k.")
        ks = tuple(whole_number(k, "Each k", 1, 10_000_000) for k in self.ks)
        object.__setattr__(self, "ks", tuple(sorted(set(ks))))
        check_declared(self)


#: The causal model each bundled ranking table starts from (the paper's choices).
RANKING_DEFAULTS = {
    "compas": RankingPlan(),
    "moving-company": RankingPlan(attributes=("gender", "race"),
                                  mediators=(MediatorRole("lifting", ("gender", "race")),),
                                  outcome="score", ascending=False, ks=(50, 100, 200, 500)),
}


@dataclass(frozen=True)
class GroupFairnessPlan(Plan):
    """Everything behind the page: the ranking's data, the learning data, row cap, seed and the
    three tabs' sub-plans."""

    data: DataRef = field(default_factory=lambda: DataRef("compas"))
    learning: str = param("compas", label="Data for learning", choices=LEARNING_DATA, kind="select",
                          help="Used by the lexicographic fairness and calibration tabs.")
    population: str = param("paper", label="COMPAS population", choices=COMPAS_POPULATIONS, kind="select")
    max_rows: int = 8000
    test_share: float = 0.3
    seed: int = param(0, label="Seed", low=0, high=2 ** 32 - 1,
                      help="Fixes row sampling, the train / held-out split, the learner's draws and the synthetic data.")
    lexifair: LexifairPlan | None = field(default_factory=LexifairPlan)
    ranking: RankingPlan | None = field(default_factory=RankingPlan)
    companion: CompanionPlan | None = field(default_factory=CompanionPlan)
    learning_columns: LearningColumns | None = field(default=None, metadata={"omit_if_none": True})

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataRef) or self.data.source not in RANKING_DATA:
            raise ValueError(f"The ranking data must be one of {list(RANKING_DATA)}.")
        if self.learning not in LEARNING_DATA:
            raise ValueError(f"The learning data must be one of {list(LEARNING_DATA)}.")
        if self.learning == DECLARED:
            if self.data.schema is None:
                raise ValueError("Learning on a declared data set needs one: choose a data set declared on the "
                                 "Data step as the plan's data.")
            if not isinstance(self.learning_columns, LearningColumns):
                raise ValueError("Learning on a declared data set needs its label, positive value and group "
                                 "columns (learning_columns).")
        elif self.learning_columns is not None:
            raise ValueError("learning_columns are for a declared data set only; set learning to 'declared' or "
                             "remove them.")
        if self.population not in COMPAS_POPULATIONS:
            raise ValueError(f"Choose a COMPAS population among {list(COMPAS_POPULATIONS)}.")
        whole_number(self.max_rows, "The row cap", 200, 100_000)
        object.__setattr__(self, "test_share", finite_number(self.test_share, "The held-out share", 0.1, 0.5))
        check_declared(self)
        for name, cls in (("lexifair", LexifairPlan), ("ranking", RankingPlan), ("companion", CompanionPlan)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, cls):
                raise ValueError(f"{name} must be a {cls.__name__} or None.")


# ---------------------------------------------------------------- learning data

def _age_band(age: pd.Series) -> np.ndarray:
    a = pd.to_numeric(age, errors="coerce").to_numpy(dtype=float)
    return np.where(a < 25, "under 25", np.where(a < 45, "25 to 44", "45 and over"))


def learning_frame(plan: GroupFairnessPlan, data: bytes | None = None) -> GroupData:
    """The learning tabs' data: COMPAS (population rows, label two-year reoffence), Adult (label
    income over 50K) or the declared data set (its file's bytes in ``data``; see
    :mod:`core.fairness.declared_learning`), at most ``max_rows`` rows drawn with the plan's seed, split
    train/held-out."""
    rng = named_rng(plan.seed, "group fairness rows")
    if plan.learning == DECLARED:
        from core.datasets import load_microdata
        return declared_learning(load_microdata(plan.data, data), plan.data.schema, plan.learning_columns,
                                 plan.max_rows, plan.test_share, rng)
    if plan.learning == "compas":
        frame = load_compas().iloc[compas_population(plan.population)].reset_index(drop=True)
        y = frame["two_year_recid"].to_numpy(dtype=int)
        num = frame[["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count"]].to_numpy(float)
        cat = np.column_stack([(frame["c_charge_degree"] == "F"), (frame["sex"] == "Male"),
                               (frame["race"] == "African-American"), (frame["race"] == "Caucasian")])
    else:
        frame = load_adult()
        y = frame["income"].astype(str).str.contains(">50K").to_numpy(dtype=int)
        num = np.column_stack([frame["age"], frame["education_num"], frame["hours_per_week"],
                               np.log1p(frame["capital_gain"].astype(float)),
                               np.log1p(frame["capital_loss"].astype(float))]).astype(float)
        cat = np.column_stack([(frame["sex"] == "Male"), (frame["race"] == "White"),
                               frame["marital_status"].astype(str).str.startswith("Married")])
    X = np.column_stack([num, cat.astype(float)])
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    attrs = pd.DataFrame({"sex": frame["sex"].astype(str).to_numpy(), "race": frame["race"].astype(str).to_numpy(),
                          "age band": _age_band(frame["age"])})
    n = len(frame)
    keep = np.sort(rng.choice(n, size=plan.max_rows, replace=False)) if n > plan.max_rows else np.arange(n)
    X, y, attrs = X[keep], y[keep], attrs.iloc[keep].reset_index(drop=True)
    perm = rng.permutation(keep.size)
    cut = int(round(keep.size * plan.test_share))
    return GroupData(X, y, attrs, np.sort(perm[cut:]), np.sort(perm[:cut]))


# ---------------------------------------------------------------- results

#: The headline name of a model's worst-off group error (the report, pin/compare and the page share it).
WORST_OFF_NAME = "worst held-out group error: {model}"
WORST_OFF_COLUMNS = ("model", "rank_in_model", "group", "size", "in_sample_error", "held_out_error",
                     "held_out_low", "held_out_high")


def rank_worst_off(groups: pd.DataFrame) -> pd.Series:
    """Rank of each group within its model, 1 = the largest HELD-OUT error (ties: the earlier group).

    Worst-off is judged on held-out people, the error the model will make on people it was not
    fitted to; the training error is what the lexifair game bounds, and is shown beside it."""
    return groups.groupby("model", sort=False)["held_out_error"].rank(ascending=False, method="first").astype(int)


def interval_words(low: float, high: float, draws: int) -> str:
    """A held-out error's 90% bootstrap interval in words, or that there is none."""
    from core.uncertainty_words import interval
    if draws and np.isfinite(low) and np.isfinite(high):
        return (interval(low, high, "90% bootstrap interval")
                + f" ({draws} resamples of the held-out rows, model fixed)")
    return "one held-out split; no bootstrap asked"


@dataclass
class LexifairResult:
    """Per model x group: errors with bootstrap intervals; per level: eta_hat, gap and bound.

    ``worst`` holds the ``levels`` worst-off groups of each model (largest held-out error first);
    :meth:`worst_off` is its first row per model, the one number per model the page, the headline,
    its uncertainty and the report quote."""

    groups: pd.DataFrame
    levels: pd.DataFrame
    trajectory: pd.DataFrame
    worst: pd.DataFrame

    def worst_off(self) -> pd.DataFrame:
        """One row per model (in fitting order): the group with the largest held-out error, its size,
        training error, held-out error and the held-out error's 90% bootstrap interval (NaN when no
        bootstrap was asked)."""
        first = self.worst[self.worst["rank_in_model"] == 1]
        return first.loc[:, list(WORST_OFF_COLUMNS)].reset_index(drop=True)


@dataclass
class RankingResult:
    """Measures at each k, rank changes of the people near the top, the fitted equations."""

    measures: pd.DataFrame
    rank_changes: pd.DataFrame
    equations: pd.DataFrame
    baseline: dict
    rows: int
    composition: pd.DataFrame
    people: int | None = None      # distinct persons ranked when a person id is declared (None: a row each)

    def ranked_words(self) -> str:
        """How many were ranked: ``"2,548 people on 2,840 rows"`` when a person id is declared, else
        ``"2,840 people"`` (one row each)."""
        if self.people is None:
            return f"{self.rows:,} people"
        return f"{self.people:,} people on {self.rows:,} rows"

    def counterfactual_at_top(self) -> RankingAtK:
        """The counterfactual ranking at its largest k: utility loss, AP@k and the range of the groups'
        selection rates (:func:`core.fairness.causal_ranking.at_k`); the page, ``headline`` and
        ``headline_uncertainty`` read this one view."""
        return at_k(self.measures, "counterfactual")


@dataclass
class GroupFairnessResult(Result):
    plan: GroupFairnessPlan
    lexifair: LexifairResult | None = None
    ranking: RankingResult | None = None
    companion: CompanionResult | None = None

    def ranking_tables(self) -> dict[str, pd.DataFrame]:
        """The ranking tab's tables as reports share them. On bundled data every table as computed. On an
        uploaded table (private) ``ranking_rank_changes`` is left out (it lists people's row numbers with
        their exact outcomes) and ``ranking_composition`` keeps each group's head count only as a band
        such as '50 <= n < 100', without its share (share times any known total gives the count back);
        the page still shows both in full to the curator from ``self.ranking``."""
        if self.ranking is None:
            return {}
        rk = self.ranking
        if not self.plan.data.is_upload:
            return {"ranking_measures": rk.measures, "ranking_rank_changes": rk.rank_changes,
                    "ranking_equations": rk.equations, "ranking_composition": rk.composition}
        from core.report import banded
        composition = banded(rk.composition, "people").drop(columns=["share"])
        return {"ranking_measures": rk.measures, "ranking_equations": rk.equations,
                "ranking_composition": composition}

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every tab's tables (the ranking's as :meth:`ranking_tables` shares them)."""
        out: dict[str, pd.DataFrame] = {}
        if self.lexifair is not None:
            lx = self.lexifair
            groups, worst = lx.groups, lx.worst
            if self.plan.learning == DECLARED:     # a private table: its group head counts only as bands
                from core.report import banded
                groups, worst = banded(groups, "size"), banded(worst, "size")
            out.update({"lexifair_group_errors": groups, "lexifair_levels": lx.levels,
                        "lexifair_eta_trajectory": lx.trajectory, "lexifair_worst_off": worst})
        out.update(self.ranking_tables())
        if self.companion is not None:
            out.update(self.companion.tables())
        return out

    def worst_off(self) -> pd.DataFrame:
        """The worst-off group of each model (largest held-out error; ``LexifairResult.worst_off``) with
        its headline name and its interval in words: the one view the page, ``headline``,
        ``headline_uncertainty``, pin/compare and the stakeholder report read. Empty without the tab."""
        if self.lexifair is None:
            return pd.DataFrame(columns=[*WORST_OFF_COLUMNS, "headline_name", "interval"])
        view = self.lexifair.worst_off()
        draws = self.plan.lexifair.bootstrap
        return view.assign(headline_name=[WORST_OFF_NAME.format(model=m) for m in view["model"]],
                           interval=[interval_words(lo, hi, draws)
                                     for lo, hi in zip(view["held_out_low"], view["held_out_high"])])

    def headline(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.lexifair is not None:
            for row in self.worst_off().itertuples(index=False):
                out[row.headline_name] = float(row.held_out_error)
            for _, row in self.lexifair.levels.iterrows():
                out[f"eta_hat level {int(row['level'])}"] = float(row["eta_hat"])
        if self.ranking is not None:
            out.update(self.ranking.counterfactual_at_top().named())
        if self.companion is not None:
            out.update(self.companion.headline())
        return out

    def headline_uncertainty(self) -> dict[str, str]:
        """Worst-group errors with their bootstrap interval over held-out rows (model fixed); each level's
        eta_hat from one seeded game, with how much its running average still moved at the end; the
        ranking numbers are deterministic on the data (or one seeded synthetic draw)."""
        from core.uncertainty_words import num
        out: dict[str, str] = {}
        if self.lexifair is not None:
            plan = self.plan.lexifair
            for row in self.worst_off().itertuples(index=False):
                out[row.headline_name] = f"{row.group}: {row.interval}"
            traj = self.lexifair.trajectory
            for _, row in self.lexifair.levels.iterrows():
                level = int(row["level"])
                t = traj[traj["level"] == level]
                tail = t[t["round"] > 0.9 * t["round"].max()]["eta_running_average"]
                moved = float(tail.max() - tail.min()) if len(tail) else float("nan")
                out[f"eta_hat level {level}"] = (f"one seeded game of {plan.rounds} rounds, no spread measured; "
                                                 f"its running average moved {num(moved, 2)} over the last 10% of rounds")
        if self.ranking is not None:
            top = self.ranking.counterfactual_at_top()
            text = (f"one synthetic draw (seed {self.plan.seed}), no spread measured"
                    if self.plan.data.source == "moving-company"
                    else "exact (deterministic fit and ranking on the data; no resampling)")
            groups = {"rate_low": top.rate_low_group, "rate_high": top.rate_high_group}
            for attr, name in AT_K_NAMES.items():
                out[name.format(k=top.k)] = f"{groups[attr]}: {text}" if attr in groups else text
        if self.companion is not None:
            out.update(self.companion.headline_uncertainty())
        return out

    def takeaway(self):
        """Each model's worst-off group and its held-out error first; ``eta_hat`` means an average of the
        learner's own loss (0/1 error or logistic loss), so two plans with different learners keep theirs
        side by side. Group names read from an uploaded file are left out."""
        from core.takeaway import Takeaway
        from core.uncertainty_words import num
        named = not self.plan.data.is_upload
        ranked, rules = {}, []
        if self.ranking is not None and named:
            top = self.ranking.counterfactual_at_top()
            ranked[f"the counterfactual ranking at k={top.k}"] = str(top.rate_low_group)
            rules.append("lowest selection rate in a ranking")
        if self.lexifair is None:
            return Takeaway(worst_off=ranked, worst_off_rule="; ".join(rules))
        loss = LEARNERS[self.plan.lexifair.learner].build().loss
        view = self.worst_off()
        answer, worst = [], {}
        for row in view.itertuples(index=False):
            who = f"the group {row.group}" if named else "one group (not named: the data are private)"
            answer.append(f"Under {row.model}, the worst-off group is {who}: {num(row.held_out_error)} of its "
                          f"held-out people are misclassified ({row.interval}).")
            if named:
                worst[str(row.model)] = str(row.group)
        etas = [f"eta_hat level {int(r)}" for r in self.lexifair.levels["level"]]
        units = {**{name: "share of held-out people misclassified" for name in view["headline_name"]},
                 **{name: f"average {loss} (the learner's loss)" for name in etas}}
        return Takeaway(answer=tuple(answer), key=tuple(view["headline_name"]), units=units,
                        meaning={name: f"an average {loss}" for name in etas}, worst_off={**worst, **ranked},
                        worst_off_rule="; ".join(["largest held-out error of a model", *rules]))


# ---------------------------------------------------------------- lexifair sub-run

def _fit_levels(data: GroupData, M: np.ndarray, plan: LexifairPlan, rng: np.random.Generator,
                progress: Progress | None) -> tuple[list[dict], dict[str, np.ndarray], list[pd.DataFrame]]:
    """ERM and levels 1..l with the plan's learner (``LEARNERS``): decision probabilities per row,
    per-level summaries, eta trajectories."""
    fit = data.train
    oracle = MergedOracle(data.X, cost_sensitive_oracle)
    w = np.zeros(data.y.size)
    w[fit] = 1.0 / fit.size
    _, erm = oracle(w * data.y, w * (1.0 - data.y))
    probs = {"ERM (plain accuracy)": erm.astype(float)}
    learner = LEARNERS[plan.learner].build()
    task = LevelTask(data.X, data.y, M, fit, oracle)
    fixed = np.zeros(0)
    rows, trails = [], []
    total = plan.levels * plan.rounds
    for j in range(1, plan.levels + 1):
        B = default_B(plan.alpha, j) if plan.bound is None else plan.bound
        message = f"level {j} of {plan.levels}"
        step = (lambda done, _t, msg, j=j: progress((j - 1) * plan.rounds + done, total, msg)) if progress else None
        out = learner.play(task, j, fixed, B=B, T=plan.rounds, rng=rng, progress=step, message=message)
        thresholds = np.r_[fixed, out.eta_hat]
        nu = level_gap(out.losses, thresholds, out.best, out.freq, B, out.loss_max)
        rows.append({"level": j, "eta_hat": out.eta_hat, "B": B, "nu": nu,
                     "realised_excess": excess_over(out.losses, thresholds),
                     "theory_bound": (j * out.loss_max + 2 * nu) / B, "loss": learner.loss})
        trails.append(pd.DataFrame({"level": j, "round": np.arange(1, out.trail.size + 1) * max(1, plan.rounds // 100),
                                    "eta_running_average": out.trail}))
        probs["minimax (level 1)" if j == 1 else f"lexifair level {j}"] = out.p
        fixed = np.r_[fixed, out.eta_hat + plan.alpha]
    return rows, probs, trails


def bootstrap_rng(seed: int, model: str) -> np.random.Generator:
    """The bootstrap stream of one model's held-out errors, named by the model: its interval does not
    depend on which other models were fitted, or in what order."""
    return named_rng(seed, "lexifair bootstrap", model)


def lexifair_subrun(plan: GroupFairnessPlan, progress: Progress | None = None,
                    raw: bytes | None = None) -> LexifairResult:
    """Groups, the ERM / minimax / lexifair fits and their sorted group errors with intervals (group sizes
    in people: distinct persons when a person id is declared). ``raw``: the declared data set's bytes."""
    lx = plan.lexifair
    data = learning_frame(plan, raw)
    unknown = [c for c in lx.columns if c not in data.attrs]
    if unknown:
        raise ValueError(f"Group columns {unknown} are not available; choose among {list(data.attrs.columns)}.")
    M, names = membership_matrix(data.attrs, lx.columns, pairs=lx.pairs, min_size=lx.min_size,
                                 top_values=lx.top_values, person=data.person)
    if (M[data.train].sum(axis=0) == 0).any() or (M[data.test].sum(axis=0) == 0).any():
        raise ValueError("A group has no members in the training or held-out rows; raise the minimum group size.")
    rng = named_rng(plan.seed, "lexifair game")
    rows, probs, trails = _fit_levels(data, M, lx, rng, progress)
    sizes = data.group_people(M)
    y = data.y.astype(float)
    frames = []
    for model, p in probs.items():
        ins = group_errors(p[data.train], y[data.train], M[data.train])
        out = group_errors(p[data.test], y[data.test], M[data.test])
        if lx.bootstrap:
            lo, hi = bootstrap_group_errors(p[data.test], y[data.test], M[data.test], lx.bootstrap,
                                            bootstrap_rng(plan.seed, model))
        else:
            lo = hi = np.full(len(names), np.nan)
        frames.append(pd.DataFrame({"model": model, "group": names, "size": sizes,
                                    "in_sample_error": ins, "held_out_error": out,
                                    "held_out_low": lo, "held_out_high": hi}))
    groups = pd.concat(frames, ignore_index=True)
    groups["rank_in_model"] = rank_worst_off(groups)
    groups = groups.sort_values(["model", "rank_in_model"], kind="stable").reset_index(drop=True)
    worst = groups[groups["rank_in_model"] <= lx.levels].loc[:, list(WORST_OFF_COLUMNS)].reset_index(drop=True)
    worst = worst.sort_values("model", key=lambda m: m.map({k: i for i, k in enumerate(probs)}),
                              kind="stable").reset_index(drop=True)
    return LexifairResult(groups, pd.DataFrame(rows), pd.concat(trails, ignore_index=True), worst)


# ---------------------------------------------------------------- ranking sub-run

def ranking_table(plan: GroupFairnessPlan, data: bytes | None) -> pd.DataFrame:
    """The table to rank: the COMPAS subset, the synthetic moving company, or the upload."""
    src = plan.data.source
    if src == "compas":
        return compas_ranking_frame(load_compas())
    if src == "moving-company":
        rng = named_rng(plan.seed, "moving company")
        return moving_company(plan.ranking.synthetic_rows, rng)
    from core.datasets import load_microdata
    return load_microdata(plan.data, data)


def ranking_subrun(plan: GroupFairnessPlan, data: bytes | None = None) -> RankingResult:
    """Fit the causal model, score everybody as the baseline group, rank, compare with the original
    and quota rankings at every k."""
    rp = plan.ranking
    frame = ranking_table(plan, data)
    needed = [*rp.attributes, *[m.name for m in rp.mediators], rp.outcome]
    missing = [c for c in needed if c not in frame]
    if missing:
        raise ValueError(f"The table has no column(s) {missing}; its columns are {list(frame.columns)}.")
    schema = plan.data.schema
    person_col = schema.person_id if schema is not None and schema.person_id in frame.columns \
        and schema.person_id not in needed else None
    frame = frame[needed + ([person_col] if person_col else [])].dropna().reset_index(drop=True)
    person = frame[person_col].astype(str).to_numpy() if person_col else None
    for c in [*[m.name for m in rp.mediators], rp.outcome]:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            raise ValueError(f"{c} must be numeric: mediators and the outcome are scores.")
    if len(frame) < 20:
        raise ValueError("The model needs at least 20 complete rows.")
    if rp.ks[-1] > len(frame):
        raise ValueError(f"The largest k ({rp.ks[-1]:,}) exceeds the number of rows ({len(frame):,}).")
    scm = fit_scm(frame, rp.attributes, rp.mediators, rp.outcome)
    if rp.baseline:
        baseline = dict(zip(rp.attributes, rp.baseline))
        for a, v in baseline.items():
            if a in scm.coding.levels and v not in scm.coding.levels[a]:
                raise ValueError(f"{v!r} is not a value of {a}; choose among {list(scm.coding.levels[a])}.")
            if a not in scm.coding.levels:
                baseline[a] = finite_number(v, f"The baseline value of {a}", -1e12, 1e12)
    else:
        baseline = most_disadvantaged(frame, rp.attributes, rp.outcome, rp.ascending, scm.coding)
    cf = counterfactual_scores(scm, frame, baseline)
    y = scm.observed[rp.outcome]
    groups = intersectional_labels(frame, rp.attributes)
    orders = {"original": ranking(y, rp.ascending), "counterfactual": ranking(cf[rp.outcome], rp.ascending),
              "quota": quota_ranking(y, groups, rp.ascending)}
    table = measures(orders, y, groups, rp.ks, rp.ascending)
    n = y.size
    rank_of = {}
    for name in ("original", "counterfactual"):
        r = np.empty(n, dtype=np.int64)
        r[orders[name]] = np.arange(1, n + 1)
        rank_of[name] = r
    near = np.flatnonzero((rank_of["original"] <= rp.ks[-1]) | (rank_of["counterfactual"] <= rp.ks[-1]))
    changes = pd.DataFrame({"row": near, "group": groups[near], "original_rank": rank_of["original"][near],
                            "counterfactual_rank": rank_of["counterfactual"][near], "score": y[near],
                            "counterfactual_score": cf[rp.outcome][near]}).sort_values("original_rank")
    eq_rows = [{"variable": var, "term": i, "coefficient": float(c)}
               for var, coef in scm.coef.items() for i, c in enumerate(coef)]
    labels, counts = np.unique(groups, return_counts=True)
    if person is not None:       # people are persons: distinct ids per group
        pairs = pd.DataFrame({"group": groups, "person": person}).drop_duplicates()
        counts = pairs.groupby("group")["person"].size().reindex(labels).to_numpy()
    total = n if person is None else distinct_people(person, n)
    composition = pd.DataFrame({"group": labels, "people": counts, "share": counts / total})
    return RankingResult(table, changes.reset_index(drop=True), pd.DataFrame(eq_rows),
                         {a: (v if isinstance(v, str) else float(v)) for a, v in baseline.items()}, n, composition,
                         None if person is None else total)


# ---------------------------------------------------------------- companion sub-run

def companion_subrun(plan: GroupFairnessPlan, raw: bytes | None = None) -> CompanionResult:
    """The calibration / equal-error companion on the declared score of a declared data set, else on a
    plain logistic risk score of the learning data. ``raw``: the declared data set's bytes."""
    data = learning_frame(plan, raw)
    if data.score is not None:
        return equal_error_rate_scores(data.score, data.y, data.attrs, plan.companion)
    oracle = cost_sensitive_oracle(data.X)
    w = np.zeros(data.y.size)
    w[data.train] = 1.0 / data.train.size
    params, _ = oracle(w * data.y, w * (1.0 - data.y))
    score = 0.5 * (1.0 + np.tanh(0.5 * (data.X @ params[:-1] + params[-1])))
    return equal_error_rate_scores(score, data.y, data.attrs, plan.companion)


_lexifair_cached = cached_call(lexifair_subrun)
_ranking_cached = cached_call(ranking_subrun)
_companion_cached = cached_call(companion_subrun)


def _tab_plan(plan: GroupFairnessPlan, **keep) -> GroupFairnessPlan:
    """The plan with only the fields one tab depends on (others at their defaults), as a cache key."""
    return GroupFairnessPlan(lexifair=None, ranking=None, companion=None, **keep)


@cached
def run_group_fairness(plan: GroupFairnessPlan, data: bytes | None = None, *,
                       progress: Progress | None = None) -> GroupFairnessResult:
    """Each requested tab as its own cached sub-run."""
    if not isinstance(plan, GroupFairnessPlan):
        raise ValueError("run_group_fairness needs a GroupFairnessPlan.")
    learning = dict(learning=plan.learning, population=plan.population, max_rows=plan.max_rows,
                    test_share=plan.test_share, seed=plan.seed)
    raw = None
    if plan.learning == DECLARED:     # the learning tabs read the plan's declared data set
        learning.update(data=plan.data, learning_columns=plan.learning_columns)
        raw = data
    lex = rank = comp = None
    if plan.lexifair is not None:
        lex = _lexifair_cached(_tab_plan(plan, **learning).replace(lexifair=plan.lexifair), progress=progress,
                               raw=raw)
    if plan.ranking is not None:
        rank = _ranking_cached(_tab_plan(plan, data=plan.data, seed=plan.seed).replace(ranking=plan.ranking),
                               data if plan.data.is_upload else None)
    if plan.companion is not None:
        comp = _companion_cached(_tab_plan(plan, **learning).replace(companion=plan.companion), raw)
    return GroupFairnessResult(plan, lex, rank, comp)
