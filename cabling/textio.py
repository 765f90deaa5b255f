"""Reading input files: every failure (unreadable, not UTF-8, not JSON, too deep) is a typed error."""

from __future__ import annotations

import codecs
import json
import os
import stat
from pathlib import Path
from typing import Any

from cabling.errors import CablingInputError
from cabling.limits import Cap


def read_text(path: str | Path, what: str, *, cap: Cap, strict: bool = True, encoding: str = "utf-8") -> str:
    """The text of ``path``, refused past ``cap`` (the cap of its kind of input). ``strict``: bytes
    that are not UTF-8 are an error naming their line (files people write); otherwise they become
    U+FFFD (tool output, where one bad byte in a description must not hide the fabric)."""
    p = Path(path)
    try:
        raw = _read_bounded(p, what, cap)
    except FileNotFoundError:
        raise CablingInputError(f"cannot read {what}: no such file", file=str(p)) from None
    except IsADirectoryError:
        raise CablingInputError(f"cannot read {what}: it is a folder, not a file", file=str(p)) from None
    except OSError as exc:
        raise CablingInputError(f"cannot read {what}: {exc.strerror or exc}", file=str(p)) from None
    return decode(raw, str(p), what, strict=strict, encoding=encoding)


def _read_bounded(p: Path, what: str, cap: Cap) -> bytes:
    """The bytes of a file or a pipe (``<(ibnetdiscover)``), at most ``cap.limit``; a device
    (``/dev/zero``) or socket is refused before anything is read, a larger regular file before
    its first byte is read."""
    with p.open("rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            raise CablingInputError(f"cannot read {what}: it is a device, not a file", file=str(p),
                                    hint="save the tool's output to a file and give that")
        if stat.S_ISREG(mode) and os.fstat(fh.fileno()).st_size > cap.limit:
            raise _too_large(p, what, cap)
        raw = fh.read(cap.limit + 1)
    if len(raw) > cap.limit:
        raise _too_large(p, what, cap)
    return raw


def _too_large(p: Path, what: str, cap: Cap) -> CablingInputError:
    return CablingInputError(f"cannot read {what}: larger than {cap.describe()}", file=str(p),
                             hint="check the file given: no real one is this large")


def decode(raw: bytes, source: str, what: str, *, strict: bool = True, encoding: str = "utf-8") -> str:
    """``raw`` as text; with ``strict``, undecodable bytes raise an error naming line and column.
    A UTF-8 byte order mark (Windows editors write one) is not part of the text."""
    if encoding == "utf-8" and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    if not strict:
        return raw.decode(encoding, errors="replace")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise CablingInputError(
            f"{what} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {column}",
            file=source, line=line,
            hint="save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE)",
        ) from None


def parse_json(text: str, source: str, what: str = "JSON") -> Any:
    """Parse JSON text; syntax errors, 4,300+ digit numbers and deep nesting are typed errors."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CablingInputError(f"not JSON: {exc.msg} ({what})", file=source, line=exc.lineno) from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise CablingInputError(f"{what} holds a number that is too large: {str(exc)[:80]}", file=source) from None
    except RecursionError:
        raise CablingInputError(f"{what} is nested too deeply to be a real document", file=source) from None
