"""Verdicts from trial counts: one-sided Clopper-Pearson bounds, the decision, and how many trials decide.

An audit counts the trials whose largest subgroup distance exceeds alpha; the exceedance rate
is compared with beta through exact binomial bounds (coherence spec Sec. 2.6). The texts in
``VERDICT_MEANING`` say what each verdict does and does not establish; pages show them as written.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

NOT_PRIVATE = ("none", "finite_outputs")

VERDICT_MEANING = {
    "FAIL": ("More than beta of the trials let some tested adversary score the released half of a subgroup "
             "differently from the held-out half (W1 above alpha), and this holds at the stated confidence "
             "even after allowing for every adversary tried. It shows the release does not keep this data "
             "coherent at (alpha, beta). It does not say who is harmed or how badly beyond that distance."),
    "PASS": ("Few enough trials exceeded alpha that the failure rate is at most beta at the stated "
             "confidence, for the adversaries, subgroups and data tested here. It is evidence, not a "
             "guarantee: a stronger adversary or another subgroup may still fail. Only the theory panel "
             "certifies, and only for differentially private releases."),
    "INCONCLUSIVE": ("The trials run cannot tell whether the failure rate is above or below beta: the "
                     "confidence interval straddles it. It is neither a pass nor a fail. More trials "
                     "decide it (the number needed at the observed rate is shown), unless the true rate "
                     "sits at beta. A private release often lands here when trials are few, because a "
                     "PASS needs a minimum number of trials without any exceedance."),
}
NOT_PRIVATE_PASS = ("A PASS for a release with no privacy guarantee (records in the clear, suppression) only "
                    "means the tested adversaries found no gap at this alpha: it protects no one and does not "
                    "rank with a differentially private release.")


def clopper_pearson(x: int, t: int, confidence: float = 0.95) -> tuple[float, float]:
    if t <= 0:
        return 0.0, 1.0
    lo = 0.0 if x == 0 else float(stats.beta.ppf(1 - confidence, x, t - x + 1))
    hi = 1.0 if x == t else float(stats.beta.ppf(confidence, x + 1, t - x))
    return lo, hi


def decide(lo: float, hi: float, beta: float) -> str:
    """FAIL if the lower bound exceeds beta, PASS if the upper bound is at most beta, else INCONCLUSIVE."""
    if lo > beta:
        return "FAIL"
    if hi <= beta:
        return "PASS"
    return "INCONCLUSIVE"


def trials_needed(x: int, t: int, beta: float, confidence: float = 0.95, limit: int = 100_000, *,
                  fail_confidence: float | None = None) -> int | None:
    """Trials at which the same exceedance rate would decide (PASS if below beta, FAIL if above).

    ``fail_confidence`` is the level of the FAIL bound when it differs from the PASS bound's (the
    audit corrects FAIL for the number of adversaries).
    """
    fail_confidence = confidence if fail_confidence is None else fail_confidence
    rate = x / t if t else 0.0
    grid = np.arange(max(t, 1), limit + 1)
    xs = np.round(rate * grid).astype(int)
    if rate < beta:
        hi = np.where(xs >= grid, 1.0, stats.beta.ppf(confidence, xs + 1, np.maximum(grid - xs, 1)))
        ok = np.flatnonzero(hi <= beta)
    elif rate > beta:
        lo = np.where(xs == 0, 0.0, stats.beta.ppf(1 - fail_confidence, np.maximum(xs, 1), grid - xs + 1))
        ok = np.flatnonzero(lo > beta)
    else:
        return None
    return int(grid[ok[0]]) if ok.size else None


def alpha_at_beta(d: np.ndarray, beta: float) -> float:
    """Smallest a >= 0 with #{D > a} <= beta T: an order statistic of the trial maxima."""
    d = np.nan_to_num(np.asarray(d, float), nan=0.0)
    if d.size == 0:
        return float("nan")
    k = int(math.floor(beta * d.size + 1e-12))
    if k >= d.size:
        return 0.0
    return float(max(0.0, np.sort(d)[::-1][k]))




def min_trials_for_pass(beta: float, confidence: float = 0.95) -> int:
    """Fewest trials at which a PASS is possible: zero exceedances give an upper bound
    1 - (1 - confidence)^(1/T) (one-sided Clopper-Pearson), which must be at most beta."""
    if not 0 < beta < 1 or not 0 < confidence < 1:
        raise ValueError("beta and the confidence must lie strictly between 0 and 1.")
    t = math.ceil(math.log(1.0 - confidence) / math.log(1.0 - beta) - 1e-12)
    while clopper_pearson(0, t, confidence)[1] > beta:     # guard against rounding at the boundary
        t += 1
    return int(t)


def overall_verdict(verdicts: list[str]) -> str:
    """A release's verdict from its adversaries': FAIL if any fails, PASS if all pass, else INCONCLUSIVE."""
    if "FAIL" in verdicts:
        return "FAIL"
    return "PASS" if verdicts and all(v == "PASS" for v in verdicts) else "INCONCLUSIVE"


def verdict_label(verdict: str, privacy_kind: str) -> str:
    """The verdict as shown: a PASS of a release with no privacy guarantee says so."""
    if verdict == "PASS" and privacy_kind in NOT_PRIVATE:
        return "PASS (not private)"
    return verdict
