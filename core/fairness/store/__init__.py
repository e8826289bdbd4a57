"""Elicitation sessions on disk: SQLAlchemy over SQLite (WAL) by default, PostgreSQL by URL.

- ``schema``: tables and numbered migrations (an older database is upgraded in place);
- the engine, transactions and database faults (``StoreUnavailable``) are the project database's
  (``core.database``), shared with the privacy ledger and saved scenarios;
- ``checks``: free text, codes and keys;
- ``sessions``: sessions, stakeholders, cards and answers with per-role access checks;
- ``runs``: the fit-run audit log;
- ``exchange``: export (JSON, guarded CSV) and all-or-nothing import.
"""
from __future__ import annotations

from core.fairness.store.checks import check_name, check_pseudonym, check_reason, check_session_name
from core.database import StoreUnavailable, default_db_url, make_engine, normalise_url
from core.fairness.store.exchange import EXPORT_FORMAT, SessionExchange, parse_export
from core.fairness.store.runs import WITHDRAWN, FitRunLog, code_version, constraint_set_hash, frontier_summary
from core.fairness.store.schema import (MAX_NAME_LENGTH, MAX_NOTE_LENGTH, MAX_REASON_LENGTH,
                                        MAX_SESSION_NAME_LENGTH, SCHEMA_VERSION, judgments)
from core.fairness.store.sessions import (COMPAS_ROWS, JOIN_ALPHABET, JOIN_CODE_LENGTH, MAX_FAILURES_PER_ADDRESS,
                                          MAX_FAILURES_PER_CLIENT,
                                          MAX_FAILURES_TOTAL, CreatedSession, SessionStore, StakeholderLogin,
                                          TooManyAttempts, format_code, normalise_code)


class ElicitationStore(FitRunLog, SessionExchange, SessionStore):
    """Sessions, answers, the fit-run log and export/import over one database."""


_STORES: dict[str, ElicitationStore] = {}


def get_store(url: str | None = None) -> ElicitationStore:
    """One store per database URL in this process (Streamlit sessions share it; connections do not)."""
    url = url or default_db_url()
    if url not in _STORES:
        _STORES[url] = ElicitationStore(url)
    return _STORES[url]


__all__ = ["COMPAS_ROWS", "EXPORT_FORMAT", "JOIN_ALPHABET", "JOIN_CODE_LENGTH", "MAX_FAILURES_PER_ADDRESS", "MAX_FAILURES_PER_CLIENT",
           "MAX_FAILURES_TOTAL", "MAX_NAME_LENGTH", "MAX_NOTE_LENGTH", "MAX_REASON_LENGTH",
           "MAX_SESSION_NAME_LENGTH", "SCHEMA_VERSION", "WITHDRAWN", "CreatedSession", "ElicitationStore",
           "StakeholderLogin", "StoreUnavailable", "TooManyAttempts", "check_name", "check_pseudonym",
           "check_reason", "check_session_name", "code_version", "constraint_set_hash", "default_db_url",
           "format_code", "frontier_summary", "get_store", "judgments", "make_engine", "normalise_url",
           "normalise_code", "parse_export"]
