"""The shapes every tool shares: progress callbacks, seeded generators, plans, results, registries.

The one rule of the project is plan -> run -> result:

- a frozen :class:`Plan` holds every parameter that shapes a number (data reference, sampling,
  seeds, each tab's sub-plan) and validates itself in ``__post_init__`` with ``ValueError``;
- ``core.<area>.run(plan, data=None, *, progress=None)`` computes a :class:`Result`;
- ``result.tables()`` gives tidy DataFrames that pages draw and reports store.

Plans round-trip through plain JSON (:func:`plan_to_dict` / :func:`plan_from_dict`), so a saved
report can be loaded back and rerun from a script.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import pandas as pd

Progress = Callable[[int, int, str], None]
"""``progress(done, total, message)``; long work calls it as it goes. Raising
:class:`Cancelled` from inside it stops the work."""

SeedLike = int | Sequence[int] | np.random.SeedSequence | np.random.Generator


class Cancelled(Exception):
    """Raised (from a progress callback) to stop long work; the page catches it and keeps its inputs."""


def make_rng(seed: SeedLike | None, *, what: str = "this draw") -> np.random.Generator:
    """The one normaliser from a seed (or generator) to a ``numpy.random.Generator``.

    A Generator is passed through unchanged (the caller owns its stream); an int, a sequence of
    ints or a SeedSequence seeds a fresh PCG64. ``None`` is refused: every draw that shapes a
    number must be reproducible from its plan, and a real release goes through
    ``core.privacy.secure`` instead.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        raise ValueError(f"Give a seed for {what}: seeded draws make the numbers reproducible.")
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"A seed must be a non-negative whole number (or a list of them); got {seed!r}.") from exc


def seed_sequence(seed: SeedLike, *keys: int) -> np.random.SeedSequence:
    """A SeedSequence for ``seed`` extended by integer ``keys`` (a named sub-stream of a plan's seed).

    Streams keyed differently are independent; the same seed and keys always give the same stream,
    whatever else runs beside it.
    """
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63 - 1))
    if isinstance(seed, np.random.SeedSequence):
        base = seed.entropy if isinstance(seed.entropy, int) else list(seed.entropy)
        prefix = [base] if isinstance(base, int) else list(base)
        return np.random.SeedSequence(prefix + list(seed.spawn_key) + [int(k) for k in keys])
    entropy = [int(seed)] if np.isscalar(seed) else [int(s) for s in seed]
    return np.random.SeedSequence(entropy + [int(k) for k in keys])


def stream_key(name: str) -> int:
    """A stable 32-bit integer for a name, to key a sub-stream by what it is for (e.g. a release key)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def named_rng(seed: SeedLike, *keys: int | str) -> np.random.Generator:
    """The generator of a named sub-stream of ``seed``: ``make_rng(seed_sequence(seed, *keys))`` where
    each text key is first turned into an integer by :func:`stream_key` (``named_rng(7, "curves")``)."""
    if seed is None:
        raise ValueError("Give a seed: seeded draws make the numbers reproducible.")
    return make_rng(seed_sequence(seed, *(stream_key(k) if isinstance(k, str) else int(k) for k in keys)))


def spawn_rngs(seed: SeedLike, n: int) -> list[np.random.Generator]:
    """``n`` independent child generators of ``seed``, one per item, so results do not depend on
    where or in what order items run. A Generator spawns from its own seed sequence (advancing it)."""
    if isinstance(seed, np.random.Generator):
        seq = getattr(seed.bit_generator, "seed_seq", None)
        if seq is None:
            return [np.random.default_rng(seed.integers(0, 2**63 - 1)) for _ in range(int(n))]
        return [np.random.default_rng(s) for s in seq.spawn(int(n))]
    return [np.random.default_rng(s) for s in seed_sequence(seed).spawn(int(n))]


# --------------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------------

def _canonical(value: Any) -> Any:
    """JSON-able form of plan values (dataclasses tagged with their type, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {"__type__": type(value).__name__}
        out.update({f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)
                    if not (f.metadata.get("omit_if_none") and getattr(value, f.name) is None)})
        return out
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def digest_of(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (a plan, a params dataclass or plain data)."""
    text = json.dumps(_canonical(value), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class DataRef:
    """Which data a plan runs on: a bundled data set by key, or an upload by its fingerprint.

    ``fingerprint`` is the SHA-256 of the uploaded bytes (for several files, of their digests in
    order); bundled data need none. Only the fingerprint is stored, never the data. ``schema`` is the
    curator's declaration of an uploaded data set (a :class:`core.intake.DataSchema`: its name, roles,
    public categories and bounds, missing values, label merges, unit of protection), so every plan that
    uses the file carries exactly how it was cleaned; plans without one keep their earlier digests.
    """

    source: str
    fingerprint: str = ""
    schema: Any = field(default=None, metadata={"omit_if_none": True})

    UPLOAD: ClassVar[str] = "upload"

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError("Name the data: a bundled data set or 'upload'.")
        if self.source == self.UPLOAD and not self.fingerprint:
            raise ValueError("An uploaded data set is referenced by its fingerprint; none was given.")

    @property
    def is_upload(self) -> bool:
        return self.source == self.UPLOAD


def bytes_fingerprint(*parts: bytes) -> str:
    """Fingerprint of uploaded bytes: SHA-256 of one file, or of the per-file digests of several."""
    if len(parts) == 1:
        return hashlib.sha256(parts[0]).hexdigest()
    return hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).hexdigest()


class Plan:
    """Mixin for frozen plan dataclasses: a digest, and a JSON round trip that keeps nested plans.

    Subclasses are ``@dataclass(frozen=True)`` and validate in ``__post_init__``. Fields hold plain
    values, tuples, nested plans/params dataclasses or a :class:`DataRef`.
    """

    def digest(self) -> str:
        return digest_of(self)

    def to_dict(self) -> dict:
        return plan_to_dict(self)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def part_names(self) -> tuple[str, ...]:
        """The optional sub-plans (tabs) of this plan: fields whose default is None and that hold a
        plan when set."""
        hints = _resolve_hints(type(self))
        out = []
        for f in dataclasses.fields(self):
            if f.default is not None:
                continue
            tp = _strip_optional(hints.get(f.name, Any))
            if isinstance(tp, type) and issubclass(tp, Plan):
                out.append(f.name)
        return tuple(out)

    def setup(self):
        """The plan with every sub-plan cleared: what its tabs share, and so the key of a cached
        sub-run that depends on the shared part only (one rule instead of plans stripped by hand)."""
        return self.replace(**{name: None for name in self.part_names()})


def plan_to_dict(plan: Any) -> dict:
    """A plan as JSON-able data, tagged with its module and class so it can be rebuilt."""
    body = _canonical(plan)
    body["__module__"] = type(plan).__module__
    return body


def _resolve_hints(cls: type) -> dict[str, Any]:
    module = importlib.import_module(cls.__module__)
    return typing.get_type_hints(cls, vars(module))


def _strip_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _build(tp: Any, value: Any) -> Any:
    """Rebuild ``value`` (from JSON) into type ``tp``: dataclasses recursively, lists into tuples."""
    if value is None:
        return None
    tp = _strip_optional(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ValueError(f"Expected a {tp.__name__} (a JSON object), got {type(value).__name__}.")
        return _from_fields(tp, value)
    origin = typing.get_origin(tp)
    if isinstance(value, Mapping) and "__type__" in value and tp is Any:
        registered = stored_type(str(value["__type__"]))
        if registered is None:
            raise ValueError(f"Cannot rebuild a nested {value['__type__']} without its declared type.")
        return _from_fields(registered, value)
    if origin in (tuple, Sequence, list) or tp is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"Expected a list, got {type(value).__name__}.")
        if origin is tuple and args and args[-1] is not Ellipsis:
            return tuple(_build(a, v) for a, v in zip(args, value))
        inner = args[0] if args else Any
        if inner in (bool, int, float, str) and any(v is None for v in value):
            raise ValueError(f"Expected {'a whole number' if inner is int else 'a ' + inner.__name__} for every "
                             "item of the list, got a blank.")
        return tuple(_build(inner, v) for v in value)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if dataclasses.is_dataclass(arg) and isinstance(value, Mapping) \
                    and value.get("__type__") == arg.__name__:
                return _from_fields(arg, value)
        if isinstance(value, Mapping) and stored_type(str(value.get("__type__"))) is not None:
            return _from_fields(stored_type(str(value["__type__"])), value)   # a plugin's Params
        if isinstance(value, list):
            return tuple(_build(Any, v) for v in value)
        return value
    if tp is float and isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    if tp in (bool, int, float, str):
        return _scalar(tp, value)
    if isinstance(value, list):
        return tuple(_build(Any, v) for v in value)
    return value


def _scalar(tp: type, value: Any) -> Any:
    """A JSON member declared bool, int, float or str, checked: a saved plan edited by hand (or
    written by hostile code) must fail with a message, not reach a run as the wrong type."""
    ok = {bool: isinstance(value, bool),
          int: isinstance(value, int) and not isinstance(value, bool)
          or isinstance(value, float) and math.isfinite(value) and value.is_integer(),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          str: isinstance(value, str)}[tp]
    if not ok:
        raise ValueError(f"Expected {'a whole number' if tp is int else 'a ' + tp.__name__} in the saved plan, "
                         f"got {value!r}.")
    return tp(value) if tp in (int, float) else value


def _from_fields(cls: type, data: Mapping[str, Any]):
    if "__type__" in data and data["__type__"] != cls.__name__:
        raise ValueError(f"Expected a {cls.__name__}, the file holds a {data['__type__']}.")
    hints = _resolve_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = set(data) - names - {"__type__", "__module__"}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}; the plan was made by "
                         "another version of the tool.")
    kwargs = {}
    for name in names & set(data):
        try:
            kwargs[name] = _build(hints.get(name, Any), data[name])
        except ValueError as exc:
            raise ValueError(f"{cls.__name__}.{name}: {exc}") from None
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"The saved {cls.__name__} is incomplete or holds a value of the wrong type: {exc}.") from exc


def saved_plan_type(data: Mapping[str, Any]) -> type:
    """The plan class a plan saved by :func:`plan_to_dict` names (its ``__module__`` and ``__type__``);
    only plan classes exported by a ``core`` package are accepted."""
    if not isinstance(data, Mapping) or "__type__" not in data or "__module__" not in data:
        raise ValueError("This is not a saved plan (it has no __type__ and __module__).")
    module_name, type_name = str(data["__module__"]), str(data["__type__"])
    if not module_name.startswith("core.") or not module_name.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"A plan must come from the tool's core package, not {module_name!r}.")
    package = importlib.import_module(".".join(module_name.split(".")[:2]))
    cls = getattr(package, type_name, None)
    if cls is None or type_name not in getattr(package, "__all__", ()) \
            or not (isinstance(cls, type) and issubclass(cls, Plan)):
        raise ValueError(f"{type_name} is not a plan that {package.__name__} exports.")
    return cls


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Rebuild a plan saved by :func:`plan_to_dict`; only plan classes exported by a ``core`` package load."""
    return _from_fields(saved_plan_type(data), data)


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------

class Result:
    """Base of every area's result: the plan that made it and its tidy tables.

    Subclasses are dataclasses with a ``plan`` field and implement :meth:`tables`. ``headline``
    gives the few numbers a stakeholder would quote (name -> value), used by reports and
    comparisons; ``ledger`` returns the privacy spends of a release (``None`` for simulations).
    """

    plan: Plan

    def tables(self) -> dict[str, pd.DataFrame]:
        raise NotImplementedError

    def headline(self) -> dict[str, float]:
        return {}

    def headline_uncertainty(self) -> dict[str, str]:
        """For each headline name, how far its number can be trusted, in a few plain words computed from
        what the result holds (a spread over seeds or runs, an interval, or why there is none: a closed
        form, an exact count, a single draw). Never an exact count of private data. Default: nothing."""
        return {}

    def takeaway(self):
        """The answer in words, the key numbers, their units and meanings and the worst-off group
        (a :class:`core.takeaway.Takeaway`); None: reports fall back on the headline alone."""
        return None

    def ledger(self):
        return None

    def shared_table_names(self) -> tuple[str, ...]:
        """Tables of :meth:`tables` that may leave the curator even when the data is private: numbers released
        through the ledger, public information, or numbers computed on a released synthetic copy
        (:mod:`core.sharing`). Default: none, as every table of a run is computed on the rows it was given."""
        return ()

    def shared_headline_names(self) -> tuple[str, ...]:
        """Headline numbers that may leave the curator even when the data is private (as
        :meth:`shared_table_names`). Default: none."""
        return ()


# --------------------------------------------------------------------------------------------------
# Plugins: one registry shape
# --------------------------------------------------------------------------------------------------

def param(default: Any, *, label: str = "", help: str = "", low: float | None = None,
          high: float | None = None, step: float | None = None,
          choices: Sequence[Any] | Mapping[Any, str] | None = None, kind: str = "") -> Any:
    """A Params field with what a page needs to draw its widget and what a plan needs to check it.

    ``kind`` overrides the widget chosen from the default's type: ``"columns"`` (a multiselect of
    the data's columns), ``"column"`` (one column), or ``"lens"`` (a subset of the audited columns).
    """
    meta = {"label": label, "help": help, "low": low, "high": high, "step": step,
            "choices": choices, "kind": kind}
    if isinstance(default, (list, dict, set)):
        raise TypeError("Params defaults must be immutable (use a tuple).")
    return field(default=default, metadata=meta)


def param_info(params_cls: type) -> list[tuple[dataclasses.Field, dict]]:
    """``(field, metadata)`` for every field of a Params dataclass, in declaration order."""
    return [(f, dict(f.metadata)) for f in dataclasses.fields(params_cls)]


def check_params(params: Any) -> None:
    """Check every numeric field against its bounds and every choice field against its choices.

    Params dataclasses call it from ``__post_init__``; the message names the field and the range.
    """
    for f, meta in param_info(type(params)):
        value = getattr(params, f.name)
        name = meta.get("label") or f.name
        _check_kind(f, value, name)
        if isinstance(value, (bool, np.bool_)):
            continue
        if isinstance(value, (int, float, np.integer, np.floating)):
            if not math.isfinite(float(value)):
                raise ValueError(f"{name} must be a finite number; got {value!r}.")
            low, high = meta.get("low"), meta.get("high")
            if low is not None and value < low:
                raise ValueError(f"{name} must be at least {low}; got {value!r}.")
            if high is not None and value > high:
                raise ValueError(f"{name} must be at most {high}; got {value!r}.")
        choices = meta.get("choices")
        if choices is not None and not meta.get("kind"):
            allowed = list(choices)
            values = value if isinstance(value, tuple) else (value,)
            bad = [v for v in values if v not in allowed]
            if bad:
                raise ValueError(f"{name} must be one of {allowed}; got {bad[0]!r}.")


def _check_kind(f: dataclasses.Field, value: Any, name: str) -> None:
    """The value has the kind its default has: yes/no for a bool, a number (not yes/no, not text) for a
    number, a whole number for an int (``True`` is not a count of 1)."""
    default = f.default
    if value is None:                  # an optional setting left unset (e.g. "use the paper's bound")
        return
    if isinstance(default, bool):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be yes or no (true or false); got {value!r}.")
    elif isinstance(default, (int, float)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must be a number; got {value!r}.")
        if isinstance(default, int) and math.isfinite(float(value)) and not float(value).is_integer():
            raise ValueError(f"{name} must be a whole number; got {value!r}.")


def finite_number(value: Any, name: str, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a float, or a ValueError naming the setting when it is not a finite number (text that
    parses as one is accepted) or lies outside ``[low, high]`` (either end may be left open with None)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number, not {value!r:.40}.") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number; got {value!r:.40}.")
    if (low is not None and number < low) or (high is not None and number > high):
        span = (f"between {low:g} and {high:g}" if low is not None and high is not None
                else f"at least {low:g}" if low is not None else f"at most {high:g}")
        raise ValueError(f"{name} must lie {span}; got {value!r:.40}.")
    return number


def whole_number(value: Any, name: str, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``; bools, floats and text are refused with a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number from {low:,} to {high:,}; got {value!r:.40}.")
    return int(value)


@dataclass(frozen=True)
class Spec:
    """One plugin: a key, a label for people, a factory and the Params dataclass it takes.

    ``factory(params)`` builds the object (mechanism, synthesizer, release, adversary, generator).
    """

    key: str
    label: str
    factory: Callable[..., Any]
    params: type
    help: str = ""

    def default_params(self):
        return self.params()

    def build(self, params: Any = None):
        params = self.params() if params is None else params
        if not isinstance(params, self.params):
            raise ValueError(f"{self.label} takes {self.params.__name__}, not {type(params).__name__}.")
        return self.factory(params)


PARAMS_TYPES: dict[str, type] = {}
"""Every Params class registered by any :class:`Registry`, and every class marked :func:`storable`, by
class name: a saved plan rebuilds such a value from its ``__type__`` even when the plan's annotation
does not list that class (so a plugin added with one registry line round-trips without touching the
plans that hold it)."""
STORABLE_HOMES = ("core.intake",)
"""Modules whose import registers storable classes (looked in when a saved name is not known yet)."""


def storable(cls: type) -> type:
    """Class decorator: instances of this frozen dataclass may sit in a plan field typed ``Any`` (as a
    data set's schema in :class:`DataRef`) and are rebuilt from their ``__type__`` name."""
    known = PARAMS_TYPES.setdefault(cls.__name__, cls)
    if (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise TypeError(f"Another stored class is already named {cls.__name__}; rename one.")
    PARAMS_TYPES[cls.__name__] = cls
    return cls


def stored_type(name: str) -> type | None:
    """The registered class of a saved ``__type__`` name, importing :data:`STORABLE_HOMES` once if needed."""
    if name not in PARAMS_TYPES:
        for home in STORABLE_HOMES:
            importlib.import_module(home)
    return PARAMS_TYPES.get(name)


class Registry(Mapping[str, Spec]):
    """Key -> :class:`Spec`, in registration order. Unknown keys raise ``ValueError`` naming the choices."""

    def __init__(self, what: str, specs: Sequence[Spec] = ()) -> None:
        self.what = what
        self._specs: dict[str, Spec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: Spec) -> Spec:
        if spec.key in self._specs:
            raise ValueError(f"{self.what} {spec.key!r} is registered twice.")
        if not dataclasses.is_dataclass(spec.params):
            raise TypeError(f"{spec.key}: params must be a dataclass.")
        known = PARAMS_TYPES.setdefault(spec.params.__name__, spec.params)
        if (known.__module__, known.__qualname__) == (spec.params.__module__, spec.params.__qualname__):
            PARAMS_TYPES[spec.params.__name__] = spec.params     # the same class defined again (a reload)
        else:
            raise TypeError(f"{spec.key}: another plugin's Params is also named {spec.params.__name__}; "
                            "rename one, so saved plans can tell them apart.")
        self._specs[spec.key] = spec
        return spec

    def __getitem__(self, key: str) -> Spec:
        try:
            return self._specs[key]
        except KeyError:
            raise ValueError(f"Unknown {self.what} {key!r}; choose one of {list(self._specs)}.") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, key: object) -> bool:
        return key in self._specs

    def labels(self) -> dict[str, str]:
        return {k: s.label for k, s in self._specs.items()}
