"""AIM: adaptive, workload-aware select-measure-generate under zCDP (McKenna, Mullins, Sheldon &
Miklau 2022, Alg. 1), on our numpy graphical model (``core.synthesis.graphical_model``: Private-PGM
mirror descent on a junction tree, warm-started from the previous round's potentials).

Budget (rho, zCDP): with at most T rounds and a measurement share a = 0.9, every round starts
with a Gaussian measurement costing a*rho/T and an exponential-mechanism pick costing
(1-a)*rho/T (epsilon_em^2 / 8). All one-way marginals are measured first. Each round scores the
candidate marginals by weight * (L1 error of the current model - expected L1 noise
sqrt(2/pi)*sigma*cells), picks one, measures it and re-estimates the model. When the model's
answer moves less than the expected noise the per-round budget is quadrupled (sigma halved,
epsilon doubled); when less than two rounds' worth is left the last round spends exactly the
rest. Candidates that would grow the junction tree beyond ``max_model_mb`` times the spent
fraction are skipped; when none fits, the rest of the budget re-measures the one-way marginals.
Every spend is a line of ``ledger_`` and they add up to ``rho``.

Each round's estimate takes 100 warm-started mirror-descent steps (plain, Armijo), or, once the
model is larger than ``accelerate_mb`` (2 MB), 50 accelerated ones (``accelerate``, the default;
``schedule`` says which). The rounds' fits decide the selections and the annealing, so a fit that
reaches a different loss can take a different path; below the threshold every fit is the one it
was before, and above it the accelerated steps reach about the loss of twice as many plain ones.
On CPS rows resampled to 200,000 and 1,000,000 (AIM seeds 0-4, epsilon 1) the mean 2-way TVD
went from 0.00386 to 0.00375 and from 0.00184 to 0.00172, and the mean CPU seconds of fit +
sample from 9.7 to 7.0 and from 49.2 to 39.9 (on two seeds at 1,000,000 the cheaper rounds let
AIM grow a larger model, 45 and 54 MB instead of 27 and 37, at about the same CPU); at 50,000
and 100,000 the models stay below 2 MB and nothing changed. Accelerating every round (no
threshold) cost 3% in TVD at 50,000, where a step is cheap anyway; 50 or 30 plain steps per
round made AIM anneal sooner and stop at smaller models (TVD 0.00408 and 0.00484 at 200,000).
The budget's rules do not depend on the schedule. The final fit, after the last spend, takes 150
accelerated steps (without ``accelerate`` 300 plain steps, as before): on CPS rows resampled to
50,000, 200,000 and 1,000,000 that gave a lower loss and a lower 2-way TVD (0.01092, 0.00363 and
0.00166 against 0.01101, 0.00368 and 0.00167) at half the steps; at 100,000 the TVD was higher
(0.00581 against 0.00565), as it was for every accelerated final fit of 100-300 steps there.
With ``within_noise`` set (e.g. 1.0) a fit stops sooner once every measured table is fitted to within its
noise; it is off by default because, on CPS rows resampled to 50,000-200,000, the tables rarely all
get there within 100 steps (2 of 31 fits ended early at 50,000, none at 100,000), so it saves
little and moved the 2-way TVD by +0.00005 at 50,000. Each estimate's model size, steps, kind of
step and CPU seconds are recorded in ``estimates_``. When the step counts were chosen, on the CPS extract
(50,000 x 10, delta 1e-9), 100 per round gave a mean 2-way TVD of 0.0097 in 1.7 s at epsilon 1 (0.0104
in 4.3 s with 300 per round) and 0.0057 in 41 s at epsilon 5 (the same TVD in 646 s with 300).
"""
from __future__ import annotations

import itertools
import math
import time
from typing import Mapping

import numpy as np
import pandas as pd

from core.privacy.accounting import exponential_mechanism_epsilon, gaussian_sigma
from core.privacy.ledger import BudgetLedger
from core.synthesis.counts import as_count_source
from core.synthesis.graphical_model import Measurement, estimate, model_size_mb, model_size_with
from core.synthesis.noise import noise_source

MEASURE_SHARE = 0.9
ACCELERATE_MB = 2.0   # rounds whose model is larger take accelerated steps, half as many: see the module docstring
WITHIN_NOISE = None   # the noise-level stop is off by default: see the module docstring


def planned_rounds(max_rounds: int | None, n_columns: int) -> int:
    """AIM's planned number of rounds T: ``max_rounds`` when set (None or 0: unset), else 16 per column
    (McKenna et al. 2022, Alg. 1); at least one."""
    return max(int(max_rounds) if max_rounds else 16 * int(n_columns), 1)


def workload_cliques(columns, domain: Mapping[str, int], degree: int, max_cells: int) -> list[tuple[str, ...]]:
    """All ``degree``-way column sets whose table has at most ``max_cells`` cells (public: schema only)."""
    return [cl for cl in itertools.combinations(columns, degree)
            if int(np.prod([domain[c] for c in cl])) <= max_cells]


def candidate_weights(workload: list[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    """Each workload set and its 2-way subsets, weighted by its total overlap with the workload
    (AIM Sec. 4: a marginal informs every workload query it shares columns with)."""
    cands = set(workload)
    for cl in workload:
        if len(cl) > 2:
            cands.update(itertools.combinations(cl, 2))
    return {cl: float(sum(len(set(cl) & set(w)) for w in workload)) for cl in sorted(cands)}


class AIM:
    """AIM synthesizer: ``fit(df, domain, rho, rng, noise=None, progress=None)`` then ``sample(n, rng)``."""

    def __init__(self, degree: int = 2, max_cells: int = 10_000, max_model_mb: float = 80.0,
                 max_rounds: int | None = None, iters: int = 100,
                 within_noise: float | None = WITHIN_NOISE, accelerate: bool = True,
                 accelerate_mb: float = ACCELERATE_MB) -> None:
        self.degree = int(degree)
        self.max_cells = int(max_cells)
        self.max_model_mb = float(max_model_mb)
        self.max_rounds = max_rounds
        self.iters = int(iters)
        self.within_noise = within_noise
        self.accelerate = bool(accelerate)
        self.accelerate_mb = float(accelerate_mb)

    def schedule(self, model_mb: float, final: bool = False) -> tuple[int, bool]:
        """(at most how many steps, accelerated or not) of a fit on a model of ``model_mb`` megabytes:
        a round's fit takes ``iters`` plain steps, or, with ``accelerate`` and a model larger than
        ``accelerate_mb``, half as many accelerated ones; the final fit takes 1.5 ``iters`` accelerated
        steps (3 ``iters`` plain ones without ``accelerate``). See the module docstring."""
        if final:
            return (3 * self.iters // 2, True) if self.accelerate else (3 * self.iters, False)
        if self.accelerate and model_mb > self.accelerate_mb:
            return self.iters // 2, True
        return self.iters, False

    def _estimate(self, measurements, warm_start, t: int, final: bool = False):
        """Re-fit the model (the steps of ``schedule``, stopping once the fit is within the noise) and
        record the estimate's cost: round, model size, steps, CPU seconds, accelerated or not."""
        t0 = time.process_time()
        mb = model_size_mb(self.domain_, [m.clique for m in measurements])
        iters, accelerate = self.schedule(mb, final)
        model = estimate(self.domain_, measurements, iters, warm_start=warm_start, within_noise=self.within_noise,
                         accelerate=accelerate)
        self.estimates_.append({"round": t, "model_mb": mb, "steps": model.iterations, "accelerated": accelerate,
                                "cpu_s": time.process_time() - t0})
        return model

    def planned_sds(self, d: int, rho: float) -> tuple[float, float]:
        """(one-way, two-way) Gaussian sd on one cell of what ``fit`` measures on ``d`` columns with
        ``rho``: T planned rounds (``max_rounds``, else 16 d), each measuring with MEASURE_SHARE rho / T;
        the one-way marginals take d rounds' worth, at most half of rho, together (L2 sensitivity
        sqrt(d)). One column: no workload, the whole budget on its histogram (two-way NaN)."""
        d, rho = int(d), float(rho)
        if d <= 1:
            return gaussian_sigma(1.0, rho), math.nan
        rounds = planned_rounds(self.max_rounds, d)
        rho_m = MEASURE_SHARE * rho / rounds
        return gaussian_sigma(math.sqrt(d), min(d * rho_m, rho / 2)), gaussian_sigma(1.0, rho_m)

    def _measure(self, source, clique, rho_m, noise, label: str) -> Measurement:
        sizes = [self.domain_[c] for c in clique]
        draw, sigma = noise.gaussian(1.0, rho_m, int(np.prod(sizes)))
        self._spend(label, rho_m, f"Gaussian counts of {' x '.join(clique)}, sigma {sigma:.3g}")
        return Measurement(tuple(clique), source.table(tuple(clique)).ravel() + draw, sigma)

    def _one_way(self, source, rho_one: float, noise, label: str) -> list[Measurement]:
        """Every one-way count table, released together at ``rho_one`` (L2 sensitivity sqrt(d))."""
        d = len(self.columns_)
        out = []
        for c in self.columns_:
            draw, sigma = noise.gaussian(math.sqrt(d), rho_one, self.domain_[c])
            out.append(Measurement((c,), source.table((c,)).ravel() + draw, sigma))
        self._spend(label, rho_one, f"{d} one-way count tables, sigma {sigma:.3g} each")
        return out

    def _spend(self, label: str, amount: float, measured: str) -> None:
        self.ledger_.spend(label, amount, "rho", measured=measured)
        self.spent_.append(amount)

    def fit(self, df: pd.DataFrame, domain: Mapping[str, int], rho: float, rng: np.random.Generator,
            noise=None, progress=None) -> "AIM":
        """Spend exactly ``rho``: one-way marginals, then select/measure/re-estimate rounds (module
        docstring). ``progress(round, planned rounds, message)`` may raise ``Cancelled`` to stop.
        ``df`` is a table of codes or a count source (:mod:`core.synthesis.counts`): AIM reads its
        data only through the count tables of the one-way marginals and the candidates, counted in
        one pass."""
        rho = float(rho)
        if not math.isfinite(rho) or rho <= 0:
            raise ValueError(f"The budget rho must be a positive number; got {rho}.")
        if self.degree not in (2, 3):
            raise ValueError("AIM's workload is all 2-way or all 3-way marginals: degree must be 2 or 3.")
        noise = noise_source(rng, noise)
        source = as_count_source(df, domain)
        self.columns_ = list(source.columns)
        self.domain_ = dict(source.domain)
        d = len(self.columns_)
        if d == 0:
            raise ValueError("Choose at least one column to synthesise.")
        self.ledger_ = BudgetLedger()
        self.spent_: list[float] = []
        self.rounds_: list[dict] = []
        self.estimates_: list[dict] = []
        workload = workload_cliques(self.columns_, self.domain_, min(self.degree, d), self.max_cells) if d > 1 else []
        weights = candidate_weights(workload)
        cands = list(weights)
        source.count([(c,) for c in self.columns_] + cands)
        true_tables = {cl: source.table(cl) for cl in cands}
        T = planned_rounds(self.max_rounds, d)
        rho_meas = MEASURE_SHARE * rho / T
        rho_sel = (1 - MEASURE_SHARE) * rho / T
        # one-way marginals first, released together: L2 sensitivity sqrt(d); at most half the budget
        rho_one = rho if not cands else min(d * rho_meas, rho / 2)
        measurements = self._one_way(source, rho_one, noise, "one-way marginals")
        model = self._estimate(measurements, None, 0)
        t = 0
        while cands and rho - math.fsum(self.spent_) > 0:
            t += 1
            left = rho - math.fsum(self.spent_)
            last = left < 2 * (rho_meas + rho_sel)
            if last:
                rho_meas = MEASURE_SHARE * left
                rho_sel = left - rho_meas
            if progress is not None:
                progress(t, T, f"AIM round {t} (at most about {T}); {left / rho:.0%} of the budget left")
            sigma = gaussian_sigma(1.0, rho_meas)   # what noise.gaussian(1, rho_meas) will use
            spent_frac = (rho - left + rho_meas + rho_sel) / rho
            measured = [m.clique for m in measurements]
            open_ = [cl for cl in cands
                     if model_size_with(self.domain_, measured, cl) <= self.max_model_mb * spent_frac]
            if not open_:
                open_ = [cl for cl in cands if any(set(cl) <= set(m) for m in measured)]
            if not open_:
                # every candidate would break the model-size cap: the rest of the budget measures the
                # one-way marginals again (they never grow the model), so nothing is left unspent
                measurements += self._one_way(source, left, noise, "rest of the budget: one-way marginals")
                model = self._estimate(measurements, model, t)
                self.rounds_.append({"round": t, "marginal": "one-way marginals (model-size cap reached)",
                                     "sigma": measurements[-1].sigma, "epsilon_em": float("nan"), "annealed": False})
                break
            answers = model.projections(open_)
            errors = np.array([np.abs(true_tables[cl] - answers[cl]).sum() for cl in open_])
            cells = np.array([true_tables[cl].size for cl in open_], float)
            w = np.array([weights[cl] for cl in open_])
            sens = float(w.max())
            scores = w * (errors - math.sqrt(2 / math.pi) * sigma * cells) / sens
            eps_em = exponential_mechanism_epsilon(rho_sel)
            pick = open_[noise.choose(scores, eps_em)]
            self._spend(f"round {t}: selection", rho_sel, f"exponential mechanism over {len(open_)} marginals, "
                                                         f"epsilon {eps_em:.3g}")
            before = model.project(pick)
            measurements.append(self._measure(source, pick, rho_meas, noise,
                                              f"round {t}: measurement"))
            model = self._estimate(measurements, model, t)
            moved = float(np.abs(model.project(pick) - before).sum())
            annealed = moved <= math.sqrt(2 / math.pi) * sigma * before.size and not last
            self.rounds_.append({"round": t, "marginal": " x ".join(pick), "sigma": sigma, "epsilon_em": eps_em,
                                 "annealed": annealed})
            if annealed:
                rho_meas, rho_sel = 4 * rho_meas, 4 * rho_sel
            if last:
                break
        self.model_ = self._estimate(measurements, model, t + 1, final=True) if t else model
        self.measured_ = [m.clique for m in measurements]
        self.rho_ = rho
        return self

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` i.i.d. rows from the fitted model (seeded junction-tree sampler)."""
        rows = self.model_.sample(int(n), rng)
        return pd.DataFrame({c: rows[c] for c in self.columns_})

    def model_table(self, clique) -> np.ndarray:
        """The fitted model's probability table over ``clique``."""
        t = self.model_.project(tuple(clique))
        return t / t.sum() if t.sum() > 0 else np.full(t.shape, 1.0 / t.size)
