"""Causal intersectional fair ranking (Yang, Loftus, Stoyanovich, FORC 2021; spec section 3.3).

The user's structural causal model: sensitive attributes A (categorical, coded as indicators
against a reference level, or numeric), mediators X_1..X_m (in causal order) and an outcome score
Y. Every equation is linear with pairwise interactions between the sensitive attributes,

    f_j = b_0 + sum_l b_l X_l (earlier mediators) + sum_l c_l A_l + sum_{l<r} c_{lr} A_l A_r,

fitted by least squares (a logistic link, fitted by Newton's method, when Y is 0/1); residuals are
kept as each person's exogenous errors. The counterfactual for a baseline group a' replaces A by a'
in every equation, except that a mediator keeps the person's own value of each attribute for
which it is *resolving* (a legitimate basis for the decision): resolving for every attribute keeps
the observed mediator, resolving for none recomputes it entirely under a', anything in between is
semi-resolving. Rank by the counterfactual score; a quota ranking (each intersectional group
filled in proportion to its share, best first within the group) is the baseline.

Measures at top-k: selection rate per group (share in the top k over share in the input: 1 is
demographic parity), sensitivity per group against the observed top k (equal opportunity),
Y-utility loss 1 - U(ranking) / U(original) with U the observed outcome summed over the top k
(U(ranking) / U(original) - 1 when ranking from low to high: the extra score taken on), and AP@k against the observed top k.
The moving-company generator follows the paper's edge weights; its noise is our choice (standard
normal errors on X and Y), so it is a synthetic stand-in, not the paper's data.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.contracts import Plan

RESOLVING = {"resolving": "resolving (a legitimate basis for every attribute)",
             "non-resolving": "non-resolving (carries discrimination: recomputed for the baseline group)",
             "semi-resolving": "semi-resolving (legitimate for some attributes only)"}


@dataclass(frozen=True)
class MediatorRole(Plan):
    """A mediator and the sensitive attributes for which it is a legitimate basis."""

    name: str
    resolving_for: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Name each mediator (a column of the table).")
        object.__setattr__(self, "resolving_for", tuple(str(a) for a in self.resolving_for))

    def kind(self, attributes: tuple[str, ...]) -> str:
        """resolving, non-resolving or semi-resolving with respect to ``attributes``."""
        kept = set(self.resolving_for) & set(attributes)
        if not kept:
            return "non-resolving"
        return "resolving" if kept == set(attributes) else "semi-resolving"


# ---------------------------------------------------------------- coding the attributes

@dataclass(frozen=True)
class AttributeCoding:
    """How each sensitive attribute enters the equations: numeric as itself, categorical as
    indicators of its non-reference levels."""

    names: tuple[str, ...]
    levels: dict = field(default_factory=dict)        # categorical attribute -> its levels, reference first

    @classmethod
    def of(cls, frame: pd.DataFrame, names: tuple[str, ...]) -> "AttributeCoding":
        levels = {}
        for a in names:
            col = frame[a]
            if not pd.api.types.is_numeric_dtype(col):
                counts = col.astype(str).value_counts()
                levels[a] = tuple(counts.index)        # most frequent level is the reference
        return cls(tuple(names), levels)

    def blocks(self, values: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One (n x c) block per attribute: indicators or the numeric column."""
        out = []
        for a in self.names:
            v = values[a]
            if a in self.levels:
                out.append(np.column_stack([(v == lv).astype(float) for lv in self.levels[a][1:]])
                           if len(self.levels[a]) > 1 else np.zeros((v.shape[0], 0)))
            else:
                out.append(np.asarray(v, dtype=float)[:, None])
        return out

    def design(self, values: dict[str, np.ndarray]) -> np.ndarray:
        """Main effects and pairwise interactions between different attributes."""
        blocks = self.blocks(values)
        inter = [(b1[:, :, None] * b2[:, None, :]).reshape(b1.shape[0], -1)
                 for b1, b2 in itertools.combinations(blocks, 2)]
        return np.column_stack(blocks + inter) if blocks else np.zeros((0, 0))

    def raw(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        return {a: (frame[a].astype(str).to_numpy() if a in self.levels
                    else pd.to_numeric(frame[a], errors="coerce").to_numpy(dtype=float)) for a in self.names}


def intersectional_labels(frame: pd.DataFrame, attributes: tuple[str, ...]) -> np.ndarray:
    """Each person's intersectional group: categorical values joined; a numeric attribute is split
    at its median ('<= median' / '> median')."""
    parts = []
    for a in attributes:
        col = frame[a]
        if pd.api.types.is_numeric_dtype(col) and col.nunique() > 2:
            med = float(col.median())
            parts.append(np.where(col.to_numpy(dtype=float) <= med, f"{a} <= {med:g}", f"{a} > {med:g}"))
        else:
            parts.append(col.astype(str).to_numpy())
    out = parts[0].astype(object)
    for p in parts[1:]:
        out = out + ", " + p
    return out.astype(str)


# ---------------------------------------------------------------- fitting the equations

def _lstsq(D: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(D, y, rcond=None)[0]


def _logistic(D: np.ndarray, y: np.ndarray, steps: int = 50) -> np.ndarray:
    """Maximum-likelihood logistic regression by Newton's method (tiny ridge for separability)."""
    beta = np.zeros(D.shape[1])
    ridge = 1e-6 * np.eye(D.shape[1])
    for _ in range(steps):
        p = 0.5 * (1.0 + np.tanh(0.5 * (D @ beta)))
        grad = D.T @ (p - y) + ridge @ beta
        hess = (D * (p * (1 - p))[:, None]).T @ D + ridge
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


@dataclass
class FittedSCM:
    """Coefficients of every equation and each person's residuals."""

    coding: AttributeCoding
    mediators: tuple[MediatorRole, ...]
    outcome: str
    binary: bool
    coef: dict                     # variable -> coefficients over its design
    resid: dict                    # variable -> residual per person
    observed: dict                 # variable -> observed values


def _design(coding: AttributeCoding, attrs: dict, parents: list[np.ndarray]) -> np.ndarray:
    A = coding.design(attrs)
    n = A.shape[0]
    return np.column_stack([np.ones(n), *[p[:, None] for p in parents], A])


def fit_scm(frame: pd.DataFrame, attributes: tuple[str, ...], mediators: tuple[MediatorRole, ...],
            outcome: str) -> FittedSCM:
    """Least-squares fit of each mediator on the attributes and earlier mediators, and of the
    outcome on all mediators and the attributes (logistic link for a 0/1 outcome)."""
    coding = AttributeCoding.of(frame, attributes)
    attrs = coding.raw(frame)
    coef, resid, observed = {}, {}, {}
    parents: list[np.ndarray] = []
    for m in mediators:
        x = pd.to_numeric(frame[m.name], errors="coerce").to_numpy(dtype=float)
        D = _design(coding, attrs, parents)
        coef[m.name] = _lstsq(D, x)
        resid[m.name] = x - D @ coef[m.name]
        observed[m.name] = x
        parents.append(x)
    y = pd.to_numeric(frame[outcome], errors="coerce").to_numpy(dtype=float)
    binary = bool(set(np.unique(y)) <= {0.0, 1.0})
    D = _design(coding, attrs, parents)
    if binary:
        coef[outcome] = _logistic(D, y)
        resid[outcome] = y - 0.5 * (1.0 + np.tanh(0.5 * (D @ coef[outcome])))
    else:
        coef[outcome] = _lstsq(D, y)
        resid[outcome] = y - D @ coef[outcome]
    observed[outcome] = y
    return FittedSCM(coding, tuple(mediators), outcome, binary, coef, resid, observed)


def counterfactual_scores(scm: FittedSCM, frame: pd.DataFrame, baseline: dict[str, object]) -> dict[str, np.ndarray]:
    """Counterfactual mediators and outcome for everybody moved to the baseline group: each mediator
    is recomputed with the baseline value of every attribute it is not resolving for (and the
    counterfactual earlier mediators), plus the person's own residual; the outcome uses the
    counterfactual mediators and the baseline attributes, plus its residual."""
    coding = scm.coding
    own = coding.raw(frame)
    n = len(frame)
    base = {a: (np.full(n, str(baseline[a]), dtype=object).astype(str) if a in coding.levels
                else np.full(n, float(baseline[a]))) for a in coding.names}
    out: dict[str, np.ndarray] = {}
    parents: list[np.ndarray] = []
    for m in scm.mediators:
        attrs = {a: (own[a] if a in m.resolving_for else base[a]) for a in coding.names}
        value = _design(coding, attrs, parents) @ scm.coef[m.name] + scm.resid[m.name]
        out[m.name] = value
        parents.append(value)
    lin = _design(coding, base, parents) @ scm.coef[scm.outcome]
    fitted = 0.5 * (1.0 + np.tanh(0.5 * lin)) if scm.binary else lin
    out[scm.outcome] = fitted + scm.resid[scm.outcome]
    return out


# ---------------------------------------------------------------- rankings and measures

def ranking(score: np.ndarray, ascending: bool) -> np.ndarray:
    """Positions of people from first to last (ties broken by row order)."""
    return np.argsort(score if ascending else -score, kind="stable")


def quota_ranking(score: np.ndarray, groups: np.ndarray, ascending: bool) -> np.ndarray:
    """Each group filled in proportion to its share: people ordered by their within-group rank
    divided by the group size (best first inside each group)."""
    order = ranking(score, ascending)
    codes, inverse = np.unique(groups[order], return_inverse=True)
    sizes = np.bincount(inverse)
    within = np.empty_like(inverse)
    for_sort = np.lexsort((np.arange(inverse.size), inverse))
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    within[for_sort] = np.arange(inverse.size) - np.repeat(starts, sizes)
    key = (within + 0.5) / sizes[inverse]
    return order[np.argsort(key, kind="stable")]


def topk_masks(order: np.ndarray, ks: tuple[int, ...], n: int) -> np.ndarray:
    """(len(ks) x n) boolean: who is in each top k."""
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    return position[None, :] < np.asarray(ks)[:, None]


def measures(orders: dict[str, np.ndarray], y: np.ndarray, groups: np.ndarray, ks: tuple[int, ...],
             ascending: bool) -> pd.DataFrame:
    """Per ranking x k x group: selection rate and sensitivity; per ranking x k: utility loss and AP@k."""
    n = y.size
    labels, inverse = np.unique(groups, return_inverse=True)
    G = np.eye(labels.size, dtype=bool)[inverse]           # n x g
    share = G.mean(axis=0)
    truth = topk_masks(orders["original"], ks, n)          # observed top k (positives)
    u_orig = truth.astype(float) @ y
    rows = []
    for name, order in orders.items():
        top = topk_masks(order, ks, n)
        sel = (top.astype(float) @ G) / np.asarray(ks)[:, None] / share[None, :]
        hit = (top & truth).astype(float) @ G
        pos = truth.astype(float) @ G
        sens = np.divide(hit, pos, out=np.full_like(hit, np.nan), where=pos > 0)
        ratio = (top.astype(float) @ y) / np.where(u_orig == 0, np.nan, u_orig)
        loss = ratio - 1.0 if ascending else 1.0 - ratio
        rel = truth[:, order]                               # relevance along this ranking
        prec = np.cumsum(rel, axis=1) / np.arange(1, n + 1)
        ap = np.array([float((prec[i, :k] * rel[i, :k]).sum() / k) for i, k in enumerate(ks)])
        for i, k in enumerate(ks):
            for g, label in enumerate(labels):
                rows.append({"ranking": name, "k": int(k), "group": label, "selection_rate": sel[i, g],
                             "sensitivity": sens[i, g], "utility_loss": loss[i], "ap_at_k": ap[i]})
    return pd.DataFrame(rows)


#: Headline names of a ranking's numbers at one k (the page, ``headline()``, pin/compare and the report
#: share them); ``{k}`` is the k.
AT_K_NAMES = {"utility_loss": "utility loss at k={k}", "ap_at_k": "AP at k={k}",
              "rate_low": "lowest selection rate at k={k}", "rate_high": "highest selection rate at k={k}"}


@dataclass(frozen=True)
class RankingAtK:
    """One ranking at one k: its utility loss and AP@k, and the range of its groups' selection rates
    (share in the top k over share of everybody; 1 is parity) with the group at each end."""

    ranking: str
    k: int
    utility_loss: float
    ap_at_k: float
    rate_low: float
    rate_low_group: str
    rate_high: float
    rate_high_group: str

    def named(self) -> dict[str, float]:
        """The numbers under their headline names (:data:`AT_K_NAMES`)."""
        return {name.format(k=self.k): float(getattr(self, attr)) for attr, name in AT_K_NAMES.items()}


def at_k(table: pd.DataFrame, ranking: str, k: int | None = None) -> RankingAtK:
    """The rows of :func:`measures` for ``ranking`` at ``k`` (None: its largest k) read as one
    :class:`RankingAtK`: utility loss and AP@k are the same on every group's row; the selection-rate
    range is the smallest and largest over the groups (ties: the group listed first)."""
    mine = table[table["ranking"] == ranking]
    if mine.empty:
        raise ValueError(f"No measures of the {ranking!r} ranking; there are {sorted(table['ranking'].unique())}.")
    k = int(mine["k"].max()) if k is None else int(k)
    rows = mine[mine["k"] == k].reset_index(drop=True)
    if rows.empty:
        raise ValueError(f"The {ranking} ranking was measured at k = {sorted(mine['k'].unique())}, not {k}.")
    rates = rows["selection_rate"].to_numpy(dtype=float)
    lo, hi = int(np.argmin(rates)), int(np.argmax(rates))
    return RankingAtK(ranking, k, float(rows["utility_loss"].iloc[0]), float(rows["ap_at_k"].iloc[0]),
                      float(rates[lo]), str(rows["group"].iloc[lo]), float(rates[hi]), str(rows["group"].iloc[hi]))


def most_disadvantaged(frame: pd.DataFrame, attributes: tuple[str, ...], outcome: str, ascending: bool,
                       coding: AttributeCoding) -> dict[str, object]:
    """The intersectional group with the worst mean outcome (lowest, or highest when ranking from low
    to high); numeric attributes take their median."""
    cats = [a for a in attributes if a in coding.levels]
    y = pd.to_numeric(frame[outcome], errors="coerce")
    out: dict[str, object] = {a: float(pd.to_numeric(frame[a]).median()) for a in attributes if a not in coding.levels}
    if cats:
        means = y.groupby([frame[a].astype(str) for a in cats]).mean()
        worst = means.idxmax() if ascending else means.idxmin()
        worst = worst if isinstance(worst, tuple) else (worst,)
        out.update(dict(zip(cats, worst)))
    return out


# ---------------------------------------------------------------- data

#: The moving company's edge weights (the paper's Figure 2a) and group shares.
MOVING_COMPANY = {"woman_to_lifting": -1.0, "black_to_lifting": 0.0, "lifting_to_score": 0.8,
                  "woman_to_score": -0.12, "black_to_score": -0.08, "share_women": 0.37, "share_black": 0.37}


def moving_company(n: int = 2000, rng: np.random.Generator | None = None) -> pd.DataFrame:
    """The paper's synthetic moving company (edge weights G->X 1, R->X 0, G->Y 0.12, R->Y 0.08,
    X->Y 0.8; 37% women, 37% Black). Effects of being a woman or Black are negative; the errors on
    X and Y are standard normal (our choice: the paper gives only the weights). Synthetic data."""
    if rng is None:
        raise ValueError("moving_company needs a random generator.")
    w = MOVING_COMPANY
    woman = rng.random(n) < w["share_women"]
    black = rng.random(n) < w["share_black"]
    x = w["woman_to_lifting"] * woman + w["black_to_lifting"] * black + rng.standard_normal(n)
    y = w["lifting_to_score"] * x + w["woman_to_score"] * woman + w["black_to_score"] * black + rng.standard_normal(n)
    return pd.DataFrame({"gender": np.where(woman, "female", "male"), "race": np.where(black, "Black", "White"),
                         "lifting": x, "score": y})


def resolving_selection_rates(top_share: float) -> dict[str, float]:
    """Population selection rates (share in the top over share in the input) of men and women in the
    moving company's counterfactual ranking with the lifting test X resolving, for a top fraction
    ``top_share`` of applicants.

    With X resolving the counterfactual score is b_XY x + (the baseline's direct effects) + eps_Y: race
    enters only through its direct effect, which is replaced by the baseline's, and has no edge to X,
    so White and Black applicants of one gender share one score law, N(b_GX b_XY [woman], b_XY^2 + 1)
    with the generator's unit-variance errors. The threshold t solves
    (1 - s_w) Q(t / sd) + s_w Q((t - mu_w) / sd) = top_share (Q the normal upper tail), found by bisection."""
    if not 0.0 < top_share < 1.0:
        raise ValueError("The top share must lie strictly between 0 and 1.")
    w = MOVING_COMPANY
    sd = math.sqrt(w["lifting_to_score"] ** 2 + 1.0)
    mu_w = w["woman_to_lifting"] * w["lifting_to_score"]
    share_w = w["share_women"]

    def upper(z: float) -> float:
        return 0.5 * math.erfc(z / math.sqrt(2.0))

    def selected(t: float) -> float:
        return (1.0 - share_w) * upper(t / sd) + share_w * upper((t - mu_w) / sd)

    low, high = -20.0, 20.0
    for _ in range(200):                    # selected() falls from 1 to 0: bisection to float precision
        mid = 0.5 * (low + high)
        low, high = (mid, high) if selected(mid) > top_share else (low, mid)
    t = 0.5 * (low + high)
    return {"male": upper(t / sd) / top_share, "female": upper((t - mu_w) / sd) / top_share}


def compas_ranking_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The paper's COMPAS subset: Black and White defendants with at least one prior; sex, race,
    priors_count (mediator) and decile_score (outcome, ranked from low to high)."""
    keep = frame["race"].isin(["African-American", "Caucasian"]) & (frame["priors_count"] >= 1)
    sub = frame.loc[keep, ["sex", "race", "priors_count", "decile_score"]].reset_index(drop=True)
    sub["race"] = sub["race"].map({"African-American": "Black", "Caucasian": "White"})
    return sub
