"""Text from input files on its way out: to a terminal or log (unprintable characters escaped) and
to a spreadsheet cell (formula starts neutralised)."""

from __future__ import annotations

import re

# C0/C1 controls, DEL, and the format characters that reorder or hide text (the right-to-left
# override, zero-width marks), line and paragraph separators, lone surrogates.
UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)
# What Excel, LibreOffice and Google Sheets evaluate at the start of a cell (OWASP "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: str) -> str:
    """``text`` with every unprintable character written as its escape (``\\x1b``, ``\\n``, ``\\u202e``):
    a name from an input file cannot colour, clear or forge lines of a report."""
    return UNPRINTABLE.sub(_escape, text) if UNPRINTABLE.search(text) else text


def spreadsheet_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not evaluate: text starting with ``= + - @``, tab or CR gets a
    leading ``'`` (OWASP's advice); numbers and other text are unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def from_spreadsheet_cell(text: str) -> str:
    """The inverse of :func:`spreadsheet_cell` on reading a cable list back."""
    if len(text) > 1 and text[0] == "'" and text[1] in "=+-@\t\r":
        return text[1:]
    return text
