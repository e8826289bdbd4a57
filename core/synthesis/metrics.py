"""Utility and disparity metrics as tidy frames: marginal TVD, the paper's parity error and max
disparity (Rosenblatt et al., Def. 11 and Sec. 5), and train-on-synthetic test-on-real utility."""
from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from core.synthesis.marginals import one_way_counts, tvd, two_way_counts


def one_way_tvd(real: pd.DataFrame, synth: pd.DataFrame, domain: Mapping[str, int],
                columns: Sequence[str] | None = None) -> pd.DataFrame:
    """TVD of each column's marginal: columns ``column``, ``tvd``."""
    cols = list(columns if columns is not None else real.columns)
    return pd.DataFrame({"column": cols, "tvd": [
        tvd(one_way_counts(real[c].to_numpy(), domain[c]), one_way_counts(synth[c].to_numpy(), domain[c]))
        for c in cols]})


def two_way_tvd(real: pd.DataFrame, synth: pd.DataFrame, domain: Mapping[str, int],
                columns: Sequence[str] | None = None) -> pd.DataFrame:
    """TVD of every pair's two-way marginal: columns ``column_a``, ``column_b``, ``tvd``."""
    cols = list(columns if columns is not None else real.columns)
    rows = []
    for i, a in enumerate(cols):
        ra, sa = real[a].to_numpy(), synth[a].to_numpy()
        for b in cols[i + 1:]:
            rows.append((a, b, tvd(two_way_counts(ra, real[b].to_numpy(), domain[a], domain[b]),
                                   two_way_counts(sa, synth[b].to_numpy(), domain[a], domain[b]))))
    return pd.DataFrame(rows, columns=["column_a", "column_b", "tvd"])


def workload_error(real: pd.DataFrame, synth: pd.DataFrame, domain: Mapping[str, int],
                   columns: Sequence[str] | None = None, order: int = 3) -> float:
    """Workload error over every ``order``-way marginal (Rosenblatt et al., Def. 14; their Figure 9).

    (1/|W|) sum_S || p_S(real) - p_S(synth) ||_1 with each marginal normalised to probabilities, so
    data sets of different sizes compare (the spec's repair; twice the mean TVD). NaN with fewer
    than ``order`` columns.
    """
    cols = list(columns if columns is not None else real.columns)
    if len(cols) < order:
        return float("nan")
    r, q = real[cols].to_numpy(np.int64), synth[cols].to_numpy(np.int64)
    total = 0.0
    triples = list(combinations(range(len(cols)), order))
    for subset in triples:
        sizes = tuple(int(domain[cols[i]]) for i in subset)
        n_cells = int(np.prod(sizes))
        rc = np.bincount(np.ravel_multi_index(tuple(r[:, subset].T), sizes), minlength=n_cells)
        qc = np.bincount(np.ravel_multi_index(tuple(q[:, subset].T), sizes), minlength=n_cells)
        total += 2 * tvd(rc.astype(float), qc.astype(float))      # L1 of the normalised marginals
    return total / len(triples)


def group_keys(df: pd.DataFrame, strata_columns: Sequence[str], domain: Mapping[str, int]) -> np.ndarray:
    """Flat stratum index of each row in the product of the strata domains."""
    sizes = tuple(int(domain[c]) for c in strata_columns)
    codes = df[list(strata_columns)].to_numpy(np.int64)
    return np.ravel_multi_index(tuple(codes.T), sizes) if len(df) else np.zeros(0, np.int64)


def tvd_by_stratum(real: pd.DataFrame, synth: pd.DataFrame, domain: Mapping[str, int],
                   strata_columns: Sequence[str]) -> pd.DataFrame:
    """Mean one-way and two-way TVD of the non-strata columns inside each stratum.

    Real and synthetic rows are each normalised within the stratum. Strata with no real rows
    are skipped; a stratum missing from the synthetic data scores the uniform table's TVD.
    Columns: ``stratum`` (flat index), ``real_rows``, ``synth_rows``, ``tvd_1way``, ``tvd_2way``,
    ``workload_3way`` (``workload_error`` over the three-way marginals).
    """
    others = [c for c in real.columns if c not in strata_columns]
    rk, sk = group_keys(real, strata_columns, domain), group_keys(synth, strata_columns, domain)
    rows = []
    for g in np.unique(rk):
        r, s = real.loc[rk == g, others], synth.loc[sk == g, others]
        one = one_way_tvd(r, s, domain, others)["tvd"].mean()
        two = two_way_tvd(r, s, domain, others)["tvd"].mean() if len(others) > 1 else np.nan
        rows.append((int(g), len(r), len(s), one, two, workload_error(r, s, domain, others)))
    return pd.DataFrame(rows, columns=["stratum", "real_rows", "synth_rows", "tvd_1way", "tvd_2way", "workload_3way"])


def _group_means(df: pd.DataFrame, keys: np.ndarray, groups: np.ndarray, cols: Sequence[str]) -> np.ndarray:
    """(len(groups), len(cols)) matrix of column means per group (NaN for an empty group)."""
    vals = df[list(cols)].to_numpy(float)
    pos = np.searchsorted(groups, keys)
    ok = (pos < groups.size) & (groups[np.minimum(pos, groups.size - 1)] == keys)
    sums = np.zeros((groups.size, len(cols)))
    np.add.at(sums, pos[ok], vals[ok])
    counts = np.bincount(pos[ok], minlength=groups.size).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts[:, None]


PARITY_DEFINITIONS = {
    "proportions": "per-category proportions, relative error with a small-denominator guard (default)",
    "paper_codes": "paper's Def. 11 on means of integer codes (nominal columns averaged as numbers)",
}
PARITY_GUARD = 0.05


def _category_shares(df: pd.DataFrame, keys: np.ndarray, k: int, col: str, size: int) -> np.ndarray:
    """(k + 1, size) shares of each category of ``col`` per group (rows 0..k-1) and overall (row k);
    a group with no rows has all-zero shares."""
    codes = df[col].to_numpy(np.int64)
    counts = np.bincount(keys * size + codes, minlength=k * size).reshape(k, size).astype(float)
    counts = np.vstack([counts, counts.sum(0, keepdims=True)])
    totals = counts.sum(1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def _parity_proportions(real, synth, domain, strata_columns, cols, omega, average, guard):
    """Parity error on one-hot category proportions (the stratification spec's repair of Def. 11).

    For a column c, group g and category v, with real share p and synthetic share q:
    r(g, c) = mean over v of |p - q| / max(p, guard). phi sums, per column, omega r(all, c) plus the
    group terms, then sums over columns. Relabelling categories moves the shares and is scored; a
    handful of rows in a near-empty category is bounded by the guard instead of exploding.
    """
    rk_all = group_keys(real, strata_columns, domain)
    groups = np.unique(rk_all)
    k = groups.size
    omega = 1.0 / k if omega is None else omega
    rk = np.searchsorted(groups, rk_all)
    sk_all = group_keys(synth, strata_columns, domain)
    pos = np.searchsorted(groups, sk_all)
    inside = (pos < k) & (groups[np.minimum(pos, k - 1)] == sk_all)
    synth_in = synth.loc[inside]
    phi, worst = 0.0, np.nan
    for col in cols:
        size = int(domain[col])
        p = _category_shares(real, rk, k, col, size)
        q = _category_shares(synth_in, pos[inside], k, col, size)
        q[k] = _category_shares(synth, np.zeros(len(synth), np.int64), 1, col, size)[1]
        r = (np.abs(p - q) / np.maximum(p, guard)).mean(1)
        group_term = r[:k].sum() / (k if average else 1)
        phi += omega * r[k] + group_term
        worst = np.nanmax([worst, r[:k].max()]) if k else worst
    return {"parity_error": float(phi), "max_disparity": float(worst)}


def _parity_paper_codes(real, synth, domain, strata_columns, cols, omega, average):
    """Def. 11 as the paper computes it: relative error of each column's mean of integer codes."""
    rk, sk = group_keys(real, strata_columns, domain), group_keys(synth, strata_columns, domain)
    groups = np.unique(rk)
    k = groups.size
    omega = 1.0 / k if omega is None else omega
    true_g, syn_g = _group_means(real, rk, groups, cols), _group_means(synth, sk, groups, cols)
    true_all, syn_all = real[cols].to_numpy(float).mean(0), synth[cols].to_numpy(float).mean(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel_g = np.abs((true_g - syn_g) / np.where(true_g == 0, np.nan, true_g))
        rel_all = np.abs((true_all - syn_all) / np.where(true_all == 0, np.nan, true_all))
    group_term = np.nansum(rel_g, axis=0) / (k if average else 1)
    phi = np.nansum(omega * np.nan_to_num(rel_all) + group_term)
    finite = rel_g[np.isfinite(rel_g)]
    return {"parity_error": float(phi), "max_disparity": float(finite.max()) if finite.size else float("nan")}


def parity_error(real: pd.DataFrame, synth: pd.DataFrame, domain: Mapping[str, int],
                 strata_columns: Sequence[str], columns: Sequence[str] | None = None,
                 omega: float | None = None, average: bool = False, definition: str = "proportions",
                 guard: float = PARITY_GUARD) -> dict[str, float]:
    """Parity error and max disparity (Rosenblatt et al., Def. 11 and Sec. 5), by ``definition``.

    "proportions" (default): every column is nominal, so each group's one-hot category shares are
    compared, relative errors divided by max(real share, ``guard``). "paper_codes": the paper's
    version on means of integer codes (a relative error of each column's mean; a real mean of 0 is
    skipped), kept for comparison with the published figures. omega defaults to 1/k; ``average``
    divides the group sum by k. Groups are those with real rows.
    """
    if definition not in PARITY_DEFINITIONS:
        raise ValueError(f"Parity definition must be one of {list(PARITY_DEFINITIONS)}; got {definition!r}.")
    cols = list(columns if columns is not None else real.columns)
    if definition == "paper_codes":
        return _parity_paper_codes(real, synth, domain, strata_columns, cols, omega, average)
    if not (0 < guard <= 1):
        raise ValueError(f"The small-denominator guard must lie in (0, 1]; got {guard}.")
    return _parity_proportions(real, synth, domain, strata_columns, cols, omega, average, guard)


def ml_utility(synth_train: pd.DataFrame, real_test: pd.DataFrame, target: str, group: np.ndarray,
               n_estimators: int = 30, seed: int = 42) -> tuple[dict[str, float], pd.DataFrame]:
    """Train on synthetic, test on real: accuracy overall and per group, FPR/FNR gaps (fairlearn).

    A random forest (``n_estimators`` trees, fixed seed) predicts ``target`` code > 0 from the
    other columns' codes. Returns overall figures and a per-group frame (group, accuracy, fpr, fnr).
    A group without real positives (negatives) has no FNR (FPR): NaN, and it does not enter the gap.
    """
    from fairlearn.metrics import MetricFrame, false_negative_rate, false_positive_rate
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import accuracy_score

    features = [c for c in synth_train.columns if c != target]
    y_train = (synth_train[target].to_numpy() > 0).astype(int)
    y_test = (real_test[target].to_numpy() > 0).astype(int)
    if np.unique(y_train).size < 2:
        pred = np.full(y_test.size, y_train[0] if y_train.size else 0)
    else:
        model = RandomForestClassifier(n_estimators=n_estimators, max_depth=12, random_state=seed, n_jobs=1)
        model.fit(synth_train[features].to_numpy(), y_train)
        pred = model.predict(real_test[features].to_numpy())
    mf = MetricFrame(metrics={"accuracy": accuracy_score, "fpr": false_positive_rate,
                              "fnr": false_negative_rate},
                     y_true=y_test, y_pred=pred, sensitive_features=pd.Series(group, name="group"))
    by_group = mf.by_group.reset_index()
    # fairlearn scores a rate whose denominator is empty as 0 (a group with no real positives has
    # "FNR 0"), which would force the gap to the largest rate seen; such a rate is undefined, so
    # it is NaN here and left out of the gap
    labels = pd.Series(group, name="group")
    positives = pd.Series(y_test, index=labels.index).groupby(labels).sum()
    negatives = pd.Series(1 - y_test, index=labels.index).groupby(labels).sum()
    by_group["fnr"] = by_group["fnr"].where(by_group["group"].map(positives).to_numpy() > 0)
    by_group["fpr"] = by_group["fpr"].where(by_group["group"].map(negatives).to_numpy() > 0)

    def gap(rates: pd.Series) -> float:
        rates = rates.dropna()
        return float(rates.max() - rates.min()) if len(rates) else float("nan")

    overall = {"accuracy": float(mf.overall["accuracy"]), "fpr_gap": gap(by_group["fpr"]),
               "fnr_gap": gap(by_group["fnr"])}
    return overall, by_group
