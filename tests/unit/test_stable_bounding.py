"""Contribution bounding on neighbouring data sets: the rows a person keeps depend only on that person's
own rows and the seed. Adding or removing one whole person, or shuffling the file, leaves every other
person's kept rows exactly as they were, so no count moves by more than k (the per-person guarantee)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.intake import ColumnSchema, DataSchema, apply
from core.intake.bounding import row_keys

K = 3
RACES = ("Asian", "Black", "Other", "White")


def people(n: int = 500, seed: int = 0) -> pd.DataFrame:
    """n people with 1 to 7 rows each (most over the limit of K), a race and an age per row."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 8, n)
    pid = np.repeat([f"P{i:04d}" for i in range(n)], rows)
    return pd.DataFrame({"pid": pid,
                         "race": rng.choice(RACES, pid.size),
                         "age": rng.integers(18, 90, pid.size).astype(str),
                         "visit": np.arange(pid.size).astype(str)})


SCHEMA = DataSchema("visits", (ColumnSchema("pid", "person_id"), ColumnSchema("race", "category"),
                               ColumnSchema("age", "number"), ColumnSchema("visit", "category")),
                    person_id="pid", max_rows_per_person=K, bounding_seed=5)


def kept_rows(frame: pd.DataFrame, seed: int = 5) -> dict[str, tuple]:
    """Each person's kept rows as a sorted tuple of (race, age, visit): what the person contributes."""
    out = apply(frame, SCHEMA.replace(bounding_seed=seed))
    rows = zip(out["pid"], out["race"].astype(str), out["age"], out["visit"].astype(str))
    kept: dict[str, list] = {}
    for pid, *rest in rows:
        kept.setdefault(pid, []).append(tuple(rest))
    return {p: tuple(sorted(r)) for p, r in kept.items()}


def race_counts(frame: pd.DataFrame) -> pd.Series:
    return apply(frame, SCHEMA)["race"].astype(str).value_counts().reindex(RACES, fill_value=0)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return people()


@pytest.fixture(scope="module")
def base(frame) -> dict[str, tuple]:
    return kept_rows(frame)


def test_removing_one_person_keeps_every_other_persons_rows(frame, base):
    for gone in ("P0000", "P0123", "P0499"):
        neighbour = frame[frame["pid"] != gone]
        after = kept_rows(neighbour)
        assert set(after) == set(base) - {gone}
        assert all(after[p] == base[p] for p in after)


def test_adding_one_person_keeps_every_other_persons_rows(frame, base):
    extra = pd.DataFrame({"pid": ["NEW"] * 7, "race": ["Asian"] * 7, "age": ["40"] * 7,
                          "visit": [f"n{i}" for i in range(7)]})
    for at in (0, len(frame) // 2, len(frame)):        # wherever the new person's rows sit in the file
        neighbour = pd.concat([frame.iloc[:at], extra, frame.iloc[at:]], ignore_index=True)
        after = kept_rows(neighbour)
        assert len(after["NEW"]) == K
        assert all(after[p] == base[p] for p in base)


def test_shuffling_the_file_keeps_every_persons_rows(frame, base):
    for s in range(3):
        shuffled = frame.sample(frac=1.0, random_state=s).reset_index(drop=True)
        assert kept_rows(shuffled) == base


def test_no_count_moves_by_more_than_k_on_a_neighbouring_data_set(frame):
    before = race_counts(frame)
    heavy = frame["pid"].value_counts()
    for gone in heavy.index[:20]:                       # people with the most rows
        moved = (race_counts(frame[frame["pid"] != gone]) - before).abs()
        assert moved.sum() <= K                          # L1 over the categories: at most k rows left


def test_the_seed_changes_which_rows_are_kept_and_each_person_keeps_min_rows_k(frame, base):
    other = kept_rows(frame, seed=6)
    rows = frame["pid"].value_counts()
    assert all(len(base[p]) == min(K, rows[p]) for p in base)
    assert sum(other[p] != base[p] for p in base) > 100  # a different seed is a different draw


def test_row_keys_depend_on_the_row_and_the_seed_only():
    person = np.array(["a", "b", "a"], dtype=object)
    race = pd.Categorical(["x", "y", "x"])
    age = np.array([1.0, 2.0, 1.0])
    keys = row_keys(person, [race, age], seed=3)
    assert keys.dtype == np.uint64 and keys[0] == keys[2] and keys[0] != keys[1]
    # the same row among other rows, with the category list grown by someone else: the same key
    wider = row_keys(np.array(["z", "a"], dtype=object), [pd.Categorical(["w", "x"]), np.array([5.0, 1.0])], seed=3)
    assert wider[1] == keys[0]
    # an integer age and the same age as a float (a neighbour's missing value turns the column float)
    assert row_keys(person, [race, np.array([1, 2, 1])], seed=3)[0] == keys[0]
    assert not np.array_equal(row_keys(person, [race, age], seed=4), keys)
    with pytest.raises(ValueError, match="seed"):
        row_keys(person, [race, age], seed="x")
