"""A file uploader whose file survives leaving the page.

Streamlit's file uploader forgets its file when the user navigates away, so the bytes are kept in
``st.session_state`` under their SHA-256 fingerprint (the one a ``DataRef`` holds) and the last chosen
file is offered again when the user comes back. Every page that takes an upload uses this one widget.

State for an uploader keyed ``key``: ``{key}__files`` (fingerprint -> (file name, bytes)) and
``{key}__current`` (the fingerprint in use). A saved report asks for its file by writing its
fingerprint to ``current_key(key)``; if that file is not kept, nothing is returned until it is uploaded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import streamlit as st

from core.contracts import bytes_fingerprint


@dataclass(frozen=True)
class KeptFile:
    """An uploaded file: its name, bytes and fingerprint; ``fresh`` is False when reused from earlier."""

    name: str
    raw: bytes
    fingerprint: str
    fresh: bool


def current_key(key: str) -> str:
    """Session-state key that holds the fingerprint in use (write it to ask for a particular file)."""
    return f"{key}__current"


def kept_files(key: str) -> dict[str, tuple[str, bytes]]:
    """The files kept for uploader ``key``: fingerprint -> (file name, bytes)."""
    return st.session_state.setdefault(f"{key}__files", {})


def wanted_fingerprint(key: str) -> str | None:
    """The fingerprint in use (or asked for by an opened report), kept or not."""
    return st.session_state.get(current_key(key))


def upload_kept(label: str, key: str, *, type: Sequence[str], keep: int = 1, container=st,
                help: str | None = None) -> KeptFile | None:
    """Draw a file uploader keyed ``key``; return its file, or the one kept from earlier in the session.

    A new upload becomes the file in use; at most ``keep`` files (the newest) stay in the session.
    Returns None when no file is in use or the one asked for is not kept.
    """
    if keep < 1:
        raise ValueError(f"keep must be at least 1, not {keep}")
    upload = container.file_uploader(label, type=list(type), key=key, help=help)
    files = kept_files(key)
    if upload is not None:
        raw = upload.getvalue()
        fp = bytes_fingerprint(raw)
        files.pop(fp, None)                       # re-insert so it counts as the newest
        files[fp] = (upload.name, raw)
        for old in list(files)[:-keep]:
            files.pop(old)
        st.session_state[current_key(key)] = fp
    fp = wanted_fingerprint(key)
    if fp not in files:
        return None
    name, raw = files[fp]
    return KeptFile(name, raw, fp, fresh=upload is not None)
