"""One descriptor per area: what the project's shared machinery needs to know about each plan type.

Infrastructure: this module imports no area. Each area registers one :class:`AreaSpec` from its own
package (``core/<area>/area.py``, imported by the package's ``__init__``): the plan types its ``run``
takes and, for each (:class:`PlanParts`), its run-time cost model, the code of its main figure in an
exported script, its A/B overlay, the words of its report, and what its run needs from the project
database. The consumers look a plan up by its type (:func:`parts_for`), never by its class's name:

- ``core.estimates`` (each cost model is registered into :data:`core.estimates.ESTIMATORS`),
- ``core.script_export`` (the main figure and the notes of the exported code),
- ``core.report_words`` (a plan's lead sentences and its own words for some fields),
- ``core.figures.overlays`` and ``core.compare`` (the overlay a comparison draws),
- ``core.report`` (the area's ``run`` and ``stored_data``).

So a new plan type is one :class:`PlanParts` line in its area's descriptor, and
``tests/unit/test_registries.py`` fails for a page's plan type that has none or lacks a cost model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import pandas as pd

from core.estimates import ESTIMATORS, Estimator

#: (what the figure shows, code that sets ``fig`` from ``result``) for an exported script, or None.
FigureCode = Callable[[Any], "tuple[str, str] | None"]
#: (sentences, fields they cover) said before a plan's settings in its report.
Lead = Callable[[Any], "tuple[list[str], frozenset[str]]"]


@dataclass(frozen=True)
class OverlaySpec:
    """Which table and columns make a page's main figure: ``y`` is the first listed column the
    table holds; ``where`` keeps rows equal to the given values; ``series`` splits into lines/bars."""

    table: str
    x: str
    y: tuple[str, ...]
    title: str
    y_label: str = ""
    series: str | None = None
    where: dict = field(default_factory=dict)
    line: bool | None = None  # None: lines for a numeric x with many values, grouped bars otherwise
    derive: Callable[[pd.DataFrame], pd.DataFrame] | None = None   # the plotted frame made from the table

    def y_column(self, table: pd.DataFrame) -> str | None:
        for col in self.y:
            if col in table.columns:
                return col
        return None

    def rows(self, table: pd.DataFrame) -> pd.DataFrame:
        """The rows drawn: ``derive`` applied, ``where`` kept, and repeated (series, x) points (seeds,
        replicates) averaged into one."""
        if self.derive is not None:
            table = self.derive(table)
        for col, value in self.where.items():
            if col in table.columns:
                table = table[table[col] == value]
        y = self.y_column(table)
        keys = [c for c in (self.series, self.x) if c]
        if y is not None and not table.empty and table.duplicated(keys).any():
            table = table.groupby(keys, sort=False, as_index=False)[y].mean()
        return table


@dataclass(frozen=True)
class CostModel:
    """A plan type's run-time cost model: ``estimate(plan, data, costs) -> core.estimates.Work``, what it
    estimates (``label``), and its coefficients' default sections (``defaults``)."""

    label: str
    estimate: Estimator
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanParts:
    """What an area says about one plan type its ``run`` takes.

    ``cost`` is required (every plan says how long it runs before it starts); ``figure`` is the page's
    main figure as exported code; ``overlay`` the figure a comparison of two of its results draws;
    ``lead`` the report's opening sentences for it; ``words`` its own words for fields whose generic
    words would mislead; ``notes`` what exported code does not recompute."""

    plan: type
    cost: CostModel
    figure: FigureCode | None = None
    overlay: OverlaySpec | None = None
    lead: Lead | None = None
    words: Mapping[str, str] = field(default_factory=dict)
    notes: Callable[[Any], list[str]] | None = None


@dataclass(frozen=True)
class AreaSpec:
    """One area: its ``key`` and ``label``, its ``run(plan, data, *, progress)``, the plan types it runs
    (:class:`PlanParts`), ``stored(plan)`` (what a run needs from the project database, fetched for a
    caller without a page; None when the area keeps nothing there) and ``sub_words`` (field words of
    its sub-plan types, keyed by the type)."""

    key: str
    label: str
    run: Callable[..., Any]
    plans: tuple[PlanParts, ...]
    stored: Callable[[Any], Any] | None = None
    sub_words: Mapping[type, Mapping[str, str]] = field(default_factory=dict)


class AreaRegistry(Mapping[str, AreaSpec]):
    """Area key -> :class:`AreaSpec`; plan types are looked up through their class's bases."""

    def __init__(self) -> None:
        self._areas: dict[str, AreaSpec] = {}
        self._plans: dict[type, tuple[AreaSpec, PlanParts]] = {}

    def register(self, spec: AreaSpec) -> AreaSpec:
        """Add ``spec`` and register each plan's cost model into :data:`core.estimates.ESTIMATORS`."""
        if spec.key in self._areas:
            raise ValueError(f"The area {spec.key!r} is registered twice.")
        for parts in spec.plans:
            if parts.plan in self._plans:
                raise ValueError(f"{parts.plan.__name__} already belongs to the area "
                                 f"{self._plans[parts.plan][0].key!r}.")
            if not isinstance(parts.cost, CostModel):
                raise ValueError(f"{parts.plan.__name__} needs a cost model (a CostModel), so its runs say how "
                                 "long they take and pages know whether to queue them.")
        self._areas[spec.key] = spec
        for parts in spec.plans:
            self._plans[parts.plan] = (spec, parts)
            ESTIMATORS.register(parts.plan, parts.cost.label, parts.cost.defaults)(parts.cost.estimate)
        return spec

    def _entry(self, plan_type: type) -> tuple[AreaSpec, PlanParts] | None:
        return next((self._plans[c] for c in plan_type.__mro__ if c in self._plans), None)

    def area_for(self, plan: Any) -> AreaSpec | None:
        """The area that runs ``plan`` (an instance or a type), or None."""
        entry = self._entry(plan if isinstance(plan, type) else type(plan))
        return entry[0] if entry else None

    def parts_for(self, plan: Any) -> PlanParts | None:
        """The :class:`PlanParts` of ``plan`` (an instance or a type), or None."""
        entry = self._entry(plan if isinstance(plan, type) else type(plan))
        return entry[1] if entry else None

    def plan_type(self, name: str) -> type | None:
        """The registered plan type a saved report names (its ``__type__``), or None."""
        return next((t for t in self._plans if t.__name__ == name), None)

    def plan_types(self) -> tuple[type, ...]:
        return tuple(self._plans)

    def field_words(self, owner: type, name: str) -> str | None:
        """An area's own words for field ``name`` of plan or sub-plan type ``owner``, or None."""
        parts = self.parts_for(owner)
        if parts is not None and name in parts.words:
            return parts.words[name]
        for spec in self._areas.values():
            words = spec.sub_words.get(owner)
            if words and name in words:
                return words[name]
        return None

    def __getitem__(self, key: str) -> AreaSpec:
        try:
            return self._areas[key]
        except KeyError:
            raise ValueError(f"Unknown area {key!r}; the areas are {list(self._areas)}.") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._areas)

    def __contains__(self, key: object) -> bool:
        return key in self._areas

    def __len__(self) -> int:
        return len(self._areas)


AREAS = AreaRegistry()
register_area = AREAS.register
area_for = AREAS.area_for
parts_for = AREAS.parts_for

__all__ = ["AREAS", "AreaRegistry", "AreaSpec", "CostModel", "FigureCode", "Lead", "OverlaySpec", "PlanParts",
           "area_for", "parts_for", "register_area"]
