"""One definition of the worst adversary, read by the headline, its uncertainty words and the report figures."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from core.coherence import AuditPlan, CoherenceResult
from core.coherence.adversaries import Adversary
from core.coherence.audit import coherence_audit, rank_worst
from core.coherence.releases import make_release


class Scaled(Adversary):
    """Ignores the report: a fixed score per code of the first lens column, times ``scale``."""
    key, label = "scaled", "scaled"

    def __init__(self, scale: float, name: str):
        self.scale = scale
        self.name = name

    def fit(self, report, schema, rng):
        return lambda q: self.scale * np.linspace(-1.0, 1.0, 18)[q[:, 0]]


def _data(n=1200, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 18, n), "sex": rng.integers(0, 2, n),
                         "y": np.where(rng.random(n) < 0.4, "yes", "no")})


@pytest.fixture(scope="module")
def tied():
    """Two releases; on each, 'half' and 'full' fail every trial (beta_hat = 1) at a tiny alpha, and
    'full' scores exactly twice what 'half' scores, so its W1 (and alpha_hat) is exactly twice as large.
    'half' is listed first: a rule that looks at the failure rate alone names it."""
    advs = [Scaled(0.5, "half"), Scaled(1.0, "full")]
    rels = [make_release("clear_half"), make_release("laplace_table", epsilon=1.0)]
    return coherence_audit(_data(), rels, advs, "y", ["age", "sex"], ["sex"], alpha=1e-9, gamma=50,
                           trials=6, seed=3, n_jobs=1)


def test_tied_failure_rates_go_to_the_larger_w1(tied):
    s = tied.summary.set_index(["release", "adversary"])
    for rel in tied.releases["release"]:
        assert s.loc[(rel, "half"), "beta_hat"] == s.loc[(rel, "full"), "beta_hat"] == 1.0
        assert s.loc[(rel, "full"), "alpha_hat"] == pytest.approx(2 * s.loc[(rel, "half"), "alpha_hat"])
    worst = tied.worst_adversaries()
    assert worst["release"].tolist() == tied.releases["release"].tolist()
    assert worst["adversary"].tolist() == ["full", "full"]
    assert worst["n_adversaries"].tolist() == [2, 2]
    assert worst["lower_confidence"].tolist() == pytest.approx([0.975, 0.975])
    assert tied.worst_adversary()["adversary"] == "full"


def test_headline_words_and_report_figure_name_the_same_adversary(tied):
    result = CoherenceResult(AuditPlan(), 1200, tied)
    worst = tied.worst_adversaries()
    head, words = result.headline(), result.headline_uncertainty()
    for _, row in worst.iterrows():
        key = f"worst failure rate: {row['release']}"
        assert head[key] == row["beta_hat"] == 1.0
        assert "(adversary full;" in words[key]
        assert "lower at 97.5% for 2 adversaries" in words[key]
    pd.testing.assert_frame_equal(result.tables()["worst_adversaries"], worst)
    from dashboard.components.stakeholder_figures import default_figures
    heat = next(f for f in default_figures(result) if f.data and f.data[0].type == "heatmap")
    assert "(full)" in heat.layout.title.text


def _summary(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["release", "adversary", "beta_hat", "alpha_hat"])


def test_rank_worst_by_rate_then_alpha_then_listing_order():
    s = _summary([("A", "a", 0.2, 0.5), ("A", "b", 0.3, 0.1), ("A", "c", 0.3, 0.4), ("A", "d", 0.3, 0.4),
                  ("A", "e", 0.3, np.nan)])
    assert rank_worst(s)["adversary"].tolist() == ["c", "d", "b", "e", "a"]
    assert rank_worst(s.iloc[::-1])["adversary"].tolist() == ["d", "c", "b", "e", "a"]


def test_worst_overall_ties_go_to_the_release_listed_first(tied):
    summary = tied.summary.copy()
    summary["alpha_hat"] = 0.7                      # every row ties on rate and alpha
    flat = dataclasses.replace(tied, summary=summary)
    assert flat.worst_adversaries()["adversary"].tolist() == ["half", "half"]
    assert flat.worst_adversary()["release"] == tied.releases["release"].iloc[0]
    summary.loc[summary.index[-1], "alpha_hat"] = 0.8   # the last release's 'full' now reaches further
    later = dataclasses.replace(tied, summary=summary).worst_adversary()
    assert (later["release"], later["adversary"]) == (tied.releases["release"].iloc[-1], "full")
