"""One synthesizer per stratum with the full budget (parallel composition), recombined by size.

Strata are all combinations of the public domains of the strata columns, never only the
combinations seen in the data, so the partition does not depend on the private data. Each
stratum's model sees only its own rows, without the (constant) strata columns, which are added
back after sampling. Sizes are either declared public by the user or estimated with a Gaussian
count histogram that takes its own share of the budget.

Under DP counts nothing the wrapper records (ledger, strata table) holds an exact stratum size:
only the noisy sizes, which are the ones that steer the release and its row count. The ledger
holds every spend of every stratum's fit (AIM's and GEM's rounds line by line), each stratum one
part of the parallel group "strata": lines add up inside a stratum and the largest stratum counts.

Speed and progress: strata are fitted one after another in this process by default
(``n_jobs=1``), where synthesizers that compile programs (GEM, AIM) reuse them from stratum to
stratum, and each stratum's ``fit`` receives the progress callback when it takes one, its
messages prefixed with "stratum s of k (key)"; the callback may raise ``Cancelled`` to stop the
whole fit. With ``n_jobs`` other than 1 strata go to local worker processes, whose rounds are
relayed back (``core.synthesis.round_relay``), from a Dask cluster's workers too.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.numeric import largest_remainder as rounded
from core.parallel import map_trials, spawn_rngs
from core.privacy.ledger import BudgetLedger
from core.synthesis.encoding import check_codes
from core.synthesis.fit_ledger import record_fit
from core.synthesis.noise import noise_source
from core.synthesis.round_relay import relayed_map
from core.synthesis.strata import StrataIndex

SIZE_POLICIES = ("public", "dp_count")
SMALL_ACTIONS = ("keep", "merge", "drop")
MERGED = "merged small strata"
MERGED_COLUMN = "__merged_stratum__"


def largest_remainder(weights: np.ndarray, n: int) -> np.ndarray:
    """Split ``n`` rows in proportion to ``weights`` so the parts sum to exactly ``n``."""
    w = np.asarray(weights, float)
    if n <= 0 or w.sum() <= 0:
        return np.zeros(w.size, np.int64)
    return rounded(w / w.sum() * n, np.zeros(w.size, np.int64), np.array([n]))


@dataclass
class _FitJob:
    key: str
    rows: pd.DataFrame
    domain: dict
    rho: float
    rng: np.random.Generator
    factory: Callable
    noise: object = None
    share: float = 1.0   # of the rows, from the sizes used (public or noisy)


def stratum_model(job: _FitJob):
    """The job's synthesizer, adapted to its stratum's share of the rows when it knows how
    (``for_stratum(share)``, e.g. GEM's rounds in proportion to the share)."""
    model = job.factory()
    return model.for_stratum(job.share) if hasattr(model, "for_stratum") else model


def _fit_one(job: _FitJob, model=None, progress=None):
    model = stratum_model(job) if model is None else model
    extra = {} if job.noise is None else {"noise": job.noise}
    if progress is not None:
        extra["progress"] = progress
    return job.key, model.fit(job.rows, job.domain, job.rho, job.rng, **extra)


def fit_reporting(job: _FitJob, progress=None):
    """``_fit_one`` on a worker: the job's rounds go to ``progress`` when its synthesizer reports them."""
    model = stratum_model(job)
    return _fit_one(job, model, progress if takes_progress(model.fit) else None)


def takes_progress(fit: Callable) -> bool:
    """Whether a ``fit`` method accepts a ``progress`` keyword (by name or through ``**kwargs``)."""
    try:
        params = inspect.signature(fit).parameters
    except (TypeError, ValueError):
        return False
    return "progress" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _prefixed(progress, prefix: str, before: int, count: int):
    """A stratum's callback: its rounds placed after the ``before`` earlier strata of ``count``."""
    def forward(done: int, total: int, message: str) -> None:
        total = max(int(total), 1)
        progress(before * total + int(done), count * total, f"{prefix}: {message}")
    return forward


class StratifiedSynthesizer:
    """Fit ``synth_factory()`` on every stratum of ``strata_columns`` and sample each from its own model.

    size_policy "public": stratum sizes are public (``public_sizes`` by stratum key, or the data's
    counts, which the caller must have declared public); "dp_count": a Gaussian histogram of the
    counts spends ``count_share`` of rho first. Strata smaller than ``min_size`` are reported and,
    by explicit ``small_action``, kept, merged into one stratum, or dropped (absent from the output).
    """

    def __init__(self, synth_factory: Callable[[], object], strata_columns: Sequence[str],
                 size_policy: str = "public", count_share: float = 0.1, min_size: float = 0.0,
                 small_action: str = "keep", public_sizes: Mapping[str, float] | None = None,
                 n_jobs: int | None = 1, progress=None, labels: Mapping[str, Sequence] | None = None) -> None:
        self.synth_factory = synth_factory
        self.strata_columns = tuple(strata_columns)
        self.size_policy = size_policy
        self.count_share = count_share
        self.min_size = min_size
        self.small_action = small_action
        self.public_sizes = public_sizes
        self.n_jobs = n_jobs
        self.progress = progress
        self.labels = labels

    def stratum_title(self, key: str) -> str:
        """How ledgers and progress name a fitted stratum: its category labels when the wrapper was
        given them ('stratum Female · White'), else its key ('stratum sex=1|race=4')."""
        if key == MERGED:
            return MERGED
        return f"stratum {getattr(self, 'names_', {}).get(key, key)}"

    def _check(self, df: pd.DataFrame) -> None:
        if not self.strata_columns:
            raise ValueError("Choose at least one strata column.")
        missing = [c for c in self.strata_columns if c not in df.columns]
        if missing:
            raise ValueError(f"Strata column(s) {missing} are not in the data.")
        if len(self.strata_columns) == len(df.columns):
            raise ValueError("Keep at least one column besides the strata columns to synthesise.")
        if self.size_policy not in SIZE_POLICIES:
            raise ValueError(f"size_policy must be one of {SIZE_POLICIES}; got {self.size_policy!r}.")
        if self.small_action not in SMALL_ACTIONS:
            raise ValueError(f"small_action must be one of {SMALL_ACTIONS}; got {self.small_action!r}.")
        if self.size_policy == "dp_count" and not 0 < self.count_share < 1:
            raise ValueError("The share of budget for counting strata must be strictly between 0 and 1.")

    def fit(self, df: pd.DataFrame, domain: Mapping[str, int], rho: float,
            rng: np.random.Generator, noise=None, progress=None) -> "StratifiedSynthesizer":
        """Size the strata, decide their fate, and fit one model per fitted stratum.

        ``noise`` is the source of every privacy draw (seeded by default; ``SecureNoise`` for a release).
        A seeded source is not shared: the counts and every stratum draw from their own child streams of
        ``rng``, so one stratum's draws never depend on which other strata were fitted.
        ``progress(done, total, message)`` (default: the one given at construction) hears every
        stratum's rounds when its synthesizer reports them; raising ``Cancelled`` stops the fit and
        leaves no fitted models behind.
        """
        self.__dict__.pop("models_", None)
        progress = self.progress if progress is None else progress
        self._check(df)
        rho = float(rho)
        if not math.isfinite(rho) or rho <= 0:
            raise ValueError(f"The budget rho must be a positive number; got {rho}.")
        arr = check_codes(df, domain)
        self.columns_ = list(df.columns)
        self.domain_ = {c: int(domain[c]) for c in self.columns_}
        s_idx = [self.columns_.index(c) for c in self.strata_columns]
        self.index_ = StrataIndex.of(self.strata_columns, self.domain_)
        k = self.index_.count
        self.names_ = ({self.index_.key(f): n for f, n in self.index_.names(self.labels).items()}
                       if self.labels is not None else {})
        keys = self.index_.flat(arr[:, s_idx])
        true_counts = np.bincount(keys, minlength=k).astype(float)
        self.ledger_ = BudgetLedger()
        count_rng, fit_rng = spawn_rngs(rng, 2)
        secure = noise if getattr(noise, "secure", False) else None   # seeded: each part its own stream
        if self.size_policy == "dp_count":
            rho_count = self.count_share * rho
            # add/remove one person moves one count by 1: L2 sensitivity 1
            draw, sigma = (secure or noise_source(count_rng)).gaussian(1.0, rho_count, k)
            sizes = np.maximum(true_counts + draw, 0.0)
            self.ledger_.spend("stratum sizes (Gaussian counts)", rho_count, "rho",
                               measured=f"{k} noisy stratum counts, sigma {sigma:.3g}")
            self.count_sigma_ = sigma
        else:
            rho_count = 0.0
            if self.public_sizes is not None:
                sizes = np.array([float(self.public_sizes.get(self.index_.key(i), 0.0)) for i in range(k)])
            else:
                sizes = true_counts.copy()
            self.count_sigma_ = 0.0
        rho_strata = rho - rho_count
        small = sizes < self.min_size
        fate = np.where(small, {"keep": "kept (small)", "merge": "merged", "drop": "dropped"}[self.small_action],
                        "kept")
        self.strata_ = pd.DataFrame({
            "stratum": [self.index_.key(i) for i in range(k)],
            "size_used": sizes, "small": small, "fate": fate,
        })
        # fitting jobs: every kept stratum alone; merged ones pooled into one extra stratum
        other = [c for c in self.columns_ if c not in self.strata_columns]
        jobs: list[_FitJob] = []
        job_rngs = spawn_rngs(fit_rng, k + 1)
        used = float(sizes[fate != "dropped"].sum())
        row_share = sizes / used if used > 0 else np.ones(k)
        self.weights_: dict[str, float] = {}
        for i in range(k):
            if fate[i] in ("kept", "kept (small)"):
                label = self.index_.key(i)
                rows = df.loc[keys == i, other].reset_index(drop=True)
                jobs.append(_FitJob(label, rows, {c: self.domain_[c] for c in other}, rho_strata,
                                    job_rngs[i], self.synth_factory, secure, float(row_share[i])))
                self.weights_[label] = float(sizes[i])
        merged = np.flatnonzero(fate == "merged")
        self.merged_strata_ = merged
        if merged.size:
            # the pooled small strata are modelled with one extra column, the index of the stratum
            # among the merged ones, so the merged model can only emit rows of merged strata
            inside = np.isin(keys, merged)
            rows = df.loc[inside, other].reset_index(drop=True)
            rows[MERGED_COLUMN] = np.searchsorted(merged, keys[inside])
            dom = {**{c: self.domain_[c] for c in other}, MERGED_COLUMN: int(merged.size)}
            jobs.append(_FitJob(MERGED, rows, dom, rho_strata, job_rngs[k], self.synth_factory, secure,
                                float(row_share[merged].sum())))
            self.weights_[MERGED] = float(sizes[merged].sum())
        total_w = sum(self.weights_.values())
        share = np.zeros(k)
        for i in range(k):
            if fate[i] in ("kept", "kept (small)"):
                share[i] = sizes[i] / total_w if total_w > 0 else 0.0
            elif fate[i] == "merged":
                share[i] = sizes[i] / total_w if total_w > 0 else 0.0
        # share of the synthetic rows each stratum will receive (0: fitted but sized to nothing, or dropped)
        self.strata_["sample_share"] = share
        self.models_ = dict(self._fit_jobs(jobs, progress))
        for job in jobs:
            # every spend of the stratum's fit, in one part of the "strata" group: they add up inside
            # the stratum and only the largest stratum counts; never how many rows it held
            record_fit(self.ledger_, self.models_[job.key], rho_strata, self.stratum_title(job.key),
                       measured="the stratum's own rows", composition="parallel", group="strata", part=job.key)
        self.rho_ = rho
        self.rho_per_stratum_ = rho_strata
        return self

    def _fit_jobs(self, jobs: list[_FitJob], progress) -> list[tuple[str, object]]:
        """(key, fitted model) per job: in this process with forwarded progress, or on workers."""
        if not jobs:
            return []
        if self.n_jobs == 1:
            out = []
            for s, job in enumerate(jobs):
                model = stratum_model(job)
                label = f"stratum {s + 1} of {len(jobs)} ({self.stratum_title(job.key).removeprefix('stratum ')})"
                forward = (_prefixed(progress, label, s, len(jobs))
                           if progress is not None and takes_progress(model.fit) else None)
                out.append(_fit_one(job, model, forward))
                if progress is not None and forward is None:
                    progress(s + 1, len(jobs), f"{label} fitted")
            return out
        if progress is not None:
            # workers, local or on a Dask cluster, relay their rounds back to this process (``round_relay``)
            return relayed_map(fit_reporting, jobs, n_jobs=self.n_jobs, progress=progress, label="stratum fits")
        # no progress wanted: a plain fan-out
        return map_trials(_fit_one, jobs, n_jobs=self.n_jobs, label="stratum fits")

    def release_size(self) -> int:
        """Rows a release may have: the sum of the sizes used (noisy under DP counts, public otherwise),
        so the output never repeats the exact private row count."""
        return int(round(sum(self.weights_.values())))

    def allocation(self, n: int) -> dict[str, int]:
        """Rows per fitted stratum for an output of ``n`` rows (largest remainder on the sizes)."""
        keys = list(self.models_)
        counts = largest_remainder(np.array([self.weights_[k] for k in keys]), int(n))
        return dict(zip(keys, counts.tolist()))

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` rows: each stratum's share drawn from that stratum's model (looked up by key)."""
        if not hasattr(self, "models_"):
            raise ValueError("Fit the stratified synthesizer before sampling from it.")
        alloc = self.allocation(n)
        # one stream per stratum of the public domain (the merged model: the last), so dropping or
        # merging one stratum leaves every other stratum's rows where they were
        rngs = spawn_rngs(rng, self.index_.count + 1)
        parts = []
        for key, m in alloc.items():
            if m == 0:
                continue
            r = rngs[self.index_.count if key == MERGED else self.index_.flat_of(key)]
            part = self.models_[key].sample(m, r)
            if key != MERGED:
                for c, v in zip(self.strata_columns, self.index_.codes(self.index_.flat_of(key))):
                    part[c] = int(v)
            else:
                flat = self.merged_strata_[part.pop(MERGED_COLUMN).to_numpy(np.int64)]
                for c, v in zip(self.strata_columns, self.index_.codes(flat)):
                    part[c] = v.astype(np.int64)
            parts.append(part[self.columns_])
        if not parts:
            return pd.DataFrame({c: np.zeros(0, np.int64) for c in self.columns_})
        out = pd.concat(parts, ignore_index=True).astype(np.int64)
        # rows in random order, so row position says nothing about the stratum
        return out.iloc[rng.permutation(len(out))].reset_index(drop=True)
