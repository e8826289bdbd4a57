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

A marginal selected more than once keeps every measurement paid for: its noisy tables are merged
into their inverse-variance mean (y = sum y_i / sigma_i^2 / sum 1 / sigma_i^2, variance
1 / sum 1 / sigma_i^2) and its loss term is weighted by that precision over one round's, so k
measurements at one sigma count k times, each towards the better average (the same treatment as
repeated cliques in ``core.synthesis.graphical_model``). Selection repeats often: on the CPS extract
(delta 1e-9, 100 rounds) 69-87 of the 99 selections picked an already measured pair. Mean two-way
TVD, seeds 0 and 1: at epsilon 0.1, 0.067 and 0.068 merged against 0.114 and 0.102 when a repeat
overwrote the earlier table; at epsilon 1, 0.016 and 0.016 against 0.016 and 0.020.

Where this departs from the authors' setup (stratification spec 3.2: three-way workload,
embedding 512, learning rate 1e-4, T = 100) and why:

- Workload: every two-way marginal, not three-way. The Stratified synthesis page scores fidelity
  by two-way total variation distance, and the bundled CPS extract's 10 columns have 45 pairs
  (1,381 cells) against 120 triples (19,708 cells). The generator's two-way answers come from one
  (C x K) (K x C) product per step over its C = 56 real cells; triples would need a (C, C, C) table,
  about C = 56 times the work per step on CPS.
  A three-way option (a ``degree`` setting like AIM's) would need the answers gathered per
  measured triple instead, so it is not offered; AIM offers three-way.
- Network and training: two hidden layers of width 96, noise input 32, one logit per real cell (a
  softmax per column), Adam learning rate 3e-3, 12 steps a round on 2,000 generator rows (the
  authors: width 512, 1e-4). A fit's CPU time is almost all training steps, the generator rows
  through the network and back (the marginal tables, each round's answers and selection, and
  loading the compiled programs share about 5 % of a 50,000-row CPS fit), so the settings trade rows
  per step, steps and width. Rows per step matter most: the L1 loss sees the generator's answers
  through an average over those rows, and with few rows the rare cells' averages are noisy and
  skewed, which more steps do not undo. On CPS at epsilon 1 (100 rounds, mean two-way TVD, CPU
  seconds at a load of 10-25 on 2 cores): the former width 256, 1,000 rows, 40 steps at 1e-3 took
  39-43 s for 0.0160 (10 seeds); 250 rows and 40 steps 12.9 s for 0.0244; 1,000 rows and 10 steps
  11.7 s for 0.0202; width 96, 2,000 rows, 12 steps, noise 64 and the padded (d, M) output 9.5-10.0 s
  for 0.0165 (seeds 0-5), 10 steps instead of 12 9.5 s for 0.0177. The padded output spent a third
  of each step's products on cells no column has (90 logits and a 90 x 90 two-way product on CPS
  against 56 and 56 x 56); one logit per real cell, with the column sums and the per-column largest
  logit spread to the cells by products with a 0/1 (C, d) matrix, is the same model for about 22 %
  less CPU (seeds 0-5: 0.0164). Noise input 32 instead of 64 halves the first layer and the random
  draws: seeds 0-5 0.0158; width 64 as well: 0.0166 (width 64 with noise 64: 0.0171). Tried and
  dropped: an L2 loss (0.0318 at 250 rows), a learning rate decaying over the rounds, fewer steps
  after a marginal already measured (0.0194 against 0.0160), noise input 16 at width 128 (0.0172
  against 0.0160).
- Rounds: 100, as in the paper; in a stratified run with ``scale_rounds`` a stratum runs the rounds
  times its share of the rows, at least ``MIN_STRATUM_ROUNDS`` (``GEM.for_stratum``). With
  ``scale_rounds`` every fit (pooled too) then runs only as many of those rounds as its noisy total
  and budget carry (``fit_rounds``: the rounds' measurements of a cell add up to a noise sd of at
  most 1 / ``MIN_SIGNAL`` of the rows, at least ``MIN_FIT_ROUNDS`` rounds); round 1 spends as planned
  and the fewer later rounds share the rest. The paper's 100 rounds on its 48,842-row data meet the
  rule from epsilon 0.1 up, so fits of that size are unchanged.

Accounting (rho, zCDP) spends exactly the stated total: each of T rounds costs rho/T; as in the
paper each round's epsilon0 is split alpha : 1-alpha between selection (epsilon^2/8) and
measurement (a Gaussian of epsilon (1-alpha) epsilon0, i.e. rho = ((1-alpha) epsilon0)^2 / 2), so
rho/T = epsilon0^2 (alpha^2/8 + (1-alpha)^2/2). The authors' wrapper passed the nominal epsilon
as epsilon0 for every round instead, so its runs spent about T times more (effective epsilon about
3.1 for a nominal 0.1 at delta 1e-9).

Speed: the rows enter once, through the exact one-way and two-way count tables (``exact_marginals``, one
pass over the data); every round and every training step works on those tables and on the generator's
own rows, so a fit's cost does not grow with the data (CPS at epsilon 1, fit and sampling as many rows,
with the former 256-wide network: 42.8 s CPU at 50,000 rows, 50.8 s at 1,000,000, growth exponent 0.06;
with width 96 on the padded output about 10 s and 14.0 s, two-way TVD 0.0128 at 1,000,000; with the
present settings 6.5-6.9 s at 50,000 rows, warm (7.9-8.6 s as the first fit of a fresh process), and
11.7 s at 1,000,000, two-way TVD 0.0119;
``benchmarks/gem_bench.py``). Sampling goes block by block, so its memory does not grow with n either.
The jitted programs depend only on shapes and settings (which cells are real is an argument), so they
are built and compiled once per process and shared by every fit of that shape: every stratum of a
stratified release, every seed of a sweep; they are also kept on disk in the project's cache folder
(``persist_compilation``), so a fresh process loads them instead of compiling. The cost of a round grows
with the generator rows per step (CPS, one round of 40 steps of the former 256-wide network: 0.44 s CPU
at 1,000 rows, 0.13 s at 250, 0.07 s at 62, 0.04 s at 16), so a fit takes at most about as many as its
data has rows (its noisy total), in four sizes (``generator_rows``: batch, batch / 4, batch / 16, batch
/ 64): a stratum of 30 people no longer trains on 1,000 generator rows a step, and 36 strata compile at
most four program sets. Fits whose noisy total reaches ``batch`` are unchanged. A curator-sized file
(3,500 rows, 36 strata over class of worker x sex x income, 28 of them under 100 rows, epsilon 1) fell
from 147 s to 29 s CPU for the stratified fit with these buckets; the rounds cut to the noisy total
(``fit_rounds``), the fourth bucket and the disk cache then took the whole sweep point (stratified and
pooled fit with scoring, seed 0, loaded machine) from 84 s to 36 s CPU, with two-way TVD stratified
0.308 to 0.301 and pooled 0.154 to 0.132 (seed 1: 92 s to 37 s; 0.293 to 0.268 and
0.129 to 0.124). Training G models side by side in
one vectorised call was tried and dropped: on CPU the batched matrix products ran 2-3 times
slower per model than one model at a time.
"""
from __future__ import annotations

import copy
import math
import os
import threading
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.privacy.accounting import exponential_mechanism_epsilon, gaussian_sigma
from core.privacy.ledger import BudgetLedger
from core.synthesis.encoding import check_codes
from core.synthesis.noise import noise_source

SELECT_SHARE = 0.67
MIN_STRATUM_ROUNDS = 10
"""Fewest rounds a stratum runs when rounds scale with its share of the rows."""
SAMPLE_BLOCK = 4096
"""Rows per call when sampling: one compiled program serves every output size."""
ROW_BUCKETS = 4
"""How many generator batch sizes a fit may use: ``batch``, ``batch / 4``, ``batch / 16`` and ``batch / 64``."""
MIN_GENERATOR_ROWS = 16
"""Fewest generator rows per step a bucket may have (unless ``batch`` itself is smaller)."""
MIN_SIGNAL = 6.4
"""Fewest noisy rows per unit of the noise sd that the rounds' measurements of one cell add up to:
a fit whose noisy total or budget is too small for its rounds runs fewer, each less noisy
(``fit_rounds``). The paper's 100 rounds on 48,842 rows (its ADULT data) meet it from epsilon 0.1 up
(delta 1e-9)."""
MIN_FIT_ROUNDS = 3
"""Fewest rounds ``fit_rounds`` leaves a fit (the one-way round and two measured marginals)."""


def row_buckets(batch: int) -> tuple[int, ...]:
    """The generator batch sizes a fit with ``batch`` may use, largest first: ``batch`` divided by
    1, 4, 16 and 64, none below ``MIN_GENERATOR_ROWS`` (or ``batch`` when it is smaller)."""
    batch = int(batch)
    floor = min(batch, MIN_GENERATOR_ROWS)
    return tuple(sorted({max(batch // 4 ** i, floor) for i in range(ROW_BUCKETS)}, reverse=True))


def generator_rows(batch: int, n_estimate: float) -> int:
    """Generator rows per step for data of about ``n_estimate`` rows: the largest bucket of
    ``row_buckets(batch)`` not above the estimate (the smallest bucket when every one is).

    The generator imitates a table of about n rows: a step with more generator rows than that
    averages more of the network's draws than the data has people, and the cost of a fit grows
    with the rows per step, not with the data's. So a small stratum (or a small file) trains on
    fewer rows per step, and the few bucket sizes keep the compiled programs shared. The estimate
    is the fit's own noisy row count (post-processing of round 1), never an exact size.
    """
    buckets = row_buckets(batch)
    n = float(n_estimate) if math.isfinite(float(n_estimate)) else float(batch)
    return next((b for b in buckets if b <= n), buckets[-1])


def fit_rounds(rounds: int, n_estimate: float, rho_rest: float) -> int:
    """Rounds a fit of ``rounds`` runs once round 1 has given its noisy total ``n_estimate``, with
    ``rho_rest`` left for the selection-and-measurement rounds: the most, up to ``rounds``, whose
    measurements of one cell add up to a noise sd of at most n / ``MIN_SIGNAL`` (at least
    ``MIN_FIT_ROUNDS``).

    Rounds 2..T each spend rho_rest / (T - 1), a share c = ``round_budget(1)[1]`` of it measuring with
    sigma = sqrt((T - 1) / (2 c rho_rest)); T - 1 such measurements add up to an sd of
    sqrt(T - 1) sigma = (T - 1) / sqrt(2 c rho_rest), at most n / Q while T - 1 <= n sqrt(2 c rho_rest) / Q.
    More rounds than that measure mostly noise: on a small file or stratum a round's noise sd is a
    large part of all its rows, and a measurement drowned in noise costs as much compute as a useful
    one. Q was set on the curator-sized file (3,500 rows, epsilon 1): the pooled fit runs 67 rounds
    instead of 100 and its largest strata 18 instead of 28 (``benchmarks/synthesis_bench.py``).
    Which rounds run depends only on the noisy total (post-processing of round 1).
    """
    rounds = int(rounds)
    n = float(n_estimate)
    if not math.isfinite(n) or rounds <= MIN_FIT_ROUNDS:
        return rounds
    c = round_budget(1.0)[1]
    most = 1 + math.floor(n * math.sqrt(2 * c * max(float(rho_rest), 0.0)) / MIN_SIGNAL)
    return int(min(rounds, max(MIN_FIT_ROUNDS, most)))


def round_budget(rho_round: float, alpha: float = SELECT_SHARE) -> tuple[float, float]:
    """(selection rho, measurement rho) of one round costing ``rho_round`` with epsilon0 split alpha : 1-alpha."""
    eps0_sq = rho_round / (alpha ** 2 / 8 + (1 - alpha) ** 2 / 2)
    rho_sel = alpha ** 2 * eps0_sq / 8
    return rho_sel, rho_round - rho_sel


_PERSIST = {"dir": None}
PERSIST_MIN_COMPILE_SECONDS = 0.2
"""Programs that compile faster than this are not written to the disk cache."""


def persist_compilation(jax) -> str | None:
    """Keep compiled programs on disk, in ``jax`` under the project's cache folder, so a fresh process
    (a worker, a benchmark, a restarted server) loads them instead of compiling again (about 6 s of
    CPU for GEM's program sets on CPS). Returns the folder, or None when it cannot be private.

    The folder is made private like the result cache (``core.cache.check_cache_dir``): a compiled
    program is machine code that runs when loaded, so nobody else may be able to plant one. JAX
    decides once per process whether to use the disk cache, at its first compilation; a process
    that compiled something with the cache switched off keeps compiling in memory only.
    """
    if _PERSIST["dir"] is not None:
        return _PERSIST["dir"]
    from core.cache import cache_dir, check_cache_dir

    try:
        folder = check_cache_dir(cache_dir()) / "jax"
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.stat()
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            return None
        if info.st_mode & 0o077:
            folder.chmod(info.st_mode & 0o700)
    except (OSError, ValueError):
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", PERSIST_MIN_COMPILE_SECONDS)
    jax.config.update("jax_enable_compilation_cache", True)
    _PERSIST["dir"] = str(folder)
    return _PERSIST["dir"]


def _jax():
    import jax

    jax.config.update("jax_enable_x64", False)
    persist_compilation(jax)
    import jax.numpy as jnp
    import optax

    return jax, jnp, optax


@dataclass(frozen=True)
class Programs:
    """The jitted pieces of GEM for one shape and one set of settings.

    The network's output has one logit per real cell (C = the sum of the column sizes, cells column
    by column: ``Layout``), and ``cells = (segment (C, d), index (d, M), pad (d, M))`` describes them
    (``Layout.device``). ``probs(params, z, cells)``: row probabilities (K, C), a softmax per column;
    ``answers(params, z, cells)``: every two-way answer at once, the (C, C) product of those rows
    averaged over them; ``train(params, ema, opt_state, key, cells, y1, y2, weight2)``: one round of
    ``steps`` Adam steps on the one-way targets (C,) and the two-way targets (C, C) weighted cell by
    cell by ``weight2`` (C, C; zero outside the measured pairs' blocks); ``init_opt(params)``: a fresh
    optimiser state.
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

    Nothing here depends on the data (which cells are real is the ``cells`` argument), so every
    stratum and every round reuses the same compiled code.
    """
    key = (int(d), int(M), int(noise_dim), int(hidden), int(batch), int(steps), float(learning_rate), float(ema))
    with _PROGRAMS_LOCK:
        found = _PROGRAMS.get(key)
        if found is None:
            found = _PROGRAMS[key] = _build_programs(*key)
    return found


def program_shapes() -> list[tuple]:
    """The (d, M, noise_dim, hidden, batch, steps, learning_rate, ema) of every program set built so far
    in this process (each compiled once per input shape)."""
    with _PROGRAMS_LOCK:
        return list(_PROGRAMS)


def _build_programs(d, M, noise_dim, hidden, batch, steps, learning_rate, decay) -> Programs:
    jax, jnp, optax = _jax()

    def probs(params, z, cells):
        segment, index, pad = cells
        h = jax.nn.relu(z @ params["l1"]["w"] + params["l1"]["b"])
        h = jax.nn.relu(h @ params["l2"]["w"] + params["l2"]["b"])
        logits = h @ params["out"]["w"] + params["out"]["b"]                         # (K, C)
        # a softmax per column: the column's largest logit subtracted (a constant for the gradient),
        # the column sums and their spread back to the cells as products with the 0/1 (C, d) matrix
        top = jax.lax.stop_gradient(jnp.where(pad[None], -jnp.inf, logits[:, index]).max(-1))
        e = jnp.exp(logits - top @ segment.T)
        return e / ((e @ segment) @ segment.T)

    def two_way(p):
        # every cell pair's answer from one (C x K) (K x C) product: on CPU one large product ran 1.5
        # times faster than one small product per workload pair
        return p.T @ p / p.shape[0]

    def loss(params, z, cells, y1, y2, weight2):
        p = probs(params, z, cells)
        return jnp.abs(p.mean(0) - y1).sum() + (weight2 * jnp.abs(two_way(p) - y2)).sum()

    opt = optax.adam(learning_rate)

    def train_one(params, ema, opt_state, key, cells, y1, y2, weight2):
        def step(carry, k):
            params, ema, opt_state = carry
            z = jax.random.normal(k, (batch, noise_dim))
            grads = jax.grad(loss)(params, z, cells, y1, y2, weight2)
            updates, opt_state = opt.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            ema = jax.tree.map(lambda e, p: decay * e + (1 - decay) * p, ema, params)
            return (params, ema, opt_state), None
        key, sub = jax.random.split(key)
        (params, ema, opt_state), _ = jax.lax.scan(step, (params, ema, opt_state), jax.random.split(sub, steps))
        return params, ema, opt_state, key

    def answers_one(params, z, cells):
        return two_way(probs(params, z, cells))

    return Programs(probs=jax.jit(probs), answers=jax.jit(answers_one), train=jax.jit(train_one),
                    init_opt=jax.jit(opt.init))


class Layout:
    """Where each column's real cells sit in the network's output: column by column, C = sum of the
    sizes, against the padded (d, M) tables (the exact counts, the measurements) and their pairs
    (P, M, M) in ``pair_index`` order. Host-side numpy; ``device()`` gives the programs' ``cells``."""

    def __init__(self, sizes: Sequence[int]) -> None:
        sizes = np.asarray(sizes, int)
        self.d, self.M, self.C = len(sizes), int(sizes.max()), int(sizes.sum())
        self.pad = padding(sizes)                                   # (d, M)
        self.real = np.flatnonzero(~self.pad.ravel())               # the C real cells of the d * M
        column = np.repeat(np.arange(self.d), sizes)
        self.segment = (column[:, None] == np.arange(self.d)[None]).astype(np.float32)    # (C, d)
        self.sizes = sizes
        self.start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.index = np.minimum(self.start[:, None] + np.arange(self.M)[None], self.C - 1).astype(np.int32)
        self.first, self.second = pair_index(self.d)

    def device(self):
        _, jnp, _ = _jax()
        return jnp.asarray(self.segment), jnp.asarray(self.index), jnp.asarray(self.pad)

    def one_way(self, table: np.ndarray) -> np.ndarray:
        """(d, M) padded one-way table -> its C real cells."""
        return np.asarray(table).reshape(-1)[self.real]

    def block(self, i: int, j: int) -> tuple[slice, slice]:
        """The (C, C) cells of the pair of columns i and j."""
        return (slice(self.start[i], self.start[i] + self.sizes[i]),
                slice(self.start[j], self.start[j] + self.sizes[j]))

    def pairs(self, cells: np.ndarray) -> np.ndarray:
        """(C, C) cell table -> the (P, M, M) padded pair tables (padding cells zero)."""
        dm = self.d * self.M
        full = np.zeros((dm, dm), np.asarray(cells).dtype)
        full[np.ix_(self.real, self.real)] = cells
        return full.reshape(self.d, self.M, self.d, self.M)[self.first, :, self.second, :]

    def padded(self, rows: np.ndarray) -> np.ndarray:
        """(K, C) row probabilities -> (K, d, M), padding cells zero."""
        out = np.zeros((len(rows), self.d * self.M), np.asarray(rows).dtype)
        out[:, self.real] = rows
        return out.reshape(len(rows), self.d, self.M)


def pair_index(d: int) -> tuple[np.ndarray, np.ndarray]:
    """The workload's column pairs (i < j) in a fixed order: (first columns, second columns)."""
    return np.triu_indices(int(d), 1)


class GEM:
    """GEM synthesizer: ``fit(df, domain, rho, rng, noise=None, progress=None)`` then ``sample(n, rng)``.

    Defaults are this project's choices, not the paper's (module docstring): two-way workload, hidden
    width 96, noise input 32, learning rate 3e-3, 12 steps a round on at most 2,000 generator rows,
    100 rounds (scaled by a stratum's share of the rows when ``scale_rounds``). Repeated measurements
    of one marginal are averaged by precision. ``batch`` is the most generator rows a step takes; a fit
    whose noisy row count is smaller takes fewer (``generator_rows``; the fitted ``batch_``).
    """

    def __init__(self, rounds: int = 100, steps: int = 12, batch: int = 2000, hidden: int = 96,
                 noise_dim: int = 32, learning_rate: float = 3e-3, ema: float = 0.9,
                 scale_rounds: bool = False) -> None:
        self.rounds = int(rounds)
        self.scale_rounds = bool(scale_rounds)
        self.fit_to_size = bool(scale_rounds)   # rounds also cut to the fit's noisy total (``fit_rounds``)
        self.steps = int(steps)
        self.batch = int(batch)
        self.hidden = int(hidden)
        self.noise_dim = int(noise_dim)
        self.learning_rate = float(learning_rate)
        self.ema = float(ema)

    def planned_sds(self, d: int, rho: float) -> tuple[float, float]:
        """(one-way, two-way) Gaussian sd on one cell of what ``fit`` measures on ``d`` columns with
        ``rho``: ``rounds`` rounds of rho / rounds, the first on the one-way marginals together (L2
        sensitivity sqrt(d)), each later one a selection and one two-way measurement (``round_budget``).
        Under ``scale_rounds`` a smaller stratum, and a fit whose noisy total is too small for its
        rounds (``fit_rounds``), runs fewer rounds, each less noisy: the two-way sd is then the most a
        fit measures with (the one-way sd is exact). One column: the whole budget on its histogram (two-way NaN)."""
        d, rho = int(d), float(rho)
        if d <= 1:
            return gaussian_sigma(1.0, rho), math.nan
        rounds = max(self.rounds, 1)
        return gaussian_sigma(math.sqrt(d), rho / rounds), gaussian_sigma(1.0, round_budget(rho / rounds)[1])

    def for_stratum(self, share: float) -> "GEM":
        """This GEM for one stratum holding ``share`` of the rows: with ``scale_rounds``, the rounds
        times the share, at least ``MIN_STRATUM_ROUNDS`` (and never more than asked). Each round of a
        small stratum then measures with less noise; the stratum still spends its whole budget."""
        if not self.scale_rounds:
            return self
        share = min(max(float(share), 0.0), 1.0) if math.isfinite(float(share)) else 1.0
        stratum = copy.copy(self)             # every other setting as given
        stratum.rounds = min(self.rounds, max(MIN_STRATUM_ROUNDS, math.ceil(self.rounds * share)))
        stratum.scale_rounds = False          # scaled once; the fit still cuts to its noisy total
        return stratum

    def _check_settings(self) -> None:
        if self.rounds < 1 or self.steps < 1 or self.batch < 1 or self.hidden < 1 or self.noise_dim < 1:
            raise ValueError("GEM needs at least one round, one training step, one generator row, "
                             "one hidden unit and one noise input.")

    def _programs(self, d: int, M: int, batch: int | None = None) -> Programs:
        batch = self.batch if batch is None else int(batch)
        return programs(d, M, self.noise_dim, self.hidden, batch, self.steps, self.learning_rate, self.ema)

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
        rho = float(rho)
        if not math.isfinite(rho) or rho <= 0:
            raise ValueError(f"The budget rho must be a positive number; got {rho}.")
        self._check_settings()
        arr = check_codes(df, domain)
        columns = list(df.columns)
        if not columns:
            raise ValueError("Choose at least one column to synthesise.")
        _fit(self, arr, columns, [int(domain[c]) for c in columns], rho, rng, noise, progress)
        return self

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` rows: each row one generator output, every column drawn from its softmax."""
        _, jnp, _ = _jax()
        n = int(n)
        if n < 0:
            raise ValueError(f"The number of rows must be zero or more; got {n}.")
        d, M = len(self.columns_), max(self.sizes_)
        layout = Layout(self.sizes_)
        probs, cells = self._programs(d, M).probs, layout.device()
        # rows go through in blocks of one fixed size, so any n reuses one compiled program
        z = np.zeros((-(-max(n, 1) // SAMPLE_BLOCK) * SAMPLE_BLOCK, self.noise_dim), np.float32)
        z[:n] = rng.normal(size=(n, self.noise_dim))
        u = rng.random((n, d, 1))
        codes = np.empty((n, d), np.int64)
        top = np.asarray(self.sizes_) - 1
        for s in range(0, n, SAMPLE_BLOCK):
            # one block at a time: memory stays at one block's (rows, d, M) table whatever n is
            p = layout.padded(np.asarray(probs(self.params_, jnp.asarray(z[s:s + SAMPLE_BLOCK]), cells), float)[:n - s])
            cdf = np.cumsum(p, axis=2)
            cdf /= cdf[:, :, -1:]
            codes[s:s + SAMPLE_BLOCK] = np.minimum((cdf < u[s:s + SAMPLE_BLOCK]).sum(axis=2), top)
        return pd.DataFrame({c: codes[:, j] for j, c in enumerate(self.columns_)})


def padding(sizes: Sequence[int]) -> np.ndarray:
    """(d, M) mask of the cells beyond each column's domain (their softmax weight is forced to zero)."""
    return np.arange(max(sizes))[None, :] >= np.asarray(sizes)[:, None]


def exact_marginals(arr: np.ndarray, sizes: Sequence[int], pairs: Sequence[tuple[int, int]]):
    """Exact one-way (d, M) and two-way (P, M, M) counts of the ``pairs`` in order, padded; used only
    to measure and to score."""
    d, M = len(sizes), max(sizes)
    one = np.zeros((d, M))
    two = np.zeros((len(pairs), M, M))
    for i, s in enumerate(sizes):
        one[i, :s] = np.bincount(arr[:, i], minlength=s)
    for k, (i, j) in enumerate(pairs):
        si, sj = sizes[i], sizes[j]
        two[k, :si, :sj] = np.bincount(arr[:, i] * sj + arr[:, j], minlength=si * sj).reshape(si, sj)
    return one, two


class Measurements:
    """Noisy count tables by marginal, repeated measurements of one marginal merged by precision.

    k measurements y_1..y_k of sigma_1..sigma_k act as one: y = sum(y_i / sigma_i^2) / sum(1 / sigma_i^2)
    with sigma^2 = 1 / sum(1 / sigma_i^2), the unbiased combination of least variance.
    """

    def __init__(self) -> None:
        self._sum: dict = {}        # key -> sum(y_i / sigma_i^2)
        self._precision: dict = {}  # key -> sum(1 / sigma_i^2)
        self.count: dict = {}

    def add(self, key, noisy: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
        """Merge one measurement of ``key``; returns the combined counts and their sigma."""
        sigma = float(sigma)
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"A measurement needs a positive finite sigma; got {sigma}.")
        noisy = np.asarray(noisy, float)
        w = 1.0 / sigma ** 2
        if key in self._sum and self._sum[key].shape != noisy.shape:
            raise ValueError(f"Measurements of one marginal must share a shape; got {self._sum[key].shape} "
                             f"and {noisy.shape}.")
        self._sum[key] = self._sum.get(key, 0.0) + w * noisy
        self._precision[key] = self._precision.get(key, 0.0) + w
        self.count[key] = self.count.get(key, 0) + 1
        return self.get(key)

    def get(self, key) -> tuple[np.ndarray, float]:
        w = self._precision[key]
        return self._sum[key] / w, math.sqrt(1.0 / w)

    def combined(self) -> dict:
        return {k: self.get(k) for k in self._sum}


def _fit(model: GEM, arr: np.ndarray, columns: list[str], sizes: list[int], rho: float, rng, noise,
         progress) -> None:
    """Alg. 1 on checked codes; sets the fitted attributes only once every round has run."""
    jax, jnp, _ = _jax()
    d, M = len(sizes), max(sizes)
    noise = noise_source(rng, noise)
    pairs = list(zip(*(ix.tolist() for ix in pair_index(d))))
    one, two = exact_marginals(arr, sizes, pairs)
    T = model.rounds if pairs else 1
    rho_round = rho / T
    layout = Layout(sizes)
    cells = layout.device()
    ledger = BudgetLedger()
    spent: list[float] = []
    # round 0: every one-way marginal, released together (L2 sensitivity sqrt(d))
    y1 = np.zeros((d, M))
    sig = []
    for i, s in enumerate(sizes):
        draw, sigma = noise.gaussian(math.sqrt(d), rho_round, s)
        y1[i, :s] = one[i, :s] + draw
        sig.append(sigma)
    ledger.spend("round 1: one-way marginals", rho_round, "rho",
                 measured=f"{d} one-way count tables, sigma {sig[0]:.3g} each")
    spent.append(rho_round)
    # inverse-variance total from the noisy one-way sums (no exact count is kept)
    var = np.array([s * v ** 2 for s, v in zip(sizes, sig)])
    n_hat = max(float((y1.sum(1) / var).sum() / (1 / var).sum()), 1.0)
    # rounds from that noisy total and the budget left (``fit_rounds``): rounds 2..T share what is
    # left evenly; a fit that keeps all its rounds spends rho / T a round exactly as planned
    T_planned = T
    T = fit_rounds(T, n_hat, rho - rho_round) if pairs and getattr(model, "fit_to_size", False) else T
    if T < T_planned:
        rho_round = (rho - rho_round) / (T - 1)
    # the generator's initial weights are drawn after round 1, so a seeded fit's one-way noise, noisy
    # total and therefore its rounds and spends do not depend on the network's size or training settings
    params = jax.tree.map(jnp.asarray, model._init_params(rng, layout.C))
    key = jax.random.PRNGKey(int(rng.integers(2 ** 31)))
    # generator rows per step from that noisy total, in a few shared sizes (``generator_rows``)
    rows_per_step = generator_rows(model.batch, n_hat)
    prog = model._programs(d, M, rows_per_step)
    y1 = np.maximum(y1, 0.0)
    y1 = layout.one_way(y1 / np.maximum(y1.sum(1, keepdims=True), 1e-12)).astype(np.float32)
    # the measured two-way tables, in fixed (C, C) blocks: an unmeasured pair has weight 0, so
    # every round runs the same compiled step
    y2 = np.zeros((layout.C, layout.C), np.float32)
    weight2 = np.zeros((layout.C, layout.C), np.float32)
    history: list[dict] = []
    ema, opt_state = params, prog.init_opt(params)
    params, ema, opt_state, key = prog.train(params, ema, opt_state, key, cells, y1, y2, weight2)
    z_eval = jnp.asarray(rng.normal(size=(rows_per_step, model.noise_dim)), jnp.float32)
    rho_sel, rho_meas = round_budget(rho_round)
    eps_em = exponential_mechanism_epsilon(rho_sel)
    # a marginal's loss weight is its precision over one round's: 1 when measured once, about k
    # after k measurements
    sigma_ref = gaussian_sigma(1.0, rho_meas)
    merged = Measurements()
    for t in range(2, T + 1):
        if progress is not None:
            progress(t, T, f"GEM round {t} of {T}; {1 - math.fsum(spent) / rho:.0%} of the budget left")
        if t == T:   # the last round spends exactly what is left
            rho_sel, rho_meas = round_budget(rho - math.fsum(spent))
            eps_em = exponential_mechanism_epsilon(rho_sel)
        a2 = layout.pairs(np.asarray(prog.answers(ema, z_eval, cells), float))
        scores = np.abs(two - n_hat * a2).sum((1, 2))
        k = noise.choose(scores, eps_em)
        i, j = pairs[k]
        ledger.spend(f"round {t}: selection", rho_sel, "rho",
                     measured=f"exponential mechanism over {len(pairs)} marginals, epsilon {eps_em:.3g}")
        si, sj = sizes[i], sizes[j]
        draw, sigma = noise.gaussian(1.0, rho_meas, (si, sj))
        before = merged.count.get((i, j), 0)
        ledger.spend(f"round {t}: measurement", rho_meas, "rho",
                     measured=f"Gaussian counts of {columns[i]} x {columns[j]}, sigma {sigma:.3g}"
                     + (f"; averaged with {before} earlier measurement(s) of it" if before else ""))
        spent += [rho_sel, rho_meas]
        # a marginal chosen again keeps what was paid for before: its measurements act as one at
        # their precision-weighted mean, weighted in the loss by that precision (as in AIM's model)
        y, s = merged.add((i, j), two[k, :si, :sj] + draw, sigma)
        noisy = np.maximum(y, 0.0)
        block = layout.block(i, j)
        y2[block] = noisy / max(noisy.sum(), 1e-12)
        weight2[block] = (sigma_ref / s) ** 2
        params, ema, opt_state, key = prog.train(params, ema, opt_state, key, cells, y1, y2, weight2)
        history.append({"round": t, "marginal": f"{columns[i]} x {columns[j]}", "sigma": sigma, "epsilon_em": eps_em,
                        "times_measured": merged.count[(i, j)], "combined_sigma": s})
    model.columns_ = list(columns)
    model.sizes_ = list(sizes)
    model.ledger_ = ledger
    model.rounds_ = history
    model.params_ = jax.tree.map(np.asarray, ema)
    model.n_estimate_ = n_hat
    model.batch_ = rows_per_step
    model.rounds_run_ = T
    model.measurements_ = {(columns[i], columns[j]): (y, s) for (i, j), (y, s) in merged.combined().items()}
    model.rho_ = rho
