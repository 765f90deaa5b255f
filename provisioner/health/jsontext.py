"""Find a JSON document in a section that also holds other lines.

The collector merges stderr into each section (``2>&1``), so a tool's JSON may come after a
banner (one holding "{" even) or before a stderr line.
"""

from __future__ import annotations

import json
from typing import Any

_MAX_CANDIDATES = 50  # lines opening with "{" tried as a document's start (bounds hostile input)


def find_json(text: str, keys: tuple[str, ...] = ()) -> Any:
    """The first JSON value starting a line with "{", ignoring what follows it (``raw_decode``).

    A decoded object holding one of ``keys`` wins over earlier ones. Returns None when no line
    starts a JSON value; the value may be of any type (callers check its shape).
    """
    decoder = json.JSONDecoder()
    first: Any = None
    found = False
    offset = 0
    tried = 0
    for line in text.splitlines(keepends=True):
        start = offset + len(line) - len(line.lstrip())
        offset += len(line)
        if not line.lstrip().startswith("{") or tried >= _MAX_CANDIDATES:
            continue
        tried += 1
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # cut short, or nested past Python's limit
            continue
        if not keys or (isinstance(value, dict) and any(k in value for k in keys)):
            return value
        if not found:
            first, found = value, True
    return first
