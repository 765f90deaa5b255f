"""JSON as a hostile peer may send it: refused when no real peer would send it (nested
deeper than any schema, integers of hundreds of digits, numbers that overflow, NaN)."""

from __future__ import annotations

import json
import math
from typing import Any

# Redfish, MAAS and Ironic resources nest a dozen levels at most; Python's own parser gives
# up near 1000.
MAX_DEPTH = 64
MAX_INT_DIGITS = 40


class JSONLimit(ValueError):
    """The JSON is well formed but beyond what any real peer sends; the message says how."""


class NotJSON(ValueError):
    """The text is not JSON at all (an HTML error page, half an answer)."""


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONLimit(f"JSON with an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONLimit(f"JSON whose number {text[:40]} is out of range")
    return value


def _no_constant(text: str) -> float:
    raise JSONLimit(f"JSON with {text}, which is not a JSON number")


def _too_deep(value: Any, limit: int) -> bool:
    # level by level, without recursion (the point is data too deep to recurse into)
    level = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list):
                    below.append(child)
        level = below
    return False


def loads(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``raw``; raises :class:`JSONLimit` or :class:`NotJSON`."""
    try:
        data = json.loads(raw, parse_int=_bounded_int, parse_float=_finite_float,
                          parse_constant=_no_constant)
    except JSONLimit:
        raise
    except RecursionError:
        raise JSONLimit(f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise NotJSON(str(exc)) from None
    opening = raw.count(b"{") + raw.count(b"[") if isinstance(raw, bytes) \
        else raw.count("{") + raw.count("[")
    # fewer brackets than the limit cannot nest past it: most answers skip the walk
    if isinstance(data, dict | list) and opening > max_depth and _too_deep(data, max_depth):
        raise JSONLimit(f"JSON nested deeper than {max_depth} levels")
    return data
