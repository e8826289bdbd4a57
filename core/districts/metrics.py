"""Per-district metrics of a plan: population balance, cut edges, Polsby-Popper, fragmentation, split counties."""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.census.analytic import fragmentation
from core.geography.hierarchy import Hierarchy
from core.geography.adjacency import UnitAdjacency


def polsby_popper(area, perimeter) -> np.ndarray:
    """Polsby-Popper compactness 4 pi A / P^2 (Polsby and Popper 1991): the district's area over that of the
    circle with its perimeter. 1 for a circle, pi/4 for a square, near 0 for a long thin shape."""
    a = np.asarray(area, dtype=float)
    p = np.asarray(perimeter, dtype=float)
    return 4 * np.pi * a / np.maximum(p, 1e-9) ** 2


def district_metrics(h: Hierarchy, adj: UnitAdjacency, population: np.ndarray, counties: np.ndarray,
                     labels: np.ndarray) -> pd.DataFrame:
    """One row per district: population, deviation from ideal (%), cut edges, Polsby-Popper 4piA/P^2,
    fragmentation, counties it shares with another district, and whether it is contiguous."""
    lab = np.asarray(labels, dtype=np.int64)
    k = int(lab.max()) + 1
    pop = np.bincount(lab, weights=np.asarray(population, dtype=float), minlength=k)
    ideal = pop.sum() / k
    e = adj.edges
    cross = lab[e[:, 0]] != lab[e[:, 1]]
    cut = np.bincount(lab[e[cross, 0]], minlength=k) + np.bincount(lab[e[cross, 1]], minlength=k)
    area = np.bincount(lab, weights=adj.area, minlength=k)
    inner = np.bincount(lab[e[~cross, 0]], weights=adj.shared[~cross], minlength=k)
    perimeter = np.bincount(lab, weights=adj.perimeter, minlength=k) - 2 * inner
    pp = polsby_popper(area, perimeter)
    cty_codes = pd.factorize(pd.Series(counties))[0]
    pairs = np.unique(np.column_stack([cty_codes, lab]), axis=0)
    n_dist_in_county = np.bincount(pairs[:, 0])
    split_pairs = pairs[n_dist_in_county[pairs[:, 0]] > 1]
    split = np.bincount(split_pairs[:, 1], minlength=k)
    return pd.DataFrame({
        "district": np.arange(1, k + 1),
        "population": pop.astype(np.int64),
        "deviation_pct": 100 * (pop - ideal) / ideal,
        "cut_edges": cut,
        "polsby_popper": pp,
        "fragmentation": fragmentation(h, leaf_labels=lab),
        "split_counties": split,
        "contiguous": adj.n_components(lab) == 1,
    })
