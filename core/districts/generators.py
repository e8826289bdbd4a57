"""Districting generators, one registry: key -> Spec(label, factory, Params).

``GENERATORS[key].build(params)`` returns a function ``draw(geo, k, seed, progress) -> labels`` giving
block labels of shape (n_plans, n_blocks), districts numbered 0..k-1. Cohen et al. 2021 §6-7 for Greedy,
Square and Disconn; DeFord, Duchin and Solomon for ReCom; Cohen-Addad et al. 2021 for the exact
enumeration on tiny maps.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from core.contracts import Registry, Spec, check_params, named_rng, param, seed_sequence, stream_key, whole_number
from core.districts.enumeration import enumerate_plans
from core.districts.plans import greedy_plan, recom_ensemble
from core.geography.adjacency import unit_adjacency
from core.geography.blocks import BlockGeography

UNIT_LABELS = {"county": "counties", "tract": "tracts", "block group": "block groups", "block": "blocks"}
UNITS = ("county", "tract", "block group", "block")
EXACT_MAX_UNITS = 40
EXACT_MAX_PLANS = 5_000


def is_grid(geo: BlockGeography) -> bool:
    """True for the synthetic square-grid county (blocks carry row and column)."""
    return {"row", "col"} <= set(geo.blocks.columns)


# ----------------------------------------------------------------------------------------- params
@dataclass(frozen=True)
class ReComParams:
    unit: str = param("tract", label="Building unit", choices=UNITS,
                      help="Units the chain moves between districts; larger units cut fewer hierarchy units.")
    tolerance_pct: float = param(5.0, label="Population tolerance (%)", low=0.5, high=40.0, step=0.5,
                                 help="Every district of every plan stays within this share of the ideal.")
    steps: int = param(40, label="ReCom steps", low=1, high=20_000, step=10,
                       help="Chains are cached on disk; 1,000 steps on Georgia's tracts take about 10 s.")
    thin: int = param(10, label="Keep one plan every (steps)", low=1, high=10_000)

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class GreedyParams:
    n_plans: int = param(4, label="Greedy plans", low=1, high=50,
                         help="Each plan starts from a random label offset; the first starts at label 0.")

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class SquareParams:
    """The k equal squares of a grid county: no settings."""

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class DisconnParams:
    unit: str = param("tract", label="Building unit", choices=UNITS,
                      help="Units dealt out at random; districts ignore geography and are not connected.")
    n_plans: int = param(4, label="Disconn plans", low=1, high=200)

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class ExactParams:
    unit: str = param("tract", label="Building unit", choices=UNITS)
    tolerance_pct: float = param(20.0, label="Population tolerance (%)", low=0.5, high=40.0, step=0.5)

    def __post_init__(self) -> None:
        check_params(self)


GeneratorParams = ReComParams | GreedyParams | SquareParams | DisconnParams | ExactParams


# ----------------------------------------------------------------------------------------- drawers
def _to_blocks(geo: BlockGeography, unit: str, unit_labels: np.ndarray) -> np.ndarray:
    return np.asarray(unit_labels)[:, geo.leaf_unit_index(unit)]


def draw_recom(params: ReComParams, geo: BlockGeography, k: int, seed: int, progress=None) -> np.ndarray:
    """A thinned ReCom chain on the building units."""
    adj = unit_adjacency(geo, params.unit)
    pop = geo.units(params.unit)["total"].to_numpy()
    if len(pop) < k:
        raise ValueError(f"Only {len(pop)} {UNIT_LABELS[params.unit]} for {k} districts; choose smaller units.")
    chain_seed = int(seed_sequence(int(seed), stream_key("recom")).generate_state(1)[0])
    labels = recom_ensemble(adj, pop, k, params.tolerance_pct / 100, params.steps, params.thin, chain_seed,
                            progress)
    return _to_blocks(geo, params.unit, labels)


def draw_greedy(params: GreedyParams, geo: BlockGeography, k: int, seed: int, progress=None) -> np.ndarray:
    """Hierarchy-following Greedy plans (Cohen et al. 2021, Alg. 3); the first from label 0."""
    rng = named_rng(int(seed), "greedy")
    return np.vstack([greedy_plan(geo.hierarchy, k, rng if i else None) for i in range(params.n_plans)])


def draw_square(params: SquareParams, geo: BlockGeography, k: int, seed: int, progress=None) -> np.ndarray:
    """k equal squares tiling a grid county (k a square number whose root divides the side)."""
    if not is_grid(geo):
        raise ValueError("Square plans need the synthetic grid geography; choose ReCom for real maps.")
    rows, cols = geo.blocks["row"].to_numpy(), geo.blocks["col"].to_numpy()
    side = int(rows.max()) + 1
    per = int(round(np.sqrt(k)))
    if per * per != k or side % per:
        raise ValueError(f"A square plan needs k to be a square number whose root divides the grid side "
                         f"({side}); try k = 4, 16 or 64.")
    s = side // per
    return ((rows // s) * per + cols // s)[None, :]


def draw_disconn(params: DisconnParams, geo: BlockGeography, k: int, seed: int, progress=None) -> np.ndarray:
    """Plans that deal the units out in random order, filling district after district up to the ideal
    population (Cohen et al. 2021 §7 Disconn, as a whole plan): balanced-ish, never contiguous by design."""
    pop = geo.units(params.unit)["total"].to_numpy(dtype=float)
    if len(pop) < k:
        raise ValueError(f"Only {len(pop)} {UNIT_LABELS[params.unit]} for {k} districts; choose smaller units.")
    rng = named_rng(int(seed), "disconn")
    ideal = pop.sum() / k
    out = np.empty((params.n_plans, len(pop)), dtype=np.int64)
    for i in range(params.n_plans):
        order = rng.permutation(len(pop))
        filled = np.cumsum(pop[order]) - pop[order] / 2         # midpoint of each unit on the running total
        lab = np.minimum((filled // max(ideal, 1e-9)).astype(np.int64), k - 1)
        if np.unique(lab).shape[0] < k:
            raise ValueError(f"Some {UNIT_LABELS[params.unit]} hold more than a district's share of people; "
                             "choose smaller building units or fewer districts.")
        out[i, order] = lab
    return _to_blocks(geo, params.unit, out)


def draw_exact(params: ExactParams, geo: BlockGeography, k: int, seed: int, progress=None) -> np.ndarray:
    """Every contiguous plan of the building units within the tolerance (tiny maps only)."""
    units = geo.units(params.unit)
    n = len(units)
    if n > EXACT_MAX_UNITS:
        raise ValueError(f"Exact enumeration is for maps of at most {EXACT_MAX_UNITS} units; this one has {n} "
                         f"{UNIT_LABELS[params.unit]}. Choose larger units, a smaller grid, or ReCom.")
    pop = units["total"].to_numpy(dtype=float)
    ideal = pop.sum() / k
    tol = params.tolerance_pct / 100
    labels = enumerate_plans(n, unit_adjacency(geo, params.unit).edges, k, pop, ideal * (1 - tol),
                             ideal * (1 + tol), limit=EXACT_MAX_PLANS)
    if not len(labels):
        raise ValueError(f"No plan of {k} contiguous districts lies within {params.tolerance_pct:g}% of the "
                         "ideal population; raise the tolerance.")
    return _to_blocks(geo, params.unit, labels)


#: Most districts a generator draws (the District maps plan's own bound on k).
MAX_K = 400


def _checked_draw(draw, params, geo: BlockGeography, k: int, seed: int, progress=None) -> np.ndarray:
    """``draw`` after refusing a district count or seed that no generator can use (0 districts would
    divide by zero; a seed beyond 2**32 - 1 is not one the plans take)."""
    k = whole_number(k, "The number of districts (k)", 2, MAX_K)
    seed = whole_number(seed, "The plan seed", 0, 2**32 - 1)
    if len(geo.blocks) == 0:
        raise ValueError("The geography has 0 blocks; districts need blocks to draw from.")
    return draw(params, geo, k, seed, progress)


def _bind(draw):
    return lambda params: partial(_checked_draw, draw, params)


@dataclass(frozen=True)
class GeneratorSpec(Spec):
    """A districting generator's Spec; ``grid_only`` when it needs the synthetic grid county's rows and
    columns (a real map has none)."""

    grid_only: bool = False


GENERATORS = Registry("districting generator", [
    GeneratorSpec("recom", "ReCom ensemble", _bind(draw_recom), ReComParams,
                  "A Markov chain of contiguous, population-balanced plans (gerrychain)."),
    GeneratorSpec("greedy", "Greedy (follows the hierarchy)", _bind(draw_greedy), GreedyParams,
                  "Fills districts with whole hierarchy units in label order; balances blocks, not people.",
                  grid_only=True),
    GeneratorSpec("square", "Square tiling", _bind(draw_square), SquareParams,
                  "k equal squares of a grid county; balances blocks, not people.", grid_only=True),
    GeneratorSpec("disconn", "Disconn (random units, not connected)", _bind(draw_disconn), DisconnParams,
                  "Units dealt out at random up to the ideal population: shows what ignoring geography costs."),
    GeneratorSpec("exact", "Every plan (exact enumeration, tiny maps)", _bind(draw_exact), ExactParams,
                  "Every contiguous plan within the tolerance, for maps of at most 40 units."),
])
GRID_ONLY = tuple(key for key, spec in GENERATORS.items() if spec.grid_only)
