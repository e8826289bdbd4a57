"""Checks on what people type into the store: names, reasons, codes and keys.

Free text is refused when it holds characters that do not print as themselves: control
characters (NUL included), zero-width and other format characters, and text-direction
overrides. Two pseudonyms that look identical on screen would otherwise name different
people, and a reversed run of text can make a reason say something else than it stores.
"""
from __future__ import annotations

import hashlib
import unicodedata
from typing import Any

from core.fairness.store.schema import MAX_NAME_LENGTH, MAX_REASON_LENGTH, MAX_SESSION_NAME_LENGTH

# Unicode categories that never print as a visible glyph of their own: controls (Cc, NUL
# included), format characters (Cf: zero-width spaces and joiners, direction marks and
# overrides, the byte-order mark), private use, unpaired surrogates, line/paragraph separators.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # join and resume codes: no 0/O, 1/I lookalikes


def digest(secret: str) -> str:
    """SHA-256 hex of a secret; only digests of keys and tokens are stored."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def check_secret(secret: Any, what: str) -> str:
    """A key or token as typed: text, not blank, not absurdly long (trimmed)."""
    if not isinstance(secret, str) or not secret.strip():
        raise ValueError(f"Enter the {what}.")
    if len(secret) > 200:
        raise ValueError(f"The {what} is too long to be valid.")
    return secret.strip()


def hidden_character(text: str, keep: str = "") -> str | None:
    """The first character of `text` that would not print as itself (None when all do)."""
    for char in text:
        if char not in keep and unicodedata.category(char) in HIDDEN_CATEGORIES:
            return char
    return None


def refuse_hidden(text: str, what: str, keep: str = "") -> None:
    char = hidden_character(text, keep)
    if char is not None:
        name = unicodedata.name(char, "a control character")
        raise ValueError(f"The {what} contains an invisible character (U+{ord(char):04X}, {name.lower()}); "
                         "remove it and type the text again.")


def check_name(name: Any, what: str, limit: int) -> str:
    """A one-line name: spaces collapsed, invisible characters refused, at most `limit` characters."""
    if not isinstance(name, str):
        raise ValueError(f"The {what} must be text.")
    refuse_hidden(name, what)
    name = " ".join(name.split())
    if len(name) > limit:
        raise ValueError(f"The {what} is limited to {limit} characters; this one has {len(name)}.")
    return name


def check_pseudonym(pseudonym: Any) -> str:
    """A stakeholder's name or nickname (not blank)."""
    if isinstance(pseudonym, str) and not pseudonym.strip():
        raise ValueError("Enter a name or nickname (a pseudonym is fine).")
    name = check_name(pseudonym, "name", MAX_NAME_LENGTH)
    if not name:
        raise ValueError("Enter a name or nickname (a pseudonym is fine).")
    return name


def check_session_name(name: Any) -> str:
    """A session's title; blank becomes "Untitled session"."""
    return check_name(name or "", "session name", MAX_SESSION_NAME_LENGTH) or "Untitled session"


def check_reason(reason: Any) -> str | None:
    """A stakeholder's optional reason: trimmed text of at most MAX_REASON_LENGTH characters.

    Blank means no reason (None). Line breaks and tabs are kept; every other invisible
    character is refused, since the facilitator reads the text as written.
    """
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise ValueError(f"A reason must be text, got {type(reason).__name__}.")
    reason = reason.replace("\r\n", "\n").strip()
    if not reason:
        return None
    if len(reason) > MAX_REASON_LENGTH:
        raise ValueError(f"Reasons are limited to {MAX_REASON_LENGTH} characters; this one has "
                         f"{len(reason)}.")
    char = hidden_character(reason, keep="\n\t")
    if char is not None:
        raise ValueError(f"The reason contains a control character (U+{ord(char):04X}); "
                         "remove it and try again.")
    return reason
