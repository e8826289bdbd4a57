"""Invariants as public information Z and the Wasserstein exponential mechanism (Seeman, Slavkovic, Reimherr 2022).

Publishing a statistic exactly (an invariant) makes it public information Z. The noisy release is
then epsilon-DP *relative to Z* (epsilon-DPZ, Def. 3): an adversary who knows z gains at most a
factor e^epsilon in odds on any secret z leaves undecided; secrets z decides are not protected,
and budgets add up only for releases under the same Z (Lemma 4).
The Wasserstein exponential mechanism (Thm. 1) samples y with weight exp(-kappa L_x(y)) nu(y), where
kappa = epsilon / sigma(Delta_z) for translation-invariant base measures and epsilon / (2 sigma)
otherwise (the normaliser depends on x once the base measure is bounded).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import gammaln

from core.census.analytic import level_node_variance, unit_coefficients
from core.census.consistency import project_to_simplex, round_total
from core.census.geography_data import Hierarchy
from core.census.checks import number as _number
from core.contracts import Plan, named_rng, param, whole_number
from core.geography.hierarchy import check_counts
from core.privacy.mechanisms import NoiseMechanism, get_mechanism, sample_geometric


# ------------------------------------------------------------------ sensitivity in log space
def _binom_logpmf(n: int, z: float) -> np.ndarray:
    j = np.arange(n + 1, dtype=float)
    with np.errstate(divide="ignore"):
        return gammaln(n + 1) - gammaln(j + 1) - gammaln(n - j + 1) + j * math.log(z) + (n - j) * math.log1p(-z)


def _log_cdf_sf(logpmf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log P(X <= x) and log P(X > x) built from the log-pmf by cumulative logaddexp from each end."""
    log_cdf = np.logaddexp.accumulate(logpmf)
    rev = np.logaddexp.accumulate(logpmf[::-1])[::-1]     # log P(X >= x)
    log_sf = np.concatenate([rev[1:], [-np.inf]])           # log P(X > x)
    return log_cdf, log_sf


def _dominated(cdf_a, sf_a, cdf_b, sf_b, shift: int) -> bool:
    """True when F_a(x) <= F_b(x + shift) for every x, comparing in log space.

    Where both CDF values are below 1/2 the log-CDFs are compared, otherwise the log survival
    functions (F_a <= F_b iff S_a >= S_b), so tiny tail masses keep their full precision.
    """
    n = cdf_a.shape[0]
    x = np.arange(n)
    y = np.minimum(x + shift, n - 1)
    ca, cb = cdf_a[x], cdf_b[y]
    sa, sb = sf_a[x], sf_b[y]
    half = math.log(0.5)
    low = (ca < half) & (cb < half)
    ok_low = ca <= cb
    ok_high = sa >= sb
    return bool(np.all(np.where(low, ok_low, ok_high)))


def delta_z_dependent_count(n: int, z1: float, z0: float) -> int:
    """W_inf between the count's laws given X_j = 1 and X_j = 0 (Seeman et al. 2022, Example 3).

    Given X_j = 1 (0) every other record is 1 with probability z1 (z0): 1 + Bin(n-1, z1) versus
    Bin(n-1, z0). Smallest integer shift d with both CDFs dominating each other at distance d,
    computed exactly in log space (float CDFs understate it, e.g. 23 instead of 36 at n=100).
    """
    if n < 1 or not (0 < z1 < 1 and 0 < z0 < 1):
        raise ValueError("Need n >= 1 and z0, z1 strictly between 0 and 1.")
    if z0 == z1:
        return 1
    b1 = _binom_logpmf(n - 1, z1)
    b0 = _binom_logpmf(n - 1, z0)
    la = np.concatenate([[-np.inf], b1])   # 1 + Bin(n-1, z1) on 0..n
    lb = np.concatenate([b0, [-np.inf]])   # Bin(n-1, z0) on 0..n
    ca, sa = _log_cdf_sf(la)
    cb, sb = _log_cdf_sf(lb)
    for d in range(0, n + 1):
        if _dominated(ca, sa, cb, sb, d) and _dominated(cb, sb, ca, sa, d):
            return d
    return n


def delta_z_grid(n: int, z_values=(0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99)) -> pd.DataFrame:
    """Delta_z over a grid of (z1 rows, z0 columns) for the Example 3 dependence model."""
    data = [[delta_z_dependent_count(n, z1, z0) for z0 in z_values] for z1 in z_values]
    return pd.DataFrame(data, index=pd.Index(z_values, name="z1"), columns=pd.Index(z_values, name="z0"))


def beta_noisy_public_mean(n: int, sigma: float, omega: float) -> float:
    """Example 2 with Z = mean + N(0, omega^2): the weight of one record on the mean given Z."""
    return (omega ** 2 / n) / (sigma ** 2 * (n - 1) / n ** 2 + omega ** 2)


def beta_equicorrelated(n: int, rho: float) -> float:
    """Example 2 with equicorrelated records: (1 + (n-1) rho)/n, so dependence multiplies Delta."""
    if not -1.0 / (n - 1) <= rho <= 1:
        raise ValueError(f"The correlation must lie in [-1/(n-1), 1] = [{-1.0 / (n - 1):.4g}, 1].")
    return (1.0 + (n - 1) * rho) / n


# --------------------------------------------------------------------------- WEM samplers
def wem_naive(counts, epsilon: float, delta_z: float, rng: np.random.Generator) -> np.ndarray:
    """WEM with L1 loss on the whole integer lattice: independent discrete Laplace of scale Delta_z/epsilon."""
    x = np.asarray(counts, dtype=np.int64)
    return x + sample_geometric(delta_z / epsilon, x.shape, rng)


# The exact sampler keeps two (cells x (total + 1)) float arrays; beyond this many entries it would
# take hundreds of megabytes, so larger vectors are refused with a message.
WEM_MAX_ENTRIES = 10_000_000


def wem_congenial(counts, total: int, epsilon: float, delta_z: float, rng: np.random.Generator,
                  normalizer_safe: bool = True, size: int | None = None) -> np.ndarray:
    """Exact WEM draw(s) with L1 loss on {y >= 0 integer, sum y = total} (the public total).

    kappa = epsilon / (2 Delta_z) when ``normalizer_safe`` (needed: the base measure is bounded).
    The weight factorises over cells apart from the sum, so a forward pass of convolutions over
    the running total and a backward draw give an exact sample (float rounding aside). The forward
    pass does not depend on the randomness, so ``size`` draws share it: shape (J,) without
    ``size``, (size, J) with it.
    """
    x = np.asarray(counts, dtype=float)
    s = int(total)
    if s < 0 or x.ndim != 1 or x.size == 0:
        raise ValueError("Need a 1-D count vector and a non-negative public total.")
    if s > 200_000 or x.size > 2_000 or x.size * (s + 1) > WEM_MAX_ENTRIES:
        raise ValueError(f"The exact sampler handles totals up to 200,000, up to 2,000 cells and cells x (total + 1) "
                         f"up to {WEM_MAX_ENTRIES:,}; this vector has {x.size:,} cells and total {s:,}. "
                         "Pick a smaller unit.")
    kappa = epsilon / ((2.0 if normalizer_safe else 1.0) * delta_z)
    grid = np.arange(s + 1, dtype=float)
    weights = np.exp(-kappa * np.abs(grid[None, :] - x[:, None]))   # (J, s+1), max 1 near x_j
    messages = np.empty_like(weights)     # messages[j][r]: weight of the first j cells summing to r
    messages[0] = 0.0
    messages[0, 0] = 1.0
    for j in range(x.size - 1):
        nxt = _convolve_head(messages[j], weights[j], s + 1)
        peak = nxt.max()
        messages[j + 1] = nxt / peak if peak > 0 else nxt
    n = 1 if size is None else int(size)
    out = np.empty((n, x.size), dtype=np.int64)
    for i in range(n):
        remaining = s
        for j in range(x.size - 1, -1, -1):
            w = weights[j, : remaining + 1] * messages[j, remaining::-1]
            if not w.sum() > 0:
                w = messages[j, remaining::-1] + 1e-300
            cdf = np.cumsum(w)
            pick = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), remaining)
            out[i, j] = pick
            remaining -= pick
    return out[0] if size is None else out


def _convolve_head(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """First n terms of the convolution a * b (FFT for long inputs, clipped at 0)."""
    if n <= 4096:
        return np.convolve(a, b)[:n]
    from scipy.signal import fftconvolve
    return np.maximum(fftconvolve(a, b)[:n], 0.0)


def wem_postprocessed(counts, total: int, epsilon: float, delta_z: float, rng: np.random.Generator) -> np.ndarray:
    """Naive WEM projected onto {y >= 0, sum y = total} and rounded by largest remainder (post-processing)."""
    y = wem_naive(counts, epsilon, delta_z, rng).astype(float)
    proj = project_to_simplex(y, np.array([0]), np.array([float(total)]))
    return round_total(proj, int(total))


@dataclass(frozen=True)
class WemPlan(Plan):
    """Settings of the public-total WEM comparison."""

    epsilon: float = param(0.5, label="WEM epsilon", low=0.01, high=10.0)
    delta_z: float = param(2.0, label="Delta_z (2 when records are independent)", low=1.0, high=1000.0,
                           help="How far one person's record can move a count once the public information is "
                                "known; see the glossary above.")
    runs: int = param(30, label="WEM runs", low=5, high=200, kind="slider")
    seed: int = 0
    normalizer_safe: bool = param(
        True, label="Normaliser-safe kappa = epsilon / (2 Delta_z) for the bounded set of releases",
        help="kappa is how steeply the WEM's probabilities fall with distance from the true counts; halving it "
             "keeps the guarantee when the releases are restricted to add up to the total.")

    def __post_init__(self) -> None:
        _number(self.epsilon, "The WEM's epsilon", 0.01, 10.0)
        _number(self.delta_z, "Delta_z", 1.0, 1000.0)
        whole_number(self.runs, "The WEM runs", 1, 500)
        whole_number(self.seed, "The seed", 0, 2**63 - 1)
        if not isinstance(self.normalizer_safe, bool):
            raise ValueError("normalizer_safe must be true or false.")


DZ_RECORDS = (10, 100, 200, 500)


@dataclass(frozen=True)
class PublicInfoPlan(Plan):
    """The Public information tab: which levels are published exactly, the WEM run, and the
    dependence examples (records n for Example 3, correlation for Example 2)."""

    exact_through: int = param(0, label="Publish exactly through level", kind="select_slider")  # menu: the tree's levels
    wem: WemPlan = param(WemPlan(), label="WEM")
    dz_records: int = param(10, label="Records n (Example 3)", choices=DZ_RECORDS, kind="select_slider")
    correlation: float = param(0.1, label="Correlation between records (Example 2)", low=0.0, high=1.0, step=0.05,
                               kind="slider")

    def __post_init__(self) -> None:
        whole_number(self.exact_through, "The exact level (-1 for nothing)", -1, 10)
        if not isinstance(self.wem, WemPlan):
            raise ValueError("The WEM settings must be a WemPlan.")
        if isinstance(self.dz_records, bool) or self.dz_records not in DZ_RECORDS:
            raise ValueError(f"Records n must be one of {list(DZ_RECORDS)}; got {self.dz_records!r}.")
        _number(self.correlation, "The correlation between records", 0.0, 1.0)


def wem_comparison(counts, config: WemPlan) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Error of naive, post-processed and congenial WEM draws for a count vector with a public total.

    Returns (summary per method, per-cell mean absolute error per method). Simulation, not a release.
    """
    x = np.asarray(check_counts(counts, "The WEM's counts", nonnegative=True), dtype=np.int64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("The WEM needs a list of at least one count.")
    total = int(x.sum())
    # each method draws from its own stream of the seed, so one method's draws never shift another's
    naive_rng, projected_rng, congenial_rng = (named_rng(config.seed, "wem", name)
                                               for name in ("naive", "projection", "congenial"))
    draws = {"naive WEM (lattice)": [wem_naive(x, config.epsilon, config.delta_z, naive_rng)
                                     for _ in range(int(config.runs))],
             "naive + projection": [wem_postprocessed(x, total, config.epsilon, config.delta_z, projected_rng)
                                    for _ in range(int(config.runs))]}
    draws["congenial WEM (sum = total, y >= 0)"] = wem_congenial(x, total, config.epsilon, config.delta_z,
                                                                 congenial_rng, config.normalizer_safe,
                                                                 size=int(config.runs))
    summary, cells = [], []
    for name, ys in draws.items():
        arr = np.asarray(ys, dtype=float)
        err = np.abs(arr - x[None, :])
        summary.append({"method": name, "mean L1 error": err.sum(axis=1).mean(),
                        "runs meeting the public total": float(np.mean(arr.sum(axis=1) == total)),
                        "runs with no negative cell": float(np.mean((arr >= 0).all(axis=1))),
                        "zeros created (true > 0, release 0)": float(np.mean(((arr == 0) & (x > 0)).sum(axis=1)))})
        for j in range(x.size):
            cells.append({"method": name, "cell": j, "true count": int(x[j]), "mean abs error": err[:, j].mean()})
    return pd.DataFrame(summary), pd.DataFrame(cells)


# ------------------------------------------------------------------ invariants: price and gain
def invariant_effects(h: Hierarchy, node_counts: np.ndarray, eps_by_level,
                      mechanism: str | NoiseMechanism = "laplace", sensitivity: float = 2.0) -> pd.DataFrame:
    """For each choice 'levels 0..m published exactly' (and none): what it reveals and what it gains.

    Accuracy: ToyDown whole-unit sd per level with levels <= m exact (their noise terms vanish,
    Cohen et al. 2021, Thm. 2), both with the original budgets and with the freed budget spread
    proportionally over the noisy levels. Information: exact statistics published and units whose
    presence secrets z decides (exact count 0 or 1). ``mechanism``: the allocation's built mechanism
    (or its id, then parsed once here).
    """
    mechanism = get_mechanism(mechanism)
    eps = np.asarray(eps_by_level, dtype=float)
    v = level_node_variance(eps, mechanism, sensitivity, estimate=True)
    coeffs = [unit_coefficients(h, lvl).mean(axis=1) for lvl in range(h.depth)]
    totals = node_counts if node_counts.ndim == 1 else node_counts.sum(axis=1)
    rows = []
    for m in range(-1, h.depth):
        keep = np.arange(h.depth) > m
        if m == h.depth - 1:
            freed_v = np.zeros_like(v)
        else:
            scale = eps.sum() / eps[keep].sum()
            freed_v = level_node_variance(eps * scale, mechanism, sensitivity, estimate=True) * keep
        exact_nodes = int(h.level_offsets[m + 1]) if m >= 0 else 0
        decided = int(np.sum(totals[: exact_nodes] <= 1)) if m >= 0 else 0
        name = "none" if m < 0 else ("root total" if m == 0 else f"all counts through {h.level_names[m]}")
        for lvl in range(h.depth):
            rows.append({"invariant": name, "exact through level": m, "level": h.level_names[lvl],
                         "sd (same budgets)": float(math.sqrt(max(np.dot(coeffs[lvl] * keep, v), 0.0))),
                         "sd (freed budget re-spent)": float(math.sqrt(max(np.dot(coeffs[lvl], freed_v), 0.0))),
                         "statistics published exactly": exact_nodes,
                         "units with exact count 0 or 1": decided,
                         "budget freed": float(eps[~keep].sum())})
    return pd.DataFrame(rows)


def dpz_statement(epsilon: float, unit: str, invariants: list[str]) -> str:
    """Plain-language guarantee once invariants are public (epsilon-DP relative to Z)."""
    if not invariants:
        return (f"With no invariants the noisy counts are {epsilon:g}-{'DP' if unit == 'epsilon' else 'zCDP (rho)'} "
                "in the usual sense: every person's record is protected.")
    z = ", ".join(invariants)
    return (f"Z = {{{z}}} is published exactly. The noisy counts are then {epsilon:g}-DP relative to Z "
            f"({'rho-zCDP' if unit == 'rho' else 'epsilon'} accounting per value of Z): an adversary who already "
            "knows Z changes their odds on any secret Z leaves open by at most that factor. Secrets Z settles "
            "(e.g. whether anyone lives in a unit whose exact count is 0) are not protected, and budgets "
            "spent under a different Z do not add up with these.")
