"""Who may open the curator's pages: curator keys, their sign-in sessions, and a brake on guessing.

A curator holds a key (256 random bits, shown once when made). The dashboard's sign-in address takes the
key and answers with a session cookie; from then on the browser carries the cookie, never the key. Both
the key and the session token are stored as their SHA-256 only, so a copy of the database opens nothing
(a hash of 256 random bits needs no salt or slow hash: there is nothing to guess from it). Removing a
curator ends their sessions.

Everything here is infrastructure: it reads and writes its own tables in the project database
(``core.database``) and imports no area.
"""
from __future__ import annotations

import hashlib
import secrets
import threading
import time
import unicodedata
from collections import deque
from datetime import datetime, timezone

from sqlalchemy import Column, Float, MetaData, String, Table, delete, insert, select

from core.database import TableStore

CURATOR_NAME_MAX = 60
FIRST_CURATOR = "curator"
"""The name of the curator a fresh installation makes on its first start."""

metadata = MetaData()

curator_keys = Table(
    "curator_keys", metadata,
    Column("name", String(CURATOR_NAME_MAX), primary_key=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", String(40), nullable=False),
)

sessions = Table(
    "curator_sessions", metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("name", String(CURATOR_NAME_MAX), nullable=False, index=True),
    Column("expires_at", Float, nullable=False),
)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def check_curator_name(name) -> str:
    """A curator's name, trimmed: plain printable text of at most :data:`CURATOR_NAME_MAX` characters."""
    name = unicodedata.normalize("NFC", str(name or "")).strip()
    if not name:
        raise ValueError("Give the curator a name (e.g. their initials).")
    if len(name) > CURATOR_NAME_MAX:
        raise ValueError(f"A curator's name is at most {CURATOR_NAME_MAX} characters; shorten it.")
    if any(unicodedata.category(ch).startswith("C") for ch in name) or any(ch in name for ch in "<>`*_[]"):
        raise ValueError("A curator's name must be plain text: no control or invisible characters, and none "
                         "of < > ` * _ [ ].")
    return name


class CuratorKeys(TableStore):
    """Curators, their hashed keys and their sign-in sessions in the project database."""

    metadata = metadata
    SESSION_SECONDS = 12 * 3600.0
    """How long a sign-in lasts before the key is needed again."""

    def add(self, name: str) -> str:
        """Make a curator and return their key (the only time it is shown); ValueError if the name is taken."""
        name = check_curator_name(name)
        key = secrets.token_urlsafe(32)
        with self._write() as conn:
            if conn.execute(select(curator_keys.c.name).where(curator_keys.c.name == name)).first():
                raise ValueError(f"A curator named {name!r} exists already; remove them first or choose another name.")
            conn.execute(insert(curator_keys).values(name=name, key_hash=_hash(key),
                                                     created_at=datetime.now(timezone.utc).isoformat()))
        return key

    def remove(self, name: str) -> None:
        """Remove a curator: their key and every session opened with it stop working."""
        name = check_curator_name(name)
        with self._write() as conn:
            gone = conn.execute(delete(curator_keys).where(curator_keys.c.name == name)).rowcount
            conn.execute(delete(sessions).where(sessions.c.name == name))
        if not gone:
            raise ValueError(f"No curator is named {name!r}; `python -m core curator list` names them.")

    def names(self) -> list[str]:
        with self._read() as conn:
            return sorted(r[0] for r in conn.execute(select(curator_keys.c.name)))

    def verify(self, key) -> str | None:
        """The curator whose key this is, else None."""
        if not isinstance(key, str) or not key.strip() or len(key) > 200:
            return None
        with self._read() as conn:
            row = conn.execute(select(curator_keys.c.name).where(curator_keys.c.key_hash == _hash(key.strip()))).first()
        return row[0] if row else None

    def open_session(self, name: str, now: float | None = None) -> str:
        """A new sign-in token for ``name`` (the cookie's value), valid for :attr:`SESSION_SECONDS`."""
        now = time.time() if now is None else now
        token = secrets.token_urlsafe(32)
        with self._write() as conn:
            conn.execute(delete(sessions).where(sessions.c.expires_at < now))
            conn.execute(insert(sessions).values(token_hash=_hash(token), name=name,
                                                 expires_at=now + self.SESSION_SECONDS))
        return token

    def close_session(self, token) -> None:
        """End the sign-in this token opened (signing out)."""
        if isinstance(token, str) and token:
            with self._write() as conn:
                conn.execute(delete(sessions).where(sessions.c.token_hash == _hash(token)))

    def curator_of(self, token, now: float | None = None) -> str | None:
        """The curator signed in with this token, if it exists, has not expired and its curator remains."""
        if not isinstance(token, str) or not token or len(token) > 200:
            return None
        now = time.time() if now is None else now
        with self._read() as conn:
            row = conn.execute(
                select(sessions.c.name).join(curator_keys, curator_keys.c.name == sessions.c.name)
                .where(sessions.c.token_hash == _hash(token), sessions.c.expires_at >= now)).first()
        return row[0] if row else None

    def ensure_first_curator(self) -> tuple[str, str] | None:
        """(name, key) of a first curator made now when there is none yet; None when curators exist."""
        if self.names():
            return None
        try:
            return FIRST_CURATOR, self.add(FIRST_CURATOR)
        except ValueError:          # another process made it meanwhile
            return None


class GuessLimiter:
    """Slows down key guessing per client address without refusing anyone.

    The first ``free`` failures within ``window`` seconds cost nothing; each later one doubles the wait
    before the next attempt from that address is checked (1 s, 2 s, 4 s ... up to ``cap``). A wait is
    served, not a refusal, so a holder of a valid key who shares the address still gets in, and one at
    another address is never slowed."""

    def __init__(self, free: int = 5, window: float = 600.0, cap: float = 30.0) -> None:
        self.free, self.window, self.cap = int(free), float(window), float(cap)
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        times = self._failures.setdefault(client, deque())
        while times and times[0] <= now - self.window:
            times.popleft()
        return times

    def wait_for(self, client: str, now: float | None = None) -> float:
        """Seconds the next attempt from ``client`` waits before its key is checked."""
        now = time.monotonic() if now is None else now
        with self._lock:
            over = len(self._recent(client, now)) - self.free
        return 0.0 if over < 0 else min(self.cap, 2.0 ** over)

    def failed(self, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self._recent(client, now).append(now)
            if len(self._failures) > 10_000:         # forget quiet addresses (a server runs for weeks)
                for quiet in [c for c, t in self._failures.items() if not t][:5_000]:
                    del self._failures[quiet]


__all__ = ["CURATOR_NAME_MAX", "FIRST_CURATOR", "CuratorKeys", "GuessLimiter", "check_curator_name",
           "curator_keys", "sessions"]
