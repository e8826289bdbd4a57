"""Pairwise-fair learner on COMPAS: paper figures, slack satisfaction, invariants, bad input."""
import numpy as np
import pandas as pd
import pytest

from core.fairness.learner import (LearnerConfig, best_constant_error, fit_elicited_fair,
                                   fit_with_holdout, ordered_pairs, pair_metrics)
from core.fairness.learning_data import compas_learning_data


@pytest.fixture(scope="module")
def data():
    return compas_learning_data(seed=0)


def random_pairs(n, k, seed):
    """A pooled panel of "treat alike" judgments on random pairs (weight 1 each)."""
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, k), rng.integers(0, n, k)
    keep = i != j
    return pd.DataFrame({"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                         "n_judges": 1, "agreement": 1.0})


def error(fit, data):
    return float(np.abs(fit.p_hat - data.y).mean())


def test_learning_data_matches_compas_rows(data):
    """Default population: the paper's 5,829 people (spec R1); rows map back to the COMPAS file."""
    from core.datasets import load_compas
    frame = load_compas().iloc[data.rows]
    assert data.population == "paper"
    assert data.X.shape == (5829, len(data.feature_names))
    assert data.y.mean() == pytest.approx(0.4606, abs=5e-5)
    assert np.array_equal(data.y, frame["two_year_recid"].to_numpy())
    assert (data.groups["race"].to_numpy() == frame["race"].astype(str).to_numpy()).all()
    assert "Other" not in set(data.groups["race"])
    assert np.allclose(data.X.mean(axis=0), 0, atol=1e-9)
    assert len(np.intersect1d(data.train, data.test)) == 0
    assert len(data.train) + len(data.test) == 5829
    full = compas_learning_data(population="full")
    assert full.n == 7214 and np.array_equal(full.rows, np.arange(7214))
    # constraint rows of the file become learner positions; pairs with an outsider are dropped
    outsider = int(np.setdiff1d(np.arange(7214), data.rows)[0])
    cons = pd.DataFrame({"i": [data.rows[3], outsider], "j": [data.rows[7], data.rows[1]], "weight": 1.0})
    local, dropped = data.local_constraints(cons)
    assert dropped == 1 and local[["i", "j"]].values.tolist() == [[3, 7]]
    with pytest.raises(ValueError, match="population"):
        compas_learning_data(population="everyone")
    blind = compas_learning_data(seed=0, use_protected=False)
    assert not any(n.startswith(("race", "sex")) for n in blind.feature_names)
    with pytest.raises(ValueError, match="test_share"):
        compas_learning_data(test_share=1.5)


@pytest.mark.parametrize("oracle", ["logistic", "ols"])
def test_unconstrained_error_near_paper(data, oracle):
    """Paper (a): the unconstrained linear threshold classifier errs about 0.32 on COMPAS."""
    empty = ordered_pairs(random_pairs(data.n, 0, 0), data.n)
    fit = fit_elicited_fair(data, empty, LearnerConfig(gamma=0.0, oracle=oracle))
    assert fit.averaging_used == "exact"
    assert 0.30 <= error(fit, data) <= 0.34
    # gamma >= 1 is the same exact reduction even with constraints
    pairs = ordered_pairs(random_pairs(data.n, 50, 1), data.n)
    fit1 = fit_elicited_fair(data, pairs, LearnerConfig(gamma=1.0, oracle=oracle))
    assert error(fit1, data) == pytest.approx(error(fit, data))


def test_gamma_zero_on_pooled_constraints_approaches_best_constant(data):
    """Spec 2 (R4): at gamma = 0 the error moves to the best constant's (0.4606 on the paper's people)."""
    pairs = ordered_pairs(random_pairs(data.n, 800, 2), data.n)
    fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.0, T=400, oracle="logistic"))
    best = best_constant_error(data.y)
    assert best == pytest.approx(0.4606, abs=1e-4)
    assert abs(error(fit, data) - best) <= 0.02
    assert error(fit, data) <= 0.51
    assert pair_metrics(fit.p_hat, pairs, 0.0)["realized_gamma"] <= 0.05


@pytest.mark.parametrize("gamma", [0.1, 0.3])
def test_every_constraint_within_slack_at_convergence(data, gamma):
    """After 1,000 rounds every elicited pair satisfies p_i - p_j <= gamma + 0.03 (spec R3)."""
    pairs = ordered_pairs(random_pairs(data.n, 300, 3), data.n)
    fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=gamma, T=1000, oracle="ols"))
    gaps = fit.p_hat[pairs.I] - fit.p_hat[pairs.J]
    assert gaps.max() <= gamma + 0.03
    # and the constraint is not vacuous: the unconstrained model breaks it
    free = fit_elicited_fair(data, ordered_pairs(random_pairs(data.n, 0, 0), data.n), LearnerConfig())
    assert (free.p_hat[pairs.I] - free.p_hat[pairs.J]).max() > gamma + 0.3
    assert error(fit, data) > error(free, data)


def test_mixture_invariants(data):
    pairs = ordered_pairs(random_pairs(data.n, 100, 4), data.n)
    fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.2, T=200, oracle="ols"))
    assert fit.p_hat.min() >= 0 and fit.p_hat.max() <= 1
    assert np.allclose(fit.predict_proba(data.X), fit.p_hat)
    # error of the mixture = mean error of its components
    h = (data.X @ fit.hypotheses[:, :-1].T + fit.hypotheses[:, -1] > 0)
    component_errors = (h != data.y[:, None]).mean(axis=0)
    assert component_errors.mean() == pytest.approx(error(fit, data))
    assert fit.lambda_bar.sum() <= fit.config.C_lambda + 1e-9
    assert len(fit.trajectory) == 20
    draws = fit.sample(data.X, np.random.default_rng(0))
    assert set(np.unique(draws)) <= {0, 1}


def test_fast_averaging_is_labelled_and_uses_the_slack(data):
    pairs = ordered_pairs(random_pairs(data.n, 300, 5), data.n)
    paper = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.3, T=600, oracle="ols"))
    fast = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.3, T=600, oracle="ols",
                                                        averaging="fast"))
    assert paper.averaging_used == "paper"
    assert fast.averaging_used in ("fast", "paper")
    if fast.averaging_used == "fast":
        assert len(fast.hypotheses) == 300
        assert pair_metrics(fast.p_hat, pairs, 0.3)["realized_gamma"] <= 0.3 + 0.02
        assert error(fast, data) <= error(paper, data) + 1e-9
    else:
        assert fast.notes


def test_eta_budget_mode(data):
    """With eta > 0 the weighted average excess per judgment stays near eta; a loose eta frees the fit."""
    cons = random_pairs(data.n, 300, 6)
    pairs = ordered_pairs(cons, data.n)
    tight = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.0, eta=0.05, T=1500, oracle="ols"))
    loose = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.0, eta=2.0, T=1500, oracle="ols"))
    assert pair_metrics(tight.p_hat, pairs, 0.0)["mean_excess"] <= 0.05 + 0.05
    assert error(loose, data) < error(tight, data)
    assert error(loose, data) <= 0.35
    assert pairs.W == pytest.approx(len(cons))          # per-judgment normaliser


def test_directional_weights_give_one_orientation(data):
    cons = pd.DataFrame({"i": [0, 2], "j": [1, 3], "weight": [0.0, 0.5], "w_ij": [1.0, 0.5],
                         "w_ji": [0.0, 0.5]})
    pairs = ordered_pairs(cons, data.n)
    assert sorted(zip(pairs.I.tolist(), pairs.J.tolist())) == [(0, 1), (2, 3), (3, 2)]
    assert pairs.W == pytest.approx(1.0 + 0.5)


def test_holdout_reports_both_splits(data):
    cons = random_pairs(data.n, 200, 7)
    rep = fit_with_holdout(data, cons, LearnerConfig(gamma=0.2, T=100, oracle="ols"),
                           pair_holdout=0.25, individual_holdout=True, rng=0)
    assert rep.summary["pairs"] + rep.summary["heldout_pairs"] == len(cons)
    assert rep.summary["heldout_pairs"] == round(0.25 * len(cons))
    assert 0.2 < rep.summary["error_heldout"] < 0.6
    members = np.r_[rep.train_pairs.I, rep.train_pairs.J]
    assert rep.summary["heldout_individuals"] == len(np.setdiff1d(data.test, members)) < len(data.test)
    assert np.array_equal(rep.fit.fit_rows, data.train)


@pytest.mark.parametrize("frame, message", [
    (pd.DataFrame({"i": [0], "j": [0], "weight": [1.0]}), "different individuals"),
    (pd.DataFrame({"i": [0], "j": [99999], "weight": [1.0]}), "between 0 and 5828"),
    (pd.DataFrame({"i": [0], "j": [1], "weight": [-1.0]}), ">= 0"),
    (pd.DataFrame({"i": [0], "j": [1]}), "lacks column"),
    (pd.DataFrame({"i": [0], "j": ["x"], "weight": [1.0]}), "numbers"),
])
def test_bad_constraints_rejected(data, frame, message):
    with pytest.raises(ValueError, match=message):
        ordered_pairs(frame, data.n)


@pytest.mark.parametrize("kwargs, message", [({"gamma": -0.1}, "gamma"), ({"eta": -1}, "eta"),
                                             ({"T": 0}, "rounds"), ({"averaging": "x"}, "averaging"),
                                             ({"oracle": "svm"}, "oracle")])
def test_bad_config_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LearnerConfig(**kwargs).validate()


def test_session_panel_constraints_fit(data):
    """Constraint frames from the elicitation module's simulated panel are accepted as they are."""
    elicitation = pytest.importorskip("core.fairness.elicitation")
    judgments = elicitation.demo_panel(n_stakeholders=4, seed=0)
    cons, _ = data.local_constraints(elicitation.aggregate_constraints(judgments, "panel"))
    pairs = ordered_pairs(cons, data.n)
    assert pairs.m > 0
    fit = fit_elicited_fair(data, pairs, LearnerConfig(gamma=0.2, T=100, oracle="ols"))
    assert 0.3 <= error(fit, data) <= 0.5


def test_game_matches_the_exact_lp_on_a_toy():
    """Spec R8: with an exact oracle over 1-D thresholds the game reaches the LP optimum."""
    from core.fairness.learner import exact_fair_erm
    from core.fairness.learning_data import LearningData
    rng = np.random.default_rng(0)
    n = 40
    x = np.sort(rng.normal(size=n))
    y = (rng.random(n) < 1 / (1 + np.exp(-3 * x))).astype(int)
    toy = LearningData(X=x[:, None], y=y, groups=pd.DataFrame({"race": ["a"] * n, "sex": ["b"] * n}),
                       feature_names=("x",), train=np.arange(n), test=np.arange(0), rows=np.arange(n))
    cons = pd.DataFrame({"i": [0, 5, 10, 30], "j": [35, 25, 39, 38], "weight": 1.0})
    pairs = ordered_pairs(cons, n)
    cuts = np.r_[x[0] - 1, (x[:-1] + x[1:]) / 2, x[-1] + 1]
    H = np.hstack([(x[:, None] > cuts[None, :]), (x[:, None] < cuts[None, :])]).astype(float)
    for gamma in (0.0, 0.3):
        lp = exact_fair_erm(H, y, pairs, gamma)
        fit = fit_elicited_fair(toy, pairs, LearnerConfig(gamma=gamma, T=3000, oracle="exact1d"))
        err = float(np.abs(fit.p_hat - y).mean())
        assert err <= lp + 0.03
        assert (fit.p_hat[pairs.I] - fit.p_hat[pairs.J]).max() <= gamma + 0.05
    free = exact_fair_erm(H, y, ordered_pairs(cons.iloc[:0], n), 0.0)
    assert exact_fair_erm(H, y, pairs, 0.0) > free          # the pairs do bind on this toy


# ---------------------------------------------------------------- constraint people outside the data

def _synthetic_constraints():
    from core.fairness.elicitation_plan import ElicitationPlan, run_elicitation
    from core.fairness.private_pairs import PrivatePairsPlan, simulated_synthetic_people
    copy = simulated_synthetic_people(PrivatePairsPlan(), np.random.default_rng(0))
    design = run_elicitation(ElicitationPlan(pair_source="dp_synthetic", pair_copy=copy.copy_id, demo_stakeholders=8),
                             copy)
    return design.copy.people, design.constraints


def test_constraint_people_join_at_zero_cost_and_leave_real_rows_untouched():
    from core.fairness.learning_data import compas_learning_data, with_constraint_people
    data = compas_learning_data()
    people, _ = _synthetic_constraints()
    augmented, fit_rows = with_constraint_people(data, people)
    assert augmented.n == data.n + len(people)
    assert np.array_equal(augmented.X[:data.n], data.X)             # bit for bit
    assert np.array_equal(fit_rows, np.arange(data.n))
    assert np.isfinite(augmented.X).all()
    with pytest.raises(ValueError, match="missing"):
        with_constraint_people(data, people.drop(columns=["race"]))


@pytest.mark.slow
def test_fit_on_synthetic_constraint_people_tightens_their_pairs_as_gamma_falls():
    from core.fairness.learner import fit_with_constraint_people
    from core.fairness.learning_data import compas_learning_data
    data = compas_learning_data()
    people, constraints = _synthetic_constraints()
    gaps = {}
    for gamma in (1.0, 0.3, 0.0):
        rep = fit_with_constraint_people(data, people, constraints,
                                         LearnerConfig(gamma=gamma, T=300, averaging="paper"))
        gaps[gamma] = rep.summary["realized_gamma"]
        assert rep.fit.fit_rows.max() < data.n                       # the error is the real people's only
        assert rep.fit.pairs.I.min() >= data.n                       # the pairs are the synthetic people's
    assert gaps[1.0] > gaps[0.3] > gaps[0.0]
    assert gaps[0.0] < 0.1
    with pytest.raises(ValueError, match="positions of the constraint people"):
        fit_with_constraint_people(data, people, constraints.assign(i=len(people)), LearnerConfig(T=5))
