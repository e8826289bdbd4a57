"""`streamlit ...` with every script run profiled (cProfile): the load benchmark's `--profile FILE`.

Each run of a page is profiled in its own script thread, in that thread's CPU time (so the figures
do not depend on the machine's load or on other sessions holding the interpreter lock); the runs' statistics are summed and
written to $PROFILE_OUT (pstats format) after every run (the server is stopped by a signal, so
nothing runs at its exit). Read them with
`python -c "import pstats; pstats.Stats('FILE').sort_stats('cumulative').print_stats(40)"`.
"""
import cProfile
import os
import pstats
import sys
import threading
import time

from streamlit.runtime.scriptrunner import script_runner
from streamlit.web import cli

_lock = threading.Lock()
_total: list[pstats.Stats] = []
_run_script = script_runner.ScriptRunner._run_script


def _profiled(self, *args, **kwargs):
    profile = cProfile.Profile(time.thread_time)   # this run's own CPU, not time spent waiting
    profile.enable()
    try:
        return _run_script(self, *args, **kwargs)
    finally:
        profile.disable()
        profile.create_stats()
        with _lock:
            if _total:
                _total[0].add(profile)
            else:
                _total.append(pstats.Stats(profile))
            _total[0].dump_stats(os.environ["PROFILE_OUT"])


script_runner.ScriptRunner._run_script = _profiled

if __name__ == "__main__":
    sys.argv = ["streamlit", *sys.argv[1:]]
    cli.main()
