"""The Data step with AppTest: the messy county extract uploaded once, every problem listed at once, merges and
public information declared with widgets, saved, then offered, chosen and run on every microdata page."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.contracts import bytes_fingerprint
from core.intake import DataSchema, MISSING_LABEL, read_table_bytes

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
STEP = "tools/data_step.py"
FIXTURE = ROOT / "tests" / "fixtures" / "messy_county.csv"
RAW = FIXTURE.read_bytes()
NAME = "County extract"
CATEGORIES = {
    "sex": ["Female", "Male"],
    "education": ["Less than HS", "High school", "Some college", "Bachelor", "Graduate"],
    "county": ["Adams", "Brown", "Clark", "Dane"],
    "employed": ["Yes", "No"],
    "household_size": ["1", "2", "3", "4", "5", "6"],
    "race": ["White", "Black", "Asian", "Other"],
}
BOUNDS = {"age": (16.0, 100.0), "income": (0.0, 300_000.0), "hours_per_week": (0.0, 100.0)}


@pytest.fixture(autouse=True)
def _own_places(tmp_path, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ds_cache"))
    monkeypatch.setenv("DASHBOARD_DB_URL", f"sqlite:///{tmp_path / 'project.sqlite'}")


def _key(at, column: str, field: str) -> str:
    return f"ds{at.session_state['ds_state']['gen']}_{column}_{field}"


def _problems(at):
    return next(d.value for d in at.dataframe if "what to do" in d.value.columns)


def _upload(at):
    at.switch_page(STEP).run()
    at.file_uploader(key="ds_file").set_value(("messy_county.csv", RAW, "text/csv"))
    return at.run()


def _declare(at):
    """Tick every suggested merge, declare the public categories and bounds, name the data set."""
    at.text_input(key="ds_name").input(NAME).run()
    for box in at.checkbox:
        if "_merge_" in (box.key or ""):
            box.check()
    at.run()
    for column, cats in CATEGORIES.items():
        at.multiselect(key=_key(at, column, "categories")).set_value(cats)
    at.run()
    for column, (low, high) in BOUNDS.items():
        at.checkbox(key=_key(at, column, "has_bounds")).check()
        at.run()
        at.number_input(key=_key(at, column, "low")).set_value(low)
        at.number_input(key=_key(at, column, "high")).set_value(high)
    return at.run()


@pytest.fixture
def saved():
    at = AppTest.from_file(APP, default_timeout=300).run()
    _upload(at)
    assert not at.exception
    _declare(at)
    assert not at.exception, at.exception
    at.button(key="ds_save").click().run()
    assert not at.exception
    return at


def test_the_messy_file_lists_every_problem_at_once():
    at = AppTest.from_file(APP, default_timeout=300).run()
    _upload(at)
    assert not at.exception and not at.error
    table = _problems(at)
    # one upload, one run: problems of at least eight different columns, each with what to do
    assert {"person_id", "sex", "age", "education", "income", "county", "race", "hours_per_week"} <= set(table["column"])
    assert table["what to do"].str.len().gt(0).all()
    assert table["what"].str.contains("differ from another only in letter case").any()   # female / FEMALE / Female
    assert table["what"].str.contains("more than 1 row").any()                            # P00007 has several rows
    assert table["what"].str.contains("missing values; those rows will be dropped").any()  # blank / unknown ages
    # the profile is on screen, and says it stays there
    profile = next(d.value for d in at.dataframe if "looks like" in d.value.columns)
    assert len(profile) == 10
    assert any("never exported" in i.value for i in at.info)
    # merges are suggestions: none applied before the curator ticks them
    merges = [b for b in at.checkbox if "_merge_" in (b.key or "")]
    assert {b.label for b in merges} >= {"'F' is 'Female'", "'female' is 'Female'", "'M' is 'Male'", "'Y' is 'Yes'"}
    assert not any(b.value for b in merges)


def test_merges_and_widget_declarations_make_a_clean_schema_that_is_saved(saved):
    at = saved
    table = _problems(at)
    assert not table["what"].str.contains("letter case").any()           # the merges took
    assert not table["what"].str.contains("no public").any()             # categories and bounds declared
    assert not (table["severity"] == "blocks a run").any()
    declared = at.session_state["declared_data"][NAME]
    schema = declared["schema"]
    assert isinstance(schema, DataSchema) and schema.name == NAME and schema.person_id == "person_id"
    assert schema.column("sex").merges == (("F", "Female"), ("female", "Female"), ("M", "Male"))
    assert schema.column("sex").categories == ("Female", "Male")
    assert schema.column("income").bounds == (0.0, 300_000.0) and schema.column("income").parse_numbers
    assert schema.max_rows_per_person == 1 and schema.file_suffix == ".csv"
    assert at.session_state["data_choice"] == f"declared:{NAME}"
    # saved in the project database with the file's version
    from core.intake.store import DataSetStore
    store = DataSetStore()
    assert store.get(NAME) == schema
    assert store.find_by_fingerprint(bytes_fingerprint(RAW)) == NAME
    assert any("Saved" in s.value for s in at.success)
    # the declaration that is exported and saved holds no count of the data: its JSON round-trips the schema
    assert DataSchema.from_dict(json.loads(json.dumps(schema.to_dict()))) == schema
    assert "3,5" not in json.dumps(schema.to_dict()) and "rows" not in schema.to_dict()


def test_the_cleaned_table_is_what_the_declaration_says(saved):
    schema = saved.session_state["declared_data"][NAME]["schema"]
    from core.datasets import load_microdata
    from dashboard.components.dataset_picker import declared_ref
    frame = load_microdata(declared_ref(schema, RAW), RAW)
    assert list(frame["sex"].cat.categories) == ["Female", "Male"]
    assert list(frame["education"].cat.categories) == [*CATEGORIES["education"], MISSING_LABEL]
    assert frame["income"].between(0, 300_000).all() and frame["age"].between(16, 100).all()
    assert frame["person_id"].is_unique                                 # one row per person
    raw_rows = len(read_table_bytes(RAW, "messy_county.csv"))
    assert len(frame) < raw_rows                                         # rows without age or income dropped


def test_a_missing_policy_left_undecided_blocks_and_the_picker_says_why(saved):
    at = saved
    at.selectbox(key=_key(at, "age", "missing")).set_value("undecided").run()
    assert not at.exception
    table = _problems(at)
    assert (table.loc[table["severity"] == "blocks a run", "column"] == "age").any()
    assert at.button(key="ds_save").disabled
    # put the half-declared schema in the session as if it were saved: no page may run on it
    schema = at.session_state["declared_data"][NAME]["schema"]
    blocked = schema.replace(columns=tuple(c if c.name != "age" else type(c)(c.name, "number", bounds=c.bounds)
                                           for c in schema.columns))
    at.session_state["declared_data"] = {NAME: {"schema": blocked, "raw": RAW, "file_name": "messy_county.csv"}}
    at.switch_page("tools/stratified_synthesis.py").run()
    assert not at.exception
    assert f"declared:{NAME}" not in at.selectbox(key="ss_dataset").options
    assert any("block a run" in c.value and NAME in c.value for c in at.caption)


CHOICE = f"declared:{NAME}"


def _schema(at):
    return at.session_state["declared_data"][NAME]["schema"]


def test_stratified_synthesis_offers_chooses_and_runs_the_declared_data_set(saved):
    at = saved
    at.switch_page("tools/stratified_synthesis.py").run()          # the choice followed the curator here
    assert not at.exception, at.exception
    assert at.selectbox(key="ss_dataset").value == CHOICE
    assert not at.error
    assert any("public by the declaration" in c.value for c in at.caption)
    assert any("after the declared cleaning" in c.value for c in at.caption)
    at.text_input(key="ss_epsilons").input("1").run()
    at.number_input(key="ss_seeds").set_value(1).run()
    at.button(key="ss_run").click().run()
    assert not at.exception, at.exception
    assert not at.error
    plan = at.session_state["ss_plan"]
    assert plan.data.schema == _schema(at) and plan.data.fingerprint == bytes_fingerprint(RAW)
    assert plan.sweep is not None and {"age", "income", "hours_per_week"} <= set(plan.bounds)
    # the mean release reads the declared range of a numeric column, not a typed one, and is a real release
    # booked on the declared data set in the ledger
    assert any("declared public range" in c.value for c in at.caption)
    from core.privacy.project_ledger import ProjectLedger
    from tests.release_steps import confirm_release
    confirm_release(at, "ss_mr_release")
    assert not at.exception, at.exception
    released = ProjectLedger().releases(f"dataset:{NAME}", "release")
    assert [r.action for r in released] == ["stratified mean release"]


def test_coherence_audit_offers_chooses_and_audits_the_declared_data_set(saved):
    at = saved
    at.switch_page("tools/coherence_audit.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="coh_dataset").value == CHOICE
    assert [u.key for u in at.file_uploader] == ["coh__report_file"]      # nothing asks for the data file again
    at.number_input(key="coh_trials").set_value(4)
    at.number_input(key="coh_rows").set_value(1000)
    at.button(key="coh_run").click().run()
    assert not at.exception, at.exception
    plan = at.session_state["coh_plan"]
    assert plan.data.schema == _schema(at) and plan.data.fingerprint == bytes_fingerprint(RAW)
    assert any(m.label.startswith("Verdict: ") for m in at.metric)


def test_group_fairness_ranks_the_declared_data_set(saved):
    at = saved
    at.switch_page("tools/group_fairness.py").run()
    assert not at.exception, at.exception
    at.select_slider(key="gf_lx_rounds").set_value(100)
    at.slider(key="gf_lx_levels").set_value(2)
    at.run()
    assert at.selectbox(key="gf_rk_source").value == CHOICE
    p = f"gf_rk_{CHOICE}"
    assert "person_id" not in at.multiselect(key=f"{p}_attributes").options   # the unit of protection is no attribute
    at.multiselect(key=f"{p}_attributes").set_value(["sex"]).run()
    at.multiselect(key=f"{p}_mediators").set_value(["hours_per_week"]).run()
    at.selectbox(key=f"{p}_outcome").select("income")
    at.multiselect(key=f"{p}_ks").set_value([20, 50]).run()
    assert not at.exception, at.exception
    assert not at.error
    plan = at.session_state["gf_plan"]
    assert plan.data.schema == _schema(at) and plan.ranking.outcome == "income"
    assert "Utility loss at k = 50" in {m.label: m.value for m in at.metric}


def test_missing_bounds_and_categories_are_estimated_privately_as_recorded_releases():
    from core.intake.estimate import required_values
    from core.privacy.project_ledger import ProjectLedger, compose
    from tests.release_steps import confirm_release

    at = AppTest.from_file(APP, default_timeout=300).run()
    _upload(at)
    at.text_input(key="ds_name").input(NAME).run()
    assert at.selectbox(key="ds_est_column").options[:3] == ["sex: categories", "age: bounds", "education: categories"]
    at.selectbox(key="ds_est_column").set_value("age: bounds").run()
    # no sign or limit is declared for the curator
    assert at.number_input(key="ds_est_floor").value is None and at.number_input(key="ds_est_ceiling").value is None
    at.number_input(key="ds_est_epsilon").set_value(0.5).run()
    # about 3,400 ages against about 19,700 needed at epsilon 0.5: the requirement is shown, nothing is offered
    need = required_values(0.5)
    assert any(f"at least {need:,} values" in c.value and "This column has fewer" in c.value for c in at.caption)
    assert at.button(key="ds_estimate").disabled
    assert any("raise the epsilon, or declare the bounds" in c.value for c in at.caption)
    assert not ProjectLedger().releases(f"dataset:{NAME}", "release")
    at.number_input(key="ds_est_epsilon").set_value(3.5).run()                     # needs 2,811: enough
    assert not at.button(key="ds_estimate").disabled
    confirm_release(at, "ds_estimate")
    assert not at.exception, at.exception
    assert at.checkbox(key=_key(at, "age", "has_bounds")).value                   # the estimate filled the widgets
    low, high = (at.number_input(key=_key(at, "age", f)).value for f in ("low", "high"))
    assert 0 <= low <= 25 and 80 <= high <= 125                                   # ages 18 to 90 in the file
    assert any("Estimated privately and recorded in the ledger" in s.value for s in at.success)
    assert "age: bounds" not in at.selectbox(key="ds_est_column").options
    at.selectbox(key="ds_est_column").set_value("race: categories").run()
    at.number_input(key="ds_est_epsilon").set_value(0.5).run()
    confirm_release(at, "ds_estimate")
    assert not at.exception, at.exception
    assert set(at.multiselect(key=_key(at, "race", "categories")).value) <= {"White", "Black", "Asian", "Other"}
    assert "White" in at.multiselect(key=_key(at, "race", "categories")).value      # the largest group clears it
    ledger = ProjectLedger()
    releases = ledger.releases(f"dataset:{NAME}", "release")
    assert [r.action for r in releases] == ["private estimate of public information"] * 2
    assert compose(releases).epsilon == pytest.approx(4.0)                        # 3.5 + 0.5, pure epsilon


def test_a_new_name_for_a_budgeted_population_is_asked_about_and_filed_under_it(saved):
    """A re-export (a row fewer) declared under a new name is close to the capped data set: the page asks
    before saving, and "the same population" files the file as a version of it, so its budget goes on."""
    from core.intake.store import DataSetStore
    from core.privacy.project_ledger import Cap, ProjectLedger

    at = saved
    ProjectLedger().set_cap(f"dataset:{NAME}", Cap(2.0, "epsilon", 1e-6))
    again = RAW[: RAW.rstrip(b"\n").rfind(b"\n") + 1]                      # the same file, its last row dropped
    at.file_uploader(key="ds_file").set_value(("county_again.csv", again, "text/csv")).run()
    assert at.text_input(key="ds_name").value == "county_again"
    _declare(at.text_input(key="ds_name").input("County again").run())
    at.text_input(key="ds_name").input("County again").run()
    at.button(key="ds_save").click().run()
    assert not at.exception, at.exception
    store = DataSetStore()
    assert "County again" not in store.names()                           # nothing saved before the answer
    box = f"population_{bytes_fingerprint(again)[:16]}"
    at.radio(key=f"{box}_choice").set_value(NAME).run()
    at.button(key=f"{box}_record").click().run()
    assert not at.exception, at.exception
    assert "County again" not in store.names()
    assert set(store.versions(NAME)["fingerprint"]) == {bytes_fingerprint(RAW), bytes_fingerprint(again)}
    assert at.session_state["declared_data"][NAME]["raw"] == again
    assert any("the same population as" in s.value for s in at.success)


def test_a_declaration_exported_as_json_is_opened_again_into_the_widgets(saved):
    schema = _schema(saved)
    text = json.dumps(schema.to_dict())
    at = AppTest.from_file(APP, default_timeout=300).run()              # another browser session
    _upload(at)
    at.file_uploader(key="ds_import").set_value(("county.schema.json", text.encode(), "application/json")).run()
    assert not at.exception, at.exception
    assert at.text_input(key="ds_name").value == NAME
    assert all(b.value for b in at.checkbox if "_merge_" in (b.key or ""))        # its merges, ticked
    assert at.multiselect(key=_key(at, "race", "categories")).value == CATEGORIES["race"]
    assert at.number_input(key=_key(at, "income", "high")).value == BOUNDS["income"][1]
    at.button(key="ds_save").click().run()                                # the same declaration: saved as is
    assert not at.exception, at.exception
    assert at.session_state["declared_data"][NAME]["schema"] == schema
    # a file that is no declaration is refused with a message, and the widgets stay as they were
    at.file_uploader(key="ds_import").set_value(("bad.json", b'{"columns": 3}', "application/json")).run()
    assert not at.exception
    assert any("bad.json" in e.value.replace("\\", "") for e in at.error)     # the file's name, escaped
    assert at.text_input(key="ds_name").value == NAME


def test_the_unit_of_protection_is_declared_with_its_widgets():
    at = AppTest.from_file(APP, default_timeout=300).run()
    _upload(at)
    gen = at.session_state["ds_state"]["gen"]
    assert at.selectbox(key=_key(at, "person_id", "role")).value == "person_id"
    assert at.number_input(key=f"ds{gen}_max_rows").value == 1                     # one row per person by default
    assert _problems(at)["what"].str.contains("more than 1 row").any()
    at.number_input(key=f"ds{gen}_max_rows").set_value(4).run()
    assert not at.exception
    assert not _problems(at)["what"].str.contains("more than").any()             # nobody has more than 4 rows
    # without a person id every row is one person, and the limit cannot be set
    at.selectbox(key=_key(at, "person_id", "role")).set_value("leave_out").run()
    assert not at.exception and not at.error
    assert at.number_input(key=f"ds{gen}_max_rows").disabled
    assert "person_id" not in set(_problems(at)["column"]) or \
        not _problems(at)["what"].str.contains("more than").any()


def test_a_declared_data_set_missing_from_the_session_is_named_not_silently_replaced():
    at = AppTest.from_file(str(ROOT / "dashboard" / "tools" / "coherence_audit.py"), default_timeout=300)
    at.session_state["coh_dataset"] = "declared:Elsewhere"      # as an opened report on a declared data set asks
    at.run()
    assert not at.exception
    assert any("Elsewhere" in i.value and "is not declared" in i.value for i in at.info)
    assert any("declared once on the **Data step**" in c.value for c in at.caption)   # where to declare it


def test_a_saved_plan_on_a_declared_data_set_reopens_on_that_data_set():
    from core.contracts import DataRef
    from core.intake import draft_schema
    from core.synthesis import SynthesisPlan
    from dashboard.components.dataset_picker import choice_of
    from dashboard.components.synthesis_widgets import plan_to_widgets

    schema = draft_schema(read_table_bytes(RAW, "messy_county.csv"), NAME)
    ref = DataRef("upload", bytes_fingerprint(RAW), schema=schema)
    plan = SynthesisPlan(data=ref, columns=("sex", "county"), strata=("sex",), target=None,
                         domain_declared_public=True)
    assert plan_to_widgets(plan)["ss_dataset"] == CHOICE            # not the plain upload's uploader
    assert plan_to_widgets(plan.replace(data=DataRef("cps")))["ss_dataset"] == "cps"
    assert choice_of(DataRef("upload", bytes_fingerprint(RAW))) == "upload"
