"""The Data step's work on a folder of parts runs as background jobs: the check and the synthetic release say
their work and time first, go through the job queue, count parts on their bar and show their result after the
rerun; a check left running is found again (by the declaration and the folder's listing) from a new session
without a second pass, and a cancelled release spends nothing and leaves no synthetic part behind.

Jobs run on server threads (``DASHBOARD_JOB_WORKER=thread``) so the test can watch them; what happens is
ordered by events (a gate opened when the page attaches, a cancel at a given progress message), not by time."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import CANCELLED, DONE, JobQueue, set_job_queue
from tests.app.test_data_step_folder import APP, FOLDER, NAME, REGION, SEX, STEP
from tests.release_steps import confirm_release

CHECK = "Checking 3 parts"
RELEASE = "Releasing a synthetic copy of the parts"


@pytest.fixture
def queue(traced_queue, tmp_path, monkeypatch):
    """A fresh job queue whose jobs run on threads, a ledger and store of its own, parts read in-process."""
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")
    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")
    monkeypatch.setenv("DASHBOARD_JOB_WORKER", "thread")
    return traced_queue


@pytest.fixture
def parts(tmp_path) -> Path:
    """Three clean parts of 80 rows."""
    out = tmp_path / "parts"
    out.mkdir()
    rng = np.random.default_rng(5)
    for i in range(3):
        pd.DataFrame({"sex": rng.choice(SEX, 80), "region": rng.choice(REGION, 80)}).astype(object).to_parquet(
            out / f"part-{i}.parquet", index=False)
    return out


@pytest.fixture
def checks(monkeypatch):
    """Every check of a folder, with the progress reports it made (a spy around the real check)."""
    import core.intake.folder as folder

    real, made = folder.check_folder, []

    def spy(listing, schema, *args, progress=None, **kwargs):
        seen = []
        made.append(seen)

        def report(done, total, message=""):
            seen.append((done, total, message))
            if progress is not None:
                progress(done, total, message)
        return real(listing, schema, *args, progress=report, **kwargs)

    monkeypatch.setattr(folder, "check_folder", spy)
    return made


def _open(parts) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page(STEP).run()
    at.radio(key="ds_source").set_value(FOLDER).run()
    at.text_input(key="ds_folder").input(str(parts)).run()
    # the only error a draft may show is the check's count of problems that block a run
    assert not at.exception and all("block a run" in e.value for e in at.error), \
        (at.exception, [e.value for e in at.error])
    return at


def _declare(at) -> AppTest:
    gen = at.session_state["ds_state"]["gen"]
    at.text_input(key="ds_name").input(NAME).run()
    at.multiselect(key=f"ds{gen}_sex_categories").set_value(SEX)
    at.multiselect(key=f"ds{gen}_region_categories").set_value(REGION)
    return at.run()


def _problems(at):
    return next((d.value for d in at.dataframe if "what to do" in d.value.columns), None)


def _jobs(queue, label):
    return [j for j in queue.jobs() if j.label == label]


def test_the_check_is_a_job_that_counts_parts_and_is_found_again_from_a_new_session(queue, parts, checks,
                                                                                   monkeypatch):
    at = _open(parts)
    said = at.session_state["ds_folder_check_estimate_estimate"]
    assert said.work == "read and check 3 parts x about 240 rows x 2 columns once"
    assert any("read and check 3 parts x about 240 rows" in c.value for c in at.caption)
    assert _problems(at) is None and not _jobs(queue, CHECK)            # nothing read before the press
    at.button(key="ds_folder_check").click().run()
    assert not at.exception and all("block a run" in e.value for e in at.error)
    (job,) = _jobs(queue, CHECK)
    assert job.state == DONE and job.owner == at.session_state["_jobs_owner"]
    assert checks == [[(1, 3, "part 1 of 3 checked"), (2, 3, "part 2 of 3 checked"), (3, 3, "part 3 of 3 checked")]]
    assert (job.done, job.total, job.message) == (3, 3, "part 3 of 3 checked")
    first = _problems(at)
    assert (first["severity"] == "blocks a run").any()                 # the draft declares no categories yet
    at.run()                                                           # a rerun shows it without reading again
    assert _problems(at).equals(first) and len(checks) == 1

    # the same check left running by an earlier visit: a new session (a reload) attaches to it by its key
    import core.intake.folder as folder
    later = JobQueue(slots=1)
    set_job_queue(later)
    gate, real = threading.Event(), folder.check_folder

    def waiting(listing, schema, *args, progress=None):
        assert gate.wait(120), "the page never attached"
        return real(listing, schema, *args, progress=progress)

    running = later.submit(waiting, *job_args(queue, job), owner="an earlier visit", key=job.key, label=CHECK)
    submit = later.submit

    def attach(func, *args, key, **kwargs):
        found = submit(func, *args, key=key, **kwargs)
        if found is running:
            gate.set()                                                 # the page attached: let it finish
        return found

    monkeypatch.setattr(later, "submit", attach)
    again = _open(parts)
    assert gate.is_set() and running.state == DONE and later.jobs() == [running]
    assert _problems(again).equals(first)
    assert len(checks) == 2                                            # the running job's pass, none of the page's
    third = _open(parts)                                               # and once more: its result, no pass at all
    assert _problems(third).equals(first) and len(checks) == 2 and later.jobs() == [running]


def job_args(queue, job):
    """The (listing, schema) a finished check job was given (kept aside by the test's submit spy)."""
    return queue.test_args[job.key]


@pytest.fixture(autouse=True)
def _keep_job_args(queue, monkeypatch):
    """Remember each job's arguments by key (a finished job drops them), for the test to submit again."""
    queue.test_args = {}
    submit = queue.submit

    def remember(func, *args, key, **kwargs):
        queue.test_args[key] = args
        return submit(func, *args, key=key, **kwargs)

    monkeypatch.setattr(queue, "submit", remember)


def _saved(at) -> AppTest:
    _declare(at)
    at.button(key="ds_folder_check").click().run()
    assert not (_problems(at)["severity"] == "blocks a run").any()
    at.button(key="ds_folder_save").click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def _release_form(at, out: Path, parts: int | None = None) -> AppTest:
    """The release's output folder (and the number of parts to write, else the page's default)."""
    at.text_input(key="ds_folder_out").input(str(out)).run()
    if parts is not None:
        at.number_input(key="ds_folder_parts").set_value(parts).run()
    return at


def _midway(monkeypatch, act) -> None:
    """The page's release job calls ``act()`` when the first of its two synthetic parts is written (one part
    already drawn and written), before the report goes on to the job."""
    import core.synthesis.folder_release as folder_release

    real = folder_release.release_unpublished

    def release(plan, schema, folder, nonce, *where, progress=None):       # where: n_jobs, scheduler
        def report(done, total, message=""):
            if message == "synthetic part 1 of 2 written":
                act()
            progress(done, total, message)
        return real(plan, schema, folder, nonce, *where, progress=report)

    monkeypatch.setattr(folder_release, "release_unpublished", release)


def test_the_release_is_a_job_that_counts_parts_and_publishes_after_the_commit(queue, parts, tmp_path):
    from core.privacy.project_ledger import ProjectLedger, declared_key

    out = tmp_path / "synthetic"
    at = _release_form(_saved(_open(parts)), out, 2)
    said = at.session_state["ds_folder_release_estimate_estimate"]
    assert said.work == ("count 3 parts x about 240 rows x 2 columns in one pass, fit MST (maximum spanning tree), "
                         "draw and write 2 synthetic parts")
    confirm_release(at, "ds_folder_release")
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    (job,) = _jobs(queue, RELEASE)
    assert job.state == DONE and job.owner == at.session_state["_jobs_owner"]
    assert (job.done, job.total, job.message) == (3 + 1 + 2, 6, "synthetic part 2 of 2 written")
    assert sorted(p.name for p in out.glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    assert not [p for p in tmp_path.iterdir() if ".unfinished-" in p.name]
    at.run()                                                           # the result stays after a rerun
    assert any(f"Written: 2 parts in {out}" in s.value for s in at.success)
    ledger = ProjectLedger()
    assert len(ledger.releases(declared_key(NAME), "release")) == 1 and len(_jobs(queue, RELEASE)) == 1
    at.switch_page("home.py").run()                  # elsewhere, then back: the saved declaration and the result
    at.switch_page(STEP).run()
    at.radio(key="ds_source").set_value(FOLDER).run()
    at.text_input(key="ds_folder").input(str(parts)).run()
    assert any(f"Written: 2 parts in {out}" in s.value for s in at.success)
    assert len(ledger.releases(declared_key(NAME), "release")) == 1 and len(_jobs(queue, RELEASE)) == 1
    assert len(_jobs(queue, CHECK)) == 1                               # the saved declaration's check, found again


def test_a_cancelled_release_spends_nothing_and_leaves_no_part(queue, parts, tmp_path, monkeypatch):
    from core.privacy.project_ledger import ProjectLedger, declared_key

    def cancel():
        (job,) = _jobs(queue, RELEASE)
        job.cancel()                                                   # the bar's (or the sidebar's) Cancel

    _midway(monkeypatch, cancel)                                       # the job notices at the report and stops
    out = tmp_path / "synthetic"
    at = confirm_release(_release_form(_saved(_open(parts)), out, 2), "ds_folder_release")
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    (job,) = _jobs(queue, RELEASE)
    assert job.state == CANCELLED
    ledger = ProjectLedger()
    key = declared_key(NAME)
    assert not ledger.releases(key, "release") and not ledger.reservations(key)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".unfinished-" in p.name]
    assert any("cancelled before anything was published" in i.value for i in at.info)
    assert "ds_folder_result" not in at.session_state


def test_a_release_the_ledger_cannot_commit_publishes_nothing(queue, parts, tmp_path, monkeypatch):
    from core.privacy.project_ledger import ProjectLedger, declared_key

    def refuse(self, reservation, spends=None):
        raise ValueError("The ledger could not be written (a test's refusal).")

    out = tmp_path / "synthetic"
    at = _release_form(_saved(_open(parts)), out)
    monkeypatch.setattr(ProjectLedger, "commit", refuse)
    confirm_release(at, "ds_folder_release")
    assert not at.exception and any("a test's refusal" in e.value for e in at.error)
    (job,) = _jobs(queue, RELEASE)
    assert job.state == DONE                                           # drawn, but never committed ...
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".unfinished-" in p.name]   # ... nor published
    assert not ProjectLedger().releases(declared_key(NAME), "release")


def test_a_release_whose_job_stops_before_it_finishes_spends_nothing_and_says_so_once(queue, parts, tmp_path,
                                                                                       monkeypatch):
    """A job that ends without a result (here it meets a stop of its own) drops the reservation and its
    unfinished parts in its completion hook; the page says so once. (Leaving the page no longer stops a
    release: it was paid for, and runs on: tests/app/test_releases_survive.py.)"""
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    from core.privacy.project_ledger import ProjectLedger, declared_key

    def stop():
        raise StopException()

    _midway(monkeypatch, stop)
    out = tmp_path / "synthetic"
    at = confirm_release(_release_form(_saved(_open(parts)), out, 2), "ds_folder_release")
    assert not at.exception
    key = declared_key(NAME)
    ledger = ProjectLedger()
    assert not ledger.releases(key, "release") and not ledger.reservations(key)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".unfinished-" in p.name]
    assert any("stopped before it finished" in e.value for e in at.error)
    assert any("nothing was spent" in i.value for i in at.info)
    at.run()                                                           # said once
    assert not any("stopped before it finished" in e.value for e in at.error)
    assert "ds_folder_result" not in at.session_state


def test_a_release_whose_output_folder_fills_meanwhile_is_recorded_and_says_where_its_parts_wait(
        queue, parts, tmp_path, monkeypatch):
    """Committed, but not published over another writer's files: the parts stay in their marked folder, and
    the page says where they are (in the error and in the result's warning)."""
    from core.privacy.project_ledger import ProjectLedger, declared_key

    out = tmp_path / "synthetic"

    def another_writer():
        out.mkdir(exist_ok=True)
        pd.DataFrame({"sex": ["Male"]}).to_parquet(out / "theirs.parquet", index=False)

    _midway(monkeypatch, another_writer)
    at = confirm_release(_release_form(_saved(_open(parts)), out, 2), "ds_folder_release")
    assert not at.exception
    assert len(ProjectLedger().releases(declared_key(NAME), "release")) == 1          # paid for and recorded
    (waiting,) = [p for p in tmp_path.iterdir() if ".unfinished-" in p.name]
    assert sorted(p.name for p in waiting.glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    assert sorted(p.name for p in out.iterdir()) == ["theirs.parquet"]                 # nothing published over it
    assert any("recorded in the ledger, but its parts could not be put in place" in e.value and str(waiting) in e.value
               for e in at.error)
    assert any(f"Released, but its 2 parts still wait in {waiting}" in w.value for w in at.warning)
