"""Session store: concurrency, crash safety, idempotency, access rules, export/import, bad input."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import create_engine, text

from core.contracts import make_rng
from core.fairness.elicitation import SessionConfig, aggregate_constraints, sample_assignment, stakeholder_seed
from core.fairness.store import (MAX_REASON_LENGTH, SCHEMA_VERSION, WITHDRAWN, ElicitationStore,
                                 constraint_set_hash, frontier_summary, normalise_url, parse_export)
from core.fairness.store.devices import new_device_token
from tests.unit.ledger_support import database_url

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick

REPO = Path(__file__).resolve().parents[2]
FIFTY = SessionConfig(n_core=2, n_random=48, n_repeat=0, seed=3)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """Every test a database of its own: a SQLite file, or a PostgreSQL database when `make test` provides a
    server (DASHBOARD_TEST_PG_URL; without it only SQLite runs). Not the ledger's file name: a test opens a
    ledger beside the store."""
    yield from database_url(request.param, tmp_path, "sessions.sqlite")


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


@pytest.fixture
def store(db):
    s = ElicitationStore(db)
    yield s
    s.dispose()


def eid() -> str:
    return uuid.uuid4().hex


def test_schema_is_versioned_and_sqlite_runs_in_wal(store, db):
    assert store.schema_version() == SCHEMA_VERSION
    assert store.engine.dialect.name == ("sqlite" if is_sqlite(db) else "postgresql")
    if is_sqlite(db):
        with sqlite3.connect(db.split("///", 1)[1]) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Reopening the same file keeps one version row.
    again = ElicitationStore(db)
    assert again.schema_version() == SCHEMA_VERSION
    again.dispose()


def test_twenty_concurrent_writers_lose_and_duplicate_nothing(store):
    created = store.create_session(FIFTY, "load")
    logins = [store.join(created.join_code, f"person {k}") for k in range(20)]
    answers = {login.token: ["same" if (p * 7 + k) % 3 else "differ" for p in range(50)]
               for k, login in enumerate(logins)}
    errors, start = [], threading.Barrier(20)

    def writer(token):
        try:
            start.wait()
            for position, response in enumerate(answers[token]):
                event = eid()
                assert store.record_answer(token, position, response, event) is True
                if position % 10 == 0:  # a re-delivered click must be a no-op
                    assert store.record_answer(token, position, response, event) is False
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(login.token,)) for login in logins]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    log = store.event_log(created.session_id, created.facilitator_key)
    assert len(log) == 20 * 50
    assert log["event_id"].is_unique
    assert (log["revision"] == 1).all()
    for login in logins:
        mine = store.my_answers(login.token)
        assert list(mine["position"]) == list(range(50))
        assert list(mine["response"]) == answers[login.token]
        assert store.next_position(login.token) is None
    progress = store.progress(created.session_id, created.facilitator_key)
    assert (progress["answered"] == 50).all() and len(progress) == 20


CHILD = textwrap.dedent("""
    import sys, time, uuid
    sys.path.insert(0, {repo!r})
    from sqlalchemy import insert
    from core.fairness.store import ElicitationStore, judgments
    store = ElicitationStore({url!r})
    token, n_before = sys.argv[1], int(sys.argv[2])
    for p in range(n_before):
        store.record_answer(token, p, "same", uuid.uuid4().hex)
    me = store.resume(token)
    with store.write_tx() as conn:         # a transaction left open when the process dies
        conn.execute(insert(judgments).values(
            event_id=uuid.uuid4().hex, session_id=me.session_id, stakeholder_id=me.stakeholder_id,
            position=n_before, revision=1, response="differ", created_at="x"))
        print("MIDWAY", flush=True)
        time.sleep(60)
""")


def test_killed_writer_leaves_consistent_database_and_stakeholder_resumes(store, db, tmp_path):
    created = store.create_session(FIFTY, "crash")
    login = store.join(created.join_code, "Resumer")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), url=db))
    child = subprocess.Popen([sys.executable, str(script), login.token, "7"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "MIDWAY"
    finally:
        child.kill()
        child.wait(timeout=30)
    if is_sqlite(db):
        with sqlite3.connect(db.split("///", 1)[1]) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # The seven committed answers survive; the open transaction left nothing behind.
    mine = store.my_answers(login.token)
    assert list(mine["position"]) == list(range(7))
    assert len(store.event_log(created.session_id, created.facilitator_key)) == 7
    # Resume in a fresh "browser session": same cards, first open card, and the lock is free.
    fresh = ElicitationStore(db)
    assert fresh.resume(login.token).pseudonym == "Resumer"
    assert fresh.next_position(login.token) == 7
    assert fresh.record_answer(login.token, 7, "differ", eid())
    assert fresh.my_assignment(login.token)[["a", "b"]].equals(store.my_assignment(login.token)[["a", "b"]])
    fresh.dispose()


def test_idempotency_double_click_tabs_undo_and_reanswer(store):
    created = store.create_session(SessionConfig(n_core=3, n_random=3, n_repeat=1), "idem")
    me = store.join(created.join_code, "Ann")
    event = eid()
    assert store.record_answer(me.token, 0, "same", event)
    assert not store.record_answer(me.token, 0, "same", event)          # double click
    assert not store.record_answer(me.token, 0, "differ", event)        # same card, other button
    assert store.record_answer(me.token, 1, "differ", eid())           # tab one
    assert store.record_answer(me.token, 1, "same", eid())             # tab two changes it
    assert store.record_answer(me.token, 2, "same", eid())
    assert store.record_answer(me.token, 2, "retract", eid())          # undo empties the card
    live = store.my_assignment(me.token).set_index("position")["response"]
    assert live[0] == "same" and live[1] == "same" and live[2] is None
    assert store.next_position(me.token) == 2
    assert store.record_answer(me.token, 2, "differ", eid())           # re-answer after undo
    log = store.event_log(created.session_id, created.facilitator_key)
    assert list(log.loc[log["position"] == 2, "revision"]) == [1, 2, 3]
    assert store.my_assignment(me.token).set_index("position")["response"][2] == "differ"
    # Assignment drawn once: re-reading never changes which pair a card shows.
    assert store.my_assignment(me.token)[["a", "b"]].equals(store.my_assignment(me.token)[["a", "b"]])


def test_core_pairs_shared_and_repeats_stored(store):
    cfg = SessionConfig(n_core=4, n_random=6, n_repeat=2, seed=9)
    created = store.create_session(cfg, "core")
    plans = [store.my_assignment(store.join(created.join_code, n).token) for n in ("A", "B", "C")]
    cores = [{tuple(sorted(p)) for p in plan.loc[plan["kind"] == "core", ["a", "b"]].to_numpy()} for plan in plans]
    assert cores[0] == cores[1] == cores[2] and len(cores[0]) == 4
    for plan in plans:
        assert len(plan) == 12 and (plan["kind"] == "repeat").sum() == 2
    randoms = [set(map(tuple, p.loc[p["kind"] == "random", ["a", "b"]].to_numpy())) for p in plans]
    assert randoms[0] != randoms[1]


def test_access_rules(store):
    one = store.create_session(SessionConfig(n_core=2, n_random=2, n_repeat=0), "one")
    two = store.create_session(SessionConfig(n_core=2, n_random=2, n_repeat=0), "two")
    ann, bob = store.join(one.join_code, "Ann"), store.join(one.join_code, "Bob")
    store.record_answer(ann.token, 0, "same", eid())
    store.record_answer(bob.token, 1, "differ", eid())
    # A stakeholder sees only their own answers.
    assert list(store.my_answers(bob.token)["position"]) == [1]
    assert list(store.my_answers(ann.token)["response"]) == ["same"]
    # Results and others' answers need the session's facilitator key.
    for bad in (ann.token, two.facilitator_key, one.facilitator_key + "x"):
        with pytest.raises(PermissionError, match="facilitator key"):
            store.judgments(one.session_id, bad)
        with pytest.raises(PermissionError, match="facilitator key"):
            store.progress(one.session_id, bad)
        with pytest.raises(PermissionError):
            store.export_session(one.session_id, bad)
    with pytest.raises(ValueError, match="facilitator key"):
        store.judgments(one.session_id, "")
    with pytest.raises(PermissionError, match="facilitator key"):
        store.open_session(one.join_code, two.facilitator_key)
    with pytest.raises(PermissionError, match="resume code"):
        store.record_answer("not-a-token", 0, "same", eid())
    with pytest.raises(PermissionError, match="resume code"):
        store.my_answers(one.facilitator_key)
    assert len(store.judgments(one.session_id, one.facilitator_key)) == 2
    # Reasons are for the facilitator only: a stakeholder's own view carries none, and the run
    # history needs the key like every other facilitator read or write.
    store.record_answer(bob.token, 0, "same", eid(), reason="Bob's private reason")
    assert "reason" not in store.my_assignment(ann.token).columns
    assert "Bob's private reason" not in store.my_answers(bob.token).to_string()
    assert list(store.judgments(one.session_id, one.facilitator_key)["reason"].dropna()) == ["Bob's private reason"]
    run = _run_args(store, one)
    for bad in (ann.token, two.facilitator_key):
        with pytest.raises(PermissionError, match="facilitator key"):
            store.fit_runs(one.session_id, bad)
        with pytest.raises(PermissionError, match="facilitator key"):
            store.record_fit_run(one.session_id, bad, **run)
    assert store.fit_runs(one.session_id, one.facilitator_key) == []
    # Keys and tokens are never stored in clear.
    raw = json.dumps(store.export_session(one.session_id, one.facilitator_key))
    with store.engine.connect() as conn:
        dump = " ".join(str(r) for t in ("sessions", "stakeholders") for r in conn.exec_driver_sql(f"SELECT * FROM {t}"))
    for secret in (one.facilitator_key, ann.token, bob.token):
        assert secret not in dump and secret not in raw


def test_malformed_input_is_rejected_with_clear_messages(store):
    created = store.create_session(SessionConfig(n_core=1, n_random=2, n_repeat=0), "bad")
    me = store.join(created.join_code, "Ann")
    with pytest.raises(ValueError, match="Unknown answer 'maybe'"):
        store.record_answer(me.token, 0, "maybe", eid())
    with pytest.raises(ValueError, match="four_option|accepts"):
        store.record_answer(me.token, 0, "a_at_least_b", eid())   # binary session
    with pytest.raises(ValueError, match="Card 99 is not in your assignment"):
        store.record_answer(me.token, 99, "same", eid())
    with pytest.raises(ValueError, match="whole number"):
        store.record_answer(me.token, "1", "same", eid())
    with pytest.raises(ValueError, match="event id"):
        store.record_answer(me.token, 0, "same", "short")
    with pytest.raises(ValueError, match="Confidence"):
        store.record_answer(me.token, 0, "same", eid(), confidence=9)
    with pytest.raises(ValueError, match="join code has 12"):
        store.join("12", "Bob")
    with pytest.raises(ValueError, match="No session has the join code"):
        store.join("ZZZZZZ", "Bob")
    with pytest.raises(ValueError, match="Enter a name"):
        store.join(created.join_code, "   ")
    with pytest.raises(ValueError, match="already taken"):
        store.join(created.join_code, "Ann")
    assert store.join(created.join_code.lower(), "Bob").pseudonym == "Bob"   # codes are case-free
    store.set_status(created.session_id, created.facilitator_key, "closed")
    with pytest.raises(ValueError, match="closed"):
        store.record_answer(me.token, 0, "same", eid())
    with pytest.raises(ValueError, match="closed"):
        store.join(created.join_code, "Cy")
    assert store.event_log(created.session_id, created.facilitator_key).empty


@pytest.mark.parametrize("payload, message", [
    ("hello", "Not a session export"),
    ("{not json", "not valid JSON"),
    ('{"format": "other"}', "format"),
    (b"\xff\xfe", "UTF-8"),
])
def test_import_rejects_garbage(payload, message):
    with pytest.raises(ValueError, match=message):
        parse_export(payload)


def test_export_import_round_trip_json_and_csv(store):
    cfg = SessionConfig(n_core=3, n_random=5, n_repeat=1, response_mode="four_option", seed=4)
    created = store.create_session(cfg, "trip")
    responses = ["same", "a_at_least_b", "b_at_least_a", "none", "skip"]
    reasons = ['Same record, "really"; age, priors\nand charge match', "NA", '=HYPERLINK("x")', "  é 数 ✓  ", ""]
    for k, name in enumerate(["Ann", "Bob", "Cy"]):
        me = store.join(created.join_code, name)
        for p in range(6):
            store.record_answer(me.token, p, responses[(p + k) % 5], eid(), reason=reasons[(p + 2 * k) % 5])
        store.record_answer(me.token, 1, "retract", eid())
    original = store.judgments(created.session_id, created.facilitator_key)
    assert set(original["reason"].dropna()) == {reasons[0], "NA", '=HYPERLINK("x")', "é 数 ✓"}
    # a spreadsheet opening the CSV must not run a reason as a formula
    cells = pd.read_csv(io.StringIO(store.export_csv(created.session_id, created.facilitator_key)), skiprows=1)
    assert '\'=HYPERLINK("x")' in set(cells["reason"]) and not cells["reason"].astype(str).str.startswith("=").any()
    run = _run_args(store, created)
    store.record_fit_run(created.session_id, created.facilitator_key, **run)
    cols = ["stakeholder", "position", "a", "b", "kind", "response", "revision", "reason"]
    for text in (store.export_json(created.session_id, created.facilitator_key),
                 store.export_csv(created.session_id, created.facilitator_key)):
        copy = store.import_session(text)
        assert copy.facilitator_key != created.facilitator_key and copy.join_code != created.join_code
        again = store.judgments(copy.session_id, copy.facilitator_key)
        pd.testing.assert_frame_equal(original[cols].reset_index(drop=True), again[cols].reset_index(drop=True),
                                      check_dtype=False)
        pd.testing.assert_frame_equal(aggregate_constraints(original, "judged"), aggregate_constraints(again, "judged"))
        assert len(store.event_log(copy.session_id, copy.facilitator_key)) == 3 * 7
        assert store.config(copy.session_id, copy.facilitator_key) == cfg
        # Every reason, earlier revisions included, and blanks stay missing.
        events = store.event_log(copy.session_id, copy.facilitator_key)
        before = store.event_log(created.session_id, created.facilitator_key)
        assert sorted(events["reason"].dropna()) == sorted(before["reason"].dropna())
        assert len(before["reason"].dropna()) == 14
    # The run log travels in the JSON export (the CSV may leave it out).
    copy = store.import_session(store.export_json(created.session_id, created.facilitator_key))
    (logged,) = store.fit_runs(copy.session_id, copy.facilitator_key)
    (first,) = store.fit_runs(created.session_id, created.facilitator_key)
    assert logged["constraint_hash"] == run["constraint_hash"] and logged["run_id"] != first["run_id"]
    assert {k: logged[k] for k in ("aggregation", "learner", "frontier", "n_constraints")} == \
        {k: first[k] for k in ("aggregation", "learner", "frontier", "n_constraints")}


@pytest.mark.parametrize("population", ["paper", "full"])
def test_a_session_stores_its_population_and_deals_cards_only_from_it(store, population):
    from core.datasets import compas_population
    config = SessionConfig(population=population, n_core=5, n_random=60, n_repeat=2, seed=8)
    created = store.create_session(config, "people")
    info = store.open_session(created.join_code, created.facilitator_key)
    assert info["config"]["population"] == population and SessionConfig.from_dict(info["config"]) == config
    rows = compas_population(population)
    for name in ("Ann", "Bo"):
        cards = store.my_assignment(store.join(created.join_code, name).token)
        assert np.isin(cards[["a", "b"]].to_numpy(), rows).all()
    data = store.export_session(created.session_id, created.facilitator_key)
    assert data["session"]["config"]["population"] == population
    copy = store.import_session(data)
    assert store.open_session(copy.join_code, copy.facilitator_key)["config"]["population"] == population


def test_older_exports_without_reasons_or_runs_still_import(store):
    created = store.create_session(SessionConfig(n_core=1, n_random=2, n_repeat=0), "old")
    me = store.join(created.join_code, "Ann")
    store.record_answer(me.token, 0, "same", eid(), reason="kept")
    store.record_answer(me.token, 1, "differ", eid())
    data = store.export_session(created.session_id, created.facilitator_key)
    old = json.loads(json.dumps(data))
    old["schema_version"] = 1
    del old["fit_runs"]
    del old["session"]["config"]["population"]
    for e in old["events"]:
        del e["reason"]
    copy = store.import_session(old)
    assert store.judgments(copy.session_id, copy.facilitator_key)["reason"].isna().all()
    # An export made before sessions named their population is an older, whole-file session.
    assert store.open_session(copy.join_code, copy.facilitator_key)["config"]["population"] == "full"
    csv = store.export_csv(created.session_id, created.facilitator_key)
    header, body = csv.split("\n", 1)
    table = pd.read_csv(__import__("io").StringIO(body)).drop(columns=["reason"])
    copy = store.import_session(header + "\n" + table.to_csv(index=False))
    again = store.judgments(copy.session_id, copy.facilitator_key)
    assert list(again["response"]) == ["same", "differ"] and again["reason"].isna().all()
    bad = json.loads(json.dumps(data))
    bad["events"][0]["reason"] = "tab\tok but bell\a is not"
    with pytest.raises(ValueError, match="Card 0 of 's001'.*U\\+0007"):
        parse_export(bad)


@pytest.mark.parametrize("reason, message", [
    ("x" * (MAX_REASON_LENGTH + 1), f"limited to {MAX_REASON_LENGTH} characters; this one has {MAX_REASON_LENGTH + 1}"),
    ("ring the bell\a", "control character \\(U\\+0007\\)"),
    ("null\x00byte", "U\\+0000"),
    ("reversed \u202etext", "U\\+202E"),
    (42, "must be text, got int"),
])
def test_reason_is_checked_with_clear_messages(store, reason, message):
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "reasons")
    me = store.join(created.join_code, "Ann")
    with pytest.raises(ValueError, match=message):
        store.record_answer(me.token, 0, "same", eid(), reason=reason)
    assert store.event_log(created.session_id, created.facilitator_key).empty


def test_reason_is_trimmed_blank_is_none_and_undo_takes_none(store):
    created = store.create_session(SessionConfig(n_core=2, n_random=1, n_repeat=0), "reasons")
    me = store.join(created.join_code, "Ann")
    longest = "  " + "y" * MAX_REASON_LENGTH + "\r\n"
    assert store.record_answer(me.token, 0, "same", eid(), reason=longest)
    assert store.record_answer(me.token, 1, "skip", eid(), reason="cannot tell\r\nfrom this")
    assert store.record_answer(me.token, 2, "differ", eid(), reason="   ")
    with pytest.raises(ValueError, match="undo carries no reason"):
        store.record_answer(me.token, 0, "retract", eid(), reason="changed my mind")
    got = store.judgments(created.session_id, created.facilitator_key).set_index("position")["reason"]
    assert got[0] == "y" * MAX_REASON_LENGTH and got[1] == "cannot tell\nfrom this" and got[2] is None
    # Bulk answers (demo panels) take reasons too, checked the same way.
    other = store.join(created.join_code, "Bob")
    store.record_answers(other.token, pd.DataFrame({"position": [0, 1], "response": ["same", "differ"],
                                                    "reason": ["bulk", None]}))
    bob = store.judgments(created.session_id, created.facilitator_key).query("stakeholder == 'Bob'")
    assert list(bob["reason"]) == ["bulk", None]


V1_DDL = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at VARCHAR(40) NOT NULL);
CREATE TABLE sessions (session_id VARCHAR(32) PRIMARY KEY, name VARCHAR(120) NOT NULL,
    join_code VARCHAR(16) NOT NULL UNIQUE, facilitator_key_hash VARCHAR(64) NOT NULL,
    config JSON NOT NULL, core_pairs JSON NOT NULL, n_individuals INTEGER NOT NULL,
    status VARCHAR(16) NOT NULL, simulated BOOLEAN NOT NULL, created_at VARCHAR(40) NOT NULL);
CREATE TABLE stakeholders (stakeholder_id VARCHAR(32) PRIMARY KEY,
    session_id VARCHAR(32) NOT NULL REFERENCES sessions (session_id), pseudonym VARCHAR(60) NOT NULL,
    token_hash VARCHAR(64) NOT NULL UNIQUE, simulated BOOLEAN NOT NULL, joined_at VARCHAR(40) NOT NULL,
    CONSTRAINT uq_stakeholder_name UNIQUE (session_id, pseudonym));
CREATE TABLE assignments (session_id VARCHAR(32) NOT NULL REFERENCES sessions (session_id),
    stakeholder_id VARCHAR(32) NOT NULL REFERENCES stakeholders (stakeholder_id),
    position INTEGER NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL, kind VARCHAR(8) NOT NULL,
    repeat_of INTEGER NOT NULL, CONSTRAINT uq_assignment UNIQUE (session_id, stakeholder_id, position));
CREATE TABLE judgments (seq {seq}, event_id VARCHAR(64) NOT NULL UNIQUE,
    session_id VARCHAR(32) NOT NULL REFERENCES sessions (session_id),
    stakeholder_id VARCHAR(32) NOT NULL REFERENCES stakeholders (stakeholder_id),
    position INTEGER NOT NULL, revision INTEGER NOT NULL, response VARCHAR(16) NOT NULL,
    confidence INTEGER, latency_ms FLOAT, created_at VARCHAR(40) NOT NULL,
    CONSTRAINT uq_revision UNIQUE (session_id, stakeholder_id, position, revision));
CREATE INDEX ix_judgments_owner ON judgments (session_id, stakeholder_id, position);
"""


def _sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _make_v1_database(url: str) -> dict:
    """A schema-1 database written with that version's DDL, holding one session with answers."""
    seq = "INTEGER PRIMARY KEY AUTOINCREMENT" if is_sqlite(url) else "SERIAL PRIMARY KEY"
    cfg = {k: v for k, v in SessionConfig(n_core=2, n_random=1, n_repeat=0, seed=5).to_dict().items()
           if k != "population"}   # settings as stored before sessions named their population
    ids = {"session": "s" * 32, "person": "p" * 32, "key": "old-facilitator-key", "token": "old-resume-token",
           "code": "QLDV2X"}
    engine = create_engine(normalise_url(url))
    with engine.begin() as conn:
        for statement in V1_DDL.format(seq=seq).split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
        conn.execute(text("INSERT INTO schema_version VALUES (1, '2025-01-01T00:00:00')"))
        conn.execute(text("INSERT INTO sessions VALUES (:sid, 'Old workshop', :code, :key, :cfg, :core, 7214, "
                          "'open', :f, '2025-01-01T00:00:00')"),
                     {"sid": ids["session"], "code": ids["code"], "key": _sha(ids["key"]),
                      "cfg": json.dumps(cfg), "core": "[[10, 20], [30, 40]]", "f": False})
        conn.execute(text("INSERT INTO stakeholders VALUES (:uid, :sid, 'Old Ann', :tok, :f, '2025-01-01')"),
                     {"uid": ids["person"], "sid": ids["session"], "tok": _sha(ids["token"]), "f": False})
        for pos, (a, b) in enumerate([(10, 20), (40, 30), (5, 6)]):
            conn.execute(text("INSERT INTO assignments VALUES (:sid, :uid, :pos, :a, :b, :kind, -1)"),
                         {"sid": ids["session"], "uid": ids["person"], "pos": pos, "a": a, "b": b,
                          "kind": "core" if pos < 2 else "random"})
        for n, (pos, response) in enumerate([(0, "same"), (1, "differ"), (1, "same")]):
            conn.execute(text("INSERT INTO judgments (event_id, session_id, stakeholder_id, position, revision, "
                              "response, confidence, latency_ms, created_at) "
                              "VALUES (:eid, :sid, :uid, :pos, :rev, :resp, 3, 1200.0, '2025-01-02')"),
                         {"eid": f"old-event-{n}", "sid": ids["session"], "uid": ids["person"], "pos": pos,
                          "rev": 1 + (n == 2), "resp": response})
    engine.dispose()
    return ids


def test_schema_1_database_is_upgraded_in_place_and_keeps_its_answers(db):
    ids = _make_v1_database(db)
    store = ElicitationStore(db)
    try:
        assert store.schema_version() == SCHEMA_VERSION == 6
        with store.engine.connect() as conn:
            versions = [r[0] for r in conn.execute(text("SELECT version FROM schema_version ORDER BY version"))]
        assert versions == [1, 2, 3, 4, 5, 6]
        info = store.open_session(ids["code"], ids["key"])
        # Schema 4: the session drew from every row before populations existed, and says so.
        assert info["config"]["population"] == "full"
        assert SessionConfig.from_dict(info["config"]).population == "full"
        judged = store.judgments(info["session_id"], ids["key"])
        assert list(judged["response"]) == ["same", "same"] and list(judged["revision"]) == [1, 2]
        assert list(judged["confidence"]) == [3, 3] and judged["reason"].isna().all()
        assert len(store.event_log(info["session_id"], ids["key"])) == 3
        # The old stakeholder resumes and can now give a reason; runs can be logged.
        assert store.next_position(ids["token"]) == 2
        assert store.record_answer(ids["token"], 2, "differ", eid(), reason="different charges")
        judged = store.judgments(info["session_id"], ids["key"])
        assert judged.set_index("position")["reason"][2] == "different charges"
        store.record_fit_run(info["session_id"], ids["key"], **_run_args(store, None, judged))
        assert len(store.fit_runs(info["session_id"], ids["key"])) == 1
        # Schema 3 scopes event ids to their stakeholder: a newcomer may reuse an old id.
        newcomer = store.join(ids["code"], "New Bo")
        # A newcomer to the old session gets the cards the code drew before populations existed.
        before = sample_assignment(SessionConfig.from_dict(info["config"]), np.array([[10, 20], [30, 40]]),
                                   np.arange(7214), make_rng(stakeholder_seed(5, "New Bo")))
        cards = store.my_assignment(newcomer.token)
        assert cards[["a", "b"]].to_numpy().tolist() == before[["a", "b"]].to_numpy().tolist()
        assert store.record_answer(newcomer.token, 0, "same", "old-event-0") is True
        assert store.record_answer(ids["token"], 0, "same", "old-event-0") is False
        # Schema 6: the old stakeholder's browser keeps a device token that brings her old code back.
        phone = new_device_token()
        store.bind_device(ids["token"], phone)
        assert store.device_login(ids["code"], phone).token == ids["token"]
    finally:
        store.dispose()
    # Opening again applies nothing twice.
    again = ElicitationStore(db)
    with again.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM schema_version")).scalar() == 6
    assert len(again.event_log(ids["session"], ids["key"])) == 5
    again.dispose()


def test_newer_database_is_refused(db):
    first = ElicitationStore(db)
    with first.engine.begin() as conn:
        conn.execute(text("INSERT INTO schema_version VALUES (:v, 'later')"), {"v": SCHEMA_VERSION + 1})
    first.dispose()
    with pytest.raises(ValueError, match="newer than this code"):
        ElicitationStore(db)


def _run_args(store, created, judged=None, **learner) -> dict:
    """A fit-run record for a session's current answers (the learner's figures are made up)."""
    if judged is None:
        judged = store.judgments(created.session_id, created.facilitator_key)
    constraints = aggregate_constraints(judged, "panel", n_stakeholders=max(1, judged["stakeholder"].nunique()))
    points = pd.DataFrame({"target": [0.0, 0.5, 1.0], "error": [0.36, 0.33, 0.32],
                           "unfairness": [0.01, 0.4, 0.9], "on_hull": [True, True, True]})
    return {"constraint_hash": constraint_set_hash(constraints),
            "aggregation": {"weighting": "panel", "min_support": 0.0, "selection": "whole panel",
                            "stakeholders": sorted(judged["stakeholder"].unique())},
            "learner": {"sweep": "gamma", "T": 100, "oracle": "ols", "seed": 0, **learner},
            "summary": frontier_summary(points, len(constraints)), "code_version": "test"}


def test_fit_runs_are_logged_once_and_superseded_when_a_pooled_stakeholder_withdraws(store):
    created = store.create_session(SessionConfig(n_core=3, n_random=0, n_repeat=0), "runs")
    sid, key = created.session_id, created.facilitator_key
    people = {n: store.join(created.join_code, n) for n in ("Ann", "Bob", "Cy")}
    for k, login in enumerate(people.values()):
        for p in range(3):
            store.record_answer(login.token, p, "same" if (p + k) % 2 else "differ", eid())
    whole = _run_args(store, created)
    run_id, written = store.record_fit_run(sid, key, **whole)
    assert written
    # A rerun, or another tab, with the same constraints and settings: no second row.
    assert store.record_fit_run(sid, key, **whole) == (run_id, False)
    assert store.record_fit_run(sid, key, **{**whole, "code_version": "other build"}) == (run_id, False)
    # Other learner settings are another run; so is another constraint set (Cy and Bob only).
    other, written = store.record_fit_run(sid, key, **_run_args(store, created, seed=7))
    assert written and other != run_id
    judged = store.judgments(sid, key)
    without_ann = _run_args(store, None, judged[judged["stakeholder"] != "Ann"])
    assert without_ann["constraint_hash"] != whole["constraint_hash"]
    kept, _ = store.record_fit_run(sid, key, **without_ann)
    runs = {r["run_id"]: r for r in store.fit_runs(sid, key)}
    assert set(runs) == {run_id, other, kept}
    first = runs[run_id]
    assert first["aggregation"]["stakeholders"] == ["Ann", "Bob", "Cy"] and first["learner"]["T"] == 100
    assert first["n_constraints"] == 3 and first["unconstrained_error"] == 0.32
    assert [p["error"] for p in first["frontier"]] == [0.36, 0.33, 0.32]
    assert first["code_version"] == "test" and not first["superseded"] and first["created_at"]
    # Withdrawing Ann supersedes the runs that pooled her, and her name leaves the log.
    store.delete_stakeholder(sid, key, "Ann")
    runs = {r["run_id"]: r for r in store.fit_runs(sid, key)}
    assert runs[run_id]["superseded"] and runs[other]["superseded"] and not runs[kept]["superseded"]
    assert "withdrawn" in runs[run_id]["note"] and runs[kept]["note"] is None
    assert runs[run_id]["aggregation"]["stakeholders"] == [WITHDRAWN, "Bob", "Cy"]
    assert "Ann" not in json.dumps(store.export_session(sid, key)["fit_runs"])
    # A refit on what is left matches the run without Ann, which stays current; old rows stay.
    assert store.record_fit_run(sid, key, **_run_args(store, created)) == (kept, False)
    assert len(store.fit_runs(sid, key)) == 3


def test_fit_run_records_are_checked(store):
    created = store.create_session(SessionConfig(n_core=1, n_random=0, n_repeat=0), "bad runs")
    store.record_answer(store.join(created.join_code, "Ann").token, 0, "same", eid())
    good = _run_args(store, created)
    cases = [({"constraint_hash": "abc"}, "constraint-set hash"),
             ({"learner": "fast"}, "learner must be a dictionary"),
             ({"aggregation": {"when": object()}}, "plain JSON"),
             ({"summary": {**good["summary"], "frontier": [{"target": 0, "error": float("nan"),
                                                            "unfairness": 0}]}}, "error must be finite")]
    for change, message in cases:
        with pytest.raises(ValueError, match=message):
            store.record_fit_run(created.session_id, created.facilitator_key, **{**good, **change})
    assert store.fit_runs(created.session_id, created.facilitator_key) == []


def test_import_rejects_inconsistent_exports(store):
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "x")
    store.record_answer(store.join(created.join_code, "Ann").token, 0, "same", eid())
    good = store.export_session(created.session_id, created.facilitator_key)
    bad_pair = json.loads(json.dumps(good))
    bad_pair["assignments"][0]["a"] = 99999
    with pytest.raises(ValueError, match="not two different individuals"):
        store.import_session(bad_pair)
    bad_resp = json.loads(json.dumps(good))
    bad_resp["events"][0]["response"] = "a_at_least_b"
    with pytest.raises(ValueError, match="not allowed in this session"):
        store.import_session(bad_resp)
    orphan = json.loads(json.dumps(good))
    orphan["events"][0]["position"] = 5
    with pytest.raises(ValueError, match="not assigned"):
        store.import_session(orphan)
    bad_cfg = json.loads(json.dumps(good))
    bad_cfg["session"]["config"]["n_core"] = -1
    with pytest.raises(ValueError, match="n_core"):
        store.import_session(bad_cfg)


def test_withdrawal_deletes_only_that_stakeholder(store):
    created = store.create_session(SessionConfig(n_core=2, n_random=0, n_repeat=0), "w")
    ann, bob = store.join(created.join_code, "Ann"), store.join(created.join_code, "Bob")
    store.record_answer(ann.token, 0, "same", eid())
    store.record_answer(bob.token, 0, "same", eid())
    assert store.delete_stakeholder(created.session_id, created.facilitator_key, "Ann") == 1
    assert list(store.judgments(created.session_id, created.facilitator_key)["stakeholder"]) == ["Bob"]
    with pytest.raises(PermissionError):
        store.my_answers(ann.token)


def test_assignments_reproducible_from_seed_and_roster(store):
    cfg = SessionConfig(n_core=3, n_random=5, n_repeat=1, seed=21)
    first, second = store.create_session(cfg, "a"), store.create_session(cfg, "b")
    one = store.my_assignment(store.join(first.join_code, "Dee").token)
    two = store.my_assignment(store.join(second.join_code, "Dee").token)
    other = store.my_assignment(store.join(second.join_code, "Eve").token)
    pd.testing.assert_frame_equal(one, two)
    assert not one[["a", "b"]].equals(other[["a", "b"]])


WRITER = textwrap.dedent("""
    import sys, uuid
    sys.path.insert(0, {repo!r})
    from core.fairness.store import ElicitationStore
    store = ElicitationStore({url!r})
    for token in sys.argv[1:]:
        for p in range(50):
            assert store.record_answer(token, p, "same" if p % 2 else "differ", uuid.uuid4().hex)
""")


def test_writers_in_separate_processes_share_the_file_safely(store, db, tmp_path):
    created = store.create_session(FIFTY, "procs")
    logins = [store.join(created.join_code, f"p{k}") for k in range(8)]
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO), url=db))
    procs = [subprocess.Popen([sys.executable, str(script), a.token, b.token])
             for a, b in zip(logins[::2], logins[1::2])]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    log = store.event_log(created.session_id, created.facilitator_key)
    assert len(log) == 8 * 50 and log["event_id"].is_unique
    assert not log.duplicated(["stakeholder_id", "position"]).any()


def test_withdrawal_seen_by_another_process_rejects_cached_writer(db):
    first, second = ElicitationStore(db), ElicitationStore(db)
    created = first.create_session(SessionConfig(n_core=2, n_random=0, n_repeat=0), "stale")
    me = first.join(created.join_code, "Ann")
    assert first.record_answer(me.token, 0, "same", eid())          # memoises Ann in `first`
    second.delete_stakeholder(created.session_id, created.facilitator_key, "Ann")
    with pytest.raises(PermissionError, match="resume code"):
        first.record_answer(me.token, 1, "same", eid())
    first.dispose(), second.dispose()


@pytest.mark.parametrize("given, expected", [
    ("postgresql://u:p@h:5432/d", "postgresql+psycopg://u:p@h:5432/d"),
    ("postgres://u@h/d", "postgresql+psycopg://u@h/d"),
    ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
    ("sqlite:///x.sqlite", "sqlite:///x.sqlite"),
])
def test_plain_postgresql_urls_use_the_shipped_driver(given, expected):
    assert normalise_url(given) == expected


# ---------------------------------------------------------------------- storage hardening

def test_tabs_answering_the_same_card_at_the_same_instant_all_store(store):
    """One stakeholder, many tabs, one card: every acknowledged click is stored with its own revision."""
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "race")
    me = store.join(created.join_code, "Ann")
    tabs, clicks = 12, 8
    start, acknowledged, errors = threading.Barrier(tabs), [], []

    def tab(k):
        try:
            for n in range(clicks):
                start.wait() if n == 0 else None
                event = eid()
                if store.record_answer(me.token, 0, "same" if (k + n) % 2 else "differ", event):
                    acknowledged.append(event)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=tab, args=(k,)) for k in range(tabs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    log = store.event_log(created.session_id, created.facilitator_key)
    assert len(acknowledged) == tabs * clicks
    assert sorted(log["event_id"]) == sorted(acknowledged)
    assert sorted(log["revision"]) == list(range(1, tabs * clicks + 1))


def test_idempotency_keys_belong_to_one_stakeholder(store):
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "keys")
    ann, bob = store.join(created.join_code, "Ann"), store.join(created.join_code, "Bob")
    shared = "same-key-" + uuid.uuid4().hex[:8]
    assert store.record_answer(ann.token, 0, "same", shared) is True
    assert store.record_answer(bob.token, 0, "differ", shared) is True     # not swallowed
    assert store.record_answer(ann.token, 0, "same", shared) is False      # a re-delivered click
    judged = store.judgments(created.session_id, created.facilitator_key)
    assert dict(zip(judged["stakeholder"], judged["response"])) == {"Ann": "same", "Bob": "differ"}
    other = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "other")
    cy = store.join(other.join_code, "Cy")
    assert store.record_answer(cy.token, 0, "same", shared) is True


def test_join_codes_are_long_and_wrong_guesses_are_limited(store):
    from core.fairness.store import JOIN_ALPHABET, JOIN_CODE_LENGTH, MAX_FAILURES_PER_CLIENT, TooManyAttempts
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "codes")
    assert len(created.join_code) == JOIN_CODE_LENGTH >= 12
    assert set(created.join_code) <= set(JOIN_ALPHABET)     # 32 symbols: at least 60 bits
    wrong = "ZZZZZZZZZZZZ" if created.join_code != "ZZZZZZZZZZZZ" else "YYYYYYYYYYYY"
    for k in range(MAX_FAILURES_PER_CLIENT):
        with pytest.raises(ValueError, match="No session has the join code"):
            store.join(wrong, f"guess {k}", client="attacker")
    with pytest.raises(TooManyAttempts, match="Too many wrong codes"):
        store.join(created.join_code, "right code, too late", client="attacker")
    with pytest.raises(TooManyAttempts):
        store.resume("not-a-token", client="attacker")
    with pytest.raises(TooManyAttempts):
        store.open_session(created.join_code, created.facilitator_key, client="attacker")
    # Other people are not locked out, and dashes or spaces in a typed code are fine.
    typed = "-".join(created.join_code[k:k + 4] for k in range(0, 12, 4)).lower()
    assert store.join(typed, "Ann", client="someone else").pseudonym == "Ann"
    for k in range(MAX_FAILURES_PER_CLIENT):
        with pytest.raises(PermissionError):
            store.open_session(created.join_code, "wrong key", client="guesser 2")
    with pytest.raises(TooManyAttempts):
        store.open_session(created.join_code, created.facilitator_key, client="guesser 2")


def test_guessing_limit_per_session_and_per_address(store):
    from core.fairness.store import MAX_FAILURES_PER_ADDRESS, MAX_FAILURES_PER_CLIENT, TooManyAttempts
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "room")
    # A workshop room behind one address: one person's typos do not lock out their neighbours.
    for _ in range(MAX_FAILURES_PER_CLIENT):
        with pytest.raises(ValueError, match="No session"):
            store.session_info("ZZZZZZZZZZZZ", client="10.0.0.1/tab-a")
    with pytest.raises(TooManyAttempts):
        store.session_info(created.join_code, client="10.0.0.1/tab-a")
    assert store.session_info(created.join_code, client="10.0.0.1/tab-b")["name"] == "room"
    # A guesser who keeps opening new sessions from one address meets the address limit: their
    # wrong codes are answered slowly, while a right code from that address still opens (the
    # address may be a reverse proxy everyone shares).
    sessions_needed = MAX_FAILURES_PER_ADDRESS // MAX_FAILURES_PER_CLIENT
    for k in range(1, sessions_needed):
        for _ in range(MAX_FAILURES_PER_CLIENT):
            with pytest.raises(ValueError, match="No session"):
                store.session_info("ZZZZZZZZZZZZ", client=f"10.0.0.1/fresh-{k}")
    pauses: list[float] = []
    store.pause = pauses.append
    with pytest.raises(TooManyAttempts):
        store.session_info("ZZZZZZZZZZZZ", client="10.0.0.1/another-fresh-one")
    assert pauses == [store.failure_pause_s]
    assert store.session_info(created.join_code, client="10.0.0.1/another-fresh-one")["name"] == "room"
    assert store.session_info(created.join_code, client="10.0.0.2/elsewhere")["name"] == "room"


def _on_connect(store, statement: str) -> None:
    """Run `statement` on every new connection of the store (the pool is emptied first)."""
    from sqlalchemy import event

    def hook(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute(statement)
        cur.close()
        if not is_sqlite(str(store.engine.url)):
            dbapi_conn.commit()
    event.listen(store.engine, "connect", hook)
    store.engine.dispose()


def test_read_only_database_gives_a_plain_error_and_no_acknowledgement(store, db):
    from core.fairness.store import StoreUnavailable
    created = store.create_session(SessionConfig(n_core=1, n_random=2, n_repeat=0), "ro")
    me = store.join(created.join_code, "Ann")
    assert store.record_answer(me.token, 0, "same", eid())
    _on_connect(store, "PRAGMA query_only = ON" if is_sqlite(db) else
                "SET default_transaction_read_only = on")
    with pytest.raises(StoreUnavailable, match="read-only.*Nothing from your last action was saved"):
        store.record_answer(me.token, 1, "same", eid())
    with pytest.raises(StoreUnavailable, match="read-only"):
        store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "more")
    # Reads still work, and show that only the first answer exists.
    assert list(store.my_answers(me.token)["position"]) == [0]


def test_full_disk_gives_a_plain_error_and_every_acknowledged_answer_is_stored(tmp_path):
    from core.fairness.store import StoreUnavailable
    url = f"sqlite:///{tmp_path / 'full.sqlite'}"
    store = ElicitationStore(url)
    created = store.create_session(SessionConfig(n_core=0, n_random=300, n_repeat=0), "full")
    me = store.join(created.join_code, "Ann")
    with store.engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    _on_connect(store, f"PRAGMA max_page_count = {pages + 1}")
    acknowledged, fault = 0, None
    for position in range(300):
        try:
            assert store.record_answer(me.token, position, "same", eid(), reason="x" * 400)
            acknowledged += 1
        except StoreUnavailable as err:
            fault = err
            break
    assert fault is not None and "disk is full" in str(fault) and "traceback" not in str(fault).lower()
    assert len(store.my_answers(me.token)) == acknowledged
    store.dispose()


def test_deleted_database_file_is_detected_and_refuses_to_acknowledge(tmp_path):
    from core.fairness.store import StoreUnavailable
    path = tmp_path / "gone.sqlite"
    store = ElicitationStore(f"sqlite:///{path}")
    created = store.create_session(SessionConfig(n_core=1, n_random=2, n_repeat=0), "gone")
    me = store.join(created.join_code, "Ann")
    assert store.record_answer(me.token, 0, "same", eid())
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreUnavailable, match="file was deleted.*Nothing from your last action was saved"):
        store.record_answer(me.token, 1, "same", eid())
    with pytest.raises(StoreUnavailable, match="deleted"):
        store.my_answers(me.token)
    store.dispose()


def _one_answer_export(store) -> dict:
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "x")
    store.record_answer(store.join(created.join_code, "Ann").token, 0, "same", eid())
    return store.export_session(created.session_id, created.facilitator_key)


def _session_count(store) -> int:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql("SELECT COUNT(*) FROM sessions").scalar()


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d["session"].update(n_individuals=10**6) or d["assignments"][0].update(a=9000),
     "has 7214"),
    (lambda d: d["session"].update(core_pairs=[[3, 3]]), "not two different individuals"),
    (lambda d: d["session"].update(core_pairs=[[0, 1]]), "outside it, e.g. row 0"),   # row 0: race 'Other'
    (lambda d: d["assignments"][0].update(a=0), "people of its population"),
    (lambda d: d["assignments"][0].update(b=d["assignments"][0]["a"]), "not two different individuals"),
    (lambda d: d["events"][0].update(created_at="x" * 100), "ISO date"),
    (lambda d: d["stakeholders"][0].update(joined_at="x" * 100), "ISO date"),
    (lambda d: d["events"][0].update(position=2**40), "position|not assigned"),
    (lambda d: d["assignments"][0].update(repeat_of=7), "repeats card 7"),
    (lambda d: d["stakeholders"][0].update(pseudonym="Ann\u200b"), "invisible character"),
    (lambda d: d["session"].update(name="Work\u202eshop"), "invisible character"),
    (lambda d: d["events"][0].update(confidence=9), "Confidence"),
    (lambda d: d["session"].update(status=["open"]), "status"),
    (lambda d: d.update(stakeholders=[{"id": "s001", "pseudonym": "Ann", "simulated": False,
                                        "joined_at": None}] * 2), "appears twice"),
])
def test_unusable_imports_are_refused_whole_and_leave_nothing_behind(store, spoil, message):
    data = _one_answer_export(store)
    spoil(data)
    before = _session_count(store)
    with pytest.raises(ValueError, match=message):
        store.import_session(json.loads(json.dumps(data)))
    assert _session_count(store) == before


def test_import_that_fails_while_writing_leaves_no_empty_session(store, monkeypatch):
    data = _one_answer_export(store)
    before = _session_count(store)
    import core.fairness.store.exchange as exchange
    real = exchange.insert

    def failing_insert(table):
        if table.name == "judgments":
            raise ValueError("simulated failure half-way")
        return real(table)
    monkeypatch.setattr(exchange, "insert", failing_insert)
    with pytest.raises(ValueError, match="half-way"):
        store.import_session(data)
    assert _session_count(store) == before


@pytest.mark.parametrize("text, message", [
    ("Ann\x00", "U\\+0000"),
    ("A\u200bnn", "U\\+200B"),
    ("\u202eannA", "U\\+202E"),
    ("Ann\u2066", "U\\+2066"),
    ("\ufeffAnn", "U\\+FEFF"),
])
def test_names_refuse_invisible_and_direction_characters(store, text, message):
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "names")
    with pytest.raises(ValueError, match=message):
        store.join(created.join_code, text)
    with pytest.raises(ValueError, match=message):
        store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), f"Workshop {text}")
    # Markdown is stored as the text it is; pages render it as plain text.
    assert store.join(created.join_code, "![x](http://example.invalid/a.png)").pseudonym.startswith("![x]")


def test_csv_export_is_written_by_the_shared_guarded_writer(store):
    import core.fairness.store.exchange as exchange
    from core.report import guarded_csv
    assert exchange.guarded_csv is guarded_csv
    created = store.create_session(SessionConfig(n_core=1, n_random=1, n_repeat=0), "csv")
    me = store.join(created.join_code, "=HYPERLINK(\"x\")")
    store.record_answer(me.token, 0, "same", eid(), reason="+1 because")
    text_ = store.export_csv(created.session_id, created.facilitator_key)
    assert "'=HYPERLINK" in text_ and "'+1 because" in text_
    back = store.import_session(text_)
    judged = store.judgments(back.session_id, back.facilitator_key)
    assert list(judged["stakeholder"]) == ["=HYPERLINK(\"x\")"] and list(judged["reason"]) == ["+1 because"]


def test_a_database_that_cannot_be_opened_says_so(tmp_path):
    from core.fairness.store import StoreUnavailable
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the database folder should be")
    with pytest.raises(StoreUnavailable, match="cannot be created"):
        ElicitationStore(f"sqlite:///{blocker / 'sessions.sqlite'}")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable, match="cannot be read or written"):
        ElicitationStore(f"sqlite:///{garbage}")


def test_session_csv_with_a_huge_header_is_refused_before_parsing():
    """A settings comment followed by a million-column header once pinned a CPU for minutes."""
    from core.fairness.store.exchange import parse_csv_export
    text = "# {}\n" + ",".join(f"c{i}" for i in range(1_000_000)) + "\n1\n"
    with pytest.raises(ValueError, match="columns"):
        parse_csv_export(text)


# ---------------------------------------------------------------------- synthetic-copy sessions

SYNTHETIC = SessionConfig(n_core=3, n_random=6, n_repeat=1, seed=5, pair_source="dp_synthetic", pair_epsilon=0.5)


@pytest.fixture(scope="module")
def released():
    """One secure copy (OpenDP noise) of the paper's people at epsilon 0.5, made once for these tests."""
    from core.fairness.private_pairs import PrivatePairsPlan, release_synthetic_people
    return release_synthetic_people(PrivatePairsPlan(population="paper", epsilon=0.5))


@pytest.fixture
def synthetic(store, released):
    """SYNTHETIC naming the released copy, with the copy stored in ``store``."""
    store.save_copy(released)
    return dataclasses.replace(SYNTHETIC, pair_copy=released.copy_id)


def _n_individuals(store, session_id: str) -> int:
    with store.engine.connect() as conn:
        return conn.exec_driver_sql(f"SELECT n_individuals FROM sessions WHERE session_id = '{session_id}'").scalar()


def test_a_synthetic_session_stores_its_copy_size_and_round_trips_through_export(store, synthetic):
    from core.fairness.private_pairs import SYNTHETIC_PEOPLE
    created = store.create_session(synthetic, "copy")
    assert _n_individuals(store, created.session_id) == SYNTHETIC_PEOPLE
    assert store.open_session(created.join_code, created.facilitator_key)["n_individuals"] == SYNTHETIC_PEOPLE
    for name in ("Ann", "Bo"):
        me = store.join(created.join_code, name)
        cards = store.my_assignment(me.token)
        assert cards[["a", "b"]].to_numpy().max() < SYNTHETIC_PEOPLE
        store.record_answers(me.token, pd.DataFrame({"position": cards["position"], "response": "same"}))
    original = store.judgments(created.session_id, created.facilitator_key)
    cols = ["stakeholder", "position", "a", "b", "kind", "response", "revision"]
    for text in (store.export_json(created.session_id, created.facilitator_key),
                 store.export_csv(created.session_id, created.facilitator_key)):
        copy = store.import_session(text)
        assert store.config(copy.session_id, copy.facilitator_key) == synthetic
        assert _n_individuals(store, copy.session_id) == SYNTHETIC_PEOPLE
        again = store.judgments(copy.session_id, copy.facilitator_key)
        pd.testing.assert_frame_equal(original[cols].reset_index(drop=True), again[cols].reset_index(drop=True),
                                      check_dtype=False)


def test_a_synthetic_session_import_checks_pairs_against_its_synthetic_people(store, synthetic):
    from core.datasets import compas_population
    created = store.create_session(synthetic, "copy")
    me = store.join(created.join_code, "Ann")
    store.record_answer(me.token, 0, "same", eid())
    data = store.export_session(created.session_id, created.facilitator_key)
    # Row 0 is outside the paper's population, but a synthetic session's person 0 is one of its people.
    assert 0 not in set(compas_population("paper").tolist())
    ok = json.loads(json.dumps(data))
    ok["session"]["core_pairs"][0] = [0, 1]
    store.import_session(ok)
    # An export made before the copy's size was stored says the file's rows; it imports with the copy's size.
    old = json.loads(json.dumps(data))
    old["session"]["n_individuals"] = 7214
    copy = store.import_session(old)
    assert _n_individuals(store, copy.session_id) == 2000
    # A number beyond the synthetic people is refused whole, with nothing written.
    bad = json.loads(json.dumps(old))
    bad["assignments"][0].update(a=2500)
    before = _session_count(store)
    with pytest.raises(ValueError, match="synthetic people.*e.g. 2500"):
        store.import_session(bad)
    assert _session_count(store) == before


# ---------------------------------------------------------------- stored synthetic copies (schema 5)

def test_a_schema_4_database_gains_the_copy_table_and_keeps_its_sessions(db, released):
    first = ElicitationStore(db)
    created = first.create_session(SessionConfig(n_core=2, n_random=1, n_repeat=0), "before copies")
    ann = first.join(created.join_code, "Ann")
    with first.engine.begin() as conn:   # the file as schema 4 left it: no copy or device table, no version 5 or 6
        conn.exec_driver_sql("DROP TABLE synthetic_copies")
        conn.exec_driver_sql("DROP TABLE stakeholder_devices")
        conn.exec_driver_sql("DELETE FROM schema_version WHERE version >= 5")
    first.dispose()
    store = ElicitationStore(db)
    try:
        assert store.schema_version() == 6
        assert store.open_session(created.join_code, created.facilitator_key)["name"] == "before copies"
        assert store.save_copy(released) is True
        phone = new_device_token()
        store.bind_device(ann.token, phone)
        assert store.device_login(created.join_code, phone).pseudonym == "Ann"
    finally:
        store.dispose()


def test_a_stored_copy_reloads_identically_after_a_restart(db, released):
    from core.fairness import private_pairs as pp
    first = ElicitationStore(db)
    assert first.save_copy(released) is True and first.save_copy(released) is False   # stored once per id
    first.dispose()
    pp._COPIES.pop(released.copy_id, None)            # a new process: nothing cached
    again = ElicitationStore(db)
    try:
        loaded = again.load_copy(released.copy_id)
        pd.testing.assert_frame_equal(loaded.cards, released.cards)
        pd.testing.assert_frame_equal(loaded.people, released.people)
        assert loaded.plan == released.plan and loaded.spent.total("rho") == released.spent.total("rho")
        assert [c["copy_id"] for c in again.find_copies(released.plan.replace(copy_id=""))] == [released.copy_id]
        assert again.find_copies(released.plan.replace(copy_id="", epsilon=0.6)) == []
        # synthetic_people finds it through the store, and never fits anything.
        pp._COPIES.pop(released.copy_id, None)
        assert pp.synthetic_people(released.plan, store=again).cards.equals(released.cards)
        with pytest.raises(ValueError, match="ffffffffffffffff is not in this session database"):
            again.load_copy("f" * 16)
        with pytest.raises(ValueError, match="not in this session database"):
            again.create_session(dataclasses.replace(SYNTHETIC, pair_copy="f" * 16), "no copy")
        with pytest.raises(ValueError, match="names its released copy"):
            again.create_session(SYNTHETIC, "no copy at all")
    finally:
        again.dispose()


def test_a_simulated_copy_is_never_stored(store):
    from core.fairness.private_pairs import PrivatePairsPlan, simulated_synthetic_people
    sim = simulated_synthetic_people(PrivatePairsPlan(epsilon=0.5), np.random.default_rng(0))
    with pytest.raises(ValueError, match="secure noise"):
        store.save_copy(sim)


def test_export_import_on_a_fresh_database_carries_the_copy_and_records_one_release(tmp_path, released):
    from core.fairness import private_pairs as pp
    from core.privacy.project_ledger import ProjectLedger
    home = ElicitationStore(f"sqlite:///{tmp_path / 'home.sqlite'}")
    home.save_copy(released)
    config = dataclasses.replace(SYNTHETIC, pair_copy=released.copy_id)
    created = home.create_session(config, "workshop")
    me = home.join(created.join_code, "Ann")
    home.record_answer(me.token, 0, "same", eid())
    exported = home.export_json(created.session_id, created.facilitator_key)
    data = json.loads(exported)
    assert data["synthetic_copy"]["copy_id"] == released.copy_id
    assert len(data["synthetic_copy"]["cards"]["age"]) == 2000 and "seed" not in data["synthetic_copy"]
    home.dispose()
    pp._COPIES.pop(released.copy_id, None)
    away_url = f"sqlite:///{tmp_path / 'away.sqlite'}"
    away = ElicitationStore(away_url)
    try:
        ledger = ProjectLedger(away_url)
        assert ledger.releases("compas") == ()
        one = away.import_session(exported)                     # default: this database's project ledger
        two = away.import_session(exported, ledger=ledger)       # the same copy again: recorded once
        recorded = ledger.releases("compas")
        assert len(recorded) == 1 and released.copy_id in recorded[0].release_key
        assert recorded[0].release_key == pp.copy_release(released.plan).release_key
        assert recorded[0].kind == "release" and recorded[0].spends[0].amount == pytest.approx(released.plan.rho)
        pp._COPIES.pop(released.copy_id, None)
        loaded = away.load_copy(released.copy_id)
        pd.testing.assert_frame_equal(loaded.cards, released.cards)
        for made in (one, two):
            assert away.config(made.session_id, made.facilitator_key).pair_copy == released.copy_id
        # The CSV export carries the copy too.
        csv_text = away.export_csv(one.session_id, one.facilitator_key)
        assert released.copy_id in csv_text.partition("\n")[0]
        # A copy whose cards were tampered with is refused whole, nothing written, nothing recorded.
        bad = json.loads(exported)
        bad["synthetic_copy"]["cards"]["age"][0] = "17"
        before = _session_count(away)
        with pytest.raises(ValueError, match="outside its public categories"):
            away.import_session(bad)
        assert _session_count(away) == before and len(ledger.releases("compas")) == 1
        # An export without its copy cannot be imported where the copy is missing.
        bare = json.loads(exported)
        del bare["synthetic_copy"]
        fresh = ElicitationStore(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
        with pytest.raises(ValueError, match=f"does not carry synthetic copy {released.copy_id}"):
            fresh.import_session(bare)
        fresh.dispose()
    finally:
        away.dispose()


def _other_people_same_id(exported: str) -> dict:
    """The export with two of its copy's people swapped: a well-formed copy, other people, the same id."""
    data = json.loads(exported)
    copy = data["synthetic_copy"]
    cards = pd.DataFrame(copy["cards"])
    first = int(np.flatnonzero((cards != cards.iloc[0]).any(axis=1))[0])   # a person unlike person 0
    for view in ("cards", "people"):
        for values in copy[view].values():
            values[0], values[first] = values[first], values[0]
    return data


def test_an_import_never_replaces_a_stored_or_live_copy(tmp_path, store, synthetic, released):
    from core.fairness import private_pairs as pp
    from core.privacy.project_ledger import ProjectLedger
    created = store.create_session(synthetic, "live")
    me = store.join(created.join_code, "Ann")
    before = store.my_assignment(me.token)
    hostile = _other_people_same_id(store.export_json(created.session_id, created.facilitator_key))
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    sessions_before = _session_count(store)
    with pytest.raises(ValueError, match=f"Synthetic copy {released.copy_id} already exists here with other people"):
        store.import_session(hostile, ledger=ledger)
    assert _session_count(store) == sessions_before and ledger.releases("compas") == ()
    # The live session's people are the released ones, in memory and in the database.
    pd.testing.assert_frame_equal(pp.synthetic_people(synthetic.private_pairs_plan()).cards, released.cards)
    pp._COPIES.pop(released.copy_id, None)
    pd.testing.assert_frame_equal(store.load_copy(released.copy_id).cards, released.cards)
    pd.testing.assert_frame_equal(store.my_assignment(me.token), before)
    # A fresh process (nothing cached) still refuses: the database holds the copy.
    pp._COPIES.pop(released.copy_id, None)
    with pytest.raises(ValueError, match="already exists here with other people"):
        store.import_session(hostile, ledger=ledger)
    # Another database in this process, while the copy is live here, refuses it too.
    store.load_copy(released.copy_id)
    elsewhere = ElicitationStore(f"sqlite:///{tmp_path / 'elsewhere.sqlite'}")
    try:
        with pytest.raises(ValueError, match="already exists here with other people"):
            elsewhere.import_session(hostile, ledger=ledger)
        assert _session_count(elsewhere) == 0 and not elsewhere.has_copy(released.copy_id)
        assert pp.synthetic_people(synthetic.private_pairs_plan()).cards.equals(released.cards)
    finally:
        elsewhere.dispose()


def test_the_process_cache_keeps_the_first_copy_of_an_id(released):
    from core.fairness import private_pairs as pp
    pp._COPIES.pop(released.copy_id, None)
    assert pp.remember_copy(released) is released
    swapped = dataclasses.replace(released, cards=released.cards.iloc[::-1].reset_index(drop=True))
    with pytest.raises(ValueError, match="a copy never changes once made"):
        pp.remember_copy(swapped)
    assert pp.synthetic_people(released.plan) is released
    assert pp.remember_copy(dataclasses.replace(released)) is released       # the same copy again is fine
    sims = [pp.simulated_synthetic_people(pp.PrivatePairsPlan(epsilon=e), np.random.default_rng(3)) for e in (1.0, 2.0)]
    assert sims[0].copy_id != sims[1].copy_id       # one seed, two plans: two ids, never one overwriting the other
