"""How a data file is read: its text encoding, its separator, its sheet and its header row.

A :class:`ReadOptions` is public and frozen; a field left None is detected from the file
(:mod:`core.intake.sniff` for text, :mod:`core.intake.workbook` for workbooks). The options a file
was actually read with (every field filled in) ride in the data set's declaration
(``DataSchema.read``), so every rerun reads the same bytes the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.contracts import storable

__all__ = ["DECIMALS", "ENCODINGS", "MAX_HEADER_ROW", "ReadOptions", "SEPARATORS"]

# Encodings a county export comes in, by the name this tool writes (Python codec names).
ENCODINGS = {"utf-8": "UTF-8", "utf-8-sig": "UTF-8 with a byte-order mark", "utf-16": "UTF-16 (with a byte-order mark)",
             "cp1252": "Windows-1252 (Western European)", "latin-1": "Latin-1 (ISO-8859-1)"}
SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
DECIMALS = {".": "point", ",": "comma"}
# Title rows above a header are a handful at most; a header further down is a mistake in the options.
MAX_HEADER_ROW = 1_000
_ENCODING_ALIASES = {"utf8": "utf-8", "utf-8-bom": "utf-8-sig", "utf8-sig": "utf-8-sig", "utf16": "utf-16",
                     "windows-1252": "cp1252", "latin1": "latin-1", "iso-8859-1": "latin-1", "iso8859-1": "latin-1"}
_DECIMAL_ALIASES = {"point": ".", "dot": ".", "comma": ","}
_SEPARATOR_ALIASES = {"comma": ",", "semicolon": ";", "tab": "\t", "\\t": "\t", "pipe": "|"}


@storable
@dataclass(frozen=True)
class ReadOptions:
    """How to read a file; None means "detect it".

    - ``encoding``: one of :data:`ENCODINGS` (text files);
    - ``separator``: one of :data:`SEPARATORS` (text files; the names ``"semicolon"`` etc. are accepted);
    - ``sheet``: the name of the workbook sheet to read (workbooks);
    - ``header_row``: the row number (1 = the first line) holding the column names; the rows above
      it (titles, notes) are skipped;
    - ``decimal``: the decimal mark of a text file's numbers, ``"."`` or ``","``; with a comma, cells that
      are numbers in that convention (``3,5``, ``1.250,75``) are rewritten with a point and no thousands
      dots (``3.5``, ``1250.75``), so they read as numbers.
    """

    encoding: str | None = None
    separator: str | None = None
    sheet: str | None = None
    header_row: int | None = None
    decimal: str | None = None

    def __post_init__(self) -> None:
        if self.encoding is not None:
            key = str(self.encoding).strip().lower().replace("_", "-")
            key = _ENCODING_ALIASES.get(key, key)
            if key not in ENCODINGS:
                raise ValueError(f"Encoding {self.encoding!r:.40} is not one this tool reads; choose one of "
                                 f"{list(ENCODINGS)}.")
            object.__setattr__(self, "encoding", key)
        if self.separator is not None:
            sep = str(self.separator)
            sep = _SEPARATOR_ALIASES.get(sep.strip().lower(), sep)
            if sep not in SEPARATORS:
                raise ValueError(f"Separator {self.separator!r:.20} is not one this tool reads; choose a comma, "
                                 "semicolon, tab or pipe.")
            object.__setattr__(self, "separator", sep)
        if self.sheet is not None and (not isinstance(self.sheet, str) or not self.sheet.strip()):
            raise ValueError("Name the sheet to read (its tab's name), or leave it to be detected.")
        if self.header_row is not None:
            row = self.header_row
            if isinstance(row, bool) or not isinstance(row, int) or not 1 <= row <= MAX_HEADER_ROW:
                raise ValueError(f"The header row is a row number from 1 to {MAX_HEADER_ROW:,}, not {row!r:.20}.")

        if self.decimal is not None:
            mark = _DECIMAL_ALIASES.get(str(self.decimal).strip().lower(), str(self.decimal).strip())
            if mark not in DECIMALS:
                raise ValueError(f"The decimal mark is a point or a comma, not {self.decimal!r:.20}.")
            object.__setattr__(self, "decimal", mark)

    def merged(self, other: "ReadOptions | None") -> "ReadOptions":
        """These options with every field left None taken from ``other``."""
        if other is None:
            return self
        fields = ("encoding", "separator", "sheet", "header_row", "decimal")
        return ReadOptions(**{f: getattr(self, f) if getattr(self, f) is not None else getattr(other, f)
                              for f in fields})
