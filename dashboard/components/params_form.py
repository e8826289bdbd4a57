"""Widgets drawn from a plugin's Params dataclass (one shape for every registry)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.contracts import Spec, param_info


def _label(spec: Spec, name: str, meta: dict) -> str:
    return f"{meta.get('label') or name.replace('_', ' ')} ({spec.label})"


def params_widgets(spec: Spec, key: str, *, columns: Sequence[str] = (), lens: Sequence[str] = (),
                   container=st, persist_state: str | None = None, hide: Sequence[str] = ()) -> Any:
    """One widget per field of ``spec.params``; returns the Params built from them.

    Field types pick the widget: bool -> checkbox, int/float -> number input within its bounds,
    a value with ``choices`` -> radio (or multiselect for a tuple), ``kind="columns"`` /
    ``"column"`` / ``"lens"`` -> pickers of the data's columns. Invalid combinations raise
    ``ValueError`` from the Params' own checks. ``persist_state`` is passed to every widget
    (``"session"`` keeps the values when the user leaves the page and comes back). Fields named in
    ``hide`` get no widget and keep their default (for a value the page sets elsewhere).
    """
    values: dict[str, Any] = {}
    for f, meta in param_info(spec.params):
        if f.name in hide:
            continue
        values[f.name] = _field_widget(f, meta, f"{key}_{spec.key}_{f.name}", _label(spec, f.name, meta),
                                       columns=columns, lens=lens, container=container,
                                       persist_state=persist_state)
    return spec.params(**values)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _field_widget(f: dataclasses.Field, meta: dict, wkey: str, label: str, *, columns: Sequence[str] = (),
                  lens: Sequence[str] = (), container=st, persist_state: str | None = None,
                  default: Any = None, disabled: bool = False) -> Any:
    """One widget for one declared field: its type and ``param`` metadata pick the widget, its bounds
    and help; the dataclass default is the widget's default (unless ``default`` overrides it).

    ``kind`` may also name the widget: ``"slider"`` (a number between its bounds), or ``"select"``,
    ``"select_slider"``, ``"radio"``, ``"multiselect"`` over ``choices``, which are then a menu of
    suggested values rather than a rule (``check_params`` checks only the bounds); ``"text"`` draws a
    text area."""
    default = _default(f) if default is None else default
    keep = {"persist_state": persist_state} if persist_state else {}
    if disabled:
        keep["disabled"] = True
    help_ = meta.get("help") or None
    kind, choices = meta.get("kind", ""), meta.get("choices")
    if kind == "slider":
        num = int if isinstance(default, int) else float
        step = meta.get("step")
        return num(container.slider(label, num(meta["low"]), num(meta["high"]), num(default),
                                    None if step is None else num(step), key=wkey, help=help_, **keep))
    if kind in ("select", "select_slider", "radio", "multiselect") and choices is not None:
        opts = list(choices)
        fmt = choices.get if isinstance(choices, dict) else str
        if kind == "multiselect":
            return tuple(container.multiselect(label, opts, default=[v for v in default if v in opts], key=wkey,
                                               format_func=fmt, help=help_, **keep))
        if kind == "select_slider":
            return container.select_slider(label, opts, value=default, key=wkey, format_func=fmt, help=help_, **keep)
        draw = container.selectbox if kind == "select" else container.radio
        return draw(label, opts, index=opts.index(default) if default in opts else 0, key=wkey, format_func=fmt,
                    help=help_, **keep)
    if kind == "toggle" and isinstance(default, bool):
        return container.toggle(label, value=default, key=wkey, help=help_, **keep)
    if kind == "pills" and choices is not None:
        opts = list(choices)
        fmt = choices.get if isinstance(choices, dict) else str
        picked = container.pills(label, opts, selection_mode="multi", default=[v for v in default if v in opts],
                                 format_func=fmt, key=wkey, help=help_, **keep)
        return tuple(picked or ())
    if kind == "text" and isinstance(default, str):
        return container.text_area(label, value=default, key=wkey, help=help_, height=meta.get("height"), **keep)
    if kind in ("columns", "lens"):
        options = list(lens if kind == "lens" else columns)
        chosen = [c for c in (default or ()) if c in options]
        return tuple(container.multiselect(label, options, default=chosen, key=wkey, help=help_, **keep))
    if kind == "column":
        options = list(columns)
        return container.selectbox(label, options, index=options.index(default) if default in options else 0,
                                   key=wkey, help=help_, **keep)
    if isinstance(default, bool):
        return container.checkbox(label, value=default, key=wkey, help=help_, **keep)
    if choices is not None:
        opts = list(choices)
        fmt = choices.get if isinstance(choices, dict) else str
        if isinstance(default, tuple):
            return tuple(container.multiselect(label, opts, default=list(default), key=wkey, format_func=fmt,
                                               help=help_, **keep))
        return container.radio(label, opts, index=opts.index(default), key=wkey, format_func=fmt,
                               horizontal=True, help=help_, **keep)
    low, high = meta.get("low"), meta.get("high")
    if isinstance(default, int):
        return int(container.number_input(
            label, min_value=None if low is None else int(low), max_value=None if high is None else int(high),
            value=int(default), step=int(meta.get("step") or 1), key=wkey, help=help_, **keep))
    if isinstance(default, float):
        return float(container.number_input(
            label, min_value=None if low is None else float(low), max_value=None if high is None else float(high),
            value=float(default), step=meta.get("step"), format=meta.get("format") or "%.4g", key=wkey, help=help_,
            **keep))
    return default


def field_key(prefix: str, name: str) -> str:
    """The widget key of a plan field on a page: ``<page prefix>_<field>`` (nested: ``<prefix>_<sub>_<field>``)."""
    return f"{prefix}_{name}"


def field_widget(plan_cls: type, name: str, prefix: str, *, container=st, persist_state: str | None = None,
                 columns: Sequence[str] = (), lens: Sequence[str] = (), default: Any = None,
                 disabled: bool = False, label: str | None = None, options: Sequence[Any] | None = None,
                 format_func: Callable[[Any], str] | None = None, height: int | None = None,
                 number_format: str | None = None) -> Any:
    """The widget of one declared plan field (``param(...)`` metadata on the plan dataclass), keyed
    :func:`field_key` so :func:`plan_widget_values` can restore it from a saved plan.

    ``label`` replaces the declared label when the page words it from other choices (a unit, say);
    ``options`` offers only some of the declared choices (those another setting allows), in that order;
    ``format_func`` words each choice when the page knows more than the declaration (the groups an
    attribute compares, say), ``height`` sizes a ``kind="text"`` field's text area and ``number_format``
    (printf style, e.g. ``"%.3f"``) shows a real number typed in a box."""
    f = next((f for f in dataclasses.fields(plan_cls) if f.name == name), None)
    if f is None:
        raise TypeError(f"{plan_cls.__name__} has no field {name!r}.")
    meta = dict(f.metadata)
    if options is not None:
        declared = meta.get("choices")
        meta["choices"] = ({o: declared.get(o, str(o)) for o in options} if isinstance(declared, dict)
                           else tuple(options))
    if format_func is not None and meta.get("choices") is not None:
        meta["choices"] = {o: format_func(o) for o in meta["choices"]}
    if height is not None:
        meta["height"] = height
    if number_format is not None:
        meta["format"] = number_format
    label = label or meta.get("label") or name.replace("_", " ").capitalize()
    return _field_widget(f, meta, field_key(prefix, name), label, columns=columns, lens=lens, container=container,
                         persist_state=persist_state, default=default, disabled=disabled)


def params_widget_values(spec: Spec, key: str, params: Any) -> dict[str, Any]:
    """Widget values that redraw ``params`` in :func:`params_widgets` drawn with the same ``key``: its
    inverse, for restoring a plugin's settings from a saved plan."""
    return {f"{key}_{spec.key}_{f.name}": list(v) if isinstance(v := getattr(params, f.name), tuple) else v
            for f, _ in param_info(spec.params)}


def declared_state(plan_cls: type, prefix: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """The declared fields of ``plan_cls`` whose widgets (keyed :func:`field_key`) already hold a value
    in ``state`` (the session): for a plan needed above the place its widgets are drawn, so the widgets'
    last values shape it and fields not drawn yet keep the dataclass default, stated nowhere else."""
    out = {}
    for f in dataclasses.fields(plan_cls):
        wkey = field_key(prefix, f.name)
        if "label" in f.metadata and wkey in state:
            value = state[wkey]
            out[f.name] = tuple(value) if isinstance(value, list) else value
    return out


def plan_widget_values(plan: Any, prefix: str) -> dict[str, Any]:
    """Widget values that redraw ``plan``: one per field declared with ``param(...)`` metadata, nested
    plans declared the same way under their own prefix. The inverse of :func:`field_widget`."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(plan):
        if "label" not in f.metadata:
            continue
        value = getattr(plan, f.name)
        if dataclasses.is_dataclass(value):
            out.update(plan_widget_values(value, field_key(prefix, f.name)))
        else:
            out[field_key(prefix, f.name)] = list(value) if isinstance(value, tuple) else value
    return out


_MENUS = ("select", "select_slider", "radio", "multiselect", "pills")


def _wording(label: str) -> str:
    """A label inside a sentence: its first letter lowered unless it starts an acronym."""
    return label[:1].lower() + label[1:] if label[1:2].islower() else label


def check_shown(plan: Any, names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` when a declared field of ``plan`` holds a value its widget cannot show:
    a number outside its declared bounds, or a menu widget's value that is not on the menu.

    For plans whose declared bounds and menus are what the page offers while the plan's own checks
    are broader: a saved plan outside the offer still loads and runs, and the page says why it
    cannot redraw it instead of failing inside a widget. ``names``: only these fields."""
    for f in dataclasses.fields(plan):
        meta = f.metadata
        if "label" not in meta or (names is not None and f.name not in names):
            continue
        value, label = getattr(plan, f.name), _wording(meta["label"])
        choices, kind = meta.get("choices"), meta.get("kind", "")
        if isinstance(value, bool) or kind in ("columns", "column", "lens"):
            continue
        if choices is not None and (kind in _MENUS or not kind):
            menu = list(choices)
            bad = [v for v in (value if isinstance(value, tuple) else (value,)) if v not in menu]
            if bad:
                raise ValueError(f"This page offers {label} of {menu}; the saved plan has {bad[0]!r}.")
        elif isinstance(value, (int, float)):
            low, high = meta.get("low"), meta.get("high")
            if (low is not None and value < low) or (high is not None and value > high):
                span = (f"from {low:g} to {high:g}" if low is not None and high is not None
                        else f"of at least {low:g}" if low is not None else f"of at most {high:g}")
                raise ValueError(f"This page offers {label} {span}; the saved plan has {value!r}.")
