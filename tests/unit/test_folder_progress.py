"""A folder set's check and release report their work part by part, and a release that is cancelled or not
committed leaves no synthetic file in the output folder: its parts wait in a marked unfinished folder that is
removed, and are published only after the ledger commits."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.contracts import Cancelled
from core.intake import ColumnSchema, DataSchema
from core.intake.folder import check_folder, folder_rows, list_folder
from core.privacy.project_ledger import ProjectLedger, declared_key
from core.releases import folder_copy_release, run_release
from core.synthesis.folder_release import (FolderReleasePlan, ReleaseProgress, discard_unfinished, publish,
                                           release_folder, unfinished_folders)

SEX = ("Female", "Male")
REGION = ("North", "South", "East", "West")
ROWS = (40, 35, 45)
SCHEMA = DataSchema("Parts", (ColumnSchema("sex", "category", categories=SEX),
                              ColumnSchema("region", "category", categories=REGION)), file_suffix=".parquet")


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "parts"
    out.mkdir()
    rng = np.random.default_rng(3)
    for i, n in enumerate(ROWS):
        pd.DataFrame({"sex": rng.choice(SEX, n), "region": rng.choice(REGION, n)}).to_parquet(
            out / f"part-{i}.parquet", index=False)
    return out


class Recorder:
    """A progress callback that keeps every report, and can raise Cancelled at the first message matching."""

    def __init__(self, stop_at: str | None = None) -> None:
        self.calls: list[tuple[int, int, str]] = []
        self.stop_at = stop_at

    def __call__(self, done: int, total: int, message: str = "") -> None:
        self.calls.append((done, total, message))
        if self.stop_at is not None and self.stop_at in message:
            raise Cancelled("stopped by the test")

    @property
    def messages(self) -> list[str]:
        return [m for _, _, m in self.calls]


def test_the_check_counts_parts_and_the_rows_come_from_the_footers(folder):
    listing = list_folder(folder)
    seen = Recorder()
    check_folder(listing, SCHEMA, n_jobs=1, progress=seen)
    assert seen.calls == [(1, 3, "part 1 of 3 checked"), (2, 3, "part 2 of 3 checked"), (3, 3, "part 3 of 3 checked")]
    assert folder_rows(listing) == sum(ROWS)


def test_a_folder_that_changes_while_it_is_checked_is_refused(folder):
    listing = list_folder(folder)

    def rewrite(done, total, message=""):
        if done == 1:          # another writer replaces a part meanwhile
            pd.DataFrame({"sex": ["Male"], "region": ["North"]}).to_parquet(folder / "part-2.parquet", index=False)

    with pytest.raises(ValueError, match="changed while they were checked"):
        check_folder(listing, SCHEMA, n_jobs=1, progress=rewrite)


def test_a_release_reports_parts_counted_the_fit_and_parts_written_on_one_bar(folder, tmp_path):
    plan = FolderReleasePlan(SCHEMA.name, "aim", 1.0, 1e-6, str(tmp_path / "out"), 2, aim_rounds=3)
    seen = Recorder()
    result = release_folder(plan, SCHEMA, folder, secure=False, seed=5, n_jobs=1, progress=seen)
    total = 3 + 3 + 2                                   # parts counted, AIM's planned rounds, parts written
    assert {t for _, t, _ in seen.calls} == {total}
    done = [d for d, _, _ in seen.calls]
    assert done == sorted(done) and done[-1] == total
    assert [m for m in seen.messages if "counted" in m] == [f"count pass 1: part {i} of 3 counted" for i in (1, 2, 3)]
    assert seen.messages[-2:] == ["synthetic part 1 of 2 written", "synthetic part 2 of 2 written"]
    assert any(m.startswith("AIM round 1") for m in seen.messages)
    assert sum(m.endswith(" fitted") for m in seen.messages) == 1
    assert sorted(p.rsplit("/", 1)[1] for p in result.paths) == ["part-00000.parquet", "part-00001.parquet"]
    assert not result.staging and not unfinished_folders(plan.out_folder)


def test_bar_stages_place_each_stage_after_the_ones_before():
    seen = Recorder()
    bar = ReleaseProgress(seen, n_parts=4, fit=10, out_parts=2)
    bar.stage("count")(2, 4, "x")
    bar.stage("fit")(5, 10, "y")
    bar.stage("write")(1, 2, "part 1 of 2")
    assert seen.calls == [(2, 16, "x"), (4 + 5, 16, "y"), (14 + 1, 16, "part 1 of 2")]
    assert ReleaseProgress(None, 1, 1, 1).stage("count") is None


def test_a_release_cancelled_while_writing_leaves_no_part_anywhere(folder, tmp_path):
    out = tmp_path / "out"
    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(out), 3)
    with pytest.raises(Cancelled):
        release_folder(plan, SCHEMA, folder, secure=False, seed=5, n_jobs=1,
                       progress=Recorder(stop_at="synthetic part 1 of 3"))
    assert not out.exists() and not unfinished_folders(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]


def test_unpublished_parts_wait_in_a_marked_folder_until_published(folder, tmp_path):
    out = tmp_path / "out"
    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(out), 2)
    result = release_folder(plan, SCHEMA, folder, secure=False, seed=5, n_jobs=1, publish_parts=False)
    assert not out.exists()
    (waiting,) = unfinished_folders(out)
    assert waiting.name.startswith("_out.unfinished-") and len(list(waiting.glob("*.parquet"))) == 2
    published = publish(result)
    assert sorted(p.name for p in out.glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    assert published.paths == [str(out / "part-00000.parquet"), str(out / "part-00001.parquet")]
    assert not unfinished_folders(out) and publish(published) is published
    # a killed job's unfinished folder (still marked) is removed by name
    again = release_folder(plan.replace(out_folder=str(tmp_path / "b")), SCHEMA, folder, secure=False, seed=5,
                           n_jobs=1, publish_parts=False)
    assert discard_unfinished(tmp_path / "b") == 1 and not unfinished_folders(tmp_path / "b")
    assert not (tmp_path / "b").exists() and again.staging


def test_a_release_whose_commit_fails_publishes_nothing(folder, tmp_path, monkeypatch):
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    key = declared_key(SCHEMA.name)
    ledger.set_no_cap(key)

    def refuse(*args, **kwargs):
        raise ValueError("the ledger could not be written")

    monkeypatch.setattr(ledger, "commit", refuse)
    out = tmp_path / "out"
    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(out), 2)
    with pytest.raises(ValueError, match="could not be written"):
        run_release(folder_copy_release(plan, SCHEMA, folder, page="command line", n_jobs=1), ledger).value()
    assert not out.exists() and not unfinished_folders(out)
    assert not ledger.releases(key, "release") and not ledger.reservations(key)


def test_counts_in_words_keep_two_significant_figures():
    from core.intake.folder import rough
    assert [rough(n) for n in (42, 240, 613, 19_874_301)] == ["42", "about 240", "about 610", "about 20,000,000"]


def test_the_check_and_the_release_are_estimated_from_parts_rows_and_columns(monkeypatch):
    from core.estimates import default_costs, estimate, merge_costs
    from core.intake.folder import FolderCheckPlan, FolderWork

    costs = merge_costs(default_costs(), {"folder": {"fixed": 1.0, "check": 0.5, "count": 0.1, "write": 0.2},
                                        "synthesis": {"mst": {"fixed": 2.0, "data": 0.0, "units": 0.0},
                                                      "parallel_efficiency": 1.0}})
    work = FolderWork(4, 200_000, 5, (2, 4, 3, 2, 5))          # 1,000,000 cells
    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")
    check = estimate(FolderCheckPlan("f", "fp", "schema", work), None, costs=costs, speed=1.0)
    assert check.raw_seconds == pytest.approx(1.0 + 0.5 * 10)
    assert check.work == "read and check 4 parts x about 200,000 rows x 5 columns once" and check.units == 4
    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, "/elsewhere/out", 1)
    release = estimate(plan, work, costs=costs, speed=1.0)
    assert release.raw_seconds == pytest.approx(1.0 + 0.1 * 10 + 2.0 + 0.2 * 10)
    assert release.work == ("count 4 parts x about 200,000 rows x 5 columns in one pass, fit MST (maximum spanning "
                            "tree), draw and write 1 synthetic part")
    # two workers share the parts counted (4 of them), not the one synthetic part written
    monkeypatch.setenv("DASHBOARD_N_JOBS", "2")
    assert estimate(plan, work, costs=costs, speed=1.0).raw_seconds == pytest.approx(1.0 + 0.5 + 2.0 + 2.0)
    assert estimate(plan.replace(out_parts=2), work, costs=costs, speed=1.0).raw_seconds == \
        pytest.approx(1.0 + 0.5 + 2.0 + 1.0)
    aim = estimate(plan.replace(method="aim", aim_rounds=7), work, costs=costs, speed=1.0)
    assert "fit AIM (adaptive, workload-aware) in up to 7 rounds" in aim.work
    assert any(s.startswith("MST instead of AIM takes") for s in aim.suggestions)


def test_the_page_jobs_can_run_in_a_process_of_their_own(folder, tmp_path):
    import pickle

    from core.intake import folder as folder_module
    from core.jobs import shippable
    from core.synthesis.folder_release import release_unpublished

    assert shippable(folder_module.check_folder) and shippable(release_unpublished)
    listing = list_folder(folder)
    assert pickle.loads(pickle.dumps((listing, SCHEMA))) == (listing, SCHEMA)
    plan = FolderReleasePlan(SCHEMA.name, "mst", 1.0, 1e-6, str(tmp_path / "out"), 2)
    result = release_folder(plan, SCHEMA, folder, secure=False, seed=5, n_jobs=1, publish_parts=False)
    back = pickle.loads(pickle.dumps(result))               # the job's answer crosses the pipe
    assert back.paths == result.paths and back.staging == result.staging and back.summary.equals(result.summary)


def test_the_command_line_prints_each_part_as_it_goes(folder, tmp_path, monkeypatch, capsys):
    import json

    from core.__main__ import main

    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")
    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA.to_dict()))
    assert main(["data", "declare-folder", str(folder), "--schema", str(schema_file)]) == 0
    assert capsys.readouterr().err.splitlines() == [f"[{i}/3] part {i} of 3 checked" for i in (1, 2, 3)]
    ProjectLedger().set_no_cap(declared_key(SCHEMA.name))
    assert main(["data", "release-folder", SCHEMA.name, "--out", str(tmp_path / "out"), "--parts", "2"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[:3] == [f"[{i}/6] count pass 1: part {i} of 3 counted" for i in (1, 2, 3)]
    assert lines[-2:] == ["[5/6] synthetic part 1 of 2 written", "[6/6] synthetic part 2 of 2 written"]
