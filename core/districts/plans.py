"""Districting plans: ReCom ensembles (gerrychain), the paper's Greedy and Square generators, CSV plans.

A plan is an integer district label per block (0..k-1). Generators that work on coarser units
(tracts, block groups) return unit labels that are mapped down to blocks.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from core.contracts import Progress, finite_number, whole_number
from core.geography.hierarchy import Hierarchy, check_counts
from core.geography.adjacency import UnitAdjacency, to_gerrychain


# ------------------------------------------------------------------------------- ReCom
MAX_KEPT_PLANS = 200
def _recom_labels(edges: np.ndarray, shared: np.ndarray, area: np.ndarray, perimeter: np.ndarray,
                  population: np.ndarray, k: int, tolerance: float, steps: int, thin: int, seed: int,
                  progress: Progress | None = None) -> np.ndarray:
    from gerrychain import MarkovChain, Partition
    from gerrychain.accept import always_accept
    from gerrychain.constraints import contiguous, within_percent_of_ideal_population
    from gerrychain.partition import recursive_tree_part
    from gerrychain.proposals import recom
    from gerrychain.updaters import Tally

    adj = UnitAdjacency(edges, shared, area, perimeter)
    pop = np.asarray(population, dtype=np.int64)
    graph = to_gerrychain(adj, {"population": pop})
    ideal = float(pop.sum()) / k
    if pop.max() > ideal * (1 + tolerance):
        raise ValueError(f"One unit has {pop.max():,} people, more than a district may hold "
                         f"({ideal * (1 + tolerance):,.0f}); use smaller units, fewer districts or a larger tolerance.")
    try:
        seed_plan = recursive_tree_part(graph, list(range(k)), ideal, "population", tolerance, rng=seed)
    except Exception as exc:  # gerrychain raises its own error types when no balanced cut exists
        raise ValueError(f"Could not draw a starting plan with {k} districts within {tolerance:.1%} "
                         f"({str(exc).rstrip('.')}). "
                         "Use smaller units or a larger tolerance.") from None
    part = Partition(graph, seed_plan, {"population": Tally("population", alias="population")})
    proposal = partial(recom, pop_col="population", pop_target=ideal, epsilon=tolerance)
    chain = MarkovChain(proposal, [contiguous, within_percent_of_ideal_population(part, tolerance)],
                        always_accept, part, total_steps=steps, rng=seed + 1)
    out = []
    try:
        for i, state in enumerate(chain):
            if (i + 1) % thin == 0 or i + 1 == steps and not out:
                s = state.assignment.to_series()
                labels = np.empty(adj.n_units, dtype=np.int64)
                labels[s.index.to_numpy(dtype=np.int64)] = s.to_numpy(dtype=np.int64)
                out.append(labels)
            if progress is not None and (i % 10 == 0 or i + 1 == steps):
                progress(i + 1, steps, "ReCom steps")
    except (RuntimeError, IndexError, KeyError) as exc:  # gerrychain gives up when no balanced cut is found
        raise ValueError(f"The ReCom chain stopped after {len(out) * thin} steps ({exc}); use smaller units "
                         "or a larger tolerance.") from None
    return np.vstack(out)


def recom_ensemble(adj: UnitAdjacency, population: np.ndarray, k: int, tolerance: float = 0.02,
                   steps: int = 100, thin: int = 10, seed: int = 0, progress: Progress | None = None,
                   use_cache: bool = True) -> np.ndarray:
    """Plans from a ReCom chain (DeFord et al.; Cohen et al. 2021 §7), one every ``thin`` steps: (n_plans, n_units).

    Every plan has k contiguous districts within ``tolerance`` of the ideal population. Cached on disk.
    """
    if k < 2:
        raise ValueError("A plan needs at least 2 districts.")
    if not 0 < tolerance < 0.5:
        raise ValueError(f"The population tolerance must be between 0 and 50%; got {tolerance:.2%}.")
    if steps < 1 or thin < 1:
        raise ValueError("Steps and thinning must be at least 1.")
    if steps // thin > MAX_KEPT_PLANS:
        # every kept plan becomes a row of block labels (and, in an ensemble study, a column block of
        # a sparse matrix): 20,000 plans of Georgia's 30,000 blocks would need about 5 GB
        raise ValueError(f"{steps:,} steps keeping one plan every {thin:,} would keep {steps // thin:,} plans; "
                         f"keep at most {MAX_KEPT_PLANS} (keep one plan every {-(-steps // MAX_KEPT_PLANS):,} "
                         "steps or more).")
    if adj.n_components() != 1:
        raise ValueError("The unit graph is not connected; ReCom needs one connected piece of geography.")
    args = (adj.edges, adj.shared, adj.area, adj.perimeter, np.asarray(population), int(k), float(tolerance),
            int(steps), int(thin), int(seed))
    if use_cache:
        from core.cache import memory
        return memory().cache(_recom_labels, ignore=["progress"])(*args, progress=progress)
    return _recom_labels(*args, progress=progress)


# ------------------------------------------------------------------------- Greedy, Square
def _leaf_range(h: Hierarchy, node: int) -> tuple[int, int]:
    """Leaf-level node ids [lo, hi] under ``node`` (descendants are contiguous in this numbering)."""
    lo = hi = node
    while h.child_ptr[lo + 1] > h.child_ptr[lo]:
        lo, hi = int(h.child_ptr[lo]), int(h.child_ptr[hi + 1] - 1)
    return lo, hi


def greedy_plan(h: Hierarchy, k: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """k districts by the hierarchy-greedy generator (Cohen et al. 2021, Alg. 3); labels per leaf.

    Each district targets floor(n_leaves / k) leaves (the last one takes the rest): from the current
    node, whole free children that fit are added in label order, then the walk descends into the next
    child that still has free leaves. With ``rng`` the label order starts at a random cyclic offset
    (the paper's "random" choice); without it, at the first label, so consecutive districts follow
    the labelling and, on a row-major grid, whole-tract districts stay contiguous.
    """
    size = h.aggregate(np.ones(h.n_leaves, dtype=np.int64))
    free = size.copy()
    leaf_of_node = np.full(h.n_nodes, -1, dtype=np.int64)
    leaf_of_node[h.leaf_nodes] = np.arange(h.n_leaves)
    labels = np.full(h.n_leaves, -1, dtype=np.int64)
    target = h.n_leaves // k

    def take(node: int, d: int) -> None:
        lo, hi = _leaf_range(h, node)
        labels[leaf_of_node[lo:hi + 1]] = d
        n_take = int(free[node])
        v = node
        while v >= 0:
            free[v] -= n_take
            v = int(h.parent[v])

    for d in range(k):
        need = target if d < k - 1 else int(free[0])
        node = 0
        while need > 0:
            kids = np.arange(h.child_ptr[node], h.child_ptr[node + 1])
            if kids.shape[0] == 0:
                node = 0
                continue
            if rng is not None:
                kids = np.roll(kids, -int(rng.integers(kids.shape[0])))
            for c in kids:
                if free[c] == size[c] and size[c] <= need:
                    take(int(c), d)
                    need -= int(size[c])
            if need == 0:
                break
            open_kids = kids[free[kids] > 0]
            node = int(open_kids[0]) if open_kids.shape[0] else 0
    return labels


def square_district(rows: np.ndarray, cols: np.ndarray, side: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Leaf mask of one uniformly placed s x s square of blocks, s = sqrt(n_blocks / k) (Alg. 4)."""
    k = whole_number(k, "The number of Square districts per tiling (k)", 1, side * side)
    s = int(round(np.sqrt(side * side / k)))
    if s * s * k != side * side:
        raise ValueError(f"A {side}x{side} grid cannot hold {k} equal squares; pick k so side^2/k is a square.")
    r0, c0 = rng.integers(0, side - s + 1, size=2)
    return (rows >= r0) & (rows < r0 + s) & (cols >= c0) & (cols < c0 + s)


def square_labels(rows: np.ndarray, cols: np.ndarray, side: int, k: int, n_districts: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Masks of ``n_districts`` independent Square districts, shape (n_blocks, n_districts)."""
    n_districts = whole_number(n_districts, "The number of Square districts", 1, 100_000)
    return np.column_stack([square_district(rows, cols, side, k, rng) for _ in range(n_districts)])


# ----------------------------------------------------------------------------- from CSV
def disconn_district(population: np.ndarray, target: float, tolerance: float, rng: np.random.Generator,
                     max_tries: int = 20) -> np.ndarray:
    """Unit indices of one Disconn district (Cohen et al. 2021, Sec. 5): random units, not connected.

    The paper leaves the stopping rule open; ours: walk the units in a random order, keep each one that
    does not push the total past target (1 + tol), and stop once the total is within tolerance. Each
    pass keeps the longest prefix of the still-fitting units that stays under the cap (vectorised), so a
    district takes a handful of passes, not one step per unit.
    """
    pop = np.asarray(check_counts(population, "Unit populations", nonnegative=True), dtype=float)
    target = finite_number(target, "The ideal district population", 0.0, None)
    if target <= 0:
        raise ValueError("The ideal district population is 0: the geography holds no people to draw districts from.")
    tolerance = finite_number(tolerance, "The population tolerance", 0.0, 0.5)
    low, high = target * (1 - tolerance), target * (1 + tolerance)
    if pop.sum() < low:
        raise ValueError("The geography holds fewer people than one district needs.")
    for _ in range(max_tries):
        order = rng.permutation(len(pop))
        chosen = np.zeros(len(pop), bool)
        total = 0.0
        while total < low:
            room = high - total
            fits = order[~chosen[order] & (pop[order] <= room)]
            if fits.size == 0:
                break
            take = fits[np.cumsum(pop[fits]) <= room]
            chosen[take] = True
            total += pop[take].sum()
        if low <= total <= high:
            return np.flatnonzero(chosen)
    raise ValueError(f"No Disconn district within {100 * tolerance:g}% of {target:,.0f} people after "
                     f"{max_tries} tries; raise the tolerance or use smaller units.")


def disconn_masks(population: np.ndarray, leaf_unit: np.ndarray, target: float, tolerance: float,
                  n_districts: int, rng: np.random.Generator) -> np.ndarray:
    """Block masks (n_blocks, n_districts) of independent Disconn districts built from units."""
    n_districts = whole_number(n_districts, "The number of Disconn districts", 1, 100_000)
    out = np.zeros((len(leaf_unit), int(n_districts)), bool)
    for d in range(int(n_districts)):
        out[:, d] = np.isin(leaf_unit, disconn_district(population, target, tolerance, rng))
    return out
