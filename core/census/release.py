"""A real release of noisy counts for an allocation: OpenDP's samplers, spends recorded.

Unlike the ToyDown simulation (seeded, for illustration), this draws every level's noise from
``core.privacy.secure`` (the operating system's randomness; exact discrete samplers for integer
mechanisms), so it cannot be reproduced and is meant to be published. Each level's spend goes to
the allocation's ledger. Only noisy numbers leave this module: the exact counts never appear in the
tables, the ledger or the statement.

What a release publishes by default is post-processed the way the Census Bureau's TopDown finishes
its counts: whole, non-negative people in which every parent equals the sum of its children. The raw
noisy measurements (fractional or negative, and inconsistent between levels) are kept beside them,
labelled as such. Post-processing reads only the noisy measurements, so it spends no budget (the
post-processing property of differential privacy).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from core.census.allocation import Allocation, AllocationLedger
from core.census.geography_data import GeographyData, Hierarchy
from core.census.toydown import consistent_top_down
from core.privacy import secure

RELEASE_NOTE = ("Release: noise drawn from OpenDP's samplers with the operating system's randomness. "
                "It cannot be reproduced; publish it once and keep the ledger with it.")
POST_PROCESSING_NOTE = ("Published counts are post-processed from the noisy measurements: whole, non-negative "
                        "people, each parent the sum of its children, fitted top-down from the state. "
                        "Post-processing reads only the noisy measurements, so it costs no privacy budget; the raw "
                        "measurements are offered beside them, labelled as such.")
COUNT = "count"
MEASUREMENT = "noisy measurement (raw)"


@dataclass
class CountRelease:
    """Counts of every unit at every level, the spends that paid for them, and when.

    ``counts`` is what the release publishes (post-processed: non-negative integers, children summing to
    their parent); ``measurements`` are the raw noisy measurements they were fitted to. Both list the
    levels top-down (state first), units in the hierarchy's order.
    """

    allocation: Allocation
    counts: pd.DataFrame
    spends: AllocationLedger
    created_utc: str
    measurements: pd.DataFrame | None = None

    def ledger(self) -> AllocationLedger:
        return self.spends

    def statement(self) -> str:
        return self.spends.statement(self.allocation.delta)


def can_release(allocation: Allocation) -> bool:
    """True when the allocation's mechanism has a secure sampler."""
    return allocation.noise.supports_release


def post_process(h: Hierarchy, noisy) -> np.ndarray:
    """Consistent non-negative integer counts of every node from one noisy measurement per node.

    Top-down, as TopDown finishes its counts (Abowd et al. 2022; Cohen et al. 2021, Alg. 2, integer and
    non-negative variant): the root becomes the nearest non-negative whole number to its measurement;
    then, for all parents of a level at once, each parent's children become the non-negative integer
    vector nearest (in squared distance) to their measurements among those that sum to the parent.
    That vector is the Euclidean projection onto {x >= 0, sum x = parent} rounded by largest remainder:
    after the projection x = max(y - t, 0), one more unit to child i costs 1 - 2 frac(x_i) - 2t in
    squared error, so giving the parent's shortfall to the largest fractional parts is the greedy, hence
    optimal, choice for this separable convex problem. Loops over levels only; each level is one
    vectorised call. Reads nothing but ``noisy``, so it spends no budget.
    """
    values = np.asarray(noisy, dtype=float).reshape(-1)
    if values.shape[0] != h.n_nodes:
        raise ValueError(f"Give one noisy measurement per node ({h.n_nodes}); got {values.shape[0]}.")
    if not np.all(np.isfinite(values)):
        raise ValueError("The noisy measurements contain NaN or infinity; release them again.")
    return consistent_top_down(h, values, nonnegative=True, integer=True)


def unit_labels(h: Hierarchy, lvl: int) -> list[str]:
    """Readable names of the units of level ``lvl`` in the hierarchy's order."""
    sl = h.level_slice(lvl)
    if h.node_labels is not None:
        return [h.label(int(v)) for v in range(sl.start, sl.stop)]
    return [f"{h.level_names[lvl]} {i}" for i in range(sl.stop - sl.start)]


def release_tables(h: Hierarchy, noisy) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(published counts, raw measurements): level, unit and the value, levels top-down."""
    raw = np.asarray(noisy).reshape(-1)
    levels = np.repeat(np.asarray(h.level_names, dtype=object), h.level_sizes())
    units = [u for lvl in range(h.depth) for u in unit_labels(h, lvl)]
    counts = pd.DataFrame({"level": levels, "unit": units, COUNT: post_process(h, raw)})
    measurements = pd.DataFrame({"level": levels, "unit": units, MEASUREMENT: raw})
    return counts, measurements


def release_noisy_counts(allocation: Allocation, geo: GeographyData, progress=None) -> CountRelease:
    """Counts of every node, each level measured at its budget's scale on the release path, then
    post-processed (:func:`post_process`) into consistent non-negative integers.

    Integer mechanisms (geometric, discrete Gaussian) measure integers; the continuous ones real
    numbers; the published counts are whole either way. ValueError when the mechanism has no secure
    sampler (e.g. the Generalized Gaussian) or when the allocation was made for another geography.
    """
    h = geo.hierarchy
    if tuple(allocation.level_names) != tuple(h.level_names):
        raise ValueError("The allocation was made for other levels than this geography's.")
    mech = allocation.noise
    if not mech.supports_release:
        raise ValueError(f"The {mech.label} has no secure sampler, so it cannot be released here; choose "
                         "Laplace, geometric, a Gaussian or the analytic Gaussian for a release.")
    true = h.aggregate(np.asarray(geo.leaf_counts, dtype=np.int64))
    scales = np.atleast_1d(mech.scale_for(allocation.sensitivity, allocation.eps_by_level))
    book = allocation.ledger()
    parts = []
    for lvl in range(h.depth):
        sl = h.level_slice(lvl)
        parts.append(secure.secure_release(true[sl], mech, float(scales[lvl])))
        if progress is not None:
            progress(lvl + 1, h.depth, f"Measured the {h.level_names[lvl]} counts")
    counts, measurements = release_tables(h, np.concatenate(parts))
    return CountRelease(allocation, counts, book, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        measurements)
