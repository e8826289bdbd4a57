"""The Data step as the one intake, with AppTest: a declared data set comes back in a new browser session (a
reload) on every microdata page; a private estimate made while drafting is recorded under the data set the
file's rows end up in, and a second name for those rows is asked about before it could start a fresh budget;
the Privacy ledger page lists every "different population" answer and exports it."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import bytes_fingerprint
from tests.app.test_data_step import APP, NAME, RAW, _declare, _key, _upload
from tests.release_steps import confirm_release

SYNTHESIS = "tools/stratified_synthesis.py"
LEDGER = "tools/privacy_ledger.py"
BOX = f"population_{bytes_fingerprint(RAW)[:16]}"


@pytest.fixture(autouse=True)
def _own_places(tmp_path, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ds_cache"))
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")
    monkeypatch.setenv("DASHBOARD_DATA_DIR", str(tmp_path / "data"))


def _saved() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    _declare(_upload(at))
    at.button(key="ds_save").click().run()
    assert not at.exception, at.exception
    return at


def test_a_declared_data_set_comes_back_after_a_reload_on_the_synthesis_page():
    _saved()
    again = AppTest.from_file(APP, default_timeout=300).run()            # a reload: a new session, nothing in it
    again.switch_page(SYNTHESIS).run()
    assert not again.exception, again.exception
    box = again.selectbox(key="ss_dataset")
    assert f"declared:{NAME}" in box.options or any(NAME in o for o in box.options)
    assert not any("Upload" in o for o in box.options)                  # one intake: no page-local upload
    assert not [u for u in again.get("file_uploader") if "report" not in u.label.lower()]   # saved reports only
    box.set_value(f"declared:{NAME}").run()
    assert not again.exception, again.exception
    assert not again.error
    assert again.session_state["declared_data"][NAME]["raw"] == RAW      # the kept file, read back from the server


def test_kept_data_sets_are_each_curators_own(monkeypatch):
    from dashboard.components import access

    _saved()                                                          # saved by "test curator"
    monkeypatch.setattr(access, "current_role", lambda: access.Role("another curator"))
    other = AppTest.from_file(APP, default_timeout=300).run()
    other.switch_page(SYNTHESIS).run()
    assert not other.exception, other.exception
    assert f"declared:{NAME}" not in other.selectbox(key="ss_dataset").options


def test_a_page_without_a_declared_data_set_points_to_the_data_step():
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page(SYNTHESIS).run()
    assert not at.exception
    assert not any("Upload" in o for o in at.selectbox(key="ss_dataset").options)
    assert not [u for u in at.get("file_uploader") if "report" not in u.label.lower()]
    assert any("declared once on the **Data step**" in c.value for c in at.caption)


def test_an_estimate_while_drafting_is_recorded_where_the_rows_end_up_and_a_new_name_is_asked_about():
    """The attacker drafts under one name, spends on a private estimate, then saves the same rows under another
    name: the spend is on the data set the rows belong to, and the new name cannot start at zero without a
    recorded "different population" answer."""
    from core.intake.store import DataSetStore
    from core.privacy.project_ledger import ProjectLedger, compose

    at = AppTest.from_file(APP, default_timeout=300).run()
    _upload(at)
    at.text_input(key="ds_name").input("Draft").run()
    at.selectbox(key="ds_est_column").set_value("age: bounds").run()
    at.number_input(key="ds_est_epsilon").set_value(3.5).run()          # enough values at this epsilon
    confirm_release(at, "ds_estimate")
    assert not at.exception, at.exception
    ledger = ProjectLedger()
    assert compose(ledger.releases("dataset:Draft", "release")).epsilon == pytest.approx(3.5)
    store = DataSetStore()
    assert "Draft" in store.names() and bytes_fingerprint(RAW) in set(store.versions("Draft")["fingerprint"])
    _declare(at)                                                       # renames the data set to NAME
    at.button(key="ds_save").click().run()
    assert not at.exception, at.exception
    assert NAME not in store.names()                                   # nothing saved before the answer
    assert any("Is this the same population" in w.value for w in at.warning)
    at.radio(key=f"{BOX}_choice").set_value("Draft").run()
    at.button(key=f"{BOX}_record").click().run()
    assert not at.exception, at.exception
    assert NAME not in store.names()                                   # filed under the data set that spent
    assert ledger.releases(f"dataset:{NAME}") == ()
    assert compose(ledger.releases("dataset:Draft", "release")).epsilon == pytest.approx(3.5)
    assert at.checkbox(key=_key(at, "age", "has_bounds")).value         # the estimate stayed in the declaration


@pytest.fixture()
def downloads(monkeypatch):
    """What each download button drawn from a column holds, by key (the button's data as the page made it)."""
    from streamlit.elements.widgets.button import ButtonMixin
    held: dict = {}
    original = ButtonMixin.download_button

    def keep(self, label, data, *args, **kwargs):
        held[kwargs.get("key")] = data
        return original(self, label, data, *args, **kwargs)

    monkeypatch.setattr(ButtonMixin, "download_button", keep)
    return held


def test_a_different_population_answer_is_on_the_ledger_page_and_in_its_export(downloads):
    at = _saved()
    at.text_input(key="ds_name").input("Second county").run()
    at.button(key="ds_save").click().run()
    assert any("Is this the same population" in w.value for w in at.warning)
    at.radio(key=f"{BOX}_choice").set_value("__new_population__").run()
    at.button(key=f"{BOX}_record").click().run()
    assert not at.exception, at.exception
    from core.privacy.project_ledger import ProjectLedger
    ProjectLedger().set_no_cap(f"dataset:{NAME}")                       # listed on the page by its cap decision
    at.switch_page(LEDGER).run()
    at.selectbox(key="pl_data").set_value("__all__").run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "compared_name" in d.value.columns)
    assert list(zip(table["new_name"], table["compared_name"], table["relation"], table["curator"])) == [
        ("Second county", NAME, "same", "test curator")]      # the signed-in curator (tests/app/conftest.py)
    assert table["answered_utc"].str.len().min() > 0
    exported = json.loads(downloads["pl_answers_json"])
    assert [(r["new_name"], r["compared_name"], r["curator"]) for r in exported] == [
        ("Second county", NAME, "test curator")]
    assert all("relation" not in r for r in exported)                 # computed from private rows: screen only
    assert "Second county" in downloads["pl_answers_csv"] and "same" not in downloads["pl_answers_csv"]
    at.selectbox(key="pl_data").set_value(f"dataset:{NAME}").run()
    assert not at.exception, at.exception
    ledger_export = json.loads(downloads["pl_json"])
    assert [(r["new_name"], r["answered_utc"]) for r in ledger_export["different_population_answers"]] == [
        ("Second county", table["answered_utc"][0])]


def test_the_same_parts_through_a_symlinked_folder_under_a_new_name_are_asked_about(traced_queue, tmp_path,
                                                                                    monkeypatch):
    """A folder set saved once; the same parts named through a symlinked folder and declared under a new name
    are recognised by their rows (checked in the same pass as the problems) and filed under the first."""
    import numpy as np
    import pandas as pd

    from core.intake.store import DataSetStore
    from tests.app.test_data_step_folder import FOLDER, REGION, SEX, STEP, _key as folder_key

    monkeypatch.setenv("DASHBOARD_N_JOBS", "1")
    parts = tmp_path / "parts"
    parts.mkdir()
    rng = np.random.default_rng(8)
    for i in range(2):
        pd.DataFrame({"sex": rng.choice(SEX, 60), "region": rng.choice(REGION, 60),
                      "id": [f"r{i}-{j}" for j in range(60)]}).astype(object).to_parquet(parts / f"p{i}.parquet")
    linked = tmp_path / "linked"
    linked.symlink_to(parts, target_is_directory=True)

    def declare_and_save(path, name) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=300).run()
        at.switch_page(STEP).run()
        at.radio(key="ds_source").set_value(FOLDER).run()
        at.text_input(key="ds_folder").input(str(path)).run()
        at.text_input(key="ds_name").input(name).run()
        at.multiselect(key=folder_key(at, "sex", "categories")).set_value(SEX)
        at.multiselect(key=folder_key(at, "region", "categories")).set_value(REGION)
        at.selectbox(key=folder_key(at, "id", "role")).set_value("leave_out")
        at.run()
        at.button(key="ds_folder_check").click().run()
        at.button(key="ds_folder_save").click().run()
        assert not at.exception, at.exception
        return at

    declare_and_save(parts, "Regional parts")
    store = DataSetStore()
    assert store.names() == ["Regional parts"]
    at = declare_and_save(linked, "Regional parts, again")
    assert store.names() == ["Regional parts"]                         # nothing saved before the answer
    assert any("Is this the same population" in w.value for w in at.warning)
    box = next(r.key for r in at.radio if (r.key or "").endswith("_choice"))
    at.radio(key=box).set_value("Regional parts").run()
    at.button(key=box.replace("_choice", "_record")).click().run()
    assert not at.exception, at.exception
    assert store.names() == ["Regional parts"]                         # filed under the data set of those rows


def test_a_kept_file_is_removed_from_the_server_and_its_rows_keep_their_budget():
    from core.intake.store import DataSetStore

    _saved()
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("tools/data_step.py").run()
    at.selectbox(key="ds_reopen").set_value(NAME).run()                 # after a reload: no upload needed
    assert not at.exception, at.exception
    assert at.text_input(key="ds_name").value == NAME
    at.button(key="ds_remove_kept").click().run()
    assert not at.exception, at.exception
    store = DataSetStore()
    assert store.kept(NAME) is None and NAME in store.names()          # the file goes, the declaration stays
    assert NAME in store.sketches()                                    # its rows are still recognised
    fresh = AppTest.from_file(APP, default_timeout=300).run()
    fresh.switch_page(SYNTHESIS).run()
    assert not fresh.exception and f"declared:{NAME}" not in fresh.selectbox(key="ss_dataset").options
