"""Reusable widget: a total privacy budget, its unit and mechanism (any of the registry's), and its split."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import streamlit as st

from core.census.allocation import Allocation
from core.census.targets import parse_target
from core.census.geography_data import load_geography
from core.census.analytic import PRESETS, preset_shares
from core.privacy.mechanisms import MECHANISMS, get_mechanism, mechanism_keys
from dashboard.components.params_form import params_widgets
from dashboard.components.uploads_kept import current_key

SPLIT_LABELS = {"preset": "Preset from the paper", "custom": "Custom sliders",
                "optimise": "Optimise for my targets"}
DELTAS = [1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10]
KEEP = {"persist_state": "session"}


@dataclass(frozen=True)
class BudgetChoice:
    """What the curator entered; ``shares`` are None when the split is to be optimised.

    ``mechanism`` is a registry key and ``params`` its Params; ``delta`` is the release's total delta
    (rho statement, or split evenly over the levels for an (epsilon, delta) mechanism).
    """

    total: float
    unit: str
    delta: float | None
    mechanism: str
    params: object
    sensitivity: float
    split: str
    preset: str
    shares: tuple[float, ...] | None

    def level_mechanism(self, depth: int):
        """The mechanism of each level (an (epsilon, delta) mechanism gets delta / depth per level)."""
        params = self.params
        if get_mechanism(self.mechanism, params).approximate:
            params = params.__class__(**{**params.__dict__, "delta": float(self.delta) / depth})
        return get_mechanism(self.mechanism, params)

    def allocation(self, level_names: Sequence[str]) -> Allocation:
        """The allocation for a preset or custom split (ValueError when the split is to be optimised)."""
        if self.shares is None:
            raise ValueError("The split is set to be optimised; compute it first.")
        return Allocation(tuple(level_names), tuple(self.total * np.asarray(self.shares)), self.unit,
                          self.level_mechanism(len(level_names)), self.sensitivity, self.delta)


def _mechanism_params(key: str, prefix: str):
    """Widgets drawn from the chosen mechanism's Params; its delta is the release's (set above), not a widget."""
    return params_widgets(MECHANISMS[key], prefix, persist_state="session", hide=("delta",))


def budget_input(key: str, level_names: Sequence[str], allow_optimise: bool = True) -> BudgetChoice:
    """Render total, unit, mechanism (with delta when it needs one), sensitivity and the split; return the choice."""
    c1, c2 = st.columns(2)
    unit = c1.radio("Budget unit", ["epsilon", "rho"], key=f"{key}_unit", horizontal=True, **KEEP,
                    help="epsilon: pure DP (Laplace, geometric) or (epsilon, delta)-DP (analytic and Generalized "
                         "Gaussian). rho: zero-concentrated DP (Gaussian mechanisms).")
    total = c2.number_input(f"Total budget ({unit})", min_value=0.001, max_value=100.0, value=1.0, step=0.1,
                            format="%.3f", key=f"{key}_total_{unit}", **KEEP)
    names = mechanism_keys(unit)
    m1, m2 = st.columns(2)
    mechanism = m1.selectbox("Mechanism", names, format_func=lambda n: MECHANISMS[n].label,
                             key=f"{key}_mech_{unit}", help=" ".join(f"{MECHANISMS[n].label}: {MECHANISMS[n].help}"
                                                                     for n in names), **KEEP)
    approximate = get_mechanism(mechanism).approximate
    sensitivity = m2.number_input(
        "Sensitivity (counts one person changes)" if approximate else "Sensitivity",
        min_value=0.1, max_value=100.0, value=2.0 if unit == "epsilon" else 1.4142, step=0.1,
        format="%.4f", key=f"{key}_sens_{unit}", **KEEP,
        help="Bounded DP moves one person between two cells: l1 sensitivity 2 (pure DP), l2 sensitivity "
             "sqrt(2) (zCDP). Use 1 for add/remove-one neighbours. The Generalized Gaussian takes the number of "
             "counts one person changes by 1 (2 under bounded DP).")
    delta = None
    if unit == "rho" or approximate:
        what = "for the (epsilon, delta) statement" if unit == "rho" else "of the whole release (split over the levels)"
        delta = float(st.select_slider(f"delta {what}", options=DELTAS, value=1e-6,
                                       format_func=lambda d: f"{d:.0e}", key=f"{key}_delta", **KEEP))
    params = _mechanism_params(mechanism, key)
    options = list(SPLIT_LABELS) if allow_optimise else ["preset", "custom"]
    split = st.radio("Split across levels", options, format_func=SPLIT_LABELS.get, key=f"{key}_split",
                     horizontal=True, **KEEP)
    preset = "equal"
    shares: tuple[float, ...] | None = None
    depth = len(level_names)
    if split == "preset":
        preset = st.selectbox("Preset (Cohen et al. 2021, Table 1)", list(PRESETS), key=f"{key}_preset", **KEEP)
        shares = tuple(preset_shares(preset, depth))
    elif split == "custom":
        st.caption("Each slider is a level's weight; budgets are the weights rescaled to sum to the total.")
        cols = st.columns(min(depth, 6))
        weights = [cols[i % len(cols)].slider(name, 0.0, 1.0, round(1.0 / depth, 3), 0.005,
                                              key=f"{key}_w{i}_{depth}", **KEEP)
                   for i, name in enumerate(level_names)]
        w = np.asarray(weights, dtype=float)
        if w.sum() <= 0:
            st.warning("All weights are zero; using an equal split until one is raised.")
            w = np.ones(depth)
        shares = tuple(w / w.sum())
        st.caption("Budgets: " + ", ".join(f"{n} {total * s:.4g}" for n, s in zip(level_names, shares)))
    return BudgetChoice(float(total), unit, delta, mechanism, params, float(sensitivity), split, preset, shares)


def _target_widgets(plan) -> tuple[list[str], int]:
    picked, k = [], 4
    for t in plan.targets:
        target = parse_target(t)
        if target.kind in ("greedy", "scattered"):
            picked.append(target.kind)
            k = target.arg
        elif target.kind == "unit":
            picked.append(t)
        elif target.kind == "leaf":
            picked.append("leaf")
    return picked, k


def plan_to_widgets(plan) -> dict:
    """Widget values that rebuild a ``BudgetPlan`` on the Budget allocation page (for "Open a saved report")."""
    depth = len(plan.fanouts) + 1 if plan.geography == "stylised" else \
        load_geography("georgia", (), plan.seed).hierarchy.depth
    picked, k = _target_widgets(plan)
    out = {"ba_geo": plan.geography, "ba_fanouts": ", ".join(map(str, plan.fanouts)), "ba_seed": plan.seed,
           "ba_unit": plan.unit, f"ba_total_{plan.unit}": plan.total, f"ba_mech_{plan.unit}": plan.mechanism,
           f"ba_sens_{plan.unit}": plan.sensitivity, "ba_split": plan.split, "ba_preset": plan.preset,
           f"ba_targets_{depth}": picked, "ba_k": k, "ba_runs": plan.runs, "ba_nonneg": plan.nonnegative}
    if plan.delta is not None:
        out["ba_delta"] = plan.delta
    out["ba_plan_use"] = plan.data.is_upload             # the report's own district plan, or none
    if plan.data.is_upload:
        out[current_key("ba_plan_csv")] = plan.data.fingerprint
    out.update({f"ba_{plan.mechanism}_{name}": value for name, value in plan.mechanism_params.__dict__.items()
                if name != "delta"})
    if plan.split == "custom":
        out.update({f"ba_w{i}_{depth}": float(s) for i, s in enumerate(plan.custom_shares)})
    weights = plan.target_weights or (1.0,) * len(plan.targets)
    names = [*picked] + (["plan"] if "plan" in plan.targets else [])
    out.update({f"ba_weight_{t}": float(w) for t, w in zip(names, weights)})
    if plan.algorithms is not None:
        a = plan.algorithms
        out.update({"ba_algo_types": a.n_types, "ba_algo_share": a.detailed_share, "ba_algo_exact": a.exact_level,
                    "ba_algo_runs": a.runs, "ba_algo_weights": a.weights == "inverse_variance",
                    "ba_algo_large": True})
    if plan.mechanisms is not None:
        m = plan.mechanisms
        out.update({"ba_mech_k": m.k, "ba_mech_delta": m.delta, "ba_mech_bound": m.include_bound,
                    "ba_mech_gg": "generalized_gaussian" in m.mechanisms, "ba_mech_p": list(m.gg_orders),
                    "ba_mech_zcdp": "gaussian_zcdp" in m.mechanisms})
    if plan.public is not None:
        p = plan.public
        out.update({"ba_inv_level": p.exact_through, "ba_wem_eps": p.wem.epsilon, "ba_wem_dz": p.wem.delta_z,
                    "ba_wem_runs": p.wem.runs, "ba_wem_safe": p.wem.normalizer_safe, "ba_dz_n": p.dz_records,
                    "ba_corr": p.correlation})
    return out
