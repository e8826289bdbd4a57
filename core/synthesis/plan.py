"""The Stratified synthesis plan: every choice that shapes a number, validated once.

A :class:`SynthesisPlan` names the data, the columns and strata, what the curator declares public
(category lists, stratum sizes, numeric ranges and their bins), the synthesizer and its Params, delta, and one
sub-plan per tab (``None`` when that tab has not been asked to run). ``core.synthesis.run`` turns
it into a :class:`~core.synthesis.result.SynthesisResult`.

Fields a curator sets on the page are declared once with :func:`core.contracts.param`: label, help,
and the bounds and menus the page offers; the page draws their widgets from that declaration and
restores them from a saved plan. The plans' own checks stay broader than what the page offers, so a
plan written in a script (or a report saved by an earlier version) still loads and runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from core.contracts import DataRef, Plan, Registry, Spec, param
from core.privacy.mechanisms import NoParams
from core.synthesis.mean_noise import MeanNoise, mean_noise_factory
from core.synthesis.registry import SYNTHESIZERS, AIMParams, GEMParams, IndependentParams, MSTParams

SIZE_POLICIES = {"dp_count": "Estimate with a DP count (charged)", "public": "Public (e.g. census totals)"}
SMALL_ACTIONS = {"keep": "kept (own model)", "merge": "merged into one model", "drop": "dropped (absent from output)"}
METHODS = ("stratified", "pooled")
NOISES = Registry("noise for a private mean", (
    Spec("laplace", "Laplace (pure epsilon-DP)", mean_noise_factory("laplace", "Laplace"), NoParams,
         help="Scale = sensitivity / epsilon; the whole budget is a pure epsilon."),
    Spec("gaussian", "Gaussian (zCDP at the plan's delta)", mean_noise_factory("gaussian", "Gaussian"), NoParams,
         help="Runs at the largest zCDP rho that is (epsilon, delta)-DP at the plan's delta."),
))
"""The noises a private mean may take (the mean-estimation simulation and the stratified-mean release).
``NOISES[key].build()`` is a :class:`~core.synthesis.mean_noise.MeanNoise`: its unit, calibration,
samplers, variance and 95% point; the means ask it and never read the key."""


def mean_noise(noise) -> MeanNoise:
    """The :class:`MeanNoise` of a ``NOISES`` key (built with its default Params), or the object itself."""
    if isinstance(noise, MeanNoise):
        return noise
    if noise not in NOISES:
        raise ValueError(f"noise must be {' or '.join(repr(k) for k in NOISES)}; got {noise!r}.")
    return NOISES[noise].build()


WEIGHTS = {"exact": "public exact sizes", "dp": "DP-noised sizes"}
MAX_EPSILON = 50.0
MAX_STRATA = 200   # beyond this a sweep takes minutes and its per-group views are unreadable
#: Menus the page offers (a plan may hold any value its own checks accept).
DELTA_MENU = {1e-9: "1e-09", 1e-7: "1e-07", 1e-5: "1e-05"}
ALPHA_MENU = (0.1, 0.3, 1.0, 3.0)
K_MENU = (2, 3, 6, 12)


def check_public_range(col: str, lo, hi) -> tuple[float, float]:
    """A public range (low, high) of column ``col``: finite ends, high above low, and a width that is a
    finite number too (ends near the float maximum would make bins and sensitivities infinite)."""
    lo = check_number(lo, f"The lower bound of {col}")
    hi = check_number(hi, f"The upper bound of {col}")
    if hi <= lo:
        raise ValueError(f"The public range of {col} must have its upper bound above its lower bound.")
    if not math.isfinite(hi - lo):
        raise ValueError(f"The public range of {col} is wider than a number can hold; give the range the "
                         "column's values really lie in.")
    return lo, hi


def check_numeric_bounds(bounds) -> None:
    """Every (column, low, high) entry of a plan's numeric bounds, each column once."""
    seen = set()
    for entry in bounds:
        if not isinstance(entry, (tuple, list)) or len(entry) != 3 or not isinstance(entry[0], str):
            raise ValueError("Each numeric bound is (column, low, high), with the column's name as text.")
        if entry[0] in seen:
            raise ValueError(f"The column {entry[0]} has two public ranges; keep one.")
        seen.add(entry[0])
        check_public_range(*entry)


MAX_BINS = 200   # a bin count above this spreads a release's budget over cells too small to measure


def check_numeric_bins(bins) -> None:
    """Every (column, bin count) entry of a plan's numeric bins: each column once, 1..MAX_BINS bins."""
    seen = set()
    for entry in bins:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2 or not isinstance(entry[0], str):
            raise ValueError("Each numeric bin count is (column, number of bins), with the column's name as text.")
        if entry[0] in seen:
            raise ValueError(f"The column {entry[0]} has two bin counts; keep one.")
        seen.add(entry[0])
        check_whole(entry[1], f"The number of bins of {entry[0]}", 1, MAX_BINS)


def check_number(value, name: str, low: float | None = None, high: float | None = None,
                 low_open: bool = False) -> float:
    """``value`` as a finite float within bounds, or a ValueError naming ``name`` and what to change."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, not {value!r}.")
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number; got {value!r:.40}.") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {value}. Enter a number such as 1.")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'above' if low_open else 'at least'} {low:g}; got {value:g}.")
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high:g}; got {value:g}.")
    return value


def check_epsilon(value, name: str = "Epsilon") -> float:
    return check_number(value, name, 0.0, MAX_EPSILON, low_open=True)


def check_whole(value, name: str, low: int, high: int) -> int:
    number = check_number(value, name, low, high)
    if number != int(number):
        raise ValueError(f"{name} must be a whole number; got {number:g}.")
    return int(number)


def parse_epsilons(text: str) -> tuple[float, ...]:
    """Comma-separated epsilons from a text box, sorted and de-duplicated (ValueError says what to fix)."""
    try:
        values = tuple(sorted({float(p) for p in str(text).replace(";", ",").split(",") if p.strip()}))
    except ValueError:
        raise ValueError("Epsilons must be numbers separated by commas, e.g. 0.1, 1, 5.") from None
    if not values:
        raise ValueError("Give at least one epsilon, e.g. 0.1, 1, 5.")
    for v in values:
        check_epsilon(v, "Each epsilon")
    if len(values) > 8:
        raise ValueError("Give at most eight epsilons, so the sweep stays interactive.")
    return values


def parse_bounds(text: str) -> tuple[tuple[str, float, float], ...]:
    """Public numeric ranges from text like "age: 0-120; hours_per_week: 0-99" (ValueError says what to fix)."""
    out = []
    for part in str(text).replace("\n", ";").split(";"):
        if not part.strip():
            continue
        name, sep, rng = part.partition(":")
        lo, dash, hi = rng.strip().partition("-") if not rng.strip().startswith("-") else ("", "", "")
        if not sep or not dash or not name.strip():
            raise ValueError(f"Write each public range as 'column: low-high' (e.g. age: 0-120); got {part.strip()!r}.")
        low, high = check_number(lo, f"The lower bound of {name.strip()}"), check_number(hi, f"The upper bound of {name.strip()}")
        if high <= low:
            raise ValueError(f"The public range of {name.strip()} must have its upper bound above its lower bound.")
        out.append((name.strip(), low, high))
    return tuple(out)


def bounds_text(bounds: tuple[tuple[str, float, float], ...]) -> str:
    return "; ".join(f"{c}: {lo:g}-{hi:g}" for c, lo, hi in bounds)


@dataclass(frozen=True)
class SweepPlan(Plan):
    """Privacy-utility sweep: epsilons x seeds x {stratified, pooled}, fitted on a training split."""

    epsilons: tuple[float, ...] = (0.1, 1.0, 5.0)
    seeds: tuple[int, ...] = (0, 1)
    test_fraction: float = 0.2
    split_seed: int = 42
    n_trees: int = 20

    def __post_init__(self) -> None:
        if not self.epsilons:
            raise ValueError("Give at least one epsilon for the sweep.")
        for e in self.epsilons:
            check_epsilon(e, "Each epsilon of the sweep")
        if len(self.epsilons) > 8:
            raise ValueError("Give at most eight epsilons, so the sweep stays interactive.")
        if not self.seeds or len(self.seeds) > 10:
            raise ValueError("Give between one and ten seeds.")
        for s in self.seeds:
            check_whole(s, "Each seed", 0, 2**31 - 1)
        check_number(self.test_fraction, "The held-out test fraction", 0.0, 0.9, low_open=True)
        check_whole(self.split_seed, "The split seed", 0, 2**31 - 1)
        check_whole(self.n_trees, "The number of trees", 1, 500)


@dataclass(frozen=True)
class MarginalsPlan(Plan):
    """One (epsilon, seed) of the sweep's fits, compared column by column inside each group."""

    epsilon: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_whole(self.seed, "The seed", 0, 2**31 - 1)


@dataclass(frozen=True)
class ReleasePlan(Plan):
    """A synthetic data set fitted on every row (the seeded version is a simulation).

    The fields are declared with ``param(...)``: their bounds are what the release tab offers (epsilon
    from 0.01; the plan's own check takes any positive epsilon up to ``MAX_EPSILON``)."""

    epsilon: float = param(1.0, label="Epsilon", low=0.01, high=50.0, step=0.1)
    method: str = param("stratified", label="Method", choices=METHODS)
    seed: int = param(0, label="Seed (simulation only)", low=0, high=2**31 - 1)

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "The release's epsilon")
        if self.method not in METHODS:
            raise ValueError(f"The release method must be one of {METHODS}; got {self.method!r}.")
        check_whole(self.seed, "The release seed", 0, 2**31 - 1)


@dataclass(frozen=True)
class MeansPlan(Plan):
    """Simulated private means on N(mu_i, 1) data with the strata's group sizes (Sec. 3 of the paper)."""

    epsilons: tuple[float, ...] = (0.1, 1.0, 5.0)
    R: float = param(1.0, label="Bound R on |mean|", low=0.1, high=100.0, step=0.5)
    gamma: float = param(0.1, label="gamma (failure probability)", low=0.001, high=0.5, step=0.01)
    runs: int = param(40, label="Simulated runs per epsilon", low=10, high=200, step=10, kind="slider")
    noise: str = param("laplace", label="Noise", choices=NOISES.labels(), kind="radio",
                       help="Gaussian noise runs at the largest rho that is (epsilon, delta)-DP, so both noises "
                            "are compared at the same epsilon.")
    group_epsilon: float = param(1.0, label="Epsilon", kind="select")   # the menu is the curves' epsilons
    spread: float = param(0.5, label="Spread of the group means", low=0.0, high=2.0, step=0.1, kind="slider",
                          help="Group means are drawn once as spread x N(0, 1), clipped to [-R, R].")
    weights: str = param("exact", label="Recombination weights", choices=WEIGHTS, kind="radio")
    count_epsilon: float = param(0.1, label="Epsilon for the size counts", low=0.01, high=10.0, step=0.05)
    coinpress_alpha: float = param(0.3, label="Dirichlet alpha of group sizes", choices=ALPHA_MENU,
                                   kind="select_slider")
    coinpress_k: int = param(3, label="Groups k", choices=K_MENU, kind="select_slider")
    coinpress_runs: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.epsilons:
            raise ValueError("Give at least one epsilon for the mean-estimation curves.")
        for e in self.epsilons:
            check_epsilon(e, "Each epsilon of the mean-estimation curves")
        check_epsilon(self.group_epsilon, "The epsilon of the per-group comparison")
        check_number(self.R, "The bound R on |mean|", 0.0, 100.0, low_open=True)
        check_number(self.gamma, "gamma (failure probability)", 0.0, 0.5, low_open=True)
        check_whole(self.runs, "Simulated runs", 1, 1000)
        if self.noise not in NOISES:
            raise ValueError(f"Noise must be one of {list(NOISES)}; got {self.noise!r}.")
        check_number(self.spread, "The spread of the group means", 0.0, 10.0)
        if self.weights not in WEIGHTS:
            raise ValueError(f"Recombination weights must be one of {list(WEIGHTS)}; got {self.weights!r}.")
        check_epsilon(self.count_epsilon, "The epsilon for the size counts")
        check_number(self.coinpress_alpha, "The Dirichlet alpha", 0.0, 100.0, low_open=True)
        check_whole(self.coinpress_k, "The number of groups k", 2, 50)
        check_whole(self.coinpress_runs, "COINPRESS runs", 1, 500)
        check_whole(self.seed, "The seed", 0, 2**31 - 1)


@dataclass(frozen=True)
class SynthesisPlan(Plan):
    """Everything the Stratified synthesis page computes from, for one data set.

    Public declarations: ``domain_declared_public`` (the category lists of the chosen columns are
    known without reading the private rows; required for uploads, where they would otherwise come
    from the data), ``sizes_declared_public`` (with size policy "public": stratum sizes, and hence
    the row count, are public), ``numeric_bounds`` ((column, low, high) public ranges of numeric
    columns, used when the data reference carries no schema that declares them) with ``numeric_bins``
    ((column, count) equal-width bins over each range; ``DEFAULT_BINS`` when unset). Numeric columns are
    synthesised as their bins and returned in their units. Under "dp_count" the stratum counts
    (stratified) or the row count (pooled) are measured with ``count_share`` of each budget, and
    releases have that noisy size.
    """

    data: DataRef
    columns: tuple[str, ...]
    strata: tuple[str, ...] = ("sex", "race")
    target: str | None = "income"
    synthesizer: str = param("mst", label="Synthesizer", kind="select",   # the menu: SYNTHESIZERS when drawn
                             help=" ".join(f"{s.label}: {s.help}" for s in SYNTHESIZERS.values()))
    synth_params: MSTParams | IndependentParams | AIMParams | GEMParams | None = None
    delta: float = param(1e-9, label="delta", choices=DELTA_MENU, kind="select")
    size_policy: str = param("dp_count", label="Stratum sizes", choices=SIZE_POLICIES, kind="radio")
    sizes_declared_public: bool = param(
        False, label="I confirm the stratum sizes are public knowledge",
        help="Only then may exact sizes (and the exact row count) steer a release uncharged.")
    count_share: float = param(0.1, label="Share of the budget for the counts", low=0.02, high=0.5, step=0.02,
                               kind="slider")
    min_stratum_size: int = param(0, label="Small-stratum threshold (rows)", low=0, high=100_000, step=10,
                                  help="Strata whose size (public or DP) is below this are flagged.")
    small_action: str = param("keep", label="Small strata are", choices=SMALL_ACTIONS, kind="select")
    domain_declared_public: bool = param(
        False, label="The category lists of the chosen columns are public knowledge",
        help="Otherwise they would be read from the private rows and published with every synthetic row. Tick "
             "only if the categories are known without looking at the data (a code book).")
    numeric_bounds: tuple[tuple[str, float, float], ...] = ()
    numeric_bins: tuple[tuple[str, int], ...] | None = field(default=None, metadata={"omit_if_none": True})
    sweep: SweepPlan | None = None
    marginals: MarginalsPlan | None = None
    release: ReleasePlan | None = None
    means: MeansPlan | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataRef):
            raise ValueError("The plan needs a data reference (a bundled data set or an upload).")
        if len(set(self.columns)) != len(self.columns) or not self.columns:
            raise ValueError("Choose the columns to synthesise, each once.")
        if not self.strata:
            raise ValueError("Choose at least one strata column.")
        if len(self.strata) > 3:
            raise ValueError("Choose at most three strata columns.")
        missing = [c for c in self.strata if c not in self.columns]
        if missing:
            raise ValueError(f"Strata column(s) {missing} must be among the columns to synthesise.")
        if len(self.columns) - len(self.strata) < 1:
            raise ValueError("Synthesise at least one column besides the strata columns.")
        if self.target is not None and (self.target not in self.columns or self.target in self.strata):
            raise ValueError("The target must be one of the synthesised columns that is not a strata column.")
        spec = SYNTHESIZERS[self.synthesizer]
        if self.synth_params is None:   # one canonical plan whether defaults are spelled out or not
            object.__setattr__(self, "synth_params", spec.params())
        if not isinstance(self.synth_params, spec.params):
            raise ValueError(f"{spec.label} takes {spec.params.__name__}, not {type(self.synth_params).__name__}.")
        delta = check_number(self.delta, "delta", 0.0, 0.01, low_open=True)
        if delta <= 0:
            raise ValueError("delta must be above 0.")
        if self.size_policy not in SIZE_POLICIES:
            raise ValueError(f"The stratum-size policy must be one of {list(SIZE_POLICIES)}; got {self.size_policy!r}.")
        if self.size_policy == "public" and not self.sizes_declared_public:
            raise ValueError("Public stratum sizes must be declared public: tick the box, or choose DP counts.")
        check_number(self.count_share, "The share of the budget for the counts", 0.0, 0.9, low_open=True)
        check_whole(self.min_stratum_size, "The small-stratum threshold", 0, 10**9)
        if self.small_action not in SMALL_ACTIONS:
            raise ValueError(f"Small strata must be one of {list(SMALL_ACTIONS)}; got {self.small_action!r}.")
        if self.data.is_upload and not self.domain_declared_public:
            raise ValueError("For an uploaded file the category lists would be read from the private rows. "
                             "Declare that the categories of the chosen columns are public knowledge (tick "
                             "the box), or choose a bundled data set.")
        check_numeric_bounds(self.numeric_bounds)
        if self.numeric_bins is not None:
            check_numeric_bins(self.numeric_bins)
            if not self.numeric_bins:   # no count given is the same plan as none declared
                object.__setattr__(self, "numeric_bins", None)

    @property
    def params(self):
        """The synthesizer's Params (its defaults when the plan leaves them out)."""
        return self.synth_params

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """The public range of every numeric column: the data set's declaration (``ColumnSchema.bounds`` of
        its number columns) when the data reference carries one, else the plan's ``numeric_bounds``."""
        out = {c: (float(lo), float(hi)) for c, lo, hi in self.numeric_bounds}
        out.update(self.schema_ranges())
        return out

    @property
    def bins(self) -> dict[str, int]:
        """The bin count of every column with a public range: the plan's ``numeric_bins`` (DEFAULT_BINS for
        a column without one), or the count of equal-width bins the data set's declaration gives."""
        from core.synthesis.encoding import DEFAULT_BINS

        given = dict(self.numeric_bins or ())
        out = {c: int(given.get(c, DEFAULT_BINS)) for c in self.bounds}
        schema = self.data.schema
        for c in self.schema_ranges():
            declared = schema.column(c).bins
            if isinstance(declared, int):
                out[c] = declared
        return out

    def schema_ranges(self) -> dict[str, tuple[float, float]]:
        """Public ranges of the number columns the data reference's schema declares (none without a schema)."""
        schema = self.data.schema
        if schema is None:
            return {}
        return {c.name: (float(c.bounds[0]), float(c.bounds[1])) for c in schema.used_columns()
                if c.role == "number" and c.bounds is not None}

    @property
    def sizes_public(self) -> bool:
        return self.size_policy == "public" and self.sizes_declared_public

