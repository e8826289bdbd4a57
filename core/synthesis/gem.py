"""GEM: a generator network fitted to adaptively selected noisy marginals (Liu, Vietri & Wu 2021,
Alg. 1), in JAX + optax on CPU.

The generator maps Gaussian noise (K rows at a time) through an MLP to one softmax per column;
its answer to a marginal is the average over the K rows of the product of the columns' softmaxes.
Round 0 measures every one-way marginal (Gaussian, L2 sensitivity sqrt(d)); each later round
picks the worst-answered workload marginal with the exponential mechanism (score: L1 error of
the counts against the generator's answer scaled by the noisy total, sensitivity 1), measures it
with the Gaussian mechanism and takes ``steps`` Adam steps on the summed L1 loss over every
marginal measured so far. An exponential moving average of the weights answers queries and
draws the rows.

Accounting (rho, zCDP) spends exactly the stated total: each of T rounds costs rho/T; as in the
paper each round's epsilon0 is split alpha : 1-alpha between selection (epsilon^2/8) and
measurement (a Gaussian of epsilon (1-alpha) epsilon0, i.e. rho = ((1-alpha) epsilon0)^2 / 2), so
rho/T = epsilon0^2 (alpha^2/8 + (1-alpha)^2/2). The authors' wrapper passed the nominal epsilon
as epsilon0 for every round instead, so its runs spent about T times more (effective epsilon about
3.1 for a nominal 0.1 at delta 1e-9).

Speed: the jitted programs depend only on shapes and settings, so they are built once per process
and shared by every fit of that shape (every stratum of a stratified release, every seed of a
sweep). ``GEM.fit_group`` fits several models with the same settings and domain in lockstep, one
vectorised training call per round for all of them, each model keeping its own data, budget,
random streams and ledger.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.privacy.accounting import exponential_mechanism_epsilon
from core.privacy.ledger import BudgetLedger
from core.synthesis.encoding import check_codes
from core.synthesis.noise import noise_source

SELECT_SHARE = 0.67


def round_budget(rho_round: float, alpha: float = SELECT_SHARE) -> tuple[float, float]:
    """(selection rho, measurement rho) of one round costing ``rho_round`` with epsilon0 split alpha : 1-alpha."""
    eps0_sq = rho_round / (alpha ** 2 / 8 + (1 - alpha) ** 2 / 2)
    rho_sel = alpha ** 2 * eps0_sq / 8
    return rho_sel, rho_round - rho_sel


def _jax():
    import jax

    jax.config.update("jax_enable_x64", False)
    import jax.numpy as jnp
    import optax

    return jax, jnp, optax


@dataclass(frozen=True)
class Programs:
    """The jitted pieces of GEM for one shape and one set of settings.

    ``probs(params, z, pad)`` is one model's row probabilities (K, d, M); ``answers``, ``train`` and
    ``init_opt`` take a leading model axis (G models trained side by side; G = 1 for a single fit).
    """

    probs: Callable
    answers: Callable
    train: Callable
    init_opt: Callable


_PROGRAMS: dict[tuple, Programs] = {}
_PROGRAMS_LOCK = threading.Lock()


def programs(d: int, M: int, noise_dim: int, hidden: int, batch: int, steps: int, learning_rate: float,
             ema: float) -> Programs:
    """The compiled programs for ``d`` columns of at most ``M`` values: built once per process and shape.

    Nothing here depends on the data or on which cells are padding (``pad`` is an argument), so
    every stratum and every round reuses the same compiled code; JAX compiles ``train`` once per
    number of models fitted together.
    """
    key = (int(d), int(M), int(noise_dim), int(hidden), int(batch), int(steps), float(learning_rate), float(ema))
    with _PROGRAMS_LOCK:
        found = _PROGRAMS.get(key)
        if found is None:
            found = _PROGRAMS[key] = _build_programs(*key)
    return found


def _build_programs(d, M, noise_dim, hidden, batch, steps, learning_rate, decay) -> Programs:
    jax, jnp, optax = _jax()

    def probs(params, z, pad):
        h = jax.nn.relu(z @ params["l1"]["w"] + params["l1"]["b"])
        h = jax.nn.relu(h @ params["l2"]["w"] + params["l2"]["b"])
        logits = (h @ params["out"]["w"] + params["out"]["b"]).reshape(z.shape[0], d, M)
        return jax.nn.softmax(jnp.where(pad[None], -1e9, logits), axis=-1)

    def two_way(p):
        return jnp.einsum("kim,kjn->ijmn", p, p) / p.shape[0]

    def loss(params, z, pad, y1, y2, mask2):
        p = probs(params, z, pad)
        return jnp.abs(p.mean(0) - y1).sum() + (mask2[:, :, None, None] * jnp.abs(two_way(p) - y2)).sum()

    opt = optax.adam(learning_rate)

    def train_one(params, ema, opt_state, key, pad, y1, y2, mask2):
        def step(carry, k):
            params, ema, opt_state = carry
            z = jax.random.normal(k, (batch, noise_dim))
            grads = jax.grad(loss)(params, z, pad, y1, y2, mask2)
            updates, opt_state = opt.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            ema = jax.tree.map(lambda e, p: decay * e + (1 - decay) * p, ema, params)
            return (params, ema, opt_state), None
        key, sub = jax.random.split(key)
        (params, ema, opt_state), _ = jax.lax.scan(step, (params, ema, opt_state), jax.random.split(sub, steps))
        return params, ema, opt_state, key

    def answers_one(params, z, pad):
        return two_way(probs(params, z, pad))

    return Programs(probs=jax.jit(probs),
                    answers=jax.jit(jax.vmap(answers_one, in_axes=(0, 0, None))),
                    train=jax.jit(jax.vmap(train_one, in_axes=(0, 0, 0, 0, None, 0, 0, 0))),
                    init_opt=jax.jit(jax.vmap(opt.init)))


class GEM:
    """GEM synthesizer: ``fit(df, domain, rho, rng, noise=None, progress=None)`` then ``sample(n, rng)``."""

    def __init__(self, rounds: int = 100, steps: int = 40, batch: int = 1000, hidden: int = 256,
                 noise_dim: int = 64, learning_rate: float = 1e-3, ema: float = 0.9) -> None:
        self.rounds = int(rounds)
        self.steps = int(steps)
        self.batch = int(batch)
        self.hidden = int(hidden)
        self.noise_dim = int(noise_dim)
        self.learning_rate = float(learning_rate)
        self.ema = float(ema)

    def settings(self) -> tuple:
        """Everything besides the data that shapes a fit (models with equal settings train together)."""
        return (self.rounds, self.steps, self.batch, self.hidden, self.noise_dim, self.learning_rate, self.ema)

    def _check_settings(self) -> None:
        if self.rounds < 1 or self.steps < 1 or self.batch < 1 or self.hidden < 1 or self.noise_dim < 1:
            raise ValueError("GEM needs at least one round, one training step, one generator row, "
                             "one hidden unit and one noise input.")

    def _programs(self, d: int, M: int) -> Programs:
        return programs(d, M, self.noise_dim, self.hidden, self.batch, self.steps, self.learning_rate, self.ema)

    # ---- the network ------------------------------------------------------------------------
    def _init_params(self, rng: np.random.Generator, out: int) -> dict:
        """He-initialised MLP weights, drawn from the fit's generator (numpy arrays)."""
        def layer(i, o):
            return {"w": (rng.normal(size=(i, o)) * math.sqrt(2 / i)).astype(np.float32),
                    "b": np.zeros(o, np.float32)}
        return {"l1": layer(self.noise_dim, self.hidden), "l2": layer(self.hidden, self.hidden),
                "out": layer(self.hidden, out)}

    # ---- fit and sample ---------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, domain: Mapping[str, int], rho: float, rng: np.random.Generator,
            noise=None, progress=None) -> "GEM":
        """Spend exactly ``rho`` over ``rounds`` rounds (module docstring); ``progress(round, rounds,
        message)`` may raise ``Cancelled`` to stop."""
        GEM.fit_group([self], [df], [domain], rho, [rng], [noise], progress=progress)
        return self

    @staticmethod
    def fit_group(models: Sequence["GEM"], frames: Sequence[pd.DataFrame], domains: Sequence[Mapping[str, int]],
                  rho: float, rngs: Sequence[np.random.Generator], noises: Sequence | None = None,
                  progress=None, labels: Sequence[str] | None = None) -> list["GEM"]:
        """Fit ``models[g]`` on ``frames[g]`` with budget ``rho`` each, as ``fit`` would one by one.

        Models with the same settings and the same domain sizes train side by side: one call of the
        shared compiled program per round for all of them. Each model still has its own data, its
        own random generator and noise source, its own selections and its own ledger, so the
        result is a set of independent fits (the wrapper composes them in parallel over disjoint
        rows). ``progress(round, rounds, message)`` is called for every model each round, the
        message starting with its label; raising ``Cancelled`` stops all of them.
        """
        G = len(models)
        if not (len(frames) == len(domains) == len(rngs) == G):
            raise ValueError("Give one data frame, one domain and one random generator per model.")
        noises = [None] * G if noises is None else list(noises)
        labels = [""] * G if labels is None else [f"{s}: " for s in labels]
        if len(noises) != G or len(labels) != G:
            raise ValueError("Give one noise source and one label per model (or none).")
        rho = float(rho)
        if not math.isfinite(rho) or rho <= 0:
            raise ValueError(f"The budget rho must be a positive number; got {rho}.")
        jobs: dict[tuple, list[tuple]] = {}
        for g, (model, df, domain) in enumerate(zip(models, frames, domains)):
            if not isinstance(model, GEM):
                raise ValueError(f"fit_group fits GEM models only; got {type(model).__name__}.")
            model._check_settings()
            arr = check_codes(df, domain)
            columns = list(df.columns)
            if not columns:
                raise ValueError("Choose at least one column to synthesise.")
            sizes = tuple(int(domain[c]) for c in columns)
            jobs.setdefault((model.settings(), sizes), []).append((g, arr, columns))
        for (_, sizes), part in jobs.items():
            idx = [g for g, _, _ in part]
            _fit_lockstep([models[g] for g in idx], [a for _, a, _ in part], [c for _, _, c in part], list(sizes),
                          rho, [rngs[g] for g in idx], [noises[g] for g in idx], progress, [labels[g] for g in idx])
        return list(models)

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` rows: each row one generator output, every column drawn from its softmax."""
        _, jnp, _ = _jax()
        n = int(n)
        if n < 0:
            raise ValueError(f"The number of rows must be zero or more; got {n}.")
        d, M = len(self.columns_), max(self.sizes_)
        z = jnp.asarray(rng.normal(size=(max(n, 1), self.noise_dim)), jnp.float32)
        p = np.asarray(self._programs(d, M).probs(self.params_, z, padding(self.sizes_)), float)[:n]  # (n, d, M)
        cdf = np.cumsum(p, axis=2)
        cdf /= cdf[:, :, -1:]
        u = rng.random((n, d, 1))
        codes = np.minimum((cdf < u).sum(axis=2), np.asarray(self.sizes_) - 1)
        return pd.DataFrame({c: codes[:, j].astype(np.int64) for j, c in enumerate(self.columns_)})


def padding(sizes: Sequence[int]) -> np.ndarray:
    """(d, M) mask of the cells beyond each column's domain (their softmax weight is forced to zero)."""
    return np.arange(max(sizes))[None, :] >= np.asarray(sizes)[:, None]


def exact_marginals(arr: np.ndarray, sizes: Sequence[int], pairs: Sequence[tuple[int, int]]):
    """Exact one-way (d, M) and two-way (d, d, M, M) counts, padded; used only to measure and to score."""
    d, M = len(sizes), max(sizes)
    one = np.zeros((d, M))
    two = np.zeros((d, d, M, M))
    for i, s in enumerate(sizes):
        one[i, :s] = np.bincount(arr[:, i], minlength=s)
    for i, j in pairs:
        si, sj = sizes[i], sizes[j]
        two[i, j, :si, :sj] = np.bincount(arr[:, i] * sj + arr[:, j], minlength=si * sj).reshape(si, sj)
    return one, two


def _stack(trees: list[dict]) -> dict:
    """One tree of arrays with a leading model axis from G trees of the same structure."""
    return {k: _stack([t[k] for t in trees]) if isinstance(v, dict) else np.stack([t[k] for t in trees])
            for k, v in trees[0].items()}


def _fit_lockstep(models: list[GEM], arrs: list[np.ndarray], columns: list[list[str]], sizes: list[int], rho: float,
                  rngs: list, noises: list, progress, labels: list[str]) -> None:
    """Alg. 1 for G models with equal settings and domain sizes, one shared training call per round."""
    jax, jnp, _ = _jax()
    lead = models[0]
    G, d, M = len(models), len(sizes), max(sizes)
    sources = [noise_source(r, s) for r, s in zip(rngs, noises)]
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    pi, pj = (np.array([p[k] for p in pairs], np.int64) for k in (0, 1))
    counts = [exact_marginals(a, sizes, pairs) for a in arrs]
    two = np.stack([c[1] for c in counts])                                 # (G, d, d, M, M)
    T = lead.rounds if pairs else 1
    rho_round = rho / T
    prog = lead._programs(d, M)
    pad = jnp.asarray(padding(sizes))
    # per model, in the order a lone fit draws them: weights, training key, round-0 noise
    params = jax.tree.map(jnp.asarray, _stack([m._init_params(r, d * M) for m, r in zip(models, rngs)]))
    keys = jnp.stack([jax.random.PRNGKey(int(r.integers(2 ** 31))) for r in rngs])
    ledgers = [BudgetLedger() for _ in models]
    spent = [[] for _ in models]
    y1 = np.zeros((G, d, M))
    n_hat = np.zeros(G)
    for g, (src, led) in enumerate(zip(sources, ledgers)):
        # round 0: every one-way marginal, released together (L2 sensitivity sqrt(d))
        sig = []
        for i, s in enumerate(sizes):
            draw, sigma = src.gaussian(math.sqrt(d), rho_round, s)
            y1[g, i, :s] = counts[g][0][i, :s] + draw
            sig.append(sigma)
        led.spend("round 1: one-way marginals", rho_round, "rho",
                  measured=f"{d} one-way count tables, sigma {sig[0]:.3g} each")
        spent[g].append(rho_round)
        # inverse-variance total from the noisy one-way sums (no exact count is kept)
        var = np.array([s * v ** 2 for s, v in zip(sizes, sig)])
        n_hat[g] = max(float((y1[g].sum(1) / var).sum() / (1 / var).sum()), 1.0)
    y1 = np.maximum(y1, 0.0)
    y1 = (y1 / np.maximum(y1.sum(2, keepdims=True), 1e-12)).astype(np.float32)
    y2 = np.zeros((G, d, d, M, M), np.float32)
    mask2 = np.zeros((G, d, d), np.float32)
    history: list[list[dict]] = [[] for _ in models]
    ema = params
    opt_state = prog.init_opt(params)
    params, ema, opt_state, keys = prog.train(params, ema, opt_state, keys, pad, y1, y2, mask2)
    z_eval = jnp.asarray(np.stack([r.normal(size=(lead.batch, lead.noise_dim)) for r in rngs]), jnp.float32)
    rho_sel, rho_meas = round_budget(rho_round)
    eps_em = exponential_mechanism_epsilon(rho_sel)
    for t in range(2, T + 1):
        if progress is not None:
            for g in range(G):
                left = 1 - math.fsum(spent[g]) / rho
                progress(t, T, f"{labels[g]}GEM round {t} of {T}; {left:.0%} of the budget left")
        a2 = np.asarray(prog.answers(ema, z_eval, pad), float)              # (G, d, d, M, M)
        scores = np.abs(two - n_hat[:, None, None, None, None] * a2).sum((3, 4))[:, pi, pj]
        for g in range(G):
            if t == T:   # the last round spends exactly what is left
                rho_sel, rho_meas = round_budget(rho - math.fsum(spent[g]))
                eps_em = exponential_mechanism_epsilon(rho_sel)
            k = sources[g].choose(scores[g], eps_em)
            i, j = pairs[k]
            ledgers[g].spend(f"round {t}: selection", rho_sel, "rho",
                             measured=f"exponential mechanism over {len(pairs)} marginals, epsilon {eps_em:.3g}")
            si, sj = sizes[i], sizes[j]
            draw, sigma = sources[g].gaussian(1.0, rho_meas, (si, sj))
            ledgers[g].spend(f"round {t}: measurement", rho_meas, "rho",
                             measured=f"Gaussian counts of {columns[g][i]} x {columns[g][j]}, sigma {sigma:.3g}")
            spent[g] += [rho_sel, rho_meas]
            noisy = np.maximum(two[g, i, j, :si, :sj] + draw, 0.0)
            y2[g, i, j] = 0.0
            y2[g, i, j, :si, :sj] = noisy / max(noisy.sum(), 1e-12)
            mask2[g, i, j] += 1.0
            history[g].append({"round": t, "marginal": f"{columns[g][i]} x {columns[g][j]}",
                               "sigma": sigma, "epsilon_em": eps_em})
        params, ema, opt_state, keys = prog.train(params, ema, opt_state, keys, pad, y1, y2, mask2)
    final = jax.tree.map(np.asarray, ema)
    for g, model in enumerate(models):
        model.columns_ = list(columns[g])
        model.sizes_ = list(sizes)
        model.ledger_ = ledgers[g]
        model.rounds_ = history[g]
        model.params_ = jax.tree.map(lambda x: x[g].copy(), final)
        model.n_estimate_ = float(n_hat[g])
        model.rho_ = rho
