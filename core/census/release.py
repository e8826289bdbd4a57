"""A real release of noisy counts for an allocation: OpenDP's samplers, spends recorded.

Unlike the ToyDown simulation (seeded, for illustration), this draws every level's noise from
``core.privacy.secure`` (the operating system's randomness; exact discrete samplers for integer
mechanisms), so it cannot be reproduced and is meant to be published. Each level's spend goes to
the allocation's ledger. Only the noisy counts leave this module: the exact counts never appear in
the tables, the ledger or the statement.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from core.census.allocation import Allocation, AllocationLedger
from core.census.geography_data import GeographyData
from core.privacy import secure

RELEASE_NOTE = ("Release: noise drawn from OpenDP's samplers with the operating system's randomness. "
                "It cannot be reproduced; publish it once and keep the ledger with it.")


@dataclass
class CountRelease:
    """Noisy counts of every unit at every level, the spends that paid for them, and when."""

    allocation: Allocation
    counts: pd.DataFrame
    spends: AllocationLedger
    created_utc: str

    def ledger(self) -> AllocationLedger:
        return self.spends

    def statement(self) -> str:
        return self.spends.statement(self.allocation.delta)


def can_release(allocation: Allocation) -> bool:
    """True when the allocation's mechanism has a secure sampler."""
    return allocation.noise.supports_release


def release_noisy_counts(allocation: Allocation, geo: GeographyData, progress=None) -> CountRelease:
    """Noisy counts of every node, each level at its budget's scale, drawn on the release path.

    Integer mechanisms (geometric, discrete Gaussian) give integer counts; the continuous ones give
    real numbers. ValueError when the mechanism has no secure sampler (e.g. the Generalized Gaussian)
    or when the allocation was made for another geography.
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
    frames = []
    for lvl in range(h.depth):
        sl = h.level_slice(lvl)
        noisy = secure.secure_release(true[sl], mech, float(scales[lvl]))
        labels = [h.label(int(v)) for v in range(sl.start, sl.stop)] if h.node_labels is not None \
            else [f"{h.level_names[lvl]} {i}" for i in range(sl.stop - sl.start)]
        frames.append(pd.DataFrame({"level": h.level_names[lvl], "unit": labels, "noisy count": noisy}))
        if progress is not None:
            progress(lvl + 1, h.depth, f"Released the {h.level_names[lvl]} counts")
    return CountRelease(allocation, pd.concat(frames, ignore_index=True), book,
                        datetime.now(timezone.utc).isoformat(timespec="seconds"))
