"""One on-disk result cache for every tool (joblib.Memory keyed on plan digest + data fingerprint).

Results live under a folder named after a digest of the ``core`` source, so a code change never
serves a result computed by older code (joblib alone only watches the decorated function).
``@cached`` wraps an area's ``run(plan, data=None, *, progress=None)``; ``cached_call`` memoises
any pure function of hashable arguments (progress callbacks are never part of a key).
"""
from __future__ import annotations

import functools
import inspect
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from joblib import Memory

from core.contracts import bytes_fingerprint, digest_of

REPO_ROOT = Path(__file__).resolve().parent.parent
CORE_DIR = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Directory of the result cache: ``DASHBOARD_CACHE_DIR`` or ``.cache/`` in the repository."""
    return Path(os.environ.get("DASHBOARD_CACHE_DIR", REPO_ROOT / ".cache"))


_memory: Memory | None = None
_code_digests: dict[Path, str] = {}


def code_digest(root: Path = CORE_DIR) -> str:
    """SHA-256 (first 16 hex digits) over the paths and contents of every ``.py`` file below ``root``."""
    root = Path(root)
    if root not in _code_digests:
        sha = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            sha.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
        _code_digests[root] = sha.hexdigest()[:16]
    return _code_digests[root]


def known_code_digests() -> dict[Path, str]:
    """The code digests taken so far, to hand to a job's process (which then need not read the files again,
    and agrees with the server on the version of code that keys the cache)."""
    return dict(_code_digests)


def adopt_code_digests(digests: dict[Path, str]) -> None:
    """Take the server's code digests (:func:`known_code_digests`) as this process's own."""
    _code_digests.update(digests)


def check_cache_dir(root: Path) -> Path:
    """The cache folder, made private to this user, or a ``ValueError`` when someone else could plant a
    file in it: cached results are pickles, and a planted pickle would run as code when loaded.

    The folder and its ``joblib`` subfolder are created with mode 700; when they exist and belong to this
    user, write access for group and others is removed (whatever the umask made them), so what joblib
    creates inside can be reached by this user only. A folder owned by another user is refused, and so is
    one inside a folder that anyone may write to without the sticky bit (someone could swap the folder).
    """
    root = Path(root).absolute()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    (root / "joblib").mkdir(mode=0o700, exist_ok=True)
    uid = os.getuid() if hasattr(os, "getuid") else None
    for folder in (root, root / "joblib"):
        info = folder.stat()
        if uid is not None and info.st_uid != uid:
            raise ValueError(f"The result cache folder {folder} belongs to another user; set DASHBOARD_CACHE_DIR "
                             "to a folder of your own (cached results run as code when loaded).")
        if info.st_mode & 0o077:
            folder.chmod(info.st_mode & 0o700)
    for parent in root.parents:
        mode = parent.stat().st_mode
        if mode & 0o002 and not mode & stat.S_ISVTX:
            raise ValueError(f"The result cache folder {root} sits in {parent}, which anyone can write to; set "
                             "DASHBOARD_CACHE_DIR to a folder inside one only you can change.")
    if uid is not None and root not in _checked:
        drop_foreign_entries(root / "joblib", uid)
        _checked.add(root)
    return root


_checked: set[Path] = set()
"""Cache folders swept by :func:`drop_foreign_entries` in this process (once made private, nobody else
can add to them)."""


def forget_checked_folders() -> None:
    """Sweep every cache folder again at its next use (a test standing in for a fresh server)."""
    _checked.clear()


def drop_foreign_entries(folder: Path, uid: int) -> int:
    """Delete every file, link and folder under ``folder`` that user ``uid`` does not own, and take
    group and other write access off the rest; returns how many entries were deleted.

    Cached results are pickles: one planted by another local user while the folder was open to them
    would run as their code when loaded. Making the folder private afterwards keeps new files out but
    not the ones already there, so trust stops at ownership, checked entry by entry. Links are never
    followed. An entry that cannot be removed is a ``ValueError``: the folder is not used with it inside."""
    dropped = 0
    for here, dirs, files in os.walk(folder, topdown=True, followlinks=False):
        for name in list(dirs) + files:
            path = Path(here, name)
            info = path.lstat()
            if info.st_uid != uid or stat.S_ISLNK(info.st_mode):
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(path, ignore_errors=True)
                    dirs.remove(name)
                else:
                    path.unlink(missing_ok=True)
                if os.path.lexists(path):       # a folder of theirs this user may not empty
                    raise ValueError(f"The result cache holds {path}, which another user put there and this "
                                     "server could not remove; remove it, or set DASHBOARD_CACHE_DIR to a new "
                                     "folder (cached results run as code when loaded).")
                dropped += 1
            elif info.st_mode & 0o022:
                path.chmod(info.st_mode & ~0o022 & 0o7777)
    return dropped


def memory() -> Memory:
    """The shared joblib.Memory for this version of ``core`` (created lazily so imports stay cheap),
    in a cache folder that only this user can write (:func:`check_cache_dir`)."""
    global _memory
    location = check_cache_dir(cache_dir()) / "joblib" / code_digest()
    if _memory is None or Path(_memory.location) != location:
        _memory = Memory(location, verbose=0)
    return _memory


def config_digest(config: Any) -> str:
    """Stable SHA-256 of a plan, params dataclass or any JSON-able value (canonical JSON)."""
    return digest_of(config)


def data_fingerprint(data: pd.DataFrame | np.ndarray) -> str:
    """Content hash of a table or array, so cached results follow the data and not its name."""
    if isinstance(data, pd.DataFrame):
        hashed = pd.util.hash_pandas_object(data, index=True).to_numpy()
        header = json.dumps([list(map(str, data.columns)), list(map(str, data.dtypes))])
        return hashlib.sha256(header.encode() + hashed.tobytes()).hexdigest()
    arr = np.ascontiguousarray(data)
    return hashlib.sha256(str(arr.dtype).encode() + str(arr.shape).encode() + arr.tobytes()).hexdigest()


def fingerprint_of(data: Any) -> str:
    """Fingerprint of whatever a run receives as ``data``: nothing, bytes, a table, an array, or a
    tuple of those; objects may define ``fingerprint()`` (e.g. a block geography)."""
    if data is None:
        return "none"
    if isinstance(data, (bytes, bytearray)):
        return bytes_fingerprint(bytes(data))
    if isinstance(data, (pd.DataFrame, np.ndarray)):
        return data_fingerprint(data)
    if isinstance(data, (tuple, list)):
        return digest_of([fingerprint_of(d) for d in data])
    method = getattr(data, "fingerprint", None)
    if callable(method):
        return str(method())
    raise ValueError(f"Cannot fingerprint data of type {type(data).__name__}.")


def cached_call(func: Callable, ignore: tuple[str, ...] = ("progress",)) -> Callable:
    """``func`` memoised on disk on its arguments (joblib-hashed) and the code digest."""
    state: dict[Path, Callable] = {}

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        mem = memory()
        location = Path(mem.location)
        if location not in state:
            names = inspect.signature(func).parameters
            state[location] = mem.cache(func, ignore=[n for n in ignore if n in names])
        return state[location](*args, **kwargs)

    wrapper.uncached = func
    return wrapper


def cached(run: Callable) -> Callable:
    """The result cache of an area's ``run(plan, data=None, *, progress=None)``.

    The key is the plan's digest and the data's fingerprint (the code digest picks the folder);
    the plan and data themselves are not hashed again, and progress is not part of the key.
    ``wrapper.uncached`` is the plain function, ``wrapper.is_cached(plan, data)`` says whether a
    call would be answered from the cache.
    """
    def keyed(key: str, plan, data, progress):
        return run(plan, data, progress=progress)

    keyed.__name__ = keyed.__qualname__ = f"{run.__module__.replace('.', '_')}_{run.__name__}"
    keyed.__module__ = run.__module__
    memo = cached_call(keyed, ignore=("plan", "data", "progress"))

    def key_of(plan, data) -> str:
        return f"{plan.digest()}:{fingerprint_of(data)}"

    @functools.wraps(run)
    def wrapper(plan, data=None, *, progress=None):
        return memo(key_of(plan, data), plan, data, progress)

    def is_cached(plan, data=None) -> bool:
        cache = memory().cache(keyed, ignore=["plan", "data", "progress"])
        return cache.check_call_in_cache(key_of(plan, data), plan, data, None)

    wrapper.uncached = run
    wrapper.is_cached = is_cached
    return wrapper
