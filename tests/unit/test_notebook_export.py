"""The exported notebook is written without any notebook package at run time (nbformat is a test-only
dependency) and is still a valid nbformat-4 document Jupyter reads back cell for cell."""
from __future__ import annotations

import json
import sys

import pytest

from core.census import BudgetPlan, run
from core.report import build_report, report_json
from core.script_export import notebook_json, script_sections


@pytest.fixture(scope="module")
def report():
    return json.loads(report_json(build_report(run(BudgetPlan(runs=4)), page="Budget allocation")))


def test_notebook_is_written_with_nbformat_blocked(report, monkeypatch):
    monkeypatch.setitem(sys.modules, "nbformat", None)      # any import of it now raises ImportError
    monkeypatch.setitem(sys.modules, "nbformat.v4", None)
    with pytest.raises(ImportError):
        import nbformat  # noqa: F401
    text = notebook_json(report)
    book = json.loads(text)
    assert (book["nbformat"], book["nbformat_minor"]) == (4, 5)
    sections = script_sections(report)
    assert [c["cell_type"] for c in book["cells"]] == ["markdown", "code"] * len(sections)
    code = [c for c in book["cells"] if c["cell_type"] == "code"]
    assert ["".join(c["source"]) for c in code] == [s.code for s in sections]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert len({c["id"] for c in book["cells"]}) == len(book["cells"])


def test_hand_written_notebook_validates_and_reads_back(report):
    nbformat = pytest.importorskip("nbformat")
    book = nbformat.reads(notebook_json(report), as_version=4)
    nbformat.validate(book)
    assert book.metadata.kernelspec.name == "python3"
    assert book.cells[0].source.startswith("# What this does")
