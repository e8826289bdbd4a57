"""Importing core never pulls in the UI stack (its speed is measured in benchmarks/privacy_bench.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import core, core.contracts, core.cache, core.parallel, core.report, core.uploads, core.datasets
import core.privacy.mechanisms, core.privacy.accounting, core.privacy.ledger
ui = sorted({m.split('.')[0] for m in sys.modules} & {'streamlit', 'plotly'})
print(json.dumps({"ui": ui}))
"""


@pytest.mark.slow
def test_import_core_skips_streamlit_and_plotly():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"ui": []}
