"""No module of the project imports a private (`_name`) name from another of its modules.

A leading underscore says "only this module relies on me"; a name another module needs belongs in
the public surface of its home (see docs/architecture.md). The check walks the syntax tree of every
module under core/ and dashboard/, resolving relative imports.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "dashboard")

# Known offenders still to be fixed in their areas, as "importing module -> source module.name".
# Every entry needs a reason; remove it as soon as the name is public (the test fails on stale ones).
ALLOWED: dict[str, str] = {}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """Absolute name of the module an ImportFrom reads from."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(root: Path = REPO) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            importer = _module_name(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom):
                    continue
                source = _resolve(importer, path.name == "__init__.py", node)
                if source.split(".")[0] not in PACKAGES or source == importer:
                    continue
                for alias in node.names:
                    name = alias.name
                    if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                        found.append(f"{importer} -> {source}.{name}")
                # `from core.x import _module` reads a private submodule the same way
                if any(part.startswith("_") and not part.startswith("__") for part in source.split(".")):
                    found.append(f"{importer} -> {source}")
    return found


@pytest.mark.slow
def test_no_module_imports_a_private_name_from_another():
    found = private_imports()
    unexplained = [f for f in found if f not in ALLOWED]
    assert not unexplained, "private names imported across modules:\n" + "\n".join(unexplained)


@pytest.mark.slow
def test_allow_list_has_no_stale_entries():
    stale = sorted(set(ALLOWED) - set(private_imports()))
    assert not stale, f"fixed, remove from ALLOWED: {stale}"


def test_the_check_finds_offenders_in_a_small_tree(tmp_path):
    (tmp_path / "core" / "area").mkdir(parents=True)
    (tmp_path / "dashboard").mkdir()
    (tmp_path / "core" / "area" / "__init__.py").write_text("from .engine import run, _helper\n")
    (tmp_path / "core" / "area" / "engine.py").write_text("def _helper(): pass\ndef run(): pass\n")
    (tmp_path / "dashboard" / "page.py").write_text(
        "from core.area.engine import (\n    run,\n    _helper as h,\n)\nfrom core.numeric import whole as _whole\n"
        "import numpy._core\nfrom core.area._impl import thing\n")
    assert private_imports(tmp_path) == ["core.area -> core.area.engine._helper",
                                         "dashboard.page -> core.area.engine._helper",
                                         "dashboard.page -> core.area._impl"]


def test_the_check_sees_absolute_and_relative_imports(tmp_path):
    tree = ast.parse("from core.privacy.mechanisms import _sample\nfrom .ledger import _row\nfrom . import _x\n")
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [_resolve("core.privacy.accounting", False, n) for n in nodes] == [
        "core.privacy.mechanisms", "core.privacy.ledger", "core.privacy"]
    assert _resolve("core.privacy", True, nodes[1]) == "core.privacy.ledger"
