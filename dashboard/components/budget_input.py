"""Reusable widget: a total privacy budget, its unit and mechanism (any of the registry's), and its split."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import streamlit as st

from core.census.allocation import Allocation
from core.census.analytic import preset_shares
from core.census.budget_plan import RHO_SENSITIVITY, BudgetPlan, TargetSettings
from core.census.geography_data import load_geography
from core.census.targets import parse_target
from core.privacy.mechanisms import MECHANISMS, get_mechanism, mechanism_keys
from dashboard.components.params_form import check_shown, field_key, field_widget, params_widgets, plan_widget_values
from dashboard.components.uploads_kept import current_key

KEEP = {"persist_state": "session"}
ALGO, MECH, PUBLIC = "ba_algo", "ba_mech", "ba_pub"      # widget keys of the tabs' sub-plans: <prefix>_<field>


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


#: Fields whose widget is kept per unit (an epsilon and a rho budget keep their own values): <key>_<unit>_<field>.
PER_UNIT = ("total", "mechanism", "sensitivity")
#: Where a rho budget starts when it differs from the plan's default (which is an epsilon budget's).
UNIT_START = {"rho": {"sensitivity": RHO_SENSITIVITY}}


def budget_input(key: str, level_names: Sequence[str], allow_optimise: bool = True) -> BudgetChoice:
    """Render total, unit, mechanism (with delta when it needs one), sensitivity and the split; return the choice.

    Each widget is drawn from ``BudgetPlan``'s declaration of its field (label, bounds, menu, help)."""
    c1, c2 = st.columns(2)
    unit = field_widget(BudgetPlan, "unit", key, container=c1, **KEEP)

    def per_unit(name: str, container, **kwargs):
        return field_widget(BudgetPlan, name, f"{key}_{unit}", container=container,
                            default=UNIT_START.get(unit, {}).get(name), **kwargs, **KEEP)

    total = per_unit("total", c2, label=f"Total budget ({unit})")
    m1, m2 = st.columns(2)
    mechanism = per_unit("mechanism", m1, options=mechanism_keys(unit))
    approximate = get_mechanism(mechanism).approximate
    sensitivity = per_unit("sensitivity", m2,
                           label="Sensitivity (counts one person changes)" if approximate else None)
    delta = None
    if unit == "rho" or approximate:
        what = "for the (epsilon, delta) statement" if unit == "rho" else "of the whole release (split over the levels)"
        delta = float(field_widget(BudgetPlan, "delta", key, default=1e-6, label=f"delta {what}", **KEEP))
    params = _mechanism_params(mechanism, key)
    split = field_widget(BudgetPlan, "split", key, options=None if allow_optimise else ("preset", "custom"), **KEEP)
    preset = BudgetPlan.preset
    shares: tuple[float, ...] | None = None
    depth = len(level_names)
    if split == "preset":
        preset = field_widget(BudgetPlan, "preset", key, **KEEP)
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


def target_widgets(plan) -> tuple[list[str], int]:
    """The targets pills' values and the k of the district targets that redraw ``plan``'s targets."""
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


def weight_prefix(target: str) -> str:
    """The widget-key prefix of one target's weight (a :class:`TargetSettings` field): ``ba_<target>``."""
    return f"ba_{target}"


def target_settings_values(k: int, weights: dict[str, float]) -> dict:
    """Widget values that redraw the district targets' k and each target's weight from their declaration
    (:class:`TargetSettings`); ValueError when one is outside what the page offers."""
    out = {}
    for prefix, name, settings in (("ba", "k", TargetSettings(k=int(k))),
                                   *((weight_prefix(t), "weight", TargetSettings(weight=float(w)))
                                     for t, w in weights.items())):
        check_shown(settings, (name,))
        out[field_key(prefix, name)] = plan_widget_values(settings, prefix)[field_key(prefix, name)]
    return out


def plan_to_widgets(plan) -> dict:
    """Widget values that rebuild a ``BudgetPlan`` on the Budget allocation page (for "Open a saved report"):
    the declared fields from the plans themselves, plus the per-unit keys, the geography, the targets, the
    custom weights and the mechanism's Params (keys that depend on other choices)."""
    depth = len(plan.fanouts) + 1 if plan.geography == "stylised" else \
        load_geography("georgia", (), plan.seed).hierarchy.depth
    picked, k = target_widgets(plan)
    out = {name: value for name, value in plan_widget_values(plan, "ba").items() if value is not None}
    for name in PER_UNIT:
        out[field_key(f"ba_{plan.unit}", name)] = out.pop(field_key("ba", name))
    out.update({"ba_geo": plan.geography, "ba_fanouts": ", ".join(map(str, plan.fanouts)),
                f"ba_targets_{depth}": picked})
    out["ba_plan_use"] = plan.data.is_upload             # the report's own district plan, or none
    if plan.data.is_upload:
        out[current_key("ba_plan_csv")] = plan.data.fingerprint
    out.update({f"ba_{plan.mechanism}_{name}": value for name, value in plan.mechanism_params.__dict__.items()
                if name != "delta"})
    if plan.split == "custom":
        out.update({f"ba_w{i}_{depth}": float(s) for i, s in enumerate(plan.custom_shares)})
    weights = plan.target_weights or (1.0,) * len(plan.targets)
    names = [*picked] + (["plan"] if "plan" in plan.targets else [])
    out.update(target_settings_values(k, dict(zip(names, weights))))
    if plan.algorithms is not None:
        a = plan.algorithms
        out.update(plan_widget_values(a, ALGO))
        out.update({"ba_algo_weights": a.weights == "inverse_variance", "ba_algo_large": True})
    if plan.mechanisms is not None:
        m = plan.mechanisms
        out.update(plan_widget_values(m, MECH))
        out.update({"ba_mech_gg": "generalized_gaussian" in m.mechanisms,
                    "ba_mech_zcdp": "gaussian_zcdp" in m.mechanisms})
    if plan.public is not None:
        out.update(plan_widget_values(plan.public, PUBLIC))
    return out
