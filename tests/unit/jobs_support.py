"""Job functions for the background job tests: small, importable by name (a job's process imports them),
and telling the test what happened through files rather than through timing."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def double(x: int, progress=None) -> int:
    """A trivial job: reports one round of progress from the worker process, then returns 2x."""
    if progress is not None:
        progress(1, 2, "first round")
        progress(2, 2, "second round")
    return 2 * x


def refuse(message: str, progress=None):
    """A job whose settings are wrong: a ValueError that says what to change."""
    raise ValueError(message)


def worker_setting(_unused=None, progress=None) -> tuple[str, int]:
    """The fan-out width the job's process was given, and its niceness."""
    return os.environ.get("DASHBOARD_N_JOBS", ""), os.nice(0)


def hang(folder: str, progress=None):
    """Start a helper process (as a fan-out would), write both pids, then wait until killed."""
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(folder, "pids").write_text(f"{os.getpid()} {helper.pid}")
    if progress is not None:
        progress(0, 1, "waiting")
    deadline = time.monotonic() + 600               # killed long before; a deadline all the same
    while time.monotonic() < deadline:
        time.sleep(0.05)


def scratch_folder(_unused=None, progress=None) -> str:
    """The folder the job's joblib workers share memory through, with a file in it."""
    folder = os.environ["JOBLIB_TEMP_FOLDER"]
    Path(folder, "memmap").write_bytes(b"x" * 1024)
    return folder


class Manual:
    """An executor that only records what it was asked to start; the test finishes jobs by hand."""

    where = "nowhere"

    def __init__(self):
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.finish: dict[str, callable] = {}
        self.widths: dict[str, int] = {}

    def start(self, job, on_progress, on_finish):
        self.started.append(job.label)
        self.finish[job.label] = on_finish
        self.widths[job.label] = job.n_jobs
        job.where = self.where
        manual = self

        class Handle:
            def cancel(self):
                manual.cancelled.append(job.label)
        return Handle()


def noop(progress=None):
    return None
