"""The shared result cache (config digests, data fingerprints, memoisation) and trial fan-out."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core import cache
from core.parallel import map_trials, spawn_rngs


@dataclass(frozen=True)
class _Config:
    epsilon: float
    seed: int
    columns: tuple[str, ...] = ("a", "b")


@dataclass(frozen=True)
class _OtherConfig:
    epsilon: float
    seed: int
    columns: tuple[str, ...] = ("a", "b")


def test_config_digest_is_stable_and_follows_every_field():
    base = cache.config_digest(_Config(1.0, 7))
    assert base == cache.config_digest(_Config(1.0, 7))
    assert len(base) == 64
    assert base != cache.config_digest(_Config(1.5, 7))
    assert base != cache.config_digest(_Config(1.0, 8))
    assert base != cache.config_digest(_Config(1.0, 7, ("a", "c")))
    assert base != cache.config_digest(_OtherConfig(1.0, 7))  # the type is part of the digest
    assert cache.config_digest({"b": 1, "a": 2}) == cache.config_digest({"a": 2, "b": 1})
    assert cache.config_digest({"x": np.float64(0.5)}) == cache.config_digest({"x": 0.5})


def test_data_fingerprint_follows_values_not_identity():
    df = pd.DataFrame({"race": pd.Categorical(["Black", "White", "Asian"]), "count": [3, 5, 8]})
    same = df.copy()
    assert cache.data_fingerprint(df) == cache.data_fingerprint(same)
    changed = df.copy()
    changed.loc[1, "count"] = 6
    assert cache.data_fingerprint(df) != cache.data_fingerprint(changed)
    renamed = df.rename(columns={"count": "n"})
    assert cache.data_fingerprint(df) != cache.data_fingerprint(renamed)
    arr = np.arange(6.0)
    assert cache.data_fingerprint(arr) == cache.data_fingerprint(arr.copy())
    assert cache.data_fingerprint(arr) != cache.data_fingerprint(arr.reshape(2, 3))
    bumped = arr.copy()
    bumped[3] += 1e-9
    assert cache.data_fingerprint(arr) != cache.data_fingerprint(bumped)


CALLS: list[float] = []


def _expensive(x: float, config: _Config) -> float:
    CALLS.append(x)
    return x * config.epsilon


def test_cached_function_runs_once_per_distinct_input(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path))
    fast = cache.cached_call(_expensive)
    CALLS.clear()
    assert fast(2.0, _Config(3.0, 1)) == 6.0
    assert fast(2.0, _Config(3.0, 1)) == 6.0
    assert CALLS == [2.0]  # second call served from disk
    assert fast(2.0, _Config(4.0, 1)) == 8.0
    assert CALLS == [2.0, 2.0]  # a changed config is a new entry
    assert (tmp_path / "joblib" / cache.code_digest()).is_dir()


def test_cache_folder_is_private_to_its_user_and_a_planted_folder_is_refused(tmp_path, monkeypatch):
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(fresh))
    assert cache.cached_call(_expensive)(1.0, _Config(2.0, 0)) == 2.0
    assert fresh.stat().st_mode & 0o777 == 0o700 and (fresh / "joblib").stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    (shared / "joblib").mkdir(parents=True)
    for folder in (shared, shared / "joblib"):
        folder.chmod(0o777)                   # as a loose umask or a careless chmod leaves them
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(shared))
    assert cache.cached_call(_expensive)(1.0, _Config(2.0, 0)) == 2.0
    assert shared.stat().st_mode & 0o077 == 0 and (shared / "joblib").stat().st_mode & 0o077 == 0
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)                     # anyone may rename what is inside (no sticky bit)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(open_dir / "cache"))
    with pytest.raises(ValueError, match="anyone can write to"):
        cache.cached_call(_expensive)(1.0, _Config(2.0, 0))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)        # another user's folder
        monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(theirs))
        with pytest.raises(ValueError, match="belongs to another user"):
            cache.cached_call(_expensive)(1.0, _Config(2.0, 0))


def _planted(joblib: Path) -> dict[str, Path]:
    """What another local user could have left in a cache folder while it was open: a pickle, a folder of
    them, and a link out of the folder (the user's own entry beside them)."""
    (joblib / "theirs").mkdir(parents=True)
    planted = {"file": joblib / "output.pkl", "folder": joblib / "theirs", "inner": joblib / "theirs" / "output.pkl",
               "link": joblib / "elsewhere", "mine": joblib / "mine.pkl"}
    for key in ("file", "inner", "mine"):
        planted[key].write_bytes(b"not a result")
    planted["link"].symlink_to(planted["mine"])
    for key in ("file", "folder", "inner"):
        os.chown(planted[key], 65534, 65534)
    return planted


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another user needs root")
def test_entries_another_user_planted_are_dropped_before_any_is_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    planted = _planted(tmp_path / "cache" / "joblib")
    cache.forget_checked_folders()
    assert cache.cached_call(_expensive)(1.0, _Config(2.0, 0)) == 2.0
    assert [k for k, path in planted.items() if os.path.lexists(path)] == ["mine"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another user needs root")
def test_a_planted_folder_that_cannot_be_emptied_refuses_the_cache(tmp_path, monkeypatch):
    """A server that is not root cannot empty a folder another user owns: the cache is then refused with a
    ValueError, never used with the planted pickles still inside."""
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    planted = _planted(tmp_path / "cache" / "joblib")
    cache.forget_checked_folders()
    monkeypatch.setattr(cache.shutil, "rmtree", lambda path, ignore_errors=False: None)   # permission denied
    with pytest.raises(ValueError, match="could not remove"):
        cache.cached_call(_expensive)(1.0, _Config(2.0, 0))
    assert planted["inner"].exists()
    with pytest.raises(ValueError, match="could not remove"):     # and not on a second try either
        cache.cached_call(_expensive)(1.0, _Config(2.0, 0))


def test_code_digest_follows_source_changes(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("X = 1\n")
    (package / "sub" / "b.py").write_text("Y = 2\n")
    before = cache.code_digest(package)
    cache._code_digests.clear()
    assert cache.code_digest(package) == before          # same files, same digest
    (package / "sub" / "b.py").write_text("Y = 3\n")
    cache._code_digests.clear()
    after = cache.code_digest(package)
    assert after != before and len(after) == 16         # an edited helper moves the cache folder
    cache._code_digests.clear()


def _seeded_sum(rng: np.random.Generator) -> float:
    return float(rng.normal(size=100).sum())


def _square(x: int) -> int:
    return x * x


def test_map_trials_keeps_order_and_reports_progress():
    seen: list[tuple[int, int, str]] = []
    out = map_trials(_square, list(range(7)), n_jobs=1, progress=lambda d, t, msg: seen.append((d, t, msg)),
                     label="squares")
    assert out == [i * i for i in range(7)]
    assert [s[0] for s in seen] == list(range(1, 8))
    assert all(s[1] == 7 and s[2] == "squares" for s in seen)


def test_parallel_results_equal_serial_results_for_spawned_rngs():
    serial = map_trials(_seeded_sum, spawn_rngs(np.random.default_rng(42), 6), n_jobs=1)
    calls: list[int] = []
    parallel = map_trials(_seeded_sum, spawn_rngs(np.random.default_rng(42), 6), n_jobs=2,
                          progress=lambda d, t, msg: calls.append(d))
    assert parallel == serial
    assert calls == list(range(1, 7))
    assert len(set(serial)) == 6  # the children are independent streams, not copies


def test_spawn_rngs_is_deterministic_and_handles_unseeded_bit_generators():
    a = [g.integers(1 << 30) for g in spawn_rngs(np.random.default_rng(5), 3)]
    b = [g.integers(1 << 30) for g in spawn_rngs(np.random.default_rng(5), 3)]
    assert a == b
    legacy = np.random.Generator(np.random.MT19937(3))
    assert len(spawn_rngs(legacy, 4)) == 4


def test_map_trials_on_empty_input():
    assert map_trials(_square, [], n_jobs=2) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting another user's file needs root")
def test_a_result_planted_by_another_user_while_the_folder_was_open_is_never_loaded(tmp_path, monkeypatch):
    """The attacker's view: the cache folder was world-writable for a while and another local user
    replaced a cached result with their own pickle. Once the folder is made private the planted file
    is still there; it must be thrown away (and the result computed again), never unpickled."""
    import pickle

    folder = tmp_path / "cache"
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(folder))
    fast = cache.cached_call(_expensive)
    CALLS.clear()
    assert fast(5.0, _Config(2.0, 0)) == 10.0
    [output] = list(folder.rglob("output.pkl"))
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o777)                      # the window in which anyone could write there
    output.write_bytes(pickle.dumps(-1.0))     # the planted answer ...
    os.chown(output, 65534, 65534)             # ... owned by its author
    cache.forget_checked_folders()             # a server started after the folder was opened
    assert fast(5.0, _Config(2.0, 0)) == 10.0  # recomputed, not the planted -1.0
    assert CALLS == [5.0, 5.0]
    assert all(p.stat().st_uid == os.getuid() for p in folder.rglob("*"))
