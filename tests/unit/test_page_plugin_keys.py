"""What the District maps page needs from a noising algorithm or a noise mechanism is an attribute of that
plugin, never a comparison with its key: a page compares no string with a plugin key."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.districts.noise import ALGORITHMS
from core.privacy.mechanisms import MECHANISMS, get_mechanism

PAGES = Path(__file__).resolve().parents[2] / "dashboard" / "tools"


def _key_comparisons(path: Path, keys: set[str]) -> list[str]:
    """Every ``x == "key"`` / ``x != "key"`` (or ``in``) of ``path`` whose string is one of ``keys``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in keys:
                    found.append(f"line {node.lineno}: {side.value!r}")
    return found


def test_the_district_maps_page_compares_no_algorithm_or_mechanism_key():
    keys = set(ALGORITHMS) | set(MECHANISMS)
    assert _key_comparisons(PAGES / "district_maps.py", keys) == []


def test_only_plain_toydown_follows_the_closed_form_sd():
    notes = {key: spec.closed_form_note for key, spec in ALGORITHMS.items()}
    assert notes.pop("toydown") == ""
    assert notes and all("Cor. 3" in note for note in notes.values())


@pytest.mark.parametrize("key", list(MECHANISMS))
def test_the_fragmentation_line_is_drawn_for_laplace_noise_only(key):
    # the line 2 s^2 d^2 / eps^2 (w1^2 + Frag) takes a node's variance to be 2 (s / eps)^2: Laplace's
    mech = get_mechanism(key)
    assert mech.fragmentation_line == (key == "laplace")
    if mech.fragmentation_line:
        assert mech.unit == "epsilon" and mech.variance(mech.scale_for(2.0, 0.5)) == pytest.approx(2 * 4.0 ** 2)
