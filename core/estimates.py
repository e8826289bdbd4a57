"""How long a run will take, said before it starts: ``estimate(plan, data=None) -> RunEstimate``.

Infrastructure: this module imports no area. Each plan type an area runs has one cost model in
:data:`ESTIMATORS` (plan type -> :class:`EstimatorSpec`), registered by the area next to its own code
(``core/<area>/cost.py``, through the area's :class:`core.areas.AreaSpec`): it counts the work the plan
asks for (fits, rounds, adversary fits, chain steps), turns it into seconds with the area's cost model,
and lists what would make the run faster. The cost models are sums of work units times coefficients;
the coefficients live in ``core/estimate_costs.json``, written by ``benchmarks/estimate_bench.py --fit``
from measurements on this machine; each cost model brings its own defaults (its section of
:func:`default_costs`) that stand in until it has been run.

:func:`work_class` turns the estimate into the one decision every page makes before a run: answered in
the server at once ("interactive") or queued as a background job ("batch").

Two corrections turn fitted seconds into seconds here and now:

- the machine's speed: a fixed numpy probe (:func:`probe_seconds`) was timed when the coefficients
  were fitted, and is timed once more (cached) in the running process; predicted seconds are scaled
  by ``probe_now / probe_at_fit`` (a loaded machine runs the probe, and the work, slower);
- observed runs: :func:`observe` takes a finished run's measured seconds and keeps a process-wide
  correction factor, a decaying geometric mean of ``measured / predicted`` (a run's weight halves every
  ``OBSERVED_HALF_LIFE`` seconds of age, so the machine's recent load counts most), clipped to
  ``[1/OBSERVED_CLIP, OBSERVED_CLIP]`` and applied to every later estimate.

Both corrections scale the headline and every suggestion's seconds alike, so a suggestion ("1 seed:
about 20 minutes") is read against the same clock as the headline.

Nothing here reads private numbers into a statement meant to be shared: the work sentence names the
public strata count and the plan's own settings, never a stratum's size.
"""
from __future__ import annotations

import functools
import json
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from core.cluster import default_n_jobs

COSTS_PATH = Path(__file__).with_name("estimate_costs.json")
LONG_RUN_SECONDS = 180.0          # runs predicted above this ask before starting (3 minutes)
OBSERVED_CLIP = 5.0               # one surprising run never moves estimates by more than this factor
DEFAULT_BAND = 2.0                # low/high band around the estimate when the fit gives none
OBSERVED_HALF_LIFE = 1800.0       # seconds after which an observed run weighs half as much as a new one
PROBE_TTL = 120.0                 # seconds a timing of the speed probe stands for the machine's load
PROBE_REPEATS = 3                 # timings averaged per probe (about 0.3 s on an idle core)

INTERACTIVE_SECONDS = 10.0       # runs predicted at most this long are answered at once, in the server
INTERACTIVE, BATCH = "interactive", "batch"

#: The coefficients every estimate shares; each registered cost model adds its own section
#: (:func:`default_costs`), used until ``benchmarks/estimate_bench.py --fit`` has written
#: core/estimate_costs.json.
BASE_COSTS: dict[str, Any] = {"probe_seconds": None, "band": DEFAULT_BAND}


# --------------------------------------------------------------------------------------------------
# The estimate
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunEstimate:
    """What a run will do and roughly how long it takes here.

    ``work`` is one sentence of the work ("36 strata x 6 fits = 216 GEM fits"); ``units`` the count
    it ends on; ``seconds`` the corrected prediction with its ``low``/``high`` band; ``suggestions``
    the changes that would make this run faster (only those that apply); ``raw_seconds`` the fitted
    model's seconds before the speed corrections (what :func:`observe` compares against).
    """

    kind: str
    work: str
    units: int
    seconds: float
    low: float
    high: float
    suggestions: tuple[str, ...] = ()
    raw_seconds: float = 0.0
    observed: float = 1.0
    factor: float = 1.0
    """Both corrections together (speed x observed): ``seconds = raw_seconds x factor``, and every
    suggestion's seconds are scaled by it too."""

    def duration_text(self) -> str:
        """'about 40 seconds' or 'about 12 minutes' (rounded the way people say it)."""
        return duration_words(self.seconds)

    def sentence(self) -> str:
        """'About 12 minutes here: 36 strata x 6 fits = 216 GEM fits'."""
        text = self.duration_text()
        return f"{text[0].upper()}{text[1:]} here: {self.work}"

    def is_long(self, threshold: float = LONG_RUN_SECONDS) -> bool:
        return self.seconds > threshold


def duration_words(seconds: float) -> str:
    """Seconds in words: under 90 s in seconds (at least 1), else whole minutes, else hours."""
    seconds = max(float(seconds), 0.0)
    if seconds < 90:
        n = max(1, int(round(seconds)))
        return f"about {n} second{'s' if n != 1 else ''}"
    if seconds < 90 * 60:
        return f"about {int(round(seconds / 60))} minutes"
    hours = seconds / 3600
    return f"about {hours:.1f} hours"


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

Estimator = Callable[[Any, Any, Mapping], "Work"]


def fewer(what: str, now: int, to: int, seconds: float, share: float) -> "Tip":
    """The suggestion 'Fewer <what>: <to> instead of <now> takes ...' at ``share`` of ``seconds``."""
    return Tip(f"Fewer {what}: {to} instead of {now:,} takes {{}}.", (seconds * share,))


@dataclass(frozen=True)
class Tip:
    """A suggestion that quotes modelled seconds: ``text`` with one ``{}`` per entry of ``seconds``,
    filled in words once the estimate knows its corrections, so a suggestion reads on the same clock
    as the headline."""

    text: str
    seconds: tuple[float, ...] = ()

    def render(self, factor: float) -> str:
        return self.text.format(*(duration_words(max(x, 0.0) * factor) for x in self.seconds))


@dataclass(frozen=True)
class Work:
    """An estimator's answer before corrections: the sentence, the count, the modelled seconds and the
    suggestions that apply (plain text, or a :class:`Tip` whose seconds get the headline's corrections)."""

    sentence: str
    units: int
    seconds: float
    suggestions: tuple[str | Tip, ...] = ()


@dataclass(frozen=True)
class EstimatorSpec:
    """One cost model: ``plan`` is the plan type it answers for, ``label`` what it estimates,
    ``estimator(plan, data, costs) -> Work``, and ``defaults`` its coefficients' sections (used until
    the benchmark has fitted them on this machine)."""

    plan: type
    label: str
    estimator: Estimator
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.plan.__name__


class EstimatorRegistry(Mapping[type, EstimatorSpec]):
    """Plan type -> :class:`EstimatorSpec`; looking a plan up walks its class's bases, so a plan
    subclass is estimated as its parent unless it has its own cost model."""

    def __init__(self) -> None:
        self._specs: dict[type, EstimatorSpec] = {}

    def register(self, plan: type, label: str, defaults: Mapping[str, Any] | None = None
                 ) -> Callable[[Estimator], Estimator]:
        if not isinstance(plan, type):
            raise TypeError(f"A cost model is registered for a plan type, not {plan!r}.")

        def add(func: Estimator) -> Estimator:
            if plan in self._specs:
                raise ValueError(f"A cost model for {plan.__name__} is registered twice.")
            self._specs[plan] = EstimatorSpec(plan, label, func, dict(defaults or {}))
            return func
        return add

    def find(self, plan_type: type) -> EstimatorSpec | None:
        """The cost model of ``plan_type`` (or of its nearest base that has one), or None."""
        return next((self._specs[c] for c in plan_type.__mro__ if c in self._specs), None)

    def for_plan(self, plan) -> EstimatorSpec:
        spec = self.find(type(plan))
        if spec is None:
            raise ValueError(f"No time estimate for a {type(plan).__name__}; estimates cover "
                             f"{', '.join(c.__name__ for c in self._specs)}.")
        return spec

    def __getitem__(self, plan: type) -> EstimatorSpec:
        try:
            return self._specs[plan]
        except KeyError:
            raise ValueError(f"No cost model for {getattr(plan, '__name__', plan)!r}; cost models cover "
                             f"{[c.__name__ for c in self._specs]}.") from None

    def __iter__(self) -> Iterator[type]:
        return iter(self._specs)

    def __contains__(self, plan: object) -> bool:
        return plan in self._specs

    def __len__(self) -> int:
        return len(self._specs)


ESTIMATORS = EstimatorRegistry()


def estimate(plan, data=None, *, costs: Mapping | None = None, speed: float | None = None) -> RunEstimate:
    """The estimate of ``plan`` (on ``data`` where the work depends on it), corrected for this machine.

    ``costs`` defaults to :func:`load_costs`; ``speed`` to :func:`speed_factor` (1 means as fast as when
    the coefficients were fitted). The observed correction of :func:`observe` is applied on top.
    """
    spec = ESTIMATORS.for_plan(plan)
    costs = load_costs() if costs is None else costs
    work = spec.estimator(plan, data, costs)
    observed = observed_factor()
    factor = (speed_factor(costs) if speed is None else float(speed)) * observed
    seconds = max(work.seconds, 0.0) * factor
    band = max(float(costs.get("band", DEFAULT_BAND) or DEFAULT_BAND), 1.0)
    tips = tuple(t.render(factor) if isinstance(t, Tip) else str(t) for t in work.suggestions)
    return RunEstimate(kind=spec.key, work=work.sentence, units=int(work.units), seconds=seconds,
                       low=seconds / band, high=seconds * band, suggestions=tips,
                       raw_seconds=max(work.seconds, 0.0), observed=observed, factor=factor)


def interactive_seconds() -> float:
    """The interactive/batch threshold: ``DASHBOARD_INTERACTIVE_SECONDS`` when set (0 sends every run to
    the job queue, a large value answers every run in the server), else :data:`INTERACTIVE_SECONDS`."""
    text = os.environ.get("DASHBOARD_INTERACTIVE_SECONDS", "").strip()
    if not text:
        return INTERACTIVE_SECONDS
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"DASHBOARD_INTERACTIVE_SECONDS must be a number of seconds, not {text!r}.") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"DASHBOARD_INTERACTIVE_SECONDS must be 0 or more seconds, not {text!r}.")
    return value


def work_class(plan, data=None, *, threshold: float | None = None) -> str:
    """``"interactive"`` or ``"batch"``: how a page runs ``plan``, decided from its own estimate here
    and now (the machine's speed and the observed runs included).

    A run predicted to take at most ``threshold`` seconds is interactive (answered at once in the
    server, never queued behind other sessions' jobs); a longer one is batch (a background job that
    says how long before it starts, reports progress and can be cancelled). A plan with no cost model,
    or whose estimate fails, is batch: the safe side, as a job can always be cancelled. ``threshold``
    defaults to :func:`interactive_seconds`."""
    try:
        est = estimate(plan, data)
    except Exception:   # noqa: BLE001 - an estimate never stops a run; unknown work waits its turn
        return BATCH
    return class_of(est, threshold=threshold)


def class_of(est: RunEstimate, *, threshold: float | None = None) -> str:
    """``"interactive"`` or ``"batch"`` for work estimated at ``est`` (the rule of :func:`work_class`)."""
    threshold = interactive_seconds() if threshold is None else threshold
    return INTERACTIVE if est.seconds <= threshold else BATCH


# --------------------------------------------------------------------------------------------------
# Coefficients and speed corrections
# --------------------------------------------------------------------------------------------------

def merge_costs(base: Mapping, update: Mapping) -> dict:
    """``base`` with ``update`` written over it, nested dictionaries merged key by key."""
    out = dict(base)
    for k, v in update.items():
        out[k] = merge_costs(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def default_costs() -> dict:
    """The shared coefficients with every registered cost model's default sections written over them."""
    out = dict(BASE_COSTS)
    for spec in ESTIMATORS.values():
        out = merge_costs(out, spec.defaults)
    return out


@functools.lru_cache(maxsize=4)
def _read_costs(path: str, mtime: float) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def load_costs(path: Path | None = None) -> dict:
    """The fitted coefficients (``core/estimate_costs.json``) over the registered defaults; the defaults
    alone when the file is missing or unreadable (estimates then say less, but still say something)."""
    path = Path(os.environ.get("DASHBOARD_ESTIMATE_COSTS", COSTS_PATH)) if path is None else Path(path)
    try:
        fitted = _read_costs(str(path), path.stat().st_mtime)
    except (OSError, ValueError):
        fitted = {}
    return merge_costs(default_costs(), fitted)


def probe_seconds(repeats: int = 5, clock=time.perf_counter) -> float:
    """Seconds of a fixed numpy workload (matrix products and a sort on a seeded array) on one thread,
    the mean of ``repeats``: the yardstick that compares this machine now with the machine the costs were
    fitted on. The mean, not the best, so a loaded machine (whose work gets a share of a core) reads as
    slower; one thread, as each fit runs its linear algebra on one thread of one worker. ``clock=
    time.process_time`` reads the workload's CPU seconds instead: the core's speed whatever its load."""
    try:
        from threadpoolctl import threadpool_limits   # installed with scikit-learn
    except ImportError:
        return _probe(repeats, clock)
    with threadpool_limits(limits=1):
        return _probe(repeats, clock)


def _probe(repeats: int, clock=time.perf_counter) -> float:
    rng = np.random.default_rng(12345)
    a = rng.standard_normal((200, 200)) / 15.0
    v = rng.standard_normal(1_000_000)
    took = []
    for _ in range(max(int(repeats), 1)):
        start = clock()
        b = a
        for _ in range(24):     # long enough (about 0.1 s idle) to see the share of a core it gets
            b = np.tanh(b @ a)
        np.sort(v)
        took.append(clock() - start)
    return float(np.mean(took))


class ProbeClock:
    """:func:`probe_seconds` timed again once its last timing is ``ttl`` seconds old, so the speed
    correction follows the machine's load through a server's life (a probe timed once at start-up on a
    quiet machine promised a learner half the time it then took on a busy one). Thread-safe; the
    timing itself runs outside the lock, and a second caller meanwhile reads the last value."""

    def __init__(self, ttl: float = PROBE_TTL, clock: Callable[[], float] = time.monotonic,
                 probe: Callable[[], float] = lambda: probe_seconds(PROBE_REPEATS)) -> None:
        self.ttl, self.clock, self.probe = float(ttl), clock, probe
        self._lock = threading.Lock()
        self._value: float | None = None
        self._at = -math.inf
        self._busy = False

    def __call__(self) -> float:
        now = float(self.clock())
        with self._lock:
            fresh = self._value is not None and now - self._at < self.ttl
            if fresh or (self._busy and self._value is not None):
                return self._value
            self._busy = True
        try:
            value = float(self.probe())
        finally:
            with self._lock:
                self._busy = False
        with self._lock:
            self._value, self._at = value, now
        return value


current_probe_seconds = ProbeClock()
"""The probe's seconds now: timed at the first estimate, then again every ``PROBE_TTL`` seconds."""


def speed_correction(probe_at_fit: float | None, probe_now: float | None) -> float:
    """How much slower than at fitting time this machine runs: ``probe_now / probe_at_fit`` (1 when
    either is unknown), bounded to [0.2, 10] so one odd probe cannot make an estimate absurd."""
    if not probe_at_fit or not probe_now or probe_at_fit <= 0 or probe_now <= 0:
        return 1.0
    return float(min(max(probe_now / probe_at_fit, 0.2), 10.0))


def speed_factor(costs: Mapping | None = None) -> float:
    """The speed correction of the loaded coefficients against this process's probe."""
    costs = load_costs() if costs is None else costs
    fitted = costs.get("probe_seconds")
    return speed_correction(fitted, current_probe_seconds() if fitted else None)


class ObservedSpeed:
    """A running correction from finished runs: a decaying geometric mean of measured / predicted seconds.

    Ratios are combined on the log scale (a run twice as slow and one twice as fast cancel), each
    weighted by ``0.5 ** (age / half_life)`` with its age in seconds of ``clock`` (recent runs weigh more:
    the machine's load now matters, not this morning's), so the factor is
    ``exp(sum w_i log r_i / sum w_i)``, clipped to [1/clip, clip]. Both sums are kept scaled to the
    latest run and decayed when the next one comes, so adding a run is O(1). Thread-safe: one instance
    serves every session of a server.
    """

    def __init__(self, clip: float = OBSERVED_CLIP, half_life: float = OBSERVED_HALF_LIFE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not half_life > 0:
            raise ValueError(f"The half-life of observed runs must be positive; got {half_life}.")
        self.clip = float(clip)
        self.half_life = float(half_life)
        self.clock = clock
        self._lock = threading.Lock()
        self._log_sum = 0.0
        self._weight = 0.0
        self._last: float | None = None
        self._n = 0

    def add(self, predicted: float, measured: float) -> float:
        predicted, measured = float(predicted), float(measured)
        if not (predicted > 0 and measured > 0 and math.isfinite(predicted) and math.isfinite(measured)):
            return self.factor()
        now = float(self.clock())
        with self._lock:
            if self._last is not None:
                decay = 0.5 ** (max(now - self._last, 0.0) / self.half_life)
                self._log_sum *= decay
                self._weight *= decay
            self._log_sum += math.log(measured / predicted)
            self._weight += 1.0
            self._last = now if self._last is None else max(now, self._last)
            self._n += 1
        return self.factor()

    def factor(self) -> float:
        with self._lock:
            if self._n == 0 or self._weight <= 0:
                return 1.0
            value = math.exp(self._log_sum / self._weight)
        return float(min(max(value, 1.0 / self.clip), self.clip))

    def count(self) -> int:
        return self._n

    def reset(self) -> None:
        with self._lock:
            self._log_sum, self._weight, self._last, self._n = 0.0, 0.0, None, 0


OBSERVED = ObservedSpeed()


def observe(estimate_: RunEstimate, measured_seconds: float) -> float:
    """Record that a run estimated by ``estimate_`` took ``measured_seconds``; returns the new factor.

    The comparison is against the estimate's seconds without the observed correction it was made with
    (the model's seconds times the machine's speed correction), so repeated runs do not compound it.
    """
    return OBSERVED.add(estimate_.seconds / max(estimate_.observed, 1e-12), measured_seconds)


def observed_factor() -> float:
    return OBSERVED.factor()



def workers() -> int:
    """Local workers a fan-out uses (``core.parallel``'s default)."""
    try:
        return max(int(default_n_jobs()), 1)
    except Exception:   # an estimate never fails for want of the worker count
        return max(os.cpu_count() or 1, 1)


def lanes_seconds(items: int, item_seconds: float, n_workers: int | None = None) -> float:
    """Wall seconds of ``items`` equal items of ``item_seconds`` each, shared by the local workers: the
    items run in ``ceil(items / lanes)`` waves, ``lanes`` = the workers (at most the items)."""
    items = max(int(items), 0)
    if items == 0:
        return 0.0
    lanes = min(workers() if n_workers is None else max(int(n_workers), 1), items)
    return math.ceil(items / lanes) * float(item_seconds)


__all__ = ["RunEstimate", "Work", "EstimatorSpec", "ESTIMATORS", "estimate", "observe", "observed_factor",
           "speed_factor", "speed_correction", "probe_seconds", "load_costs", "LONG_RUN_SECONDS",
           "duration_words", "OBSERVED", "ObservedSpeed", "BASE_COSTS", "default_costs", "merge_costs",
           "COSTS_PATH", "Tip", "OBSERVED_HALF_LIFE", "fewer", "workers", "lanes_seconds", "work_class", "class_of",
           "INTERACTIVE", "BATCH", "INTERACTIVE_SECONDS", "interactive_seconds", "ProbeClock", "current_probe_seconds", "PROBE_TTL"]
