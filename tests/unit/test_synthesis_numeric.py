"""Numeric columns are synthesised as their public bins and come back in their units."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef, bytes_fingerprint, plan_from_dict
from core.synthesis import ReleasePlan, SynthesisPlan, run
from core.synthesis.encoding import (DEFAULT_BINS, ColumnUnits, bin_numbers, numeric_view, to_units,
                                     unbin_codes)
from core.synthesis.workflow import load_raw, prepare_units, secure_release

MESSY = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"


# --------------------------------------------------------------------------------------------------
# binning and unbinning
# --------------------------------------------------------------------------------------------------

def test_bins_match_pandas_cut_edges_included():
    edges = np.linspace(0.0, 120.0, 9)          # 15 wide
    values = np.array([0.0, 15.0, 15.0001, 30.0, 119.9, 120.0, -5.0, 200.0])
    # right-closed bins, the first closed on the left too; values outside fall in the end bins
    assert bin_numbers(values, edges).tolist() == [0, 0, 1, 1, 7, 7, 0, 7]
    inside = values[(values >= 0) & (values <= 120)]
    cut = pd.cut(inside, bins=edges, include_lowest=True).codes
    assert bin_numbers(inside, edges).tolist() == list(cut)


@pytest.mark.parametrize("whole", [True, False])
def test_unbinning_draws_within_each_bin_and_the_bounds(whole):
    edges = np.linspace(0.0, 99.0, 9)           # 12.375 wide: bins do not sit on whole numbers
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 8, 5_000)
    values = unbin_codes(codes, edges, whole, np.random.default_rng(4))
    assert values.min() >= 0 and values.max() <= 99
    assert (bin_numbers(values, edges) == codes).all()          # round trip: every value re-bins to its code
    if whole:
        assert (values == np.round(values)).all()
        # every whole number of a bin is drawn: 13..24 is bin 1's (12.375, 24.75]
        assert set(values[codes == 1].astype(int)) == set(range(13, 25))
    else:
        assert np.unique(values).size > 4_000                    # spread out, not bin centres
    # the same generator state gives the same values (the seeded release is reproducible)
    assert (unbin_codes(codes, edges, whole, np.random.default_rng(4)) == values).all()


def test_whole_numbers_in_bins_narrower_than_one_stay_whole_and_within_bounds():
    edges = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    codes = np.repeat(np.arange(4), 50)
    values = unbin_codes(codes, edges, True, np.random.default_rng(0))
    assert set(np.unique(values)) <= {0.0, 1.0}
    assert (values[codes == 0] == 0).all() and (values[codes == 3] == 1).all()


def test_to_units_keeps_each_numeric_columns_dtype():
    raw = pd.DataFrame({"age": np.arange(200, dtype=np.int64) % 91, "kids": np.arange(200, dtype=np.int32) % 4,
                        "rate": np.linspace(0.0, 1.0, 200), "g": pd.Categorical(["a", "b"] * 100)})
    view, notes, units = numeric_view(raw, {"age": (0, 100), "rate": (0, 1)}, bins={"age": 5})
    assert units == {"age": ColumnUnits(tuple(np.linspace(0, 100, 6)), "int64"),
                     "kids": ColumnUnits(None, "int32"),
                     "rate": ColumnUnits(tuple(np.linspace(0, 1, DEFAULT_BINS + 1)), "float64")}
    assert view["age"].cat.categories.size == 5 and view["rate"].cat.categories.size == DEFAULT_BINS
    assert any("age: 5 equal-width bins" in n for n in notes)
    back = to_units(view, units, np.random.default_rng(1))
    assert back.dtypes.to_dict() == raw.dtypes.to_dict()
    assert (back["kids"] == raw["kids"]).all()                   # one category per value: the value itself
    assert (back["g"] == raw["g"]).all()
    assert (bin_numbers(back["age"], units["age"].edges) == view["age"].cat.codes).all()
    assert back["age"].between(0, 100).all() and back["rate"].between(0, 1).all()


# --------------------------------------------------------------------------------------------------
# plans
# --------------------------------------------------------------------------------------------------

def adult_plan(**kw) -> SynthesisPlan:
    base = dict(data=DataRef("adult"), columns=("sex", "race", "age", "hours_per_week", "income"),
                strata=("sex",), target="income", synthesizer="independent",
                numeric_bounds=(("age", 0.0, 100.0), ("hours_per_week", 0.0, 99.0)),
                numeric_bins=(("age", 10),))
    return SynthesisPlan(**{**base, **kw})


def test_bin_counts_are_checked_and_old_plans_keep_their_digest():
    plan = adult_plan()
    assert plan.bins == {"age": 10, "hours_per_week": DEFAULT_BINS}
    assert plan_from_dict(plan.to_dict()) == plan
    old = adult_plan(numeric_bins=None)
    assert "numeric_bins" not in old.to_dict() and adult_plan(numeric_bins=()).digest() == old.digest()
    for bad in ((("age", 0),), (("age", 2.5),), (("age", 3), ("age", 4)), (("age",),)):
        with pytest.raises(ValueError):
            adult_plan(numeric_bins=bad)


@pytest.fixture(scope="module")
def adult_rows():
    from core.datasets import load_dataset
    return load_dataset("adult").sample(3_000, random_state=0).reset_index(drop=True)


def test_adult_release_keeps_numeric_columns_in_their_units_and_bounds(adult_rows):
    plan = adult_plan(release=ReleasePlan(epsilon=2.0, seed=5))
    result = run.uncached(plan, adult_rows)
    synth = result.release.data
    assert list(synth.columns) == list(plan.columns)
    for col, (lo, hi) in plan.bounds.items():
        assert synth[col].dtype == adult_rows[col].dtype == np.int64
        assert synth[col].between(lo, hi).all() and synth[col].nunique() > plan.bins[col]
    # shares are counted over the public bins, not over every value drawn
    shares = result.release.shares()
    assert (shares["column"] == "age").sum() == 10 and (shares["column"] == "hours_per_week").sum() == DEFAULT_BINS
    assert shares.groupby("column")["share"].sum().round(9).eq(1).all()
    # the sweep's marginals are over bin codes: the prepared frame holds the bins
    frame, _, units = prepare_units(plan, adult_rows)
    assert frame["age"].cat.categories.size == 10 and units["age"].edges[-1] == 100.0
    again = run.uncached(plan, adult_rows).release.data
    pd.testing.assert_frame_equal(again, synth)                   # a seeded release is reproducible


def test_secure_release_returns_units_too(adult_rows):
    plan = adult_plan(release=ReleasePlan(epsilon=2.0))
    synth = secure_release(plan, adult_rows).data
    assert synth["age"].dtype == np.int64 and synth["age"].between(0, 100).all()
    assert synth["hours_per_week"].between(0, 99).all()


# --------------------------------------------------------------------------------------------------
# a curator's own file, declared and cleaned with core.intake
# --------------------------------------------------------------------------------------------------

def messy_plan(release=True):
    from core.intake import draft_schema, read_table

    raw = MESSY.read_bytes()
    schema = draft_schema(read_table(MESSY), "County extract")
    columns = [dataclasses.replace(c, bounds={"age": (0.0, 120.0), "income": (0.0, 250_000.0)}[c.name])
               if c.name in ("age", "income") else c for c in schema.columns]
    schema = schema.replace(columns=tuple(columns))
    plan = SynthesisPlan(data=DataRef("upload", bytes_fingerprint(raw), schema=schema),
                         columns=("sex", "county", "age", "income", "hours_per_week"), strata=("sex",),
                         target=None, synthesizer="independent", domain_declared_public=True,
                         numeric_bounds=(("hours_per_week", 0.0, 99.0), ("age", 50.0, 60.0)),
                         numeric_bins=(("income", 5),),
                         release=ReleasePlan(epsilon=3.0) if release else None)
    return plan, raw


def test_messy_county_release_has_the_cleaned_tables_columns_dtypes_and_bounds():
    plan, raw = messy_plan()
    # the data set's declaration wins over the plan's typed range (age), which serves where it has none
    assert plan.bounds == {"age": (0.0, 120.0), "income": (0.0, 250_000.0), "hours_per_week": (0.0, 99.0)}
    assert plan.bins == {"age": DEFAULT_BINS, "income": 5, "hours_per_week": DEFAULT_BINS}
    cleaned = load_raw(plan, raw)[list(plan.columns)]
    synth = run.uncached(plan, raw).release.data
    assert list(synth.columns) == list(cleaned.columns)
    assert synth.dtypes.astype(str).to_dict() == cleaned.dtypes.astype(str).to_dict()
    for col, (lo, hi) in plan.bounds.items():
        assert pd.api.types.is_numeric_dtype(synth[col]) and synth[col].between(lo, hi).all()
    assert synth["age"].dtype == np.int64 and (synth["age"] < 50).any()
    assert set(synth["county"].astype(str)) <= set(cleaned["county"].astype(str))


def test_a_column_the_declaration_bins_stays_a_category_of_its_bins():
    """Bins declared on the data set make the cleaned column a category in the column's units
    ("0 to 33"): the synthetic column is that category too, with the same labels."""
    plan, raw = messy_plan()
    schema = plan.data.schema
    columns = tuple(dataclasses.replace(c, bounds=(0.0, 99.0), bins=3) if c.name == "hours_per_week" else c
                    for c in schema.columns)
    plan = plan.replace(data=DataRef("upload", plan.data.fingerprint, schema=schema.replace(columns=columns)))
    cleaned = load_raw(plan, raw)
    synth = run.uncached(plan, raw).release.data
    assert isinstance(synth["hours_per_week"].dtype, pd.CategoricalDtype)
    assert list(synth["hours_per_week"].cat.categories) == list(cleaned["hours_per_week"].cat.categories) \
        == ["0 to 33", "33 to 66", "66 to 99"]
    assert synth["age"].dtype == np.int64 and synth["age"].between(0, 120).all()
