"""The ``core`` package has no import cycle, and census never reaches up into districts.

Every ``import`` statement of every module under ``core/`` is read from its syntax tree (top-level and
function-level alike, since a deferred import still ties the two modules together), resolved to a module
of ``core``, and the resulting graph is searched for strongly connected components.
"""
from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"


def module_names() -> dict[str, Path]:
    """Dotted name -> file for every module of core (packages by their __init__)."""
    names = {}
    for path in CORE.rglob("*.py"):
        parts = path.relative_to(CORE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a core module (``core.a.b.func`` -> ``core.a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Core modules that ``module`` imports anywhere in its body."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            found = resolve(target, known)
            if found and found != module:
                out.add(found)
                out.update(outside_ancestors(found, module, known))
    return out


def outside_ancestors(target: str, module: str, known: dict[str, Path]) -> set[str]:
    """Packages whose ``__init__`` importing ``target`` runs first, except the importer's own packages
    (already being imported while it runs): ``import core.a.b`` from ``core.x`` also runs ``core.a``."""
    parts = target.split(".")
    own = module.split(".")
    out = set()
    for end in range(2, len(parts)):
        package = ".".join(parts[:end])
        if package in known and own[:end] != parts[:end]:
            out.add(package)
    return out


def import_graph() -> dict[str, set[str]]:
    known = module_names()
    return {m: imported(m, p, known) for m, p in known.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; returns the components with more than one module."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_core_has_no_import_cycle():
    """Every edge counts, a package's ``__init__`` included: a submodule that imports its own package
    (``from core.coherence import x`` inside ``core.coherence.plan``) closes a loop through the
    ``__init__`` that imports it, so submodules import the sibling module they need instead."""
    cycles = strongly_connected(import_graph())
    assert cycles == [], f"import cycles in core: {cycles}"


def test_census_does_not_import_districts():
    graph = import_graph()
    up = sorted((m, d) for m, deps in graph.items() if m.startswith("core.census")
                for d in deps if d.startswith("core.districts"))
    assert up == [], f"census modules import districts: {up}"


def test_geography_imports_no_area():
    graph = import_graph()
    areas = ("core.census", "core.districts", "core.synthesis", "core.coherence", "core.fairness")
    up = sorted((m, d) for m, deps in graph.items() if m.startswith("core.geography")
                for d in deps if d.startswith(areas))
    assert up == [], f"geography modules import area packages: {up}"


def test_privacy_imports_no_area():
    """Mechanisms, accounting and the ledger sit below every area; an area may use them, never the reverse."""
    graph = import_graph()
    areas = ("core.census", "core.districts", "core.synthesis", "core.coherence", "core.fairness")
    up = sorted((m, d) for m, deps in graph.items() if m.startswith("core.privacy")
                for d in deps if d.startswith(areas))
    assert up == [], f"privacy modules import area packages: {up}"
