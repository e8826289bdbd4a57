"""Strata as the cells of the product of the strata columns' domains.

One stratum has three forms: its integer codes (one per strata column), its flat index in the
product of the domains (row-major, numpy's ``ravel_multi_index``), and its key text such as
``'sex=1|race=4'`` (codes, used in ledgers and model tables). ``StrataIndex`` converts between them
and names a stratum with its category labels (``'Female · White'``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["StrataIndex"]


@dataclass(frozen=True)
class StrataIndex:
    columns: tuple[str, ...]
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, columns: Sequence[str], domain: Mapping[str, int]) -> "StrataIndex":
        """The strata of ``columns`` with their domain sizes."""
        return cls(tuple(columns), tuple(int(domain[c]) for c in columns))

    @property
    def count(self) -> int:
        return int(np.prod(self.sizes, dtype=np.int64))

    def flat(self, codes: np.ndarray) -> np.ndarray:
        """Flat index of each row of an (n, len(columns)) code array."""
        codes = np.asarray(codes)
        return np.ravel_multi_index(tuple(codes.T), self.sizes) if codes.size else np.zeros(0, np.int64)

    def codes(self, flat) -> tuple[np.ndarray, ...]:
        """Codes of each strata column for flat index(es) ``flat``."""
        return np.unravel_index(flat, self.sizes)

    def key(self, flat: int) -> str:
        """Key text of one stratum, e.g. 'sex=1|race=4'."""
        return "|".join(f"{c}={int(i)}" for c, i in zip(self.columns, self.codes(int(flat))))

    def flat_of(self, key: str) -> int:
        """Flat index of a stratum's key text."""
        codes = [int(part.split("=", 1)[1]) for part in key.split("|")]
        return int(np.ravel_multi_index(tuple(codes), self.sizes))

    def names(self, labels: Mapping[str, Sequence]) -> dict[int, str]:
        """Readable name of every stratum by flat index, e.g. 'Female · White'."""
        return {flat: " · ".join(str(labels[c][i]) for c, i in zip(self.columns, self.codes(flat)))
                for flat in range(self.count)}
