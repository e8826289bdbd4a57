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
"""
from __future__ import annotations

import math
from typing import Mapping

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

    # ---- the network ------------------------------------------------------------------------
    def _init_params(self, rng: np.random.Generator, out: int) -> dict:
        """He-initialised MLP weights (numpy draws from the fit's generator, then JAX arrays)."""
        _, jnp, _ = _jax()

        def layer(i, o):
            return {"w": jnp.asarray(rng.normal(size=(i, o)) * math.sqrt(2 / i), jnp.float32),
                    "b": jnp.zeros(o, jnp.float32)}
        return {"l1": layer(self.noise_dim, self.hidden), "l2": layer(self.hidden, self.hidden),
                "out": layer(self.hidden, out)}

    def _build(self, sizes: list[int]):
        """Jitted functions: row probabilities (K, d, M), all answers, one training step."""
        jax, jnp, optax = _jax()
        d, M = len(sizes), max(sizes)
        pad = jnp.asarray(np.arange(M)[None, :] >= np.asarray(sizes)[:, None])   # (d, M) padding cells
        noise_dim, batch = self.noise_dim, self.batch

        def probs(params, z):
            h = jax.nn.relu(z @ params["l1"]["w"] + params["l1"]["b"])
            h = jax.nn.relu(h @ params["l2"]["w"] + params["l2"]["b"])
            logits = (h @ params["out"]["w"] + params["out"]["b"]).reshape(z.shape[0], d, M)
            return jax.nn.softmax(jnp.where(pad[None], -1e9, logits), axis=-1)

        def answers(params, z):
            p = probs(params, z)
            return p.mean(0), jnp.einsum("kim,kjn->ijmn", p, p) / p.shape[0]

        def loss(params, z, y1, y2, mask2):
            a1, a2 = answers(params, z)
            return jnp.abs(a1 - y1).sum() + (mask2[:, :, None, None] * jnp.abs(a2 - y2)).sum()

        opt = optax.adam(self.learning_rate)
        decay = self.ema

        @jax.jit
        def train(params, ema, opt_state, key, y1, y2, mask2):
            def step(carry, k):
                params, ema, opt_state = carry
                z = jax.random.normal(k, (batch, noise_dim))
                grads = jax.grad(loss)(params, z, y1, y2, mask2)
                updates, opt_state = opt.update(grads, opt_state, params)
                params = optax.apply_updates(params, updates)
                ema = jax.tree.map(lambda e, p: decay * e + (1 - decay) * p, ema, params)
                return (params, ema, opt_state), None
            (params, ema, opt_state), _ = jax.lax.scan(step, (params, ema, opt_state),
                                                       jax.random.split(key, self.steps))
            return params, ema, opt_state

        return jax.jit(probs), jax.jit(answers), train, opt

    # ---- fit and sample ---------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, domain: Mapping[str, int], rho: float, rng: np.random.Generator,
            noise=None, progress=None) -> "GEM":
        """Spend exactly ``rho`` over ``rounds`` rounds (module docstring); ``progress(round, rounds,
        message)`` may raise ``Cancelled`` to stop."""
        rho = float(rho)
        if not math.isfinite(rho) or rho <= 0:
            raise ValueError(f"The budget rho must be a positive number; got {rho}.")
        if self.rounds < 1 or self.steps < 1 or self.batch < 1:
            raise ValueError("GEM needs at least one round, one training step and one generator row.")
        jax, jnp, _ = _jax()
        noise = noise_source(rng, noise)
        arr = check_codes(df, domain)
        self.columns_ = list(df.columns)
        self.sizes_ = [int(domain[c]) for c in self.columns_]
        d, M = len(self.columns_), max(self.sizes_)
        if d == 0:
            raise ValueError("Choose at least one column to synthesise.")
        self.ledger_ = BudgetLedger()
        spent: list[float] = []
        # exact counts, padded to (d, M) and (d, d, M, M); used only for measurement and selection scores
        one = np.zeros((d, M))
        two = np.zeros((d, d, M, M))
        for i, s in enumerate(self.sizes_):
            one[i, :s] = np.bincount(arr[:, i], minlength=s)
        pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
        for i, j in pairs:
            si, sj = self.sizes_[i], self.sizes_[j]
            two[i, j, :si, :sj] = np.bincount(arr[:, i] * sj + arr[:, j], minlength=si * sj).reshape(si, sj)
        T = self.rounds if pairs else 1
        rho_round = rho / T
        probs, answers, train, opt = self._build(self.sizes_)
        params = self._init_params(rng, d * M)
        ema = jax.tree.map(lambda x: x, params)
        opt_state = opt.init(params)
        key = jax.random.PRNGKey(int(rng.integers(2 ** 31)))
        # round 0: every one-way marginal, released together (L2 sensitivity sqrt(d))
        y1 = np.zeros((d, M))
        sig = []
        for i, s in enumerate(self.sizes_):
            draw, sigma = noise.gaussian(math.sqrt(d), rho_round, s)
            y1[i, :s] = one[i, :s] + draw
            sig.append(sigma)
        self.ledger_.spend("round 1: one-way marginals", rho_round, "rho",
                           measured=f"{d} one-way count tables, sigma {sig[0]:.3g} each")
        spent.append(rho_round)
        # inverse-variance total from the noisy one-way sums (no exact count is kept)
        var = np.array([s * v ** 2 for s, v in zip(self.sizes_, sig)])
        n_hat = max(float((y1.sum(1) / var).sum() / (1 / var).sum()), 1.0)
        y1 = np.maximum(y1, 0.0)
        y1 = y1 / np.maximum(y1.sum(1, keepdims=True), 1e-12)
        y2 = np.zeros((d, d, M, M))
        mask2 = np.zeros((d, d))
        self.rounds_ = []
        key, sub = jax.random.split(key)
        params, ema, opt_state = train(params, ema, opt_state, sub, y1, y2, mask2)
        z_eval = jnp.asarray(rng.normal(size=(self.batch, self.noise_dim)), jnp.float32)
        rho_sel, rho_meas = round_budget(rho_round)
        eps_em = exponential_mechanism_epsilon(rho_sel)
        for t in range(2, T + 1):
            if progress is not None:
                progress(t, T, f"GEM round {t} of {T}; {1 - math.fsum(spent) / rho:.0%} of the budget left")
            if t == T:   # the last round spends exactly what is left
                rho_sel, rho_meas = round_budget(rho - math.fsum(spent))
                eps_em = exponential_mechanism_epsilon(rho_sel)
            _, a2 = answers(ema, z_eval)
            err = np.abs(two - n_hat * np.asarray(a2, float)).sum((2, 3))
            scores = np.array([err[i, j] for i, j in pairs])
            k = noise.choose(scores, eps_em)
            i, j = pairs[k]
            self.ledger_.spend(f"round {t}: selection", rho_sel, "rho",
                               measured=f"exponential mechanism over {len(pairs)} marginals, epsilon {eps_em:.3g}")
            si, sj = self.sizes_[i], self.sizes_[j]
            draw, sigma = noise.gaussian(1.0, rho_meas, (si, sj))
            self.ledger_.spend(f"round {t}: measurement", rho_meas, "rho",
                               measured=f"Gaussian counts of {self.columns_[i]} x {self.columns_[j]}, "
                                        f"sigma {sigma:.3g}")
            spent += [rho_sel, rho_meas]
            noisy = np.maximum(two[i, j, :si, :sj] + draw, 0.0)
            y2[i, j] = 0.0
            y2[i, j, :si, :sj] = noisy / max(noisy.sum(), 1e-12)
            mask2[i, j] += 1.0
            key, sub = jax.random.split(key)
            params, ema, opt_state = train(params, ema, opt_state, sub, y1, y2, mask2)
            self.rounds_.append({"round": t, "marginal": f"{self.columns_[i]} x {self.columns_[j]}",
                                 "sigma": sigma, "epsilon_em": eps_em})
        self.params_ = jax.tree.map(np.asarray, ema)
        self._probs = probs
        self.n_estimate_ = n_hat
        self.rho_ = rho
        return self

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` rows: each row one generator output, every column drawn from its softmax."""
        _, jnp, _ = _jax()
        n = int(n)
        d, M = len(self.columns_), max(self.sizes_)
        z = jnp.asarray(rng.normal(size=(max(n, 1), self.noise_dim)), jnp.float32)
        p = np.asarray(self._probs(self.params_, z), float)[:n]           # (n, d, M)
        cdf = np.cumsum(p, axis=2)
        cdf /= cdf[:, :, -1:]
        u = rng.random((n, d, 1))
        codes = np.minimum((cdf < u).sum(axis=2), np.asarray(self.sizes_) - 1)
        return pd.DataFrame({c: codes[:, j].astype(np.int64) for j, c in enumerate(self.columns_)})
