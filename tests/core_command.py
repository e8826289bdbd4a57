"""``python -m core ...`` for tests: the command line's ``main`` run in this process, its output captured.

A fresh interpreter per call costs 2-4 s of imports and says nothing ``main`` does not; one test
(``tests/unit/test_intake.py::test_python_m_core_runs_as_its_own_process``) keeps the real process.
"""
from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout

from core.__main__ import main


def core_command(*args: str) -> subprocess.CompletedProcess:
    """What ``python -m core ARGS`` prints and its exit status (argparse's own exits included)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:       # argparse: --help, or words it does not know
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(["python", "-m", "core", *args], code, out.getvalue(), err.getvalue())
