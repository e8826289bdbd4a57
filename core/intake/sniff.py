"""Find how a text file was written: its encoding, its line endings, its separator and its header line.

Each finding comes with the reason it was made, in words the page and the command line show.

- Encoding: a byte-order mark names UTF-8 or UTF-16; otherwise bytes that decode as UTF-8 are
  UTF-8 (an accident is very unlikely: Latin-1 accents are invalid UTF-8 sequences), and anything
  else is Windows-1252, the superset of Latin-1 that Excel and most Western county systems write
  (Latin-1 when a byte Windows-1252 leaves undefined occurs).
- Line endings: Windows (CRLF), Unix (LF) and old Mac (CR only) are all read; CR-only text is
  turned into LF before parsing.
- Separator: each of comma, semicolon, tab and pipe splits the first lines (quotes respected); the
  one whose commonest field count (at least two) is shared by the most lines wins, more fields
  breaking a tie. A decimal comma (``1,5``) makes the comma's counts vary from line to line, so a
  semicolon file with decimal commas is read by its semicolons.
- Header line: the first line with the winning field count; lines above it (a title, an export
  date) are skipped and reported.
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass

from core.intake.options import ENCODINGS, SEPARATORS, ReadOptions

__all__ = ["SAMPLE_LINES", "TextLayout", "decode", "detect_encoding", "layout", "line_endings"]

SAMPLE_LINES = 200
_UNDEFINED_IN_CP1252 = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")


def _bad_byte(data: bytes) -> tuple[int, int] | None:
    """(position, byte) of the first byte that is not valid UTF-8, or None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start, data[err.start]
    return None


def detect_encoding(data: bytes) -> tuple[str, str]:
    """(encoding, why) of raw text bytes."""
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig", "it starts with a UTF-8 byte-order mark"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16", "it starts with a UTF-16 byte-order mark"
    bad = _bad_byte(data)
    if bad is None:
        return "utf-8", "every byte is valid UTF-8"
    where, byte = bad
    if _UNDEFINED_IN_CP1252.search(data):
        return "latin-1", (f"byte 0x{byte:02X} at position {where:,} is not UTF-8, and bytes Windows-1252 leaves "
                           "undefined occur")
    return "cp1252", f"byte 0x{byte:02X} at position {where:,} is not UTF-8; accents as Windows and Excel write them"


def decode(data: bytes, encoding: str | None) -> tuple[str, str, str]:
    """(text, encoding, why) of ``data``: by ``encoding`` when given, else detected. ValueError naming the
    first byte that does not decode and the encodings to try."""
    if encoding is None:
        encoding, why = detect_encoding(data)
    else:
        why = "chosen"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        others = [e for e in ENCODINGS if e != encoding]
        raise ValueError(f"The file cannot be read as {ENCODINGS[encoding]}: byte 0x{data[err.start]:02X} at position "
                         f"{err.start:,} does not decode; choose another encoding ({', '.join(others)}).") from None
    if encoding == "utf-8-sig" or (encoding == "utf-16" and text.startswith("\ufeff")):
        text = text.lstrip("\ufeff")
    if "\x00" in text[:65536]:
        raise ValueError("The file looks binary (it contains NUL characters), not a text table; an Excel workbook "
                         "must end in .xlsx, other files must be saved as CSV.")
    return text, encoding, why


def line_endings(text: str) -> str:
    """'CRLF', 'LF', 'CR' or 'mixed': how the lines of ``text`` end."""
    crlf, cr, lf = text.count("\r\n"), text.count("\r"), text.count("\n")
    kinds = [k for k, n in (("CRLF", crlf), ("CR", cr - crlf), ("LF", lf - crlf)) if n]
    return kinds[0] if len(kinds) == 1 else ("LF" if not kinds else "mixed")


def _first_lines(text: str, n: int) -> list[str]:
    """The first ``n`` lines (blank lines included, so line numbers are the file's), without splitting it all."""
    lines, start = [], 0
    while len(lines) < n and start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        lines.append(text[start:end].rstrip("\r"))
        start = end + 1
    return lines


def _records(lines: list[str], sep: str) -> list[tuple[int, int]]:
    """(first line number, fields) of each non-blank record of the sample, quotes respected (a quoted cell may
    span lines), so line numbers stay the file's."""
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=sep)
    out, start = [], 1
    try:
        for row in reader:
            if row:
                out.append((start, len(row)))
            start = reader.line_num + 1
    except csv.Error:     # an unclosed quote at the end of the sample
        pass
    return out


@dataclass(frozen=True)
class TextLayout:
    """What :func:`layout` found: the separator and 1-based header line, with the reasons."""

    separator: str
    header_row: int
    separator_why: str
    header_why: str
    fields: int


def _score(lines: list[str], sep: str) -> tuple[float, int]:
    """(share of the non-blank lines with the commonest field count, that count)."""
    counts = [n for _, n in _records(lines, sep)]
    if not counts:
        return 0.0, 1
    mode, share = Counter(counts).most_common(1)[0]
    return share / len(counts), mode


def layout(text: str, options: ReadOptions) -> TextLayout:
    """The separator and header line of a text table: ``options``' where given, else detected."""
    lines = _first_lines(text, SAMPLE_LINES)
    if options.separator is not None:
        sep, fields = options.separator, _score(lines, options.separator)[1]
        sep_why = "chosen"
    else:
        scores = {s: _score(lines, s) for s in SEPARATORS}
        usable = {s: v for s, v in scores.items() if v[1] >= 2}
        if usable:
            sep = max(usable, key=lambda s: (round(usable[s][0], 2), usable[s][1]))
            share, fields = usable[sep]
            sep_why = (f"{share:.0%} of the first {sum(bool(ln.strip()) for ln in lines)} non-blank lines split into "
                       f"{fields} fields by it")
            others = [f"{SEPARATORS[s]} {v[0]:.0%} into {v[1]}" for s, v in usable.items() if s != sep]
            if others:
                sep_why += f" (else {', '.join(others)})"
        else:
            sep, fields = ",", 1
            sep_why = "no comma, semicolon, tab or pipe splits the lines: one column"
    if options.header_row is not None:
        return TextLayout(sep, options.header_row, sep_why, "chosen", fields)
    header = next((line for line, n in _records(lines, sep) if n == fields), 1)
    header_why = "the first line" if header == 1 else (
        f"the first line with {fields} fields; the title or note lines above it are skipped")
    return TextLayout(sep, header, sep_why, header_why, fields)
