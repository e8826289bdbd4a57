"""Release algorithms audited for coherence, each with a declared privacy guarantee or "none".

Every algorithm is one class with ``bind(schema)`` (public schema: column domains, lens, target)
and ``release(half_df, rng) -> report``; the half holds integer codes. Reports are either
microdata (a table of codes) or a count table over lens cell x target. The registry
``RELEASES`` lists every algorithm; each synthesizer of ``core.synthesis`` appears pooled and
stratified automatically.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from core.privacy.accounting import epsilon_to_rho, rho_to_epsilon
from core.synthesis.registry import SYNTHESIZERS
from core.synthesis.stratified import StratifiedSynthesizer

MAX_TABLE_CELLS = 2_000_000
MAX_DOMAIN = 255


@dataclass(frozen=True)
class AuditSchema:
    """Public schema of the audited data: code domain per column, lens, binary target."""
    domain: Mapping[str, int]
    labels: Mapping[str, list]
    lens: tuple[str, ...]
    target: str
    positive_code: int

    @property
    def lens_sizes(self) -> tuple[int, ...]:
        """Domain size of each lens column plus one slot for a suppressed value."""
        return tuple(int(self.domain[c]) + 1 for c in self.lens)


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What a release promises: kind in none / pure_dp / zcdp / finite_outputs, in one unit each."""
    kind: str
    epsilon: float | None = None
    rho: float | None = None
    neighbour: str = "replace_one"
    k_records: int | None = None
    statement: str = ""


@dataclass
class MicrodataReport:
    """Released records as integer codes (a suppressed value carries code = domain size)."""
    rows: pd.DataFrame
    kind: str = "microdata"


@dataclass
class TableReport:
    """Released counts over every lens cell (public domain, incl. empty cells) x (target false, true)."""
    counts: np.ndarray
    kind: str = "table"


def encode_for_audit(df: pd.DataFrame, columns: list[str], max_levels: int = MAX_DOMAIN
                     ) -> tuple[pd.DataFrame, dict[str, int], dict[str, list]]:
    """Integer codes of ``columns`` with a domain per column taken from the whole file.

    Category columns keep their declared categories; numeric columns with at most ``max_levels``
    distinct values become categories of those values. The domain is treated as a public schema.
    """
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"Column(s) {missing} are not in the data; pick columns from the file.")
    codes, domain, labels = {}, {}, {}
    for col in columns:
        s = df[col]
        if s.isna().any():
            raise ValueError(f"Column {col!r} has missing values; choose another column or fill them.")
        cat = s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")
        if len(cat.cat.categories) > max_levels:
            raise ValueError(f"Column {col!r} has {len(cat.cat.categories)} distinct values (at most "
                             f"{max_levels} allowed); choose a categorical column or bin it first.")
        labels[col] = list(cat.cat.categories)
        domain[col] = max(1, len(labels[col]))
        codes[col] = cat.cat.codes.to_numpy(np.int64)
    return pd.DataFrame(codes, index=df.index), domain, labels


def table_counts(half: pd.DataFrame, schema: AuditSchema) -> np.ndarray:
    """Exact counts over (lens cell, target false/true) on the public lens domain."""
    sizes = schema.lens_sizes
    n_cells = int(np.prod(sizes, dtype=np.float64))
    if n_cells * 2 > MAX_TABLE_CELLS:
        raise ValueError(f"The lens has {n_cells:,} cells; a count table is limited to "
                         f"{MAX_TABLE_CELLS // 2:,}. Choose fewer or coarser lens columns.")
    cell = np.ravel_multi_index(tuple(half[c].to_numpy(np.int64) for c in schema.lens), sizes) \
        if len(half) else np.zeros(0, np.int64)
    y = (half[schema.target].to_numpy(np.int64) == schema.positive_code).astype(np.int64)
    return np.bincount(cell * 2 + y, minlength=n_cells * 2).reshape(n_cells, 2).astype(float)


class Release:
    """Base class: parameters in __init__, the schema bound by ``bind``."""
    key = "base"
    label = "base"
    kind = "microdata"

    def bind(self, schema: AuditSchema) -> "Release":
        self.schema_ = schema
        return self

    @property
    def privacy(self) -> PrivacyGuarantee:
        return PrivacyGuarantee("none", statement="No formal privacy guarantee.")

    @property
    def params(self) -> dict[str, Any]:
        return {}

    @property
    def name(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.params.items() if v not in ((), None, ""))
        return f"{self.label} ({extra})" if extra else self.label

    def release(self, half: pd.DataFrame, rng: np.random.Generator):  # pragma: no cover - abstract
        raise NotImplementedError


class ClearHalf(Release):
    """Publish the half in the clear (the worst case for coherence)."""
    key, label = "clear_half", "Half in the clear"

    def release(self, half, rng):
        return MicrodataReport(half.reset_index(drop=True))


class ClearSample(Release):
    """Publish k records of the half, chosen uniformly, in the clear (as an unordered set)."""
    key, label = "clear_sample", "k records in the clear"

    def __init__(self, k: int = 100) -> None:
        if int(k) < 1:
            raise ValueError("k, the number of records published, must be at least 1.")
        self.k = int(k)

    @property
    def params(self):
        return {"k": self.k}

    @property
    def privacy(self):
        return PrivacyGuarantee("finite_outputs", k_records=self.k,
                                statement=f"Not DP. At most C(n/2, {self.k}) possible outputs, which bounds "
                                          "max-information (derived corollary, not in the paper).")

    def release(self, half, rng):
        k = min(self.k, len(half))
        idx = np.sort(rng.choice(len(half), k, replace=False))
        return MicrodataReport(half.iloc[idx].reset_index(drop=True))


class Suppression(Release):
    """k-anonymity style: generalise chosen lens columns away, suppress lens values in rare cells."""
    key, label = "suppression", "Suppression / generalisation"

    def __init__(self, k: int = 5, generalise: tuple[str, ...] = ()) -> None:
        if int(k) < 1:
            raise ValueError("The minimum cell size k must be at least 1.")
        self.k = int(k)
        self.generalise = tuple(generalise)

    @property
    def params(self):
        return {"k": self.k, "generalise": self.generalise}

    def bind(self, schema):
        bad = [c for c in self.generalise if c not in schema.lens]
        if bad:
            raise ValueError(f"Generalised column(s) {bad} must be lens columns.")
        return super().bind(schema)

    def release(self, half, rng):
        s = self.schema_
        out = half.reset_index(drop=True).copy()
        for c in self.generalise:
            out[c] = s.domain[c]
        kept = [c for c in s.lens if c not in self.generalise]
        if kept:
            cell = np.ravel_multi_index(tuple(out[c].to_numpy(np.int64) for c in kept),
                                        tuple(s.domain[c] + 1 for c in kept))
            _, inv, cnt = np.unique(cell, return_inverse=True, return_counts=True)
            rare = cnt[inv] < self.k
            for c in kept:
                col = out[c].to_numpy(np.int64).copy()
                col[rare] = s.domain[c]
                out[c] = col
        return MicrodataReport(out)


NEIGHBOURS = {"replace_one": "replace one person", "add_remove": "add or remove one person"}


class _NoisyTable(Release):
    """Counts over lens cell x target plus independent noise per cell; subclasses choose the noise.

    ``neighbour`` is the convention the noise is calibrated for: replace-one moves one person
    between two cells (L1 sensitivity 2, L2 sqrt 2), add/remove changes one cell by one. The
    guarantee records it, and the theory reads an add/remove budget as 2 eps (pure DP) or 4 rho
    (zCDP) under the paper's replace-one definition.
    """
    kind = "table"

    def __init__(self, epsilon: float = 1.0, neighbour: str = "replace_one") -> None:
        if not epsilon > 0:
            raise ValueError("epsilon must be positive.")
        if neighbour not in NEIGHBOURS:
            raise ValueError(f"neighbour must be one of {sorted(NEIGHBOURS)}, not {neighbour!r}.")
        self.epsilon = float(epsilon)
        self.neighbour = neighbour

    @property
    def params(self):
        return {"epsilon": self.epsilon, **({"neighbour": self.neighbour} if self.neighbour != "replace_one" else {})}

    @property
    def l1_sensitivity(self) -> float:
        return 2.0 if self.neighbour == "replace_one" else 1.0

    def noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def release(self, half, rng):
        c = table_counts(half, self.schema_)
        return TableReport(c + self.noise(c.shape, rng))


class LaplaceTable(_NoisyTable):
    """Laplace noise of scale (L1 sensitivity)/eps per cell: eps-DP for the chosen neighbours."""
    key, label = "laplace_table", "Noisy table (Laplace)"

    @property
    def privacy(self):
        return PrivacyGuarantee("pure_dp", epsilon=self.epsilon, neighbour=self.neighbour, statement=(
            f"{self.epsilon:g}-DP ({self.neighbour.replace('_', '-')} neighbours; "
            f"L1 sensitivity {self.l1_sensitivity:g})."))

    def noise(self, shape, rng):
        return rng.laplace(0.0, self.l1_sensitivity / self.epsilon, shape)


class GaussianTable(_NoisyTable):
    """Gaussian noise per cell: rho-zCDP with rho = eps^2/2 for the chosen neighbours."""
    key, label = "gaussian_table", "Noisy table (Gaussian)"

    @property
    def rho(self) -> float:
        return epsilon_to_rho(self.epsilon)

    @property
    def privacy(self):
        return PrivacyGuarantee("zcdp", rho=self.rho, neighbour=self.neighbour, statement=(
            f"{self.rho:.4g}-zCDP (rho = eps^2/2; {self.neighbour.replace('_', '-')} neighbours, "
            f"L2 sensitivity {math.sqrt(self.l1_sensitivity):.3g}, sigma {self.sigma:.3g})."))

    @property
    def sigma(self) -> float:
        """sigma = Delta_2 / sqrt(2 rho), with Delta_2 = sqrt(2) (replace-one) or 1 (add/remove)."""
        return math.sqrt(self.l1_sensitivity) / math.sqrt(2.0 * self.rho)

    def noise(self, shape, rng):
        return rng.normal(0.0, self.sigma, shape)


class SynthesizerRelease(Release):
    """Synthetic microdata from a core.synthesis synthesizer over lens + target (+ strata) columns.

    Budget rho = eps^2/2 zCDP as the synthesizers account it (add/remove neighbours); the
    output has as many rows as the half. Stratified: one model per public stratum, sizes public.
    """
    kind = "microdata"

    def __init__(self, synth_key: str, epsilon: float = 1.0, strata: tuple[str, ...] = (),
                 stratified: bool = False) -> None:
        if synth_key not in SYNTHESIZERS:
            raise ValueError(f"Unknown synthesizer {synth_key!r}; choose one of {sorted(SYNTHESIZERS)}.")
        if not epsilon > 0:
            raise ValueError("epsilon must be positive.")
        if stratified and not strata:
            raise ValueError("A stratified synthesizer needs at least one strata column.")
        self.synth_key = synth_key
        self.epsilon = float(epsilon)
        self.strata = tuple(strata) if stratified else ()
        self.stratified = bool(stratified)
        self.key = ("strat_" if stratified else "synth_") + synth_key
        base = SYNTHESIZERS[synth_key][0]
        self.label = f"{base}, stratified" if stratified else f"{base}, pooled"

    @property
    def params(self):
        return {"epsilon": self.epsilon, **({"strata": self.strata} if self.stratified else {})}

    @property
    def privacy(self):
        rho = epsilon_to_rho(self.epsilon)
        note = " (strata sizes declared public; strata compose in parallel)" if self.stratified else ""
        return PrivacyGuarantee("zcdp", rho=rho, neighbour="add_remove",
                                statement=f"{rho:.4g}-zCDP, add/remove neighbours{note}.")

    def bind(self, schema):
        self.columns_ = list(dict.fromkeys([*schema.lens, schema.target, *self.strata]))
        missing = [c for c in self.columns_ if c not in schema.domain]
        if missing:
            raise ValueError(f"Column(s) {missing} are not part of the audited data.")
        return super().bind(schema)

    def release(self, half, rng):
        cols = self.columns_
        domain = {c: int(self.schema_.domain[c]) for c in cols}
        fit_rng, sample_rng = rng.spawn(2)
        factory = SYNTHESIZERS[self.synth_key][1]
        if self.stratified:
            model = StratifiedSynthesizer(factory, self.strata, size_policy="public", n_jobs=1)
        else:
            model = factory()
        model.fit(half[cols].reset_index(drop=True), domain, epsilon_to_rho(self.epsilon), fit_rng)
        return MicrodataReport(model.sample(len(half), sample_rng)[cols].reset_index(drop=True))


@dataclass(frozen=True)
class ReleaseSpec:
    """Registry entry: label, factory taking keyword parameters, parameter defaults, DP or not."""
    label: str
    factory: Callable[..., Release]
    defaults: dict = field(default_factory=dict)
    dp: bool = False


def _registry() -> dict[str, ReleaseSpec]:
    reg = {
        "clear_half": ReleaseSpec(ClearHalf.label, ClearHalf),
        "clear_sample": ReleaseSpec(ClearSample.label, ClearSample, {"k": 100}),
        "suppression": ReleaseSpec(Suppression.label, Suppression, {"k": 5, "generalise": ()}),
        "laplace_table": ReleaseSpec(LaplaceTable.label, LaplaceTable, {"epsilon": 1.0, "neighbour": "replace_one"},
                                     dp=True),
        "gaussian_table": ReleaseSpec(GaussianTable.label, GaussianTable, {"epsilon": 1.0, "neighbour": "replace_one"},
                                      dp=True),
    }
    for key, (label, _) in SYNTHESIZERS.items():
        reg[f"synth_{key}"] = ReleaseSpec(
            f"{label}, pooled", lambda key=key, **kw: SynthesizerRelease(key, stratified=False, **kw),
            {"epsilon": 1.0}, dp=True)
        reg[f"strat_{key}"] = ReleaseSpec(
            f"{label}, stratified", lambda key=key, **kw: SynthesizerRelease(key, stratified=True, **kw),
            {"epsilon": 1.0, "strata": ()}, dp=True)
    return reg


RELEASES: dict[str, ReleaseSpec] = _registry()


def make_release(key: str, **params) -> Release:
    """A release algorithm from its registry key and parameters."""
    if key not in RELEASES:
        raise ValueError(f"Unknown release {key!r}; choose one of {sorted(RELEASES)}.")
    spec = RELEASES[key]
    unknown = set(params) - set(spec.defaults)
    if unknown:
        raise ValueError(f"Release {key!r} takes no parameter(s) {sorted(unknown)}.")
    return spec.factory(**{**spec.defaults, **params})


def replace_one_epsilon(guarantee: PrivacyGuarantee, delta: float) -> float | None:
    """(eps, delta)-DP epsilon under replace-one neighbours implied by a zCDP guarantee.

    Replace-one is remove-then-add, so an add/remove rho becomes 4 rho (group privacy of size 2).
    """
    if guarantee.kind != "zcdp" or guarantee.rho is None:
        return None
    rho = guarantee.rho * (4.0 if guarantee.neighbour == "add_remove" else 1.0)
    return rho_to_epsilon(rho, delta)
