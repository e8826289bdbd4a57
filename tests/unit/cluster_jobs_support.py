"""Job functions for the cluster job tests. The tests run an in-process Dask cluster (``processes=False``),
so a task runs in a worker thread of the test's own process: these functions and the test share the
events below, and the test orders what happens by them, never by the clock."""
from __future__ import annotations

import threading

from core.contracts import Cancelled

SEEN = threading.Event()
"""Set by the test once the server has shown the job's first report."""
GO = threading.Event()
"""Set by the test to let a job go on past its first round."""
ENDED = threading.Event()
"""Set by a job as it ends, whichever way."""
RECORD: dict = {}
"""What a job did: the last round it began, whether it finished, whether it saw Cancelled."""


def reset() -> None:
    for event in (SEEN, GO, ENDED):
        event.clear()
    RECORD.clear()


def report_then_wait(rounds: int, progress=None) -> int:
    """Report round 1, wait until the test has seen it on the server, then report the other rounds."""
    progress(1, rounds, "round 1")
    SEEN.wait(120)
    for r in range(2, rounds + 1):
        progress(r, rounds, f"round {r}")
    return rounds


def held_rounds(rounds: int, progress=None) -> str:
    """A release's computation: ``rounds`` rounds, each reported, then its noisy answer. It holds after
    round 1 until the test says go; ``RECORD`` says how far it got."""
    try:
        for r in range(1, rounds + 1):
            RECORD["round"] = r
            progress(r, rounds, f"round {r}")
            if r == 1:
                GO.wait(120)
        RECORD["finished"] = True
        return "noisy answer"
    except Cancelled:
        RECORD["cancelled"] = True
        raise
    finally:
        ENDED.set()
