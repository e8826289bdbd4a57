"""Each number of an audit depends only on its own part of the plan.

Every release, adversary and trial draws from its own named stream of the plan's seed, so adding a
release or an adversary, wherever it is listed, leaves the other parts' tables as they were. The one
deliberate link is the verdict's lower bound, which is Bonferroni-corrected over the adversaries:
adding an adversary tightens it (and so can move a verdict), exactly by the documented formula.
"""
from __future__ import annotations

import pandas as pd
import pytest

from core.coherence import AdversaryChoice, AuditPlan, ReleaseChoice, RowSample, run
from core.coherence.releases import release_params
from core.coherence.verdicts import clopper_pearson

# the parts of the per-adversary summary that depend on how many adversaries share the verdict
BONFERRONI = ["ci_low", "verdict", "trials_needed", "warnings"]
LAPLACE = "Noisy table (Laplace) (epsilon=1.0)"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))


def _plan(**changes) -> AuditPlan:
    base = AuditPlan(rows=RowSample(2000, 3), trials=5, lens=("age_band", "education", "sex"),
                     subgroup_columns=("sex", "race"), subgroup_order=1, gamma=60,
                     releases=(ReleaseChoice("laplace_table"),),
                     adversaries=(AdversaryChoice("naive_bayes"), AdversaryChoice("nearest_neighbour")))
    return base.replace(**changes)


def _only(table: pd.DataFrame, column: str, keep) -> pd.DataFrame:
    return table[table[column].isin(keep)].reset_index(drop=True)


def test_adding_releases_before_and_after_leaves_a_release_untouched():
    alone = run(_plan()).tables()
    crowd = run(_plan(releases=(ReleaseChoice("clear_sample"), ReleaseChoice("laplace_table"),
                                ReleaseChoice("laplace_table", release_params("laplace_table", epsilon=0.1)),
                                ReleaseChoice("gaussian_table")))).tables()
    for name, table in alone.items():
        if "release" in table.columns:
            pd.testing.assert_frame_equal(table, _only(crowd[name], "release", [LAPLACE]), check_exact=True,
                                          obj=name)


def test_adding_an_adversary_first_leaves_the_others_draws_untouched():
    plan = _plan()
    alone = run(plan).tables()
    more = run(plan.replace(adversaries=(AdversaryChoice("random"), *plan.adversaries))).tables()
    names = list(dict.fromkeys(alone["adversaries"]["adversary"]))
    for name in ("maxima", "trials", "subgroups", "curve"):
        pd.testing.assert_frame_equal(alone[name], _only(more[name], "adversary", names), check_exact=True,
                                      obj=name)
    a, b = alone["adversaries"], _only(more["adversaries"], "adversary", names)
    pd.testing.assert_frame_equal(a.drop(columns=BONFERRONI), b.drop(columns=BONFERRONI), check_exact=True)
    # the lower bound is the one-sided Clopper-Pearson bound at 1 - (1 - confidence) / (number of adversaries)
    conf = plan.confidence
    for _, row in b.iterrows():
        x, t = int(row["exceedances"]), int(row["trials"])
        assert row["ci_low"] == pytest.approx(clopper_pearson(x, t, 1 - (1 - conf) / 3)[0], abs=1e-12)
    for _, row in a.iterrows():
        x, t = int(row["exceedances"]), int(row["trials"])
        assert row["ci_low"] == pytest.approx(clopper_pearson(x, t, 1 - (1 - conf) / 2)[0], abs=1e-12)
