"""What a column's values suggest the curator declare: missing codes, units, label variants; and how
private values are named in a problem.

CURATOR-ONLY. Every function here reads the private values and returns texts from them (with row
counts). They are for the curator's own screen and terminal; a suggestion enters the public
:class:`~core.intake.schema.DataSchema` only when the curator takes it (ticks it on the page, or names
it on the command line). Nothing here is put in a schema, plan, report or ledger automatically.

- :func:`missing_code_suggestions`: values that look like "no answer" rather than an answer: a word
  such as ``refused`` or ``N/A`` (:data:`MISSING_WORDS` and the default missing tokens) that the
  schema does not read as missing yet, text made of punctuation only (``-``, ``*``), and numeric
  codes far outside the rest: a number written as a run of 8s or 9s (``99``, ``999``, ``-9``) or
  ``-1``, lying beyond ``Q3 + FAR * IQR`` (or below ``Q1 - FAR * IQR``) of the column's readable
  numbers, weighted by rows (Tukey's fences, widened from 1.5 to ``FAR`` so that only codes, not
  long tails, are caught), or a negative such code in a column whose other numbers are all at least
  0, in a column where at least half the present cells read as numbers. The IQR
  is at least 1, so a column of nearly equal values does not flag
  every other value.
- :func:`unit_suggestions`: words written before (and a space) or after a number (``45 yrs``,
  ``USD 52,000``) that make values readable once removed; a letter glued before digits (``C00012``)
  is an id's prefix, not a unit.
- :func:`fold_label`: the key under which spelling variants meet: Unicode NFKD with combining marks
  dropped (accents), case folded, spaces, hyphens, underscores and dots removed.
- :func:`named`: ``'45 yrs' (60), 'unknown' (40) and 3 more``: values with their rows, largest first.
"""
from __future__ import annotations

import re
import unicodedata

import numpy as np
import pyarrow as pa

from core.intake.schema import DEFAULT_MISSING_TOKENS
from core.intake.values import ColumnValues, parse_number_text, strip_units

__all__ = ["FAR", "MISSING_WORDS", "fold_label", "missing_code_suggestions", "named", "unit_suggestions"]

FAR = 10.0
SHOWN = 5
TEXT_LIMIT = 40
# Words surveys and registers write for "no answer" (compared after trimming, ignoring case).
MISSING_WORDS = ("refused", "don't know", "dont know", "do not know", "dk", "not stated", "not known",
                 "not applicable", "no answer", "prefer not to say", "declined", "nk", "n.k.", "nil", "#n/a",
                 "n.a", "unk", "not available", "undefined", "blank", "missing value")
UNIT_SCAN = 2_000      # distinct unreadable values looked at for units (the most frequent first)
# A word before the number (followed by a space: "C00012" is an id, not 12 with a unit), or after it.
_AROUND = re.compile(r"^(?:(?P<pre>[^\d+\-.$€£¥]*?)\s+)?[+-]?[$€£¥]?\s*[\d][\d.,]*\s*%?\s*(?P<post>[^\d]*?)$")
_FOLD_DROP = re.compile(r"[\s\-_.\u2010-\u2015]+")


def fold_label(text: str) -> str:
    """The key spelling variants share: accents dropped (NFKD, combining marks removed), case folded,
    spaces, hyphens, underscores and dots removed (``"Post-secondary"``, ``"post secondary"`` and
    ``"Póst Secondary"`` all fold to ``"postsecondary"``)."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _FOLD_DROP.sub("", bare.casefold())


def _clip(text: str) -> str:
    text = str(text)
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT - 3] + "..."


def named(texts, rows, limit: int = SHOWN) -> str:
    """Values with their rows, largest first (ties in the order given), at most ``limit`` of them, then
    ``and N more``: ``'45 yrs' (60), 'unknown' (40)``. A blank cell is written ``(blank)``."""
    texts = [str(t) for t in texts]
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(-rows, kind="stable")
    shown = ", ".join(("(blank)" if texts[i] == "" else repr(_clip(texts[i]))) + f" ({int(rows[i]):,})"
                      for i in order[:limit])
    rest = len(texts) - limit
    return shown + (f" and {rest:,} more" if rest > 0 else "")


# ---------------------------------------------------------------------------------------- missing codes
def _repeated_code(value: float) -> bool:
    """A whole number written as a run of 8s or 9s of two digits or more (99, 999, 8888, -99), or -1/-9."""
    if not float(value).is_integer():
        return False
    digits = str(abs(int(value)))
    if value < 0 and digits in ("1", "9"):
        return True
    return len(digits) >= 2 and len(set(digits)) == 1 and digits[0] in "89"


def _weighted_quartiles(values: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    order = np.argsort(values, kind="stable")
    v, w = values[order], np.cumsum(weights[order])
    total = w[-1]
    return float(v[np.searchsorted(w, 0.25 * total)]), float(v[np.searchsorted(w, 0.75 * total)])


def _far_codes(values: ColumnValues) -> np.ndarray:
    """Distinct values that are numeric missing codes by the rule of the module docstring."""
    readable = ~values.missing & ~np.isnan(values.numbers)
    n_present = values.rows_where(~values.missing)
    if not n_present or 2 * values.rows_where(readable) < n_present:     # mostly text: no numeric codes
        return np.zeros(len(values.numbers), dtype=bool)
    idx = np.flatnonzero(readable)
    if idx.size < 3:
        return np.zeros(len(values.numbers), dtype=bool)
    numbers, rows = values.numbers[idx], values.counts[idx]
    q1, q3 = _weighted_quartiles(numbers, rows)
    iqr = max(q3 - q1, 1.0)
    far = (numbers > q3 + FAR * iqr) | (numbers < q1 - FAR * iqr)
    far |= (numbers < 0) & (numbers[~(numbers < 0)] >= 0).all()     # a negative code among counts or amounts
    coded = np.array([_repeated_code(x) for x in numbers], dtype=bool)
    out = np.zeros(len(values.numbers), dtype=bool)
    out[idx[far & coded]] = True
    if values.rows_where(out) * 2 > values.rows_where(readable):    # most of the column is no code
        out[:] = False
    return out


def missing_code_suggestions(values: ColumnValues, tokens: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """``(text, rows)`` of each value that looks like a missing value but is not read as one (see the
    module docstring), most rows first. ``values`` is the column read with ``tokens``."""
    present = ~values.missing
    if not present.any():
        return ()
    known = {t.strip().lower() for t in tokens}
    words = {w for w in (*MISSING_WORDS, *DEFAULT_MISSING_TOKENS) if w} - known
    text = values.text
    lowered = np.array([str(t).lower() for t in text], dtype=object)
    wordy = present & np.isin(lowered, sorted(words))
    punctuation = present & np.array([bool(t) and not any(ch.isalnum() for ch in str(t)) for t in text], dtype=bool)
    hit = wordy | punctuation | _far_codes(values)
    idx = np.flatnonzero(hit)
    order = idx[np.argsort(-values.counts[idx], kind="stable")]
    return tuple((str(text[i]), int(values.counts[i])) for i in order)


# ---------------------------------------------------------------------------------------- units
def unit_suggestions(values: ColumnValues) -> tuple[tuple[str, int], ...]:
    """``(unit, rows)``: words written before or after a number that make a value readable once removed
    (``"45 yrs"`` -> ``yrs``), most rows first; each distinct value counts under one unit (the first in
    that order), so the rows add up. Spellings differing only in case are one unit (its most frequent
    spelling). Only text columns; at most ``UNIT_SCAN`` distinct unreadable values are looked at."""
    if values.trimmed is None:
        return ()
    bad = np.flatnonzero(~values.missing & np.isnan(values.numbers))
    if not bad.size:
        return ()
    bad = bad[np.argsort(-values.counts[bad], kind="stable")][:UNIT_SCAN]
    found: dict[str, dict[str, int]] = {}
    for i in bad:
        match = _AROUND.match(str(values.text[i]))
        if match is None:
            continue
        for word in ((match["pre"] or "").strip(), match["post"].strip()):
            if word and any(ch.isalpha() for ch in word):
                spellings = found.setdefault(word.lower(), {})
                spellings[word] = spellings.get(word, 0) + int(values.counts[i])
    if not found:
        return ()
    units = [max(s.items(), key=lambda kv: kv[1])[0] for s in found.values()]
    texts = values.trimmed.take(pa.array(bad))
    taken = np.zeros(bad.size, dtype=bool)
    out = []
    for unit in sorted(units, key=lambda u: -sum(found[u.lower()].values())):
        readable = ~np.isnan(parse_number_text(strip_units(texts, (unit,)))[0]) & ~taken
        if readable.any():
            taken |= readable
            out.append((unit, int(values.counts[bad[readable]].sum())))
    return tuple(sorted(out, key=lambda p: -p[1]))
