"""Saved scenarios: pins stored by name in the project database and reopened unchanged."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd
import pytest

from core.compare import compare, snapshot_of_result
from core.contracts import Plan, Result
from core.scenarios import MAX_SCENARIO_NAME, ScenarioStore, check_scenario_name, get_scenario_store


@dataclass(frozen=True)
class ToyPlan(Plan):
    scale: float = 1.0


@dataclass
class ToyResult(Result):
    plan: ToyPlan

    def tables(self):
        return {"t": pd.DataFrame({"k": ["a", "=b"], "v": [0.1 * self.plan.scale, 1 / 3]})}

    def headline(self):
        return {"v": 0.1 * self.plan.scale}


def snap(scale: float, page: str = "Toy"):
    return snapshot_of_result(ToyResult(ToyPlan(scale)), page=page)


@pytest.fixture()
def store(tmp_path):
    return ScenarioStore(f"sqlite:///{tmp_path / 'scenarios.sqlite'}")


def test_save_list_and_reopen_bit_for_bit(store):
    pinned = snap(3.0)
    store.save("  baseline ", pinned)
    listing = store.listing("Toy")
    assert list(listing["name"]) == ["baseline"] and listing["plan_digest"][0] == pinned.plan_digest
    back = store.load("Toy", "baseline", label="B")
    assert back.label == "B" and back.plan_digest == pinned.plan_digest and back.headline == pinned.headline
    pd.testing.assert_frame_equal(back.tables["t"], pinned.tables["t"])
    assert set(compare(pinned, back).headline["direction"]) == {"same"}


def test_saving_a_name_again_replaces_it_only_when_asked(store):
    store.save("run", snap(1.0))
    store.save("run", snap(2.0), replace=True)
    assert len(store.listing("Toy")) == 1
    assert store.load("Toy", "run").headline["v"] == pytest.approx(0.2)


def test_saving_a_used_name_keeps_the_earlier_scenario(store):
    from core.scenarios import ScenarioExists
    store.save("run", snap(1.0))
    with pytest.raises(ScenarioExists, match="'run' is already saved for this page") as err:
        store.save(" run ", snap(2.0))
    assert isinstance(err.value, ValueError) and err.value.name == "run"
    assert len(store.listing("Toy")) == 1
    assert store.load("Toy", "run").headline["v"] == pytest.approx(0.1)     # the earlier one, unchanged
    again = dataclasses.replace(snap(1.0), report={**snap(1.0).report, "created_utc": "2000-01-01T00:00:00+00:00"})
    assert store.save("run", again) == "run"                               # the same report again: no-op
    assert store.load("Toy", "run").headline["v"] == pytest.approx(0.1)
    store.save("run (2)", snap(2.0))                                       # or keep both
    assert sorted(store.listing("Toy")["name"]) == ["run", "run (2)"]


def test_pages_keep_their_own_names(store):
    store.save("same", snap(1.0, page="Toy"))
    store.save("same", snap(2.0, page="Other"))
    assert list(store.listing("Toy")["name"]) == ["same"]
    assert store.load("Other", "same").headline["v"] == pytest.approx(0.2)
    assert store.listing("Nobody").empty
    assert list(store.listing("Toy", "ToyPlan")["name"]) == ["same"] and store.listing("Toy", "Other").empty


def test_remove_and_missing_names(store):
    store.save("gone", snap(1.0))
    assert store.remove("Toy", "gone") and not store.remove("Toy", "gone")
    with pytest.raises(ValueError, match="No scenario named"):
        store.load("Toy", "gone")


def test_survives_a_new_store_on_the_same_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'kept.sqlite'}"
    ScenarioStore(url).save("kept", snap(4.0))
    assert ScenarioStore(url).load("Toy", "kept").headline["v"] == pytest.approx(0.4)


def test_store_follows_the_database_url(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'env.sqlite'}")
    store = get_scenario_store()
    assert store is get_scenario_store()
    store.save("env", snap(1.0))
    assert (tmp_path / "env.sqlite").exists()


@pytest.mark.parametrize("bad", ["", "   ", "x" * (MAX_SCENARIO_NAME + 1), "tab\there", "bell\x07"])
def test_bad_names_are_refused_with_a_reason(bad, store):
    with pytest.raises(ValueError):
        check_scenario_name(bad)
    with pytest.raises(ValueError):
        store.save(bad, snap(1.0))


def test_a_deleted_database_file_is_a_plain_error(tmp_path):
    path = tmp_path / "gone.sqlite"
    store = ScenarioStore(f"sqlite:///{path}")
    store.save("first", snap(1.0))
    store.engine.dispose()
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"gone.sqlite{suffix}").unlink(missing_ok=True)
    with pytest.raises(ValueError, match="deleted"):
        store.save("second", snap(2.0))


def test_a_saved_scenario_reopens_as_a_report_that_reruns_and_reproduces(store, tmp_path):
    from core.__main__ import main
    from core.census import BudgetPlan, run
    from core.report import load_plan, report_json, tables_match

    result = run(BudgetPlan(preset="block-heavy"))
    store.save("block heavy", snapshot_of_result(result, page="Budget allocation"))
    back = store.load("Budget allocation", "block heavy")
    assert tables_match(back.report, run(load_plan(back.report)).tables()) == []
    path = tmp_path / "scenario.json"
    path.write_text(report_json(back.report))
    assert main(["reproduce", str(path), "--out", str(tmp_path / "out")]) == 0


def test_a_saved_scenario_names_the_curator_who_saved_it_and_older_tables_read_as_local(tmp_path):
    import sqlite3

    from core.database import LOCAL_CURATOR

    path = tmp_path / "old.sqlite"
    store = ScenarioStore(f"sqlite:///{path}")
    store.save("before", snap(1.0))
    store.dispose()
    with sqlite3.connect(path) as conn:                 # the table as an older version wrote it
        conn.execute("ALTER TABLE saved_scenarios DROP COLUMN curator")
    again = ScenarioStore(f"sqlite:///{path}")
    again.save("after", snap(2.0), curator="Ada")
    listing = again.listing("Toy").set_index("name")
    assert listing.loc["before", "curator"] == LOCAL_CURATOR and listing.loc["after", "curator"] == "Ada"
