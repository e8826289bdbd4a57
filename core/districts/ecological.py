"""Ecological regression on synthetic precincts, on true and on noisy group counts (Cohen et al. 2021, §7.3).

A synthetic election (not real returns) is held on synthetic precincts. Regressing a candidate's share
of the votes cast on a group's share of the voting-age population gives the group's estimated support
(the fit at share 1) and the rest's (the fit at share 0). Modes: all precincts with votes, filtered
(precincts with fewer than 10 votes dropped, by exact votes), and weighted (least squares weighted by votes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from core.contracts import finite_number, make_rng, whole_number
from core.geography.hierarchy import Hierarchy, check_counts
from core.privacy.mechanisms import sample_gaussian
from core.districts.noise import NoiseConfig, noisy_leaf_counts

MODES = ("all", "filtered", "weighted")
MIN_VOTES = 10


def synthetic_election(blocks: pd.DataFrame, seed: int = 0, group_support: float = 0.85,
                       other_support: float = 0.5, mean_turnout: float = 0.45) -> pd.DataFrame:
    """Votes per block for one candidate: turnout varies by precinct, support differs by group."""
    rng = make_rng(seed)
    codes, _ = pd.factorize(blocks["precinct"])
    turnout = rng.beta(4 * mean_turnout, 4 * (1 - mean_turnout), codes.max() + 1)[codes]
    vap = blocks["vap"].to_numpy(dtype=np.int64)
    bvap = blocks["bvap"].to_numpy(dtype=np.int64)
    votes = rng.binomial(vap, turnout)
    group_votes = rng.hypergeometric(bvap, vap - bvap, votes)
    cand = rng.binomial(group_votes, group_support) + rng.binomial(votes - group_votes, other_support)
    return pd.DataFrame({"precinct": blocks["precinct"].to_numpy(), "votes": votes, "candidate_votes": cand})


def ecological_fit(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float]:
    """(group support a+b, complement support a) from the (weighted) least-squares line y = a + b x."""
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    sw = w.sum()
    mx, my = (w * x).sum() / sw, (w * y).sum() / sw
    vx = (w * (x - mx) ** 2).sum()
    b = (w * (x - mx) * (y - my)).sum() / vx if vx > 0 else 0.0
    a = my - b * mx
    return float(a + b), float(a)


def _fits(bvap: np.ndarray, vap: np.ndarray, votes: np.ndarray, cand: np.ndarray) -> list[dict]:
    """Estimates in the three modes; precincts with no votes, or noisy VAP <= 0, are dropped."""
    usable = (votes > 0) & (vap > 0)
    x = np.clip(np.where(vap > 0, bvap / np.where(vap > 0, vap, 1), 0.0), 0.0, 1.0)
    y = np.where(votes > 0, cand / np.where(votes > 0, votes, 1), 0.0)
    out = []
    for mode in MODES:
        keep = usable & (votes >= MIN_VOTES) if mode == "filtered" else usable
        g, c = ecological_fit(x[keep], y[keep], votes[keep] if mode == "weighted" else None)
        out.append({"mode": mode, "group_support": g, "complement_support": c, "precincts_used": int(keep.sum()),
                    "dropped_nonpositive_vap": int(((vap <= 0) & (votes > 0)).sum())})
    return out


@dataclass(frozen=True)
class EcologicalResult:
    """Precinct table (true shares), per-run estimates (run -1 = true counts; sources noisy counts and the naive
    Gaussian baseline), noisy shares of a few runs, and the simulated truth with the baseline's sigma."""

    precincts: pd.DataFrame
    estimates: pd.DataFrame
    noisy_shares: pd.DataFrame
    true_support: dict


def ecological_study(h: Hierarchy, blocks: pd.DataFrame, config: NoiseConfig, election_seed: int = 0,
                     group_support: float = 0.85, other_support: float = 0.5, keep_runs: int = 5,
                     progress: Callable[[int, int, str], None] | None = None) -> EcologicalResult:
    """ER of candidate share on Black VAP share over precincts, on true counts and on ``config.runs`` noisy
    runs of the hierarchy's (Black VAP, other VAP) block counts, and on as many runs of the naive Gaussian
    baseline matched to their average precinct L1 error; votes are exact."""
    group_support = finite_number(group_support, "Black voters' support", 0.0, 1.0)
    other_support = finite_number(other_support, "Other voters' support", 0.0, 1.0)
    election_seed = whole_number(election_seed, "The election seed", 0, 2**32 - 1)
    for column in ("vap", "bvap"):
        check_counts(blocks[column].to_numpy(), f"Block counts ({column})", nonnegative=True)
    elec = synthetic_election(blocks, election_seed, group_support, other_support)
    pcode, pnames = pd.factorize(blocks["precinct"])
    n_p = len(pnames)
    bvap = blocks["bvap"].to_numpy(dtype=np.int64)
    vap = blocks["vap"].to_numpy(dtype=np.int64)
    votes = np.bincount(pcode, weights=elec["votes"], minlength=n_p)
    cand = np.bincount(pcode, weights=elec["candidate_votes"], minlength=n_p)
    p_bvap = np.bincount(pcode, weights=bvap, minlength=n_p)
    p_vap = np.bincount(pcode, weights=vap, minlength=n_p)
    rows = [dict(run=-1, source="true counts", **f) for f in _fits(p_bvap, p_vap, votes, cand)]
    rng = make_rng(config.seed)
    counts = np.column_stack([bvap, vap - bvap])
    shares = []
    l1 = np.empty(config.runs)
    for r in range(config.runs):
        leaf = noisy_leaf_counts(h, counts, config, rng)
        nb = np.bincount(pcode, weights=leaf[:, 0], minlength=n_p)
        nv = nb + np.bincount(pcode, weights=leaf[:, 1], minlength=n_p)
        l1[r] = np.abs(nb - p_bvap).sum() + np.abs((nv - nb) - (p_vap - p_bvap)).sum()
        rows += [dict(run=r, source="noisy counts", **f) for f in _fits(nb, nv, votes, cand)]
        if r < keep_runs:
            shares.append(pd.DataFrame({"run": r, "precinct": pnames, "noisy_group_share":
                                        np.clip(np.where(nv > 0, nb / np.where(nv > 0, nv, 1), np.nan), 0, 1),
                                        "noisy_vap": nv}))
        if progress is not None:
            progress(r + 1, config.runs, "Noisy runs for ecological regression")
    # naive baseline: i.i.d. Gaussian noise on each precinct's two counts, matched to the average L1 error
    sigma = naive_gaussian_sigma(float(l1.mean()), n_p, 2)
    for r in range(config.runs):
        nb = p_bvap + sample_gaussian(sigma, n_p, rng)
        nv = nb + (p_vap - p_bvap) + sample_gaussian(sigma, n_p, rng)
        rows += [dict(run=r, source="naive Gaussian", **f) for f in _fits(nb, nv, votes, cand)]
    with np.errstate(invalid="ignore", divide="ignore"):
        precincts = pd.DataFrame({"precinct": pnames, "vap": p_vap.astype(np.int64), "bvap": p_bvap.astype(np.int64),
                                  "votes": votes.astype(np.int64), "candidate_votes": cand.astype(np.int64),
                                  "group_share": np.where(p_vap > 0, p_bvap / p_vap, np.nan),
                                  "vote_share": np.where(votes > 0, cand / votes, np.nan)})
    return EcologicalResult(precincts, pd.DataFrame(rows), pd.concat(shares, ignore_index=True) if shares else
                            pd.DataFrame(), {"group": group_support, "complement": other_support,
                                             "naive_sigma": sigma, "mean_l1_error": float(l1.mean())})


def naive_gaussian_sigma(mean_l1: float, n_units: int, n_attributes: int) -> float:
    """sigma of i.i.d. Gaussian noise whose expected L1 error over b units x c attributes equals ``mean_l1``:
    sigma = E_avg sqrt(pi) / (b c sqrt(2)) (Cohen et al. 2021, §7.3; E|N(0, s^2)| = s sqrt(2/pi))."""
    if n_units < 1 or n_attributes < 1:
        raise ValueError("The naive baseline needs at least one unit and one attribute.")
    return float(mean_l1) * np.sqrt(np.pi) / (n_units * n_attributes * np.sqrt(2.0))
