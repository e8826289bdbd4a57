"""Lexicographically fair learning (Diana, Gill, Kearns, Kenthapadi, Roth, Sharifi-Malvajerdi, FORC 2021).

Groups are columns of a membership matrix M (n x K, overlaps allowed). Level j of the convex
formulation (the paper's Definition 5, spec section 3.2) solves

    min eta_j  s.t.  sum_{k in G} L_k(h) <= eta_|G|  for every set G of groups with |G| <= j,

with eta_1 .. eta_{j-1} fixed from the earlier levels (plus the slack alpha). The Lagrangian game:
the auditor best-responds by sorting the group losses and taking the prefix r* maximising
(s_r - eta_r), putting mass B on that top-r* set (or nothing when no constraint is violated);
the learner plays no-regret: Follow-the-Perturbed-Leader over the weighted cost-sensitive oracle
of ``core.fairness.learner`` (classification; the output is the uniform mixture of its
classifiers) or projected online gradient descent on the logistic surrogate (the output is the
averaged parameter). eta_j follows projected gradient steps 1 - B 1[|C| = j] (step
j L_M / ((1 + B) sqrt T)); B_j = (alpha + j L_M) / alpha as in the paper. Theorem 12 bounds each
subset sum by eta_hat_r + (j L_M + 2 nu) / B, nu being the game's remaining gap, which
``level_gap`` measures at the averaged play.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from core.contracts import Progress, Registry, Spec


# ---------------------------------------------------------------- groups

def membership_matrix(frame: pd.DataFrame, columns: tuple[str, ...], *, pairs: bool = True,
                      min_size: int = 50, top_values: int = 2,
                      person: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """Boolean n x K membership of the groups 'column = value' (the ``top_values`` largest values of
    each column) and, with ``pairs``, of their pairwise intersections across columns; groups with
    fewer than ``min_size`` members are dropped (members are distinct persons when ``person`` gives each
    row's person, else rows)."""
    if not columns:
        raise ValueError("Choose at least one column to form groups from.")
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"Unknown group column(s) {missing}.")
    singles: list[tuple[str, np.ndarray, str]] = []
    for col in columns:
        values = frame[col].astype(str)
        for value in values.value_counts().index[:top_values]:
            singles.append((col, (values == value).to_numpy(), f"{col} = {value}"))
    groups = [(name, m) for _, m, name in singles]
    if pairs:
        for (c1, m1, n1), (c2, m2, n2) in itertools.combinations(singles, 2):
            if c1 != c2:
                groups.append((f"{n1} & {n2}", m1 & m2))
    def members(m: np.ndarray) -> int:
        return int(m.sum()) if person is None else int(np.unique(person[m]).size)

    kept = [(name, m) for name, m in groups if members(m) >= min_size]
    if len(kept) < 2:
        raise ValueError(f"Fewer than two groups have at least {min_size} members; lower the minimum "
                         "group size or choose other columns.")
    return np.column_stack([m for _, m in kept]), [name for name, _ in kept]


def group_errors(p: np.ndarray, y: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Expected 0/1 error per group of a randomised classifier predicting 1 with probability p."""
    err = p * (1.0 - y) + (1.0 - p) * y
    return (err @ M) / M.sum(axis=0)


def bootstrap_group_errors(p: np.ndarray, y: np.ndarray, M: np.ndarray, reps: int,
                           rng: np.random.Generator, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each group's error over ``reps`` row bootstraps (the model fixed)."""
    n = y.shape[0]
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=reps).astype(float)
    err = p * (1.0 - y) + (1.0 - p) * y
    sizes = np.maximum(counts @ M, 1.0)
    boot = (counts @ (M * err[:, None])) / sizes
    q = (1.0 - level) / 2.0
    return np.quantile(boot, q, axis=0), np.quantile(boot, 1.0 - q, axis=0)


# ---------------------------------------------------------------- the auditor

def top_sums(losses: np.ndarray, j: int) -> np.ndarray:
    """Sums of the r largest group losses for r = 1..j (one sort, prefix sums)."""
    return np.cumsum(np.sort(losses)[::-1])[:j]


def auditor_response(losses: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, int, float]:
    """Best response of the auditor: the top-r* groups with r* = argmax_r (s_r - eta_r), their
    size r* and the violation; an empty set when no constraint is violated."""
    order = np.argsort(-losses, kind="stable")
    viol = np.cumsum(losses[order])[:thresholds.size] - thresholds
    r = int(np.argmax(viol))
    if viol[r] <= 0:
        return order[:0], 0, float(viol[r])
    return order[:r + 1], r + 1, float(viol[r])


# ---------------------------------------------------------------- one level of the game

@dataclass
class LevelFit:
    """The averaged play of one level over a finite class: mixture weights, eta_hat, the game's
    gap nu, the realised worst excess of a subset sum over its bound, and eta's trajectory."""

    level: int
    p: np.ndarray                   # mixture weight over hypotheses or P(decide 1) per row
    eta_hat: float
    thresholds: np.ndarray          # eta used for sizes 1..j (earlier levels fixed, plus slack)
    nu: float
    excess: float                   # max_r (top-r sum of the output's losses - thresholds_r)
    bound: float                    # (j L_M + 2 nu) / B
    B: float
    trajectory: np.ndarray          # running average of eta_j every few rounds


def default_B(alpha: float, level: int, loss_max: float = 1.0) -> float:
    """The paper's multiplier bound B_j = (alpha + j L_M) / alpha."""
    return (alpha + level * loss_max) / alpha


def play_level(respond: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], K: int, level: int,
               fixed: np.ndarray, *, B: float, T: int, rng: np.random.Generator, loss_max: float = 1.0,
               progress: Progress | None = None, message: str = "") -> tuple:
    """Run the game of one level with a Follow-the-Perturbed-Leader learner.

    ``respond(v)`` minimises sum_k v_k L_k(h) over pure hypotheses and returns (h as a vector to
    average, its K group losses). The leader is perturbed by exponential noise of scale B sqrt(T)
    on the cumulative group weights. The auditor best-responds to the group losses of the
    learner's mixture so far: the perturbed leader's guarantee holds against an auditor that does
    not see the current perturbation, and one that answers the pure draw keeps eta at the level
    of pure hypotheses, above what mixtures reach. Returns (average h, eta_hat, group weights of the average
    auditor, share of rounds the auditor chose a set of each size 1..j, eta's running average
    every T/100 rounds)."""
    V = np.zeros(K)
    total_h = loss_sum = None
    eta, eta_sum = level * loss_max / 2.0, 0.0
    step = level * loss_max / ((1.0 + B) * np.sqrt(T))
    scale = B * np.sqrt(T)
    every = max(1, T // 100)
    trail = []
    counts = np.zeros(level + 1)
    for t in range(T):
        h, losses = respond(V + rng.exponential(scale, K))
        total_h = h.astype(float).copy() if total_h is None else total_h + h
        loss_sum = losses.copy() if loss_sum is None else loss_sum + losses
        chosen, size, _ = auditor_response(loss_sum / (t + 1), np.r_[fixed, eta])
        V[chosen] += B
        counts[size] += 1
        eta_sum += eta
        eta = float(np.clip(eta - step * (1.0 - B * (size == level)), 0.0, level * loss_max))
        if (t + 1) % every == 0:
            trail.append(eta_sum / (t + 1))
            if progress is not None:
                progress(t + 1, T, message)
    return total_h / T, eta_sum / T, V / T, counts[1:] / T, np.array(trail)


def level_gap(losses_out: np.ndarray, thresholds: np.ndarray, best_loss: float, freq: np.ndarray,
              B: float, loss_max: float = 1.0) -> float:
    """nu: the auditor's best payoff against the averaged play minus the learner's best payoff
    against the averaged auditor, for the Lagrangian eta_j + sum_G lambda_G (sum_{k in G} L_k - eta_|G|).

    ``best_loss`` = min_h sum_k w_k L_k(h) for the averaged group weights w, ``freq[r-1]`` the share
    of rounds in which the auditor put mass B on a set of size r."""
    level = thresholds.size
    upper = thresholds[-1] + B * max(0.0, excess_over(losses_out, thresholds))
    coef = 1.0 - B * freq[level - 1]
    lower = best_loss + min(0.0, level * loss_max * coef) - B * float(freq[:-1] @ thresholds[:-1])
    return max(0.0, upper - lower)


def excess_over(losses_out: np.ndarray, thresholds: np.ndarray) -> float:
    """Largest amount by which a top-r sum of the output's losses exceeds its threshold (r <= j)."""
    return float(np.max(top_sums(losses_out, thresholds.size) - thresholds))


# ---------------------------------------------------------------- finite classes: the exact answer

def finite_respond(E: np.ndarray) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Best response over a finite class with group-error matrix E (K x H): one-hot h, its losses."""
    eye = np.eye(E.shape[1])
    def respond(v: np.ndarray):
        k = int(np.argmin(v @ E))
        return eye[k], E[:, k]
    return respond


def lexifair_lp(E: np.ndarray, levels: int, alpha: float) -> list[float]:
    """Exact convex-lexifair values OPT_1..OPT_levels over mixtures of the columns of E (K x H):
    at level j, min eta subject to every r-subset sum <= fixed eta_r + alpha (r < j) and every
    j-subset sum <= eta (one linear programme per level, subsets enumerated)."""
    from scipy.optimize import linprog
    K, H = E.shape
    opts: list[float] = []
    for j in range(1, levels + 1):
        rows, rhs = [], []
        for r in range(1, j + 1):
            for subset in itertools.combinations(range(K), r):
                row = np.r_[E[list(subset)].sum(axis=0), -1.0 if r == j else 0.0]
                rows.append(row)
                rhs.append(0.0 if r == j else opts[r - 1] + alpha)
        res = linprog(np.r_[np.zeros(H), 1.0], A_ub=np.array(rows), b_ub=np.array(rhs),
                      A_eq=np.r_[np.ones(H), 0.0][None, :], b_eq=[1.0],
                      bounds=[(0, 1)] * H + [(None, None)], method="highs")
        if res.status != 0:
            raise ValueError(f"The level-{j} programme has no solution.")
        opts.append(float(res.fun))
    return opts


def finite_game(E: np.ndarray, levels: int, alpha: float, *, T: int, rng: np.random.Generator,
                B: float | None = None) -> list[LevelFit]:
    """The lexifair game over a finite class (the check against ``lexifair_lp``)."""
    K = E.shape[0]
    respond = finite_respond(E)
    fits: list[LevelFit] = []
    fixed = np.zeros(0)
    for j in range(1, levels + 1):
        b = default_B(alpha, j) if B is None else B
        p, eta_hat, weights, freq, trail = play_level(respond, K, j, fixed, B=b, T=T, rng=rng)
        thresholds = np.r_[fixed, eta_hat]
        out = E @ p
        nu = level_gap(out, thresholds, float(np.min(weights @ E)), freq, b)
        fits.append(LevelFit(j, p, eta_hat, thresholds, nu, excess_over(out, thresholds),
                             (j + 2 * nu) / b, b, trail))
        fixed = np.r_[fixed, eta_hat + alpha]
    return fits


# ---------------------------------------------------------------- data: classification and surrogate

class MergedOracle:
    """The cost-sensitive oracle on the distinct feature rows of X: the costs of identical rows are
    summed (cost-sensitive classification is linear in the costs), the decision of a distinct row
    is copied to all its duplicates. On COMPAS this halves the rows each oracle call sees."""

    def __init__(self, X: np.ndarray, make_oracle):
        self.unique, self.inverse = np.unique(X, axis=0, return_inverse=True)
        self.inverse = self.inverse.ravel()
        self.oracle = make_oracle(self.unique)

    def __call__(self, c0: np.ndarray, c1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = self.unique.shape[0]
        params, h = self.oracle(np.bincount(self.inverse, weights=c0, minlength=m),
                                np.bincount(self.inverse, weights=c1, minlength=m))
        return params, h[self.inverse]


def data_respond(y: np.ndarray, M: np.ndarray, fit: np.ndarray, oracle
                 ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Best response on data: group weights v become per-row costs sum_k v_k M_ik / n_k on the fit
    rows (cost of deciding 1 on a 0 and of 0 on a 1); the oracle returns decisions for every row."""
    Mf = M[fit].astype(float)
    sizes = Mf.sum(axis=0)
    yf = y[fit].astype(float)

    def respond(v: np.ndarray):
        w = np.zeros(y.shape[0])
        w[fit] = Mf @ (v / sizes)
        _, h = oracle(w * y, w * (1.0 - y))
        return h, ((h[fit] != yf).astype(float) @ Mf) / sizes
    return respond


def logistic_losses(theta: np.ndarray, X1: np.ndarray, y: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Mean logistic loss per group of the linear score X1 theta."""
    margin = (2.0 * y - 1.0) * (X1 @ theta)
    return (np.logaddexp(0.0, -margin) @ M) / M.sum(axis=0)


def ogd_level(X1: np.ndarray, y: np.ndarray, M: np.ndarray, level: int, fixed: np.ndarray, *, B: float,
              T: int, radius: float, progress: Progress | None = None, message: str = ""
              ) -> tuple:
    """Projected online gradient descent for the logistic surrogate (the paper's convex case):
    theta steps D / (j B G sqrt T) against B sum_{k in C} L_k, projected on the ball of radius D;
    eta_j steps j L_M / ((1 + B) sqrt T). Returns (averaged theta, eta_hat, averaged group
    weights, share of rounds per set size, eta's running average, the loss bound L_M)."""
    n, d = X1.shape
    Mf = M.astype(float)
    sizes = Mf.sum(axis=0)
    norms = np.sqrt((X1 ** 2).sum(axis=1))
    G = float(norms.max())
    # L_M bounds the group losses over the ball: a group's mean of log(1 + exp(D |x_i|))
    loss_max = float(np.max((np.logaddexp(0.0, radius * norms) @ Mf) / sizes))
    theta = np.zeros(d)
    theta_sum = np.zeros(d)
    V = np.zeros(M.shape[1])
    start = (np.log(2.0) * Mf.sum(axis=0)) / sizes          # every group's loss at theta = 0
    eta, eta_sum = float(top_sums(start, level)[-1]), 0.0   # start eta where the play starts
    step_t = radius / (level * B * G * np.sqrt(T))
    step_e = level * loss_max / ((1.0 + B) * np.sqrt(T))
    every = max(1, T // 100)
    trail = []
    counts = np.zeros(level + 1)
    sign = 2.0 * y - 1.0
    for t in range(T):
        margin = sign * (X1 @ theta)
        losses = (np.logaddexp(0.0, -margin) @ Mf) / sizes
        chosen, size, _ = auditor_response(losses, np.r_[fixed, eta])
        theta_sum += theta
        eta_sum += eta
        counts[size] += 1
        if size:
            v = np.zeros(M.shape[1])
            v[chosen] = B
            V += v
            w = Mf @ (v / sizes)
            grad = X1.T @ (w * -sign * 0.5 * (1.0 - np.tanh(0.5 * margin)))
            theta = theta - step_t * grad
            norm = np.linalg.norm(theta)
            if norm > radius:
                theta *= radius / norm
        eta = float(np.clip(eta - step_e * (1.0 - B * (size == level)), 0.0, level * loss_max))
        if (t + 1) % every == 0:
            trail.append(eta_sum / (t + 1))
            if progress is not None:
                progress(t + 1, T, message)
    return theta_sum / T, eta_sum / T, V / T, counts[1:] / T, np.array(trail), loss_max


# ---------------------------------------------------------------- the learners: one registry

@dataclass(frozen=True)
class LevelTask:
    """What a learner plays one level on: features, labels, memberships, the rows it is fitted to and
    the cost-sensitive oracle (shared with the plain-accuracy model)."""

    X: np.ndarray
    y: np.ndarray
    M: np.ndarray
    fit: np.ndarray
    oracle: Callable


@dataclass
class LevelPlay:
    """One level's output: P(decide 1) per row, eta_hat, the averaged auditor (group weights and the
    share of rounds per set size), eta's running average, the output's group losses on the fitted
    rows, the learner's best payoff against the averaged auditor and the loss bound L_M."""

    p: np.ndarray
    eta_hat: float
    weights: np.ndarray
    freq: np.ndarray
    trail: np.ndarray
    losses: np.ndarray
    best: float
    loss_max: float


@dataclass(frozen=True)
class LearnerParams:
    """The learners take no settings beyond the plan's (rounds, B, slack): this is their empty Params."""


class PerturbedLeader:
    """Classification: Follow-the-Perturbed-Leader over the weighted cost-sensitive oracle; the output
    is the uniform mixture of the classifiers played, its losses 0/1 errors."""

    loss = "0/1 error"

    def play(self, task: LevelTask, level: int, fixed: np.ndarray, *, B: float, T: int,
             rng: np.random.Generator, progress: Progress | None = None, message: str = "") -> LevelPlay:
        respond = data_respond(task.y, task.M, task.fit, task.oracle)
        p, eta_hat, weights, freq, trail = play_level(respond, task.M.shape[1], level, fixed, B=B, T=T, rng=rng,
                                                      progress=progress, message=message)
        losses = group_errors(p[task.fit], task.y[task.fit], task.M[task.fit])
        return LevelPlay(p, eta_hat, weights, freq, trail, losses, float(weights @ respond(weights)[1]), 1.0)


class GradientSurrogate:
    """Logistic surrogate: projected online gradient descent on the ball of radius 1 (no random draws);
    the output thresholds the averaged parameter, its losses are logistic losses."""

    loss = "logistic loss"
    radius = 1.0

    def play(self, task: LevelTask, level: int, fixed: np.ndarray, *, B: float, T: int,
             rng: np.random.Generator, progress: Progress | None = None, message: str = "") -> LevelPlay:
        X1 = np.column_stack([task.X, np.ones(task.y.size)])
        yf, Mf = task.y[task.fit].astype(float), task.M[task.fit]
        theta, eta_hat, weights, freq, trail, loss_max = ogd_level(
            X1[task.fit], yf, Mf, level, fixed, B=B, T=T, radius=self.radius, progress=progress, message=message)
        losses = logistic_losses(theta, X1[task.fit], yf, Mf.astype(float))
        # no exact best response over the ball: the averaged parameter's own value stands in
        return LevelPlay((X1 @ theta > 0).astype(float), eta_hat, weights, freq, trail, losses,
                         float(weights @ losses), loss_max)


#: The learners a lexifair level can use, key -> Spec; a plan names one by its key.
LEARNERS = Registry("lexifair learner", (
    Spec("ftpl", "classification: Follow-the-Perturbed-Leader over the cost-sensitive oracle",
         lambda _: PerturbedLeader(), LearnerParams,
         "Plays the weighted classifier each round; the model is the mixture of the classifiers played."),
    Spec("ogd", "logistic surrogate: projected online gradient descent",
         lambda _: GradientSurrogate(), LearnerParams,
         "Convex surrogate; the model is the averaged linear score, thresholded at 0."),
))
