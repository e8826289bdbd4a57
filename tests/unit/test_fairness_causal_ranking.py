"""Causal intersectional ranking: true counterfactuals, an unchanged ranking, the moving company."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.fairness.causal_ranking import (MediatorRole, counterfactual_scores, fit_scm, intersectional_labels,
                                          measures, moving_company, quota_ranking, ranking)


def _linear_scm(n, rng, direct=True):
    g = rng.random(n) < 0.4
    r = rng.random(n) < 0.3
    ex, ey = rng.standard_normal(n), rng.standard_normal(n)
    x = 1.0 - 0.8 * g + 0.3 * r - 0.5 * g * r + ex
    y = 0.5 + 0.7 * x + (-0.4 * g - 0.3 * r + 0.2 * g * r if direct else 0.0) + ey
    frame = pd.DataFrame({"G": np.where(g, "w", "m"), "R": np.where(r, "b", "a"), "X": x, "Y": y})
    return frame, ex, ey


def test_counterfactuals_match_the_true_ones():
    rng = np.random.default_rng(0)
    frame, ex, ey = _linear_scm(20_000, rng)
    scm = fit_scm(frame, ("G", "R"), (MediatorRole("X", ()),), "Y")
    cf = counterfactual_scores(scm, frame, {"G": "w", "R": "b"})
    x_true = 1.0 - 0.8 - 0.5 * 1 + 0.3 + ex          # everybody a black woman
    y_true = 0.5 + 0.7 * x_true - 0.4 - 0.3 + 0.2 + ey
    assert np.max(np.abs(cf["X"] - x_true)) < 0.05
    assert np.max(np.abs(cf["Y"] - y_true)) < 0.08
    # resolving X keeps the observed mediator
    scm_r = fit_scm(frame, ("G", "R"), (MediatorRole("X", ("G", "R")),), "Y")
    cf_r = counterfactual_scores(scm_r, frame, {"G": "w", "R": "b"})
    np.testing.assert_allclose(cf_r["X"], frame["X"], atol=1e-9)


def test_ranking_unchanged_when_every_mediator_resolves_and_no_direct_effect():
    rng = np.random.default_rng(1)
    frame, _, _ = _linear_scm(5_000, rng, direct=False)
    scm = fit_scm(frame, ("G", "R"), (MediatorRole("X", ("G", "R")),), "Y")
    cf = counterfactual_scores(scm, frame, {"G": "w", "R": "b"})
    k = 500
    top_orig = set(ranking(frame["Y"].to_numpy(), False)[:k])
    top_cf = set(ranking(cf["Y"], False)[:k])
    # only the estimated (near-zero) direct effects move anyone: the top k is (almost) the same
    assert len(top_orig ^ top_cf) <= 0.05 * k
    rho = np.corrcoef(np.argsort(np.argsort(frame["Y"])), np.argsort(np.argsort(cf["Y"])))[0, 1]
    assert rho > 0.995


def test_moving_company_qualitative_findings():
    frame = moving_company(2000, np.random.default_rng(0))
    assert len(frame) == 2000
    assert (frame["gender"] == "female").mean() == pytest.approx(0.37, abs=0.03)
    assert (frame["race"] == "Black").mean() == pytest.approx(0.37, abs=0.03)
    groups = intersectional_labels(frame, ("gender", "race"))
    y = frame["score"].to_numpy()
    ks = (50, 100, 200)
    out = {}
    for kind, role in (("resolving", ("gender", "race")), ("non-resolving", ())):
        scm = fit_scm(frame, ("gender", "race"), (MediatorRole("lifting", role),), "score")
        cf = counterfactual_scores(scm, frame, {"gender": "female", "race": "Black"})
        orders = {"original": ranking(y, False), "counterfactual": ranking(cf["score"], False),
                  "quota": quota_ranking(y, groups, False)}
        out[kind] = measures(orders, y, groups, ks, False)
    m = out["non-resolving"]
    orig = m[m["ranking"] == "original"].set_index(["k", "group"])["selection_rate"]
    share = pd.Series(groups).value_counts(normalize=True)
    for k in ks:
        assert orig[(k, "male, White")] * share["male, White"] > 0.5          # top k heavy in White men
        assert orig[(k, "female, Black")] < 0.6                              # light in Black women
    cf = m[(m["ranking"] == "counterfactual") & (m["k"] == 200)]["selection_rate"]
    assert np.all(np.abs(cf - 1.0) < 0.5)                                   # near parity
    res = out["resolving"]
    assert res.loc[res["ranking"] == "counterfactual", "utility_loss"].max() <= 0.011
    quota = res[res["ranking"] == "quota"]["selection_rate"]
    assert np.all(np.abs(quota - 1.0) < 0.1)


def test_resolving_rates_of_the_moving_company_are_one_law_for_both_races():
    """With X resolving, White and Black men share one selection rate; on 400,000 synthetic applicants the
    fitted counterfactual ranking gives the closed form's population rate for both (within 0.02)."""
    from core.fairness.causal_ranking import most_disadvantaged, resolving_selection_rates
    rates = [resolving_selection_rates(k / 2000)["male"] for k in (50, 100, 200)]
    assert np.mean(rates) == pytest.approx(1.378, abs=5e-4)
    one = resolving_selection_rates(0.05)
    assert 0.63 * one["male"] + 0.37 * one["female"] == pytest.approx(1.0, abs=1e-9)
    company = moving_company(400_000, np.random.default_rng(11))
    scm = fit_scm(company, ("gender", "race"), (MediatorRole("lifting", ("gender", "race")),), "score")
    base = most_disadvantaged(company, ("gender", "race"), "score", False, scm.coding)
    cf = counterfactual_scores(scm, company, base)["score"]
    groups = intersectional_labels(company, ("gender", "race"))
    table = measures({"original": ranking(company["score"].to_numpy(), False), "counterfactual": ranking(cf, False)},
                     company["score"].to_numpy(), groups, (20_000,), False)
    cf_rates = table[table["ranking"] == "counterfactual"].set_index("group")["selection_rate"]
    assert cf_rates["male, White"] == pytest.approx(one["male"], abs=0.02)
    assert cf_rates["male, Black"] == pytest.approx(one["male"], abs=0.02)
    assert cf_rates["female, Black"] == pytest.approx(one["female"], abs=0.02)
