"""The pairwise learner's work grows with distinct feature rows and pairs, never with people squared."""
import numpy as np
import pandas as pd
import pytest

import core.fairness.learner as learner
from core.fairness.learner import LearnerConfig, fit_elicited_fair, oracle_kind, ordered_pairs
from core.fairness.learning_data import compas_learning_data
from core.fairness.lexifair import MergedOracle


def _duplicated(n_distinct: int, copies: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 4, (n_distinct, 3)).astype(float)
    X = np.repeat(base, copies, axis=0)
    return X[rng.permutation(X.shape[0])]


def test_logistic_oracle_solves_on_distinct_rows_with_the_same_answer():
    """Its objective is sklearn's LogisticRegression(C=1) with weights s rescaled to mean 1."""
    from sklearn.linear_model import LogisticRegression

    X = _duplicated(40, 50)
    rng = np.random.default_rng(1)
    diff = rng.normal(size=X.shape[0])
    oracle = oracle_kind("logistic").on(X)
    params = oracle(diff)
    distinct = np.unique(X, axis=0).shape[0]
    assert len(oracle.rows_seen) == 1
    assert oracle.rows_seen[0] <= 2 * distinct < X.shape[0] // 10      # classes, not people
    z = (diff < 0).astype(int)
    s = np.abs(diff) / np.abs(diff).mean()
    ref = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(X, z, sample_weight=s)
    assert params[:-1] == pytest.approx(ref.coef_[0], abs=1e-5)
    assert params[-1] == pytest.approx(ref.intercept_[0], abs=1e-5)
    # the decisions of every person are those of their feature row
    h = oracle.decide(params)
    assert np.array_equal(h, (X @ params[:-1] + params[-1] > 0).astype(float))


def test_a_fit_on_many_people_never_touches_more_rows_than_its_classes():
    X = _duplicated(60, 200)                                        # 12,000 people, <= 60 feature rows
    n = X.shape[0]
    rng = np.random.default_rng(2)
    y = (X[:, 0] + rng.normal(size=n) > 1.5).astype(int)

    class Data:
        pass

    data = Data()
    data.X, data.y, data.n = X, y, n
    i = rng.choice(n, 300, replace=False)
    pairs = ordered_pairs(pd.DataFrame({"i": i[:150], "j": i[150:], "weight": 1.0}), n)
    M = pairs.incidence(n)
    assert M.shape == (pairs.m, n) and M.nnz == 2 * pairs.m          # sparse: two entries a pair
    seen = []
    real = oracle_kind("logistic")

    def counting(X_, start=None):
        oracle = real.on(X_, start)
        seen.append(oracle)
        return oracle

    kind = learner.OracleKind(counting, warm_starts=True)
    original = learner.oracle_kind
    learner.oracle_kind = lambda key: kind
    try:
        fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.1, T=30))
    finally:
        learner.oracle_kind = original
    assert fit.p_hat.shape == (n,) and fit.hypotheses.shape == (30, X.shape[1] + 1)
    rows = seen[0].rows_seen
    assert len(rows) == 30 and max(rows) <= 2 * 60                  # every solve: at most 2 classes a row


def test_the_default_fit_gives_the_decisions_it_always_gave():
    """p_hat of a seeded fit on the paper's people, computed before the oracle merged equal rows."""
    data = compas_learning_data()
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, data.n, 400), rng.integers(0, data.n, 400)
    keep = i != j
    pairs = ordered_pairs(pd.DataFrame({"i": i[keep], "j": j[keep], "weight": 1.0}), data.n)
    fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.1, T=60), fit_rows=data.train)
    assert float(fit.p_hat.sum()) == pytest.approx(EXPECTED_P_SUM, abs=1e-9)
    assert float(fit.p_hat[:50] @ np.arange(50)) == pytest.approx(EXPECTED_P_DOT, abs=1e-9)


EXPECTED_P_SUM = 2909.0666666666666
EXPECTED_P_DOT = 616.1


def test_lexifair_oracle_sees_distinct_rows_only():
    X = _duplicated(30, 100)
    merged = MergedOracle(X, lambda U: (lambda c0, c1: (None, (c1 < c0).astype(float))))
    assert merged.unique.shape[0] <= 30
    c0, c1 = np.random.default_rng(3).random((2, X.shape[0]))
    _, h = merged(c0, c1)
    assert h.shape == (X.shape[0],)
