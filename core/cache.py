"""One on-disk result cache for every page (joblib.Memory keyed on a config digest).

Results live under a folder named after a digest of the ``core`` source, so a code change never
serves a result computed by older code (joblib alone only watches the decorated function).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from joblib import Memory

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


def memory() -> Memory:
    """The shared joblib.Memory for this version of ``core`` (created lazily so imports stay cheap)."""
    global _memory
    location = cache_dir() / "joblib" / code_digest()
    if _memory is None or Path(_memory.location) != location:
        _memory = Memory(location, verbose=0)
    return _memory


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__, **{f.name: _jsonable(getattr(value, f.name))
                                                     for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def config_digest(config: Any) -> str:
    """Stable SHA-256 of a config dataclass (or any JSON-able value) as canonical JSON."""
    text = json.dumps(_jsonable(config), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def data_fingerprint(data: pd.DataFrame | np.ndarray) -> str:
    """Content hash of a table or array, so cached results follow the data and not its name."""
    if isinstance(data, pd.DataFrame):
        hashed = pd.util.hash_pandas_object(data, index=True).to_numpy()
        header = json.dumps([list(map(str, data.columns)), list(map(str, data.dtypes))])
        return hashlib.sha256(header.encode() + hashed.tobytes()).hexdigest()
    arr = np.ascontiguousarray(data)
    return hashlib.sha256(str(arr.dtype).encode() + str(arr.shape).encode() + arr.tobytes()).hexdigest()


def cached(func: Callable) -> Callable:
    """Wrap ``func`` with the shared on-disk cache (arguments must be hashable by joblib)."""
    return memory().cache(func)
