"""Private synthesizers with one contract: ``fit(df, domain, rho, rng)`` then ``sample(n, rng)``.

``df`` holds non-negative integer codes, ``domain`` maps each column to its public size and
``rho`` is the zero-concentrated DP budget (Bun-Steinke 2016). Noise is calibrated and drawn in
``core.privacy`` through a noise source (seeded simulation, or the secure sampler for a release:
``fit(..., noise=SecureNoise())``). Both synthesizers are vectorised numpy: tables are counted with
np.bincount and rows are drawn with searchsorted.
"""
from __future__ import annotations

import itertools
import math
from typing import Mapping

import numpy as np
import pandas as pd

from core.privacy.accounting import exponential_mechanism_epsilon, gaussian_sigma
from core.synthesis.encoding import check_codes
from core.synthesis.noise import noise_source
from core.synthesis.sampling import draw_codes, draw_conditional
from core.synthesis.counts import as_count_source
from core.synthesis.marginals import one_way_counts, project_to_simplex


def _check_rho(rho: float) -> float:
    rho = float(rho)
    if not math.isfinite(rho) or rho <= 0:
        raise ValueError(f"The budget rho must be a positive number; got {rho}.")
    return rho


class IndependentMarginals:
    """Baseline: noisy one-way marginals (Gaussian, rho split evenly), columns drawn independently."""

    def __init__(self) -> None:
        pass

    def planned_sds(self, d: int, rho: float) -> tuple[float, float]:
        """(one-way, two-way) Gaussian sd on one cell of what ``fit`` measures on ``d`` columns with
        ``rho``: every one-way marginal at once with the whole budget (L2 sensitivity sqrt(d)); no
        two-way marginal (NaN)."""
        return gaussian_sigma(math.sqrt(max(int(d), 1)), float(rho)), math.nan

    def fit(self, df: pd.DataFrame, domain: Mapping[str, int], rho: float,
            rng: np.random.Generator, noise=None) -> "IndependentMarginals":
        """Measure every column's histogram with one Gaussian release of L2 sensitivity sqrt(d)."""
        rho = _check_rho(rho)
        noise = noise_source(rng, noise)
        arr = check_codes(df, domain)
        self.columns_ = list(df.columns)
        self.domain_ = {c: int(domain[c]) for c in self.columns_}
        d = len(self.columns_)
        self.marginals_ = {}
        for j, col in enumerate(self.columns_):
            draw, self.sigma_ = noise.gaussian(math.sqrt(max(d, 1)), rho, self.domain_[col])
            noisy = one_way_counts(arr[:, j], self.domain_[col]) + draw
            proj = project_to_simplex(noisy, max(noisy.sum(), 0.0))
            self.marginals_[col] = proj / proj.sum() if proj.sum() > 0 else np.full(proj.size, 1 / proj.size)
        self.rho_ = rho
        return self

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` rows with each column drawn from its own noisy marginal."""
        return pd.DataFrame({c: draw_codes(self.marginals_[c], int(n), rng) for c in self.columns_})


class MST:
    """Maximum spanning tree synthesizer (McKenna, Miklau & Sheldon 2021), in numpy.

    The budget is split in thirds: (1) all one-way marginals, then rare values (noisy count
    below 3 sigma) merged into one bucket per column; (2) d-1 tree edges picked by the
    exponential mechanism, scoring each pair by the L1 gap between its true two-way table and
    the independent estimate; (3) the chosen two-way marginals. The tree model is estimated by
    least squares (see ``_estimate``) and sampled exactly, parents before children.
    """

    def __init__(self, compress: bool = True) -> None:
        self.compress = compress

    def planned_sds(self, d: int, rho: float) -> tuple[float, float]:
        """(one-way, two-way) Gaussian sd on one cell of what ``fit`` measures on ``d`` columns with
        ``rho``: a third of the budget on the d one-way marginals (L2 sensitivity sqrt(d)) and a third
        on the tree's d - 1 two-way marginals (sqrt(d - 1)); one column spends it all on its histogram."""
        d, rho = int(d), float(rho)
        if d <= 1:
            return gaussian_sigma(1.0, rho), math.nan
        return gaussian_sigma(math.sqrt(d), rho / 3), gaussian_sigma(math.sqrt(d - 1), rho / 3)

    # ---- measurement --------------------------------------------------------------------
    def _compress(self, noisy: list[np.ndarray]) -> None:
        """Merge values whose noisy count is below 3 sigma into one bucket (MST Sec. 4): ``mapping_[j]``
        sends each value of column j to its compressed code."""
        self.kept_, self.rare_, self.one_way_, self.one_way_var_, self.mapping_ = [], [], [], [], []
        for j, y in enumerate(noisy):
            size = y.size
            keep = y >= 3 * self.sigma_one_way_ if self.compress else np.ones(size, bool)
            kept = np.flatnonzero(keep)
            rare = np.flatnonzero(~keep)
            mapping = np.empty(size, np.int64)
            mapping[kept] = np.arange(kept.size)
            values, var = y[kept], np.full(kept.size, self.sigma_one_way_ ** 2)
            if rare.size:
                mapping[rare] = kept.size
                values = np.append(values, y[rare].sum())
                var = np.append(var, rare.size * self.sigma_one_way_ ** 2)
            self.mapping_.append(mapping)
            self.kept_.append(kept)
            self.rare_.append(rare)
            self.one_way_.append(values)
            self.one_way_var_.append(var)
        self.sizes_ = np.array([v.size for v in self.one_way_], dtype=np.int64)

    def _pair(self, source, i: int, j: int) -> np.ndarray:
        """Two-way count table of columns i and j on their compressed codes, added up from the
        table of their original values (integer counts: exact, the same as counting compressed rows)."""
        counts = source.table((self.columns_[i], self.columns_[j]))
        si, sj = int(self.sizes_[i]), int(self.sizes_[j])
        cell = self.mapping_[i][:, None] * sj + self.mapping_[j][None, :]
        return np.bincount(cell.ravel(), weights=counts.ravel(), minlength=si * sj).reshape(si, sj)

    def _select(self, source, rho: float, noise) -> list[tuple[int, int]]:
        """d-1 edges of a spanning tree, each picked by the exponential mechanism (MST Sec. 4)."""
        d = len(self.columns_)
        if d < 2:
            self.epsilon_em_ = 0.0
            return []
        n_hat = max(self._total_from_one_way(), 1.0)
        probs = [project_to_simplex(y, n_hat) / n_hat for y in self.one_way_]
        pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
        scores = np.array([
            np.abs(self._pair(source, i, j) - n_hat * np.outer(probs[i], probs[j])).sum() for i, j in pairs])
        # d-1 exponential-mechanism picks (score sensitivity 1) share rho
        self.epsilon_em_ = exponential_mechanism_epsilon(rho / (d - 1))
        component = np.arange(d)
        chosen: list[tuple[int, int]] = []
        pair_arr = np.array(pairs)
        for _ in range(d - 1):
            open_ = component[pair_arr[:, 0]] != component[pair_arr[:, 1]]
            k = noise.choose(np.where(open_, scores, -np.inf), self.epsilon_em_)
            i, j = pairs[k]
            chosen.append((i, j))
            component[component == component[j]] = component[i]
        return chosen

    def _total_from_one_way(self) -> float:
        """Inverse-variance weighted estimate of the row count from the one-way totals."""
        totals = np.array([y.sum() for y in self.one_way_])
        var = np.array([v.sum() for v in self.one_way_var_])
        return float((totals / var).sum() / (1 / var).sum())

    # ---- estimation ---------------------------------------------------------------------
    @staticmethod
    def _fit_table(table: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Least-squares projection of a noisy table onto the given margins, then non-negativity.

        The closed-form L2 projection onto {row sums = rows, col sums = cols} is applied, negative
        cells are clipped, and iterative proportional fitting restores the margins exactly while
        keeping every cell non-negative.
        """
        l, m = table.shape
        dr, dc = rows - table.sum(1), cols - table.sum(0)
        fitted = table + dr[:, None] / m + dc[None, :] / l - dr.sum() / (l * m)
        total = rows.sum()
        fitted = np.maximum(fitted, 0.0) + 1e-9 * max(total, 1.0) / (l * m)
        for _ in range(100):
            fitted *= np.divide(rows, fitted.sum(1), out=np.zeros(l), where=fitted.sum(1) > 0)[:, None]
            fitted *= np.divide(cols, fitted.sum(0), out=np.zeros(m), where=fitted.sum(0) > 0)[None, :]
            if np.abs(fitted.sum(1) - rows).max() <= 1e-6 * max(total, 1.0):
                break
        return fitted

    def _estimate(self, edge_tables: dict[tuple[int, int], np.ndarray]) -> None:
        """Consistent tree model from the noisy marginals.

        Each column's marginal is the inverse-variance (least-squares) combination of its own
        noisy histogram and the margins of the noisy edge tables touching it; all share one
        total (also a weighted least-squares estimate) and are projected onto the non-negative
        simplex. Each edge table is then projected onto its two column marginals (``_fit_table``),
        so every table in the tree agrees with every other on shared columns.
        """
        d = len(self.one_way_)
        s2 = self.sigma_two_way_ ** 2
        totals = [self.one_way_[j].sum() for j in range(d)]
        tot_var = [self.one_way_var_[j].sum() for j in range(d)]
        for (i, j), t in edge_tables.items():
            totals.append(t.sum())
            tot_var.append(t.size * s2)
        w = 1 / np.array(tot_var)
        self.n_estimate_ = float(max((np.array(totals) * w).sum() / w.sum(), 0.0))
        num = [self.one_way_[j] / self.one_way_var_[j] for j in range(d)]
        den = [1 / self.one_way_var_[j] for j in range(d)]
        for (i, j), t in edge_tables.items():
            num[i] = num[i] + t.sum(1) / (s2 * t.shape[1])
            den[i] = den[i] + 1 / (s2 * t.shape[1])
            num[j] = num[j] + t.sum(0) / (s2 * t.shape[0])
            den[j] = den[j] + 1 / (s2 * t.shape[0])
        total = max(self.n_estimate_, 1e-9)
        self.node_counts_ = []
        for j in range(d):
            est = project_to_simplex(num[j] / den[j], total)
            if est.sum() <= 0:
                est = np.full(est.size, total / est.size)
            self.node_counts_.append(est)
        self.edge_counts_ = {e: self._fit_table(t, self.node_counts_[e[0]], self.node_counts_[e[1]])
                             for e, t in edge_tables.items()}

    def _orient(self, edges: list[tuple[int, int]], d: int) -> None:
        """Breadth-first order from column 0 and each child's conditional table P(child | parent)."""
        adj: dict[int, list[tuple[int, int]]] = {j: [] for j in range(d)}
        for e in edges:
            adj[e[0]].append(e)
            adj[e[1]].append(e)
        self.order_, self.parent_, self.conditional_ = [], {}, {}
        seen = set()
        for root in range(d):
            if root in seen:
                continue
            queue = [root]
            seen.add(root)
            while queue:
                node = queue.pop(0)
                self.order_.append(node)
                for e in adj[node]:
                    child = e[1] if e[0] == node else e[0]
                    if child in seen:
                        continue
                    seen.add(child)
                    table = self.edge_counts_[e] if e[0] == node else self.edge_counts_[e].T
                    rows = table.sum(1, keepdims=True)
                    uniform = np.full(table.shape, 1.0 / table.shape[1])
                    self.conditional_[child] = np.where(rows > 0, table / np.where(rows > 0, rows, 1), uniform)
                    self.parent_[child] = node
                    queue.append(child)

    def fit(self, df: pd.DataFrame, domain: Mapping[str, int], rho: float, rng: np.random.Generator,
            noise=None) -> "MST":
        """Measure, select, measure and estimate with total budget ``rho`` (zCDP). ``df`` is a table of
        codes or a count source (:mod:`core.synthesis.counts`): MST reads only the one-way and two-way
        count tables, counted in one pass."""
        rho = _check_rho(rho)
        noise = noise_source(rng, noise)
        source = as_count_source(df, domain)
        self.columns_ = list(source.columns)
        self.domain_ = dict(source.domain)
        d = len(self.columns_)
        if d == 0:
            raise ValueError("Choose at least one column to synthesise.")
        # with one column there is no tree: the whole budget measures its histogram
        rho_parts = (rho / 3, rho / 3, rho / 3) if d > 1 else (rho, 0.0, 0.0)
        self.budget_split_ = {"one-way marginals": rho_parts[0], "tree selection": rho_parts[1],
                              "two-way marginals": rho_parts[2]}
        source.count([(c,) for c in self.columns_] + list(itertools.combinations(self.columns_, 2)))
        # d histograms released together: L2 sensitivity sqrt(d)
        noisy = []
        for j, c in enumerate(self.columns_):
            draw, self.sigma_one_way_ = noise.gaussian(math.sqrt(d), rho_parts[0], self.domain_[c])
            noisy.append(source.table((c,)) + draw)
        self._compress(noisy)
        edges = self._select(source, rho_parts[1], noise)
        self.sigma_two_way_ = float("inf")
        tables = {}
        for i, j in edges:  # d-1 tables released together: L2 sensitivity sqrt(d-1)
            draw, self.sigma_two_way_ = noise.gaussian(math.sqrt(d - 1), rho_parts[2],
                                                       (self.sizes_[i], self.sizes_[j]))
            tables[(i, j)] = self._pair(source, i, j) + draw
        self._estimate(tables)
        self._orient(edges, d)
        self.edges_ = edges
        self.tree_edges_ = [(self.columns_[i], self.columns_[j]) for i, j in edges]
        self.rho_ = rho
        return self

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` i.i.d. rows from the tree model, then merged values spread uniformly over their members."""
        n = int(n)
        d = len(self.columns_)
        comp = np.zeros((n, d), np.int64)
        for node in self.order_:
            if node in self.parent_:
                comp[:, node] = draw_conditional(self.conditional_[node], comp[:, self.parent_[node]], rng)
            else:
                comp[:, node] = draw_codes(self.node_counts_[node], n, rng)
        out = {}
        for j, col in enumerate(self.columns_):
            kept, rare = self.kept_[j], self.rare_[j]
            values = np.empty(n, np.int64)
            is_rare = comp[:, j] >= kept.size
            values[~is_rare] = kept[comp[~is_rare, j]]
            if rare.size:
                values[is_rare] = rare[rng.integers(0, rare.size, int(is_rare.sum()))]
            out[col] = values
        return pd.DataFrame(out)

    def model_two_way(self, col_a: str, col_b: str) -> np.ndarray:
        """The fitted model's probability table of a tree edge, on the original domain."""
        i, j = self.columns_.index(col_a), self.columns_.index(col_b)
        if (i, j) in self.edge_counts_:
            table = self.edge_counts_[(i, j)]
        elif (j, i) in self.edge_counts_:
            table = self.edge_counts_[(j, i)].T
        else:
            raise ValueError(f"({col_a}, {col_b}) is not an edge of the fitted tree.")
        out = np.zeros((self.domain_[col_a], self.domain_[col_b]))
        ra, rb = self._expand(i), self._expand(j)
        out += ra @ table @ rb.T
        return out / out.sum()

    def _expand(self, j: int) -> np.ndarray:
        """(original size, compressed size) matrix spreading each bucket uniformly over its members."""
        kept, rare = self.kept_[j], self.rare_[j]
        m = np.zeros((self.domain_[self.columns_[j]], self.sizes_[j]))
        m[kept, np.arange(kept.size)] = 1.0
        if rare.size:
            m[rare, kept.size] = 1.0 / rare.size
        return m
