"""One district study from configs: build plans on a geography, noise them, and summarise per district.

The page and the benchmark call these functions; nothing here knows about widgets. A plan set is an
array of block labels (n_plans, n_blocks); every result table is a tidy DataFrame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import geopandas as gpd
import numpy as np
import pandas as pd

from core.geography.adjacency import block_adjacency, unit_adjacency
from core.districts.enumeration import enumerate_plans
from core.geography.blocks import BlockGeography
from core.districts.metrics import district_metrics, plan_summary
from core.districts.noise import NoiseConfig, district_noise
from core.districts.plans import disconn_masks, greedy_plan, recom_ensemble, square_labels

Progress = Callable[[int, int, str], None] | None
GENERATORS = {
    "recom": "ReCom ensemble (gerrychain)",
    "greedy": "Greedy (hierarchy-following, Alg. 3)",
    "square": "Square tiling (k equal squares)",
    "exact": "Every plan (exact enumeration, tiny maps)",
    "csv": "Uploaded block-assignment CSV",
}

UNIT_LABELS = {"county": "counties", "tract": "tracts", "block group": "block groups", "block": "blocks"}


@dataclass(frozen=True)
class PlanConfig:
    """How to draw plans: generator, building unit for ReCom, k, tolerance, chain length, thinning, seed."""

    generator: str = "recom"
    unit: str = "tract"
    k: int = 14
    tolerance: float = 0.05
    steps: int = 40
    thin: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if self.generator not in GENERATORS:
            raise ValueError(f"Unknown generator {self.generator!r}; choose one of {list(GENERATORS)}.")
        if int(self.k) < 2:
            raise ValueError("A plan needs at least 2 districts.")


def make_plans(geo: BlockGeography, config: PlanConfig, progress: Progress = None) -> np.ndarray:
    """Block labels (n_plans, n_blocks) for the configured generator (CSV plans are loaded elsewhere)."""
    k = int(config.k)
    if config.generator == "recom":
        adj = unit_adjacency(geo, config.unit)
        units = geo.units(config.unit)
        unit_labels = recom_ensemble(adj, units["total"].to_numpy(), k, float(config.tolerance),
                                     int(config.steps), int(config.thin), int(config.seed), progress)
        return unit_labels[:, geo.leaf_unit_index(config.unit)]
    if config.generator == "greedy":
        rng = np.random.default_rng(config.seed)
        n_plans = max(1, int(config.steps) // int(config.thin))
        return np.vstack([greedy_plan(geo.hierarchy, k, rng if i else None) for i in range(n_plans)])
    if config.generator == "square":
        return square_tiling(geo, k)[None, :]
    if config.generator == "exact":
        return exact_plans(geo, config)
    raise ValueError("CSV plans are read with plan_from_csv; upload a file.")


EXACT_MAX_UNITS = 40
EXACT_MAX_PLANS = 5_000


def exact_plans(geo: BlockGeography, config: PlanConfig) -> np.ndarray:
    """Every contiguous plan of the building units within the population tolerance, as block labels."""
    units = geo.units(config.unit)
    n = len(units)
    if n > EXACT_MAX_UNITS:
        raise ValueError(f"Exact enumeration is for maps of at most {EXACT_MAX_UNITS} units; this one has {n} "
                         f"{UNIT_LABELS.get(config.unit, config.unit)}. Choose larger units, a smaller grid, or ReCom.")
    pop = units["total"].to_numpy(dtype=float)
    ideal = pop.sum() / int(config.k)
    tol = float(config.tolerance)
    unit_labels = enumerate_plans(n, unit_adjacency(geo, config.unit).edges, int(config.k), pop,
                                  ideal * (1 - tol), ideal * (1 + tol), limit=EXACT_MAX_PLANS)
    if not len(unit_labels):
        raise ValueError(f"No plan of {config.k} contiguous districts lies within {100 * tol:g}% of the ideal "
                         "population; raise the tolerance.")
    return unit_labels[:, geo.leaf_unit_index(config.unit)]


def generator_label(config: PlanConfig) -> str:
    """Short name of a plan source for legends, e.g. "ReCom (tracts)" or "Greedy"."""
    if config.generator == "recom":
        return f"ReCom ({UNIT_LABELS.get(config.unit, config.unit)})"
    if config.generator == "exact":
        return f"Every plan ({UNIT_LABELS.get(config.unit, config.unit)})"
    return GENERATORS[config.generator].split(" (")[0]


def ensemble_generators(geo: BlockGeography, config: PlanConfig, plans: np.ndarray, n_square: int = 0,
                        extra_units: tuple[str, ...] = (), progress: Progress = None,
                        disconn_units: tuple[str, ...] = (), n_disconn: int = 0
                        ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Districts to compare in an ensemble study (Cohen et al. 2021, Figs. 4 and 6): the given plans, on a grid
    four Greedy plans and ``n_square`` random Square districts, ReCom ensembles on ``extra_units`` with the
    same settings, and ``n_disconn`` Disconn districts (random, not connected) from each of ``disconn_units``
    at the plan's ideal population and tolerance. Returns the generators and, for those that could not be
    drawn, the reason."""
    gens = {generator_label(config): plans}
    skipped: dict[str, str] = {}
    if {"row", "col"} <= set(geo.blocks.columns):
        rng = np.random.default_rng(config.seed)
        if config.generator != "greedy":
            gens["Greedy"] = np.vstack([greedy_plan(geo.hierarchy, int(config.k), rng) for _ in range(4)])
        if n_square:
            try:
                gens["Square (random)"] = random_squares(geo, int(config.k), int(n_square), config.seed)
            except ValueError as exc:
                skipped["Square (random)"] = str(exc)
    for unit in extra_units:
        other = PlanConfig("recom", unit, config.k, config.tolerance, config.steps, config.thin, config.seed)
        try:
            gens[generator_label(other)] = make_plans(geo, other, progress)
        except ValueError as exc:
            skipped[f"ReCom on {UNIT_LABELS.get(unit, unit)}"] = str(exc)
    ideal = float(geo.blocks["total"].sum()) / int(config.k)
    for unit in disconn_units if n_disconn else ():
        name = f"Disconn ({UNIT_LABELS.get(unit, unit)})"
        try:
            gens[name] = disconn_masks(geo.units(unit)["total"].to_numpy(), geo.leaf_unit_index(unit), ideal,
                                       float(config.tolerance), int(n_disconn),
                                       np.random.default_rng([config.seed, len(gens)]))
        except ValueError as exc:
            skipped[name] = str(exc)
    return gens, skipped


def square_tiling(geo: BlockGeography, k: int) -> np.ndarray:
    """A plan of k equal squares on a grid geography (k must be a square number dividing the grid)."""
    if not {"row", "col"} <= set(geo.blocks.columns):
        raise ValueError("Square plans need the synthetic grid geography; choose ReCom for real maps.")
    rows, cols = geo.blocks["row"].to_numpy(), geo.blocks["col"].to_numpy()
    side = int(rows.max()) + 1
    per = int(round(np.sqrt(k)))
    if per * per != k or side % per:
        raise ValueError(f"A square plan needs k to be a square number whose root divides the grid side "
                         f"({side}); try k = 4, 16 or 64.")
    s = side // per
    return (rows // s) * per + cols // s


def random_squares(geo: BlockGeography, k: int, n_districts: int, seed: int = 0) -> np.ndarray:
    """Masks (n_blocks, n_districts) of uniformly placed Square districts (Cohen et al. 2021, Alg. 4)."""
    rows, cols = geo.blocks["row"].to_numpy(), geo.blocks["col"].to_numpy()
    side = int(rows.max()) + 1
    return square_labels(rows, cols, side, k, n_districts, np.random.default_rng(seed))


def plan_metrics(geo: BlockGeography, labels: np.ndarray) -> pd.DataFrame:
    """Per-district metrics of one plan on the block graph (population, deviation, cut edges, PP, Frag)."""
    b = geo.blocks
    return district_metrics(geo.hierarchy, block_adjacency(geo), b["total"].to_numpy(), b["county"].to_numpy(),
                            labels)


def ensemble_metrics(geo: BlockGeography, plans: np.ndarray) -> pd.DataFrame:
    """Plan-level summary of every plan in an ensemble (one row per plan)."""
    county = pd.factorize(geo.blocks["county"])[0]
    rows = []
    for i, lab in enumerate(plans):
        m = plan_metrics(geo, lab)
        pairs = np.unique(np.column_stack([county, lab]), axis=0)
        rows.append({"plan": i + 1, **plan_summary(m), "mean_fragmentation": float(m["fragmentation"].mean()),
                     "split_counties": int((np.bincount(pairs[:, 0]) > 1).sum())})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class DistrictTable:
    """Everything the page shows for one plan: the joined per-district table and block mean errors."""

    table: pd.DataFrame
    runs: pd.DataFrame
    block_mean_error: np.ndarray
    summary: dict


def district_table(geo: BlockGeography, labels: np.ndarray, noise: NoiseConfig,
                   progress: Progress = None) -> DistrictTable:
    """Plan metrics joined with the repeated-noise results, plus the district's Black share."""
    metrics = plan_metrics(geo, labels)
    res = district_noise(geo.hierarchy, geo.blocks["total"].to_numpy(), labels, noise, progress)
    k = metrics.shape[0]
    black = np.bincount(labels, weights=geo.blocks["black"].to_numpy(dtype=float), minlength=k)
    table = metrics.merge(res.table, on="district")
    table["black_share_pct"] = 100 * black / np.maximum(table["population"].to_numpy(), 1)
    return DistrictTable(table, res.runs, res.block_mean_error, res.summary)


def display_values(geo: BlockGeography, level: str, labels: np.ndarray, table: pd.DataFrame,
                   block_error: np.ndarray, county: str | None = None) -> gpd.GeoDataFrame:
    """Units to draw (counties, tracts, or the blocks of one county) with their district and its numbers.

    A unit split between districts is drawn with the district that holds most of its population.
    """
    b = geo.blocks
    if level == "block":
        keep = np.ones(len(b), dtype=bool) if county is None else (b["county"].to_numpy() == county)
        units = b.loc[keep, ["GEOID", "total", "black", "geometry"]].reset_index(drop=True)
        units["district"] = labels[keep] + 1
        units["mean_block_error"] = block_error[keep]
        units["unit_id"] = units["GEOID"]
    else:
        leaf_unit = geo.leaf_unit_index(level)
        units = geo.units(level)
        n_u = len(units)
        k = int(labels.max()) + 1
        w = b["total"].to_numpy(dtype=float) + 1e-6  # empty units still get a district
        share = np.zeros((n_u, k))
        np.add.at(share, (leaf_unit, labels), w)
        col = {"county": "county", "tract": "tract", "block group": "block_group"}[level]
        units = units[[col, "total", "black", "geometry"]].rename(columns={col: "unit_id"}).copy()
        units["district"] = share.argmax(axis=1) + 1
        units["split"] = (share > 1e-3).sum(axis=1) > 1
        units["mean_block_error"] = np.bincount(leaf_unit, weights=block_error, minlength=n_u)
    units["black_share_pct"] = 100 * units["black"] / units["total"].where(units["total"] > 0)
    cols = ["district", "population", "deviation_pct", "mean_abs_error", "p95_abs_error", "empirical_sd",
            "analytic_toydown_sd", "balanced_on_noisy_max_abs_dev_pct", "fragmentation"]
    dist = table[cols].rename(columns={"population": "district_population", "deviation_pct": "district_deviation_pct",
                                       "fragmentation": "district_fragmentation"})
    return gpd.GeoDataFrame(units.merge(dist, on="district", how="left"), geometry="geometry", crs=b.crs)


def district_shapes(geo: BlockGeography, labels: np.ndarray, table: pd.DataFrame) -> gpd.GeoDataFrame:
    """District polygons (blocks dissolved by label) with the per-district table, EPSG:4326."""
    lab = np.asarray(labels)
    # dissolve the coarsest units the plan keeps whole (far fewer polygons than blocks)
    pieces = None
    for level in ("county", "tract", "block group"):
        lu = geo.leaf_unit_index(level)
        first = np.full(int(lu.max()) + 1, -1)
        first[lu] = lab
        if np.array_equal(first[lu], lab):
            pieces = geo.units(level)[["geometry"]].copy()
            pieces["district"] = first + 1
            break
    if pieces is None:
        pieces = geo.blocks[["geometry"]].copy()
        pieces["district"] = lab + 1
    shapes = pieces.dissolve(by="district").reset_index()  # units of different counties are not exactly noded
    return gpd.GeoDataFrame(shapes.merge(table, on="district"), geometry="geometry", crs=geo.blocks.crs)


def grid_side(geo: BlockGeography) -> int:
    """Side of a grid geography in blocks."""
    return int(geo.blocks["row"].max()) + 1

