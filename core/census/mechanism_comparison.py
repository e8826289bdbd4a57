"""Error of noise mechanisms for k overlapping counting queries, as a function of epsilon.

One person can change each of the k queries by at most 1 (l1 sensitivity k, l2 sensitivity sqrt(k),
l_inf sensitivity 1). Every scale comes from ``core.privacy``: Laplace and two-sided geometric (pure
epsilon, scale k/epsilon); the analytic Gaussian (Balle and Wang 2018), the tight Gaussian for
(epsilon, delta), which is the fair baseline for the Generalized Gaussian of order p (Ganesh and
Zhao 2021), itself calibrated tightly with a privacy-loss distribution; optionally the Gaussian
and discrete Gaussian calibrated through zCDP and the CKS conversion (looser, so drawn as their own
lines), and the paper's proven closed-form GG scale.
Errors: mean absolute error and RMSE per query, expected maximum over the k queries and its
95th percentile.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from core.census.checks import number, numbers
from core.contracts import Plan, param, whole_number
from core.privacy.accounting import generalized_gaussian_sigma_bound, rho_for_epsilon
from core.privacy.calibration import is_calibrated
from core.privacy.mechanisms import MECHANISMS, NoiseMechanism, get_mechanism

def _tail_point(surv: Callable, quant: Callable, tail: float) -> float:
    """A point t with S(t) <= tail, found on the survival function itself.

    Asking the quantile function for 1 - tail fails once tail is below float spacing near 1
    (for k in the hundreds 1 - 1e-13/k rounds to 1 and the Gaussian quantile is infinite).
    """
    hi = float(quant(0.5))
    hi = hi if math.isfinite(hi) and hi > 0 else 1.0
    for _ in range(2000):
        if float(surv(hi)) <= tail:
            break
        hi *= 2.0
    lo = 0.0
    for _ in range(60):                       # shrink to the first such point, within 1e-18 of hi
        mid = 0.5 * (lo + hi)
        if float(surv(mid)) <= tail:
            hi = mid
        else:
            lo = mid
    return hi


def expected_max_abs(surv: Callable, quant: Callable, k: int, discrete: bool = False) -> float:
    """E max_i |X_i| over k i.i.d. queries: integral of 1 - (1 - S(t))^k (sum over integers if discrete)."""
    hi = _tail_point(surv, quant, 1e-13 / max(k, 1))
    if discrete:
        t = np.arange(0.0, hi + 2.0)
        with np.errstate(divide="ignore"):
            return float(np.sum(-np.expm1(k * np.log1p(-np.minimum(surv(t), 1.0)))))
    t = np.linspace(0.0, hi * 1.05 + 1e-12, 4001)
    s = np.minimum(surv(t), 1.0)
    with np.errstate(divide="ignore"):
        f = -np.expm1(k * np.log1p(-s))
    f[s >= 1.0] = 1.0
    return float(np.trapezoid(f, t))


def max_abs_quantile(quant: Callable, k: int, q: float = 0.95) -> float:
    """q-quantile of max_i |X_i| over k i.i.d. queries: F^-1(q^(1/k))."""
    return float(quant(q ** (1.0 / k)))


# --------------------------------------------------------------------------------- sweep
METRICS = ("MAE", "RMSE", "E max error", "95th pct of max error")
# the comparison's lines come from the mechanisms' own Specs: line key -> (registry key, label)
_LINES = {spec.line: spec.key for spec in MECHANISMS.values() if spec.comparison_label}
MECHANISM_CHOICES = {line: MECHANISMS[key].comparison_label for line, key in _LINES.items()}
K_CHOICES = (1, 3, 10, 30, 100, 300, 1000)
#: Menus the page offers (a plan may hold any delta in (0, 0.5] and any order the sweep accepts).
DELTA_MENU = {d: f"{d:.0e}" for d in (1e-4, 1e-5, 1e-6, 1e-8, 1e-10)}
ORDER_MENU = {p: f"{p:g}" for p in (1.0, 2.0, 3.0, 4.0, 6.0, 8.0)}


@dataclass(frozen=True)
class MechanismSweepPlan(Plan):
    """Settings of the mechanism comparison: k overlapping queries, epsilons, delta, GG orders."""

    k: int = param(100, label="k queries", choices=K_CHOICES, kind="select_slider")
    epsilons: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
    delta: float = param(1e-6, label="delta", choices=DELTA_MENU, kind="select_slider")
    gg_orders: tuple[float, ...] = param((3.0,), label="Generalized Gaussian orders p", choices=ORDER_MENU,
                                         kind="pills")
    mechanisms: tuple[str, ...] = ("laplace", "geometric", "analytic_gaussian", "discrete_gaussian",
                                   "generalized_gaussian")
    include_bound: bool = param(True, label="Proven GG bound", kind="toggle",
                                help="The paper's closed-form scale, about 160 times the numerical one.")

    def __post_init__(self) -> None:
        whole_number(self.k, "k (the number of overlapping queries)", 1, 100_000)
        number(self.delta, "delta", 1e-15, 0.5)      # the calibrations' own floor: refused here, not mid-sweep
        numbers(self.epsilons, "Every epsilon", 1e-6, 100.0, min_len=1, max_len=40)
        if any(e <= 0 for e in self.epsilons):
            raise ValueError("Every epsilon must be positive.")
        numbers(self.gg_orders, "Generalized Gaussian orders", 1.0, 16.0, max_len=10)
        if not isinstance(self.mechanisms, tuple) or any(not isinstance(m, str) for m in self.mechanisms):
            raise ValueError("mechanisms must be a list of mechanism names.")
        unknown = [m for m in self.mechanisms if m not in MECHANISM_CHOICES]
        if unknown:
            raise ValueError(f"Unknown mechanism(s) {unknown} in the comparison; choose from {list(MECHANISM_CHOICES)}.")
        if not isinstance(self.include_bound, bool):
            raise ValueError("include_bound must be true or false.")

    def pending_calibrations(self) -> int:
        """How many Generalized Gaussian scales this sweep would compute (not shipped, not cached)."""
        if "generalized_gaussian" not in self.mechanisms:
            return 0
        return sum(not is_calibrated(self.k, p, e, self.delta) for p in self.gg_orders for e in self.epsilons)


def _metrics(surv, quant, k: int, discrete: bool, mae: float, rmse: float) -> dict:
    return {"MAE": mae, "RMSE": rmse, "E max error": expected_max_abs(surv, quant, k, discrete),
            "95th pct of max error": max_abs_quantile(quant, k)}


def _mechanism_metrics(mech: NoiseMechanism, scale: float, k: int) -> dict:
    s, q = mech.abs_distribution(scale)
    return _metrics(s, q, k, mech.discrete, float(mech.mean_abs(scale)), math.sqrt(float(mech.variance(scale))))


def _line_mechanisms(plan: MechanismSweepPlan, key: str) -> list[tuple[str, NoiseMechanism]]:
    """(row label, mechanism) of one line: the plan's delta for an (epsilon, delta) mechanism, and one
    mechanism per order for those that take an order (the Generalized Gaussian)."""
    spec = MECHANISMS[key]
    names = {f.name for f in dataclasses.fields(spec.params)}
    if "delta" not in names:
        return [(spec.comparison_label, get_mechanism(key, spec.params()))]
    if "order" not in names:
        return [(spec.comparison_label, get_mechanism(key, spec.params(delta=float(plan.delta))))]
    return [(f"{spec.label} p={p:g}", get_mechanism(key, spec.params(order=float(p), delta=float(plan.delta))))
            for p in plan.gg_orders]


def _sweep_point(plan: MechanismSweepPlan, eps: float, name: str) -> list[dict]:
    """Rows of one line at one epsilon, every scale from the mechanism itself: pure-epsilon and (epsilon,
    delta) mechanisms are calibrated at epsilon (and the plan's delta), zCDP ones at the rho the CKS
    conversion gives for (epsilon, delta); the sensitivity is that of k counts in the mechanism's norm."""
    k, delta = int(plan.k), float(plan.delta)
    key = _LINES[name]
    note = MECHANISMS[key].calibration_note
    rows = []
    for label, mech in _line_mechanisms(plan, key):
        rho = rho_for_epsilon(eps, delta) if mech.unit == "rho" else None
        scale = float(mech.scale_for(mech.sensitivity_of_counts(k), eps if rho is None else rho))
        rows += _rows(name, label, note, eps, scale, _mechanism_metrics(mech, scale, k), rho=rho)
        if key == "generalized_gaussian" and plan.include_bound:
            p = float(mech.params.order)
            bound = generalized_gaussian_sigma_bound(k, p, eps, delta, check_range=False)
            rows += _rows(name, label, "proven bound", eps, bound, gg_metrics(bound, p, k))
    return rows


def mechanism_sweep(plan: MechanismSweepPlan, progress=None) -> pd.DataFrame:
    """Tidy table: mechanism, label, calibration, epsilon, rho, scale, metric, value for every mechanism
    and epsilon of the plan."""
    rows = []
    eps_list = sorted(set(float(e) for e in plan.epsilons))
    steps = len(eps_list) * max(1, len(plan.mechanisms))
    done = 0
    for name in plan.mechanisms:
        for eps in eps_list:
            rows += _sweep_point(plan, eps, name)
            done += 1
            if progress is not None:
                progress(done, steps, f"{MECHANISM_CHOICES[name]} at epsilon {eps:g}")
    return pd.DataFrame(rows)


def generalized_gaussian_advantage(sweep: pd.DataFrame, metric: str = "E max error") -> pd.DataFrame:
    """Per epsilon: the best tight Generalized Gaussian's error against the analytic Gaussian's, in percent
    (positive = the Generalized Gaussian is better). Both lines are calibrated tightly, so this is the
    honest comparison."""
    tight = sweep[(sweep["metric"] == metric) & (sweep["calibration"] != "proven bound")]
    gauss = tight[tight["mechanism"] == "analytic_gaussian"].set_index("epsilon")["value"]
    gg = tight[tight["mechanism"] == "generalized_gaussian"]
    if gauss.empty or gg.empty:
        return pd.DataFrame(columns=["epsilon", "best order", "Gaussian", "Generalized Gaussian", "advantage (%)"])
    best = gg.loc[gg.groupby("epsilon")["value"].idxmin()].set_index("epsilon")
    out = pd.DataFrame({"best order": best["label"], "Gaussian": gauss.reindex(best.index),
                        "Generalized Gaussian": best["value"]})
    out["advantage (%)"] = 100.0 * (1.0 - out["Generalized Gaussian"] / out["Gaussian"])
    return out.reset_index()


def gg_metrics(sigma: float, p: float, k: int) -> dict:
    mech = get_mechanism("generalized_gaussian", _gg_params(p))
    s, q = mech.abs_distribution(sigma)
    return _metrics(s, q, k, False, float(mech.mean_abs(sigma)), math.sqrt(float(mech.variance(sigma))))


def _gg_params(p: float):
    from core.privacy.mechanisms import GeneralizedGaussianParams
    return GeneralizedGaussianParams(order=float(p))


def _rows(name: str, label: str, calibration: str, eps: float, scale: float, metrics: dict,
          rho: float | None = None) -> list[dict]:
    return [{"mechanism": name, "label": label, "calibration": calibration, "epsilon": eps, "rho": rho,
             "scale": scale, "metric": metric, "value": value} for metric, value in metrics.items()]
