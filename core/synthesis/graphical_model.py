"""A graphical model fitted to noisy marginals: the one place that talks to ``mbi`` (Private-PGM).

Estimation is ``mbi``'s mirror descent over the junction tree of the measured cliques (McKenna,
Sheldon & Miklau 2019, Alg. 1). Sampling is our own: the library's sampler draws from numpy's
global generator (not reproducible from a plan's seed) and took about 12 s for 50,000 CPS rows,
while drawing clique by clique along the junction tree from the fitted clique marginals is
seeded, exact and vectorised. ``mbi`` and JAX are imported lazily, so ``import core`` stays fast;
replacing the estimator means replacing this module only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from core.synthesis.sampling import draw_conditional

Clique = tuple[str, ...]


def _mbi():
    """``mbi`` with JAX in float64 (float32 stalls mirror descent on large totals)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)   # many small programs: a disk cache only slows them
    import mbi

    return mbi


@dataclass(frozen=True)
class Measurement:
    """One noisy count table of a clique, flattened in C order, and the standard deviation of its noise."""

    clique: Clique
    noisy: np.ndarray
    sigma: float


def model_size_mb(domain: Mapping[str, int], cliques: Sequence[Clique]) -> float:
    """Megabytes of the junction tree's clique tables (8 bytes a cell) for these cliques."""
    mbi = _mbi()
    dom = mbi.Domain(list(domain), [int(v) for v in domain.values()])
    return float(mbi.junction_tree.hypothetical_model_size(dom, [tuple(c) for c in cliques]))


def _draw_rows(table: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One child cell per row from rows of ``table`` (parent cell x child cell, counts) picked by
    ``parent``; an empty row draws uniformly."""
    n_child = table.shape[1]
    rows = table.sum(1, keepdims=True)
    cond = np.where(rows > 0, table / np.where(rows > 0, rows, 1.0), 1.0 / n_child)
    return draw_conditional(cond, parent, rng)


class GraphicalModel:
    """Fitted model: clique marginals (counts) of its junction tree and a seeded sampler."""

    def __init__(self, domain: Mapping[str, int], mrf, total: float) -> None:
        self.domain = {c: int(v) for c, v in domain.items()}
        self._mrf = mrf
        self.total = float(total)
        mbi = _mbi()
        dom = mbi.Domain(list(self.domain), list(self.domain.values()))
        jtree, _ = mbi.junction_tree.make_junction_tree(dom, [tuple(c) for c in mrf.cliques])
        self._jtree = jtree
        nodes = list(jtree.nodes)
        marg = mbi.marginal_oracles.message_passing_stable(mrf.potentials.expand(nodes), mrf.total)
        self.clique_tables = {tuple(n): np.asarray(marg.project(tuple(n)).datavector(flatten=False), float)
                              for n in nodes}

    def project(self, clique: Clique) -> np.ndarray:
        """The model's count table over ``clique`` (axes in the clique's order), computed in numpy.

        Inside one junction-tree clique it is a sum; otherwise the smallest subtree covering the
        columns is contracted (product of clique marginals over product of separator marginals,
        which is the joint of a calibrated junction tree) with one einsum.
        """
        import networkx as nx

        clique = tuple(clique)
        for node, table in self.clique_tables.items():
            if set(clique) <= set(node):
                return self._reduce(node, table, clique)
        hosts = [next(n for n in self.clique_tables if c in n) for c in clique]
        keep = set(hosts)
        for a in hosts[1:]:
            if nx.has_path(self._jtree, hosts[0], a):
                keep.update(nx.shortest_path(self._jtree, hosts[0], a))
        letters = {c: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26) for i, c in enumerate(self.domain)}
        operands = []
        for node in keep:
            operands += [self.clique_tables[node] / self.total, "".join(letters[c] for c in node)]
        for u, v in self._jtree.subgraph(keep).edges:
            sep = tuple(c for c in u if c in v)
            marg = self._reduce(u, self.clique_tables[u], sep) / self.total
            inv = np.divide(1.0, marg, out=np.zeros_like(marg), where=marg > 0)
            operands += [inv, "".join(letters[c] for c in sep)]
        tables = operands[0::2]
        spec = ",".join(operands[1::2]) + "->" + "".join(letters[c] for c in clique)
        out = np.einsum(spec, *tables, optimize="greedy")
        return np.maximum(out, 0.0) * self.total

    @staticmethod
    def _reduce(node: Clique, table: np.ndarray, clique: Clique) -> np.ndarray:
        drop = tuple(i for i, c in enumerate(node) if c not in clique)
        kept = [c for c in node if c in clique]
        out = table.sum(axis=drop) if drop else table
        return np.transpose(out, [kept.index(c) for c in clique])

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` i.i.d. rows: each junction-tree clique draws its new columns given the separator
        already drawn (breadth first from each component's first clique)."""
        import networkx as nx

        n = int(n)
        out: dict[str, np.ndarray] = {}
        seen: set = set()
        for root in self._jtree.nodes:
            if root in seen:
                continue
            order = [root] + [v for _, v in nx.bfs_edges(self._jtree, root)]
            for node in order:
                seen.add(node)
                self._draw_clique(tuple(node), n, out, rng)
        for col, size in self.domain.items():   # columns in no clique: uniform (never measured)
            if col not in out:
                out[col] = rng.integers(0, size, n)
        return out

    def _draw_clique(self, node: Clique, n: int, out: dict, rng: np.random.Generator) -> None:
        sep = [c for c in node if c in out]
        new = [c for c in node if c not in out]
        if not new:
            return
        table = self.clique_tables[node]
        table = np.transpose(np.maximum(table, 0.0), [node.index(c) for c in sep + new])
        sep_sizes = [self.domain[c] for c in sep]
        new_sizes = [self.domain[c] for c in new]
        table = table.reshape(int(np.prod(sep_sizes)) if sep else 1, int(np.prod(new_sizes)))
        parent = np.ravel_multi_index(tuple(out[c] for c in sep), sep_sizes) if sep else np.zeros(n, np.int64)
        cells = _draw_rows(table, parent, rng)
        for c, codes in zip(new, np.unravel_index(cells, new_sizes)):
            out[c] = codes.astype(np.int64)


def estimate(domain: Mapping[str, int], measurements: Sequence[Measurement], iters: int = 500,
             warm_start: GraphicalModel | None = None) -> GraphicalModel:
    """Private-PGM mirror descent on the measurements (weighted by 1/sigma), total estimated from them."""
    mbi = _mbi()
    dom = mbi.Domain(list(domain), [int(v) for v in domain.values()])
    meas = [mbi.LinearMeasurement(np.asarray(m.noisy, float).ravel(), tuple(m.clique), stddev=float(m.sigma))
            for m in measurements]
    total = max(float(mbi.estimation.minimum_variance_unbiased_total(meas)), 1.0)
    start = None if warm_start is None else warm_start._mrf
    mrf = mbi.estimation.MirrorDescent().estimate(dom, meas, known_total=total, iters=int(iters),
                                                  warm_start=start)
    return GraphicalModel(domain, mrf, total)
