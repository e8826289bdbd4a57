"""How a stakeholder gets back to her cards: a resume code she can read and type, and the device token
the browser she joined on keeps.

- The **resume code** is her credential: 16 characters of the join-code alphabet (80 random bits), shown
  at join and at the foot of every card in groups of four. Only its SHA-256 digest is stored (as the
  stakeholder's token hash). Typed on another device, it reopens her cards; nothing else does from a
  browser she never used, so a name already taken cannot be claimed by someone who merely knows it.
- The **device token** is 32 random bytes the server hands the browser in an HttpOnly, SameSite=Strict
  cookie (``dashboard/server.py``). The store keeps, per session, the digest of each device token bound to
  a stakeholder and her resume code sealed under that token: XOR with HMAC-SHA256(token, session and
  stakeholder ids), so the row alone reveals nothing, and the opened code is checked against the
  stakeholder's stored digest before it is used. A device is bound to at most one stakeholder per session.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from core.fairness.store.checks import CODE_ALPHABET, check_secret, digest
from core.fairness.store.schema import now_utc, stakeholder_devices, stakeholders

RESUME_CODE_LENGTH = 16                               # 32**16 = 2**80 codes
DEVICE_COOKIE = "dashboard_device"
"""The device cookie's name (HttpOnly: the page's scripts never read it)."""
DEVICE_SECONDS = 30 * 24 * 3600
DEVICE_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")       # secrets.token_urlsafe(32)
_TYPED_CODE = re.compile(r"[A-Za-z0-9]{4}(?:[- ]?[A-Za-z0-9]{4}){3}")


def new_resume_code() -> str:
    """A fresh resume code in its stored form (no dashes)."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(RESUME_CODE_LENGTH))


def normalise_resume_code(text: Any) -> str:
    """A resume code as typed (any case, spaces or dashes between its groups of four) in stored form.

    Codes handed out before resume codes were readable (24 URL-safe characters) are returned as they are."""
    text = check_secret(text, "resume code")
    if _TYPED_CODE.fullmatch(text):
        code = re.sub(r"[- ]", "", text).upper()
        if all(c in CODE_ALPHABET for c in code):
            return code
    return text


def shown_resume_code(code: str) -> str:
    """A resume code as the stakeholder reads it: in groups of four ('K7QM-2XPA-R4TB-9CHD'); a code handed
    out before codes were readable, as it is (its dashes are its own)."""
    if len(code) == RESUME_CODE_LENGTH and all(c in CODE_ALPHABET for c in code):
        return "-".join(code[k:k + 4] for k in range(0, len(code), 4))
    return code


def new_device_token() -> str:
    return secrets.token_urlsafe(32)


def check_device_token(token: Any) -> str | None:
    """The device token when ``token`` has its form (a cookie is anything the browser sends), else None."""
    return token if isinstance(token, str) and DEVICE_TOKEN.fullmatch(token) else None


def _pad(device: str, session_id: str, stakeholder_id: str, size: int) -> bytes:
    message = f"resume-code|{session_id}|{stakeholder_id}".encode()
    return hmac.new(device.encode(), message, hashlib.sha256).digest()[:size]


def seal(code: str, device: str, session_id: str, stakeholder_id: str) -> str:
    """The resume code encrypted under the device token (one pad per device, session and stakeholder)."""
    data = code.encode()
    if len(data) > 32:
        raise ValueError("A resume code longer than 32 characters cannot be kept for a device.")
    return bytes(a ^ b for a, b in zip(data, _pad(device, session_id, stakeholder_id, len(data)))).hex()


def unseal(sealed: str, device: str, session_id: str, stakeholder_id: str) -> str | None:
    """The resume code back from ``seal`` (None when the bytes do not decode: a wrong token)."""
    data = bytes.fromhex(sealed)
    plain = bytes(a ^ b for a, b in zip(data, _pad(device, session_id, stakeholder_id, len(data))))
    try:
        return plain.decode()
    except UnicodeDecodeError:
        return None


def bind(conn: Connection, device: str, me, code: str) -> None:
    """Bind the device to the stakeholder ``me`` (her row) in her session, replacing whoever it opened
    there before (a shared tablet passed on after a sign-out), inside the caller's transaction."""
    where = (stakeholder_devices.c.session_id == me["session_id"],
             stakeholder_devices.c.device_hash == digest(device))
    conn.execute(delete(stakeholder_devices).where(*where))
    conn.execute(insert(stakeholder_devices).values(
        session_id=me["session_id"], stakeholder_id=me["stakeholder_id"], device_hash=digest(device),
        sealed_code=seal(code, device, me["session_id"], me["stakeholder_id"]), bound_at=now_utc()))


def device_code(conn: Connection, device: str | None, session_id: str, stakeholder_id: str | None = None):
    """(the stakeholder's row, her resume code) for the device bound in this session (to this stakeholder
    when one is named), or None. The opened code must match her stored digest."""
    device = check_device_token(device)
    if device is None:
        return None
    cond = [stakeholder_devices.c.session_id == session_id, stakeholder_devices.c.device_hash == digest(device)]
    if stakeholder_id is not None:
        cond.append(stakeholder_devices.c.stakeholder_id == stakeholder_id)
    found = conn.execute(select(stakeholder_devices.c.stakeholder_id, stakeholder_devices.c.sealed_code)
                         .where(*cond)).first()
    if found is None:
        return None
    me = conn.execute(select(stakeholders).where(stakeholders.c.stakeholder_id == found[0])).mappings().first()
    code = unseal(found[1], device, session_id, found[0])
    if me is None or code is None or not hmac.compare_digest(me["token_hash"], digest(code)):
        return None
    return me, code


def forget(conn: Connection, device: str, me) -> None:
    """Unbind the device from the stakeholder ``me`` (sign-out on a shared device)."""
    conn.execute(delete(stakeholder_devices).where(
        stakeholder_devices.c.session_id == me["session_id"], stakeholder_devices.c.device_hash == digest(device),
        stakeholder_devices.c.stakeholder_id == me["stakeholder_id"]))
