"""The curator's declaration of a data set: what each column is and how it is cleaned.

A :class:`DataSchema` is written once (drafted by :func:`core.intake.suggest.draft_schema`, then
edited by the curator) and travels inside every plan that uses the data, so a report reruns with
exactly the same cleaning. Everything in it is meant to be PUBLIC: roles, public categories,
public bounds and bins, how missing values are treated, label merges (spelling variants such as
``F -> Female``) and the unit of protection (a person-id column and how many rows one person may
contribute). Nothing counted from the data belongs here.

Both classes are frozen and hashable; every collection is a tuple (merges are ``(variant,
canonical)`` pairs, not a mapping), so a schema nests inside a plan and survives
``core.contracts.plan_to_dict`` / ``plan_from_dict``. Invalid declarations raise ``ValueError`` in
``__post_init__`` naming the column and what to change. :meth:`DataSchema.to_dict` /
:meth:`DataSchema.from_dict` give a versioned JSON form.

How a value is read (the same rule in profile, check and apply):

1. text is trimmed of surrounding spaces;
2. a value equal, ignoring case, to one of ``missing_tokens`` (default: blank, NA, N/A, null,
   none, unknown, ?, -, ...) is missing;
3. a category value equal, ignoring case, to a merge's variant becomes that merge's canonical label;
4. a number written as text is read after removing thousands separators, currency signs and a
   percent sign (``"$45,000" -> 45000``, ``"12%" -> 12``) when ``parse_numbers`` is on.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from core.contracts import digest_of, storable

__all__ = [
    "BLOCKS", "ColumnSchema", "DataSchema", "DEFAULT_MISSING_TOKENS", "FILE_SUFFIXES", "MISSING_LABEL",
    "MISSING_POLICIES", "ROLES", "SCHEMA_VERSION", "WARNING",
]

SCHEMA_VERSION = 1
ROLES = ("category", "number", "person_id", "leave_out")
MISSING_POLICIES = ("own_category", "fill", "drop_row")
# Text that means "no value" (compared after trimming, ignoring case). The empty string is a blank cell.
DEFAULT_MISSING_TOKENS = ("", "na", "n/a", "n.a.", "nan", "null", "none", "unknown", "not known",
                          "missing", "?", "-", "--", ".")
# The label missing values get when a column keeps them as their own category.
MISSING_LABEL = "(missing)"
# Severities of a check problem (defined here so schema, check and the command line share them).
BLOCKS = "blocks a run"
WARNING = "warning"
MAX_BINS = 1_000
MAX_SEED = 2**63 - 1
# The file types a data set is read from (core.intake.read reads each by this suffix).
FILE_SUFFIXES = (".csv", ".parquet", ".pq", ".xlsx")


def _fail(column: str, message: str) -> None:
    raise ValueError(f"Column {column!r}: {message}")


def _finite(column: str, what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        _fail(column, f"{what} must be a finite number, not {value!r:.40}.")
    return float(value)


@storable
@dataclass(frozen=True)
class ColumnSchema:
    """One column's public declaration.

    - ``role``: ``"category"`` (a label per person), ``"number"`` (a quantity), ``"person_id"`` (who
      the row belongs to: the unit of protection), or ``"leave_out"`` (dropped before anything runs;
      its other fields are kept so switching back restores them, and are not checked).
    - ``categories``: the PUBLIC category list of a category column (None: not declared yet).
    - ``bounds``: the PUBLIC range ``(low, high)`` of a number column; values outside are clipped.
    - ``bins``: cut a number column into that many equal-width bins over ``bounds``, or at these
      edges (first edge = low, last = high); the cleaned column is then a category labelled in the
      column's own units (``"0 to 25000"``). None keeps the number.
    - ``missing``: what to do with missing values: ``"own_category"`` (a category labelled
      ``MISSING_LABEL``; for numbers only when binned), ``"fill"`` (replace by the public ``fill``
      value), ``"drop_row"`` (drop the row), or None (not declared: a run is blocked if the column
      has missing values).
    - ``merges``: ``(variant, canonical)`` pairs; a value equal to a variant (trimmed, ignoring case)
      becomes the canonical label.
    - ``parse_numbers``: read ``"45,000"``, ``"$45,000"`` and ``"12%"`` as numbers (number columns).
    """

    name: str
    role: str = "category"
    categories: tuple[str, ...] | None = None
    bounds: tuple[float, float] | None = None
    bins: int | tuple[float, ...] | None = None
    missing: str | None = None
    fill: str | float | None = None
    merges: tuple[tuple[str, str], ...] = ()
    parse_numbers: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("Every column needs a name (the header of its column in the file).")
        name = self.name
        if self.role not in ROLES:
            _fail(name, f"role must be one of {list(ROLES)}, not {self.role!r}.")
        if not isinstance(self.parse_numbers, bool):
            _fail(name, f"parse_numbers must be true or false, not {self.parse_numbers!r}.")
        self._normalise()
        if self.role == "leave_out":
            return
        if self.missing is not None and self.missing not in MISSING_POLICIES:
            _fail(name, f"missing must be one of {list(MISSING_POLICIES)} (or unset), not {self.missing!r}.")
        if self.missing == "fill" and self.fill is None:
            _fail(name, "missing is 'fill' but no fill value is given; give a public fill value or choose "
                        "another policy.")
        if self.missing != "fill" and self.fill is not None:
            _fail(name, f"a fill value ({self.fill!r}) is given but missing is {self.missing!r}; set missing "
                        "to 'fill' or remove the fill value.")
        {"category": self._check_category, "number": self._check_number,
         "person_id": self._check_person_id}[self.role]()

    # ---------------------------------------------------------------- normalising
    def _normalise(self) -> None:
        """Tuples of plain values, so equal declarations compare, hash and digest equal."""
        name = self.name
        put = object.__setattr__
        if self.categories is not None:
            if isinstance(self.categories, str) or not isinstance(self.categories, (tuple, list)):
                _fail(name, "categories must be a list of labels.")
            labels = tuple(str(c).strip() for c in self.categories)
            put(self, "categories", labels)
        if self.bounds is not None:
            if isinstance(self.bounds, str) or not isinstance(self.bounds, (tuple, list)) or len(self.bounds) != 2:
                _fail(name, "bounds must be two numbers (low, high).")
            put(self, "bounds", tuple(_finite(name, "each bound", b) for b in self.bounds))
        if self.bins is not None and (isinstance(self.bins, bool) or not isinstance(self.bins, int)):
            if isinstance(self.bins, str) or not isinstance(self.bins, (tuple, list)):
                _fail(name, f"bins must be a whole number of bins or a list of edges, not {self.bins!r:.40}.")
            put(self, "bins", tuple(_finite(name, "each bin edge", e) for e in self.bins))
        if isinstance(self.merges, Mapping):
            put(self, "merges", tuple(self.merges.items()))
        pairs = []
        for pair in self.merges:
            if isinstance(pair, str) or len(pair) != 2:
                _fail(name, "each merge is a pair (variant, canonical label).")
            pairs.append((str(pair[0]).strip(), str(pair[1]).strip()))
        put(self, "merges", tuple(pairs))
        if isinstance(self.fill, bool):
            _fail(name, "the fill value must be a label or a number, not true/false.")
        if self.role == "number" and isinstance(self.fill, int):
            put(self, "fill", float(self.fill))
        if self.role == "category" and self.fill is not None:
            put(self, "fill", str(self.fill).strip())

    # ---------------------------------------------------------------- per role
    def _only(self, allowed: set[str]) -> None:
        given = {"categories": self.categories is not None, "bounds": self.bounds is not None,
                 "bins": self.bins is not None, "merges": bool(self.merges)}
        extra = [k for k, v in given.items() if v and k not in allowed]
        if extra:
            _fail(self.name, f"a {self.role} column takes no {' or '.join(extra)}; remove them or change the role.")

    def _check_category(self) -> None:
        self._only({"categories", "merges"})
        name = self.name
        if self.categories is not None:
            if not self.categories:
                _fail(name, "the public category list is empty; list the categories or unset it.")
            if any(c == "" for c in self.categories):
                _fail(name, "a public category is blank; blanks are missing values, handled by the missing policy.")
            seen = [c.lower() for c in self.categories]
            twice = sorted({c for c in self.categories if seen.count(c.lower()) > 1})
            if twice:
                _fail(name, f"the categories {twice} are listed twice (ignoring case); list each once.")
            if MISSING_LABEL in self.categories and self.missing == "own_category":
                _fail(name, f"{MISSING_LABEL!r} is the label of missing values; remove it from the categories.")
        variants = [v.lower() for v, _ in self.merges]
        target = {v.lower(): c for v, c in self.merges}
        for variant, label in self.merges:
            if not variant or not label:
                _fail(name, "a merge has a blank variant or label; blanks are missing values.")
            if variant == label:
                _fail(name, f"the merge {variant!r} -> {label!r} changes nothing; remove it.")
            if variants.count(variant.lower()) > 1:
                _fail(name, f"the variant {variant!r} is merged twice; keep one merge for it.")
            if self.categories is not None and label not in self.categories:
                _fail(name, f"the merge {variant!r} -> {label!r} leads to a label that is not a public category; "
                            "add it to the categories or merge into one of them.")
        chained = sorted({c for _, c in self.merges if target.get(c.lower(), c) != c})
        if chained:
            _fail(name, f"{chained} are both merge targets and merged away; merge every variant straight "
                        "into its final label.")
        if self.missing == "fill" and self.categories is not None and self.fill not in self.categories:
            _fail(name, f"the fill label {self.fill!r} is not a public category; add it or fill with one of them.")
        if self.missing == "fill" and self.fill == "":
            _fail(name, "the fill label is blank; give a label.")

    def _check_number(self) -> None:
        self._only({"bounds", "bins"})
        name = self.name
        if self.bounds is not None and not self.bounds[0] < self.bounds[1]:
            _fail(name, f"the public bounds {self.bounds} need low < high.")
        if isinstance(self.bins, int):
            if not 1 <= self.bins <= MAX_BINS:
                _fail(name, f"bins must be from 1 to {MAX_BINS}, not {self.bins}.")
            if self.bounds is None:
                _fail(name, f"{self.bins} equal-width bins need public bounds; declare them or give the edges.")
        elif self.bins is not None:
            edges = self.bins
            if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
                _fail(name, f"bin edges must be at least two increasing numbers, not {edges}.")
            if self.bounds is None:
                _fail(name, f"bin edges need public bounds; declare bounds ({edges[0]:g}, {edges[-1]:g}).")
            if (edges[0], edges[-1]) != self.bounds:
                _fail(name, f"the bin edges run from {edges[0]:g} to {edges[-1]:g} but the bounds are "
                            f"{self.bounds[0]:g} to {self.bounds[1]:g}; make the first and last edge the bounds.")
        if self.missing == "own_category" and self.bins is None:
            _fail(name, "a number keeps missing values as their own category only when it is binned; declare "
                        "bins, fill with a public value, or drop the rows.")
        if self.missing == "fill":
            if isinstance(self.fill, str):
                _fail(name, f"the fill value of a number column must be a number, not {self.fill!r}.")
            value = _finite(name, "the fill value", self.fill)
            if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
                _fail(name, f"the fill value {value:g} lies outside the public bounds {self.bounds}.")

    def _check_person_id(self) -> None:
        self._only(set())
        if self.missing not in (None, "drop_row"):
            _fail(self.name, "rows without a person id can only be dropped (missing 'drop_row') or refused (unset).")

    # ---------------------------------------------------------------- views
    def bin_edges(self) -> tuple[float, ...] | None:
        """The bin edges of a binned number column (equal width over the bounds for a count), else None."""
        if self.role != "number" or self.bins is None:
            return None
        if isinstance(self.bins, tuple):
            return self.bins
        low, high = self.bounds
        step = (high - low) / self.bins
        return tuple(low + i * step for i in range(self.bins)) + (high,)

    def bin_labels(self) -> tuple[str, ...] | None:
        """The labels of the bins, in the column's units (``"0 to 25000"``); the last bin includes its top."""
        edges = self.bin_edges()
        if edges is None:
            return None
        return tuple(f"{a:g} to {b:g}" for a, b in zip(edges, edges[1:]))


@storable
@dataclass(frozen=True)
class DataSchema:
    """A data set's declaration: its name, its columns, the unit of protection and what counts as missing.

    ``person_id`` names the column of role ``"person_id"`` (None: one row is one person) and
    ``max_rows_per_person`` is how many rows one person may contribute; :func:`core.intake.apply`
    keeps at most that many per person (contribution bounding). ``missing_tokens`` is the text read as
    a missing value (compared after trimming, ignoring case). ``bounding_seed`` keys contribution
    bounding (which of a person's rows over the limit are kept: a hash of the person's own rows under
    this seed, :mod:`core.intake.bounding`), so the same rows are kept wherever it is rerun, whatever
    else the file holds. ``file_suffix`` records the file type the data set
    is read from (``".csv"``, ``".parquet"``, ``".pq"`` or ``".xlsx"``), so a rerun reads the bytes the
    same way. Both are public; schemas written before they existed load with the defaults.
    """

    name: str
    columns: tuple[ColumnSchema, ...]
    person_id: str | None = None
    max_rows_per_person: int = 1
    missing_tokens: tuple[str, ...] = DEFAULT_MISSING_TOKENS
    bounding_seed: int = 0
    file_suffix: str = ".csv"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("Name the data set (any short text the curator recognises).")
        if isinstance(self.columns, (str, Mapping)) or not isinstance(self.columns, (tuple, list)):
            raise ValueError("columns must be a list of column declarations.")
        object.__setattr__(self, "columns", tuple(self.columns))
        if not self.columns:
            raise ValueError(f"The schema of {self.name!r} declares no column; declare at least one.")
        bad = [c for c in self.columns if not isinstance(c, ColumnSchema)]
        if bad:
            raise ValueError(f"Every column must be a ColumnSchema, not {type(bad[0]).__name__}.")
        names = [c.name for c in self.columns]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"Column(s) {twice} are declared twice; declare each column once.")
        if isinstance(self.missing_tokens, str) or not isinstance(self.missing_tokens, (tuple, list)):
            raise ValueError("missing_tokens must be a list of texts.")
        object.__setattr__(self, "missing_tokens", tuple(str(t).strip() for t in self.missing_tokens))
        if isinstance(self.max_rows_per_person, bool) or not isinstance(self.max_rows_per_person, int) \
                or not 1 <= self.max_rows_per_person <= 1_000:
            raise ValueError(f"max_rows_per_person must be a whole number from 1 to 1,000, not "
                             f"{self.max_rows_per_person!r:.40}.")
        ids = [c.name for c in self.columns if c.role == "person_id"]
        if len(ids) > 1:
            raise ValueError(f"Columns {ids} are all marked person_id; keep one and leave the others out.")
        if self.person_id is None and ids:
            raise ValueError(f"Column {ids[0]!r} is marked person_id but the schema's person_id is unset; "
                             f"set person_id to {ids[0]!r} or change the column's role.")
        if self.person_id is not None and self.person_id not in ids:
            raise ValueError(f"Column {self.person_id!r}: the schema names it the person id, but "
                             + ("no such column is declared" if self.person_id not in names
                                else "its role is not 'person_id'") + "; fix the column or unset person_id.")
        if self.person_id is None and self.max_rows_per_person != 1:
            raise ValueError("max_rows_per_person needs a person-id column: without one each row is one person.")
        if isinstance(self.bounding_seed, bool) or not isinstance(self.bounding_seed, int) \
                or not 0 <= self.bounding_seed <= MAX_SEED:
            raise ValueError(f"bounding_seed must be a whole number from 0 to {MAX_SEED:,}, not "
                             f"{self.bounding_seed!r:.40}.")
        suffix = self.file_suffix.strip().lower() if isinstance(self.file_suffix, str) else self.file_suffix
        if isinstance(suffix, str) and suffix and not suffix.startswith("."):
            suffix = "." + suffix
        if suffix not in FILE_SUFFIXES:
            raise ValueError(f"file_suffix must be one of {list(FILE_SUFFIXES)} (the type of the data file), not "
                             f"{self.file_suffix!r:.40}.")
        object.__setattr__(self, "file_suffix", suffix)
        for col in self.columns:
            if col.role != "category":
                continue
            tokens = {t.lower() for t in self.missing_tokens}
            clash = [c for c in (col.categories or ()) + tuple(c for _, c in col.merges) if c.lower() in tokens]
            if clash:
                raise ValueError(f"Column {col.name!r}: {clash[:5]} read as missing values (missing_tokens); "
                                 "rename the category or remove the token.")

    # ---------------------------------------------------------------- views
    def column(self, name: str) -> ColumnSchema:
        for col in self.columns:
            if col.name == name:
                return col
        raise ValueError(f"The schema declares no column {name!r}; it has {[c.name for c in self.columns]}.")

    def used_columns(self) -> tuple[ColumnSchema, ...]:
        """The columns kept in the cleaned table (every role but leave_out)."""
        return tuple(c for c in self.columns if c.role != "leave_out")

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the declaration (what a plan's cache key sees)."""
        return digest_of(self)

    def replace(self, **changes) -> "DataSchema":
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        """Plain JSON-able data with ``schema_version``; unset fields are written as null."""
        body = {"schema_version": SCHEMA_VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            body[f.name] = [_plain(c) for c in value] if f.name == "columns" else _plain(value)
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DataSchema":
        """Rebuild a schema written by :meth:`to_dict`; an unknown version or field is a ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError("A data schema is a JSON object; this file holds something else.")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"This data schema has version {version!r}; this tool reads version {SCHEMA_VERSION}. "
                             "Draft it again with `python -m core data profile`.")
        body = {k: v for k, v in data.items() if k != "schema_version"}
        _known(cls, body)
        columns = body.get("columns")
        if not isinstance(columns, list):
            raise ValueError("The data schema needs a list of columns.")
        cols = []
        for item in columns:
            if not isinstance(item, Mapping):
                raise ValueError("Each column of the data schema is a JSON object.")
            _known(ColumnSchema, item)
            cols.append(ColumnSchema(**{k: _tupled(v) for k, v in item.items()}))
        body["columns"] = tuple(cols)
        return cls(**{k: (v if k == "columns" else _tupled(v)) for k, v in body.items()})


def _known(cls: type, body: Mapping[str, Any]) -> None:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(body) - names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}; the file was written by another version.")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _tupled(value: Any) -> Any:
    """JSON lists back into tuples (nested)."""
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value
