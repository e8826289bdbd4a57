"""A graphical model fitted to noisy marginals, estimated by our own numpy junction-tree code.

Estimation follows Private-PGM (McKenna, Sheldon & Miklau 2019, "Graphical-model estimation and
inference for differential privacy", Alg. 1): mirror descent on the log-potentials of a Markov
random field whose cliques are the measured ones, minimising the weighted squared error
``0.5 * sum_i ||mu_i - y_i||^2 / sigma_i^2`` of its clique marginals ``mu_i`` against the noisy
counts ``y_i`` (the same weighting as ``mbi``'s L2 loss). Each step computes the calibrated
marginals by sum-product message passing in log space over the junction tree (dense numpy tables,
logsumexp reductions, no loop over cells), takes a gradient step on the potentials and keeps it
only if the Armijo condition holds (the step halves until it does, so an accepted step never
raises the loss). The first step size is Private-PGM's ``2 / (L * N)`` with ``L`` the Lipschitz
constant of the loss gradient; the total ``N`` is the minimum-variance combination of the
measurements' sums. A warm start carries the previous fit's potentials (and step size) onto the
new, larger clique set.

The junction tree is built with networkx: a chordal measurement graph is used as is, otherwise
it is triangulated by greedy elimination (smallest new clique table first, fewest fill edges on
ties) and the maximal cliques are joined by a maximum spanning tree on separator sizes.

Sampling is our own too: clique by clique along the junction tree from the fitted clique
marginals, seeded and vectorised. ``mbi`` (Private-PGM, JAX) is kept only as a reference: inside
``use_estimator("mbi")`` the old estimator runs instead (tests and the benchmark compare the two);
it is imported lazily, only then.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from core.synthesis.sampling import draw_conditional

Clique = tuple[str, ...]

_ESTIMATOR = ["numpy"]
_GROW = 1.01


@contextlib.contextmanager
def use_estimator(name: str):
    """Run ``estimate`` with ``"numpy"`` (ours, the default) or ``"mbi"`` (the reference) inside the block."""
    if name not in ("numpy", "mbi"):
        raise ValueError(f"Unknown estimator {name!r}: choose 'numpy' or 'mbi'.")
    old = _ESTIMATOR[0]
    _ESTIMATOR[0] = name
    try:
        yield
    finally:
        _ESTIMATOR[0] = old


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


# ---------------------------------------------------------------------------------------------
# junction tree
# ---------------------------------------------------------------------------------------------

def _canonical(domain: Mapping[str, int], cols) -> Clique:
    """Columns in the domain's order (every table axis follows this order)."""
    cols = set(cols)
    return tuple(c for c in domain if c in cols)


def _cells(domain: Mapping[str, int], clique) -> int:
    return int(np.prod([domain[c] for c in clique], dtype=np.int64)) if clique else 1


def _elimination_cliques(domain: Mapping[str, int], graph) -> list[Clique]:
    """Maximal cliques of a triangulation of ``graph``: the graph's own if it is chordal, otherwise
    greedy elimination (smallest table of the eliminated node and its neighbours, fewest fill
    edges on ties)."""
    import networkx as nx

    if nx.is_chordal(graph):
        found = [_canonical(domain, c) for c in nx.chordal_graph_cliques(graph)]
    else:
        g = {v: set(graph[v]) for v in graph}
        found = []
        while g:
            def cost(v):
                nb = g[v]
                fill = sum(1 for a, b in itertools.combinations(nb, 2) if b not in g[a])
                return (_cells(domain, nb | {v}), fill, list(domain).index(v))
            v = min(g, key=cost)
            nb = g.pop(v)
            found.append(_canonical(domain, nb | {v}))
            for a, b in itertools.combinations(nb, 2):
                g[a].add(b)
                g[b].add(a)
            for a in nb:
                g[a].discard(v)
    found = sorted(set(found), key=lambda c: (-len(c), c))
    maximal = [c for i, c in enumerate(found) if not any(set(c) < set(d) for d in found[:i] + found[i + 1:])]
    return sorted(maximal)


@functools.lru_cache(maxsize=4096)
def _junction_tree_cached(domain_items: tuple, cliques: frozenset):
    import networkx as nx

    domain = dict(domain_items)
    graph = nx.Graph()
    graph.add_nodes_from(domain)
    for cl in cliques:
        graph.add_edges_from(itertools.combinations(cl, 2))
    nodes = _elimination_cliques(domain, graph)
    complete = nx.Graph()
    complete.add_nodes_from(nodes)
    for a, b in itertools.combinations(nodes, 2):
        w = len(set(a) & set(b))
        if w:
            complete.add_edge(a, b, weight=w)
    return nx.maximum_spanning_tree(complete)


def junction_tree(domain: Mapping[str, int], cliques: Sequence[Clique]):
    """The junction tree (a networkx forest of column tuples in domain order) covering ``cliques``
    and every column of ``domain`` (cached by clique set; do not mutate the result)."""
    dom = tuple((c, int(v)) for c, v in domain.items())
    unknown = {c for cl in cliques for c in cl} - set(domain)
    if unknown:
        raise ValueError(f"Cliques name columns outside the domain: {sorted(unknown)}.")
    return _junction_tree_cached(dom, frozenset(_canonical(domain, cl) for cl in cliques if cl))


def model_size_mb(domain: Mapping[str, int], cliques: Sequence[Clique]) -> float:
    """Megabytes of the junction tree's clique tables (8 bytes a cell) for these cliques (numpy and
    networkx only, cached by clique set)."""
    tree = junction_tree(domain, cliques)
    return float(sum(_cells(domain, n) for n in tree.nodes)) * 8 / 2 ** 20


# ---------------------------------------------------------------------------------------------
# message passing
# ---------------------------------------------------------------------------------------------

def _axes_shape(domain, node: Clique, sub: Clique) -> tuple[int, ...]:
    """Shape that broadcasts a table over ``sub`` (domain order) against one over ``node``."""
    return tuple(domain[c] if c in sub else 1 for c in node)


@functools.lru_cache(maxsize=65536)
def _drop_axes(node: Clique, sub: Clique) -> tuple[int, ...]:
    """Axes of a table over ``node`` that are summed out to get one over ``sub``."""
    return tuple(i for i, c in enumerate(node) if c not in sub)


def _logsumexp(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log(sum(exp(x))) over ``axes`` (dropped), shifted by the maximum; ``x`` is finite."""
    if not axes:
        return x
    m = x.max(axis=axes, keepdims=True)
    out = np.log(np.exp(x - m).sum(axis=axes, keepdims=True))
    out += m
    return out.reshape([s for i, s in enumerate(x.shape) if i not in axes])


class _Tree:
    """The junction tree's schedule: a root per component, nodes parents-first, and per edge the
    axes to sum out and the separator's broadcast shapes."""

    def __init__(self, domain: Mapping[str, int], tree) -> None:
        import networkx as nx

        self.domain = dict(domain)
        self.tree = tree
        self.nodes: list[Clique] = []
        self.parent: dict[Clique, Clique | None] = {}
        for comp in nx.connected_components(tree):
            root = min(comp)
            self.nodes.append(root)
            self.parent[root] = None
            for u, v in nx.bfs_edges(tree, root, sort_neighbors=sorted):
                self.nodes.append(v)
                self.parent[v] = u
        self.sep: dict[Clique, Clique] = {}
        self.shape_in_parent: dict[Clique, tuple[int, ...]] = {}
        self.shape_in_child: dict[Clique, tuple[int, ...]] = {}
        for v, u in self.parent.items():
            if u is not None:
                self.sep[v] = tuple(c for c in v if c in u)
                self.shape_in_parent[v] = _axes_shape(self.domain, u, self.sep[v])
                self.shape_in_child[v] = _axes_shape(self.domain, v, self.sep[v])

    def marginals(self, theta: dict[Clique, np.ndarray]) -> dict[Clique, np.ndarray]:
        """Probability tables (each sums to 1) of every junction-tree clique: an upward pass of
        log-space messages, then each clique's marginal from its parent's separator marginal."""
        up: dict[Clique, np.ndarray] = {}          # theta plus messages from children
        msg: dict[Clique, np.ndarray] = {}         # log message child -> parent, in separator shape
        for v in self.nodes:
            up[v] = theta[v].copy()
        for v in reversed(self.nodes):
            u = self.parent[v]
            if u is None:
                continue
            sep = self.sep[v]
            msg[v] = _logsumexp(up[v], _drop_axes(v, sep))
            up[u] += msg[v].reshape(self.shape_in_parent[v])
        out: dict[Clique, np.ndarray] = {}
        with np.errstate(divide="ignore"):
            for v in self.nodes:
                u = self.parent[v]
                if u is None:
                    b = up[v]
                    p = np.exp(b - _logsumexp(b, tuple(range(b.ndim))))
                else:
                    sep = self.sep[v]
                    parent_sep = out[u].sum(axis=_drop_axes(u, sep)) if _drop_axes(u, sep) else out[u]
                    shift = np.log(parent_sep) - msg[v]
                    p = np.exp(up[v] + shift.reshape(self.shape_in_child[v]))
                out[v] = p
        return out


# ---------------------------------------------------------------------------------------------
# the fitted model
# ---------------------------------------------------------------------------------------------

def _draw_rows(table: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One child cell per row from rows of ``table`` (parent cell x child cell, counts) picked by
    ``parent``; an empty row draws uniformly."""
    n_child = table.shape[1]
    rows = table.sum(1, keepdims=True)
    cond = np.where(rows > 0, table / np.where(rows > 0, rows, 1.0), 1.0 / n_child)
    return draw_conditional(cond, parent, rng)


class GraphicalModel:
    """Fitted model: clique marginals (counts) of its junction tree and a seeded sampler.

    ``potentials`` (log tables on the maximal measured cliques) and ``step`` are what a warm start
    continues from."""

    def __init__(self, domain: Mapping[str, int], jtree, clique_tables: Mapping[Clique, np.ndarray],
                 total: float, potentials: Mapping[Clique, np.ndarray] | None = None,
                 step: float | None = None, mrf=None) -> None:
        self.domain = {c: int(v) for c, v in domain.items()}
        self._jtree = jtree
        self.clique_tables = {tuple(n): np.asarray(t, float) for n, t in clique_tables.items()}
        self.total = float(total)
        self.potentials = dict(potentials or {})
        self.step = step
        self.loss: float | None = None
        self.iterations = 0
        self._mrf = mrf

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


# ---------------------------------------------------------------------------------------------
# estimation
# ---------------------------------------------------------------------------------------------

def minimum_variance_total(measurements: Sequence[Measurement]) -> float:
    """Inverse-variance weighted mean of the measurements' sums (a table's sum has variance
    sigma^2 * cells), at least 1."""
    if not measurements:
        return 1.0
    sums = np.array([float(np.sum(m.noisy)) for m in measurements])
    var = np.array([float(m.sigma) ** 2 * np.size(m.noisy) for m in measurements])
    w = 1.0 / np.maximum(var, 1e-300)
    return max(1.0, float((sums * w).sum() / w.sum()))


def _check(domain: Mapping[str, int], measurements: Sequence[Measurement]) -> None:
    for m in measurements:
        if len(set(m.clique)) != len(m.clique) or any(c not in domain for c in m.clique):
            raise ValueError(f"Measurement over {m.clique} names a column twice or one outside the domain.")
        if np.size(m.noisy) != _cells(domain, m.clique):
            raise ValueError(f"Measurement over {m.clique} has {np.size(m.noisy)} values; its table has "
                             f"{_cells(domain, m.clique)} cells.")
        if not np.all(np.isfinite(np.asarray(m.noisy, float))):
            raise ValueError(f"Measurement over {m.clique} holds NaN or infinite values.")
        if not (math.isfinite(float(m.sigma)) and float(m.sigma) > 0):
            raise ValueError(f"Measurement over {m.clique} needs a positive finite sigma; got {m.sigma}.")


class _Problem:
    """The L2 loss of the measurements on the maximal measured cliques, and its gradient."""

    def __init__(self, domain: Mapping[str, int], measurements: Sequence[Measurement]) -> None:
        self.domain = dict(domain)
        cl = [_canonical(domain, m.clique) for m in measurements]
        uniq = sorted(set(cl), key=lambda c: (-len(c), c))
        self.maximal = sorted(c for i, c in enumerate(uniq) if not any(set(c) < set(d) for d in uniq[:i]))
        self.tree = _Tree(domain, junction_tree(domain, self.maximal))
        self.host = {r: next(n for n in self.tree.nodes if set(r) <= set(n)) for r in self.maximal}
        self.host_shape = {r: _axes_shape(domain, self.host[r], r) for r in self.maximal}
        # each measurement as (maximal clique, axes to sum out, target in canonical axis order, weight)
        merged: dict[tuple[Clique, Clique], list] = {}   # (maximal clique, clique) -> [sum w*y, sum w, sum w*y^2]
        for m, c in zip(measurements, cl):
            r = next(r for r in self.maximal if set(c) <= set(r))
            y = np.asarray(m.noisy, float).reshape([domain[a] for a in m.clique])
            y = np.transpose(y, [m.clique.index(a) for a in c])
            w = 1.0 / float(m.sigma) ** 2
            acc = merged.setdefault((r, c), [0.0, 0.0, 0.0])
            acc[0] = acc[0] + w * y
            acc[1] += w
            acc[2] += w * float(np.vdot(y, y))
        # repeated measurements of one clique act as one at their precision-weighted mean; the
        # constant keeps the loss value equal to the sum over the separate measurements
        self.terms = []
        self.constant = 0.0
        for (r, c), (wy, w, wyy) in merged.items():
            y = wy / w
            self.constant += 0.5 * (wyy - w * float(np.vdot(y, y)))
            self.terms.append((r, c, y, w, _drop_axes(r, c), _axes_shape(domain, r, c)))
        # Lipschitz constant of the gradient on the maximal cliques (exact for identity queries)
        blocks: dict[Clique, float] = {}
        for r, c, _, w, _, _ in self.terms:
            blocks[r] = blocks.get(r, 0.0) + w * _cells(domain, r) / _cells(domain, c)
        self.lipschitz = max(blocks.values()) if blocks else 1.0

    def clique_marginals(self, theta: dict[Clique, np.ndarray], total: float):
        """Counts on the junction-tree cliques and on the maximal measured cliques."""
        probs = self.tree.marginals(theta)
        tables = {v: p * total for v, p in probs.items()}
        mu = {}
        for r, v in self.host.items():
            drop = _drop_axes(v, r)
            mu[r] = tables[v].sum(axis=drop) if drop else tables[v]
        return tables, mu

    def loss_grad(self, mu: dict[Clique, np.ndarray]):
        loss = self.constant
        grad = {r: np.zeros(t.shape) for r, t in mu.items()}
        for r, c, y, w, drop, shape in self.terms:
            diff = (mu[r].sum(axis=drop) if drop else mu[r]) - y
            loss += 0.5 * w * float(np.vdot(diff, diff))
            grad[r] += (w * diff).reshape(shape)
        return loss, grad

    def theta(self, potentials: dict[Clique, np.ndarray]) -> dict[Clique, np.ndarray]:
        """Junction-tree log-potentials: each maximal clique's table added into its host."""
        th = {v: np.zeros([self.domain[a] for a in v]) for v in self.tree.nodes}
        for r, p in potentials.items():
            th[self.host[r]] += p.reshape(_axes_shape(self.domain, self.host[r], r))
        return th


def _expand(domain, old: Mapping[Clique, np.ndarray], maximal: list[Clique]) -> dict[Clique, np.ndarray]:
    """Old potentials carried onto the new maximal cliques (each old clique into one that holds it)."""
    out = {r: np.zeros([domain[a] for a in r]) for r in maximal}
    for c, p in old.items():
        r = next((r for r in maximal if set(c) <= set(r)), None)
        if r is not None:
            out[r] += np.asarray(p).reshape(_axes_shape(domain, r, c))
    return out


def estimate(domain: Mapping[str, int], measurements: Sequence[Measurement], iters: int = 500,
             warm_start: GraphicalModel | None = None, tol: float | None = None) -> GraphicalModel:
    """Private-PGM mirror descent (module docstring) on the measurements, weighted by 1/sigma^2,
    with the total estimated from them. ``iters`` gradient steps (accepted or halved); with ``tol``
    it stops early once 25 steps in a row lowered the loss by at most ``tol`` relative to it, twice
    in a row. The fitted model's ``loss`` is the final value of the loss."""
    domain = {c: int(v) for c, v in domain.items()}
    if _ESTIMATOR[0] == "mbi":
        return _estimate_mbi(domain, measurements, iters, warm_start)
    _check(domain, measurements)
    iters = int(iters)
    if iters < 0:
        raise ValueError(f"iters must be a non-negative integer; got {iters}.")
    total = minimum_variance_total(measurements)
    prob = _Problem(domain, measurements)
    if not measurements:
        tables = {v: np.full([domain[a] for a in v], total / _cells(domain, v)) for v in prob.tree.nodes}
        return GraphicalModel(domain, prob.tree.tree, tables, total)
    old = warm_start.potentials if warm_start is not None and warm_start.potentials else {}
    pot = _expand(domain, old, prob.maximal)
    theta = prob.theta(pot)
    step = 2.0 / (prob.lipschitz * total)
    if warm_start is not None and warm_start.step is not None:
        step = max(step, min(warm_start.step, 64 * step))
    tables, mu = prob.clique_marginals(theta, total)
    loss, grad = prob.loss_grad(mu)
    prev, stalls, done = loss, 0, 0
    for it in range(iters):
        done = it + 1
        new_theta = dict(theta)
        for r, g in grad.items():
            v = prob.host[r]
            new_theta[v] = new_theta[v] - step * g.reshape(prob.host_shape[r])
        new_tables, new_mu = prob.clique_marginals(new_theta, total)
        new_loss, new_grad = prob.loss_grad(new_mu)
        decrease = 0.0
        for r in mu:
            decrease += float(np.vdot(grad[r], mu[r] - new_mu[r]))
        if loss - new_loss >= 0.5 * step * decrease and np.isfinite(new_loss):
            for r, g in grad.items():
                pot[r] = pot[r] - step * g
            theta, tables, mu, loss, grad = new_theta, new_tables, new_mu, new_loss, new_grad
            step *= _GROW
        else:
            step *= 0.5
        if tol is not None and (it + 1) % 25 == 0:
            stalls = stalls + 1 if prev - loss <= tol * max(abs(loss), 1.0) else 0
            prev = loss
            if stalls >= 2:
                break
    model = GraphicalModel(domain, prob.tree.tree, tables, total, potentials=pot, step=step)
    model.loss = loss
    model.iterations = done
    return model


def _estimate_mbi(domain: Mapping[str, int], measurements: Sequence[Measurement], iters: int,
                  warm_start: GraphicalModel | None) -> GraphicalModel:
    """The reference: ``mbi``'s mirror descent (JAX), its marginals recomputed on its junction tree."""
    mbi = _mbi()
    dom = mbi.Domain(list(domain), [int(v) for v in domain.values()])
    meas = [mbi.LinearMeasurement(np.asarray(m.noisy, float).ravel(), tuple(m.clique), stddev=float(m.sigma))
            for m in measurements]
    total = max(float(mbi.estimation.minimum_variance_unbiased_total(meas)), 1.0)
    start = None if warm_start is None else warm_start._mrf
    mrf = mbi.estimation.MirrorDescent().estimate(dom, meas, known_total=total, iters=int(iters),
                                                  warm_start=start)
    jtree, _ = mbi.junction_tree.make_junction_tree(dom, [tuple(c) for c in mrf.cliques])
    nodes = list(jtree.nodes)
    marg = mbi.marginal_oracles.message_passing_stable(mrf.potentials.expand(nodes), mrf.total)
    tables = {tuple(n): np.asarray(marg.project(tuple(n)).datavector(flatten=False), float) for n in nodes}
    return GraphicalModel(domain, jtree, tables, total, mrf=mrf)
