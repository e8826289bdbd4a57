"""One budget per population, by content: the attacker re-encodes the same rows (columns reordered, numbers
written with separators, Parquet instead of CSV, one byte changed, columns added, a 15% subset, rows
shuffled), or points at the same Parquet parts through a symlinked folder, and the rows must still be
recognised as a declared data set's. A table that shares no rows is not flagged; nothing readable is stored."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import create_engine, text

from core.contracts import bytes_fingerprint
from core.intake import draft_schema, read_table, read_table_bytes
from core.intake.folder import check_folder, list_folder
from core.intake.identity import (K, PopulationSketch, column_terms, compare, frame_sketches, installation_secret,
                                  match, overlap, relation)
from core.intake.schema import DEFAULT_MISSING_TOKENS, ColumnSchema, DataSchema
from core.intake.store import DataSetStore
from core.privacy.population import PopulationAnswers, related

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "messy_county.csv"
TOKENS = tuple(DEFAULT_MISSING_TOKENS)
SECRET = bytes(range(32))
SHARES_ROWS = {"same", "subset", "superset"}


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return read_table(FIXTURE)


@pytest.fixture(scope="module")
def declared(frame):
    """The declared data set's stored sketches."""
    return frame_sketches(frame, TOKENS, SECRET)


def _relation_to(declared, table: pd.DataFrame) -> str:
    found = match(column_terms(table, TOKENS, SECRET), {"County survey": declared}, SECRET)
    return found["County survey"].relation if "County survey" in found else "not comparable"


def _csv(table: pd.DataFrame) -> pd.DataFrame:
    return read_table_bytes(table.to_csv(index=False).encode(), "again.csv")


def _with_separators(table: pd.DataFrame) -> pd.DataFrame:
    """Income written as "45,000" where the declared file wrote 45000 (and the reverse)."""
    out = table.copy()
    numbers = pd.to_numeric(out["income"].str.replace(",", "").str.replace("$", ""), errors="coerce")
    written = numbers.map(lambda x: f"{x:,.0f}" if pd.notna(x) and float(x).is_integer() else None)
    out["income"] = written.where(written.notna(), out["income"])
    return out


def test_re_encodings_of_the_same_rows_are_the_same_population(frame, declared):
    raw = FIXTURE.read_bytes()
    parquet = io.BytesIO()
    frame.to_parquet(parquet, index=False)
    variants = {
        "columns reordered": frame[list(reversed(frame.columns))],
        "rows shuffled": frame.sample(frac=1.0, random_state=7),
        "numbers with separators": _csv(_with_separators(frame)),
        "Parquet": read_table_bytes(parquet.getvalue(), "again.parquet"),
        "CRLF line endings": read_table_bytes(raw.replace(b"\n", b"\r\n"), "again.csv"),
        "one byte changed": read_table_bytes(raw.replace(b"P00001,Male,36", b"P00001,Male,37", 1), "again.csv"),
        "header spacing and case": frame.rename(columns=lambda c: f" {c.upper()} "),
    }
    for what, table in variants.items():
        assert _relation_to(declared, table) == "same", what


def test_two_added_columns_a_dropped_column_and_a_subset_are_recognised(frame, declared):
    rng = np.random.default_rng(3)
    wider = frame.assign(weight=rng.random(len(frame)).round(4).astype(str), batch="B7")
    assert _relation_to(declared, wider) == "same"                  # measured on the declared columns
    narrower = frame.drop(columns=["hours_per_week"])
    assert _relation_to(declared, narrower) == "same"               # measured without the column left out
    subset = frame.sample(frac=0.15, random_state=11)
    assert _relation_to(declared, subset) == "subset"
    both = subset.assign(extra=1)[list(reversed([*subset.columns, "extra"]))]
    assert _relation_to(declared, both) == "subset"


def test_a_table_that_shares_no_rows_is_not_flagged(frame, declared):
    rng = np.random.default_rng(5)
    other = frame.copy()
    for column in other.columns:                                     # every column shuffled on its own
        other[column] = other[column].to_numpy()[rng.permutation(len(other))]
    assert _relation_to(declared, other) == "different"
    assert _relation_to(declared, frame[["sex", "county"]]) == "not comparable"   # most columns missing


def test_containment_from_sketches_is_the_share_of_rows_held(frame):
    """Half of a table's rows in another: the estimate from the two bottom-k sketches is close to 1/2 one way
    and 1 the other (sampling error of K values: well within 0.1)."""
    big = pd.concat([frame.assign(copy=str(i)) for i in range(4)], ignore_index=True)   # 14,000 distinct rows
    half = big.iloc[: len(big) // 2]
    a, b = frame_sketches(half, TOKENS, SECRET)[0], frame_sketches(big, TOKENS, SECRET)[0]
    found = overlap(a, b)
    assert found.new_in_old == pytest.approx(1.0)
    assert found.old_in_new == pytest.approx(0.5, abs=0.1)
    assert relation(found.new_in_old, found.old_in_new) == "subset"
    assert a.hashes.size == K and b.hashes.size == K


def test_the_same_parquet_parts_through_a_symlinked_folder_are_the_same_population(frame, tmp_path, declared):
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, chunk in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[chunk].to_parquet(parts / f"part-{i}.parquet", index=False)
    linked = tmp_path / "linked"
    linked.symlink_to(parts, target_is_directory=True)
    links = tmp_path / "links"                                       # a folder of symlinks to the parts
    links.mkdir()
    for part in parts.iterdir():
        (links / f"renamed-{part.name}").symlink_to(part)
    schema = draft_schema(frame, "County parts")
    checks = {name: check_folder(list_folder(path), schema, SECRET, n_jobs=1)
              for name, path in {"parts": parts, "linked": linked, "links": links}.items()}
    for name, checked in checks.items():
        assert compare(checked.sketches, declared).relation == "same", name       # same as the uploaded file
        assert compare(checked.sketches, checks["parts"].sketches).relation == "same", name
    assert list_folder(links).parts == tuple(str(p.resolve()) for p in sorted(parts.iterdir()))


def test_sketches_are_keyed_bounded_and_kept_by_data_set(frame, tmp_path):
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    store = DataSetStore(url)
    store.save(draft_schema(frame, "County survey"))
    mine = frame_sketches(frame, TOKENS, SECRET)
    store.save_sketches("County survey", "f" * 64, mine)
    back = store.sketches()["County survey"]
    assert [s.columns for s in back] == [s.columns for s in mine]
    assert all(np.array_equal(a.hashes, b.hashes) for a, b in zip(back, mine))
    assert all(s.hashes.size <= K for s in back)                     # bounded, whatever the table's size
    other_key = frame_sketches(frame, TOKENS, bytes(32))[0]          # another installation's secret
    assert overlap(other_key, mine[0]).new_in_old == 0.0              # the values mean nothing without the key
    with pytest.raises(ValueError, match="save its schema first"):
        store.save_sketches("Nobody", "f" * 64, mine)
    store.delete("County survey")
    assert store.sketches() == {}
    store.dispose()


def test_the_installation_secret_is_made_once_and_kept_private(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DASHBOARD_IDENTITY_SECRET", raising=False)
    first = installation_secret()
    assert installation_secret() == first and len(first) == 32
    assert (tmp_path / "data" / "installation.key").stat().st_mode & 0o077 == 0
    monkeypatch.setenv("DASHBOARD_IDENTITY_SECRET", "ab" * 32)
    assert installation_secret() == bytes.fromhex("ab" * 32)
    monkeypatch.setenv("DASHBOARD_IDENTITY_SECRET", "not hex")
    with pytest.raises(ValueError, match="hexadecimal"):
        installation_secret()


def test_a_sketch_round_trips_through_bytes():
    sketch = PopulationSketch(("b", "a"), np.array([5, 3, 9, 3], dtype=np.uint64))
    assert sketch.columns == ("a", "b") and sketch.hashes.tolist() == [3, 5, 9]
    back = PopulationSketch.from_bytes(sketch.columns, sketch.to_bytes())
    assert back.columns == sketch.columns and back.hashes.tolist() == [3, 5, 9]


def test_related_names_each_data_set_sharing_rows_closest_first(frame, declared):
    subset = frame.sample(frac=0.15, random_state=1)
    overlaps = match(column_terms(subset, TOKENS, SECRET),
                     {"Whole": declared, "Self": frame_sketches(subset, TOKENS, SECRET)}, SECRET)
    found = related(overlaps, exclude="Self")
    assert [(m.name, m.relation) for m in found] == [("Whole", "subset")]
    assert "subset" in found[0].words


def test_answers_written_before_relations_and_curators_gain_those_columns(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE population_answers (id INTEGER PRIMARY KEY, new_name VARCHAR(200) NOT NULL, "
                          "compared_name VARCHAR(200) NOT NULL, answer VARCHAR(12) NOT NULL, fingerprint VARCHAR(64) "
                          "NOT NULL DEFAULT '', answered_utc VARCHAR(32) NOT NULL)"))
        conn.execute(text("INSERT INTO population_answers (new_name, compared_name, answer, fingerprint, answered_utc)"
                          " VALUES ('B', 'A', 'different', 'f', '2026-01-01T00:00:00+00:00')"))
    engine.dispose()
    answers = PopulationAnswers(url)
    frame = answers.different()
    assert list(zip(frame["new_name"], frame["compared_name"], frame["curator"], frame["relation"])) == [
        ("B", "A", "local", "")]
    answers.dispose()


def test_a_declared_file_is_kept_on_the_server_for_its_curator_until_removed(frame, tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DATA_DIR", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'project.sqlite'}"
    raw = FIXTURE.read_bytes()
    fp = bytes_fingerprint(raw)
    store = DataSetStore(url)
    for name in ("County survey", "County copy"):
        store.save(draft_schema(frame, name))
        store.keep_file(name, raw, "messy_county.csv", fp)
    with pytest.raises(ValueError, match="save its schema first"):
        store.keep_file("Nobody", raw, "x.csv", fp)
    again = DataSetStore(url)                                         # a restart: read back from the database
    assert again.kept("County survey") == ("messy_county.csv", raw)
    assert again.kept_names() == ["County copy", "County survey"] and again.kept_names("someone else") == []
    assert again.remove_file("County survey") and again.kept("County survey") is None
    assert again.kept("County copy") == ("messy_county.csv", raw)      # the same bytes, still used by the copy
    again.delete("County copy")
    assert not (tmp_path / "data" / "kept" / fp).exists()              # removed once nothing uses it
    store.dispose()
    again.dispose()


def test_two_curators_keep_their_own_file_of_one_data_set(tmp_path):
    """Curator B filing a file under A's data set keeps it for B; A's kept file stays A's (it used to be replaced,
    and A lost the data set from every page after a reload)."""
    from core.intake.store import DataSetStore

    store = DataSetStore(f"sqlite:///{tmp_path / 'kept.sqlite'}")
    raw_a, raw_b = b"person_id,age\n1,30\n", b"person_id;age\n1;30\n"
    fp_a, fp_b = (bytes_fingerprint(r) for r in (raw_a, raw_b))
    store.save(DataSchema("Shared county", (ColumnSchema("age", "number"),)))
    store.keep_file("Shared county", raw_a, "a.csv", fp_a, curator="Ada")
    store.keep_file("Shared county", raw_b, "b.csv", fp_b, curator="Grace")
    assert store.kept("Shared county", "Ada") == ("a.csv", raw_a)
    assert store.kept("Shared county", "Grace") == ("b.csv", raw_b)
    assert store.kept_names("Ada") == store.kept_names("Grace") == ["Shared county"]
    assert store.remove_file("Shared county", "Grace") and store.kept("Shared county", "Ada") == ("a.csv", raw_a)


def test_a_recoded_column_still_meets_the_declared_rows_on_the_other_columns(frame, declared):
    """The same people with one column written another way ("M" for "Male") share every other column: compared on
    the declared sets with one column left out, they are the same population, not a fresh budget."""
    recoded = frame.assign(sex=frame["sex"].astype(str).str[:1])
    assert _relation_to(declared, recoded) == "same"


def test_the_store_records_who_declared_a_data_set_and_who_read_each_file_and_older_tables_read_as_local(tmp_path):
    import sqlite3

    from core.database import LOCAL_CURATOR
    from core.intake.store import DataSetStore

    path = tmp_path / "declared.sqlite"
    store = DataSetStore(f"sqlite:///{path}")
    store.save(DataSchema("Older set", (ColumnSchema("age", "number"),)))
    store.add_version("Older set", "a" * 64, "old.csv")
    store.dispose()
    with sqlite3.connect(path) as conn:                      # the tables as an older version wrote them
        for table in ("intake_data_sets", "intake_data_set_versions"):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN curator")
    again = DataSetStore(f"sqlite:///{path}")
    again.save(DataSchema("New set", (ColumnSchema("age", "number"),)), curator="Ada")
    again.add_version("New set", "b" * 64, "new.csv", curator="Ada")
    assert again.versions("Older set")["curator"].tolist() == [LOCAL_CURATOR]
    assert again.versions("New set")["curator"].tolist() == ["Ada"]
    with sqlite3.connect(path) as conn:
        assert dict(conn.execute("SELECT name, curator FROM intake_data_sets")) == {"Older set": LOCAL_CURATOR,
                                                                                   "New set": "Ada"}
