"""COMPAS as learning data for the pairwise-fair learner (rows in ``load_compas()`` order).

Individuals are identified by their positional row index in ``core.datasets.load_compas()``;
pair constraints from the elicitation store use the same indices.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from core.datasets import load_compas

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
    seed: int = 0
    uses_protected: bool = True
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        """Number of individuals."""
        return int(self.y.shape[0])


def _design(frame: pd.DataFrame, use_protected: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """One-hot categorical features (first level dropped), numeric ones as is, then standardise."""
    cats = [c for c in CATEGORICAL_FEATURES if use_protected or c not in PROTECTED_FEATURES]
    numeric = frame[list(NUMERIC_FEATURES)].astype(float)
    numeric["log1p_priors"] = np.log1p(numeric["priors_count"])
    dummies = pd.get_dummies(frame[cats].astype(str), drop_first=True, dtype=float)
    design = pd.concat([numeric, dummies], axis=1)
    values = design.to_numpy(dtype=float)
    sd = values.std(axis=0)
    sd[sd == 0] = 1.0
    values = (values - values.mean(axis=0)) / sd
    return values, tuple(design.columns)


@lru_cache(maxsize=8)
def _cached(seed: int, use_protected: bool, test_share: float) -> LearningData:
    frame = load_compas()
    X, names = _design(frame, use_protected)
    y = frame[LABEL].to_numpy(dtype=int)
    groups = pd.DataFrame({"race": frame["race"].astype(str).to_numpy(),
                           "sex": frame["sex"].astype(str).to_numpy()})
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(frame))
    n_test = int(round(test_share * len(frame)))
    test = np.sort(order[:n_test])
    train = np.sort(order[n_test:])
    X.setflags(write=False)
    y.setflags(write=False)
    return LearningData(X=X, y=y, groups=groups, feature_names=names, train=train, test=test,
                        seed=seed, uses_protected=use_protected,
                        meta={"source": "ProPublica COMPAS two-year file (bundled)",
                              "label": LABEL, "test_share": test_share})


def compas_learning_data(seed: int = 0, use_protected: bool = True,
                         test_share: float = 0.3) -> LearningData:
    """COMPAS rows as (X, y, groups) with a seeded split of individuals into train and test."""
    if not 0.0 <= test_share < 1.0:
        raise ValueError("test_share must be in [0, 1); choose a held-out share such as 0.3.")
    return _cached(int(seed), bool(use_protected), float(test_share))
