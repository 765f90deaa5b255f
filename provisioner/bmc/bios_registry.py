"""A BIOS attribute registry as the firmware publishes it (DMTF AttributeRegistry): each
attribute's type, bounds and allowed values, and the ``Dependencies`` that change one
attribute's properties (read-only, current value) from the values of others. Pure: it reads
JSON and sends nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from re import _parser as sre_parse  # type: ignore[attr-defined]  # re's own parser
from typing import Any

# MapFromCondition (DMTF AttributeRegistry): how a map-from value is compared.
CONDITIONS = frozenset({"EQU", "NEQ", "GTR", "GEQ", "LSS", "LEQ"})
# A pattern longer than this from a BMC is not evaluated (nobody writes one by hand).
MAX_PATTERN_CHARS = 512


@dataclass(frozen=True)
class AttributeDef:
    """What the registry says of one attribute."""

    name: str
    kind: str | None = None  # Enumeration, String, Integer, Boolean, Password
    read_only: bool = False  # in the firmware's current state (Dependencies may lift it)
    immutable: bool = False  # never writable
    values: tuple[str, ...] | None = None  # an enumeration's ValueName list
    lower: int | None = None
    upper: int | None = None
    increment: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None  # ValueExpression

    def describe(self) -> str:
        """The values it takes, as a hint says them."""
        if self.values:
            return f"allowed: {', '.join(self.values)}"
        if self.kind == "Integer":
            return f"an integer {_range(self)}".rstrip()
        if self.kind == "Boolean":
            return "true or false"
        if self.kind == "String":
            bits = []
            if self.min_length is not None or self.max_length is not None:
                bits.append(f"{self.min_length or 0}..{_text(self.max_length)} characters")
            if self.pattern:
                bits.append(f"matching {self.pattern}")
            return "text" + (f" of {', '.join(bits)}" if bits else "")
        return self.kind or "any value"


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _range(info: AttributeDef) -> str:
    if info.lower is None and info.upper is None:
        return ""
    step = f" in steps of {info.increment}" if info.increment else ""
    return f"from {_text(info.lower) or '-inf'} to {_text(info.upper) or 'inf'}{step}"


@dataclass(frozen=True)
class Condition:
    """One map-from term: ``attribute``'s ``prop`` compared with ``value``."""

    attribute: str
    prop: str
    op: str
    value: Any
    term: str = "OR"  # how it joins the terms before it (AND/OR)

    def holds(self, values: Mapping[str, Any]) -> bool | None:
        """Whether it holds for these attribute values; None when it cannot be told (a
        property other than CurrentValue, or values that cannot be ordered)."""
        if self.prop != "CurrentValue" or self.op not in CONDITIONS:
            return None
        have = values.get(self.attribute)
        if self.op in ("EQU", "NEQ"):
            equal = _same(have, self.value)
            return equal if self.op == "EQU" else not equal
        try:
            a, b = float(str(have)), float(str(self.value))
        except ValueError:
            return None
        return {"GTR": a > b, "GEQ": a >= b, "LSS": a < b, "LEQ": a <= b}[self.op]

    def describe(self) -> str:
        """``SysProfile != Custom``."""
        op = {"EQU": "=", "NEQ": "!=", "GTR": ">", "GEQ": ">=", "LSS": "<", "LEQ": "<="}
        prop = "" if self.prop == "CurrentValue" else f".{self.prop}"
        return f"{self.attribute}{prop} {op.get(self.op, self.op)} {_show(self.value)}"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return _show(a).lower() == _show(b).lower()
    return _show(a) == _show(b)


@dataclass(frozen=True)
class Dependency:
    """A ``Map`` dependency: when its conditions hold, ``target``'s ``prop`` is ``value``."""

    target: str
    prop: str  # ReadOnly, CurrentValue, Hidden, GrayOut, LowerBound, ...
    value: Any
    when: tuple[Condition, ...]

    def fires(self, values: Mapping[str, Any]) -> bool | None:
        """Whether the conditions hold for these values (None: cannot be told).

        Terms are combined left to right by each term's MapTerms; iDRAC omits MapTerms and
        lists alternatives (several EQU of one attribute), which only OR makes sense of."""
        result: bool | None = None
        for i, cond in enumerate(self.when):
            now = cond.holds(values)
            if i == 0:
                result = now
            elif cond.term == "AND":
                result = False if result is False or now is False else (
                    None if result is None or now is None else True)
            else:
                result = True if result is True or now is True else (
                    None if result is None or now is None else False)
        return result

    def describe(self, values: Mapping[str, Any] | None = None) -> str:
        """``SysProfile != Custom``, or several terms joined; given ``values``, only the
        alternatives (OR terms) that hold for them."""
        terms = list(self.when)
        if values is not None and all(c.term == "OR" for c in terms[1:]):
            terms = [c for c in terms if c.holds(values)] or terms
        out = ""
        for i, cond in enumerate(terms):
            out += ("" if i == 0 else f" {cond.term.lower()} ") + cond.describe()
        return out


@dataclass(frozen=True)
class Registry:
    """A parsed attribute registry."""

    attributes: Mapping[str, AttributeDef]
    dependencies: tuple[Dependency, ...] = ()

    def get(self, name: str) -> AttributeDef | None:
        """One attribute's definition."""
        return self.attributes.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.attributes

    def rules_for(self, name: str, prop: str) -> list[Dependency]:
        """The dependencies that set ``prop`` of attribute ``name``."""
        return [d for d in self.dependencies if d.target == name and d.prop == prop]


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def parse_attribute(entry: Mapping[str, Any]) -> AttributeDef | None:
    """One ``RegistryEntries.Attributes`` member; None for one without a name."""
    name = entry.get("AttributeName")
    if not isinstance(name, str) or not name:
        return None
    values = entry.get("Value")
    allowed = None
    if isinstance(values, list):
        allowed = tuple(str(v.get("ValueName")) for v in values
                        if isinstance(v, dict) and v.get("ValueName") is not None)
    increment = _int(entry.get("ScalarIncrement"))
    pattern = entry.get("ValueExpression")
    return AttributeDef(
        name=name,
        kind=str(entry["Type"]) if isinstance(entry.get("Type"), str) else None,
        read_only=entry.get("ReadOnly") is True,
        immutable=entry.get("Immutable") is True,
        values=allowed or None,
        lower=_int(entry.get("LowerBound")),
        upper=_int(entry.get("UpperBound")),
        increment=increment if increment and increment > 0 else None,
        min_length=_int(entry.get("MinLength")),
        max_length=_int(entry.get("MaxLength")),
        pattern=pattern if isinstance(pattern, str) and pattern else None,
    )


def parse_dependency(entry: Mapping[str, Any]) -> Dependency | None:
    """One ``RegistryEntries.Dependencies`` member of Type Map; None for anything else."""
    if entry.get("Type", "Map") != "Map" or not isinstance(entry.get("Dependency"), dict):
        return None
    dep = entry["Dependency"]
    target = dep.get("MapToAttribute") or entry.get("DependencyFor")
    prop = dep.get("MapToProperty")
    if not isinstance(target, str) or not isinstance(prop, str):
        return None
    when = []
    for i, m in enumerate(dep.get("MapFrom") or []):
        if not isinstance(m, dict) or not isinstance(m.get("MapFromAttribute"), str):
            continue
        term = str(m.get("MapTerms") or "OR").upper() if i else "OR"
        when.append(Condition(m["MapFromAttribute"], str(m.get("MapFromProperty") or
                                                         "CurrentValue"),
                              str(m.get("MapFromCondition") or ""), m.get("MapFromValue"),
                              "AND" if term == "AND" else "OR"))
    if not when:
        return None
    return Dependency(target, prop, dep.get("MapToValue"), tuple(when))


def parse_registry(document: Mapping[str, Any]) -> Registry | None:
    """An AttributeRegistry resource; None when it has no ``RegistryEntries.Attributes``."""
    entries = document.get("RegistryEntries")
    if not isinstance(entries, dict) or not isinstance(entries.get("Attributes"), list):
        return None
    attributes: dict[str, AttributeDef] = {}
    for entry in entries["Attributes"]:
        parsed = parse_attribute(entry) if isinstance(entry, dict) else None
        if parsed is not None:
            attributes[parsed.name] = parsed
    deps = [parse_dependency(d) for d in entries.get("Dependencies") or []
            if isinstance(d, dict)]
    return Registry(attributes, tuple(d for d in deps if d is not None))


def safe_pattern(pattern: str) -> re.Pattern[str] | None:
    """A BMC's ValueExpression compiled, or None when it cannot be judged safely: not a
    Python regular expression, too long, or a repetition inside a repetition (or of an
    alternation), the shapes that take exponential time on a crafted value."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        parsed = sre_parse.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    return None if _nested_repeat(parsed, inside=False) else compiled


# A repetition of more than this many is where a nested one starts to cost exponential time.
RISKY_REPEAT = 16
_REPEATS = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT}
_POSSESSIVE = getattr(sre_parse, "POSSESSIVE_REPEAT", None)


def _nested_repeat(parsed: Any, *, inside: bool) -> bool:
    """Whether a parsed pattern repeats a repetition or an alternation many times."""
    for op, arg in parsed:
        if op in _REPEATS or (_POSSESSIVE is not None and op == _POSSESSIVE):
            _low, high, sub = arg
            if inside and (high is sre_parse.MAXREPEAT or high > 1):
                return True
            risky = high is sre_parse.MAXREPEAT or high > RISKY_REPEAT
            subs, deeper = [sub], inside or risky
        elif op is sre_parse.BRANCH:
            if inside:
                return True
            subs, deeper = list(arg[1]), inside
        elif op is sre_parse.SUBPATTERN:
            subs, deeper = [arg[-1]], inside
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            subs, deeper = [arg[1]], inside
        else:
            continue
        if any(_nested_repeat(sub, inside=deeper) for sub in subs):
            return True
    return False
