"""Reusable widget: a total privacy budget, its unit and mechanism, and its split across levels."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import streamlit as st

from core.census.allocation import Allocation
from core.census.analytic import PRESETS, preset_shares
from core.privacy.mechanisms import MECHANISMS

SPLIT_LABELS = {"preset": "Preset from the paper", "custom": "Custom sliders",
                "optimise": "Optimise for my targets"}


@dataclass(frozen=True)
class BudgetChoice:
    """What the curator entered; ``shares`` are None when the split is to be optimised."""

    total: float
    unit: str
    delta: float | None
    mechanism: str
    sensitivity: float
    split: str
    preset: str
    shares: tuple[float, ...] | None

    def allocation(self, level_names: Sequence[str]) -> Allocation:
        """The allocation for a preset or custom split (ValueError when the split is to be optimised)."""
        if self.shares is None:
            raise ValueError("The split is set to be optimised; compute it first.")
        return Allocation(tuple(level_names), tuple(self.total * np.asarray(self.shares)), self.unit,
                          self.mechanism, self.sensitivity, self.delta)


def budget_input(key: str, level_names: Sequence[str], allow_optimise: bool = True) -> BudgetChoice:
    """Render total, unit (with delta for rho), mechanism, sensitivity and the split; return the choice."""
    c1, c2 = st.columns(2)
    unit = c1.radio("Budget unit", ["epsilon", "rho"], key=f"{key}_unit", horizontal=True,
                    help="epsilon: pure DP (Laplace, geometric). rho: zero-concentrated DP (Gaussian mechanisms).")
    total = c2.number_input(f"Total budget ({unit})", min_value=0.001, max_value=100.0, value=1.0, step=0.1,
                            format="%.3f", key=f"{key}_total_{unit}")
    delta = None
    names = [n for n, m in MECHANISMS.items() if m.unit == unit]
    if unit == "rho":
        delta = float(st.select_slider("delta for the (epsilon, delta) statement",
                                       options=[1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10], value=1e-6,
                                       format_func=lambda d: f"{d:.0e}", key=f"{key}_delta"))
    m1, m2 = st.columns(2)
    mechanism = m1.selectbox("Mechanism", names, format_func=lambda n: MECHANISMS[n].label, key=f"{key}_mech_{unit}")
    sensitivity = m2.number_input(
        "Sensitivity", min_value=0.1, max_value=100.0, value=2.0 if unit == "epsilon" else 1.4142, step=0.1,
        format="%.4f", key=f"{key}_sens_{unit}",
        help="Bounded DP moves one person between two cells: l1 sensitivity 2 (pure DP), l2 sensitivity "
             "sqrt(2) (zCDP). Use 1 for add/remove-one neighbours.")
    options = list(SPLIT_LABELS) if allow_optimise else ["preset", "custom"]
    split = st.radio("Split across levels", options, format_func=SPLIT_LABELS.get, key=f"{key}_split",
                     horizontal=True)
    preset = "equal"
    shares: tuple[float, ...] | None = None
    depth = len(level_names)
    if split == "preset":
        preset = st.selectbox("Preset (Cohen et al. 2021, Table 1)", list(PRESETS), key=f"{key}_preset")
        shares = tuple(preset_shares(preset, depth))
    elif split == "custom":
        st.caption("Each slider is a level's weight; budgets are the weights rescaled to sum to the total.")
        cols = st.columns(min(depth, 6))
        weights = [cols[i % len(cols)].slider(name, 0.0, 1.0, round(1.0 / depth, 3), 0.005,
                                              key=f"{key}_w{i}_{depth}")
                   for i, name in enumerate(level_names)]
        w = np.asarray(weights, dtype=float)
        if w.sum() <= 0:
            st.warning("All weights are zero; using an equal split until one is raised.")
            w = np.ones(depth)
        shares = tuple(w / w.sum())
        st.caption("Budgets: " + ", ".join(f"{n} {total * s:.4g}" for n, s in zip(level_names, shares)))
    return BudgetChoice(float(total), unit, delta, mechanism, float(sensitivity), split, preset, shares)
