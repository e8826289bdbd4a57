"""Declared data sets kept by name in the project database, with the files (versions) read under each.

A :class:`DataSetStore` opens the project database (``DASHBOARD_DB_URL``, SQLite by default,
PostgreSQL by URL) through :class:`core.database.Database`, like saved scenarios and the privacy
ledger, so database faults reach the page as plain-language ``ValueError`` s and a deleted or
replaced SQLite file refuses writes. What is stored is public: the schema as its versioned JSON
(:meth:`core.intake.DataSchema.to_dict`) and, per data set, the fingerprints and file names of the
files it was read from. Never the data.

- ``save(schema)`` keeps a schema under its name; a name already saved with a different
  declaration is refused unless ``replace=True`` (saving the same declaration again changes nothing,
  so a rerun saves once);
- ``add_version(name, fingerprint, file_name)`` records a file read under a data set (again: nothing
  changes); ``versions(name)`` lists them oldest first; ``find_by_fingerprint`` says which data set a
  file was already declared under;
- ``save_folder(name, folder)`` records that a saved data set is read from a folder of Parquet parts on
  this machine (``core.intake.folder``), ``folder(name)`` gives that path back (None for an upload);
- ``save_sketches(name, source, sketches)`` keeps the population sketches (``core.intake.identity``: a
  bounded set of keyed row hashes per column set, nothing readable) of one file or folder read under a data
  set, ``sketches()`` gives every data set's, so a new table is compared by content with each of them;
- ``keep_file(name, raw, file_name)`` keeps the file a data set is read from on the server, under the
  project's data folder (``core.intake.identity.data_folder``), for its curator, until ``remove_file``:
  ``kept(name)`` gives ``(file_name, bytes)`` back after a reload or a restart, ``kept_names(curator)``
  the data sets a curator has files for. There is no curator login yet: every row says ``LOCAL_CURATOR``,
  and the column is there for a login to fill.
"""
from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime, timezone

from pathlib import Path

import pandas as pd
from sqlalchemy import (Column, Integer, LargeBinary, MetaData, String, Table, Text, UniqueConstraint, delete, insert, inspect,
                        select)
from sqlalchemy.exc import IntegrityError

from core.database import LOCAL_CURATOR, TableStore
from core.intake.identity import PopulationSketch, data_folder
from core.intake.schema import DataSchema

__all__ = ["DataSetStore", "LOCAL_CURATOR", "MAX_DATA_SET_NAME", "MAX_FILE_NAME", "MAX_FOLDER", "VERSION_COLUMNS",
           "check_data_set_name"]

MAX_DATA_SET_NAME = 120
MAX_FILE_NAME = 255
MAX_FOLDER = 1_000
VERSION_COLUMNS = ("fingerprint", "file_name", "added_utc", "curator")
FINGERPRINT = re.compile(r"[0-9a-f]{64}")

metadata = MetaData()

data_sets = Table(
    "intake_data_sets", metadata,
    Column("name", String(MAX_DATA_SET_NAME), primary_key=True),
    Column("schema_json", Text, nullable=False),
    Column("saved_utc", String(40), nullable=False),
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),    # who declared it
)

data_set_versions = Table(
    "intake_data_set_versions", metadata,
    Column("version_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(MAX_DATA_SET_NAME), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("file_name", String(MAX_FILE_NAME), nullable=False),
    Column("added_utc", String(40), nullable=False),
    Column("curator", String(120), nullable=False, server_default=LOCAL_CURATOR),    # who read it under the set
    UniqueConstraint("name", "fingerprint", name="uq_intake_version"),
)

data_set_folders = Table(      # a data set read from a folder of Parquet parts where it lives
    "intake_data_set_folders", metadata,
    Column("name", String(MAX_DATA_SET_NAME), primary_key=True),
    Column("folder", String(MAX_FOLDER), nullable=False),
    Column("saved_utc", String(40), nullable=False),
)


data_set_sketches = Table(     # population sketches of each file or folder read under a data set
    "intake_data_set_sketches", metadata,
    Column("sketch_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(MAX_DATA_SET_NAME), nullable=False, index=True),
    Column("source", String(80), nullable=False),
    Column("columns_json", Text, nullable=False),
    Column("hashes", LargeBinary, nullable=False),
    Column("saved_utc", String(40), nullable=False),
)

data_set_files = Table(        # the file a data set is read from, kept on the server for each curator
    "intake_data_set_files", metadata,
    Column("name", String(MAX_DATA_SET_NAME), primary_key=True),
    Column("curator", String(120), primary_key=True, server_default=LOCAL_CURATOR),
    Column("fingerprint", String(64), nullable=False),
    Column("file_name", String(MAX_FILE_NAME), nullable=False),
    Column("kept_utc", String(40), nullable=False),
)


def kept_folder() -> Path:
    """Where kept files live: ``kept/`` in the project's data folder."""
    folder = data_folder() / "kept"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _kept_path(fingerprint: str) -> Path:
    return kept_folder() / fingerprint


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_data_set_name(name: str) -> str:
    """A data set's name trimmed; ValueError when empty, too long or holding control characters."""
    if not isinstance(name, str):
        raise ValueError(f"A data set's name is text, not {type(name).__name__}.")
    name = unicodedata.normalize("NFC", name).strip()
    if not name:
        raise ValueError("Name the data set.")
    if len(name) > MAX_DATA_SET_NAME:
        raise ValueError(f"Data set names are at most {MAX_DATA_SET_NAME} characters; shorten it.")
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        raise ValueError("A data set's name cannot hold control or invisible characters; use plain text.")
    return name


def _schema_text(schema: DataSchema) -> str:
    return json.dumps(schema.to_dict(), sort_keys=True, separators=(",", ":"))


class DataSetStore(TableStore):
    """Declared data sets (schemas by name) and the versions of their files, in one database."""

    metadata = metadata

    def __init__(self, url: str | None = None, engine=None):
        super().__init__(url, engine)
        guard = "" if self.db.is_sqlite else "IF NOT EXISTS "       # two servers may migrate at once
        for table in (data_sets.name, data_set_versions.name):      # tables written before curators
            if "curator" not in {c["name"] for c in inspect(self.engine).get_columns(table)}:
                with self._write() as conn:
                    conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {guard}curator VARCHAR(120) NOT NULL "
                                         f"DEFAULT '{LOCAL_CURATOR}'")

    # ---------------------------------------------------------------- schemas
    def save(self, schema: DataSchema, *, replace: bool = False, curator: str = LOCAL_CURATOR) -> str:
        """Keep ``schema`` under its name, declared by ``curator``; returns the name. The same declaration again
        changes nothing; a different one under a saved name is a ValueError unless ``replace`` is True."""
        if not isinstance(schema, DataSchema):
            raise ValueError(f"save takes a DataSchema, not {type(schema).__name__}.")
        name = check_data_set_name(schema.name)
        if name != schema.name:
            schema = schema.replace(name=name)
        text = _schema_text(schema)
        taken = ValueError(f"A data set named {name!r} is already saved with another declaration. Choose "
                           "another name, or confirm that this declaration replaces it.")
        try:
            with self._write() as conn:
                earlier = conn.execute(select(data_sets.c.schema_json).where(data_sets.c.name == name)
                                       ).scalar_one_or_none()
                if earlier == text:
                    return name
                if earlier is not None and not replace:
                    raise taken
                conn.execute(delete(data_sets).where(data_sets.c.name == name))
                conn.execute(insert(data_sets).values(name=name, schema_json=text, saved_utc=_now(),
                                                      curator=(curator or LOCAL_CURATOR)[:120]))
        except IntegrityError as err:   # another session saved the name between our read and insert
            raise taken from err
        return name

    def get(self, name: str) -> DataSchema | None:
        """The schema saved as ``name``, or None."""
        with self._read() as conn:
            text = conn.execute(select(data_sets.c.schema_json).where(data_sets.c.name == str(name).strip())
                                ).scalar_one_or_none()
        return None if text is None else DataSchema.from_dict(json.loads(text))

    def names(self) -> list[str]:
        """Every saved data set's name, sorted."""
        with self._read() as conn:
            return sorted(conn.execute(select(data_sets.c.name)).scalars())

    def delete(self, name: str) -> bool:
        """Forget a data set and its versions; True if there was one."""
        name = str(name).strip()
        with self._write() as conn:
            gone = conn.execute(delete(data_sets).where(data_sets.c.name == name)).rowcount
            conn.execute(delete(data_set_versions).where(data_set_versions.c.name == name))
            conn.execute(delete(data_set_folders).where(data_set_folders.c.name == name))
            conn.execute(delete(data_set_sketches).where(data_set_sketches.c.name == name))
        self.remove_file(name, curator=None)
        return bool(gone)

    # ---------------------------------------------------------------- population sketches
    def save_sketches(self, name: str, source: str, sketches) -> None:
        """Keep the population sketches of one file or folder (``source``: its fingerprint) read under the
        saved data set ``name``, replacing those of the same source."""
        name, source = str(name).strip(), str(source)[:80]
        rows = [{"name": name, "source": source, "columns_json": json.dumps(list(s.columns)),
                 "hashes": s.to_bytes(), "saved_utc": _now()} for s in sketches]
        c = data_set_sketches.c
        with self._write() as conn:
            if conn.execute(select(data_sets.c.name).where(data_sets.c.name == name)).first() is None:
                raise ValueError(f"No data set named {name!r} is saved; save its schema first.")
            conn.execute(delete(data_set_sketches).where((c.name == name) & (c.source == source)))
            if rows:
                conn.execute(insert(data_set_sketches), rows)

    def sketches(self) -> dict[str, list[PopulationSketch]]:
        """Every saved data set's population sketches (of all its sources), by name."""
        c = data_set_sketches.c
        with self._read() as conn:
            rows = conn.execute(select(c.name, c.columns_json, c.hashes).order_by(c.sketch_id)).all()
        out: dict[str, list[PopulationSketch]] = {}
        for name, columns, hashes in rows:
            out.setdefault(name, []).append(PopulationSketch.from_bytes(json.loads(columns), bytes(hashes)))
        return out

    # ---------------------------------------------------------------- kept files
    def keep_file(self, name: str, raw: bytes, file_name: str, fingerprint: str, *,
                  curator: str = LOCAL_CURATOR) -> None:
        """Keep ``raw`` (whose SHA-256 is ``fingerprint``) on the server as the file the saved data set ``name``
        is read from, for ``curator``; replaces the file that curator kept for it before (another curator's
        file for the same data set stays theirs)."""
        name = str(name).strip()
        if not FINGERPRINT.fullmatch(str(fingerprint)):
            raise ValueError("A file's fingerprint is its SHA-256 as 64 lower-case hexadecimal digits.")
        path = _kept_path(fingerprint)
        if not path.exists():
            partial = path.with_suffix(".partial")
            partial.write_bytes(bytes(raw))
            partial.replace(path)
        with self._write() as conn:
            if conn.execute(select(data_sets.c.name).where(data_sets.c.name == name)).first() is None:
                raise ValueError(f"No data set named {name!r} is saved; save its schema first.")
            curator = str(curator)[:120] or LOCAL_CURATOR
            conn.execute(delete(data_set_files).where((data_set_files.c.name == name)
                                                      & (data_set_files.c.curator == curator)))
            conn.execute(insert(data_set_files).values(name=name, curator=curator,
                                                       fingerprint=fingerprint,
                                                       file_name=str(file_name or "")[:MAX_FILE_NAME],
                                                       kept_utc=_now()))

    def kept(self, name: str, curator: str = LOCAL_CURATOR) -> tuple[str, bytes] | None:
        """``(file_name, bytes)`` of the file ``curator`` keeps for ``name``, or None (none kept, or removed
        from disk)."""
        c = data_set_files.c
        with self._read() as conn:
            row = conn.execute(select(c.fingerprint, c.file_name).where(
                (c.name == str(name).strip()) & (c.curator == str(curator)))).first()
        if row is None or not _kept_path(row[0]).is_file():
            return None
        return row[1], _kept_path(row[0]).read_bytes()

    def kept_names(self, curator: str = LOCAL_CURATOR) -> list[str]:
        """The data sets ``curator`` keeps a file for, sorted."""
        c = data_set_files.c
        with self._read() as conn:
            return sorted(conn.execute(select(c.name).where(c.curator == str(curator))).scalars())

    def remove_file(self, name: str, curator: str | None = LOCAL_CURATOR) -> bool:
        """Forget the file ``curator`` keeps for ``name`` (every curator's with None) and delete it from disk
        when nothing else uses it; True if there was one."""
        c = data_set_files.c
        which = c.name == str(name).strip()
        if curator is not None:
            which = which & (c.curator == str(curator))
        with self._write() as conn:
            fps = set(conn.execute(select(c.fingerprint).where(which)).scalars())
            if not fps:
                return False
            conn.execute(delete(data_set_files).where(which))
            used = set(conn.execute(select(c.fingerprint).where(c.fingerprint.in_(fps))).scalars())
        for fp in fps - used:
            _kept_path(fp).unlink(missing_ok=True)
        return True

    # ---------------------------------------------------------------- folders of parts
    def save_folder(self, name: str, folder: str) -> None:
        """Record that the saved data set ``name`` is read from the folder of Parquet parts ``folder`` (a path
        on this machine; replaces an earlier path). ValueError when no such data set is saved."""
        name = str(name).strip()
        folder = str(folder or "").strip()
        if not folder or len(folder) > MAX_FOLDER:
            raise ValueError(f"Give the folder's path (at most {MAX_FOLDER} characters).")
        with self._write() as conn:
            if conn.execute(select(data_sets.c.name).where(data_sets.c.name == name)).first() is None:
                raise ValueError(f"No data set named {name!r} is saved; save its schema first.")
            conn.execute(delete(data_set_folders).where(data_set_folders.c.name == name))
            conn.execute(insert(data_set_folders).values(name=name, folder=folder, saved_utc=_now()))

    def folder(self, name: str) -> str | None:
        """The folder of parts the data set ``name`` is read from, or None (an uploaded file, or no such set)."""
        with self._read() as conn:
            return conn.execute(select(data_set_folders.c.folder).where(data_set_folders.c.name == str(name).strip())
                                ).scalar_one_or_none()

    def folder_names(self) -> list[str]:
        """The saved data sets read from a folder of parts, sorted."""
        with self._read() as conn:
            return sorted(conn.execute(select(data_set_folders.c.name)).scalars())

    # ---------------------------------------------------------------- versions
    def add_version(self, name: str, fingerprint: str, file_name: str, curator: str = LOCAL_CURATOR) -> None:
        """Record that ``curator`` read the file with ``fingerprint`` under the data set ``name`` (which must
        be saved). Recording the same file again changes nothing."""
        name = str(name).strip()
        if not isinstance(fingerprint, str) or not FINGERPRINT.fullmatch(fingerprint):
            raise ValueError("A file's fingerprint is its SHA-256 as 64 lower-case hexadecimal digits "
                             "(core.contracts.bytes_fingerprint).")
        file_name = str(file_name or "").strip()[:MAX_FILE_NAME]
        same = (data_set_versions.c.name == name) & (data_set_versions.c.fingerprint == fingerprint)
        try:
            with self._write() as conn:
                if conn.execute(select(data_sets.c.name).where(data_sets.c.name == name)).first() is None:
                    raise ValueError(f"No data set named {name!r} is saved; save its schema first.")
                if conn.execute(select(data_set_versions.c.version_id).where(same)).first() is not None:
                    return
                conn.execute(insert(data_set_versions).values(name=name, fingerprint=fingerprint,
                                                              file_name=file_name, added_utc=_now(),
                                                              curator=(curator or LOCAL_CURATOR)[:120]))
        except IntegrityError:   # the same file recorded by another session at the same moment
            return

    def versions(self, name: str) -> pd.DataFrame:
        """The files read under ``name``, oldest first: fingerprint, file_name, added_utc, curator."""
        query = select(data_set_versions.c.fingerprint, data_set_versions.c.file_name,
                       data_set_versions.c.added_utc, data_set_versions.c.curator).where(data_set_versions.c.name == str(name).strip()
                                                            ).order_by(data_set_versions.c.version_id)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return pd.DataFrame([tuple(r) for r in rows], columns=list(VERSION_COLUMNS))

    def find_by_fingerprint(self, fingerprint: str) -> str | None:
        """The data set a file with this fingerprint was first recorded under, or None."""
        query = select(data_set_versions.c.name).where(data_set_versions.c.fingerprint == str(fingerprint)
                                                       ).order_by(data_set_versions.c.version_id).limit(1)
        with self._read() as conn:
            return conn.execute(query).scalar_one_or_none()
