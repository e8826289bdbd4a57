"""Handing a synthetic-copy session's pooled pairs to the learner: they stay positions of the copy."""
import pandas as pd
import pytest

from core.fairness.session_summary import learner_pairs


def pooled():
    # Person 0 is a row outside the paper's people in the file, but a synthetic person here.
    return pd.DataFrame({"i": [0, 5, 1999], "j": [1, 1500, 7], "weight": [1.0, 0.5, 1.0]})


def test_synthetic_pairs_go_to_the_learner_whole_and_unmapped():
    handed = learner_pairs(pooled(), "paper", "paper", synthetic=True)
    pd.testing.assert_frame_equal(handed.constraints, pooled())
    assert handed.left_out == 0 and handed.note is None
    # A learner fitting other real people still gets every synthetic pair, and is told so.
    other = learner_pairs(pooled(), "paper", "full", synthetic=True)
    assert len(other.constraints) == 3 and other.left_out == 0 and "synthetic" in other.note


def test_real_pairs_are_still_mapped_onto_the_learners_people():
    handed = learner_pairs(pooled(), "paper", "paper")
    assert handed.left_out >= 1 and 0 not in set(handed.constraints["i"])
    with pytest.raises(ValueError, match="Unknown population"):
        learner_pairs(pooled(), "paper", "nobody", synthetic=True)
