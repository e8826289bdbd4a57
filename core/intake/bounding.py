"""Contribution bounding that is stable: which rows a person keeps depends on that person's rows and the seed only.

Each row gets a 64-bit key, a keyed hash of its person id and its cleaned content (every declared
column, read by the schema); each person keeps the ``limit`` rows with the smallest keys. The key of a
row never looks at another row, its position in the file or a shared random stream, so on a
neighbouring data set (one whole person added or removed, or the file shuffled) every other person
keeps exactly the same rows and a count moves by at most ``limit``: the premise of every "per person,
up to k rows" guarantee (group privacy, Dwork & Roth 2014, Thm 2.2). Two rows of one person with the
same content get the same key; keeping either gives the same table.

Hashing: strings (the person id, category labels) through pandas' keyed SipHash
(``pandas.util.hash_array`` with a 16-character key derived from the seed); numbers by their float64
bits (so 34 and 34.0 hash alike, and -0.0 as 0.0); the columns are folded in schema order with the
SplitMix64 finaliser (Steele, Lea & Flood 2014), salted by the seed. Vectorised: one pass per column.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["keep_per_person", "row_keys"]

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that spreads every input bit over the output."""
    z = z ^ (z >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    return z ^ (z >> np.uint64(31))


def _seed_material(seed) -> tuple[str, np.uint64]:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"The bounding seed must be a whole number of at least 0; got {seed!r:.40}.")
    digest = hashlib.blake2b(f"contribution bounding {int(seed)}".encode(), digest_size=24).digest()
    return digest[:16].hex()[:16], np.frombuffer(digest[16:], dtype=np.uint64)[0]


def _strings(labels: np.ndarray, key: str) -> np.ndarray:
    """Keyed hash of each string (None and NaN hash as one fixed "missing" value)."""
    labels = np.asarray(labels, dtype=object)
    present = pd.notna(labels)
    out = np.full(labels.size, _GOLDEN, dtype=np.uint64)
    if present.any():
        out[present] = pd.util.hash_array(labels[present].astype(str).astype(object), hash_key=key)
    return out


def _column(values, key: str) -> np.ndarray:
    if isinstance(values, pd.Categorical):
        per_label = _strings(np.asarray(values.categories, dtype=object), key)
        codes = np.asarray(values.codes)
        return np.where(codes >= 0, per_label[np.maximum(codes, 0)], _GOLDEN)
    values = np.asarray(values)
    if values.dtype.kind in "iufb":
        numbers = values.astype(np.float64) + 0.0          # -0.0 -> 0.0
        numbers[np.isnan(numbers)] = np.nan                 # one NaN pattern
        return _mix(numbers.view(np.uint64) ^ _GOLDEN)
    return _strings(values, key)


def row_keys(person: np.ndarray, columns: Sequence, seed: int) -> np.ndarray:
    """uint64 key per row from the row's person id, its cleaned ``columns`` (each a Categorical, numbers or
    strings, one entry per row, in a fixed public order) and ``seed``; see the module docstring."""
    key, salt = _seed_material(seed)
    out = _mix(_strings(person, key) ^ salt)
    for values in columns:
        out = _mix((out * _GOLDEN) ^ _column(values, key))
    return out


def keep_per_person(person: np.ndarray, keep: np.ndarray, keys: np.ndarray, limit: int) -> np.ndarray:
    """``keep`` narrowed to the ``limit`` rows with the smallest ``keys`` of each person (``person`` codes;
    rows with a negative code were dropped already). Ties are rows of one person with equal content."""
    rows = np.flatnonzero(keep & (person >= 0))
    order = rows[np.lexsort((keys[rows], person[rows]))]
    grouped = person[order]
    starts = np.r_[0, np.flatnonzero(np.diff(grouped)) + 1]
    rank = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    out = np.zeros_like(keep)
    out[order[rank < limit]] = True
    return out
