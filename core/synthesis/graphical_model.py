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

The junction tree: the graph joining the columns of each measured clique is triangulated by
greedy elimination (a column needing no fill edge first, so a chordal graph keeps its own
cliques; then the smallest new table; then the fewest fill edges), and its maximal cliques are
joined by a maximum spanning tree on separator sizes (held as a networkx graph). Both are cached
by clique set, so ``model_size_mb``, asked about every candidate every round, costs a dictionary
lookup after the first time and never touches JAX.

Why not ``mbi`` itself: measured on the CPS extract (50,000 x 10, epsilon 1, delta 1e-9), an AIM fit
on ``mbi`` 2.0 took 53 s on a quiet machine, 39 s of it compiling XLA programs (361 of them: every new
clique set is a new jitted program) and 14 s recomputing marginals eagerly; under load it took 86-250 s,
and a stratified fit paid the compilation once per stratum. The same fit on this module takes about 2 s
with the same 2-way TVD (0.0150 against mbi's 0.0149), and a 5-column problem with a triangulated cycle
agrees with mbi to about 1e-9 (``benchmarks/aim_estimator_bench.py`` prints the current ratio).

Cost: a step is one upward pass (one exponential per cell; the downward pass rescales the tables
the upward pass exponentiated; the largest table of each tree is its root, which a step passes
over most often) plus the residual and gradient sums; the schedule of each clique set is built
once; consistent measurements on a junction tree are fitted in closed form; and an optional
noise-level stop (``within_noise``) ends a fit once every measured table is fitted to within its
noise. A large junction-tree table holding many measured cliques is summed down to all of them
along one tree of partial sums (``_reduction_plan``), and the gradient runs the same tree
backwards, so a step passes over it a few times, not once per clique: on 1,000,000 CPS rows (a
17 MB model of 41 measured cliques) that took a step from 410 ms to 90 ms.

What a step costs per cell is memory traffic, not arithmetic, so a pass over a large table goes
block by block (``_sweep``, blocks of ``BLOCK_CELLS`` cells that stay in the cache) and does
everything that table needs while a block is there: its exponential and every sum its children,
its parent and its measurements need (the upward pass shifts each table by a scalar kept from the
last step instead of a per-separator maximum, which took two passes of its own); the gradient's
broadcasts into a host are added in one pass; a large root's table is left unscaled during a fit
(its factor scales the sums the loss reads); and sums run as matrix products with vectors of ones
(``_sum``). On the 45 MB model AIM reaches at 1,000,000 rows that took a step from 146 ms to
81 ms, at the same loss to 1e-10.

``accelerate=True`` adds Nesterov momentum to the same steps on the log-potentials (one gradient
a step, evaluated at the point it keeps), restarted whenever a step would raise the loss
(adaptive restart, O'Donoghue & Candes 2015), when the step size also halves; the loss never
rises. On AIM's fits at 1,000,000 rows it reached the loss of 100 plain steps in 35-50.

Sampling is our own too: clique by clique along the junction tree from the fitted clique
marginals, seeded and vectorised. ``mbi`` (Private-PGM, JAX) is kept only as a reference: inside
``use_estimator("mbi")`` the old estimator runs instead (tests and the benchmark compare the two);
it is imported lazily, only then.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from core.synthesis.sampling import draw_conditional

Clique = tuple[str, ...]

_ESTIMATOR = ["numpy"]
_GROW = 1.01                 # Armijo: an accepted step grows the next by 1%, a refused one halves it
SPARSE_HOST_CELLS = 1 << 12  # measurements of larger junction-tree tables are summed densely (see _Problem)

# Counts of work done since import (tests read them; nothing depends on them): triangulations and
# junction-tree schedules built (once per distinct clique set), estimates finished in closed form,
# mirror-descent steps taken, momentum restarts, and passes over large host tables in residuals.
WORK: collections.Counter = collections.Counter()


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
    return math.prod(domain[c] for c in clique)


@functools.lru_cache(maxsize=8192)
def _triangulation(domain_items: tuple, cliques: frozenset) -> tuple[Clique, ...]:
    """Maximal cliques of a triangulation of the graph joining the columns of each clique, by
    greedy elimination: a column whose neighbours are already all joined (no fill) first, then
    the smallest table of the column and its neighbours, then the fewest fill edges. On a chordal
    graph this adds no edge; plain Python sets (at most a few dozen columns)."""
    WORK["triangulations"] += 1
    domain = dict(domain_items)
    order = {c: i for i, c in enumerate(domain)}
    g: dict[str, set] = {c: set() for c in domain}
    for cl in cliques:
        for x, y in itertools.combinations(cl, 2):
            g[x].add(y)
            g[y].add(x)
    found: list[Clique] = []
    while g:
        def cost(v):
            nb = g[v]
            fill = sum(1 for x, y in itertools.combinations(nb, 2) if y not in g[x])
            return (fill > 0, _cells(domain, nb | {v}), fill, order[v])
        v = min(g, key=cost)
        nb = g.pop(v)
        found.append(_canonical(domain, nb | {v}))
        for x, y in itertools.combinations(nb, 2):
            g[x].add(y)
            g[y].add(x)
        for x in nb:
            g[x].discard(v)
    found = sorted(set(found), key=lambda c: (-len(c), c))
    maximal = [c for i, c in enumerate(found) if not any(set(c) < set(d) for d in found[:i])]
    return tuple(sorted(maximal))


@functools.lru_cache(maxsize=4096)
def _junction_tree_cached(domain_items: tuple, cliques: frozenset):
    """Maximum spanning forest of the triangulation's cliques on separator sizes (Kruskal)."""
    import networkx as nx

    nodes = _triangulation(domain_items, cliques)
    tree = nx.Graph()
    tree.add_nodes_from(nodes)
    pairs = sorted(((len(set(a) & set(b)), a, b) for a, b in itertools.combinations(nodes, 2)),
                   key=lambda t: -t[0])
    root = {n: n for n in nodes}

    def find(n):
        while root[n] != n:
            root[n] = root[root[n]]
            n = root[n]
        return n

    for w, a, b in pairs:
        if w == 0:
            break
        ra, rb = find(a), find(b)
        if ra != rb:
            root[ra] = rb
            tree.add_edge(a, b, weight=w)
    return tree


def _key(domain: Mapping[str, int], cliques: Sequence[Clique]) -> tuple[tuple, frozenset]:
    unknown = {c for cl in cliques for c in cl} - set(domain)
    if unknown:
        raise ValueError(f"Cliques name columns outside the domain: {sorted(unknown)}.")
    return tuple((c, int(v)) for c, v in domain.items()), frozenset(_canonical(domain, cl) for cl in cliques if cl)


def junction_tree(domain: Mapping[str, int], cliques: Sequence[Clique]):
    """The junction tree (a networkx forest of column tuples in domain order) covering ``cliques``
    and every column of ``domain`` (cached by clique set; do not mutate the result)."""
    return _junction_tree_cached(*_key(domain, cliques))


def model_size_mb(domain: Mapping[str, int], cliques: Sequence[Clique]) -> float:
    """Megabytes of the junction tree's clique tables (8 bytes a cell) for these cliques (numpy and
    networkx only, cached by clique set)."""
    nodes = _triangulation(*_key(domain, cliques))
    return float(sum(_cells(domain, n) for n in nodes)) * 8 / 2 ** 20


def model_size_with(domain: Mapping[str, int], cliques: Sequence[Clique], extra: Clique) -> float:
    """``model_size_mb(domain, cliques + [extra])``, without a new triangulation when ``extra``
    already lies inside one of the junction-tree cliques of ``cliques`` (the tree is then unchanged:
    a triangulation containing every clique of a set is a triangulation of the set)."""
    key = _key(domain, cliques)
    nodes = _triangulation(*key)
    if any(set(extra) <= set(n) for n in nodes):
        return float(sum(_cells(domain, n) for n in nodes)) * 8 / 2 ** 20
    return model_size_mb(domain, list(cliques) + [tuple(extra)])


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


_PRODUCT_MIN = 4096     # smaller tables are summed by numpy's own reduction (less overhead)


def _sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``x`` summed over ``axes``, length-1 axes kept, by products with vectors of ones: each run of
    adjacent summed axes is one axis of a C-ordered reshape (rows, run, columns), summed by one
    matrix product (BLAS), which on blocks like (4, 5, 2, 3, 5, 9, 8) is several times faster than
    numpy's reduction over a short axis or a sum of its slices. The same sum up to the order of
    the floating-point additions. The products to take are worked out once per shape and axes
    (``_sum_plan``): a step sums thousands of blocks of a few shapes."""
    if x.size < _PRODUCT_MIN or not axes:
        return x.sum(axis=tuple(axes), keepdims=True) if axes else x
    products, shape = _sum_plan(x.shape, tuple(axes))
    y = x
    for rows, n, cols in products:
        if cols == 1:
            y = y.reshape(rows, n) @ _ones(n)
        elif rows == 1:
            y = _ones(n) @ y.reshape(n, cols)
        else:
            y = np.matmul(_ones(n), y.reshape(rows, n, cols))
    return y.reshape(shape)


@functools.lru_cache(maxsize=65536)
def _sum_plan(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[tuple, tuple[int, ...]]:
    """The matrix products of ``_sum`` for a table of ``shape`` summed over ``axes``: (rows, run,
    columns) of each run of adjacent summed axes, the last run first, and the result's shape."""
    summed = set(axes)
    runs: list[list] = []            # [cells, summed] of each run of adjacent axes
    for a, n in enumerate(shape):
        if runs and runs[-1][1] == (a in summed):
            runs[-1][0] *= n
        else:
            runs.append([n, a in summed])
    dims = [n for n, _ in runs]
    products = []
    for i in range(len(runs) - 1, -1, -1):
        n, is_summed = runs[i]
        if is_summed:
            products.append((math.prod(dims[:i]), n, math.prod(dims[i + 1:])))
            dims[i] = 1
    return tuple(products), tuple(1 if a in summed else n for a, n in enumerate(shape))


@functools.lru_cache(maxsize=1024)
def _ones(n: int) -> np.ndarray:
    """A read-only vector of ``n`` ones (shared by every ``_sum``)."""
    out = np.ones(n)
    out.flags.writeable = False
    return out


def _reduction_plan(shape: tuple[int, ...], targets: Sequence[frozenset]) -> list[tuple[int, tuple, list]]:
    """How to sum one large table down to many smaller ones with few passes over it: a tree of
    partial sums, parents first, each entry ``(parent, axes, targets)``: the table of entry
    ``parent`` (-1: the table itself) summed over ``axes`` (axis numbers of the large table, kept as
    length-1 axes), and the indices of the ``targets`` (sets of axis numbers) equal to its axes.

    Greedy, in the spirit of data-cube aggregation (Gray et al. 1997, the smallest parent first): a
    table's remaining targets are split by the axis absent from most of them; those share one child,
    the union of their axes, built by one pass over the parent and split again inside it. Pairs of
    9 columns need three passes over the large table instead of one per pair, and the gradient runs
    the same tree backwards (children broadcast into their parent)."""
    out: list[tuple[int, tuple, list]] = []

    def cells(axes) -> int:
        return math.prod(shape[a] for a in axes)

    def build(axes: frozenset, parent: int, drop: tuple, wanted: list[int]) -> None:
        here = len(out)
        out.append((parent, drop, [i for i in wanted if targets[i] == axes]))
        rest = [i for i in wanted if targets[i] != axes]
        while rest:
            best = None
            for a in sorted(axes):
                cover = [i for i in rest if a not in targets[i]]
                if cover:
                    union = frozenset().union(*(targets[i] for i in cover))
                    key = (-len(cover), cells(union), a)
                    if best is None or key < best[0]:
                        best = (key, union, cover)
            _, union, cover = best
            build(union, here, tuple(sorted(axes - union)), cover)
            rest = [i for i in rest if i not in cover]

    build(frozenset(range(len(shape))), -1, (), list(range(len(targets))))
    return out


def _partial_sums(table: np.ndarray, plan: Sequence[tuple[int, tuple, list]]):
    """The tables of a ``_reduction_plan`` over ``table``, parents first: ``(parent, the entry's
    table, the entry's targets)`` for each entry. The entries summed from the table itself are
    summed together, in one pass over it (``_sweep``)."""
    level = [k for k, (parent, _, _) in enumerate(plan) if parent == 0]
    first = dict(zip(level, _sweep(table.shape, [plan[k][1] for k in level], table.__getitem__)))
    WORK["host_passes"] += bool(level)
    tables: list[np.ndarray] = []
    for k, (parent, drop, at) in enumerate(plan):
        tables.append(table if parent < 0 else first[k] if parent == 0 else _sum(tables[parent], drop))
        yield parent, tables[-1], at


BLOCK_CELLS = 1 << 16  # a pass over a large table goes block by block, each small enough to stay in the cache


@functools.lru_cache(maxsize=4096)
def _blocks(shape: tuple[int, ...]) -> tuple[tuple, ...]:
    """Index tuples cutting a C-ordered table of ``shape`` into contiguous blocks of at most about
    ``BLOCK_CELLS`` cells: single indices on the leading axes, then a run of the next one (a table
    that small is one block, ``...``)."""
    if math.prod(shape) <= BLOCK_CELLS:
        return (Ellipsis,)
    k = 0
    while k < len(shape) - 1 and math.prod(shape[k + 1:]) > BLOCK_CELLS:
        k += 1
    inner = math.prod(shape[k + 1:])
    pieces = -(-shape[k] // max(1, BLOCK_CELLS // inner))
    run = -(-shape[k] // pieces)       # runs of even length
    return tuple((*lead, slice(j, min(j + run, shape[k])))
                 for lead in itertools.product(*(range(n) for n in shape[:k])) for j in range(0, shape[k], run))


def _part(table: np.ndarray, idx: tuple) -> np.ndarray:
    """The part of ``table`` (broadcast against a large one: length-1 axes are broadcast) that meets
    the large table's block ``idx``, as a view."""
    if idx is Ellipsis:
        return table
    return table[tuple(i if table.shape[a] > 1 else (slice(0, 1) if isinstance(i, slice) else 0)
                       for a, i in enumerate(idx))]


_LONG_RUN = 256   # cells: a broadcast operand with a shorter run inside its last broadcast axis is repeated out first


def _wide(part: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``part`` (broadcast against a block of ``shape``: length-1 axes) repeated along its innermost
    broadcast axes until the run of cells inside its last broadcast axis is at least ``_LONG_RUN``.
    numpy applies an element-wise op with a broadcast operand one inner run at a time, so a short run
    costs several times a contiguous op, and ``np.repeat`` copies in runs: on a 75,600-cell block a
    table broadcast along an axis of 9 with runs of 8 was added in 139 us, repeated out and added in
    45 us. The same values are added, so the results are the same bit for bit. Used for the gradient's
    broadcasts (``_add_into``: 17.7 -> 14.3 ms a gradient on AIM's 45 MB model at 1,000,000 rows);
    in the exponential and the downward pass it saved nothing measurable."""
    run = 1
    for k in range(len(shape) - 1, -1, -1):
        if run >= _LONG_RUN:
            break
        if part.shape[k] == 1 and shape[k] > 1:
            part = np.repeat(part, shape[k], axis=k)
        run *= shape[k]
    return part


def _sweep(shape: tuple[int, ...], drops: Sequence[tuple[int, ...]], block_of) -> list[np.ndarray]:
    """Sums of a table of ``shape`` over each axes tuple of ``drops`` (length-1 axes kept), in one pass
    block by block: ``block_of(idx)`` gives the block ``idx`` (computing it first if it must), and each
    block, still in the cache, is summed into every result. The sums are those of one reduction up to
    the order of the floating-point additions."""
    blocks = _blocks(tuple(shape))
    if len(blocks) == 1:
        whole = block_of(blocks[0])
        return [_sum(whole, d) for d in drops]
    outs = [np.zeros(tuple(1 if a in d else n for a, n in enumerate(shape))) for d in drops]
    for idx in blocks:
        blk = block_of(idx)
        off = len(idx) - 1          # block axis 0 is the table's axis ``off``
        for out, d in zip(outs, drops):
            part = _part(out, idx)
            part += _sum(blk, tuple(a - off for a in d if a >= off))
    return outs


def _add_into(view: np.ndarray, first: np.ndarray | None, parts: Sequence[np.ndarray]) -> None:
    """``view`` plus (with ``first``: ``first`` plus) the tables ``parts`` broadcast over it, written
    into ``view`` in one pass, block by block (each part's piece of a block repeated out by ``_wide``)."""
    for idx in _blocks(view.shape):
        v = view[idx]
        np.add(v if first is None else first[idx], _wide(_part(parts[0], idx), v.shape), out=v)
        for t in parts[1:]:
            v += _wide(_part(t, idx), v.shape)


@functools.lru_cache(maxsize=256)
def _schedule(domain_items: tuple, cliques: frozenset) -> "_Tree":
    """The message-passing schedule of the junction tree of a clique set (built once per set)."""
    WORK["schedules"] += 1
    return _Tree(dict(domain_items), _junction_tree_cached(domain_items, cliques))


class _Tree:
    """The junction tree's schedule: a root per component, nodes parents-first, and per edge the
    axes to sum out on either side and the separator's shape inside the parent."""

    def __init__(self, domain: Mapping[str, int], tree) -> None:
        import networkx as nx

        self.domain = dict(domain)
        self.tree = tree
        self.nodes: list[Clique] = []
        self.parent: dict[Clique, Clique | None] = {}
        for comp in nx.connected_components(tree):
            # the largest table is the root: a root's table takes more passes a step than a child's
            root = min(comp, key=lambda v: (-_cells(self.domain, v), v))
            self.nodes.append(root)
            self.parent[root] = None
            for u, v in nx.bfs_edges(tree, root, sort_neighbors=sorted):
                self.nodes.append(v)
                self.parent[v] = u
        self.edges: list[tuple[Clique, Clique, tuple, tuple, tuple]] = []   # child, parent, axes, axes, shape
        for v in self.nodes:
            u = self.parent[v]
            if u is not None:
                sep = tuple(c for c in v if c in u)
                self.edges.append((v, u, _drop_axes(v, sep), _drop_axes(u, sep), _axes_shape(self.domain, u, sep)))
        self.roots = [v for v in self.nodes if self.parent[v] is None]
        self.kids: dict[Clique, list] = {v: [] for v in self.nodes}   # (child, axes summed for its separator)
        for v, u, _, parent_axes, _ in self.edges:
            self.kids[u].append((v, parent_axes))

    def marginals(self, theta: Mapping[Clique, np.ndarray], out: dict[Clique, np.ndarray] | None = None,
                  total: float = 1.0, work: dict | None = None,
                  factors: dict | None = None) -> dict[Clique, np.ndarray]:
        """Tables (each sums to ``total``; 1: probabilities) of every junction-tree clique: an upward pass of
        log-space messages, then each clique's marginal from its parent's separator marginal.

        One exponential per cell: the upward pass keeps each child's shifted table
        ``e = exp(up - shift)`` (``up``: its potentials plus its children's messages; whose sums over
        the non-separator axes ``s`` give the message ``log s + shift``), and the child's marginal is
        then ``e * sep / s`` with ``sep`` the parent's marginal on the separator, i.e.
        ``exp(up + log sep - message)`` without a second exponential. Each table is made and summed
        in one pass, block by block (``_sweep``): ``up`` is never written out, and the sums of a
        parent's table its children need come from the pass that makes it. ``out`` (optional) holds
        arrays to write the tables into, and ``work`` (optional, empty at first) keeps the scratch
        tables and each clique's shift for the next call: a fresh table of tens of megabytes costs
        more in page faults than the arithmetic done in it. With ``factors`` (a dict), a root table
        larger than ``SPARSE_HOST_CELLS`` is left unscaled and its factor put in ``factors`` (a pass
        saved when the caller only sums it: the factor scales the sums)."""
        with np.errstate(over="ignore", under="ignore", divide="ignore"):   # overflow is handled by _exp_sweep
            return self._marginals(theta, {} if work is None else work, {} if out is None else out, total, factors)

    def _marginals(self, theta, work: dict, tables: dict, total: float, factors: dict | None) -> dict:
        messages: dict[Clique, list] = {v: [] for v in self.nodes}   # into each clique, in its shape
        kids = self.kids
        shifted = {}                     # child -> (exp(up - shift), its sums over the non-separator axes)
        for v, u, child_axes, _, in_parent in reversed(self.edges):
            e = work.get(("e", v))
            e = work[("e", v)] = np.empty(theta[v].shape) if e is None else e
            (s,), shift = self._exp_sweep(v, theta[v], messages[v], e, [child_axes], work)
            shifted[v] = (e, s)
            msg = np.log(s)                         # an empty separator cell sends log 0 = -inf
            msg += shift
            messages[u].append(msg.reshape(in_parent))
        seps: dict[Clique, np.ndarray] = {}        # child -> its parent's marginal on their separator
        for v in self.roots:
            p = tables[v] = np.empty(theta[v].shape) if tables.get(v) is None else tables[v]
            drops = [axes for _, axes in kids[v]] or [tuple(range(p.ndim))]
            sums, _ = self._exp_sweep(v, theta[v], messages[v], p, drops, work)
            scale = total / float(sums[0].sum())
            if factors is not None and p.size > SPARSE_HOST_CELLS:
                factors[v] = scale
            else:
                p *= scale
            for (w, _), t in zip(kids[v], sums):
                seps[w] = t * scale
        for v, _, _, _, _ in self.edges:            # parents first: a clique's separator table is ready
            e, s = shifted[v]
            ratio = np.divide(seps[v].reshape(s.shape), s, out=np.zeros(s.shape), where=s > 0)
            over = np.isinf(ratio)     # a subnormal sum under a cell the parent gives mass: the quotient overflows
            if over.any():             # those slices of e become shares of their sum (each at most 1) instead
                np.divide(e, s, out=e, where=over)
                ratio[over] = seps[v].reshape(s.shape)[over]
            t = tables[v] = np.empty(e.shape) if tables.get(v) is None else tables[v]
            fill = lambda idx, t=t, e=e, ratio=ratio: np.multiply(e[idx], _part(ratio, idx), out=t[idx])  # noqa: E731
            for (w, _), sep in zip(kids[v], _sweep(t.shape, [axes for _, axes in kids[v]], fill)):
                seps[w] = sep
        return tables

    @staticmethod
    def _exp_sweep(v: Clique, theta: np.ndarray, messages: list, dest: np.ndarray, drops: list,
                   work: dict) -> tuple[list[np.ndarray], float]:
        """``dest = exp(theta + messages - shift)`` and its sums over each of ``drops``, in one pass
        (``_sweep``), and the scalar ``shift``. The shift is the one that put the clique's largest
        sum at 1 the last time (kept in ``work``), so the step's change of the potentials cannot
        overflow it; if it still overflows, or everything underflows, or on the first call, the
        pass is made again with the largest ``theta + messages`` as the shift, which cannot."""
        shift = work.get(("shift", v))
        for exact in (shift is None, True):
            if exact:
                up = theta.copy()
                for m in messages:
                    up += m
                shift = float(up.max())

            def fill(idx, shift=shift):
                b = dest[idx]
                if messages:
                    np.add(theta[idx], _part(messages[0], idx) - shift, out=b)
                    for m in messages[1:]:
                        b += _part(m, idx)
                else:
                    np.subtract(theta[idx], shift, out=b)
                return np.exp(b, out=b)
            sums = _sweep(dest.shape, drops, fill)      # (overflow is looked for here: see marginals' errstate)
            largest = float(sums[0].max())              # NaN or inf when a cell overflowed
            if math.isfinite(largest) and largest > 0:
                break
        work[("shift", v)] = shift + math.log(largest)
        return sums, shift


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


_EINSUM_PATHS: dict = {}


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
        self.history: list[float] = []    # the loss after each step (the first entry: before any)
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
        key = (spec, tuple(t.shape for t in tables))
        if key not in _EINSUM_PATHS:   # the contraction order depends only on the spec and shapes
            _EINSUM_PATHS[key] = np.einsum_path(spec, *tables, optimize="greedy")[0]
        out = np.einsum(spec, *tables, optimize=_EINSUM_PATHS[key])
        return np.maximum(out, 0.0) * self.total

    def projections(self, cliques: Sequence[Clique]) -> dict[Clique, np.ndarray]:
        """``project`` of each clique, the cliques inside one large junction-tree table summed down
        together along one ``_reduction_plan`` (a few passes over the table instead of one each)."""
        out: dict[Clique, np.ndarray] = {}
        groups: dict[Clique, list[Clique]] = {}
        for cl in dict.fromkeys(tuple(c) for c in cliques):
            node = next((n for n in self.clique_tables if set(cl) <= set(n)), None)
            if node is None or self.clique_tables[node].size <= SPARSE_HOST_CELLS:
                out[cl] = self.project(cl)
            else:
                groups.setdefault(node, []).append(cl)
        for node, group in groups.items():
            plan = _reduction_plan(self.clique_tables[node].shape,
                                   [frozenset(node.index(c) for c in cl) for cl in group])
            for _, table, at in _partial_sums(self.clique_tables[node], plan):
                for i in at:
                    kept = [c for c in node if c in group[i]]
                    t = table.reshape([self.domain[c] for c in kept])
                    out[group[i]] = np.transpose(t, [kept.index(c) for c in group[i]])
        return {tuple(cl): out[tuple(cl)] for cl in cliques}

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
    bad = [c for c, v in domain.items() if int(v) < 1]
    if bad:
        raise ValueError(f"Every column needs at least one category; {bad} have none.")
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
    """The L2 loss of the measurements and its gradient, on flat vectors.

    Every junction-tree table lives in one flat vector (C order, clique after clique) and every
    measured table in another; a sparse 0/1 matrix ``A`` sums each measured clique's host table
    down to the measured cells, so the loss is ``0.5 * sum w (A p - y)^2`` and its gradient on the
    host tables is ``A^T (w (A p - y))`` (each measurement's residual broadcast over its host,
    which is where Private-PGM's gradient on the clique marginals goes). Measurements whose host
    table is larger than ``SPARSE_HOST_CELLS`` are summed and broadcast densely instead, so the
    matrix never holds more than that many entries per measurement; there the host is summed down
    to all the maximal measured cliques it holds along one ``_reduction_plan``, and every measured
    sub-clique from its maximal clique's small table (the gradient is gathered on the maximal
    cliques and broadcast back up the same plan), so a step costs a few passes over a large host
    whatever the number of cliques it holds. The sparse matrix reads a host once per measured clique
    it holds, so it is kept for tables of at most 4,096 cells: with 65,536 (as before), AIM's
    estimates at 100,000 CPS rows took 3.8 s CPU instead of 3.1 s, on the same path.
    """

    def __init__(self, domain: Mapping[str, int], measurements: Sequence[Measurement]) -> None:
        from scipy import sparse

        self.domain = dict(domain)
        self.work: dict = {}      # scratch tables of the message passing, reused step after step
        cl = [_canonical(domain, m.clique) for m in measurements]
        uniq = sorted(set(cl), key=lambda c: (-len(c), c))
        self.maximal = sorted(c for i, c in enumerate(uniq) if not any(set(c) < set(d) for d in uniq[:i]))
        self.tree = _schedule(*_key(domain, self.maximal))
        # each measured clique lives on the smallest tree clique that holds it: a factor over its
        # columns gives the same distribution on any of them, and the smallest is the cheapest to sum
        self.host = {r: min((n for n in self.tree.nodes if set(r) <= set(n)), key=lambda n: _cells(domain, n))
                     for r in self.maximal}
        nodes = self.tree.nodes
        self.shapes = {v: tuple(domain[a] for a in v) for v in nodes}
        sizes = [_cells(domain, v) for v in nodes]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.offset = {v: (int(starts[i]), int(starts[i + 1])) for i, v in enumerate(nodes)}
        self.n_cells = int(starts[-1])
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
        self.terms: list[tuple[Clique, Clique, int, int]] = []
        self.dense: list[tuple] = []
        self.constant = 0.0
        ys, ws, rows, cols = [], [], [], []
        dense: dict[Clique, list] = {}
        at = 0
        blocks: dict[Clique, float] = {}
        for (r, c), (wy, w, wyy) in merged.items():
            y = wy / w
            self.constant += 0.5 * (wyy - w * float(np.vdot(y, y)))
            v = self.host[r]
            n_c = _cells(domain, c)
            lo, hi = self.offset[v]
            if hi - lo <= SPARSE_HOST_CELLS:
                cell = np.broadcast_to(np.arange(n_c).reshape(_axes_shape(domain, v, c)), self.shapes[v]).ravel()
                rows.append(at + cell)
                cols.append(np.arange(lo, hi))
            else:   # a large host: summed densely each step rather than held as matrix entries
                dense.setdefault(r, []).append((_drop_axes(r, c), _axes_shape(domain, r, c), at, at + n_c))
            ys.append(y.ravel())
            ws.append(np.full(n_c, w))
            self.terms.append((r, c, at, at + n_c))
            at += n_c
            # Lipschitz constant of the gradient on the maximal cliques (exact for identity queries)
            blocks[r] = blocks.get(r, 0.0) + w * _cells(domain, r) / n_c
        self.lipschitz = max(blocks.values()) if blocks else 1.0
        by_host: dict[Clique, list[Clique]] = {}
        for r in dense:
            by_host.setdefault(self.host[r], []).append(r)
        for v, rs in by_host.items():   # each large host: one tree of partial sums for all its cliques
            lo, hi = self.offset[v]
            plan = _reduction_plan(self.shapes[v], [frozenset(v.index(a) for a in r) for r in rs])
            nodes = [(parent, drop, [(rs[i], _axes_shape(domain, v, rs[i]), tuple(domain[a] for a in rs[i]),
                                      dense[rs[i]]) for i in hosted]) for parent, drop, hosted in plan]
            self.dense.append((lo, hi, self.shapes[v], nodes))
        # runs of the flat vector outside the large hosts: a step copies its base there (a large
        # host's cells are written by the host's own first broadcast)
        bounds = [0] + [x for lo, hi, _, _ in sorted(self.dense, key=lambda d: d[0]) for x in (lo, hi)] + [self.n_cells]
        self.outside_dense = [(lo, hi) for lo, hi in zip(bounds[0::2], bounds[1::2]) if hi > lo]
        self.y = np.concatenate(ys) if ys else np.zeros(0)
        self.w = np.concatenate(ws) if ws else np.zeros(0)
        r_idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        c_idx = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        self.A = sparse.csr_matrix((np.ones(r_idx.size), (r_idx, c_idx)), shape=(at, self.n_cells))
        self.AT = self.A.T.tocsr()

    def within_noise_test(self, level: float | None):
        """A test of the measured answers: is every measured table's mean squared residual over
        sigma^2 at most ``level``? (Always False without a level.)"""
        if level is None or not self.terms:
            return lambda ans: False
        starts = np.array([lo for _, _, lo, _ in self.terms])
        limit = float(level) * np.array([hi - lo for _, _, lo, hi in self.terms], float)

        def test(ans: np.ndarray) -> bool:
            diff = ans - self.y
            return bool(np.all(np.add.reduceat(self.w * diff * diff, starts) <= limit))
        return test

    def views(self, flat: np.ndarray) -> dict[Clique, np.ndarray]:
        """Each junction-tree clique's table as a view into a flat vector."""
        return {v: flat[lo:hi].reshape(self.shapes[v]) for v, (lo, hi) in self.offset.items()}

    def counts(self, theta_flat: np.ndarray, total: float, out: np.ndarray | None = None,
               factors: dict | None = None) -> np.ndarray:
        """Calibrated clique marginals (counts), flat (into ``out`` when given). With ``factors``, the
        large roots are left unscaled and their factors put there (``_Tree.marginals``): ``residual``
        takes them, and ``scale`` applies them."""
        out = np.empty(self.n_cells) if out is None else out
        self.tree.marginals(self.views(theta_flat), out=self.views(out), total=total, work=self.work, factors=factors)
        return out

    def scale(self, p_flat: np.ndarray, factors: Mapping[Clique, float]) -> np.ndarray:
        """``p_flat`` with the tables left unscaled by ``counts`` scaled (in place)."""
        for v, c in factors.items():
            lo, hi = self.offset[v]
            p_flat[lo:hi] *= c
        return p_flat

    def residual(self, p_flat: np.ndarray, factors: Mapping[Clique, float] | None = None):
        """Measured-cell answers of the model, the loss and the weighted residual (a large host left
        unscaled by ``counts`` has its sums scaled by its factor)."""
        ans = self.A @ p_flat if self.A.nnz else np.zeros(self.y.size)
        scale = {self.offset[v][0]: c for v, c in (factors or {}).items()}
        for lo, hi, shape, nodes in self.dense:
            c = scale.get(lo, 1.0)
            for _, t, hosted in _partial_sums(p_flat[lo:hi].reshape(shape), nodes):
                for _, _, r_shape, parts in hosted:
                    tr = t.reshape(r_shape)
                    for sub, _, a, b in parts:
                        ans[a:b] = _sum(tr, sub).ravel() * c
        diff = ans - self.y
        wd = self.w * diff
        return ans, self.constant + 0.5 * float(np.dot(diff, wd)), wd

    def gradient(self, wd: np.ndarray, base: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Gradient of the loss on the junction-tree log-potentials (flat): ``A^T`` of the weighted
        residual, each measurement's residual broadcast over its host table; with ``base``, that
        vector plus the gradient (a step ``theta - s g`` is ``gradient(-s * wd, base=theta)``: the
        scaling is on the short measured-cell vector and the sum needs no second pass), written into
        ``out`` when given."""
        sparse_part = self.AT @ wd if self.A.nnz else None
        if base is None:
            g = np.zeros(self.n_cells) if sparse_part is None else sparse_part
        else:   # a large host's cells are written by its first broadcast below, from ``base``
            g = np.empty(self.n_cells) if out is None else out
            for lo, hi in self.outside_dense:
                if sparse_part is None:
                    g[lo:hi] = base[lo:hi]
                else:
                    np.add(base[lo:hi], sparse_part[lo:hi], out=g[lo:hi])

        def residual_table(r, r_shape, parts):      # a maximal clique's measured residuals, summed on it
            acc = np.zeros(r_shape)
            for _, in_r, a, b in parts:
                acc += wd[a:b].reshape(in_r)
            return acc
        for lo, hi, shape, nodes in self.dense:
            _spread(nodes, residual_table, g[lo:hi].reshape(shape),
                    None if base is None else base[lo:hi].reshape(shape))
        return g

    def theta(self, potentials: dict[Clique, np.ndarray]) -> np.ndarray:
        """Junction-tree log-potentials (flat): each maximal clique's table added into its host (a
        large host's along its plan, as the gradient)."""
        flat = np.zeros(self.n_cells)
        th = self.views(flat)
        spread = {r for _, _, _, nodes in self.dense for _, _, hosted in nodes for r, *_ in hosted}
        for r, p in potentials.items():
            if r not in spread:
                th[self.host[r]] += p.reshape(_axes_shape(self.domain, self.host[r], r))
        for lo, hi, shape, nodes in self.dense:
            _spread(nodes, lambda r, r_shape, parts: potentials[r].reshape(r_shape), flat[lo:hi].reshape(shape), None)
        return flat

    def potentials(self, start: dict[Clique, np.ndarray], moved: np.ndarray) -> dict[Clique, np.ndarray]:
        """The maximal cliques' potentials: ``start`` plus each measurement's accumulated steps
        ``moved`` (measured-cell vector) broadcast onto its maximal clique."""
        out = {r: t.copy() for r, t in start.items()}
        for r, c, lo, hi in self.terms:
            out[r] += moved[lo:hi].reshape(_axes_shape(self.domain, r, c))
        return out


def _spread(nodes: list, table_of, view: np.ndarray, first: np.ndarray | None) -> None:
    """Add tables over cliques of a large host into ``view`` (the host), along the host's
    ``_reduction_plan`` run backwards: ``table_of(clique, its shape, its measured parts)`` gives
    each, every plan entry's sum is broadcast into its parent's, and the sums of the root's children
    are broadcast into the host together, in one pass (``_add_into``). With ``first``, ``view`` is
    written as ``first`` plus the sum (no pass to copy ``first`` in before)."""
    sums: list[np.ndarray | None] = [None] * len(nodes)
    top: list[np.ndarray] = []                  # tables added into the large table itself
    for k in range(len(nodes) - 1, -1, -1):     # children before parents
        parent, _, hosted = nodes[k]
        gk = sums[k]
        for r, in_host, r_shape, parts in hosted:
            t = table_of(r, r_shape, parts).reshape(in_host)
            gk = t if gk is None else gk + t
        if gk is None:
            continue
        if k == 0 or parent == 0:
            top.append(gk)
        else:
            sums[parent] = gk if sums[parent] is None else sums[parent] + gk
    if top:
        _add_into(view, first, top)
    elif first is not None:
        view[...] = first


_LOG_FLOOR = -700.0   # log of an empty cell in closed-form potentials: exp() of it is 0 to double precision


def _closed_form(prob: "_Problem", total: float, rtol: float = 1e-9):
    """The exact fit, when there is one that needs no search: the maximal measured cliques are
    themselves the junction tree (every other tree clique is an unmeasured single column) and the
    measurements are consistent (non-negative, every table sums to ``total``, a measured sub-clique
    equals its clique's table summed down, and neighbouring cliques agree on their separator).
    Then the measured tables are the calibrated clique marginals and the loss is at its floor; a
    tree-structured distribution factorises as the root's table times each child's table over its
    separator's (the junction-tree factorisation, e.g. Koller & Friedman 2009, Thm. 10.4), whose
    logs are the potentials. ``None`` when any condition fails."""
    dom = prob.domain
    measured = set(prob.maximal)
    nodes = prob.tree.nodes
    if any(v not in measured and len(v) != 1 for v in nodes) or not measured <= set(nodes):
        return None
    tol = rtol * max(total, 1.0)
    mean = {(r, c): prob.y[lo:hi].reshape([dom[a] for a in c]) for r, c, lo, hi in prob.terms}
    tables = {}
    for v in nodes:
        if v in measured:
            t = mean[(v, v)] if (v, v) in mean else None
            if t is None or t.min() < 0 or abs(float(t.sum()) - total) > tol:
                return None
            tables[v] = t
        else:
            tables[v] = np.full(dom[v[0]], total / dom[v[0]])
    for r, c, _, _ in prob.terms:
        if np.abs(GraphicalModel._reduce(r, tables[r], c) - mean[(r, c)]).max() > tol:
            return None
    for v, u, child_axes, parent_axes, _ in prob.tree.edges:
        a = np.add.reduce(tables[v], axis=child_axes) if child_axes else tables[v]
        b = np.add.reduce(tables[u], axis=parent_axes) if parent_axes else tables[u]
        if np.abs(a.ravel() - b.ravel()).max() > tol:
            return None
    with np.errstate(divide="ignore"):
        logs = {v: np.maximum(np.log(t / total), _LOG_FLOOR) for v, t in tables.items()}
        potentials = {v: logs[v].copy() for v in nodes if v in measured}
        for v, u, child_axes, _, _ in prob.tree.edges:
            if v in measured:
                sep = np.add.reduce(tables[v], axis=child_axes, keepdims=True) if child_axes else tables[v]
                potentials[v] -= np.maximum(np.log(sep / total), _LOG_FLOOR)
    return tables, potentials


def _expand(domain, old: Mapping[Clique, np.ndarray], maximal: list[Clique]) -> dict[Clique, np.ndarray]:
    """Old potentials carried onto the new maximal cliques (each old clique into one that holds it)."""
    out = {r: np.zeros([domain[a] for a in r]) for r in maximal}
    for c, p in old.items():
        r = next((r for r in maximal if set(c) <= set(r)), None)
        if r is not None:
            out[r] += np.asarray(p).reshape(_axes_shape(domain, r, c))
    return out


def _one_blas_thread(func):
    """Run ``func`` with the BLAS library on one thread. The estimator's sums are matrix products of
    modest size, one after another: a second BLAS thread only waits on them, and on a loaded machine its
    hand-offs made a 75,600-element sum take 5.4 ms instead of 15 us (AIM on 1,000,000 rows: 47 s CPU
    with two BLAS threads, 28 s with one)."""
    @functools.wraps(func)
    def in_one_thread(*args, **kwargs):
        with _blas_libraries().limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)
    return in_one_thread


@functools.lru_cache(maxsize=1)
def _blas_libraries() -> ThreadpoolController:
    """The thread pools loaded in this process, found once: looking them up on every fit costs a few
    milliseconds in a process with many libraries, and a stratified AIM fits hundreds of times."""
    return ThreadpoolController()


@_one_blas_thread
def estimate(domain: Mapping[str, int], measurements: Sequence[Measurement], iters: int = 500,
             warm_start: GraphicalModel | None = None, tol: float | None = None,
             within_noise: float | None = None, accelerate: bool = False) -> GraphicalModel:
    """Private-PGM mirror descent (module docstring) on the measurements, weighted by 1/sigma^2,
    with the total estimated from them. At most ``iters`` gradient steps (accepted or halved).

    Early stops: with ``tol``, once 25 steps in a row lowered the loss by at most ``tol`` relative
    to it, twice in a row; with ``within_noise``, as soon as every measured table is fitted to within
    its noise: the mean over its cells of the squared residual over sigma^2 is at most
    ``within_noise`` (1 is the value the true counts would give on average; a discrepancy
    principle, Morozov 1966: fitting closer only fits the noise). With ``iters`` > 0 and consistent
    measurements whose cliques already form a junction tree, the fit is the closed form of
    ``_closed_form`` and takes no step. ``accelerate``: momentum with restarts (module docstring);
    each step is still kept only if it lowers the loss.

    The fitted model's ``loss`` is the final value of the loss, ``iterations`` the steps taken."""
    domain = {c: int(v) for c, v in domain.items()}
    _check(domain, measurements)
    if _ESTIMATOR[0] == "mbi":
        return _estimate_mbi(domain, measurements, iters, warm_start)
    iters = int(iters)
    if iters < 0:
        raise ValueError(f"iters must be a non-negative integer; got {iters}.")
    total = minimum_variance_total(measurements)
    prob = _Problem(domain, measurements)
    if not measurements:
        tables = {v: np.full([domain[a] for a in v], total / _cells(domain, v)) for v in prob.tree.nodes}
        return GraphicalModel(domain, prob.tree.tree, tables, total)
    closed = _closed_form(prob, total) if iters > 0 else None
    if closed is not None:
        WORK["closed_form"] += 1
        tables, potentials = closed
        step = 2.0 / (prob.lipschitz * total) if warm_start is None or warm_start.step is None else warm_start.step
        model = GraphicalModel(domain, prob.tree.tree, tables, total, potentials=potentials, step=step)
        model.loss = prob.constant
        return model
    old = warm_start.potentials if warm_start is not None and warm_start.potentials else {}
    start = _expand(domain, old, prob.maximal)
    theta = prob.theta(start)
    moved = np.zeros(prob.y.size)
    step = 2.0 / (prob.lipschitz * total)
    if warm_start is not None and warm_start.step is not None:
        step = max(step, min(warm_start.step, 64 * step))
    factors: dict = {}        # the large roots' scales, applied to p only at the end
    p = prob.counts(theta, total, factors=factors)
    ans, loss, wd = prob.residual(p, factors)
    prev, stalls, done = loss, 0, 0
    history = [loss]
    fitted = prob.within_noise_test(within_noise)
    velocity, since = np.zeros(prob.y.size), 0      # momentum (measured-cell space) and steps since a restart
    spare_theta, spare_p = np.empty(prob.n_cells), np.empty(prob.n_cells)   # a step's candidate, reused
    for it in range(iters if not fitted(ans) else 0):
        done = it + 1
        mu = since / (since + 3.0) if accelerate else 0.0
        if mu > 0:      # Nesterov's look-ahead written on the evaluated points (one gradient a step)
            new_velocity = mu * velocity - step * wd
            delta = mu * new_velocity - step * wd
        else:
            new_velocity = delta = -step * wd
        new_theta = prob.gradient(delta, base=theta, out=spare_theta)
        new_factors: dict = {}
        new_p = prob.counts(new_theta, total, out=spare_p, factors=new_factors)
        new_ans, new_loss, new_wd = prob.residual(new_p, new_factors)
        if mu > 0:      # a momentum step is kept if it lowers the loss; otherwise momentum restarts
            ok = new_loss < loss
        else:           # Armijo: <gradient, mu - mu_new> is <w * residual, A p - A p_new> on the measured cells
            ok = loss - new_loss >= 0.5 * step * float(np.dot(wd, ans - new_ans))
        if ok and np.isfinite(new_loss):
            moved += delta
            spare_theta, spare_p = theta, p
            theta, p, factors, ans, loss, wd = new_theta, new_p, new_factors, new_ans, new_loss, new_wd
            velocity, since = new_velocity, since + 1
            step *= _GROW
        elif mu > 0:    # restart: no momentum, and half the step (it overshot)
            velocity, since = np.zeros(prob.y.size), 0
            step *= 0.5
            WORK["restarts"] += 1
        else:
            step *= 0.5
        if tol is not None and (it + 1) % 25 == 0:
            stalls = stalls + 1 if prev - loss <= tol * max(abs(loss), 1.0) else 0
            prev = loss
            if stalls >= 2:
                break
        history.append(loss)
        if fitted(ans):
            break
    WORK["steps"] += done
    model = GraphicalModel(domain, prob.tree.tree, prob.views(prob.scale(p, factors)), total,
                           potentials=prob.potentials(start, moved), step=step)
    model.loss = loss
    model.iterations = done
    model.history = history
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
