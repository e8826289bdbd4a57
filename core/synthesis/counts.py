"""The synthesizers' sufficient statistics: count tables over sets of columns, from wherever the rows are.

MST and AIM read their data only through marginal count tables. A count source answers
``table(columns)`` with the (sizes of columns) array of counts and is told up front, through
``count(cliques)``, every table a fit will read, so data that lives in parts (a folder of Parquet
files, possibly on a Dask cluster) is read once per fit: one pass, every table of the set counted
from each part, the parts' tables added up. Counts are integers, so the sum is the same bit for bit
in any order, in one process, in parts or on a cluster.

- :class:`ArrayCounts`: rows in memory (an (n, d) code array), tables by ``np.bincount``.
- :class:`core.synthesis.parts.PartCounts`: rows in Parquet parts, tables counted part by part.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from core.synthesis.encoding import check_codes

Clique = tuple[str, ...]

__all__ = ["ArrayCounts", "CountSource", "as_count_source", "count_tables"]


class CountSource(Protocol):
    """What a synthesizer needs of its data: the columns, their public sizes, and count tables."""

    columns: list[str]
    domain: dict[str, int]

    def count(self, cliques: Iterable[Clique]) -> None:
        """Count every table of ``cliques`` (one pass over the rows for the set)."""

    def table(self, clique: Clique) -> np.ndarray:
        """The count table of ``clique`` (axes in its order), as floats."""


def count_tables(arr: np.ndarray, index: Mapping[str, int], domain: Mapping[str, int],
                 cliques: Sequence[Clique]) -> dict[Clique, np.ndarray]:
    """Integer count tables of ``cliques`` over the code array ``arr`` (columns found by ``index``):
    each a ``np.bincount`` of flattened cell indices."""
    out = {}
    for clique in cliques:
        sizes = [int(domain[c]) for c in clique]
        if arr.shape[0]:
            flat = np.ravel_multi_index(tuple(arr[:, index[c]] for c in clique), sizes)
        else:
            flat = np.zeros(0, np.int64)
        out[tuple(clique)] = np.bincount(flat, minlength=int(np.prod(sizes))).reshape(sizes)
    return out


class ArrayCounts:
    """Count tables of rows held in memory (the codes of a DataFrame, checked against ``domain``)."""

    def __init__(self, df: pd.DataFrame, domain: Mapping[str, int]) -> None:
        self.arr = check_codes(df, domain)
        self.columns = list(df.columns)
        self.domain = {c: int(domain[c]) for c in self.columns}
        self.index = {c: j for j, c in enumerate(self.columns)}
        self.n_rows = int(self.arr.shape[0])
        self._tables: dict[Clique, np.ndarray] = {}

    def count(self, cliques: Iterable[Clique]) -> None:
        todo = [tuple(c) for c in cliques if tuple(c) not in self._tables]
        self._tables.update(count_tables(self.arr, self.index, self.domain, todo))

    def table(self, clique: Clique) -> np.ndarray:
        clique = tuple(clique)
        if clique not in self._tables:
            self.count([clique])
        return self._tables[clique].astype(float)


def as_count_source(data, domain: Mapping[str, int] | None = None) -> CountSource:
    """A count source for a synthesizer's ``fit``: a DataFrame of codes (checked against ``domain``)
    becomes an :class:`ArrayCounts`; a count source is used as it is."""
    if isinstance(data, pd.DataFrame):
        if domain is None:
            raise ValueError("A table of codes needs its domain sizes.")
        return ArrayCounts(data, domain)
    if hasattr(data, "table") and hasattr(data, "count"):
        if domain is not None:
            extra = [c for c in data.columns if c not in domain]
            if extra:
                raise ValueError(f"No domain size given for column(s) {extra}.")
        return data
    raise ValueError("Synthesizers fit a table of codes or a count source (e.g. PartCounts for a folder of parts).")


