"""Private mean estimation pooled and stratified (Rosenblatt, Stoyanovich & Musco, Sec. 3 and App.).

Values are modelled as N(mu, sigma^2) with |mu| <= R. Clipped means with any noise of
``core.synthesis.plan.NOISES`` (Laplace and Gaussian are the paper's; eq. 2-3),
the stratified recombination (eq. 4) with public, DP-noised or user weights, the error
expressions (Prop. 9, Lemma 12, Thm. 10) and univariate COINPRESS (App. Alg. 1-3).

A ``noise`` argument is a ``NOISES`` key or its :class:`~core.synthesis.mean_noise.MeanNoise`; its unit,
calibration, sampler and variance come from that object, never from the key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import digamma

from core.privacy.accounting import gaussian_sigma
from core.privacy.ledger import BudgetLedger
from core.privacy.mechanisms import sample_gaussian, sample_laplace
from core.synthesis.plan import mean_noise

WEIGHT_POLICIES = ("exact", "dp", "user")


# ---- clipped means ------------------------------------------------------------------------
def clip_bound(n: int | np.ndarray, R: float, gamma: float, margin: str = "paper") -> np.ndarray:
    """Clip radius B = R + sqrt(log(n/gamma)) (paper, eq. 2) or R + sqrt(2 log(n/gamma)) ("proof").

    The paper prints the interval as [R - c, R + c]; we clip to [-(R + c), R + c], the symmetric
    interval its proof uses. The "proof" margin is the one that makes the no-clipping tail bound hold.
    """
    R, gamma = check_mean_model(R, gamma)
    n = np.maximum(np.asarray(n, float), 1.0)
    factor = 2.0 if margin == "proof" else 1.0
    return R + np.sqrt(factor * np.log(n / gamma))


def check_mean_model(R: float, gamma: float) -> tuple[float, float]:
    """(R, gamma) of the model |mu| <= R with failure probability gamma, or a ValueError: R must be a
    positive finite bound and gamma a probability strictly between 0 and 1."""
    R, gamma = float(R), float(gamma)
    if not math.isfinite(R) or R <= 0:
        raise ValueError(f"The bound R on |mean| must be a positive finite number (e.g. 1); got {R}.")
    if not 0 < gamma < 1:
        raise ValueError(f"gamma (the chance a value falls outside the clip range) must lie strictly between "
                         f"0 and 1 (e.g. 0.1); got {gamma}.")
    return R, gamma


def laplace_scale(n: int | np.ndarray, R: float, gamma: float, epsilon: float, margin: str = "paper") -> np.ndarray:
    """Laplace scale of a clipped mean: 2 B / (n epsilon) (eq. 2; sizes treated as public)."""
    n = np.maximum(np.asarray(n, float), 1.0)
    return 2 * clip_bound(n, R, gamma, margin) / (n * epsilon)


def clipped_mean(x: np.ndarray, R: float, gamma: float, budget: float, rng: np.random.Generator,
                 noise="laplace", margin: str = "paper") -> float:
    """Clipped mean plus the noise's draw for sensitivity 2B/n at ``budget`` in its unit (Laplace: epsilon;
    Gaussian: rho)."""
    noise = mean_noise(noise)
    x = np.asarray(x, float)
    if not math.isfinite(budget) or budget <= 0:
        raise ValueError(f"The privacy budget must be a positive finite number; got {budget}.")
    n = max(x.size, 1)
    B = float(clip_bound(n, R, gamma, margin))
    base = np.clip(x, -B, B).mean() if x.size else 0.0
    sens = 2 * B / n
    return float(base + noise.sample(float(noise.scale_for(sens, budget)), None, rng))


def recombination_weights(sizes: np.ndarray, policy: str, rng: np.random.Generator | None = None,
                          count_epsilon: float | None = None, user_weights: Sequence[float] | None = None) -> np.ndarray:
    """Normalised stratum weights: "exact" g_i/n (sizes public), "dp" Laplace(1/eps_c) counts clipped at 0
    (the count histogram costs eps_c on top), or "user" public proportions."""
    sizes = np.asarray(sizes, float)
    if policy == "exact":
        w = sizes.copy()
    elif policy == "dp":
        if not count_epsilon or count_epsilon <= 0 or rng is None:
            raise ValueError("DP weights need a positive count epsilon and a random generator.")
        w = np.maximum(sizes + sample_laplace(1 / count_epsilon, sizes.size, rng), 0.0)
    elif policy == "user":
        if user_weights is None or len(user_weights) != sizes.size:
            raise ValueError(f"Give exactly {sizes.size} user weights, one per stratum.")
        w = np.asarray(user_weights, float)
        if np.any(w < 0):
            raise ValueError("User weights must be non-negative.")
    else:
        raise ValueError(f"Weight policy must be one of {WEIGHT_POLICIES}; got {policy!r}.")
    if w.sum() <= 0:
        return np.full(w.size, 1 / w.size)
    return w / w.sum()


@dataclass(frozen=True)
class StratifiedMean:
    """Per-stratum private means, their weights, the recombined mean and the ledger of what it spent.

    ``budget_total`` is stated in one ``unit``: "epsilon" (pure DP) when every part used Laplace
    noise, "rho" (zCDP) when the means used Gaussian noise; a pure-epsilon count then enters as
    epsilon^2 / 2 (through ``core.privacy``), never added to rho as it is.
    """

    group_means: np.ndarray
    weights: np.ndarray
    population: float
    ledger: BudgetLedger

    @property
    def unit(self) -> str:
        return "epsilon" if self.ledger.is_pure() else "rho"

    @property
    def budget_total(self) -> float:
        return self.ledger.total(self.unit)


def stratified_mean(x: np.ndarray, groups: np.ndarray, k: int, R: float, gamma: float, epsilon: float,
                    rng: np.random.Generator, policy: str = "exact", count_epsilon: float | None = None,
                    user_weights: Sequence[float] | None = None, margin: str = "paper",
                    noise="laplace") -> StratifiedMean:
    """Eq. 3 per stratum with the full budget, recombined by eq. 4 with the chosen weights (Prop. 8).

    ``epsilon`` is the budget in the noise's unit: the pure-DP epsilon with Laplace noise, the zCDP rho
    with ``noise="gaussian"`` (each stratum's mean gets N(0, (2B/g)^2 / (2 rho)); parallel composition
    holds for rho as well). Vectorised over strata: clipped sums by np.bincount, one noise draw per stratum.
    """
    noise = mean_noise(noise)
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"The privacy budget must be a positive finite number; got {epsilon}.")
    x, groups = np.asarray(x, float), np.asarray(groups, np.int64)
    sizes = np.bincount(groups, minlength=k).astype(float)
    B = clip_bound(sizes, R, gamma, margin)
    clipped = np.clip(x, -B[groups], B[groups])
    sums = np.bincount(groups, weights=clipped, minlength=k)
    # one standard draw per stratum, scaled by that stratum's own calibration (sensitivity 2 B_i / g_i)
    draw = noise.sample(1.0, k, rng) * noise.scale_for(2 * B / np.maximum(sizes, 1), epsilon)
    means = sums / np.maximum(sizes, 1) + draw
    w = recombination_weights(sizes, policy, rng, count_epsilon, user_weights)
    ledger = BudgetLedger()
    ledger.spend("stratum means", epsilon, noise.unit,
                 composition="parallel", group="strata", part="every stratum",
                 measured=f"{k} clipped means, one per stratum")
    if policy == "dp":
        ledger.spend("stratum sizes for the weights (Laplace counts)", count_epsilon, "epsilon",
                     measured=f"{k} noisy stratum counts")
    return StratifiedMean(means, w, float(w @ means), ledger)


# ---- error expressions -----------------------------------------------------------------------
def population_error_sd(sizes: Sequence[float], R: float, gamma: float, epsilon: float,
                        stratified: bool = True, noise="laplace") -> float:
    """Standard deviation of the privacy error of the population mean with exact weights (Sec. 2.3):
    sqrt(sum_i Var(noise at sensitivity 2 B_i)) / n stratified (independent strata: variances add), and
    sqrt(Var(noise at 2 B_0)) / n pooled. Laplace at epsilon: sqrt(2 sum b_i^2)/n with
    b = (2R + 2 sqrt(log(g/gamma)))/epsilon; Gaussian at rho: each sqrt(2) b becomes 2B / sqrt(2 rho)."""
    noise = mean_noise(noise)
    sizes = np.asarray(sizes, float)
    n = sizes.sum()
    sens = 2 * np.atleast_1d(clip_bound(sizes, R, gamma) if stratified else clip_bound(n, R, gamma))
    return float(math.sqrt(np.sum(noise.variance(noise.scale_for(sens, epsilon)))) / n)


def cost_ratio_bounds(k: int, n: float, R: float, gamma: float) -> tuple[float, float]:
    """Bounds on the stratified/pooled error-sd ratio: [sqrt(k) R / (R + sqrt(log(n/gamma))), sqrt(k)]."""
    return math.sqrt(k) * R / (R + math.sqrt(math.log(n / gamma))), math.sqrt(k)


def prop9_bound(n: float, k: int, R: float, gamma: float, epsilon: float) -> float:
    """Order of Prop. 9's worst-case error: log(1/gamma) sqrt(k) (R + sqrt(log(n/(k gamma)))) / (n epsilon)."""
    return math.log(1 / gamma) * math.sqrt(k) * (R + math.sqrt(math.log(n / (k * gamma)))) / (n * epsilon)


def worst_case_log_sizes(n: float, k: int) -> float:
    """Lemma 12: sum log g_i <= k log(n/k), reached by equal sizes."""
    return k * math.log(n / k)


def best_case_log_sizes(n: float, k: int) -> float:
    """k-1 singletons and one majority group: sum log g_i = log(n - k + 1)."""
    return math.log(n - k + 1)


def dirichlet_expected_log_sizes(alpha: float, k: int, n: float) -> float:
    """Thm. 10 with |G_i| = g_i n, g ~ Dir(alpha 1_k): E sum log|G_i| = k (psi(alpha) - psi(k alpha) + log n).

    The paper states an inequality; the Beta-marginal derivation gives equality, which the
    tests confirm by Monte Carlo.
    """
    return float(k * (digamma(alpha) - digamma(k * alpha) + math.log(n)))


def dirichlet_alpha_mle(proportions: Sequence[float]) -> float:
    """Maximum-likelihood symmetric Dirichlet alpha for one observed proportion vector."""
    from scipy.optimize import minimize_scalar
    from scipy.special import gammaln

    p = np.asarray(proportions, float)
    p = p[p > 0] / p[p > 0].sum()
    k, s = p.size, np.log(p).sum()

    def nll(log_a):
        a = math.exp(log_a)
        return -(gammaln(k * a) - k * gammaln(a) + (a - 1) * s)

    return float(math.exp(minimize_scalar(nll, bounds=(-10, 8), method="bounded").x))


# ---- COINPRESS -------------------------------------------------------------------------------
def uvm(x: np.ndarray, lo: float, hi: float, sigma: float, rho_s: float, beta_s: float,
        rng: np.random.Generator) -> tuple[float, float]:
    """One rho_s-zCDP refinement step (App. Alg. 1): clip, Gaussian mean, new confidence interval."""
    n = max(x.size, 1)
    c = sigma * math.sqrt(2 * math.log(2 * n / beta_s))
    delta = (hi - lo + 2 * c) / n
    z = np.clip(x, lo - c, hi + c).mean() if x.size else (lo + hi) / 2
    noise_sd = gaussian_sigma(delta, rho_s)
    z += sample_gaussian(noise_sd, None, rng)
    half = math.sqrt(2 * (sigma ** 2 / n + noise_sd ** 2) * math.log(2 / beta_s))
    return z - half, z + half


def coinpress_mean(x: np.ndarray, lo: float, hi: float, rho_schedule: Sequence[float], rng: np.random.Generator,
                   sigma: float = 1.0, beta: float = 0.01) -> float:
    """UVMREC (App. Alg. 2): t steps, the first t-1 at beta/(4(t-1)); returns the last interval's midpoint."""
    t = len(rho_schedule)
    for j, rho_s in enumerate(rho_schedule):
        beta_s = beta / 4 if j == t - 1 else beta / (4 * (t - 1))
        lo, hi = uvm(np.asarray(x, float), lo, hi, sigma, rho_s, beta_s, rng)
    return (lo + hi) / 2


def strat_coinpress(x: np.ndarray, groups: np.ndarray, k: int, lo: float, hi: float,
                    rho_schedule: Sequence[float], rng: np.random.Generator, weights: np.ndarray | None = None,
                    sigma: float = 1.0, beta: float = 0.01) -> tuple[np.ndarray, float]:
    """App. Alg. 3, corrected: each stratum runs the whole schedule (total rho, parallel composition);
    the population mean is sum w_i mu_i with normalised weights (size weights by default)."""
    x, groups = np.asarray(x, float), np.asarray(groups, np.int64)
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(k + 1))
    means = np.array([coinpress_mean(x[order[bounds[i]:bounds[i + 1]]], lo, hi, rho_schedule, rng, sigma, beta)
                      for i in range(k)])
    sizes = np.diff(bounds).astype(float)
    w = sizes / sizes.sum() if weights is None else np.asarray(weights, float) / np.sum(weights)
    return means, float(w @ means)


# ---- simulators ------------------------------------------------------------------------------
def simulate_laplace_cost(sizes: Sequence[int], R: float, gamma: float, epsilon: float, runs: int,
                          rng: np.random.Generator) -> dict[str, float]:
    """Monte Carlo of the population privacy error (no clipping): sd and MAE, stratified vs pooled (T4)."""
    sizes = np.asarray(sizes, float)
    n = sizes.sum()
    b = 2 * clip_bound(sizes, R, gamma) / epsilon
    strat = (sample_laplace(1.0, (runs, sizes.size), rng) * b).sum(1) / n
    pooled = sample_laplace(2 * float(clip_bound(n, R, gamma)) / epsilon, runs, rng) / n
    return {"sd_stratified": float(strat.std()), "sd_pooled": float(pooled.std()),
            "mae_stratified": float(np.abs(strat).mean()), "mae_pooled": float(np.abs(pooled).mean()),
            "sd_ratio": float(strat.std() / pooled.std()), "mae_ratio": float(np.abs(strat).mean() / np.abs(pooled).mean())}


def simulate_dirichlet_log_sizes(alpha: float, k: int, n: float, runs: int, rng: np.random.Generator) -> float:
    """Monte Carlo mean of sum log(n g_i) with g ~ Dir(alpha 1_k) (T1, checks Thm. 10)."""
    g = rng.dirichlet(np.full(k, alpha), runs)
    g = np.maximum(g, np.finfo(float).tiny)
    return float(np.log(n * g).sum(1).mean())


def simulate_mixture_coinpress(n_private: int, alpha: float, k: int, runs: int, rng: np.random.Generator,
                               rho: float = 0.5, split: tuple[float, float] = (0.25, 0.75),
                               start: tuple[float, float] = (-3.0, 3.0)) -> pd.DataFrame:
    """Sec. 4.2 experiment: Dirichlet group sizes (min 1), mu_i ~ N(0,1), sigma 1; a private half and an
    equal public half. Errors against the private half's empirical mean for COINPRESS, stratified
    COINPRESS (exact weights) and PubStrat (weights counted on the public half)."""
    sched = [rho * s for s in split]
    rows = []
    for r in range(runs):
        v = rng.dirichlet(np.full(k, alpha))
        mu = rng.normal(0, 1, k)
        sizes = np.maximum(np.round(2 * n_private * v).astype(int), 1)
        groups = np.repeat(np.arange(k), sizes)
        x = rng.normal(mu[groups], 1.0)
        perm = rng.permutation(x.size)
        priv, pub = perm[: x.size // 2], perm[x.size // 2:]
        truth = x[priv].mean()
        pooled = coinpress_mean(x[priv], *start, sched, rng)
        means, strat = strat_coinpress(x[priv], groups[priv], k, *start, sched, rng)
        pub_w = np.bincount(groups[pub], minlength=k).astype(float)
        pub = float((pub_w / pub_w.sum()) @ means)
        rows += [(r, "COINPRESS", abs(pooled - truth)), (r, "Strat", abs(strat - truth)),
                 (r, "PubStrat", abs(pub - truth))]
    out = pd.DataFrame(rows, columns=["run", "method", "abs_error"])
    out["n_private"], out["alpha"], out["k"] = n_private, alpha, k
    return out


def noise_budget(epsilon: float, noise="laplace", delta: float = 1e-9) -> float:
    """The budget a noise takes for a target epsilon (``MeanNoise.budget_for``): epsilon itself (Laplace,
    pure DP), or the largest zCDP rho that is (epsilon, delta)-DP (Gaussian), so noises compare at equal epsilon."""
    return mean_noise(noise).budget_for(epsilon, delta)


def mean_estimation_curves(sizes: Sequence[int], R: float, gamma: float, epsilons: Sequence[float], runs: int,
                           rng: np.random.Generator, means: Sequence[float] | None = None,
                           noise="laplace", delta: float = 1e-9) -> pd.DataFrame:
    """Population privacy error against epsilon: theory sd (Sec. 2.3) and simulated |error| of the real
    estimators on Gaussian data with these group sizes. Tidy: epsilon, method, kind, value.
    Gaussian noise runs at the rho that is (epsilon, delta)-DP (``noise_budget``)."""
    check_mean_model(R, gamma)
    noise = mean_noise(noise)
    sizes = np.asarray(sizes, int)
    k = sizes.size
    mu = np.zeros(k) if means is None else np.asarray(means, float)
    groups = np.repeat(np.arange(k), sizes)
    rows = []
    for eps in epsilons:
        budget = noise_budget(eps, noise, delta)
        rows.append((eps, "stratified", "theory sd", population_error_sd(sizes, R, gamma, budget, True, noise)))
        rows.append((eps, "pooled", "theory sd", population_error_sd(sizes, R, gamma, budget, False, noise)))
        for r in range(runs):
            x = rng.normal(mu[groups], 1.0)
            emp = x.mean()
            strat = stratified_mean(x, groups, k, R, gamma, budget, rng, noise=noise).population
            pooled = clipped_mean(x, R, gamma, budget, rng, noise=noise)
            rows.append((eps, "stratified", "simulated |error|", abs(strat - emp)))
            rows.append((eps, "pooled", "simulated |error|", abs(pooled - emp)))
    return pd.DataFrame(rows, columns=["epsilon", "method", "kind", "value"])


def dirichlet_summary(sizes: Sequence[float], alphas: Sequence[float] | None = None) -> tuple[dict, pd.DataFrame]:
    """Observed sum of log sizes beside Lemma 12's worst case, the best case, the MLE alpha and
    Thm. 10's value at it; plus Thm. 10 over a grid of alpha. Empty groups are left out."""
    g = np.asarray(sizes, float)
    g = g[g > 0]
    k, n = int(g.size), float(g.sum())
    if k < 2:
        raise ValueError("Need at least two non-empty strata to compare group-size scenarios.")
    alpha = dirichlet_alpha_mle(g / n)
    grid = np.asarray(alphas if alphas is not None else np.geomspace(0.05, 5, 60), float)
    table = pd.DataFrame({"alpha": grid, "expected": [dirichlet_expected_log_sizes(a, k, n) for a in grid]})
    summary = {"k": k, "n": n, "observed": float(np.log(g).sum()), "worst": worst_case_log_sizes(n, k),
               "best": best_case_log_sizes(n, k), "alpha_mle": alpha,
               "theorem10_at_mle": dirichlet_expected_log_sizes(alpha, k, n)}
    return summary, table


def group_error_table(sizes: Sequence[int], means: Sequence[float], R: float, gamma: float, epsilon: float,
                      runs: int, rng: np.random.Generator, policy: str = "exact",
                      count_epsilon: float | None = None, noise="laplace",
                      delta: float = 1e-9) -> pd.DataFrame:
    """Who pays: each group's mean |error| when it gets its own private mean (stratified) versus
    when the pooled private mean stands in for it, over ``runs`` simulated data sets of N(mu_i, 1);
    plus the population error of both and the stratified closed-form sd (Sec. 2.3): sqrt(2) b_i / g_i
    with Laplace noise, 2 B_i / (g_i sqrt(2 rho)) with Gaussian noise at the (epsilon, delta) rho:
    in general the sd of the noise calibrated for sensitivity 2 B_i / g_i."""
    noise = mean_noise(noise)
    budget = noise_budget(epsilon, noise, delta)
    sizes = np.asarray(sizes, int)
    mu = np.asarray(means, float)
    if sizes.size != mu.size or sizes.size < 1 or np.any(sizes < 1):
        raise ValueError("Give one positive size and one mean per group.")
    k = sizes.size
    groups = np.repeat(np.arange(k), sizes)
    strat_err, pooled_err, pop = np.zeros((runs, k)), np.zeros((runs, k)), np.zeros((runs, 2))
    for r in range(runs):
        x = rng.normal(mu[groups], 1.0)
        emp = np.bincount(groups, weights=x, minlength=k) / sizes
        res = stratified_mean(x, groups, k, R, gamma, budget, rng, policy, count_epsilon, noise=noise)
        pooled = clipped_mean(x, R, gamma, budget, rng, noise=noise)
        strat_err[r], pooled_err[r] = np.abs(res.group_means - emp), np.abs(pooled - emp)
        pop[r] = abs(res.population - x.mean()), abs(pooled - x.mean())
    theory = np.sqrt(noise.variance(noise.scale_for(2 * clip_bound(sizes, R, gamma) / sizes, budget)))
    out = pd.DataFrame({"group": np.arange(k), "size": sizes, "true mean": mu,
                        "stratified mean |error|": strat_err.mean(0), "stratified theory sd": theory,
                        "pooled mean |error|": pooled_err.mean(0)})
    out.attrs["population"] = {"stratified": float(pop[:, 0].mean()), "pooled": float(pop[:, 1].mean())}
    return out
