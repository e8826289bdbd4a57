"""The coherence audit: the paper's predictor game run many times, with a null control and verdicts.

Per trial: a fresh uniform split of the data, each release algorithm run on one half, each
adversary fitted on the release only, then exact W1 between the score distributions of the two
halves inside every eligible subgroup (size >= gamma in the full data), and the same with the
same scores on an independent split (the null). Coherence spec Sec. 2.3-2.6.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

import core.coherence.theory as theory
from core.coherence.adversaries import Adversary, checked_scores, make_adversary
from core.coherence.releases import (AuditSchema, PrivacyGuarantee, Release, encode_for_audit,
                                     replace_one_epsilon)
from core.coherence.subgroups import Subgroup, build_subgroups
from core.coherence.verdicts import (alpha_at_beta, clopper_pearson, decide, overall_verdict, trials_needed,
                                     verdict_label)
from core.coherence.wasserstein import SideCounts, count_distances
from core.contracts import Progress, make_rng, seed_sequence, stream_key
from core.parallel import map_trials
from core.privacy.protection import ProtectionUnit

TOL = 1e-9          # strict comparison D > alpha, robust to float rounding (spec Sec. 2.3 note)
SPLIT_STREAM = stream_key("split")
NULL_STREAM = stream_key("null split")


def _theory_fn(g: PrivacyGuarantee, n: int, beta: float, n_groups: int, constants: str):
    """gamma as a function of alpha for a declared guarantee, or (None, reason)."""
    if g.kind == "pure_dp" and g.epsilon is not None:
        eps = g.epsilon * (2.0 if g.neighbour == "add_remove" else 1.0)
        return (lambda a: theory.gamma_pure_dp(eps, n, a, beta, n_groups, constants=constants)), \
            f"pure DP, eps={eps:g} (Thm 7)"
    if g.kind == "zcdp" and g.rho is not None:
        cap = lambda e: theory.delta_cap(e, n, beta, n_groups)  # noqa: E731
        if replace_one_epsilon(g, cap(0.5)) > 0.5:
            return None, "outside theorem: the zCDP budget gives epsilon > 1/2 at Thm 8's delta cap"
        lo, hi = 1e-12, 0.5
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if replace_one_epsilon(g, cap(mid)) <= mid:
                hi = mid
            else:
                lo = mid
        eps = hi
        return (lambda a: theory.gamma_approx_dp(eps, cap(eps), n, a, beta, n_groups, constants=constants)), \
            f"zCDP read as ({eps:.3g}, {cap(eps):.2g})-DP replace-one (Thm 8)"
    if g.kind == "finite_outputs" and g.k_records is not None:
        n_half = n // 2
        zeta = theory.zeta_description_length(theory.log_binomial(n_half, min(g.k_records, n_half)), beta, n_groups)
        return (lambda a: theory.gamma_from_zeta(zeta, a, beta, n_groups, constants=constants)), \
            f"at most C(n/2, k) outputs, zeta={zeta:.1f} (derived, not in the paper)"
    return None, "no privacy guarantee declared: theory certifies nothing"


def release_theory(g: PrivacyGuarantee, n: int, alpha: float, beta: float, n_groups: int,
                   constants: str = "conservative") -> tuple[theory.TheoryResult, str, Callable | None]:
    """gamma guaranteed at (alpha, beta) for a release's declared guarantee, its basis, and gamma(alpha)."""
    fn, basis = _theory_fn(g, n, beta, n_groups, constants)
    if fn is None:
        return theory.TheoryResult(None, None, "", basis), basis, None
    return fn(alpha), basis, fn


@dataclass
class _Chunk:
    trials: list[int]
    seed: int
    codes: np.ndarray
    columns: list[str]
    schema: AuditSchema
    releases: list[Release]
    adversaries: list[Adversary]
    n_groups: int
    lens_unique: np.ndarray
    counts: SideCounts
    n_null: int
    keep_example: bool


def _random_half(n: int, n_a: int, seq: np.random.SeedSequence) -> np.ndarray:
    """A uniform subset of n_a of n rows, as a boolean mask, drawn from its own stream."""
    m = np.zeros(n, bool)
    m[make_rng(seq).choice(n, n_a, replace=False)] = True
    return m


def _run_chunk(job: _Chunk) -> list[dict]:
    """Run the trials of one chunk; returns distance arrays per trial (no DataFrames in workers).

    Every draw has its own stream keyed by what it is for and the trial number: the split, each
    null split, each release (by registry key) and each adversary on it. Adding a release, an
    adversary or a null split therefore leaves every other number unchanged.
    """
    n = job.codes.shape[0]
    n_a = n // 2                                   # odd n: |X_a| = floor(n/2) (spec Sec. 5 item 5)
    out = []
    for t in job.trials:
        split_seq = seed_sequence(job.seed, SPLIT_STREAM, t)
        idx = make_rng(split_seq).choice(n, n_a, replace=False)
        half = np.zeros(n, bool)
        half[idx] = True
        nulls = [_random_half(n, n_a, seed_sequence(job.seed, NULL_STREAM, t, j)) for j in range(job.n_null)]
        sides = [job.counts.released(idx), *(job.counts.released(m) for m in nulls)]
        half_df = pd.DataFrame(job.codes[idx], columns=job.columns)    # idx is in random order: shuffled input
        R, L = len(job.releases), len(job.adversaries)
        G = job.n_groups
        w1 = np.full((R, L, 1 + job.n_null, G), np.nan)
        ks = np.full_like(w1, np.nan)
        p = q = None
        example = {}
        for r, rel in enumerate(job.releases):
            rel_key = stream_key(rel.key)
            report = rel.release(half_df, make_rng(seed_sequence(job.seed, rel_key, t)))
            for a, adv in enumerate(job.adversaries):
                adv_rng = make_rng(seed_sequence(job.seed, rel_key, stream_key(adv.key), t))
                predictor = adv.fit(report, job.schema, adv_rng)
                u = checked_scores(predictor(job.lens_unique), adv.name)
                w1[r, a], ks[r, a], p, q = count_distances(u, sides)
                if job.keep_example:
                    example[(r, a)] = u[job.counts.cell_of].astype(np.float32)
        out.append({"trial": t, "w1": w1, "ks": ks, "p": p, "q": q,
                    "half": half if job.keep_example else None, "scores": example})
        job.keep_example = False
    return out


@dataclass
class AuditResult:
    """Tidy outputs of an audit (see ``coherence_audit``)."""
    trials: pd.DataFrame
    maxima: pd.DataFrame
    summary: pd.DataFrame
    releases: pd.DataFrame
    subgroups: pd.DataFrame
    excluded: pd.DataFrame
    example_half: np.ndarray
    example_scores: dict
    subgroup_masks: dict
    settings: dict

    def worst_adversaries(self) -> pd.DataFrame:
        """Each release's worst adversary, one row per release in the plan's order (see ``rank_worst``).

        Columns: ``release``, ``adversary``, the failure rate ``beta_hat`` with its verdict interval
        ``ci_low``-``ci_high`` (one-sided Clopper-Pearson: the lower bound at ``lower_confidence``,
        Bonferroni-corrected over the ``n_adversaries`` adversaries, the upper at ``upper_confidence``),
        ``alpha_hat``, ``null_beta_hat``, ``trials`` and that adversary's ``verdict``.
        """
        ranked = rank_worst(self.summary)
        first = ranked.drop_duplicates("release").set_index("release")
        order = [r for r in self.releases["release"] if r in first.index]
        out = first.loc[order, list(WORST_COLUMNS[1:])].reset_index()
        n_adv = self.summary.groupby("release", sort=False)["adversary"].size()
        conf = float(self.settings["confidence"])
        out["n_adversaries"] = n_adv.loc[order].to_numpy(int)
        out["upper_confidence"] = conf
        out["lower_confidence"] = 1 - (1 - conf) / out["n_adversaries"]
        return out

    def worst_adversary(self) -> pd.Series:
        """The worst adversary over every release (the row of ``worst_adversaries`` that ranks first
        under ``rank_worst``; a tie between releases goes to the release listed first)."""
        return rank_worst(self.worst_adversaries()).iloc[0]


WORST_COLUMNS = ("release", "adversary", "beta_hat", "ci_low", "ci_high", "alpha_hat", "null_beta_hat",
                 "trials", "verdict")


def rank_worst(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows of a per-adversary summary ordered worst first: the one definition of "worst adversary".

    Worst means the largest failure rate ``beta_hat`` (the share of trials in which some eligible
    subgroup's W1 exceeds alpha: the statistic the verdict tests against beta). Equal rates are
    common (several adversaries fail every trial, or none fails any), so ties go to the larger
    ``alpha_hat`` (the W1 reached in a beta share of trials: how far past coherence the adversary
    gets; a missing value ranks lowest), and remaining ties to the row listed first (the plan's
    order of releases, then adversaries). The sort is a stable lexicographic one, so the answer
    never depends on the sorting algorithm.
    """
    beta = summary["beta_hat"].to_numpy(float)
    alpha = np.nan_to_num(summary["alpha_hat"].to_numpy(float), nan=-np.inf)
    order = np.lexsort((np.arange(len(summary)), -alpha, -beta))
    return summary.iloc[order]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def coherence_audit(data: pd.DataFrame, release, adversaries, target: str, lens: Sequence[str],
                    subgroups, alpha: float = 0.1, beta: float = 0.05, gamma: int = 80, trials: int = 100,
                    seed: int = 0, progress: Progress | None = None, *,
                    positive=None, subgroup_order: int = 2, n_null_splits: int = 1,
                    confidence: float = 0.95, constants: str = "conservative",
                    n_jobs: int | None = None, protection: ProtectionUnit | None = None) -> AuditResult:
    """Audit one or more release algorithms against adversaries for (alpha, beta) coherence.

    ``release``: a Release or a list of them (compared on the same splits); ``adversaries``:
    Adversary objects or registry keys; ``subgroups``: Subgroup objects or column names (levels
    and intersections up to ``subgroup_order``). ``seed`` keys every stream of the audit (see
    ``_run_chunk``). Verdicts per spec Sec. 2.6. ``protection`` is the data's declared unit of
    protection (default: per row); with up to k rows per person every trial's release calibrates its
    noise to a whole person (sensitivity times k, or the fit at rho / k^2), as a release would.
    """
    releases = _as_list(release)
    advs = [make_adversary(a) if isinstance(a, str) else a for a in _as_list(adversaries)]
    if not releases:
        raise ValueError("Choose at least one release algorithm.")
    if not advs:
        raise ValueError("Choose at least one adversary.")
    lens = list(lens)
    if not lens:
        raise ValueError("Choose at least one lens column (what the predictor sees).")
    if not 0 < alpha <= 2:
        raise ValueError(f"alpha must lie in (0, 2]; got {alpha}.")
    if not 0 < beta < 1:
        raise ValueError(f"beta must lie strictly between 0 and 1; got {beta}.")
    if int(gamma) < 1:
        raise ValueError("gamma, the minimum subgroup size, must be at least 1.")
    if int(trials) < 1:
        raise ValueError("Run at least one trial.")
    if target not in data.columns:
        raise ValueError(f"Target {target!r} is not a column of the data.")
    if len(data) < 4:
        raise ValueError("The data need at least 4 rows to split in halves.")
    names = [r.name for r in releases]
    if len(set(names)) != len(names):
        raise ValueError("Two releases have the same name and parameters; give them different parameters.")
    adv_names = [a.name for a in advs]
    if len(set(adv_names)) != len(adv_names):
        raise ValueError("Two adversaries have the same name and parameters; give them different parameters.")

    strata = [c for r in releases for c in getattr(r, "strata", ())]
    columns = list(dict.fromkeys([*lens, target, *strata]))
    codes_df, domain, labels = encode_for_audit(data, columns)
    tlabels = labels[target]
    if positive is None:
        if len(tlabels) != 2:
            raise ValueError(f"Target {target!r} has {len(tlabels)} values; choose the positive value "
                             "(the audit is one-vs-rest).")
        positive = tlabels[-1]
    if positive not in tlabels:
        raise ValueError(f"{positive!r} is not a value of {target!r}; choose one of {tlabels[:20]}.")
    schema = AuditSchema(domain, labels, tuple(lens), target, tlabels.index(positive),
                         protection if protection is not None else ProtectionUnit())
    for r in releases:
        r.bind(schema)

    groups = [g if isinstance(g, Subgroup) else None for g in _as_list(subgroups)]
    if any(g is None for g in groups):
        cols = [c for c in _as_list(subgroups) if not isinstance(c, Subgroup)]
        groups = [g for g in groups if g is not None] + build_subgroups(data, cols, subgroup_order)
    if not groups:
        groups = [Subgroup("everyone", np.ones(len(data), bool))]
    seen = pd.Series([g.name for g in groups])
    if seen.duplicated().any():
        raise ValueError(f"Subgroup(s) {sorted(set(seen[seen.duplicated()]))} are defined twice; "
                         "rename the custom subgroup or drop its column from the subgroup columns.")
    sizes = np.array([int(np.asarray(g.mask).sum()) for g in groups])
    eligible = sizes >= int(gamma)
    members_all = np.column_stack([np.asarray(g.mask, bool) for g in groups])
    if members_all.shape[0] != len(data):
        raise ValueError("Every subgroup mask must have one entry per row of the data.")
    excluded = pd.DataFrame({"subgroup": [g.name for g, e in zip(groups, eligible) if not e],
                             "size": sizes[~eligible]})
    elig_idx = np.flatnonzero(eligible)
    if elig_idx.size == 0:
        raise ValueError(f"No subgroup has at least gamma={gamma} members; lower gamma or choose coarser subgroups.")
    members = members_all[:, elig_idx]
    gnames = [groups[i].name for i in elig_idx]

    codes = codes_df.to_numpy(np.int64)
    lens_sizes = schema.lens_sizes
    cell = np.ravel_multi_index(tuple(codes[:, [columns.index(c) for c in lens]].T), lens_sizes)
    uniq_cells, inverse = np.unique(cell, return_inverse=True)
    lens_unique = np.column_stack(np.unravel_index(uniq_cells, lens_sizes)).astype(np.int64)

    n_chunks = min(int(trials), 25)
    bounds = np.linspace(0, int(trials), n_chunks + 1).astype(int)
    counts = SideCounts(inverse, members, len(uniq_cells))      # once per audit, shared by every trial
    jobs = [_Chunk(list(range(a, b)), int(seed), codes, columns, schema, releases, advs, members.shape[1],
                   lens_unique, counts, int(n_null_splits), a == 0)
            for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    chunks = map_trials(_run_chunk, jobs, n_jobs=n_jobs, progress=progress, label="audit trials")
    results = [r for c in chunks for r in c]

    rel_names = names
    T, R, L, G = len(results), len(releases), len(advs), len(gnames)
    w1 = np.stack([r["w1"] for r in results])          # (T, R, L, 1+J, G)
    ks = np.stack([r["ks"] for r in results])
    p = np.stack([r["p"][0] for r in results])          # (T, G) real split
    q = np.stack([r["q"][0] for r in results])
    tt, rr, aa, gg = np.meshgrid(np.arange(T), np.arange(R), np.arange(L), np.arange(G), indexing="ij")
    trials_df = pd.DataFrame({
        "trial": tt.ravel(), "release": np.array(rel_names, object)[rr.ravel()],
        "adversary": np.array(adv_names, object)[aa.ravel()], "subgroup": np.array(gnames, object)[gg.ravel()],
        "p": p[tt.ravel(), gg.ravel()], "q": q[tt.ravel(), gg.ravel()],
        "w1": w1[:, :, :, 0, :].ravel(), "ks": ks[:, :, :, 0, :].ravel(),
        "w1_null": w1[:, :, :, 1, :].ravel() if n_null_splits else np.nan,
        "ks_null": ks[:, :, :, 1, :].ravel() if n_null_splits else np.nan,
    })
    dmax = np.fmax.reduce(w1, axis=-1)                  # (T, R, L, 1+J), NaN ignored
    ksmax = np.fmax.reduce(ks, axis=-1)
    t2, r2, a2 = np.meshgrid(np.arange(T), np.arange(R), np.arange(L), indexing="ij")
    maxima = pd.DataFrame({
        "trial": t2.ravel(), "release": np.array(rel_names, object)[r2.ravel()],
        "adversary": np.array(adv_names, object)[a2.ravel()],
        "D": dmax[..., 0].ravel(), "KS": ksmax[..., 0].ravel(),
        "D_null": dmax[..., 1].ravel() if n_null_splits else np.nan,
    })

    n = len(data)
    conf_fail = 1 - (1 - confidence) / L                # Bonferroni on FAIL bounds only
    rows, rel_rows, sub_rows = [], [], []
    for r, rel in enumerate(releases):
        g = rel.privacy
        th, basis, gamma_fn = release_theory(g, n, min(alpha, 2.0), beta, len(groups), constants)
        min_elig = int(sizes[eligible].min())
        # the DP-consistency check certifies with conservative constants only (printed ones are unproven)
        th_check = th if constants == "conservative" else release_theory(g, n, alpha, beta, len(groups))[0]
        certifies = th_check.gamma is not None and th_check.gamma <= min_elig
        verdicts = []
        for a in range(L):
            D = dmax[:, r, a, 0]
            # every null split pooled for the null's rate and quantile; the paired excess uses their mean
            D0_all = dmax[:, r, a, 1:] if n_null_splits else np.full((T, 1), np.nan)
            D0 = D0_all.mean(axis=1)
            x = int(np.sum(D > alpha + TOL))
            x0 = int(np.sum(D0_all > alpha + TOL))
            lo, hi = clopper_pearson(x, T, conf_fail)[0], clopper_pearson(x, T, confidence)[1]
            v = decide(lo, hi, beta)
            exc = D - D0
            valid = np.isfinite(exc) & (exc != 0)
            sign_p = float(stats.binomtest(int(np.sum(exc[valid] > 0)), int(valid.sum()), 0.5,
                                           alternative="greater").pvalue) if valid.sum() else 1.0
            warns = []
            if x0 / D0_all.size > beta:
                warns.append("alpha below noise floor: even a predictor that learned nothing exceeds alpha "
                             "this often; raise alpha or gamma")
            if v == "FAIL" and sign_p >= 0.05:
                warns.append("sampling-dominated: the real split is not clearly worse than the null")
            if v == "FAIL" and certifies:
                warns.append("inconsistent with declared DP: check the mechanism or the audit")
            need = trials_needed(x, T, beta, confidence, fail_confidence=conf_fail) if v == "INCONCLUSIVE" else None
            verdicts.append(v)
            rows.append({
                "release": rel_names[r], "adversary": adv_names[a], "trials": T, "exceedances": x,
                "beta_hat": x / T, "ci_low": lo, "ci_high": hi, "null_exceedances": x0,
                "null_beta_hat": x0 / D0_all.size,
                "alpha_hat": alpha_at_beta(D, beta), "alpha_hat_null": alpha_at_beta(D0_all.ravel(), beta),
                "excess_median": float(np.nanmedian(exc)) if np.isfinite(exc).any() else float("nan"),
                "excess_mean": float(np.nanmean(exc)) if np.isfinite(exc).any() else float("nan"),
                "sign_test_p": sign_p, "verdict": v, "trials_needed": need, "warnings": "; ".join(warns),
            })
            W = w1[:, r, a, 0, :]
            W0_all = w1[:, r, a, 1:, :].reshape(-1, G) if n_null_splits else np.full_like(W, np.nan)
            W0 = w1[:, r, a, 1:, :].mean(axis=1) if n_null_splits else W0_all
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN subgroups (never both halves filled)
                stats_sub = {
                    "median_w1": np.nanmedian(W, axis=0), "q_w1": np.nanquantile(W, 1 - beta, axis=0),
                    "q05_w1": np.nanquantile(W, 0.05, axis=0), "q95_w1": np.nanquantile(W, 0.95, axis=0),
                    "exceed_rate": np.mean(W > alpha + TOL, axis=0),
                    "median_null": np.nanmedian(W0_all, axis=0), "q_null": np.nanquantile(W0_all, 1 - beta, axis=0),
                    "excess_median": np.nanmedian(W - W0, axis=0), "nan_trials": np.isnan(W).sum(axis=0),
                }
            for j, gname in enumerate(gnames):
                size = int(sizes[elig_idx[j]])
                ca = theory.certified_alpha(size, gamma_fn, constants) if gamma_fn is not None else None
                sub_rows.append({"release": rel_names[r], "adversary": adv_names[a], "subgroup": gname,
                                 "size": size, **{k: float(v_[j]) for k, v_ in stats_sub.items()},
                                 "certified_alpha": np.nan if ca is None else ca})
        overall = overall_verdict(verdicts)
        rel_rows.append({
            "release": rel_names[r], "key": rel.key, "verdict": overall,
            "verdict_shown": verdict_label(overall, g.kind), "privacy": g.kind,
            "privacy_statement": g.statement, "epsilon": getattr(rel, "epsilon", None),
            "theory_gamma": th.gamma, "theory_binding": th.binding, "theory_basis": basis,
            "theory_note": th.reason, "certified_subgroups": int(np.sum(sizes[eligible] >= th.gamma)) if th.gamma else 0,
            "eligible_subgroups": int(eligible.sum()),
        })
    summary = pd.DataFrame(rows)
    sub_df = pd.DataFrame(sub_rows)
    example = results[0]
    ex_scores = {(rel_names[r], adv_names[a]): s for (r, a), s in example["scores"].items()}
    settings = {"n": n, "n_half": n // 2, "alpha": alpha, "beta": beta, "gamma": int(gamma), "trials": T,
                "confidence": confidence, "constants": constants, "lens": lens, "target": target,
                "positive": str(positive), "n_subgroups": len(groups), "n_eligible": int(eligible.sum()),
                "n_null_splits": int(n_null_splits), "unit_of_protection": schema.protection.words}
    return AuditResult(trials_df, maxima, summary, pd.DataFrame(rel_rows), sub_df, excluded,
                       example["half"], ex_scores, {g.name: np.asarray(g.mask, bool) for g in groups},
                       settings)


def coherence_curve(maxima: pd.DataFrame, grid: np.ndarray | None = None, confidence: float = 0.95) -> pd.DataFrame:
    """beta_hat(alpha) and its one-sided CP bounds on an alpha grid, real and null, per release x adversary."""
    grid = np.linspace(0, 2, 101) if grid is None else np.asarray(grid, float)
    parts = []
    for (rel, adv), g in maxima.groupby(["release", "adversary"], sort=False):
        T = len(g)
        for col, which in (("D", "release"), ("D_null", "null")):
            d = np.nan_to_num(g[col].to_numpy(float), nan=0.0)
            x = (d[None, :] > grid[:, None] + TOL).sum(axis=1)
            lo = np.where(x == 0, 0.0, stats.beta.ppf(1 - confidence, np.maximum(x, 1), T - x + 1))
            hi = np.where(x == T, 1.0, stats.beta.ppf(confidence, x + 1, np.maximum(T - x, 1)))
            parts.append(pd.DataFrame({"release": rel, "adversary": adv, "split": which, "alpha": grid,
                                       "beta_hat": x / T, "ci_low": lo, "ci_high": hi}))
    return pd.concat(parts, ignore_index=True)


def theory_alpha_curve(guarantee_of_eps: Callable[[float], PrivacyGuarantee], epsilons: np.ndarray, n: int,
                       sizes: Sequence[int], beta: float, n_groups: int) -> pd.DataFrame:
    """Certified alpha for subgroups of the given sizes as epsilon varies, both constant modes (NaN = vacuous)."""
    rows = []
    for eps in np.asarray(epsilons, float):
        g = guarantee_of_eps(float(eps))
        for mode in theory.CONSTANTS:
            fn, _ = _theory_fn(g, n, beta, n_groups, mode)
            for size in sizes:
                ca = theory.certified_alpha(int(size), fn, mode) if fn is not None else None
                rows.append({"epsilon": float(eps), "constants": mode, "size": int(size),
                             "certified_alpha": np.nan if ca is None else ca})
    return pd.DataFrame(rows)
