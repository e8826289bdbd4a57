"""What theory guarantees: subgroup size gamma that (alpha, beta)-Wasserstein coherence needs.

Formulas follow "Enforcing Demographic Coherence" as rebuilt in the coherence spec (Sec. 3):
Thm 6 (bounded max-information), Thm 7 (pure DP), Thm 8 with Cor 1 (approximate DP) and a
description-length corollary for releases with few possible outputs. Two constant modes:
"paper" reproduces the printed numbers; "conservative" (default) evaluates every formula at
alpha/2 with linear term 32/(3 alpha'), repairing the factor-2 slip in the paper's Claim 2
(W1 <= 2 sup|F_a - F_b| on [-1, 1], so the proven bound holds at 2 alpha, not alpha).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

CONSTANTS = ("conservative", "paper")


@dataclass(frozen=True)
class TheoryResult:
    """gamma (None when the theorem does not apply), the max-information bound zeta, and why."""
    gamma: float | None
    zeta: float | None
    binding: str
    reason: str = ""


def _check(alpha: float, beta: float, n_groups: int) -> None:
    if not 0 < beta < 1:
        raise ValueError(f"beta must lie strictly between 0 and 1; got {beta}.")
    if not alpha > 0:
        raise ValueError(f"alpha must be positive; got {alpha}.")
    if int(n_groups) < 1:
        raise ValueError("The number of subgroups must be at least 1.")


def _alpha_range(constants: str) -> float:
    if constants not in CONSTANTS:
        raise ValueError(f"constants must be one of {CONSTANTS}; got {constants!r}.")
    return 2.0 if constants == "conservative" else 1.0


def zeta_pure_dp(eps: float, n: int, beta: float, n_groups: int) -> float:
    """zeta of Thm 7: the max-information bound of an eps-DP algorithm run on n/2 records."""
    return eps * eps * n / 4.0 + eps / 2.0 * math.sqrt(n * math.log(4.0 * n_groups / beta))


def zeta_approx_dp(eps: float, n: int, beta: float, n_groups: int) -> float:
    """Max-information bound used by Thm 8 (from Cor 1), stated (looser) form."""
    return 265.0 * eps * eps * n + 12.0 * eps * math.sqrt(n * math.log(4.0 * n_groups / beta))


def zeta_description_length(n_outputs_log: float, beta: float, n_groups: int) -> float:
    """zeta = ln(2|C| K / beta) for a release with at most K outputs (derived, not in the paper)."""
    return n_outputs_log + math.log(2.0 * n_groups / beta)


def log_binomial(n: int, k: int) -> float:
    """ln C(n, k) via lgamma."""
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def gamma_from_zeta(zeta: float, alpha: float, beta: float, n_groups: int, *, ln_const: float = 16.0,
                    lin_const: float = 5.3, constants: str = "conservative") -> TheoryResult:
    """Subgroup size from a max-information bound zeta (Thm 6; Thm 8 uses ln_const=32, lin_const=16/3)."""
    _check(alpha, beta, n_groups)
    top = _alpha_range(constants)
    a = min(float(alpha), top)
    if constants == "conservative":
        a = a / 2.0
        lin = 32.0 / (3.0 * a)
    else:
        lin = lin_const / a
    log_term = zeta + math.log(ln_const * n_groups / beta)
    terms = {
        "8.3-term": 8.3 * log_term / (a * a),
        "36 ln(3/alpha)-term": 36.0 * math.log(3.0 / a) / (a * a),
        "16.6-term": 16.6 * log_term,
        "linear term": lin,
        "floor 80": 80.0,
    }
    binding = max(terms, key=terms.get)
    return TheoryResult(terms[binding], zeta, binding)


def gamma_pure_dp(eps: float, n: int, alpha: float, beta: float, n_groups: int, *,
                  order_invariant: bool = True, constants: str = "conservative") -> TheoryResult:
    """gamma guaranteed by an eps-DP release on n/2 records (Thm 7); None outside eps in (0, 1]."""
    if eps <= 0:
        raise ValueError(f"epsilon must be positive; got {eps}.")
    e = eps if order_invariant else 2.0 * eps   # [ours] relaxation for pure DP (spec Sec. 3.3 note)
    if e > 1:
        return TheoryResult(None, None, "", "outside theorem: Thm 7 needs epsilon <= 1")
    return gamma_from_zeta(zeta_pure_dp(e, n, beta, n_groups), alpha, beta, n_groups, constants=constants)


def delta_cap(eps: float, n: int, beta: float, n_groups: int) -> float:
    """Largest delta Thm 8 admits: eps^2 beta^2 / ((120 n)^2 |C|^2)."""
    return (eps * beta) ** 2 / ((120.0 * n) ** 2 * n_groups ** 2)


def gamma_approx_dp(eps: float, delta: float, n: int, alpha: float, beta: float, n_groups: int, *,
                    order_invariant: bool = True, constants: str = "conservative") -> TheoryResult:
    """gamma guaranteed by an (eps, delta)-DP release (Thm 8); None outside eps <= 1/2 or the delta cap."""
    if eps <= 0 or delta < 0:
        raise ValueError("epsilon must be positive and delta non-negative.")
    e, d = (eps, delta) if order_invariant else (2.0 * eps, 2.0 * delta)
    if e > 0.5:
        return TheoryResult(None, None, "", "outside theorem: Thm 8 needs epsilon <= 1/2")
    if d > delta_cap(e, n, beta, n_groups):
        return TheoryResult(None, None, "", f"outside theorem: delta above the cap {delta_cap(e, n, beta, n_groups):.3g}")
    return gamma_from_zeta(zeta_approx_dp(e, n, beta, n_groups), alpha, beta, n_groups, ln_const=32.0,
                           lin_const=16.0 / 3.0, constants=constants)


def _bisect(pred, lo: float, hi: float, iters: int = 80) -> float:
    """Boundary of a monotone predicate, pred(lo) False and pred(hi) True."""
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def certified_alpha(size: float, gamma_of_alpha, constants: str = "conservative") -> float | None:
    """Smallest alpha whose gamma is at most ``size`` (gamma falls with alpha); None if vacuous."""
    top = _alpha_range(constants)

    def ok(a: float) -> bool:
        res = gamma_of_alpha(a)
        return res.gamma is not None and res.gamma <= size

    if not ok(top):
        return None
    return _bisect(ok, 1e-9, top)


def certified_alpha_pure_dp(size: float, eps: float, n: int, beta: float, n_groups: int,
                            constants: str = "conservative") -> float | None:
    """Smallest alpha certified for a subgroup of ``size`` by an eps-DP release (Thm 7 inverted)."""
    return certified_alpha(size, lambda a: gamma_pure_dp(eps, n, a, beta, n_groups, constants=constants),
                           constants)


def max_epsilon(size: float, n: int, alpha: float, beta: float, n_groups: int,
                constants: str = "conservative", mechanism: str = "pure_dp") -> float | None:
    """Largest epsilon whose gamma is at most ``size`` (gamma grows with eps); None if none.

    mechanism "pure_dp" searches Thm 7 on (0, 1]; "approx_dp" searches Thm 8 on (0, 1/2] with a
    delta at or below the cap (the cap does not enter gamma).
    """
    if mechanism not in ("pure_dp", "approx_dp"):
        raise ValueError(f"mechanism must be 'pure_dp' or 'approx_dp'; got {mechanism!r}.")
    top = 1.0 if mechanism == "pure_dp" else 0.5

    def too_big(e: float) -> bool:
        res = gamma_pure_dp(e, n, alpha, beta, n_groups, constants=constants) if mechanism == "pure_dp" \
            else gamma_approx_dp(e, 0.0, n, alpha, beta, n_groups, constants=constants)
        return res.gamma is None or res.gamma > size

    if too_big(1e-12):
        return None
    if not too_big(top):
        return top
    return _bisect(too_big, 1e-12, top)


def null_envelope(m: int, alpha: float, constants: str = "conservative") -> float:
    """Claim 2 closed form: bound on P[W1 > alpha] for a split-independent predictor.

    "paper" is the printed form (shown to be invalid; kept as a regression of the printed
    numbers); "conservative" runs the claim at alpha/2: min(1, (1+m) mu'), mu' = 4 exp(-m
    min(alpha^2/16.6, 1/8.3)), for m >= max(40, 64/(3 alpha)).
    """
    if constants == "paper":
        if m < max(40.0, 16.0 / (3.0 * alpha)):
            return 1.0
        mu = 4.0 * math.exp(-m * min(alpha * alpha / 4.15, 1.0 / 8.3))
        return min(1.0, 2.0 * (1 + m) * mu)
    _alpha_range(constants)
    if m < max(40.0, 64.0 / (3.0 * alpha)):
        return 1.0
    mu = 4.0 * math.exp(-m * min(alpha * alpha / 16.6, 1.0 / 8.3))
    return min(1.0, (1 + m) * mu)
