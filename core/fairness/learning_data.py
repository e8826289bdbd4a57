"""COMPAS as learning data for the pairwise-fair learner.

Individuals are identified everywhere by their positional row index in
``core.datasets.load_compas()`` (all 7,214 rows); pair constraints from the elicitation store use
those indices. The learner works on a population (``core.datasets.COMPAS_POPULATIONS``): by default
the elicitation paper's 5,829 people. ``LearningData.rows`` maps the learner's positions back to
file rows, and ``LearningData.local_constraints`` maps a constraint table the other way, dropping
pairs with someone outside the population.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from core.contracts import named_rng
from core.datasets import COMPAS_POPULATIONS, compas_population, load_compas

#: The eight features shown on pair cards; the learner sees the same ones (spec section 5:
#: whether the model sees race and sex is a normative choice, so it is a switch).
NUMERIC_FEATURES = ("age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count")
CATEGORICAL_FEATURES = ("sex", "race", "c_charge_degree")
PROTECTED_FEATURES = ("sex", "race")
LABEL = "two_year_recid"


@dataclass(frozen=True)
class LearningData:
    """Standardised feature matrix, labels, group frame and a train/test split of individuals."""

    X: np.ndarray                 # (n, d) float64, standardised, no intercept column
    y: np.ndarray                 # (n,) int 0/1, two-year recidivism (positive = reoffended)
    groups: pd.DataFrame          # columns race, sex (strings), row i = individual i
    feature_names: tuple[str, ...]
    train: np.ndarray             # positional indices of training individuals (sorted)
    test: np.ndarray              # positional indices of held-out individuals (sorted)
    rows: np.ndarray              # row position in load_compas() of each individual (sorted)
    population: str = "paper"
    seed: int = 0
    uses_protected: bool = True
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        """Number of individuals."""
        return int(self.y.shape[0])

    def local_constraints(self, constraints: pd.DataFrame) -> tuple[pd.DataFrame, int]:
        """The constraint table with i, j turned from file rows into learner positions, and the
        number of pairs dropped because someone in them is outside this population."""
        where = np.full(int(self.rows.max()) + 1 if self.rows.size else 0, -1, dtype=np.int64)
        where[self.rows] = np.arange(self.rows.size)
        i = pd.to_numeric(constraints["i"], errors="coerce").to_numpy(dtype=float)
        j = pd.to_numeric(constraints["j"], errors="coerce").to_numpy(dtype=float)
        if np.isnan(i).any() or np.isnan(j).any() or (i < 0).any() or (j < 0).any() \
                or (i != np.round(i)).any() or (j != np.round(j)).any():
            raise ValueError("Pair indices i and j must be whole row numbers of the COMPAS file.")
        i, j = i.astype(np.int64), j.astype(np.int64)
        inside = lambda k: np.where(k < where.size, where[np.minimum(k, where.size - 1)], -1)  # noqa: E731
        li, lj = inside(i), inside(j)
        keep = (li >= 0) & (lj >= 0)
        local = constraints.loc[keep].copy()
        local["i"], local["j"] = li[keep], lj[keep]
        return local.reset_index(drop=True), int((~keep).sum())


def design_frame(frame: pd.DataFrame, use_protected: bool) -> pd.DataFrame:
    """The unscaled design: numeric features, log1p of priors, categorical ones one-hot (first level dropped)."""
    cats = [c for c in CATEGORICAL_FEATURES if use_protected or c not in PROTECTED_FEATURES]
    numeric = frame[list(NUMERIC_FEATURES)].astype(float)
    numeric["log1p_priors"] = np.log1p(numeric["priors_count"])
    dummies = pd.get_dummies(frame[cats].astype(str), drop_first=True, dtype=float)
    return pd.concat([numeric, dummies], axis=1)


def _design(frame: pd.DataFrame, use_protected: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """One-hot categorical features (first level dropped), numeric ones as is, then standardise."""
    design = design_frame(frame, use_protected)
    values = design.to_numpy(dtype=float)
    sd = values.std(axis=0)
    sd[sd == 0] = 1.0
    values = (values - values.mean(axis=0)) / sd
    return values, tuple(design.columns)


def with_constraint_people(data: LearningData, people: pd.DataFrame) -> tuple[LearningData, np.ndarray]:
    """The learning data with `people` appended after its individuals, and the rows to fit.

    The spec's zero-cost augmentation (4.4): constraint people who are not training points (e.g.
    a private synthetic copy's) join the cost-sensitive data with c0 = c1 = 0, so only their pair
    multipliers act. They are scaled with the real individuals' means and spreads (the real rows'
    features are unchanged); categories the real design lacks get zeros on every dummy. Their
    labels are placeholders (0) that no cost reads: the returned fit rows are the real positions
    0..n-1 (pass ``data.train`` instead to hold people out), and a constraint on people k, l of
    `people` names positions ``data.n + k`` and ``data.n + l``.
    """
    missing = set(NUMERIC_FEATURES + CATEGORICAL_FEATURES) - set(people.columns)
    if missing:
        raise ValueError(f"Constraint people need the learner's features; missing {sorted(missing)}.")
    if len(people) == 0:
        raise ValueError("No constraint people to add.")
    real = design_frame(load_compas().iloc[data.rows].reset_index(drop=True), data.uses_protected)
    if tuple(real.columns) != data.feature_names:
        raise ValueError("The learning data's features do not match the COMPAS design; rebuild it.")
    raw = real.to_numpy(dtype=float)
    mean, sd = raw.mean(axis=0), raw.std(axis=0)
    sd[sd == 0] = 1.0
    extra = design_frame(people.reset_index(drop=True), data.uses_protected)
    extra = extra.reindex(columns=list(real.columns), fill_value=0.0).to_numpy(dtype=float)
    if not np.isfinite(extra).all():
        raise ValueError("Constraint people's features must be finite numbers.")
    X = np.vstack([data.X, (extra - mean) / sd])
    y = np.concatenate([data.y, np.zeros(len(extra), dtype=data.y.dtype)])
    groups = pd.concat([data.groups, pd.DataFrame({"race": people["race"].astype(str).to_numpy(),
                                                   "sex": people["sex"].astype(str).to_numpy()})],
                       ignore_index=True)
    X.setflags(write=False)
    y.setflags(write=False)
    augmented = LearningData(X=X, y=y, groups=groups, feature_names=data.feature_names, train=data.train,
                             test=data.test, rows=data.rows, population=data.population, seed=data.seed,
                             uses_protected=data.uses_protected,
                             meta={**data.meta, "constraint_people": int(len(extra))})
    return augmented, np.arange(data.n, dtype=np.int64)


@lru_cache(maxsize=8)
def _cached(seed: int, use_protected: bool, test_share: float, population: str) -> LearningData:
    rows = compas_population(population)
    frame = load_compas().iloc[rows].reset_index(drop=True)
    X, names = _design(frame, use_protected)
    y = frame[LABEL].to_numpy(dtype=int)
    groups = pd.DataFrame({"race": frame["race"].astype(str).to_numpy(),
                           "sex": frame["sex"].astype(str).to_numpy()})
    rng = named_rng(seed, "held-out people")
    order = rng.permutation(len(frame))
    n_test = int(round(test_share * len(frame)))
    test = np.sort(order[:n_test])
    train = np.sort(order[n_test:])
    X.setflags(write=False)
    y.setflags(write=False)
    rows.setflags(write=False)
    return LearningData(X=X, y=y, groups=groups, feature_names=names, train=train, test=test,
                        rows=rows, population=population, seed=seed, uses_protected=use_protected,
                        meta={"source": "ProPublica COMPAS two-year file (bundled)",
                              "population": COMPAS_POPULATIONS[population],
                              "label": LABEL, "test_share": test_share})


def compas_learning_data(seed: int = 0, use_protected: bool = True, test_share: float = 0.3,
                         population: str = "paper") -> LearningData:
    """A COMPAS population as (X, y, groups) with a seeded split of individuals into train and test."""
    if not 0.0 <= test_share < 1.0:
        raise ValueError("test_share must be in [0, 1); choose a held-out share such as 0.3.")
    if population not in COMPAS_POPULATIONS:
        raise ValueError(f"Unknown COMPAS population {population!r}; choose one of {list(COMPAS_POPULATIONS)}.")
    return _cached(int(seed), bool(use_protected), float(test_share), population)
