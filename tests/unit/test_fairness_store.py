"""Session store: concurrency, crash safety, idempotency, access rules, export/import, bad input."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import create_engine, make_url

from core.fairness.elicitation import SessionConfig, aggregate_constraints
from core.fairness.store import SCHEMA_VERSION, ElicitationStore, normalise_url, parse_export

REPO = Path(__file__).resolve().parents[2]
FIFTY = SessionConfig(n_core=2, n_random=48, n_repeat=0, seed=3)


# A PostgreSQL URL whose role may create databases (`make test` starts a local server when run
# as root and sets it); every test gets a database of its own. Without it only SQLite runs.
PG_ADMIN_URL = os.environ.get("DASHBOARD_TEST_PG_URL", "")


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sessions.sqlite'}"
        return
    if not PG_ADMIN_URL:
        pytest.skip("PostgreSQL variant needs DASHBOARD_TEST_PG_URL")
    admin_url = make_url(normalise_url(PG_ADMIN_URL))
    name = f"store_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield admin_url.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    admin.dispose()


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
    with store._write() as conn:          # a transaction left open when the process dies
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
    t0 = time.perf_counter()
    assert fresh.record_answer(login.token, 7, "differ", eid())
    assert time.perf_counter() - t0 < 2.0
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
    with pytest.raises(ValueError, match="join code has 6"):
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
    for k, name in enumerate(["Ann", "Bob", "Cy"]):
        me = store.join(created.join_code, name)
        for p in range(6):
            store.record_answer(me.token, p, responses[(p + k) % 5], eid())
        store.record_answer(me.token, 1, "retract", eid())
    original = store.judgments(created.session_id, created.facilitator_key)
    cols = ["stakeholder", "position", "a", "b", "kind", "response", "revision"]
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
