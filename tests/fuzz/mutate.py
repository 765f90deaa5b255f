"""Mutations of real samples: the damage a cut copy, a wrong tool or an attacker does to a file.

Mutators draw their choices from a :class:`Chooser`, so the same code runs under hypothesis (which
shrinks a failure to its smallest mutation) and under ``random.Random`` for the long runs of
``scripts/fuzz``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Chooser(Protocol):
    """The source of every choice a mutation makes."""

    def int(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""

    def choice(self, items: Sequence[T]) -> T:
        """One of ``items``."""


class RandomChooser:
    """Choices from a seeded ``random.Random`` (long runs)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.rng.randrange(len(items))]


HUGE_NUMBERS = (
    b"9" * 5000,  # past Python's int() digit limit (4300)
    b"-" + b"9" * 4400,
    b"1e999",  # float('1e999') is inf
    b"-1e999",
    b"1e-999",
    b"nan",
    b"NaN",
    b"Infinity",
    b"18446744073709551616",  # 2**64
    b"9223372036854775808",  # 2**63
    b"-1",
    b"0",
    b"0x" + b"f" * 40,
    b"\xd9\xa3",  # ARABIC-INDIC DIGIT THREE: str.isdigit() but not ASCII
    b"\xc2\xb2",  # SUPERSCRIPT TWO: isdigit() True, int() fails
)
CONTROL = [bytes([c]) for c in (*range(0, 32), 127)] + [
    "\u0085".encode(),
    "\u2028".encode(),
    "\ufeff".encode(),
    "\u202e".encode(),
]
INVALID_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82")
NASTY_KEYS = (
    b"a[0]",
    b"[/]x",
    b"[settings.bogus_key]",
    b"key]",
    b"[bold red]x[/]",
    b":100:",
    b":smile:",
    b"x'y",
    b'x"y',
    b'"',
    b"'",
    b"{x}",
    b"{0}",
    b"%s",
    b"\\",
    b"`",
    b"&a",
    b"*a",
    b"!!binary",
    b"!!python/object:os.system",
    b"<<",
    b"#",
    b"- ",
    b"? ",
    b"|",
)
YAML_LINES = (
    b"x: *undefined_alias",
    b"a: &a [*a]",
    b"<<: 5",
    b"<<: [1, 2]",
    b"t: !!timestamp 2020-99-99",
    b"b: !!binary '%%%'",
    b"f: !!float abc",
    b"i: !!int 0x",
    b"p: !!python/object/apply:os.system ['true']",
    b"? [a, b]\n: c",
    b"--- \n---",
    b"%YAML 9.9",
    b"\t- tab",
    b"{",
    b"'",
    b'"\\',
)
WRONG_JSON = (None, True, False, 0, -1, 1.5, 1e308, float("inf"), float("-inf"), float("nan"), 10**400,
              "", "x", "[/]x", [], {}, [1], [None], {"a": 1}, {"@odata.id": 5}, "9" * 5000,
              "\u00b2", int("9" * 30), [[[]]], {"": None})

_DIGITS = re.compile(rb"\d+(?:\.\d+)?")
_KEY = re.compile(rb"[A-Za-z_][A-Za-z0-9_@.\-]*(?=\s*[:=\"])")


def _pos(c: Chooser, data: bytes) -> int:
    return c.int(0, len(data))


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def flip(c: Chooser, data: bytes) -> bytes:
    """Flip one to eight bits at random positions."""
    if not data:
        return data
    buf = bytearray(data)
    for _ in range(c.int(1, 8)):
        i = c.int(0, len(buf) - 1)
        buf[i] ^= 1 << c.int(0, 7)
    return bytes(buf)


def truncate(c: Chooser, data: bytes) -> bytes:
    """Cut the file short (a full disk, a killed copy)."""
    return data[: _pos(c, data)]


def delete_line(c: Chooser, data: bytes) -> bytes:
    """Remove one to three lines."""
    lines = _lines(data)
    for _ in range(c.int(1, 3)):
        if lines:
            del lines[c.int(0, len(lines) - 1)]
    return b"\n".join(lines)


def duplicate_line(c: Chooser, data: bytes) -> bytes:
    """Repeat a line (a merge gone wrong)."""
    lines = _lines(data)
    i = c.int(0, len(lines) - 1)
    lines.insert(i, lines[i])
    return b"\n".join(lines)


def swap_lines(c: Chooser, data: bytes) -> bytes:
    """Exchange two lines."""
    lines = _lines(data)
    i, j = c.int(0, len(lines) - 1), c.int(0, len(lines) - 1)
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def control(c: Chooser, data: bytes) -> bytes:
    """Insert a control or bidi character."""
    i = _pos(c, data)
    return data[:i] + c.choice(CONTROL) + data[i:]


def invalid_utf8(c: Chooser, data: bytes) -> bytes:
    """Insert bytes that are not UTF-8."""
    i = _pos(c, data)
    return data[:i] + c.choice(INVALID_UTF8) + data[i:]


def huge_number(c: Chooser, data: bytes) -> bytes:
    """Replace a number with one past every limit (4,400 digits, 1e999, nan, 2**64...)."""
    found = list(_DIGITS.finditer(data))
    new = c.choice(HUGE_NUMBERS)
    if not found:
        i = _pos(c, data)
        return data[:i] + new + data[i:]
    m = found[c.int(0, len(found) - 1)]
    return data[: m.start()] + new + data[m.end() :]


def nasty_key(c: Chooser, data: bytes) -> bytes:
    """Put brackets, quotes, Rich markup, emoji codes or YAML syntax into a key or value."""
    found = list(_KEY.finditer(data))
    new = c.choice(NASTY_KEYS)
    if not found:
        i = _pos(c, data)
        return data[:i] + new + data[i:]
    m = found[c.int(0, len(found) - 1)]
    if c.int(0, 1):
        return data[: m.start()] + new + data[m.end() :]
    return data[: m.end()] + new + data[m.end() :]


def yaml_line(c: Chooser, data: bytes) -> bytes:
    """Insert a line of hostile YAML (aliases, tags, merge keys, bad directives)."""
    lines = _lines(data)
    i = c.int(0, len(lines))
    indent = b" " * c.choice((0, 2, 4, 6))
    lines.insert(i, indent + c.choice(YAML_LINES))
    return b"\n".join(lines)


def deep_nesting(c: Chooser, data: bytes) -> bytes:
    """Nest 2,000 to 60,000 levels deep (a RecursionError for naive parsers)."""
    depth = c.choice((2000, 20000, 60000))
    opener = c.choice((b"[", b"{\"a\":", b"- ", b"a: {"))
    return opener * depth + data


def splice(c: Chooser, data: bytes) -> bytes:
    """Insert a run of random bytes."""
    i = _pos(c, data)
    noise = bytes(c.int(0, 255) for _ in range(c.int(1, 16)))
    return data[:i] + noise + data[i:]


def wrong_json_type(c: Chooser, data: bytes) -> bytes:
    """Parse as JSON and put a value of the wrong type somewhere; leave non-JSON untouched."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data
    nodes: list[tuple[Any, Any]] = []  # (container, key) pairs

    def walk(obj: Any) -> None:
        if len(nodes) > 5000:
            return
        if isinstance(obj, dict):
            for k, v in obj.items():
                nodes.append((obj, k))
                walk(v)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                nodes.append((obj, i))
                walk(v)

    walk(doc)
    for _ in range(c.int(1, 4)):
        if not nodes:
            return json.dumps(c.choice(WRONG_JSON)).encode()
        container, key = nodes[c.int(0, len(nodes) - 1)]
        container[key] = c.choice(WRONG_JSON)
    return json.dumps(doc).encode()


EXTREME_NUMBERS = (10**400, -(10**400), float("inf"), float("-inf"), float("nan"), 2**64, -1, 0, 1e-300)


def json_number_extreme(c: Chooser, data: bytes) -> bytes:
    """Parse as JSON and replace a number with one past every limit (10**400, inf, nan, 2**64)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data
    numbers: list[tuple[Any, Any]] = []

    def walk(obj: Any) -> None:
        items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
        for k, v in items:
            if isinstance(v, int | float) and not isinstance(v, bool):
                numbers.append((obj, k))
            else:
                walk(v)

    walk(doc)
    if not numbers:
        return data
    container, key = numbers[c.int(0, len(numbers) - 1)]
    container[key] = c.choice(EXTREME_NUMBERS)
    return json.dumps(doc).encode()


MUTATORS: tuple[Callable[[Chooser, bytes], bytes], ...] = (
    flip, truncate, delete_line, duplicate_line, swap_lines, control, invalid_utf8, huge_number,
    nasty_key, yaml_line, splice, wrong_json_type, wrong_json_type, huge_number, nasty_key,
    json_number_extreme,
)


def mutate(c: Chooser, data: bytes) -> bytes:
    """One to three stacked mutations of ``data``; now and then a deep-nesting one."""
    if c.int(0, 40) == 0:
        return deep_nesting(c, data)
    for _ in range(c.int(1, 3)):
        data = c.choice(MUTATORS)(c, data)
    return data
