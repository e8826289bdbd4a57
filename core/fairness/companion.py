"""Calibrated scores whose thresholded decisions have equal error rates (Reich & Vijaykumar, FORC 2021).

A post-processing of the learner's scores for two groups L (lower base rate) and H: calibrate
within groups by bin means, pick the common (FPR, TPR) that minimises the decision-maker's loss
among rates both groups can reach with a calibrated score (Stage 1, an LP), then per group find
the least mean-preserving contraction of the score that hits those rates (Stage 2, an LP).
Positive label = reoffended; the decision 1[score >= cutoff] flags "high risk".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import linprog

MARGIN = 1e-6          # strict NPV inequality replaced by a small margin (spec 3.1 review note)


@dataclass(frozen=True)
class CompanionConfig:
    """Cut-off, number of score bins and the two groups compared (L/H are ordered by base rate)."""

    cutoff: float = 0.5                  # p_bar = k / (k + 1); k = cost of a false positive
    bins: int = 10
    attribute: str = "race"
    groups: tuple[str, str] = ("African-American", "Caucasian")
    seed: int = 0

    def validate(self) -> "CompanionConfig":
        """Raise ValueError naming the setting to change; return self when valid."""
        if not 0.0 < self.cutoff < 1.0:
            raise ValueError("The cut-off must lie strictly between 0 and 1.")
        if not 2 <= int(self.bins) <= 50:
            raise ValueError("Use between 2 and 50 score bins.")
        if len(set(self.groups)) != 2:
            raise ValueError("Choose two different groups to compare.")
        return self


@dataclass
class CompanionResult:
    """Feasibility, the common rates, post-processed scores and before/after tables."""

    feasible: bool
    nonconstant: bool
    corollary5: dict
    target: dict | None                    # {"fpr", "tpr", "loss"} common to both groups
    rates: pd.DataFrame                    # per group x stage: FPR, TPR, PPV, NPV, loss, score MSE
    roc: pd.DataFrame                      # per group ROC vertices of the calibrated score
    calibration: pd.DataFrame              # per group x stage x score value: observed rate
    scores: pd.Series                      # post-processed score per individual (NaN outside L, H)
    kernels: dict = field(default_factory=dict)
    message: str = ""


def cost_ratio(cutoff: float) -> float:
    """k such that the cut-off k / (k + 1) is optimal for a calibrated score (R&V section 2)."""
    return cutoff / (1.0 - cutoff)


def calibrate_in_bins(score: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Bin index per person (quantile bins of the score) and the bin means of y (calibrated p*)."""
    values, codes = np.unique(np.asarray(score, dtype=float), return_inverse=True)
    if values.size > bins:                 # many distinct scores: quantile bins, ties kept together
        codes = pd.qcut(score, q=bins, labels=False, duplicates="drop")
        codes = pd.factorize(codes, sort=True)[0]
    means = np.bincount(codes, weights=y) / np.bincount(codes)
    return codes, means


def _roc_vertices(p: np.ndarray, s: np.ndarray) -> np.ndarray:
    """(FPR, TPR) of thresholding a calibrated discrete score at each of its values, from (0, 0)."""
    order = np.argsort(-p)
    mu = float(p @ s)
    tp = np.concatenate([[0.0], np.cumsum((p * s)[order])]) / max(mu, 1e-12)
    fp = np.concatenate([[0.0], np.cumsum(((1 - p) * s)[order])]) / max(1 - mu, 1e-12)
    return np.column_stack([fp, tp])


def corollary5(mu_l: float, mu_h: float, cutoff: float) -> dict:
    """The point (a1, a2) that both ROC curves must pass above (R&V Corollary 5)."""
    b_l, b_h = mu_l / (1 - mu_l), mu_h / (1 - mu_h)
    if abs(b_h - b_l) < 1e-9:
        return {"a1": np.nan, "a2": np.nan, "trivial": None,
                "note": "equal base rates: the closed form does not apply; the LP decides"}
    a1 = b_l / (b_h - b_l) * (b_h - (1 + b_h) * cutoff) / cutoff
    a2 = (b_h * (1 - cutoff) - cutoff) / ((b_h - b_l) * (1 - cutoff))
    trivial = "nobody flagged" if a1 <= 0 else ("everybody flagged" if a1 >= 1 else None)
    return {"a1": float(a1), "a2": float(a2), "trivial": trivial, "note": ""}


def _above(curve: np.ndarray, a1: float, a2: float) -> bool:
    """Whether the concave hull of ROC vertices passes strictly above (a1, a2)."""
    xs, ys = curve[:, 0], curve[:, 1]
    order = np.argsort(xs)
    best = np.max(np.interp(a1, xs[order], ys[order])) if len(xs) else 0.0
    # The upper hull is the max over segments of any two vertices; the calibrated ROC is concave.
    return bool(best > a2)


def stage1(curves: dict[str, np.ndarray], mu: dict[str, float], low: str, high: str,
           cutoff: float, base_rate: float) -> dict | None:
    """Loss-minimising common (FPR, TPR) reachable by calibrated scores in both groups (LP)."""
    k = cost_ratio(cutoff)
    b_l, b_h = mu[low] / (1 - mu[low]), mu[high] / (1 - mu[high])
    verts = {g: np.vstack([c, 1.0 - c]) for g, c in curves.items()}   # curve and its reflection
    n_l, n_h = len(verts[low]), len(verts[high])
    nv = 2 + n_l + n_h                                                # a1, a2, weights L, weights H
    cost = np.zeros(nv)
    cost[0], cost[1] = k * (1 - base_rate), -base_rate
    A_eq, b_eq = [], []
    for offset, g, count in ((2, low, n_l), (2 + n_l, high, n_h)):
        row = np.zeros(nv); row[offset:offset + count] = 1; A_eq.append(row); b_eq.append(1.0)
        for axis in (0, 1):
            row = np.zeros(nv); row[offset:offset + count] = verts[g][:, axis]; row[axis] = -1
            A_eq.append(row); b_eq.append(0.0)
    # PPV >= cutoff in L:  cutoff*a1 - b_L(1-cutoff)*a2 <= 0
    # NPV > 1-cutoff in H: b_H(1-cutoff)(1-a2) + margin <= cutoff(1-a1)
    A_ub = [np.r_[cutoff, -b_l * (1 - cutoff), np.zeros(nv - 2)],
            np.r_[cutoff, -b_h * (1 - cutoff), np.zeros(nv - 2)]]
    b_ub = [0.0, cutoff - b_h * (1 - cutoff) - MARGIN]
    res = linprog(cost, A_ub=np.array(A_ub), b_ub=b_ub, A_eq=np.array(A_eq), b_eq=b_eq,
                  bounds=[(0, 1)] * nv, method="highs")
    options = []
    if res.status == 0:
        options.append((float(res.fun) + base_rate, float(res.x[0]), float(res.x[1])))
    if mu[low] >= cutoff:                      # corner (1, 1): everybody flagged, NPV vacuous
        options.append((k * (1 - base_rate), 1.0, 1.0))
    if not options:
        return None
    loss, a1, a2 = min(options)
    return {"fpr": a1, "tpr": a2, "loss": loss}


def stage2(p: np.ndarray, s: np.ndarray, cutoff: float, fpr: float, tpr: float
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Kernel T (bins x outputs) of the least contraction of p hitting (fpr, tpr) (R&V Stage 2)."""
    mu = float(p @ s)
    # Output grid: the inputs, the cut-off and the mean (spec 3.1 note a) plus a fine 0.01 grid,
    # since merging bins can need output values that are not input values.
    out = np.unique(np.round(np.r_[p, cutoff, mu, np.linspace(0, 1, 101)], 12))
    N, K = len(p), len(out)
    flag = (out >= cutoff).astype(float)
    idx = lambda i, j: i * K + j                        # noqa: E731  (row-major T)
    cost = ((p[:, None] - out[None, :]) ** 2 * s[:, None]).ravel()
    A_eq, b_eq = [], []
    for i in range(N):                                  # right-stochastic rows (N small: bins)
        row = np.zeros(N * K); row[idx(i, 0):idx(i, 0) + K] = 1; A_eq.append(row); b_eq.append(1.0)
    calib = (s[:, None] * (p[:, None] - out[None, :]))  # sum_i T_ij s_i (p_i - q_j) = 0 per j
    for j in range(K):
        row = np.zeros((N, K)); row[:, j] = calib[:, j]; A_eq.append(row.ravel()); b_eq.append(0.0)
    A_eq.append(((p * s)[:, None] * (flag[None, :] - tpr)).ravel()); b_eq.append(0.0)
    A_eq.append((((1 - p) * s)[:, None] * (flag[None, :] - fpr)).ravel()); b_eq.append(0.0)
    res = linprog(cost, A_eq=np.array(A_eq), b_eq=b_eq, bounds=[(0, 1)] * (N * K), method="highs")
    if res.status != 0:
        return None
    return res.x.reshape(N, K), out


def _rates(p_in: np.ndarray, s: np.ndarray, q: np.ndarray, T: np.ndarray, cutoff: float) -> dict:
    """Expected FPR, TPR, PPV, NPV of flagging outputs >= cutoff when bin i maps to q_j w.p. T_ij."""
    flag = q >= cutoff
    mu = float(p_in @ s)
    tp = float(((p_in * s)[:, None] * T)[:, flag].sum())
    fp = float((((1 - p_in) * s)[:, None] * T)[:, flag].sum())
    fn, tn = mu - tp, (1 - mu) - fp
    return {"fpr": fp / max(1 - mu, 1e-12), "tpr": tp / max(mu, 1e-12),
            "ppv": tp / (tp + fp) if tp + fp > 0 else np.nan,
            "npv": tn / (tn + fn) if tn + fn > 0 else np.nan,
            "mse_to_calibrated": float(((p_in[:, None] - q[None, :]) ** 2 * s[:, None] * T).sum())}


def equal_error_rate_scores(score: np.ndarray, y: np.ndarray, groups: pd.DataFrame,
                            config: CompanionConfig = CompanionConfig()) -> CompanionResult:
    """Post-process learned scores into calibrated scores with equal error rates (R&V sections 3-4)."""
    config = config.validate()
    if config.attribute not in groups:
        raise ValueError(f"Unknown group attribute {config.attribute!r}; use race or sex.")
    label = groups[config.attribute].astype(str).to_numpy()
    present = set(label)
    missing = [g for g in config.groups if g not in present]
    if missing:
        raise ValueError(f"Group(s) {missing} do not occur in {config.attribute}.")
    y = np.asarray(y, dtype=float)
    score = np.asarray(score, dtype=float)
    mu = {g: float(y[label == g].mean()) for g in config.groups}
    low, high = sorted(config.groups, key=lambda g: mu[g])
    cutoff, k = config.cutoff, cost_ratio(config.cutoff)
    both = np.isin(label, config.groups)
    base_rate = float(y[both].mean())
    cal, curves, roc_rows, codes_by = {}, {}, [], {}
    for g in (low, high):
        rows = np.flatnonzero(label == g)
        codes, means = calibrate_in_bins(score[rows], y[rows], config.bins)
        s = np.bincount(codes) / rows.size
        cal[g], codes_by[g] = (means, s), (rows, codes)
        curves[g] = _roc_vertices(means, s)
        roc_rows.append(pd.DataFrame({"group": g, "fpr": curves[g][:, 0], "tpr": curves[g][:, 1]}))
    roc = pd.concat(roc_rows, ignore_index=True)
    c5 = corollary5(mu[low], mu[high], cutoff)
    if c5["trivial"] is None and not np.isnan(c5["a1"]):
        c5["both_above"] = all(_above(curves[g], c5["a1"], c5["a2"]) for g in (low, high))
    target = stage1(curves, mu, low, high, cutoff, base_rate)
    rng = np.random.default_rng(config.seed)
    post = pd.Series(np.nan, index=np.arange(len(y)), name="equal_error_score")
    rate_rows, calib_rows, kernels = [], [], {}
    message = ""
    for g in (low, high):
        means, s = cal[g]
        rows, codes = codes_by[g]
        ident = np.eye(len(means))
        before = _rates(means, s, means, ident, cutoff)
        rate_rows.append({"group": g, "stage": "calibrated score", "base_rate": mu[g], **before,
                          "loss": k * before["fpr"] * (1 - mu[g]) + (1 - before["tpr"]) * mu[g]})
        calib_rows.append(pd.DataFrame({"group": g, "stage": "before", "score": means,
                                        "observed": means, "n": np.bincount(codes)}))
        if target is None:
            continue
        solved = stage2(means, s, cutoff, target["fpr"], target["tpr"])
        if solved is None:
            message = (f"Stage 2 found no contraction on the score grid for {g}; "
                       "try more bins or another cut-off.")
            continue
        T, q = solved
        kernels[g] = pd.DataFrame(T, index=np.round(means, 4), columns=np.round(q, 4))
        after = _rates(means, s, q, T, cutoff)
        rate_rows.append({"group": g, "stage": "equal error rates", "base_rate": mu[g], **after,
                          "loss": k * after["fpr"] * (1 - mu[g]) + (1 - after["tpr"]) * mu[g]})
        # Draw each person's output from its bin's row of T (the randomised post-processing).
        cum = np.cumsum(T[codes], axis=1)
        pick = np.minimum((rng.random(rows.size)[:, None] > cum).sum(axis=1), len(q) - 1)
        post.iloc[rows] = q[pick]
        frame = pd.DataFrame({"score": q[pick], "y": y[rows]}).groupby("score")["y"].agg(["mean", "size"])
        calib_rows.append(pd.DataFrame({"group": g, "stage": "after", "score": frame.index.to_numpy(),
                                        "observed": frame["mean"].to_numpy(), "n": frame["size"].to_numpy()}))
    feasible = target is not None
    nonconstant = bool(feasible and 0 < target["fpr"] + target["tpr"] < 2
                       and not (target["fpr"] == 0 and target["tpr"] == 0))
    if not feasible:
        message = ("No common error rates are reachable by calibrated scores in both groups at this "
                   "cut-off (Corollary 5 fails); a soft trade-off is not yet available.")
    return CompanionResult(feasible, nonconstant, c5, target, pd.DataFrame(rate_rows), roc,
                           pd.concat(calib_rows, ignore_index=True), post, kernels, message)
