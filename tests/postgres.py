"""PostgreSQL for the store tests: one database per test process, created on first use and dropped when the
session ends, and a schema of its own for each test in it (created and dropped in milliseconds, where a
database took a second or more). ``DASHBOARD_TEST_PG_URL`` names a server and a role that may create
databases (`make postgres` writes one to .venv/test_pg_url); without it the PostgreSQL variants skip.

A test's URL sets the connection's ``search_path`` to its schema (libpq's ``options``), so every connection
made from it (threads, spawned processes, pg_terminate_backend's second connection) sees that test's tables
only; xdist workers and parallel runs each create their own database, so nothing is shared between them."""
from __future__ import annotations

import os
import time
import uuid
import warnings
from contextlib import contextmanager
from typing import Iterator

import pytest

ADMIN_URL = os.environ.get("DASHBOARD_TEST_PG_URL", "")
_made: dict[str, str] = {}           # "name": this process's database, once created


def _admin():
    from sqlalchemy import create_engine, make_url

    from core.database import normalise_url
    url = make_url(normalise_url(ADMIN_URL))
    return url, create_engine(url, isolation_level="AUTOCOMMIT")


def session_database() -> str:
    """This process's test database (created on first use): its URL, with the password."""
    url, admin = _admin()
    try:
        if "name" not in _made:
            name = f"dashboard_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:8]}"
            with admin.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
            _made["name"] = name
        return url.set(database=_made["name"]).render_as_string(hide_password=False)
    finally:
        admin.dispose()


def drop_session_database(attempts: int = 40) -> None:
    """Drop this process's test database, if one was made. FORCE ends the tests' own connections, but not a
    server process of another role (an autovacuum worker that just entered it): that refusal passes within
    moments, so try again; a database still there after that stays on the throwaway test server."""
    name = _made.pop("name", None)
    if name is None:
        return
    from sqlalchemy.exc import DBAPIError

    _, admin = _admin()
    try:
        for _ in range(attempts):
            try:
                with admin.connect() as conn:
                    conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                return
            except DBAPIError:
                time.sleep(0.25)
        warnings.warn(f"test database {name} could not be dropped; it stays on the test server", stacklevel=2)
    finally:
        admin.dispose()


@contextmanager
def schema_url() -> Iterator[str]:
    """A fresh schema in this process's test database: yields a URL whose connections see only it; the
    schema and everything in it are dropped afterwards. Skips the test without ``DASHBOARD_TEST_PG_URL``."""
    if not ADMIN_URL:
        pytest.skip("PostgreSQL variant needs DASHBOARD_TEST_PG_URL")
    from sqlalchemy import create_engine, make_url

    base = make_url(session_database())
    schema = f"t_{uuid.uuid4().hex[:12]}"
    owner = create_engine(base, isolation_level="AUTOCOMMIT")
    with owner.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield base.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    finally:          # a failed test's schema too (the database goes at the session's end in any case)
        with owner.connect() as conn:        # ends what the test left connected to the schema, then drops it
            conn.exec_driver_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                                 "current_database() AND pid <> pg_backend_pid() AND usename = current_user")
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        owner.dispose()
