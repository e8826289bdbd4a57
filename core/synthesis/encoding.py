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
            raise ValueError(f"Column {col!r} has missing values; drop or fill them before synthesis.")
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


def categorical_view(df: pd.DataFrame, max_levels: int = 40, bins: int = 8) -> tuple[pd.DataFrame, list[str]]:
    """Every column as a category: columns with at most ``max_levels`` values as they are, wider
    numeric columns cut into ``bins`` equal-width bins over their range (stated in the notes,
    since that range is then treated as public); wide text columns are left out with a note."""
    out, notes = {}, []
    for col in df.columns:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype) or s.nunique(dropna=True) <= max_levels:
            out[col] = s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")
        elif pd.api.types.is_numeric_dtype(s):
            cut = pd.cut(s, bins=bins, include_lowest=True)
            out[col] = cut.cat.rename_categories([str(c) for c in cut.cat.categories])
            notes.append(f"{col}: {bins} equal-width bins over [{s.min():g}, {s.max():g}] "
                         "(this range is treated as public).")
        else:
            notes.append(f"{col}: left out ({s.nunique()} distinct text values; at most {max_levels} allowed).")
    if not out:
        raise ValueError("No column can be used as a category; upload a table with categorical columns.")
    return pd.DataFrame(out, index=df.index), notes
