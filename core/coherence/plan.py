"""The audit's plan: every choice that shapes a number on the Coherence audit page, frozen.

``AuditPlan`` holds the data reference and row sample, target, lens, subgroups (including custom
ones), the releases and adversaries with their Params, (alpha, beta, gamma), trials, null splits,
the seed, and the sub-plans of the epsilon sweep and the theory calculator (None when not asked).
Plans check themselves; every message says what to change.

Fields a curator sets on the page are declared with ``param(...)``: their label, help and the range
or menu the page offers live here once, and the page draws and restores them from this metadata.
The page's ranges may be narrower than what ``__post_init__`` accepts from a script.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field

from core.coherence.adversaries import ADVERSARIES
from core.coherence.calculator import TheoryPlan
from core.coherence.releases import RELEASES, is_private
from core.coherence.subgroups import CustomSubgroup
from core.coherence.theory import CONSTANTS
from core.contracts import DataRef, Plan, digest_of, param

BUNDLED = ("cps", "adult", "compas")
DEFAULT_LENS = {"cps": ("age_band", "education", "marital", "race", "sex"),
                "adult": ("education", "marital_status", "race", "sex", "relationship")}
MAX_TRIALS = 5000
MAX_NULL_SPLITS = 10
#: Epsilons the page offers for the sweep (a plan may sweep any positive epsilon up to 1000).
EPSILON_MENU = (0.001, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: How the page names the two constant modes of the theory (core.coherence.theory.CONSTANTS).
CONSTANT_LABELS = {"conservative": "conservative (repaired)", "paper": "as printed (unproven)"}

ReleaseParams = typing.Union[tuple(dict.fromkeys(spec.params for spec in RELEASES.values()))]
AdversaryParams = typing.Union[tuple(dict.fromkeys(spec.params for spec in ADVERSARIES.values()))]


def _number(value, what: str, low: float, high: float, *, whole: bool = False, open_low: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number; got {value!r}.")
    if whole and int(value) != value:
        raise ValueError(f"{what} must be a whole number; got {value!r}.")
    if value < low or (open_low and value == low) or value > high:
        bracket = "(" if open_low else "["
        raise ValueError(f"{what} must lie in {bracket}{low:g}, {high:g}]; got {value!r}.")


@dataclass(frozen=True)
class RowSample(Plan):
    """Rows audited: a uniform sample of ``size`` rows drawn with ``seed`` (None = every row)."""
    size: int | None = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.size is not None:
            _number(self.size, "The number of rows audited", 4, 10**8, whole=True)
        _number(self.seed, "The row-sample seed", 0, 2**63 - 1, whole=True)


@dataclass(frozen=True)
class ReleaseChoice(Plan):
    """One release algorithm by registry key, with its Params (defaults when not given)."""
    key: str
    params: ReleaseParams | None = None

    def __post_init__(self) -> None:
        spec = RELEASES[self.key]
        if self.params is None:
            object.__setattr__(self, "params", spec.default_params())
        if not isinstance(self.params, spec.params) or type(self.params) is not spec.params:
            raise ValueError(f"{spec.label} takes {spec.params.__name__}, not {type(self.params).__name__}.")

    def build(self):
        return RELEASES[self.key].build(self.params)


@dataclass(frozen=True)
class AdversaryChoice(Plan):
    """One adversary by registry key, with its Params (defaults when not given)."""
    key: str
    params: AdversaryParams | None = None

    def __post_init__(self) -> None:
        spec = ADVERSARIES[self.key]
        if self.params is None:
            object.__setattr__(self, "params", spec.default_params())
        if type(self.params) is not spec.params:
            raise ValueError(f"{spec.label} takes {spec.params.__name__}, not {type(self.params).__name__}.")


@dataclass(frozen=True)
class SweepPlan(Plan):
    """One differentially private release audited at several epsilons (its other Params as given)."""
    release: ReleaseChoice = field(default_factory=lambda: ReleaseChoice("laplace_table"))
    epsilons: tuple[float, ...] = param((0.01, 0.1, 1.0, 10.0), label="epsilons", choices=EPSILON_MENU,
                                        kind="multiselect")
    trials: int = param(60, label="trials", low=1, high=MAX_TRIALS)

    def __post_init__(self) -> None:
        if not is_private(self.release.key):
            raise ValueError(f"{RELEASES[self.release.key].label} is not differentially private; "
                             "the sweep takes a DP release.")
        if not hasattr(self.release.params, "epsilon"):
            raise ValueError(f"{RELEASES[self.release.key].label} has no epsilon to sweep.")
        eps = tuple(sorted({float(e) for e in self.epsilons}))
        if not eps:
            raise ValueError("Choose one or more epsilons to sweep.")
        for e in eps:
            _number(e, "Every epsilon", 0, 1000, open_low=True)
        object.__setattr__(self, "epsilons", eps)
        _number(self.trials, "The sweep's trials", 1, MAX_TRIALS, whole=True)

    def releases(self) -> tuple[ReleaseChoice, ...]:
        """The swept release once per epsilon."""
        return tuple(ReleaseChoice(self.release.key, self.release.params.__class__(
            **{**self.release.params.__dict__, "epsilon": e})) for e in self.epsilons)


@dataclass(frozen=True)
class AuditPlan(Plan):
    """Every parameter of a coherence audit (see the module docstring)."""
    data: DataRef = DataRef("cps")
    rows: RowSample = RowSample()
    target: str = param("income", label="Target attribute (what the adversary predicts)", kind="column")
    positive: str | None = "50K+"
    lens: tuple[str, ...] = param(DEFAULT_LENS["cps"], label="Lens: columns the predictor sees about a person",
                                  kind="columns")
    subgroup_columns: tuple[str, ...] = param(
        ("race", "sex"), label="Subgroup columns (levels and intersections; membership uses full records)",
        kind="columns")
    subgroup_order: int = param(2, label="Intersections up to order", low=1, high=3, choices=(1, 2, 3),
                                kind="select")
    custom_subgroups: tuple[CustomSubgroup, ...] = ()
    releases: tuple[ReleaseChoice, ...] = (ReleaseChoice("clear_half"), ReleaseChoice("laplace_table"))
    adversaries: tuple[AdversaryChoice, ...] = (AdversaryChoice("logistic"), AdversaryChoice("naive_bayes"),
                                                AdversaryChoice("nearest_neighbour"))
    alpha: float = param(0.4, label="alpha (largest allowed W1, 0 to 2)", low=0.01, high=2.0, step=0.01,
                         help="The spec default 0.1 lies below the sampling noise floor of groups near "
                              "gamma = 80 at 10,000 rows; 0.4 separates a leaky release from a private one.")
    beta: float = param(0.05, label="beta (largest allowed failure rate)", low=0.001, high=0.5, step=0.01)
    gamma: int = param(80, label="gamma (smallest subgroup, people)", low=1, high=1_000_000)
    trials: int = param(60, label="trials", low=1, high=MAX_TRIALS,
                        help="At 95% confidence a PASS at beta needs at least ln(0.05) / ln(1 - beta) trials "
                             "with no exceedance (59 at beta = 0.05).")
    null_splits: int = param(1, label="null splits per trial", low=1, high=MAX_NULL_SPLITS,
                             help="Extra independent splits scored by the same predictors: a steadier noise "
                                  "floor for little extra time (the rate pools them; intervals use the first).")
    seed: int = param(0, label="Seed (row sample, splits, releases)", low=0, high=2**31 - 1)
    confidence: float = 0.95
    constants: str = param("conservative", label="Theory constants", choices=CONSTANT_LABELS, kind="select")
    compare: bool = True
    sweep: SweepPlan | None = None
    theory: TheoryPlan | None = None

    def __post_init__(self) -> None:
        if not self.data.is_upload and self.data.source not in BUNDLED:
            raise ValueError(f"Choose a bundled data set among {list(BUNDLED)} or upload a CSV; "
                             f"got {self.data.source!r}.")
        if not self.target:
            raise ValueError("Choose the target attribute the adversaries predict.")
        if not self.lens:
            raise ValueError("Choose at least one lens column (what the predictor sees).")
        if self.target in self.lens:
            raise ValueError(f"The target {self.target!r} cannot also be a lens column.")
        if len(set(self.lens)) != len(self.lens):
            raise ValueError("A lens column is listed twice.")
        _number(self.subgroup_order, "The intersection order", 1, 3, whole=True)
        _number(self.alpha, "alpha (the largest allowed W1)", 0, 2, open_low=True)
        _number(self.beta, "beta (the largest allowed failure rate)", 0, 0.5, open_low=True)
        _number(self.gamma, "gamma (the smallest audited subgroup)", 1, 10**9, whole=True)
        _number(self.trials, "The number of trials", 1, MAX_TRIALS, whole=True)
        _number(self.null_splits, "Null splits per trial", 1, MAX_NULL_SPLITS, whole=True)
        _number(self.seed, "The seed", 0, 2**63 - 1, whole=True)
        _number(self.confidence, "The confidence", 0.5, 0.999)
        if self.constants not in CONSTANTS:
            raise ValueError(f"Theory constants must be one of {CONSTANTS}; got {self.constants!r}.")
        if self.compare and not self.releases:
            raise ValueError("Choose at least one release algorithm to audit.")
        if not self.adversaries:
            raise ValueError("Choose at least one adversary.")
        for what, items in (("release", self.releases), ("adversary", self.adversaries)):
            digests = [digest_of(c) for c in items]
            if len(set(digests)) != len(digests):
                raise ValueError(f"The same {what} is listed twice with the same parameters.")
        if any(not isinstance(c, CustomSubgroup) for c in self.custom_subgroups):
            raise ValueError("Each custom subgroup needs a name and its conditions (a CustomSubgroup).")
        labels = [c.label for c in self.custom_subgroups]
        if len(set(labels)) != len(labels):
            raise ValueError("Two custom subgroups have the same name; rename one.")

    @property
    def for_sweep(self) -> "AuditPlan":
        """What the epsilon sweep depends on (the compared releases, their trials and the calculator cleared);
        the comparison's key is :meth:`setup` (the sweep and calculator cleared)."""
        return self.replace(releases=(), trials=1, compare=False, theory=None)
