"""A wanted BIOS value typed the way the firmware types it: by its attribute registry entry
(enumerations are strings, integers within bounds and steps, strings within length and
pattern), or without one by the type of the value the BIOS reports now. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from provisioner.bmc.bios_registry import AttributeDef, safe_pattern

Value = bool | int | str
_INT = re.compile(r"[+-]?\d{1,19}")
_TRUE = {"true"}
_FALSE = {"false"}


@dataclass(frozen=True)
class Typed:
    """A wanted value as the BMC takes it, or why the firmware would not take it."""

    value: Value | None
    problem: str | None = None
    note: str | None = None  # e.g. a pattern that could not be checked

    @property
    def ok(self) -> bool:
        """Whether the value can be sent."""
        return self.problem is None


def text_value(value: Any) -> str:
    """A value as printed and compared (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _as_written(value: Value, written: str | None) -> str:
    # YAML 1.1 reads On/Off/yes/no as booleans: an enumeration wants the word written.
    if written is not None:
        return written
    return text_value(value)


def type_value(value: Value, written: str | None, info: AttributeDef | None,
               current: Any = None) -> Typed:
    """``value`` (``written`` as in the site file) typed for the attribute ``info`` describes;
    without a registry entry, typed like ``current`` (the value the BIOS shows now)."""
    if info is None or info.kind is None:
        return _like(value, written, current)
    kind = info.kind
    if kind == "Enumeration" or (info.values and kind not in ("Integer", "Boolean")):
        return _enumeration(_as_written(value, written), info)
    if kind == "Integer":
        return _integer(value, written, info)
    if kind == "Boolean":
        return _boolean(value, written, info)
    if kind == "String":
        return _string(_as_written(value, written), info)
    if kind == "Password":
        return Typed(None, "a password attribute reads back empty: it cannot be kept in a "
                     "baseline (set it with the vendor's tool)")
    return _like(value, written, current)


def _like(value: Value, written: str | None, current: Any) -> Typed:
    if isinstance(current, bool):
        flag = _flag(value, written)
        if flag is None:
            return Typed(None, f"{_as_written(value, written)!r} is not true or false (the "
                         "BIOS reports a boolean)")
        return Typed(flag)
    if isinstance(current, int) and not isinstance(value, bool):
        number = _number(value)
        if number is None:
            return Typed(None, f"{value!r} is not an integer (the BIOS reports one)")
        return Typed(number)
    if isinstance(current, str):
        return Typed(_as_written(value, written))
    return Typed(value)


def _flag(value: Value, written: str | None) -> bool | None:
    if isinstance(value, bool):
        return value
    text = _as_written(value, written).strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def _number(value: Value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if _INT.fullmatch(text) else None


def _enumeration(text: str, info: AttributeDef) -> Typed:
    if info.values and text not in info.values:
        close = [v for v in info.values if v.lower() == text.lower()]
        guess = f" (did you mean {close[0]!r}? values are case-sensitive)" if close else ""
        return Typed(None, f"{text!r} is not one of its values{guess}; {info.describe()}")
    return Typed(text)


def _integer(value: Value, written: str | None, info: AttributeDef) -> Typed:
    number = _number(value)
    if number is None:
        return Typed(None, f"{_as_written(value, written)!r} is not an integer; "
                     f"{info.describe()}")
    if (info.lower is not None and number < info.lower) or (
            info.upper is not None and number > info.upper):
        return Typed(None, f"{number} is out of range; {info.describe()}")
    if info.increment and (number - (info.lower or 0)) % info.increment:
        return Typed(None, f"{number} is not a step of the range; {info.describe()}")
    return Typed(number)


def _boolean(value: Value, written: str | None, info: AttributeDef) -> Typed:
    flag = _flag(value, written)
    if flag is None:
        return Typed(None, f"{_as_written(value, written)!r} is not true or false; "
                     f"{info.describe()}")
    return Typed(flag)


def _string(text: str, info: AttributeDef) -> Typed:
    if (info.min_length is not None and len(text) < info.min_length) or (
            info.max_length is not None and len(text) > info.max_length):
        return Typed(None, f"{len(text)} characters; {info.describe()}")
    if info.pattern:
        compiled = safe_pattern(info.pattern)
        if compiled is None:
            return Typed(text, note=f"its pattern {info.pattern[:80]!r} was not checked "
                         "(not a pattern this tool evaluates safely)")
        if not compiled.fullmatch(text):
            return Typed(None, f"{text!r} does not match; {info.describe()}")
    return Typed(text)


def same_value(want: Any, have: Any) -> bool:
    """Whether the BIOS reports the wanted (typed) value.

    BMCs report booleans as JSON booleans or as "True"-like strings, and numbers sometimes as
    strings: compare the printed forms, exactly otherwise (enumerations are case-sensitive)."""
    if isinstance(want, bool):
        return text_value(have).lower() == text_value(want)
    return text_value(want) == text_value(have)
