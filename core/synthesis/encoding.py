"""Turn category frames into integer-code frames with a public domain, and back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd


def encode_categories(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int], dict[str, list]]:
    """Integer codes, domain sizes and labels of every column.

    Category columns keep their full declared categories (the public domain), so values absent
    from the data still count; other columns use their sorted observed values. Missing values
    are rejected because the synthesizers model complete rows only.
    """
    if df.empty or df.shape[1] == 0:
        raise ValueError("The table is empty; choose a data set with rows and at least one column.")
    codes, sizes, labels = {}, {}, {}
    for col in df.columns:
        series = df[col]
        if series.isna().any():
            raise ValueError(f"Column {col!r} has missing values; choose another column, or drop or fill them.")
        cat = series if isinstance(series.dtype, pd.CategoricalDtype) else series.astype("category")
        labels[col] = list(cat.cat.categories)
        sizes[col] = len(labels[col])
        codes[col] = cat.cat.codes.to_numpy(dtype=np.int64)
    return pd.DataFrame(codes, index=df.index), sizes, labels


def decode_categories(codes_df: pd.DataFrame, labels: Mapping[str, list]) -> pd.DataFrame:
    """Category frame from integer codes and the labels returned by ``encode_categories``."""
    out = {}
    for col in codes_df.columns:
        cats = list(labels[col])
        codes = codes_df[col].to_numpy(dtype=np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= len(cats)):
            raise ValueError(f"Column {col!r} has codes outside its domain of {len(cats)} labels.")
        out[col] = pd.Categorical.from_codes(codes, categories=cats)
    return pd.DataFrame(out, index=codes_df.index)


def check_codes(df: pd.DataFrame, domain: Mapping[str, int]) -> np.ndarray:
    """The frame as an (n, d) int64 array after checking every code lies in its domain."""
    missing = [c for c in df.columns if c not in domain]
    if missing:
        raise ValueError(f"No domain size given for column(s) {missing}.")
    arr = df.to_numpy(dtype=np.int64, copy=False) if len(df.columns) else np.zeros((len(df), 0), np.int64)
    sizes = np.array([int(domain[c]) for c in df.columns], dtype=np.int64)
    if np.any(sizes < 1):
        raise ValueError("Every domain size must be at least 1.")
    if arr.size and (arr.min() < 0 or np.any(arr.max(axis=0) >= sizes)):
        raise ValueError("Some codes fall outside the declared domain; codes must be 0..size-1.")
    return arr


def identifier_like(df: pd.DataFrame, min_rows: int = 20) -> list[str]:
    """Columns that look like identifiers: a distinct value in (almost) every row.

    Such a column carries no shared structure to synthesise and, if kept, its category list is a
    list of the people in the data; pages warn and never pre-select it.
    """
    n = len(df)
    if n < min_rows:
        return []
    return [c for c in df.columns if df[c].nunique(dropna=True) >= 0.95 * n]


DEFAULT_BINS = 8
"""Equal-width bins of a numeric column when its public range comes without a bin count."""


@dataclass(frozen=True)
class ColumnUnits:
    """How a numeric column returns from its category codes to its own units.

    ``edges``: the public bin edges of a binned column (a value is drawn uniformly within its bin), or
    None for a column kept with one category per value (the value itself comes back). ``dtype``: the
    original dtype's name; integer dtypes come back as whole numbers.
    """

    edges: tuple[float, ...] | None
    dtype: str

    @property
    def whole(self) -> bool:
        return np.dtype(self.dtype).kind in "iu"


def bin_numbers(values, edges) -> np.ndarray:
    """Bin codes 0..len(edges)-2 of ``values`` for bins closed on the right, the first also on the left
    (the bins of ``pandas.cut(..., include_lowest=True)``); values outside the edges go to the end bins."""
    edges = np.asarray(edges, dtype=float)
    codes = np.searchsorted(edges, np.asarray(values, dtype=float), side="left") - 1
    return np.clip(codes, 0, edges.size - 2).astype(np.int64)


def unbin_codes(codes, edges, whole: bool, rng: np.random.Generator) -> np.ndarray:
    """A value per code drawn uniformly within its bin (edges[c], edges[c + 1]], vectorised, from ``rng``.

    Whole-number columns draw uniformly among the integers of the bin (the first bin includes its low
    edge); a bin narrower than one step with no integer inside gives its rounded draw, kept within the
    integers of the outer edges. Every value lies within [edges[0], edges[-1]] and re-bins to its code
    whenever its bin holds a value of the column's kind.
    """
    edges = np.asarray(edges, dtype=float)
    codes = np.asarray(codes, dtype=np.int64)
    low, high = edges[codes], edges[codes + 1]
    u = rng.random(codes.size)
    if not whole:
        return np.clip(high - u * (high - low), edges[0], edges[-1])   # in (low, high]: right-closed bins
    first = np.where(codes == 0, np.ceil(low), np.floor(low) + 1)       # smallest integer of the bin
    last = np.floor(high)                                               # largest integer of the bin
    count = last - first + 1
    inside = first + np.minimum(np.floor(u * np.maximum(count, 1)), np.maximum(count - 1, 0))
    rounded = np.clip(np.round(high - u * (high - low)), np.ceil(edges[0]), np.floor(edges[-1]))
    return np.where(count >= 1, inside, rounded)


def numeric_view(df: pd.DataFrame, bounds: Mapping[str, tuple[float, float]] | None = None,
                 max_levels: int = 40, bins: int | Mapping[str, int] = DEFAULT_BINS,
                 ) -> tuple[pd.DataFrame, list[str], dict[str, ColumnUnits]]:
    """Every usable column as a category, the notes on what was done, and how numeric columns come back.

    A numeric column with a PUBLIC range in ``bounds`` is cut into equal-width bins over it (``bins``:
    one count for all, or a count per column, ``DEFAULT_BINS`` when a column has none); values outside
    are clipped into it. Other columns with at most ``max_levels`` values are kept as they are. A wider
    numeric column without public bounds is left out, because bins read from the data's own minimum and
    maximum would publish them; wide text columns are left out too. The returned units map every kept
    numeric column to its bin edges (or None: one category per value) and its dtype.
    """
    bounds = dict(bounds or {})
    out, notes, units = {}, [], {}
    for col in df.columns:
        s = df[col]
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and col in bounds:
            lo, hi = (float(b) for b in bounds[col])
            count = int(bins.get(col, DEFAULT_BINS) if isinstance(bins, Mapping) else bins)
            edges = np.linspace(lo, hi, count + 1)
            cut = pd.cut(s.clip(lo, hi), bins=edges, include_lowest=True)
            out[col] = cut.cat.rename_categories([str(c) for c in cut.cat.categories])
            units[col] = ColumnUnits(tuple(float(e) for e in edges), str(s.dtype))
            notes.append(f"{col}: {count} equal-width bins over the declared public range [{lo:g}, {hi:g}]; "
                         "synthetic values are drawn within their bins, in the column's units.")
        elif isinstance(s.dtype, pd.CategoricalDtype) or s.nunique(dropna=True) <= max_levels:
            out[col] = s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")
            if pd.api.types.is_numeric_dtype(s) and not isinstance(s.dtype, pd.CategoricalDtype):
                units[col] = ColumnUnits(None, str(s.dtype))
        elif numeric:
            notes.append(f"{col}: left out. It is numeric with more than {max_levels} distinct values; give public bounds "
                         "(a range known without looking at the data) to bin it.")
        else:
            notes.append(f"{col}: left out (more than {max_levels} distinct text values).")
    if not out:
        raise ValueError("No column can be used as a category; upload a table with categorical columns "
                         "or give public bounds for its numeric columns.")
    return pd.DataFrame(out, index=df.index), notes, units


def categorical_view(df: pd.DataFrame, bounds: Mapping[str, tuple[float, float]] | None = None,
                     max_levels: int = 40, bins: int | Mapping[str, int] = DEFAULT_BINS
                     ) -> tuple[pd.DataFrame, list[str]]:
    """The category frame and notes of :func:`numeric_view` (without the units)."""
    view, notes, _ = numeric_view(df, bounds, max_levels, bins)
    return view, notes


def to_units(synth: pd.DataFrame, units: Mapping[str, ColumnUnits], rng: np.random.Generator) -> pd.DataFrame:
    """The synthetic category frame with each numeric column back in its units and dtype.

    Binned columns get a value drawn uniformly within their bin (:func:`unbin_codes`, one draw per row,
    columns in frame order from ``rng``); columns kept one category per value get that value back.
    Columns without units (categories) are returned unchanged.
    """
    out = {}
    for col in synth.columns:
        unit = units.get(col)
        if unit is None:
            out[col] = synth[col]
            continue
        cat = synth[col].cat
        if unit.edges is None:
            values = np.asarray(cat.categories)[cat.codes.to_numpy()]
        else:
            values = unbin_codes(cat.codes.to_numpy(), unit.edges, unit.whole, rng)
        out[col] = pd.Series(values, index=synth.index).astype(unit.dtype)
    return pd.DataFrame(out, index=synth.index)
