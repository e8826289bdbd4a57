"""Calibrated scores whose thresholded decisions have equal error rates (Reich & Vijaykumar, FORC 2021).

A post-processing of the learner's scores for two groups L (lower base rate) and H: calibrate
within groups by bin means, pick the common (FPR, TPR) that minimises the decision-maker's loss
among rates both groups can reach with a calibrated score (Stage 1, an LP), then per group find
the least mean-preserving contraction of the score that hits those rates (Stage 2, an LP).
When no common rates exist, or when asked, the soft trade-off of the paper's extension section
replaces Stage 1: each group gets its own calibratable rates z_A = (FPR, TPR), chosen to minimise
  share * loss_L(z_L) + (1 - share) * loss_H(z_H) + (z_L - z_H)' diag(penalty) (z_L - z_H),
with loss_A(z) = k FPR (1 - mu_A) + (1 - TPR) mu_A (a small QP, solved by SLSQP), so the panel
always answers: exact parity when it exists, otherwise the least-loss rates for the chosen
disparity penalty. Positive label = reoffended; the decision 1[score >= cutoff] flags "high risk".
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd
from scipy.optimize import linprog, minimize

from core.contracts import Plan, finite_number, named_rng, param

MARGIN = 1e-6          # strict NPV inequality replaced by a small margin (spec 3.1 review note)
#: Soft trade-off: unflagged people must average a score of at most cutoff - GAP (a strict NPV
#: condition stated in score units), and Stage 2 may output that value, so any rates the QP picks
#: on the NPV boundary are reachable on the output grid.
GAP = 1e-4
MODES = {"exact": "equal error rates (soft trade-off only when they are out of reach)",
         "soft": "soft trade-off: group losses plus a penalty on the rate differences"}
#: What the pages offer for the soft trade-off: one penalty, on both rate differences or on one of them.
PENALTY_MENU = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0)
PARITY = {"both": "false and true positive rates", "tpr": "true positive rates only",
          "fpr": "false positive rates only"}


@dataclass(frozen=True)
class CompanionPlan(Plan):
    """Cut-off, score bins, the two groups compared (L/H ordered by base rate), the swept value
    whose scores are post-processed (``at``; None = the sweep point nearest 0.3) and the soft
    trade-off's group share and disparity penalties.

    The fields a person sets are declared with ``param(...)`` (label, help, what the pages offer); the
    checks below are the plan's rules, broader than the offer so saved plans outside it still load.
    The two penalties are set on the pages as one penalty and the rates it applies to
    (:func:`penalties`, :func:`penalty_and_parity`)."""

    cutoff: float = param(       # p_bar = k / (k + 1); k = cost of a false positive
        0.5, label="Cut-off for flagging high risk", low=0.05, high=0.95, step=0.01, kind="slider",
        help="A cut-off c is optimal when a false positive costs c/(1−c) false negatives.")
    bins: int = param(10, label="Score bins", low=2, high=20, kind="slider")
    attribute: str = param("race", label="Groups compared", choices=("race", "sex"), kind="select")
    groups: tuple[str, str] = ("African-American", "Caucasian")
    seed: int = 0
    at: float | None = None
    mode: str = param("exact", label="Target", choices=MODES, kind="radio")
    share_low: float | None = None       # weight of group L's loss; None = its share of the two groups
    penalty_fpr: float = 1.0
    penalty_tpr: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "cutoff", finite_number(self.cutoff, "The cut-off"))
        if not 0.0 < self.cutoff < 1.0:
            raise ValueError("The cut-off must lie strictly between 0 and 1.")
        if isinstance(self.bins, bool) or not isinstance(self.bins, (int, np.integer)) or not 2 <= self.bins <= 50:
            raise ValueError("Use between 2 and 50 score bins (a whole number).")
        object.__setattr__(self, "bins", int(self.bins))
        object.__setattr__(self, "groups", tuple(str(g) for g in self.groups))
        if len(self.groups) != 2 or len(set(self.groups)) != 2:
            raise ValueError("Choose two different groups to compare.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2 ** 32:
            raise ValueError("The companion seed must be a whole number from 0 to 4294967295.")
        object.__setattr__(self, "seed", int(self.seed))
        if self.at is not None:
            object.__setattr__(self, "at", finite_number(self.at, "The operating point"))
        if self.mode not in MODES:
            raise ValueError(f"The companion mode must be one of {list(MODES)}.")
        if self.share_low is not None:
            object.__setattr__(self, "share_low", finite_number(self.share_low, "The share of group L"))
            if not 0.0 <= self.share_low <= 1.0:
                raise ValueError("The share of group L's loss must lie in [0, 1].")
        for name in ("penalty_fpr", "penalty_tpr"):
            value = finite_number(getattr(self, name), "A disparity penalty")
            if not 0.0 <= value <= 1e6:
                raise ValueError("Disparity penalties must lie between 0 and 1,000,000.")
            object.__setattr__(self, name, value)


def penalties(penalty: float, parity: str) -> dict[str, float]:
    """The two disparity penalties of one penalty applied to ``parity``'s rate differences (a key of
    ``PARITY``): the other rate's penalty is 0."""
    if parity not in PARITY:
        raise ValueError(f"Penalise differences in one of {list(PARITY)}, not {parity!r}.")
    return {"penalty_fpr": 0.0 if parity == "tpr" else float(penalty),
            "penalty_tpr": 0.0 if parity == "fpr" else float(penalty)}


def penalty_and_parity(plan: CompanionPlan) -> tuple[float, str]:
    """The one penalty and the rates it applies to that give ``plan``'s two penalties (the inverse of
    :func:`penalties` for every plan the pages make)."""
    fpr, tpr = plan.penalty_fpr, plan.penalty_tpr
    return max(fpr, tpr), "both" if fpr == tpr else ("tpr" if fpr == 0 else "fpr")


def default_penalty() -> float:
    """The penalty a companion plan starts from (its declared default, the same on both rates)."""
    return next(f.default for f in fields(CompanionPlan) if f.name == "penalty_fpr")


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
    soft: dict | None = None               # per group {"fpr", "tpr"} of the soft trade-off, + objective
    used: str = "exact"                    # which rates the post-processed scores hit: exact or soft

    def tables(self) -> dict[str, pd.DataFrame]:
        """The companion's tables under the names the pages and reports use."""
        return {"companion_rates": self.rates, "companion_calibration": self.calibration,
                "companion_roc": self.roc}

    def headline(self) -> dict[str, float]:
        """The common error rates both groups reach (nothing when no common point exists)."""
        if self.target is None:
            return {}
        return {"equal error rates: FPR": float(self.target["fpr"]),
                "equal error rates: TPR": float(self.target["tpr"])}

    def headline_uncertainty(self) -> dict[str, str]:
        """The common rates are solved exactly on the binned, calibrated scores of one data set; no
        resampling measures how they would move on another sample."""
        if self.target is None:
            return {}
        text = "exact (solved on the calibrated scores of this one data set; no resampling)"
        return {"equal error rates: FPR": text, "equal error rates: TPR": text}


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


def _calibratable(beta: float, cutoff: float) -> tuple[np.ndarray, float, np.ndarray, float]:
    """Rows (a, b) of a . (fpr, tpr) <= b: PPV >= cutoff and NPV >= 1 - (cutoff - GAP), the strict
    NPV > 1 - cutoff of R&V Proposition 3 (with odds beta = mu / (1 - mu) of the group's base rate)."""
    low = cutoff - GAP
    return (np.array([cutoff, -beta * (1 - cutoff)]), 0.0,
            np.array([low, -beta * (1 - low)]), low - beta * (1 - low))


def soft_tradeoff(curves: dict[str, np.ndarray], mu: dict[str, float], low: str, high: str,
                  cutoff: float, share_low: float, penalty: tuple[float, float]) -> dict:
    """Per-group calibratable rates minimising the weighted group losses plus the disparity penalty.

    The R&V extension: minimise share * l_L(z_L) + (1 - share) * l_H(z_H) + (z_L - z_H)' P (z_L - z_H)
    over z_A in the hull of group A's ROC curve and its reflection (Proposition 2) that satisfy
    Proposition 3's PPV/NPV conditions. The corner (1, 1) (everyone flagged) is calibratable when
    mu_A >= cutoff and is tried separately, since the NPV margin cuts it off. Convex QP; SLSQP.
    """
    k = cost_ratio(cutoff)
    P = np.diag(penalty)
    verts = {g: np.vstack([c, 1.0 - c]) for g, c in curves.items()}
    weights = {low: share_low, high: 1.0 - share_low}

    def loss(g: str, z: np.ndarray) -> float:
        return float(k * z[0] * (1 - mu[g]) + (1 - z[1]) * mu[g])

    def solve(fixed: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]] | None:
        free = [g for g in (low, high) if g not in fixed]
        sizes = [len(verts[g]) for g in free]
        offsets = np.cumsum([0] + sizes)

        def rates(x: np.ndarray) -> dict[str, np.ndarray]:
            out = dict(fixed)
            for g, a, b in zip(free, offsets[:-1], offsets[1:]):
                out[g] = x[a:b] @ verts[g]
            return out

        def objective(x: np.ndarray) -> float:
            z = rates(x)
            d = z[low] - z[high]
            return sum(weights[g] * loss(g, z[g]) for g in (low, high)) + float(d @ P @ d)

        def gradient(x: np.ndarray) -> np.ndarray:
            z = rates(x)
            d = z[low] - z[high]
            grad = np.zeros(offsets[-1])
            for g, a, b in zip(free, offsets[:-1], offsets[1:]):
                dz = weights[g] * np.array([k * (1 - mu[g]), -mu[g]]) + (2 if g == low else -2) * (P @ d)
                grad[a:b] = verts[g] @ dz
            return grad

        cons = []
        for g, a, b in zip(free, offsets[:-1], offsets[1:]):
            row = np.zeros(offsets[-1]); row[a:b] = 1.0
            cons.append({"type": "eq", "fun": lambda x, r=row: r @ x - 1.0, "jac": lambda x, r=row: r})
            ppv, ppv_b, npv, npv_b = _calibratable(mu[g] / (1 - mu[g]), cutoff)
            for coef, bound in ((ppv, ppv_b), (npv, npv_b)):
                row = np.zeros(offsets[-1]); row[a:b] = verts[g] @ coef
                cons.append({"type": "ineq", "fun": lambda x, r=row, c=bound: c - r @ x,
                             "jac": lambda x, r=row: -r})
        if not free:
            z = dict(fixed)
            return objective(np.zeros(0)), z
        # Start from each group's feasible corner (0, 0): nobody flagged always meets both conditions.
        x0 = np.concatenate([(np.abs(verts[g]).sum(axis=1) == 0).astype(float) / max(
            (np.abs(verts[g]).sum(axis=1) == 0).sum(), 1) for g in free])
        res = minimize(objective, x0, jac=gradient, method="SLSQP", constraints=cons,
                       bounds=[(0.0, 1.0)] * offsets[-1], options={"ftol": 1e-12, "maxiter": 500})
        if not res.success:
            return None
        return float(res.fun), rates(res.x)

    options = []
    corners = [{}]
    for g in (low, high):
        if mu[g] >= cutoff:
            corners += [{**c, g: np.array([1.0, 1.0])} for c in corners]
    for fixed in corners:
        solved = solve(fixed)
        if solved is not None:
            options.append(solved)
    value, z = min(options, key=lambda o: o[0])
    return {"objective": value,
            **{g: {"fpr": float(np.clip(z[g][0], 0, 1)), "tpr": float(np.clip(z[g][1], 0, 1)),
                   "loss": loss(g, z[g])} for g in (low, high)}}


def stage2(p: np.ndarray, s: np.ndarray, cutoff: float, fpr: float, tpr: float
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Kernel T (bins x outputs) of the least contraction of p hitting (fpr, tpr) (R&V Stage 2)."""
    mu = float(p @ s)
    # Output grid: the inputs, the cut-off, the value just below it (GAP) and the mean (spec 3.1
    # note a) plus a fine 0.01 grid, since merging bins can need output values that are not inputs.
    out = np.unique(np.round(np.r_[p, cutoff, cutoff - GAP, mu, np.linspace(0, 1, 101)], 12))
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
                            config: CompanionPlan = CompanionPlan()) -> CompanionResult:
    """Post-process learned scores into calibrated scores with equal error rates (R&V sections 3-4),
    or with the soft trade-off's per-group rates when equal rates are out of reach (or asked for)."""
    if config.attribute not in groups:
        raise ValueError(f"Unknown group attribute {config.attribute!r}; use one of {list(groups.columns)}.")
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
    feasible = target is not None
    soft = None
    used = "exact"
    if config.mode == "soft" or not feasible:
        share = (config.share_low if config.share_low is not None
                 else float((label == low).sum() / both.sum()))
        soft = soft_tradeoff(curves, mu, low, high, cutoff, share, (config.penalty_fpr, config.penalty_tpr))
        soft["share_low"] = share
        used = "soft"
    goals = ({g: (soft[g]["fpr"], soft[g]["tpr"]) for g in (low, high)} if used == "soft"
             else {g: (target["fpr"], target["tpr"]) for g in (low, high)})
    stage_name = "soft trade-off" if used == "soft" else "equal error rates"
    rng = named_rng(config.seed, "post-processed scores")
    post = pd.Series(np.nan, index=np.arange(len(y)), name="equal_error_score")
    rate_rows, calib_rows, kernels = [], [], {}
    message = ""
    for g in (low, high):
        means, s = cal[g]
        rows, codes = codes_by[g]
        before = _rates(means, s, means, np.eye(len(means)), cutoff)
        rate_rows.append({"group": g, "stage": "calibrated score", "base_rate": mu[g], **before,
                          "loss": k * before["fpr"] * (1 - mu[g]) + (1 - before["tpr"]) * mu[g]})
        calib_rows.append(pd.DataFrame({"group": g, "stage": "before", "score": means,
                                        "observed": means, "n": np.bincount(codes)}))
        solved = stage2(means, s, cutoff, *goals[g])
        if solved is None:
            message = (f"Stage 2 found no contraction on the score grid for {g}; "
                       "try more bins or another cut-off.")
            continue
        T, q = solved
        kernels[g] = pd.DataFrame(T, index=np.round(means, 4), columns=np.round(q, 4))
        after = _rates(means, s, q, T, cutoff)
        rate_rows.append({"group": g, "stage": stage_name, "base_rate": mu[g], **after,
                          "loss": k * after["fpr"] * (1 - mu[g]) + (1 - after["tpr"]) * mu[g]})
        # Draw each person's output from its bin's row of T (the randomised post-processing).
        cum = np.cumsum(T[codes], axis=1)
        pick = np.minimum((rng.random(rows.size)[:, None] > cum).sum(axis=1), len(q) - 1)
        post.iloc[rows] = q[pick]
        frame = pd.DataFrame({"score": q[pick], "y": y[rows]}).groupby("score")["y"].agg(["mean", "size"])
        calib_rows.append(pd.DataFrame({"group": g, "stage": "after", "score": frame.index.to_numpy(),
                                        "observed": frame["mean"].to_numpy(), "n": frame["size"].to_numpy()}))
    nonconstant = bool(feasible and 0 < target["fpr"] + target["tpr"] < 2
                       and not (target["fpr"] == 0 and target["tpr"] == 0))
    if not feasible:
        message = ("No common error rates are reachable by calibrated scores in both groups at this "
                   "cut-off (Corollary 5 fails); the scores follow the soft trade-off instead: each group "
                   "keeps calibrated scores at the rates that minimise the weighted losses plus the "
                   "disparity penalty. " + message).strip()
    return CompanionResult(feasible, nonconstant, c5, target, pd.DataFrame(rate_rows), roc,
                           pd.concat(calib_rows, ignore_index=True), post, kernels, message, soft, used)
