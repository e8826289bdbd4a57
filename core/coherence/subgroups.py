"""Sub-populations audited for coherence: levels and intersections of columns, and custom predicates.

Membership is read from the full records (coherence spec Sec. 1.1: a sub-population is a
predicate on full records, not on the lens). Custom subgroups are structured conditions (values
of a column, or a numeric range), never expression strings.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from core.contracts import Plan


@dataclass(frozen=True)
class Subgroup:
    """A named sub-population: a boolean mask over the full records."""
    name: str
    mask: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True)
class Condition(Plan):
    """One condition of a custom subgroup: ``column`` is one of ``values``, or lies in [low, high]."""
    column: str
    values: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValueError("A subgroup condition needs a column.")
        object.__setattr__(self, "values", tuple(str(v) for v in self.values))
        is_range = self.low is not None or self.high is not None
        if is_range:
            if self.low is None or self.high is None:
                raise ValueError(f"The range for {self.column!r} needs both ends.")
            if not (math.isfinite(self.low) and math.isfinite(self.high)):
                raise ValueError(f"The range for {self.column!r} must have finite ends.")
            if self.low > self.high:
                raise ValueError(f"Range for {self.column!r} is empty ({self.low:g} > {self.high:g}).")
            if self.values:
                raise ValueError(f"Give either values or a range for {self.column!r}, not both.")
        elif not self.values:
            raise ValueError(f"Choose at least one value of {self.column!r}.")

    @property
    def is_range(self) -> bool:
        return self.low is not None

    def describe(self) -> str:
        if self.is_range:
            return f"{self.low:g} <= {self.column} <= {self.high:g}"
        if len(self.values) == 1:
            return f"{self.column}={self.values[0]}"
        return f"{self.column} in {{{', '.join(self.values)}}}"


@dataclass(frozen=True)
class CustomSubgroup(Plan):
    """A named AND of conditions (the name spells the conditions out when left empty)."""
    name: str = ""
    conditions: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not self.conditions:
            raise ValueError("A custom subgroup needs at least one condition.")
        columns = [c.column for c in self.conditions]
        if len(set(columns)) != len(columns):
            raise ValueError("Each column may appear once in a custom subgroup; merge its values.")
        object.__setattr__(self, "name", str(self.name).strip())

    @property
    def label(self) -> str:
        return self.name or " & ".join(c.describe() for c in self.conditions)


def build_subgroups(df: pd.DataFrame, columns: Sequence[str], order: int = 2,
                    include_everyone: bool = True) -> list[Subgroup]:
    """Every level of each column plus intersections of up to ``order`` columns (observed cells)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"Subgroup column(s) {missing} are not in the data.")
    if order < 1:
        raise ValueError("The intersection order must be at least 1.")
    out = [Subgroup("everyone", np.ones(len(df), bool))] if include_everyone else []
    codes = {c: df[c].astype("category") for c in columns}
    for k in range(1, min(order, len(columns)) + 1):
        for combo in itertools.combinations(columns, k):
            cats = [codes[c].cat.codes.to_numpy(np.int64) for c in combo]
            sizes = [len(codes[c].cat.categories) for c in combo]
            flat = np.ravel_multi_index(tuple(cats), sizes)
            for cell in np.unique(flat):
                idx = np.unravel_index(cell, sizes)
                name = " & ".join(f"{c}={codes[c].cat.categories[i]}" for c, i in zip(combo, idx))
                out.append(Subgroup(name, flat == cell))
    return out


def custom_subgroup(df: pd.DataFrame, custom: CustomSubgroup) -> Subgroup:
    """The people meeting every condition of ``custom``.

    Unknown columns or values raise ValueError, so a typo never becomes an empty group.
    """
    mask = np.ones(len(df), bool)
    for cond in custom.conditions:
        if cond.column not in df.columns:
            raise ValueError(f"Subgroup column {cond.column!r} is not in the data.")
        col = df[cond.column]
        if cond.is_range:
            if not pd.api.types.is_numeric_dtype(col):
                raise ValueError(f"{cond.column!r} is not numeric; choose values instead of a range.")
            mask &= col.between(cond.low, cond.high).to_numpy()
            continue
        levels = col.cat.categories if isinstance(col.dtype, pd.CategoricalDtype) else col.dropna().unique()
        known = {str(v): v for v in levels}
        unknown = [v for v in cond.values if v not in known]
        if unknown:
            raise ValueError(f"{unknown} are not values of {cond.column!r}.")
        mask &= col.isin([known[v] for v in cond.values]).to_numpy()
    return Subgroup(custom.label, mask)
