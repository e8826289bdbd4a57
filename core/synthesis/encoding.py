"""Turn category frames into integer-code frames with a public domain, and back."""
from __future__ import annotations

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


def categorical_view(df: pd.DataFrame, bounds: Mapping[str, tuple[float, float]] | None = None,
                     max_levels: int = 40, bins: int = 8) -> tuple[pd.DataFrame, list[str]]:
    """Every usable column as a category, with notes on what was done to the others.

    Columns with at most ``max_levels`` values are kept as they are. A wider numeric column is cut
    into ``bins`` equal-width bins over the PUBLIC range given in ``bounds`` (values outside are
    clipped into it); without public bounds it is left out, because bins read from the data's own
    minimum and maximum would publish them. Wide text columns are left out.
    """
    bounds = dict(bounds or {})
    out, notes = {}, []
    for col in df.columns:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype) or s.nunique(dropna=True) <= max_levels:
            out[col] = s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")
        elif pd.api.types.is_numeric_dtype(s):
            if col not in bounds:
                notes.append(f"{col}: left out. It is numeric with more than {max_levels} distinct values; give public bounds "
                             "(a range known without looking at the data) to bin it.")
                continue
            lo, hi = (float(b) for b in bounds[col])
            edges = np.linspace(lo, hi, bins + 1)
            cut = pd.cut(s.clip(lo, hi), bins=edges, include_lowest=True)
            out[col] = cut.cat.rename_categories([str(c) for c in cut.cat.categories])
            notes.append(f"{col}: {bins} equal-width bins over the declared public range [{lo:g}, {hi:g}].")
        else:
            notes.append(f"{col}: left out (more than {max_levels} distinct text values).")
    if not out:
        raise ValueError("No column can be used as a category; upload a table with categorical columns "
                         "or give public bounds for its numeric columns.")
    return pd.DataFrame(out, index=df.index), notes
