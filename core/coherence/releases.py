"""Release algorithms audited for coherence, each with a declared privacy guarantee or "none".

Every algorithm is one class with ``bind(schema)`` (public schema: column domains, lens, target)
and ``release(half_df, rng) -> report``; the half holds integer codes. Reports are either
microdata (a table of codes) or a count table over lens cell x target.

``RELEASES`` is a :class:`core.contracts.Registry`: key -> Spec whose Params dataclass carries
every parameter's default, bounds and help, so the page draws each release's widgets from it.
Each synthesizer exported by ``core.synthesis`` appears pooled and stratified.
"""
from __future__ import annotations

import math
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from core.contracts import Registry, Spec, check_params, param
from core.privacy.accounting import epsilon_to_rho, gaussian_sigma, rho_for_epsilon, rho_to_epsilon
from core.privacy.mechanisms import sample_gaussian, sample_laplace
from core.privacy.protection import ProtectionUnit
from core.synthesis.encoding import encode_categories

MAX_TABLE_CELLS = 2_000_000
MAX_DOMAIN = 255


@dataclass(frozen=True)
class AuditSchema:
    """Public schema of the audited data: code domain per column, lens, binary target, and the unit of
    protection its declaration states (up to k rows per person: the releases' noise covers k rows)."""
    domain: Mapping[str, int]
    labels: Mapping[str, list]
    lens: tuple[str, ...]
    target: str
    positive_code: int
    protection: ProtectionUnit = field(default_factory=ProtectionUnit)

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
    codes, domain, labels = encode_categories(df[list(columns)])
    wide = [c for c in columns if domain[c] > max_levels]
    if wide:
        raise ValueError(f"Column {wide[0]!r} has {domain[wide[0]]} distinct values (at most {max_levels} "
                         "allowed); choose a categorical column or bin it first.")
    return codes, domain, labels


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


NEIGHBOURS = {"replace_one": "replace one person", "add_remove": "add or remove one person"}
EPSILON_HELP = "Privacy-loss budget of the release; smaller means more noise."
# What "epsilon" means for the zCDP releases of the audit (the Gaussian table and every synthesizer):
# the zCDP epsilon, spent as rho = epsilon^2 / 2. It is NOT converted like the Stratified synthesis
# page's (epsilon, delta) epsilon (rho_for_epsilon(epsilon, delta), about 33 times less rho at
# epsilon 1, delta 1e-9), because the audit has no delta to convert at: its theory reads a zCDP
# guarantee through its rho alone (audit._theory_fn turns rho into a replace-one (epsilon, delta)
# at Thm 8's own delta cap, which depends on n, beta and the subgroups, far below any delta a
# release would state). Converting at a chosen delta would add a number the theory never uses;
# converting at the cap would make the release's noise change with the audit's beta or subgroups.
# Keeping rho = epsilon^2 / 2 keeps the theory exact, keeps every saved plan's spend unchanged and
# puts the Gaussian table and the synthesizers on one scale in the epsilon sweep; the field is
# therefore labelled as a zCDP epsilon wherever it shows (widget label, help, release names,
# guarantee statements).
ZCDP_EPSILON_LABEL = "zCDP epsilon (rho = epsilon^2/2)"
ZCDP_EPSILON_HELP = ("Privacy-loss budget as a zCDP epsilon: the release spends rho = epsilon^2 / 2 "
                     "(epsilon 1 is rho 0.5). This is not the (epsilon, delta) epsilon of the Stratified "
                     f"synthesis page, where epsilon 1 at delta 1e-9 is rho {rho_for_epsilon(1.0, 1e-9):.3f}.")
NEIGHBOUR_HELP = ("The neighbouring data sets the noise is calibrated for. Add/remove halves the noise; the "
                  "theory then reads the budget as 2 epsilon (pure DP) or 4 rho (zCDP) under replace-one.")


# --------------------------------------------------------------------------------------------------
# Params: one frozen dataclass per release, checked against the bounds its fields declare
# --------------------------------------------------------------------------------------------------

class _Checked:
    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class ClearHalfParams(_Checked):
    """Publishing the half in the clear takes no parameter."""


@dataclass(frozen=True)
class ClearSampleParams(_Checked):
    k: int = param(100, label="records published", low=1, high=1_000_000,
                   help="How many records of the half are published unchanged, chosen at random.")


@dataclass(frozen=True)
class SuppressionParams(_Checked):
    k: int = param(5, label="minimum cell size k", low=1, high=1_000_000,
                   help="Lens values of records in cells with fewer than k people are blanked.")
    generalise: tuple[str, ...] = param((), label="lens columns generalised away", kind="lens",
                                        help="These lens columns are blanked for everyone.")


@dataclass(frozen=True)
class NoisyTableParams(_Checked):
    epsilon: float = param(1.0, label="epsilon", low=1e-6, high=1000.0, step=0.1, help=EPSILON_HELP)
    neighbour: str = param("replace_one", label="neighbours", choices=NEIGHBOURS, help=NEIGHBOUR_HELP)


@dataclass(frozen=True)
class LaplaceTableParams(NoisyTableParams):
    pass


@dataclass(frozen=True)
class GaussianTableParams(NoisyTableParams):
    epsilon: float = param(1.0, label=ZCDP_EPSILON_LABEL, low=1e-6, high=1000.0, step=0.1, help=ZCDP_EPSILON_HELP)


# --------------------------------------------------------------------------------------------------
# Release algorithms
# --------------------------------------------------------------------------------------------------

class Release:
    """Base class: parameters in __init__, the schema bound by ``bind``."""
    key = "base"
    label = "base"
    kind = "microdata"
    epsilon_word = "epsilon"
    """How the ``epsilon`` parameter is named in the release's name ("zCDP epsilon" for zCDP releases)."""

    def bind(self, schema: AuditSchema) -> "Release":
        self.schema_ = schema
        return self

    @property
    def protection(self) -> ProtectionUnit:
        """The unit of protection of the bound schema (per row before ``bind``)."""
        schema = getattr(self, "schema_", None)
        return schema.protection if schema is not None else ProtectionUnit()

    def unit_note(self) -> str:
        """'; per person, up to 3 rows each' when a person may hold several rows, else nothing."""
        return f"; {self.protection.words}" if self.protection.grouped else ""

    @property
    def privacy(self) -> PrivacyGuarantee:
        return PrivacyGuarantee("none", statement="No formal privacy guarantee.")

    @property
    def params(self) -> dict[str, Any]:
        return {}

    @property
    def name(self) -> str:
        extra = ", ".join(f"{self.epsilon_word if k == 'epsilon' else k}={v}" for k, v in self.params.items()
                          if v not in ((), None, ""))
        return f"{self.label} ({extra})" if extra else self.label

    @property
    def strata(self) -> tuple[str, ...]:
        """Columns the release needs beside the lens and the target."""
        return ()

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


class _NoisyTable(Release):
    """Counts over lens cell x target plus independent noise per cell; subclasses choose the noise.

    ``neighbour`` is the convention the noise is calibrated for: replace-one moves one person
    between two cells (L1 sensitivity 2, L2 sqrt 2), add/remove changes one cell by one. The
    guarantee records it, and the theory reads an add/remove budget as 2 eps (pure DP) or 4 rho
    (zCDP) under the paper's replace-one definition. With up to k rows per person (the bound schema's
    unit of protection) both sensitivities are k times one row's: one person's rows move at most k
    counts out and k in (L1 2k, L2 at most k sqrt 2 when they all share one cell; add/remove: k and k).
    """
    kind = "table"

    def __init__(self, epsilon: float = 1.0, neighbour: str = "replace_one") -> None:
        self.epsilon = float(epsilon)
        self.neighbour = neighbour

    @property
    def params(self):
        return {"epsilon": self.epsilon, **({"neighbour": self.neighbour} if self.neighbour != "replace_one" else {})}

    @property
    def l1_sensitivity(self) -> float:
        """L1 sensitivity of the count table for one person (all of their rows)."""
        return self.protection.sensitivity(2.0 if self.neighbour == "replace_one" else 1.0)

    @property
    def l2_sensitivity(self) -> float:
        """L2 sensitivity for one person: sqrt 2 (replace-one) or 1 (add/remove) per row, times k."""
        return self.protection.sensitivity(math.sqrt(2.0) if self.neighbour == "replace_one" else 1.0)

    def noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    @property
    def secure_noise(self) -> tuple[str, float, float]:
        """(OpenDP mechanism name, noise scale, sensitivity in that mechanism's norm) for the secure release."""
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
            f"L1 sensitivity {self.l1_sensitivity:g}{self.unit_note()})."))

    def noise(self, shape, rng):
        return sample_laplace(self.l1_sensitivity / self.epsilon, shape, rng)

    @property
    def secure_noise(self):
        return "laplace", self.l1_sensitivity / self.epsilon, self.l1_sensitivity


class GaussianTable(_NoisyTable):
    """Gaussian noise per cell: rho-zCDP with rho = eps^2/2 for the chosen neighbours."""
    key, label = "gaussian_table", "Noisy table (Gaussian)"
    epsilon_word = "zCDP epsilon"

    @property
    def rho(self) -> float:
        return epsilon_to_rho(self.epsilon)

    @property
    def privacy(self):
        return PrivacyGuarantee("zcdp", rho=self.rho, neighbour=self.neighbour, statement=(
            f"{self.rho:.4g}-zCDP (zCDP epsilon {self.epsilon:g}, rho = epsilon^2/2; "
            f"{self.neighbour.replace('_', '-')} neighbours, "
            f"L2 sensitivity {self.l2_sensitivity:.3g}, sigma {self.sigma:.3g}{self.unit_note()})."))

    @property
    def sigma(self) -> float:
        """Calibrated by core.privacy for L2 sensitivity sqrt 2 (replace-one) or 1 (add/remove), times k."""
        return gaussian_sigma(self.l2_sensitivity, self.rho)

    def noise(self, shape, rng):
        return sample_gaussian(self.sigma, shape, rng)

    @property
    def secure_noise(self):
        return "gaussian", self.sigma, self.l2_sensitivity


class SynthesizerRelease(Release):
    """Synthetic microdata from a core.synthesis synthesizer over lens + target (+ strata) columns.

    Budget: ``epsilon`` is a zCDP epsilon, spent as rho = epsilon^2/2 as the synthesizers account
    it (add/remove neighbours; see ZCDP_EPSILON_LABEL for why it is not converted at a delta); the
    output has as many rows as the half. Stratified: one model per public stratum, sizes public.
    """
    kind = "microdata"
    epsilon_word = "zCDP epsilon"

    def __init__(self, synth_key: str, epsilon: float = 1.0, strata: tuple[str, ...] = (),
                 stratified: bool = False, synth_params: Any = None) -> None:
        spec = synthesizers()[synth_key]
        self.synth_key = synth_key
        self.epsilon = float(epsilon)
        self.stratified = bool(stratified)
        self._strata = tuple(strata) if stratified else ()
        self.synth_params = spec.default_params() if synth_params is None else synth_params
        self.key = ("strat_" if stratified else "synth_") + synth_key
        self.label = f"{spec.label}, stratified" if stratified else f"{spec.label}, pooled"
        self.factory = lambda: spec.build(self.synth_params)

    @property
    def strata(self) -> tuple[str, ...]:
        return self._strata

    @property
    def params(self):
        default = synthesizers()[self.synth_key].default_params()
        changed = {f.name: getattr(self.synth_params, f.name) for f in dataclasses.fields(self.synth_params)
                   if getattr(self.synth_params, f.name) != getattr(default, f.name)}
        return {"epsilon": self.epsilon, **({"strata": self.strata} if self.stratified else {}), **changed}

    @property
    def rho(self) -> float:
        """The zCDP budget the fit spends: epsilon^2 / 2 (the one place the conversion is made)."""
        return epsilon_to_rho(self.epsilon)

    @property
    def privacy(self):
        rho = self.rho
        note = " (strata sizes declared public; strata compose in parallel)" if self.stratified else ""
        return PrivacyGuarantee("zcdp", rho=rho, neighbour="add_remove",
                                statement=f"{rho:.4g}-zCDP (zCDP epsilon {self.epsilon:g}, rho = epsilon^2/2), "
                                          f"add/remove neighbours{note}{self.unit_note()}.")

    @property
    def fit_rho(self) -> float:
        """The rho the fit runs at: ``rho`` per row, or rho / k^2 with up to k rows per person (group
        privacy of zCDP), so ``rho`` holds per person."""
        return self.protection.row_budget(self.rho, "rho")

    def bind(self, schema):
        if self.stratified and not self.strata:
            raise ValueError(f"{self.label} needs at least one strata column; choose them under its settings.")
        self.columns_ = list(dict.fromkeys([*schema.lens, schema.target, *self.strata]))
        missing = [c for c in self.columns_ if c not in schema.domain]
        if missing:
            raise ValueError(f"Column(s) {missing} are not part of the audited data.")
        return super().bind(schema)

    def release(self, half, rng):
        from core.synthesis import StratifiedSynthesizer

        cols = self.columns_
        domain = {c: int(self.schema_.domain[c]) for c in cols}
        fit_rng, sample_rng = rng.spawn(2)
        if self.stratified:
            model = StratifiedSynthesizer(self.factory, self.strata, size_policy="public", n_jobs=1)
        else:
            model = self.factory()
        model.fit(half[cols].reset_index(drop=True), domain, self.fit_rho, fit_rng)
        return MicrodataReport(model.sample(len(half), sample_rng)[cols].reset_index(drop=True))


# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------

def synthesizers() -> Registry:
    """The synthesizer registry of ``core.synthesis`` (key -> Spec with its own Params)."""
    from core.synthesis import SYNTHESIZERS

    return SYNTHESIZERS


def _release_params_class(spec: Spec, stratified: bool) -> type:
    """A release's Params for one synthesizer: epsilon (and strata) followed by the synthesizer's own
    fields, so the page draws every synthesizer setting and none silently stays at its default."""
    epsilon = ("epsilon", float, param(1.0, label=ZCDP_EPSILON_LABEL, low=1e-6, high=1000.0, step=0.1,
                                       help=ZCDP_EPSILON_HELP + (" Every stratum spends it in full (parallel "
                                                                 "composition)." if stratified else "")))
    strata = ("strata", tuple[str, ...], param((), label="strata columns (sizes public)", kind="columns",
                                               help="One model per stratum; the stratum sizes are treated as public."))
    hints = typing.get_type_hints(spec.params)
    own = [(f.name, hints.get(f.name, Any), dataclasses.field(default=f.default, metadata=f.metadata))
           for f in dataclasses.fields(spec.params)]
    clash = {n for n, *_ in own} & {"epsilon", "strata"}
    if clash:
        raise TypeError(f"Synthesizer {spec.key!r} Params may not use the field name(s) {sorted(clash)}.")
    name = "".join(part.title() for part in spec.key.split("_")) + ("Stratified" if stratified else "Pooled") \
        + "ReleaseParams"
    cls = dataclasses.make_dataclass(name, [epsilon, *([strata] if stratified else []), *own],
                                     bases=(_Checked,), frozen=True)
    cls.__module__ = __name__
    globals()[name] = cls                 # plans rebuild it by name from this module
    return cls


def _synth_spec(spec: Spec, stratified: bool) -> Spec:
    params_cls = _release_params_class(spec, stratified)
    own = [f.name for f in dataclasses.fields(spec.params)]

    def factory(p):
        synth = spec.params(**{n: getattr(p, n) for n in own})
        return SynthesizerRelease(spec.key, p.epsilon, getattr(p, "strata", ()), stratified, synth)

    if stratified:
        return Spec(f"strat_{spec.key}", f"{spec.label}, stratified", factory, params_cls,
                    "Synthetic records from one model per public stratum: zCDP.")
    return Spec(f"synth_{spec.key}", f"{spec.label}, pooled", factory, params_cls,
                "Synthetic records from one model of the whole half: zCDP.")


def _kwargs(params) -> dict[str, Any]:
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}


def plugin_spec(cls: type, params: type, help: str | None = None) -> Spec:
    """The registry line of a release or adversary class: its own key and label, built from its Params
    (every field passed by name), so nothing about the plugin is written down a second time. ``help``
    defaults to the first line of the class docstring."""
    text = help if help is not None else (cls.__doc__ or "").strip().split("\n")[0]
    return Spec(cls.key, cls.label, lambda p: cls(**_kwargs(p)), params, text)


def _registry() -> Registry:
    specs = [
        plugin_spec(ClearHalf, ClearHalfParams, "The released half itself, unchanged: the worst case, no privacy."),
        plugin_spec(ClearSample, ClearSampleParams,
                    "A random sample of k records of the half, unchanged: not private."),
        plugin_spec(Suppression, SuppressionParams,
                    "k-anonymity style suppression and generalisation: not differentially private."),
        plugin_spec(LaplaceTable, LaplaceTableParams,
                    "Counts over every lens cell by target with Laplace noise: epsilon-DP."),
        plugin_spec(GaussianTable, GaussianTableParams,
                    "Counts over every lens cell by target with Gaussian noise: rho-zCDP."),
    ]
    for spec in synthesizers().values():
        specs += [_synth_spec(spec, stratified=False), _synth_spec(spec, stratified=True)]
    return Registry("release", specs)


RELEASES: Registry = _registry()
DP_KINDS = ("pure_dp", "zcdp")


def is_private(key: str) -> bool:
    """Whether a registered release carries a differential privacy guarantee (at its default Params)."""
    return RELEASES[key].build().privacy.kind in DP_KINDS


def release_params(key: str, **values):
    """The Params of release ``key`` from keyword values; unknown names raise ValueError."""
    spec = RELEASES[key]
    names = {f.name for f in dataclasses.fields(spec.params)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"Release {key!r} takes no parameter(s) {sorted(unknown)}.")
    return spec.params(**values)


def make_release(key: str, **values) -> Release:
    """A release algorithm from its registry key and parameter values."""
    return RELEASES[key].build(release_params(key, **values))


def replace_one_epsilon(guarantee: PrivacyGuarantee, delta: float) -> float | None:
    """(eps, delta)-DP epsilon under replace-one neighbours implied by a zCDP guarantee.

    Replace-one is remove-then-add, so an add/remove rho becomes 4 rho (group privacy of size 2).
    """
    if guarantee.kind != "zcdp" or guarantee.rho is None:
        return None
    rho = guarantee.rho * (4.0 if guarantee.neighbour == "add_remove" else 1.0)
    return rho_to_epsilon(rho, delta)
