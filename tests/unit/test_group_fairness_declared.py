"""Every group fairness tab on a declared data set: the learning tabs choose label, groups and score from its
columns, and people are counted as persons (distinct person ids), not rows, where a person id is declared."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef, bytes_fingerprint
from core.datasets import load_microdata
from core.fairness import GroupFairnessPlan, LexifairPlan, MediatorRole, RankingPlan
from core.fairness.companion import CompanionPlan
from core.fairness.declared_learning import GroupData, LearningColumns, declared_learning, split_people
from core.fairness.group_fairness_plan import run_group_fairness
from core.intake import ColumnSchema, DataSchema, draft_schema, read_table

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ROOT / "tests" / "fixtures" / "county_export.csv"
RAW = EXPORT.read_bytes()


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "gfd_cache"))


def export_schema(rows_per_person: int = 2) -> DataSchema:
    """The county export declared as a curator would on the Data step: units, codes, two rows a person."""
    schema = draft_schema(read_table(EXPORT), "County export").with_choices(
        units=(("age", "yrs"), ("hours_per_week", "hrs")), codes=(("age", "999"), ("age", "refused")))
    schema = schema.with_column("age", missing="drop_row").with_column("risk_score", bounds=(0.0, 1.0))
    return schema.replace(max_rows_per_person=rows_per_person)


def test_whole_people_are_drawn_and_split():
    person = np.array(["a", "a", "b", "c", "c", "c", "d", "e"])
    keep, train, test = split_people(person, 8, 6, 0.4, np.random.default_rng(1))
    assert keep.size <= 6
    kept = person[keep]
    # every kept person is kept with all their rows, and sits on one side of the split only
    for p in set(kept):
        assert (kept == p).sum() == (person == p).sum()
    assert not set(kept[train]) & set(kept[test])
    assert len(set(kept[test])) == round(len(set(kept)) * 0.4)


def test_group_sizes_count_persons():
    data = GroupData(np.zeros((5, 1)), np.zeros(5), pd.DataFrame({"g": list("xxyyy")}), np.arange(5), np.arange(0),
                     person=np.array([0, 0, 1, 2, 2]))
    M = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [0, 1]], dtype=bool)
    np.testing.assert_array_equal(data.group_people(M), [1, 2])
    rows = GroupData(data.X, data.y, data.attrs, data.train, data.test)
    np.testing.assert_array_equal(rows.group_people(M), [2, 3])


def test_the_smallest_group_counts_persons():
    from core.fairness.lexifair import membership_matrix
    attrs = pd.DataFrame({"g": list("xxxyyz")})
    person = np.array([0, 0, 0, 1, 2, 3])          # group x is one person on three rows
    _, by_rows = membership_matrix(attrs, ("g",), min_size=2, top_values=3)
    assert by_rows == ["g = x", "g = y"]
    with pytest.raises(ValueError, match="Fewer than two groups"):
        membership_matrix(attrs, ("g",), min_size=2, top_values=3, person=person)
    _, by_people = membership_matrix(attrs, ("g",), min_size=1, top_values=3, person=person)
    assert by_people == ["g = x", "g = y", "g = z"]


def test_learning_columns_are_checked():
    with pytest.raises(ValueError, match="label column"):
        LearningColumns("", "Yes", ("sex",))
    with pytest.raises(ValueError, match="positive"):
        LearningColumns("reoffended", "", ("sex",))
    with pytest.raises(ValueError, match="one role only"):
        LearningColumns("reoffended", "Yes", ("reoffended",))
    with pytest.raises(ValueError, match="declared data set"):
        GroupFairnessPlan(learning="declared", learning_columns=LearningColumns("reoffended", "Yes", ("sex",)))
    ref = DataRef("upload", bytes_fingerprint(RAW), schema=export_schema())
    with pytest.raises(ValueError, match="learning_columns"):
        GroupFairnessPlan(data=ref, learning="declared")
    with pytest.raises(ValueError, match="declared data set only"):
        GroupFairnessPlan(learning_columns=LearningColumns("reoffended", "Yes", ("sex",)))


def test_declared_learning_reads_label_groups_and_score():
    schema = export_schema()
    frame = load_microdata(DataRef("upload", bytes_fingerprint(RAW), schema=schema), RAW)
    cols = LearningColumns("reoffended", "Yes", ("sex", "region"), score="risk_score")
    data = declared_learning(frame, schema, cols, 8000, 0.3, np.random.default_rng(0))
    assert data.y.sum() == (frame["reoffended"] == "Yes").sum()
    assert list(data.attrs.columns) == ["sex", "region"]
    assert data.person is not None and np.unique(data.person).size == frame["person_id"].nunique()
    assert sorted(data.score) == sorted(frame["risk_score"].astype(float))
    with pytest.raises(ValueError, match="'Maybe' is not a value of reoffended"):
        declared_learning(frame, schema, LearningColumns("reoffended", "Maybe", ("sex",)), 8000, 0.3,
                          np.random.default_rng(0))
    with pytest.raises(ValueError, match="no column"):
        declared_learning(frame, schema, LearningColumns("reoffended", "Yes", ("colour",)), 8000, 0.3,
                          np.random.default_rng(0))


def test_a_score_outside_0_1_is_rescaled_by_its_public_bounds_only():
    frame = pd.DataFrame({"y": ["a", "b"] * 10, "g": ["x", "z"] * 10, "s": np.arange(20.0)})
    cols = LearningColumns("y", "a", ("g",), score="s")
    bare = DataSchema("t", (ColumnSchema("y"), ColumnSchema("g"), ColumnSchema("s", "number")))
    with pytest.raises(ValueError, match="public bounds"):
        declared_learning(frame, bare, cols, 100, 0.3, np.random.default_rng(0))
    bounded = DataSchema("t", (ColumnSchema("y"), ColumnSchema("g"), ColumnSchema("s", "number", bounds=(0, 40))))
    data = declared_learning(frame, bounded, cols, 100, 0.3, np.random.default_rng(0))
    assert sorted(data.score) == sorted(np.arange(20.0) / 40)


def test_every_tab_runs_on_the_declared_export_and_counts_persons():
    schema = export_schema()
    ref = DataRef("upload", bytes_fingerprint(RAW), schema=schema)
    plan = GroupFairnessPlan(
        data=ref, learning="declared", seed=2,
        learning_columns=LearningColumns("reoffended", "Yes", ("sex", "region"), score="risk_score"),
        lexifair=LexifairPlan(columns=("sex", "region"), rounds=40, levels=2, bootstrap=10, min_size=20),
        ranking=RankingPlan(attributes=("sex",), mediators=(MediatorRole("income", ()),), outcome="risk_score",
                            ascending=False, ks=(50, 100)),
        companion=CompanionPlan(attribute="sex", groups=("Female", "Male")))
    result = run_group_fairness(plan, RAW)
    frame = load_microdata(ref, RAW)
    ranked = frame[["sex", "income", "risk_score", "person_id"]].dropna()
    people, rows = ranked["person_id"].nunique(), len(ranked)
    assert people < rows                       # two rows a person are kept: persons, not rows
    assert result.ranking.ranked_words() == f"{people:,} people on {rows:,} rows"
    composition = result.ranking.composition.set_index("group")["people"]
    assert composition["Female"] == ranked.loc[ranked["sex"] == "Female", "person_id"].nunique()
    # the lexifair group sizes count persons too: 'sex = Female' holds that many distinct ids of the kept rows
    sizes = result.lexifair.groups.drop_duplicates("group").set_index("group")["size"]
    assert sizes["sex = Female"] <= (frame["sex"] == "Female").sum()
    assert sizes["sex = Female"] == frame.loc[frame["sex"] == "Female", "person_id"].nunique()
    assert set(result.companion.rates["group"]) == {"Female", "Male"}
    # a report of a private table carries group sizes as bands only
    shared = result.tables()["lexifair_group_errors"]
    assert shared["size"].map(lambda v: isinstance(v, str) and "<" in v).all()
