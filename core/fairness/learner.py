"""Learning under elicited pairwise constraints: the Lagrangian game of Jung et al. (FORC 2021).

A regulator runs exponentiated gradient over one multiplier per ordered pair (plus projected
gradient ascent on the budget multiplier tau in the eta mode); a learner best-responds each
round with a cost-sensitive classification oracle (L2-penalised weighted logistic regression by
default, solved by Newton's method and warm-started from the previous round's coefficients). The
output is the uniform mixture of the learner's iterates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from core.contracts import Progress, Registry, Spec, finite_number, make_rng, whole_number
from core.fairness.learning_data import LearningData

AVERAGING = {
    "paper": "paper: uniform average of all rounds (Theorem 1 applies)",
    "fast": "fast: average of the second half of the rounds (heuristic, no guarantee)",
}
#: Realised slack beyond the target that the fast average may use before falling back (spec 2).
FAST_FALLBACK_TOL = 0.02
#: Upper ends a fit's settings may reach: far beyond any useful value, short of overflowing the
#: multipliers' exponentiated-gradient updates.
MAX_ETA = 1e6
MAX_MULTIPLIER_BOUND = 1e6
MAX_LEARNER_ROUNDS = 1_000_000


@dataclass(frozen=True)
class LearnerConfig:
    """Parameters of one fit (Jung et al. Algorithm 1; step sizes are spec section 1.8 choices)."""

    gamma: float = 0.1           # per-pair slack on p_i - p_j
    eta: float = 0.0             # budget on the weighted average excess per judgment (0 = hard)
    T: int = 1000                # rounds (oracle calls)
    C_lambda: float = 10.0       # l1 bound of the pair multipliers
    C_tau: float = 10.0          # bound of the budget multiplier
    mu_lambda: float | None = None   # None: sqrt(ln(m + 1) / T)
    averaging: str = "paper"     # "paper" (all rounds) or "fast" (second half)
    oracle: str = "logistic"     # a key of ORACLES ("logistic", "ols"), or "exact1d" for toy checks
    record_every: int = 10

    def validate(self) -> "LearnerConfig":
        """Raise ValueError naming the parameter to change; return self when valid."""
        finite_number(self.gamma, "gamma (per-pair slack; 0 asks for identical treatment)", 0.0)
        finite_number(self.eta, "eta (violation budget; 0 for hard constraints)", 0.0, MAX_ETA)
        whole_number(self.T, "T (number of rounds; the paper uses 1000)", 1, MAX_LEARNER_ROUNDS)
        for name in ("C_lambda", "C_tau"):
            if not 0 < finite_number(getattr(self, name), f"{name} (the default is 10)", 0.0, MAX_MULTIPLIER_BOUND):
                raise ValueError(f"{name} must be positive; the default is 10.")
        if self.mu_lambda is not None and not 0 < finite_number(self.mu_lambda, "mu_lambda (step size)", 0.0, 1e6):
            raise ValueError("mu_lambda (step size) must be positive, or left out for sqrt(ln(m + 1) / T).")
        whole_number(self.record_every, "record_every (rounds between recorded iterates)", 1, MAX_LEARNER_ROUNDS)
        if self.averaging not in AVERAGING:
            raise ValueError(f"averaging must be one of {sorted(AVERAGING)}.")
        oracle_kind(self.oracle)
        return self


@dataclass(frozen=True)
class OrderedPairs:
    """Ordered constraints (i, j): p_i - p_j <= gamma, with weights and the per-judgment normaliser."""

    I: np.ndarray
    J: np.ndarray
    w: np.ndarray
    W: float                     # total weight of the asserted judgments (spec 1.8 eta-units note)
    row: np.ndarray              # row of the constraint frame each ordered pair came from

    @property
    def m(self) -> int:
        """Number of ordered pairs."""
        return int(self.I.shape[0])

    def incidence(self, n: int) -> sp.csr_matrix:
        """Sparse m x n matrix with +1 at (p, I_p) and -1 at (p, J_p), so M @ h = h_I - h_J."""
        rows = np.repeat(np.arange(self.m), 2)
        cols = np.column_stack([self.I, self.J]).ravel()
        vals = np.tile([1.0, -1.0], self.m)
        return sp.csr_matrix((vals, (rows, cols)), shape=(self.m, n))


def ordered_pairs(constraints: pd.DataFrame, n: int) -> OrderedPairs:
    """Ordered constraints with positive weight from the constraint frame (spec 1.2-1.3).

    Ordered weights ``w_ij`` / ``w_ji`` are used when the frame has them (directional answers);
    otherwise the "treat alike" ``weight`` applies to both orientations.
    """
    missing = {"i", "j", "weight"} - set(constraints.columns)
    if missing:
        raise ValueError(f"The constraint table lacks column(s) {sorted(missing)}; "
                         "it needs i, j and weight.")
    def numbers(col: str) -> np.ndarray:
        return pd.to_numeric(constraints[col], errors="coerce").to_numpy(dtype=float)
    i, j, same = numbers("i"), numbers("j"), numbers("weight")
    directed = {"w_ij", "w_ji"} <= set(constraints.columns)
    w_ij, w_ji = (numbers("w_ij"), numbers("w_ji")) if directed else (same, same)
    if any(np.isnan(a).any() for a in (i, j, same, w_ij, w_ji)):
        raise ValueError("Constraint columns i, j and weight must be numbers without gaps.")
    if (same < 0).any() or (w_ij < 0).any() or (w_ji < 0).any():
        raise ValueError("Constraint weights must be >= 0.")
    if ((i < 0) | (j < 0) | (i >= n) | (j >= n)).any() or (i != np.round(i)).any() \
            or (j != np.round(j)).any():
        raise ValueError(f"Pair indices must be whole row positions between 0 and {n - 1}.")
    if (i == j).any():
        raise ValueError("A pair must join two different individuals (found i == j).")
    rows = np.arange(len(i))
    I = np.concatenate([i, j]).astype(np.int64)
    J = np.concatenate([j, i]).astype(np.int64)
    w = np.concatenate([w_ij, w_ji])
    row = np.concatenate([rows, rows])
    keep = w > 0
    # Total weight of the asserted judgments: a "same" answer counts once, not once per orientation.
    W = float(np.sum(w_ij + w_ji - np.minimum(same, np.minimum(w_ij, w_ji))))
    return OrderedPairs(I=I[keep], J=J[keep], w=w[keep], W=W if W > 0 else 1.0, row=row[keep])


@dataclass
class FairFit:
    """A randomised classifier (uniform mixture of linear threshold rules) and its diagnostics."""

    config: LearnerConfig
    p_hat: np.ndarray            # probability of the positive label for every individual
    hypotheses: np.ndarray       # (k, d + 1): coefficients then intercept; h(x) = 1[x.b + c > 0]
    alpha_hat: np.ndarray        # (m,) averaged excess indicators
    lambda_bar: np.ndarray       # (m,) averaged multipliers = shadow price of each pair
    pairs: OrderedPairs
    fit_rows: np.ndarray         # individuals whose error the learner minimised
    trajectory: pd.DataFrame
    averaging_used: str
    notes: list[str] = field(default_factory=list)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Probability that a draw from the mixture classifies each row of X as positive."""
        scores = X @ self.hypotheses[:, :-1].T + self.hypotheses[:, -1]
        return (scores > 0).mean(axis=1)

    def sample(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Decisions drawn from the mixture, one independent draw per row (the faithful deployment)."""
        return (rng.random(X.shape[0]) < self.predict_proba(X)).astype(int)


# ---------------------------------------------------------------- oracles (spec 1.5, 1.7)

class _LogisticOracle:
    """Cost-sensitive classification by weighted logistic regression on the cheaper label.

    Minimises sum_i s_i log(1 + exp(-(2 z_i - 1)(x_i.b + c))) + |b|^2 / 2 (the objective of
    scikit-learn's LogisticRegression(C=1): intercept unpenalised), with weights s_i = |c1_i - c0_i|
    rescaled to mean 1 and z_i = 1 where predicting 1 is cheaper. Newton's method with step halving,
    vectorised over rows; each call starts from the previous solution. The objective is strictly
    convex in b and, once both labels occur, in c, so the answer does not depend on the start.

    People with the same features and the same cheaper label contribute the same loss term, so
    the objective is summed over distinct (feature row, label) classes with their weights added
    (the sum is unchanged; only its rounding differs): Newton's steps cost the distinct rows, not
    the people (``rows_seen`` counts the rows each solve worked on).
    """

    TOL = 1e-10
    MAX_STEPS = 50

    def __init__(self, X: np.ndarray, start: np.ndarray | None = None):
        unique, inverse = np.unique(np.asarray(X, dtype=float), axis=0, return_inverse=True)
        self.unique = unique
        self.X1 = np.column_stack([unique, np.ones(unique.shape[0])])
        self.inverse = inverse.ravel().astype(np.int64)
        d = X.shape[1]
        self.penalty = np.r_[np.ones(d), 0.0]            # no penalty on the intercept
        self.beta = np.zeros(d + 1) if start is None else np.array(start, dtype=float)
        self.rows_seen: list[int] = []

    def decide(self, params: np.ndarray) -> np.ndarray:
        """The 0/1 decision 1[x.b + c > 0] of every person, computed once per distinct feature row."""
        return (self.unique @ params[:-1] + params[-1] > 0).astype(float)[self.inverse]

    def objective(self, beta: np.ndarray, X1: np.ndarray, z: np.ndarray, s: np.ndarray) -> float:
        margin = (2.0 * z - 1.0) * (X1 @ beta)
        return float(s @ np.logaddexp(0.0, -margin) + 0.5 * (self.penalty * beta) @ beta)

    def __call__(self, diff: np.ndarray) -> np.ndarray:
        rows = np.flatnonzero(diff != 0)
        z = (diff[rows] < 0).astype(float)           # label 1 where predicting 1 is cheaper
        if rows.size == 0 or z.min() == z.max():
            return np.r_[np.zeros(self.X1.shape[1] - 1), 1.0 if rows.size and z[0] == 1 else -1.0]
        s = np.abs(diff[rows])
        s *= rows.size / s.sum()
        U = self.X1.shape[0]
        merged = np.bincount(self.inverse[rows] * 2 + z.astype(np.int64), weights=s, minlength=2 * U)
        keys = np.flatnonzero(merged)
        X1, z, s = self.X1[keys // 2], (keys % 2).astype(float), merged[keys]
        self.rows_seen.append(int(keys.size))
        beta = self.beta.copy()
        value = self.objective(beta, X1, z, s)
        for _ in range(self.MAX_STEPS):
            p = 0.5 * (1.0 + np.tanh(0.5 * (X1 @ beta)))     # logistic sigmoid, overflow-free
            grad = X1.T @ (s * (p - z)) + self.penalty * beta
            hess = (X1 * (s * p * (1.0 - p))[:, None]).T @ X1 + np.diag(self.penalty)
            step = np.linalg.solve(hess + 1e-12 * np.eye(len(beta)), grad)
            t = 1.0
            while True:
                trial = beta - t * step
                new = self.objective(trial, X1, z, s)
                if new <= value + 1e-4 * t * (grad @ -step) or t < 1e-8:
                    break
                t *= 0.5
            beta, value = trial, new
            if np.max(np.abs(t * step)) < self.TOL * (1.0 + np.max(np.abs(beta))):
                break
        self.beta = beta
        return beta.copy()


class _OlsOracle:
    """Linear-threshold heuristic: regress the cost difference on [X, 1] and predict 1 where < 0."""

    def __init__(self, X: np.ndarray):
        design = np.column_stack([X, np.ones(X.shape[0])])
        q, r = np.linalg.qr(design)
        self.q, self.r = q, r

    def __call__(self, diff: np.ndarray) -> np.ndarray:
        beta = np.linalg.solve(self.r, self.q.T @ diff)
        return -beta                                # h = 1[x.(-beta) > 0] = 1[prediction < 0]


class _ExactThresholdOracle:
    """Exact cost-sensitive oracle over 1-D thresholds 1[s * x > t] (toy problems, spec R8)."""

    def __init__(self, X: np.ndarray):
        if X.shape[1] != 1:
            raise ValueError("The exact threshold oracle needs a single feature.")
        self.x = X[:, 0]
        self.values = np.unique(self.x)
        self.cuts = np.r_[self.values[0] - 1.0, (self.values[:-1] + self.values[1:]) / 2,
                          self.values[-1] + 1.0]
        self.code = np.searchsorted(self.values, self.x)

    def __call__(self, diff: np.ndarray) -> np.ndarray:
        per_value = np.bincount(self.code, weights=diff, minlength=self.values.size)
        above = np.r_[np.cumsum(per_value[::-1])[::-1], 0.0]     # cost of 1 for x > cuts[k]
        below = np.r_[0.0, np.cumsum(per_value)]                 # cost of 1 for x < cuts[k]
        k_up, k_down = int(np.argmin(above)), int(np.argmin(below))
        if above[k_up] <= below[k_down]:
            return np.r_[1.0, -self.cuts[k_up]]
        return np.r_[-1.0, self.cuts[k_down]]


@dataclass(frozen=True)
class OracleParams:
    """A cost-sensitive oracle with nothing to set."""


@dataclass(frozen=True)
class OracleKind:
    """How to build one cost-sensitive oracle on features X: ``on(X, warm_start)`` returns a callable
    ``oracle(cost difference) -> coefficients then intercept``. ``warm_starts``: its first solve may
    begin from given coefficients (a sweep then computes the unconstrained fit once and hands it on)."""

    make: Callable[[np.ndarray, "np.ndarray | None"], Callable[[np.ndarray], np.ndarray]]
    warm_starts: bool = False

    def on(self, X: np.ndarray, warm_start: np.ndarray | None = None) -> Callable[[np.ndarray], np.ndarray]:
        return self.make(X, warm_start if self.warm_starts else None)


def _logistic(_: OracleParams) -> OracleKind:
    return OracleKind(lambda X, start: _LogisticOracle(X, start), warm_starts=True)


def _ols(_: OracleParams) -> OracleKind:
    return OracleKind(lambda X, _start: _OlsOracle(X))


#: The oracles a learning plan may name: key -> Spec(label, factory building an :class:`OracleKind`).
ORACLES = Registry("cost-sensitive oracle", [
    Spec("logistic", "weighted logistic regression (default)", _logistic, OracleParams,
         "L2-penalised weighted logistic regression on the cheaper label, solved by Newton's method."),
    Spec("ols", "least-squares threshold (fast heuristic)", _ols, OracleParams,
         "Regresses the cost difference on the features and predicts 1 where it is negative; no guarantee."),
])
#: The exact 1-D threshold oracle: for toy checks against the linear programme only (never offered).
TOY_ORACLES = {"exact1d": Spec("exact1d", "exact 1-D threshold (toy checks)",
                               lambda _p: OracleKind(lambda X, _start: _ExactThresholdOracle(X)), OracleParams,
                               "Exact over thresholds of a single feature.")}


def oracle_kind(key: str) -> OracleKind:
    """The :class:`OracleKind` of an oracle key (``ORACLES``, or a toy oracle); ValueError naming the choices."""
    spec = ORACLES[key] if key in ORACLES or key not in TOY_ORACLES else TOY_ORACLES[key]
    return spec.build()


def exact_fair_erm(H: np.ndarray, y: np.ndarray, pairs: OrderedPairs, gamma: float) -> float:
    """Optimal error of problem (1)-(2) with eta = 0 over mixtures of the columns of H (an LP)."""
    from scipy.optimize import linprog
    errors = (H != y[:, None]).mean(axis=0)
    A_ub = H[pairs.I] - H[pairs.J]
    res = linprog(errors, A_ub=A_ub, b_ub=np.full(pairs.m, gamma), A_eq=np.ones((1, H.shape[1])),
                  b_eq=[1.0], bounds=[(0, 1)] * H.shape[1], method="highs")
    if res.status != 0:
        raise ValueError("The fair ERM linear programme has no solution; the class needs a constant.")
    return float(res.fun)


def unconstrained_coefficients(data: LearningData, fit_rows: np.ndarray) -> np.ndarray:
    """Coefficients (then intercept) of the logistic oracle on the plain error costs of ``fit_rows``:
    the common warm start of every point of a sweep (it depends on the data and split only)."""
    mask = np.zeros(data.n)
    mask[np.asarray(fit_rows, dtype=np.int64)] = 1.0
    y = data.y.astype(float)
    return _LogisticOracle(data.X)(((1.0 - y) - y) * mask / mask.sum())


def _best_response(oracle, X: np.ndarray, c0: np.ndarray, c1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Oracle rule, or a constant classifier when cheaper (H contains both constants, spec 5)."""
    diff = c1 - c0
    params = oracle(diff)
    decide = getattr(oracle, "decide", None)
    h = decide(params) if decide is not None else (X @ params[:-1] + params[-1] > 0).astype(float)
    costs = (h @ diff, 0.0, diff.sum())               # relative to the all-zero classifier
    best = int(np.argmin(costs))
    if best == 1:
        return np.r_[np.zeros(X.shape[1]), -1.0], np.zeros(X.shape[0])
    if best == 2:
        return np.r_[np.zeros(X.shape[1]), 1.0], np.ones(X.shape[0])
    return params, h


def cost_sensitive_oracle(X: np.ndarray) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The weighted cost-sensitive classification oracle on features X, for other games to reuse:
    ``oracle(c0, c1)`` returns (coefficients then intercept, 0/1 decisions) of the logistic oracle
    (warm-started across calls) or of a constant classifier when that is cheaper."""
    oracle = _LogisticOracle(X)
    return lambda c0, c1: _best_response(oracle, X, np.asarray(c0, dtype=float), np.asarray(c1, dtype=float))


# ---------------------------------------------------------------- the game (spec 1.6-1.8)

def fit_elicited_fair(data: LearningData, pairs: OrderedPairs, config: LearnerConfig,
                      fit_rows: np.ndarray | None = None,
                      progress: Progress | None = None,
                      warm_start: np.ndarray | None = None) -> FairFit:
    """Run the regulator/learner game and return the mixture of iterates (Jung et al. Alg. 1-2).

    ``fit_rows`` are the individuals whose error is minimised (default: all); pair members
    outside them enter the costs only through their multipliers (spec 4.4). ``warm_start``
    (coefficients then intercept) is where the logistic oracle's first Newton solve begins; it
    changes only the time taken, since each solve runs to convergence on a convex objective.
    """
    config = config.validate()
    X, y, n = data.X, data.y.astype(float), data.n
    fit_rows = np.arange(n) if fit_rows is None else np.asarray(fit_rows, dtype=np.int64)
    if fit_rows.size == 0:
        raise ValueError("No individuals to learn from; lower the held-out share.")
    mask = np.zeros(n)
    mask[fit_rows] = 1.0
    n_fit = float(fit_rows.size)
    c0 = y * mask / n_fit                                  # cost of predicting 0
    base1 = (1.0 - y) * mask / n_fit                       # error part of the cost of predicting 1
    oracle = oracle_kind(config.oracle).on(X, warm_start)
    m, T = pairs.m, int(config.T)
    notes: list[str] = []

    if m == 0 or config.gamma >= 1.0:
        # Exact reductions (spec 1.3 and the gamma >= 1 note of 1.8): no constraint can bind.
        params, h = _best_response(oracle, X, c0, base1)
        notes.append("No pair constraint can bind at γ = 1 (or without weighted pairs), so that "
                     "point is the unconstrained fit, computed directly.")
        traj = pd.DataFrame({"round": [1], "error": [float(np.abs(h - y)[fit_rows].mean())],
                             "max_violation": [float((h[pairs.I] - h[pairs.J]).max()) if m else 0.0],
                             "mean_excess": [0.0]})
        if progress:
            progress(1, 1, "unconstrained solution")
        return FairFit(config, h, params[None, :], np.zeros(m), np.zeros(m), pairs, fit_rows,
                       traj, "exact", notes)

    M = pairs.incidence(n)
    MT = M.T.tocsr()
    hard = config.eta == 0
    mu = config.mu_lambda if config.mu_lambda is not None else math.sqrt(math.log(m + 1) / T)
    t0 = T // 2 if config.averaging == "fast" else 0
    theta = np.zeros(m)
    tau = 0.0
    alpha = np.zeros(m)
    hyps = np.empty((T, X.shape[1] + 1))
    h_all = np.zeros(n)
    h_tail = np.zeros(n)
    a_all, a_tail = np.zeros(m), np.zeros(m)
    l_all, l_tail = np.zeros(m), np.zeros(m)
    records = []
    report_every = max(1, T // 50)
    for t in range(1, T + 1):
        s = max(0.0, float(theta.max()))
        e = np.exp(theta - s)
        lam = config.C_lambda * e / (math.exp(-s) + e.sum())
        if not hard:
            # Per-judgment units: the gradient can reach 2, hence the halved step (spec 1.8 note).
            grad = float(pairs.w @ alpha) / pairs.W - config.eta
            tau = min(config.C_tau, max(0.0, tau + config.C_tau / (2.0 * math.sqrt(t)) * grad))
        params, h = _best_response(oracle, X, c0, base1 + MT @ lam)
        alpha = np.zeros(m) if hard else (tau * pairs.w / pairs.W - lam <= 0).astype(float)
        theta += mu * (M @ h - alpha - config.gamma)
        hyps[t - 1] = params
        h_all += h
        a_all += alpha
        l_all += lam
        if t > t0:
            h_tail += h
            a_tail += alpha
            l_tail += lam
        if t % config.record_every == 0 or t == T:
            p = h_all / t
            gap = M @ p
            records.append((t, float(np.abs(p - y)[fit_rows].mean()), float(gap.max()),
                            float(pairs.w @ np.maximum(gap - config.gamma, 0.0)) / pairs.W))
        if progress and (t % report_every == 0 or t == T):
            progress(t, T, "learner rounds")

    p_full = h_all / T
    used = "paper"
    if config.averaging == "fast":
        p_fast = h_tail / (T - t0)
        gap = M @ p_fast
        excess = float(pairs.w @ np.maximum(gap - config.gamma, 0.0)) / pairs.W
        over = gap.max() > config.gamma + FAST_FALLBACK_TOL if hard \
            else excess > config.eta + FAST_FALLBACK_TOL
        if over:
            notes.append("The second-half average overshot its fairness target by more than "
                         f"{FAST_FALLBACK_TOL}; the full (paper) average is reported instead.")
        else:
            used = "fast"
    if used == "fast":
        k = T - t0
        p_hat, hyp, a_hat, l_bar = h_tail / k, hyps[t0:], a_tail / k, l_tail / k
    else:
        p_hat, hyp, a_hat, l_bar = p_full, hyps, a_all / T, l_all / T
    traj = pd.DataFrame(records, columns=["round", "error", "max_violation", "mean_excess"])
    return FairFit(config, p_hat, hyp, a_hat, l_bar, pairs, fit_rows, traj, used, notes)


def fit_with_constraint_people(data: LearningData, people: pd.DataFrame, constraints: pd.DataFrame,
                               config: LearnerConfig, individual_holdout: bool = False,
                               progress: Progress | None = None) -> FitReport:
    """Fit under constraints on people who are not training points (spec 4.4, zero-cost augmentation).

    `constraints` name positions of `people` (e.g. a private synthetic copy's). They are appended to
    the cost-sensitive data with c0 = c1 = 0, so the error is the real individuals' only and the
    constraint people act through their pair multipliers. This departs from the sampling assumption
    of the paper's generalisation theorem: the pairs were not drawn from the training people.
    """
    from core.fairness.learning_data import with_constraint_people
    augmented, real = with_constraint_people(data, people)
    shifted = constraints.copy()
    for col in ("i", "j"):
        k = pd.to_numeric(shifted[col], errors="coerce").to_numpy(dtype=float)
        if np.isnan(k).any() or (k < 0).any() or (k >= len(people)).any() or (k != np.round(k)).any():
            raise ValueError(f"Pair column {col} must hold positions of the constraint people (0 to {len(people) - 1}).")
        shifted[col] = k.astype(np.int64) + data.n
    rows = data.train if individual_holdout else real
    return fit_with_holdout(augmented, shifted, config, individual_holdout=individual_holdout,
                            progress=progress, fit_rows=rows)


# ---------------------------------------------------------------- evaluation (spec 1.4, 1.10, 1.11)

def pair_metrics(p: np.ndarray, pairs: OrderedPairs, gamma: float) -> dict[str, float]:
    """Realised gamma, weighted average excess per judgment and share of pairs over their slack."""
    if pairs.m == 0:
        return {"realized_gamma": 0.0, "mean_excess": 0.0, "fairness_loss": 0.0,
                "share_violated": 0.0, "pairs": 0}
    gap = p[pairs.I] - p[pairs.J]
    excess = np.maximum(gap - gamma, 0.0)
    return {"realized_gamma": float(gap.max()),
            "mean_excess": float(pairs.w @ excess) / pairs.W,
            "fairness_loss": float((pairs.w * excess).mean()),     # Pi of spec 1.4 on these pairs
            "share_violated": float((gap > gamma + FAST_FALLBACK_TOL).mean()),
            "pairs": int(np.unique(pairs.row).size)}


def subset_pairs(pairs: OrderedPairs, keep_rows: np.ndarray) -> OrderedPairs:
    """The ordered pairs that came from the given rows of the constraint frame."""
    keep = np.isin(pairs.row, keep_rows)
    share = float(pairs.w[keep].sum() / pairs.w.sum()) if pairs.m else 0.0
    W = pairs.W * share if share > 0 else 1.0          # normaliser in proportion to the weight kept
    return OrderedPairs(pairs.I[keep], pairs.J[keep], pairs.w[keep], W, pairs.row[keep])


@dataclass
class FitReport:
    """A fit with its in-sample and held-out figures (held-out individuals and held-out pairs)."""

    fit: FairFit
    train_pairs: OrderedPairs
    test_pairs: OrderedPairs
    summary: dict[str, float]


def fit_with_holdout(data: LearningData, constraints: pd.DataFrame, config: LearnerConfig,
                     pair_holdout: float = 0.0, individual_holdout: bool = False,
                     rng: np.random.Generator | int | None = None,
                     progress: Progress | None = None,
                     warm_start: np.ndarray | None = None,
                     fit_rows: np.ndarray | None = None) -> FitReport:
    """Fit on training individuals and pairs; report error and pair fairness on both splits.

    ``rng`` (a seed or Generator) draws the held-out pairs; it is needed only when some are held out.
    ``fit_rows`` overrides the individuals whose error is minimised and reported (default: the
    training individuals, or everyone): with constraint people appended at zero cost
    (``learning_data.with_constraint_people``) they are the real individuals only.
    """
    if not 0.0 <= pair_holdout < 1.0:
        raise ValueError("The held-out share of pairs must be in [0, 1).")
    pairs = ordered_pairs(constraints, data.n)
    rows = np.unique(pairs.row)
    n_test = int(round(pair_holdout * rows.size))
    test_rows = (make_rng(rng, what="the held-out pairs").choice(rows, size=n_test, replace=False)
                 if n_test else np.array([], dtype=int))
    train_pairs = subset_pairs(pairs, np.setdiff1d(rows, test_rows))
    test_pairs = subset_pairs(pairs, test_rows)
    if fit_rows is None:
        fit_rows = data.train if individual_holdout else np.arange(data.n)
    else:
        fit_rows = np.asarray(fit_rows, dtype=np.int64)
        if fit_rows.size == 0 or fit_rows.min() < 0 or fit_rows.max() >= data.n:
            raise ValueError(f"fit_rows must be positions between 0 and {data.n - 1}.")
    fit = fit_elicited_fair(data, train_pairs, config, fit_rows=fit_rows, progress=progress,
                            warm_start=warm_start)
    y = data.y
    # Held-out individuals who appear in a fitted pair shaped the model through their multipliers,
    # so the held-out error is measured on the others only.
    unseen = np.setdiff1d(data.test, np.r_[train_pairs.I, train_pairs.J])
    summary = {"gamma": config.gamma, "eta": config.eta,
               "error": float(np.abs(fit.p_hat - y)[fit_rows].mean()),
               "error_heldout": float(np.abs(fit.p_hat - y)[unseen].mean())
               if individual_holdout and unseen.size else float("nan"),
               "heldout_individuals": int(unseen.size) if individual_holdout else 0}
    for prefix, prs in (("", train_pairs), ("heldout_", test_pairs)):
        for k, v in pair_metrics(fit.p_hat, prs, config.gamma).items():
            summary[prefix + k] = float(v) if prs.m or not prefix else float("nan")
    summary["averaging"] = fit.averaging_used
    return FitReport(fit, train_pairs, test_pairs, summary)


def best_constant_error(y: np.ndarray) -> float:
    """Error of the better of the two constant classifiers (the gamma = 0 reference of spec 2)."""
    rate = float(np.mean(y))
    return min(rate, 1.0 - rate)
