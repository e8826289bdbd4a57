"""The import graph of ``core`` and ``dashboard``: layers, no cycles, and a ceiling on deferred imports.

Every ``import`` statement of every module under ``core/`` and ``dashboard/`` is read from its syntax tree
(top-level and function-level alike, since an import inside a function still ties the two modules
together), resolved to a module of the project, and checked:

- **layers**: each module belongs to one layer of :data:`LAYERS`; no module imports a module of a higher
  layer (so ``core`` never imports ``dashboard``, and infrastructure and the intake import no area);
- **no cycle between modules**, edges through a package's ``__init__`` included, and **no cycle between
  units** (a top-level package or module: ``core.synthesis``, ``core.report``, ``dashboard.components``),
  so two areas never lean on each other, even through different submodules;
- **a ceiling on function-level imports** of project modules (:data:`FUNCTION_IMPORT_CEILING`): an import
  moved inside a function to dodge a cycle fails here; the fix is the right layer or a registration;
- **the command line stays clear of the dashboard**: ``python -m core`` reaches no ``dashboard`` module,
  and no code that core writes (scripts, notebooks) imports one.

Exceptions are listed by name with their reason (:data:`UPWARD_ALLOWED`), and one that is no longer
needed fails the test, so the list only shrinks.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP_PACKAGES = ("core", "dashboard")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("core", "core.contracts", "core.numeric", "core.uploads", "core.sharing", "core.takeaway",
                    "core.uncertainty_words")),
    ("infrastructure", ("core.cluster", "core.parallel", "core.cache", "core.database", "core.jobs",
                        "core.estimates", "core.access", "core.areas")),
    ("privacy", ("core.privacy",)),
    ("reports", ("core.report",)),
    ("intake", ("core.intake",)),
    ("data", ("core.datasets", "core.geography")),
    ("words", ("core.report_words",)),
    ("areas", ("core.census", "core.districts", "core.synthesis", "core.coherence", "core.fairness")),
    ("composition", ("core.releases", "core.compare", "core.scenarios", "core.figures",
                     "core.script_export", "core.stakeholder_report", "core.reproductions", "core.paper_errors")),
    ("commands", ("core.__main__", "core.release_cli", "core.folder_cli", "core.access_cli")),
    ("dashboard components", ("dashboard", "dashboard.page_registry", "dashboard.components")),
    ("pages", ("dashboard.tools", "dashboard.home", "dashboard.app", "dashboard.server")),
)
"""Lowest first. A module sits in the layer of the longest name listed that is it or a package holding it.
A module may import its own layer and lower ones; within a layer, :func:`test_no_cycle_between_units`
keeps the order one way (``core.districts`` uses ``core.census``; ``core.coherence`` and
``core.fairness`` use ``core.synthesis``; never the reverse)."""

UPWARD_ALLOWED: set[tuple[str, str]] = set()
"""(importer unit, imported unit) edges exempt from the layer and unit-cycle checks, each with its reason."""

FUNCTION_IMPORT_CEILING = 120
"""Imports of project modules inside a function body, over the whole tree. Lower it when you remove some;
never raise it to make room for a new one."""


def module_names() -> dict[str, Path]:
    """Dotted name -> file for every module of core and dashboard (packages by their __init__)."""
    names = {}
    for top in TOP_PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names[".".join(parts)] = path
    return names


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a project module (``core.a.b.func`` -> ``core.a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def import_nodes(tree: ast.AST) -> list[tuple[ast.stmt, bool]]:
    """Every import statement of ``tree`` with whether it sits inside a function body."""
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append((child, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return out


def targets_of(node: ast.stmt, module: str, path: Path) -> list[str]:
    """The dotted names an import statement reaches (``from a import b`` reaches ``a.b`` and ``a``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return [f"{base}.{a.name}" for a in node.names] + [base]


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


@lru_cache(maxsize=1)
def scan() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """The module graph, and every function-level import of a project module as (module, line, target);
    read once per test session (treat both as read-only)."""
    known = module_names()
    graph: dict[str, set[str]] = {m: set() for m in known}
    deferred = []
    for module, path in known.items():
        for node, in_function in import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            found = {resolve(t, known) for t in targets_of(node, module, path)} - {None, module}
            if in_function and found:
                deferred.append((module, node.lineno, ", ".join(sorted(found))))
            for target in found:
                graph[module].add(target)
                graph[module].update(outside_ancestors(target, module, known))
    return graph, deferred


def import_graph() -> dict[str, set[str]]:
    return {module: set(deps) for module, deps in scan()[0].items()}


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the longest listed name that is ``module`` or one of its packages."""
    best, where = "", -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, where = name, index
    return where


def unit_of(module: str) -> str:
    """The top-level package or module ``module`` belongs to (``core.synthesis.aim`` -> ``core.synthesis``)."""
    return ".".join(module.split(".")[:2])


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; returns the components with more than one node."""
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


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in module_names() if layer_of(m) < 0)
    assert unplaced == [], f"modules in no layer (add them to LAYERS in {Path(__file__).name}): {unplaced}"


def test_no_module_imports_a_higher_layer():
    """Infrastructure and the intake import no area, core never imports dashboard, components never
    import pages, and so on up :data:`LAYERS`."""
    graph = import_graph()
    edges = [(m, d) for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m)]
    up = sorted(f"{m} ({LAYERS[layer_of(m)][0]}) -> {d} ({LAYERS[layer_of(d)][0]})"
                for m, d in edges if (unit_of(m), unit_of(d)) not in UPWARD_ALLOWED)
    assert up == [], "imports that point up a layer:\n" + "\n".join(up)
    unused = UPWARD_ALLOWED - {(unit_of(m), unit_of(d)) for m, d in edges}
    assert not unused, f"exceptions no longer needed (remove them from UPWARD_ALLOWED): {sorted(unused)}"


def test_no_import_cycle_between_modules():
    """Every edge counts, a package's ``__init__`` included: a submodule that imports its own package
    (``from core.coherence import x`` inside ``core.coherence.plan``) closes a loop through the
    ``__init__`` that imports it, so submodules import the sibling module they need instead."""
    cycles = strongly_connected(import_graph())
    assert cycles == [], f"import cycles: {cycles}"


def test_no_import_cycle_between_units():
    units: dict[str, set[str]] = {}
    for module, deps in import_graph().items():
        mine = units.setdefault(unit_of(module), set())
        mine.update(unit_of(d) for d in deps
                    if unit_of(d) != unit_of(module) and (unit_of(module), unit_of(d)) not in UPWARD_ALLOWED)
    cycles = strongly_connected(units)
    assert cycles == [], f"packages that import each other (through any of their modules): {cycles}"


def test_function_level_imports_do_not_grow():
    """An import inside a function is for an optional or heavy dependency, not for hiding a cycle."""
    deferred = scan()[1]
    listing = "\n".join(f"{m}:{line} -> {t}" for m, line, t in deferred)
    assert len(deferred) <= FUNCTION_IMPORT_CEILING, (
        f"{len(deferred)} function-level imports of project modules, above the ceiling of "
        f"{FUNCTION_IMPORT_CEILING}; import at the top of the module from a lower layer, or register into "
        f"the lower layer instead:\n{listing}")


def test_the_command_line_never_reaches_dashboard():
    """``python -m core`` and every module it reaches (the exported scripts' imports included) load without
    the dashboard package: the closure of ``core.__main__`` holds no ``dashboard`` module."""
    graph = import_graph()
    seen, todo = set(), ["core.__main__", "core.script_export"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    assert sorted(m for m in seen if m.startswith("dashboard")) == []


def test_code_that_core_writes_imports_no_dashboard():
    """A script or notebook that core writes (``python -m core script``) runs with core alone: no string of
    a core module holds a line that imports ``dashboard``."""
    importing = re.compile(r"^\s*(from|import)\s+dashboard\b", re.MULTILINE)
    writers = {module for module, path in module_names().items() if module.startswith("core")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and importing.search(node.value)}
    assert writers == set()
