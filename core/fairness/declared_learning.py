"""The data of the learning tabs (lexicographic fairness, calibration): what a declared data set gives them.

A data set declared on the Data step (:class:`~core.intake.schema.DataSchema`) is cleaned by its schema
(:func:`core.datasets.load_microdata`); :class:`LearningColumns` names, from its columns, the label (and the
label value counted as positive), the group columns, an optional score to post-process and the features
(empty: every other kept column; numbers standardised, categories one-hot). When the schema declares a
person id, the rows of one person stay together: the row cap and the train / held-out split draw whole
people, and every count of people (group sizes) counts distinct persons, not rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.contracts import Plan

__all__ = ["GroupData", "LearningColumns", "declared_learning", "distinct_people"]


@dataclass(frozen=True)
class LearningColumns(Plan):
    """Which columns of a declared data set the learning tabs use: ``label`` (its value ``positive`` is
    the positive class, e.g. reoffended = "Yes"), the ``groups`` compared, an optional ``score`` (a number
    column in [0, 1], or within its public bounds, post-processed by the calibration tab; "" fits a
    logistic score) and the ``features`` (empty: every other kept column but the person id)."""

    label: str = ""
    positive: str = ""
    groups: tuple[str, ...] = ()
    score: str = ""
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("label", "positive", "score"):
            object.__setattr__(self, name, str(getattr(self, name)).strip())
        for name in ("groups", "features"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ValueError(f"The {name} must be a list of column names, not one text.")
            object.__setattr__(self, name, tuple(str(c) for c in value))
        if not self.label:
            raise ValueError("Choose the label column (what is predicted) of the declared data set.")
        if not self.positive:
            raise ValueError(f"Choose the value of {self.label} that counts as the positive outcome.")
        if not self.groups:
            raise ValueError("Choose at least one group column of the declared data set.")
        used = {self.label, self.score} - {""}
        clash = sorted(used & (set(self.groups) | set(self.features)))
        if clash or self.label == self.score:
            raise ValueError(f"A column plays one role only: {clash or [self.label]} cannot be the label or score "
                             "and also a group or feature.")


@dataclass(frozen=True)
class GroupData:
    """Standardised features, labels, the group columns (plain strings), the train/test split, the person
    of each row (codes; None when each row is one person) and a declared score (None: fit one)."""

    X: np.ndarray
    y: np.ndarray
    attrs: pd.DataFrame
    train: np.ndarray
    test: np.ndarray
    person: np.ndarray | None = None
    score: np.ndarray | None = None

    def group_people(self, M: np.ndarray) -> np.ndarray:
        """People in each group (a column of the membership matrix ``M``): distinct persons when a person id
        is declared, else rows."""
        if self.person is None:
            return np.asarray(M, dtype=bool).sum(axis=0)
        return np.array([np.unique(self.person[np.asarray(M[:, j], dtype=bool)]).size for j in range(M.shape[1])],
                        dtype=np.int64)


def distinct_people(person: np.ndarray | None, rows: int) -> int:
    """Distinct persons among codes ``person`` (``rows`` when no person id is declared)."""
    return rows if person is None else int(np.unique(person).size)


def _standardise(X: np.ndarray) -> np.ndarray:
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _features(frame: pd.DataFrame, names: tuple[str, ...]) -> np.ndarray:
    """Numbers as they are, categories one-hot (every label its own column), standardised together."""
    parts = []
    for name in names:
        col = frame[name]
        if pd.api.types.is_numeric_dtype(col) and not isinstance(col.dtype, pd.CategoricalDtype):
            parts.append(col.to_numpy(dtype=float)[:, None])
        else:
            parts.append(pd.get_dummies(col.astype(str)).to_numpy(dtype=float))
    if not parts:
        raise ValueError("The declared data set has no feature column left; choose features.")
    return _standardise(np.column_stack(parts))


def _score(frame: pd.DataFrame, name: str, schema) -> np.ndarray:
    """The declared score in [0, 1]: as it is, or rescaled by its public bounds."""
    if not pd.api.types.is_numeric_dtype(frame[name]):
        raise ValueError(f"The score {name!r} must be a number column.")
    s = frame[name].to_numpy(dtype=float)
    if s.size and s.min() >= 0.0 and s.max() <= 1.0:
        return s
    col = next((c for c in schema.columns if c.name == name), None)
    if col is None or col.bounds is None:
        raise ValueError(f"The score {name!r} runs outside [0, 1] and has no public bounds to rescale it by; "
                         "declare its bounds on the Data step, or let the tab fit a score.")
    low, high = col.bounds
    return np.clip((s - low) / (high - low), 0.0, 1.0)


def split_people(person: np.ndarray | None, n: int, max_rows: int, test_share: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keep, train, test)``: row indices kept (at most ``max_rows``), and positions among them of the
    training and held-out rows. Whole people are drawn: people in a random order are kept while their rows
    fit under the cap, and a ``test_share`` of the kept people (rounded) are held out."""
    codes = np.arange(n) if person is None else pd.factorize(person)[0]
    people = codes.max(initial=-1) + 1
    order = rng.permutation(people)
    sizes = np.bincount(codes, minlength=people)[order]
    kept_people = order[np.cumsum(sizes) <= max_rows]
    keep = np.flatnonzero(np.isin(codes, kept_people))
    held = kept_people[:int(round(kept_people.size * test_share))]
    is_test = np.isin(codes[keep], held)
    return keep, np.flatnonzero(~is_test), np.flatnonzero(is_test)


def declared_learning(frame: pd.DataFrame, schema, cols: LearningColumns, max_rows: int, test_share: float,
                      rng: np.random.Generator) -> GroupData:
    """The learning tabs' data from a cleaned declared data set (see the module docstring)."""
    person_col = schema.person_id if schema.person_id in frame.columns else None
    needed = [cols.label, *cols.groups, *([cols.score] if cols.score else []), *cols.features]
    absent = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if absent:
        raise ValueError(f"The declared data set {schema.name!r} has no column(s) {absent}; its columns are "
                         f"{[c for c in frame.columns if c != person_col]}.")
    label = frame[cols.label].astype(str).to_numpy()
    if cols.positive not in set(label):
        raise ValueError(f"{cols.positive!r} is not a value of {cols.label}; choose one of "
                         f"{sorted(set(label))[:20]}.")
    y = (label == cols.positive).astype(int)
    if y.min() == y.max():
        raise ValueError(f"Every row of {cols.label} is {cols.positive!r}: a label needs both outcomes.")
    features = cols.features or tuple(c for c in frame.columns
                                      if c not in {cols.label, cols.score, person_col})
    X = _features(frame, features)
    attrs = pd.DataFrame({g: frame[g].astype(str).to_numpy() for g in cols.groups})
    score = _score(frame, cols.score, schema) if cols.score else None
    person = frame[person_col].astype(str).to_numpy() if person_col else None
    keep, train, test = split_people(person, len(frame), max_rows, test_share, rng)
    return GroupData(X[keep], y[keep], attrs.iloc[keep].reset_index(drop=True), train, test,
                     None if person is None else pd.factorize(person[keep])[0],
                     None if score is None else score[keep])
