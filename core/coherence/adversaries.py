"""Adversaries: turn a release into a fixed confidence-rated predictor h(lens) in [-1, 1].

Each adversary sees only the report (and the public schema), never the data or the split.
Microdata and count tables are both read as a weighted training set over lens codes, so
every adversary works on either kind of report. Scores are 2 p - 1 for a probability p that
the target holds (coherence spec Sec. 1.1 and 2.7).

``ADVERSARIES`` is a :class:`core.contracts.Registry` (key -> Spec with a Params dataclass of
defaults, bounds and help): a new adversary is one class, one Params and one registry line.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from core.coherence.releases import AuditSchema, MicrodataReport, TableReport, plugin_spec
from core.contracts import Registry, check_params, param

Predictor = Callable[[np.ndarray], np.ndarray]


def training_set(report, schema: AuditSchema) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lens codes (m, L), binary target (m,), weights (m,)) read from a report.

    Table cells count as records weighted by their counts clipped at 0 (noisy tables may be negative).
    """
    if isinstance(report, MicrodataReport):
        rows = report.rows
        x = np.column_stack([rows[c].to_numpy(np.int64) for c in schema.lens]) if len(rows) \
            else np.zeros((0, len(schema.lens)), np.int64)
        y = (rows[schema.target].to_numpy(np.int64) == schema.positive_code).astype(np.int64)
        return x, y, np.ones(len(rows))
    if isinstance(report, TableReport):
        counts = np.clip(report.counts, 0.0, None)
        cell, yy = np.nonzero(counts)
        x = np.column_stack(np.unravel_index(cell, schema.lens_sizes)).astype(np.int64) if cell.size \
            else np.zeros((0, len(schema.lens)), np.int64)
        return x, yy.astype(np.int64), counts[cell, yy]
    raise ValueError(f"Unsupported report type {type(report).__name__}.")


def one_hot(x: np.ndarray, sizes: tuple[int, ...]) -> sp.csr_matrix:
    """Sparse one-hot encoding of lens codes with fixed (public) column sizes."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    m, L = x.shape
    cols = (x + offsets).ravel()
    rows = np.repeat(np.arange(m), L)
    return sp.csr_matrix((np.ones(m * L), (rows, cols)), shape=(m, int(np.sum(sizes))))


def _constant(p: float) -> Predictor:
    score = float(np.clip(2.0 * p - 1.0, -1.0, 1.0))
    return lambda x: np.full(len(x), score)


def _base_rate(y: np.ndarray, w: np.ndarray) -> float:
    total = w.sum()
    return 0.5 if total <= 0 else float((w * y).sum() / total)


class Adversary:
    """Base: ``fit(report, schema, rng) -> predictor`` on lens codes; the predictor is deterministic."""
    key = "base"
    label = "base"

    @property
    def name(self) -> str:
        """How results name this adversary (its label, plus any non-default parameter)."""
        return self.__dict__.get("_name", self.label)

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    def fit(self, report, schema: AuditSchema, rng: np.random.Generator) -> Predictor:  # pragma: no cover
        raise NotImplementedError


class LogisticAdversary(Adversary):
    """Logistic regression on one-hot lens codes, trained on the released (weighted) records."""
    key, label = "logistic", "Logistic regression"

    def __init__(self, C: float = 1.0) -> None:
        self.C = float(C)

    def fit(self, report, schema, rng):
        from sklearn.linear_model import LogisticRegression

        x, y, w = training_set(report, schema)
        if w.sum() <= 0 or np.unique(y[w > 0]).size < 2:
            return _constant(_base_rate(y, w))
        sizes = schema.lens_sizes
        model = LogisticRegression(C=self.C, max_iter=300)
        model.fit(one_hot(x, sizes), y, sample_weight=w / w.mean())
        return lambda q: 2.0 * model.predict_proba(one_hot(q, sizes))[:, 1] - 1.0


class BoostingAdversary(Adversary):
    """Histogram gradient boosting with categorical lens features, trained on the release."""
    key, label = "boosting", "Gradient boosting"

    def __init__(self, max_iter: int = 40, learning_rate: float = 0.2) -> None:
        self.max_iter = int(max_iter)
        self.learning_rate = float(learning_rate)

    def fit(self, report, schema, rng):
        from sklearn.ensemble import HistGradientBoostingClassifier

        x, y, w = training_set(report, schema)
        if w.sum() <= 0 or np.unique(y[w > 0]).size < 2:
            return _constant(_base_rate(y, w))
        cat = [s <= 255 for s in schema.lens_sizes]
        model = HistGradientBoostingClassifier(
            max_iter=self.max_iter, learning_rate=self.learning_rate, categorical_features=cat,
            early_stopping=False, random_state=int(rng.integers(2**31 - 1)))
        model.fit(x, y, sample_weight=w / w.mean())
        return lambda q: 2.0 * model.predict_proba(q)[:, 1] - 1.0


class NaiveBayesAdversary(Adversary):
    """Naive Bayes from released one-way tables of every lens column by target (add-one smoothing)."""
    key, label = "naive_bayes", "Naive Bayes from tables"

    def fit(self, report, schema, rng):
        x, y, w = training_set(report, schema)
        sizes = schema.lens_sizes
        prior = np.array([w[y == 0].sum(), w[y == 1].sum()]) + 1.0
        log_tables = []
        for j, size in enumerate(sizes):
            t = np.stack([np.bincount(x[y == k, j], weights=w[y == k], minlength=size) for k in (0, 1)]) + 1.0
            log_tables.append(np.log(t / t.sum(axis=1, keepdims=True)))
        log_prior = np.log(prior / prior.sum())

        def predict(q: np.ndarray) -> np.ndarray:
            logit = np.full(len(q), log_prior[1] - log_prior[0])
            for j, lt in enumerate(log_tables):
                logit += lt[1, q[:, j]] - lt[0, q[:, j]]
            return 2.0 / (1.0 + np.exp(-logit)) - 1.0
        return predict


def _cell_ids(x: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    if x.shape[0] == 0:
        return np.zeros(0, np.int64)
    if np.prod(sizes, dtype=np.float64) < 2**62:
        return np.ravel_multi_index(tuple(x.T), sizes)
    raise ValueError("The lens is too fine to index; choose fewer lens columns.")


class NearestNeighbourAdversary(Adversary):
    """Memorising matcher: the released target of the nearest record, confidence max(0, 1 - d/tau).

    d is the Hamming distance on lens columns; tau = 1 keeps exact matches only (several exact
    matches vote by their weighted mean). Spec Sec. 2.7, NearestNeighbourAttribute.
    """
    key, label = "nearest_neighbour", "Nearest-neighbour matcher"

    def __init__(self, tau: float = 1.0) -> None:
        self.tau = float(tau)

    def fit(self, report, schema, rng):
        x, y, w = training_set(report, schema)
        sizes = schema.lens_sizes
        keep = w >= 0.5                       # a table cell counts as a record only if its count rounds to >= 1
        x, y, w = x[keep], y[keep], w[keep]
        ids = _cell_ids(x, sizes)
        uniq, inv = np.unique(ids, return_inverse=True)
        wy = np.bincount(inv, weights=w * y, minlength=uniq.size)
        ww = np.bincount(inv, weights=w, minlength=uniq.size)
        vote = 2.0 * wy / np.maximum(ww, 1e-300) - 1.0
        tau = self.tau
        tree = None
        if tau > 1 and uniq.size:
            from scipy.spatial import cKDTree
            ux = np.column_stack(np.unravel_index(uniq, sizes))
            tree = cKDTree(one_hot(ux, sizes).toarray())

        def predict(q: np.ndarray) -> np.ndarray:
            out = np.zeros(len(q))
            if uniq.size == 0:
                return out
            qid = _cell_ids(q, sizes)
            pos = np.clip(np.searchsorted(uniq, qid), 0, uniq.size - 1)
            hit = uniq[pos] == qid
            out[hit] = vote[pos[hit]]
            if tree is not None and (~hit).any():
                d, j = tree.query(one_hot(q[~hit], sizes).toarray(), k=1, p=1)
                out[~hit] = vote[j] * np.maximum(0.0, 1.0 - (d / 2.0) / tau)
            return out
        return predict


class LinkageAdversary(Adversary):
    """Membership by exact linkage: +1 if a person's lens values appear in the release, else -1."""
    key, label = "linkage", "Exact linkage (membership)"

    def fit(self, report, schema, rng):
        x, _, w = training_set(report, schema)
        sizes = schema.lens_sizes
        present = np.unique(_cell_ids(x[w >= 0.5], sizes))

        def predict(q: np.ndarray) -> np.ndarray:
            return np.where(np.isin(_cell_ids(q, sizes), present), 1.0, -1.0)
        return predict


class RandomScoreAdversary(Adversary):
    """Null adversary: a fixed pseudo-random score per lens cell, ignoring the report."""
    key, label = "random", "Random score (null)"

    def __init__(self, salt: int = 12345) -> None:
        self.salt = int(salt)

    def fit(self, report, schema, rng):
        sizes = schema.lens_sizes
        salt = np.uint64(self.salt)

        def predict(q: np.ndarray) -> np.ndarray:
            h = _cell_ids(q, sizes).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + salt
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
            return 2.0 * (h >> np.uint64(11)).astype(float) / 2.0**53 - 1.0
        return predict


class _Checked:
    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class LogisticParams(_Checked):
    C: float = param(1.0, label="inverse regularisation C", low=1e-4, high=1e4, step=0.1,
                     help="Larger C fits the released records more closely.")


@dataclass(frozen=True)
class BoostingParams(_Checked):
    max_iter: int = param(40, label="boosting rounds", low=1, high=500, help="Number of trees.")
    learning_rate: float = param(0.2, label="learning rate", low=0.001, high=1.0, step=0.05,
                                 help="Shrinkage of each tree's contribution.")


@dataclass(frozen=True)
class NaiveBayesParams(_Checked):
    """Naive Bayes takes no parameter (add-one smoothing is fixed)."""


@dataclass(frozen=True)
class NearestNeighbourParams(_Checked):
    tau: float = param(1.0, label="match radius tau (lens columns)", low=0.01, high=50.0, step=0.5,
                       help="1 keeps exact matches only; larger values also score near matches, with "
                            "confidence falling linearly in the number of differing lens columns.")


@dataclass(frozen=True)
class LinkageParams(_Checked):
    """Exact linkage takes no parameter."""


@dataclass(frozen=True)
class RandomScoreParams(_Checked):
    salt: int = param(12345, label="salt", low=0, high=2**31 - 1,
                      help="Picks which fixed pseudo-random score each lens cell gets.")


ADVERSARIES: Registry = Registry("adversary", [
    plugin_spec(LogisticAdversary, LogisticParams),
    plugin_spec(BoostingAdversary, BoostingParams),
    plugin_spec(NaiveBayesAdversary, NaiveBayesParams),
    plugin_spec(NearestNeighbourAdversary, NearestNeighbourParams),
    plugin_spec(LinkageAdversary, LinkageParams),
    plugin_spec(RandomScoreAdversary, RandomScoreParams),
])


def adversary_params(key: str, **values):
    """The Params of adversary ``key`` from keyword values; unknown names raise ValueError."""
    spec = ADVERSARIES[key]
    unknown = set(values) - {f.name for f in dataclasses.fields(spec.params)}
    if unknown:
        raise ValueError(f"Adversary {key!r} takes no parameter(s) {sorted(unknown)}.")
    return spec.params(**values)


def make_adversary(key: str, **values) -> Adversary:
    """An adversary from its registry key and parameter values; its name spells out non-default values."""
    spec = ADVERSARIES[key]
    params = adversary_params(key, **values)
    adversary = spec.build(params)
    default = spec.default_params()
    changed = [f"{f.name}={getattr(params, f.name)}" for f in dataclasses.fields(params)
               if getattr(params, f.name) != getattr(default, f.name)]
    adversary.name = f"{spec.label} ({', '.join(changed)})" if changed else spec.label
    return adversary


def checked_scores(scores: np.ndarray, name: str) -> np.ndarray:
    """Scores validated to lie in [-1, 1]; tiny overshoots (<= 1e-9) are clipped, others raise."""
    s = np.asarray(scores, float)
    if not np.all(np.isfinite(s)):
        raise ValueError(f"Adversary {name!r} produced non-finite scores.")
    if np.any(np.abs(s) > 1.0 + 1e-9):
        raise ValueError(f"Adversary {name!r} produced scores outside [-1, 1].")
    return np.clip(s, -1.0, 1.0)
