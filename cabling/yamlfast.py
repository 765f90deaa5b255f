"""A fast path for the bulk of a manifest: its ``links:`` list written one flow mapping a line.

``provision cabling plan``, ``import`` and ``convert`` write links as ``- {a: 'gpu001:mlx5_0', b:
'r009-l1:1', cable: C00001}``; on a 12,000-link fabric, building YAML nodes for them is most of the
load time. Lines of exactly that shape are read here, with the scalar typing YAML gives them; any
other line (a comment inside a mapping, a block mapping, a value YAML would type as a number or a
boolean, a date) returns None and the caller parses the whole file with the YAML parser instead.
"""

from __future__ import annotations

import re

import yaml

from cabling.limits import MAX_INT_DIGITS

_LINKS_KEY = re.compile(r"^links:[ \t]*(?:#.*)?$", re.MULTILINE)
# One link: "- {key: value, ...}" whose values are quoted without escapes, or plain and string-typed.
_VALUE = r"""(?:'[^']*'(?!')|"[^"\\]*"|[A-Za-z0-9_][A-Za-z0-9_./+-]*)"""
_PAIR = rf"[ \t]*[A-Za-z_][A-Za-z0-9_]*:[ \t]+{_VALUE}[ \t]*"
_ITEM = re.compile(rf"^( *)- \{{((?:{_PAIR})(?:,{_PAIR})*,?[ \t]*)?\}}[ \t]*$")
_PAIRS = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*):[ \t]+({_VALUE})")
_COMMON = re.compile(r"- \{a: '([^']*)', b: '([^']*)'(?:, cable: ([A-Za-z0-9_][A-Za-z0-9_./+-]*))?\}[ \t]*$")
# How the YAML parser types a plain scalar: by the implicit resolvers for its first character
# (booleans, null, numbers, timestamps); a scalar none of them matches is text.
_RESOLVERS = yaml.resolver.Resolver.yaml_implicit_resolvers


def _is_text(plain: str) -> bool:
    return not any(rx.match(plain) for _tag, rx in _RESOLVERS.get(plain[0], ()))


def split_links(text: str) -> tuple[str, list[dict[str, str]], list[int | None]] | None:
    """``(text with the links block blanked, the links, their line numbers)``, or None if the links
    block is not in the one-line flow form (the caller then uses the YAML parser for everything)."""
    keys = list(_LINKS_KEY.finditer(text))
    if len(keys) != 1:
        return None
    start = keys[0].start()
    head_lines = text.count("\n", 0, start)
    lines = text[start:].split("\n")
    links: list[dict[str, str]] = []
    where: list[int | None] = []
    indent: str | None = None
    end = len(lines)
    for k in range(1, len(lines)):
        line = lines[k]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[0] not in " \t-":
            end = k  # the next top-level key: the links block is over
            break
        common = _COMMON.match(line)
        if common is not None and indent in (None, ""):
            # The planner's own shape, most lines of a large file: no general pair scan needed.
            indent = ""
            a, b, cable = common.groups()
            if cable is None:
                links.append({"a": a, "b": b})
                where.append(head_lines + k + 1)
                continue
            if not _is_text(cable):
                return None
            links.append({"a": a, "b": b, "cable": cable})
            where.append(head_lines + k + 1)
            continue
        m = _ITEM.match(line)
        if m is None or (indent is not None and m.group(1) != indent):
            return None
        indent = m.group(1)
        item = _flow_mapping(m.group(2) or "")
        if item is None:
            return None
        links.append(item)
        where.append(head_lines + k + 1)
    if not links:
        return None
    blanked = "links: []" + "\n" * (end - 1)
    rest = text[:start] + blanked + ("\n" + "\n".join(lines[end:]) if end < len(lines) else "")
    return rest, links, where


def _flow_mapping(inner: str) -> dict[str, str] | None:
    """The pairs of a flow mapping ``_ITEM`` accepted, or None if YAML would not type them as text."""
    out: dict[str, str] = {}
    for key, value in _PAIRS.findall(inner):
        if value[0] in "'\"":
            value = value[1:-1]
        elif not _is_text(value):
            return None  # a number, a boolean, a date: the YAML parser types it
        if not _is_text(key) or key in out:
            return None  # a repeated key: the YAML parser reports it
        out[key] = value
    return out


def _flow_mapping_numbers(inner: str) -> dict[str, object] | None:
    """Like :func:`_flow_mapping`, also taking plain decimal integers (a switch's ``ports: 64``)."""
    out: dict[str, object] = {}
    for key, raw in _PAIRS.findall(inner):
        value = _scalar(raw)
        if value is _NOT_SET or not _is_text(key) or key in out:
            return None
        out[key] = value
    return out


_DEVICES_KEY = re.compile(r"^devices:[ \t]*(?:#.*)?$", re.MULTILINE)
_BLOCK_KEY = re.compile(r"^( *)(- )?([A-Za-z_][A-Za-z0-9_]*):[ \t]+(.*?)[ \t]*$")
_SCALAR = re.compile(_VALUE + r"$")
_FLOW_SEQ = re.compile(rf"\[[ \t]*(?:{_VALUE}[ \t]*(?:,[ \t]*{_VALUE}[ \t]*)*)?,?[ \t]*\]$")
_SEQ_ITEMS = re.compile(_VALUE)
_FLOW_MAP = re.compile(rf"\{{((?:{_PAIR})(?:,{_PAIR})*,?[ \t]*)?\}}$")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)$")
_NOT_SET = object()


def split_devices(text: str) -> tuple[str, list[dict[str, object]], dict[str, int]] | None:
    """Like :func:`split_links` for ``devices:`` written by ``dump_manifest``: each device a block
    mapping (or one flow mapping) whose values sit on their own line. ``(text with the block
    blanked, the devices, device name -> line)``, or None for anything else."""
    keys = list(_DEVICES_KEY.finditer(text))
    if len(keys) != 1:
        return None
    start = keys[0].start()
    head_lines = text.count("\n", 0, start)
    lines = text[start:].split("\n")
    devices: list[dict[str, object]] = []
    where: dict[str, int] = {}
    current: dict[str, object] | None = None
    item_line = 0
    end = len(lines)
    for k in range(1, len(lines)):
        line = lines[k]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[0] not in " -":
            end = k
            break
        if line.startswith("- {"):
            m = _ITEM.match(line)
            item = _flow_mapping_numbers(m.group(2) or "") if m and not m.group(1) else None
            if item is None:
                return None
            current = None
            item_line = head_lines + k + 1
            devices.append(item)
        else:
            m = _BLOCK_KEY.match(line)
            if m is None or m.group(1) != ("" if m.group(2) else "  ") or not _is_text(m.group(3)):
                return None
            if m.group(2):
                current = {}
                item_line = head_lines + k + 1
                devices.append(current)
            elif current is None:
                return None
            value = _block_value(m.group(4))
            if value is _NOT_SET or m.group(3) in current:
                return None
            current[m.group(3)] = value
        name = devices[-1].get("name")
        if isinstance(name, str):
            where[name.casefold()] = item_line
    if not devices:
        return None
    blanked = "devices: []" + "\n" * (end - 1)
    rest = text[:start] + blanked + ("\n" + "\n".join(lines[end:]) if end < len(lines) else "")
    return rest, devices, where


def _scalar(text: str) -> object:
    """A scalar as YAML types it when it is text or a plain decimal; ``_NOT_SET`` otherwise."""
    if text[0] in "'\"":
        return text[1:-1]
    if _is_text(text):
        return text
    # A digit run past any count or GUID is left to the YAML path, which refuses it naming its line.
    return int(text) if len(text) <= MAX_INT_DIGITS and _DECIMAL.match(text) else _NOT_SET


def _block_value(text: str) -> object:
    if not text:
        return _NOT_SET  # a nested block: the YAML parser reads it
    if text[0] == "[":
        if not _FLOW_SEQ.match(text):
            return _NOT_SET
        items = [_scalar(v) for v in _SEQ_ITEMS.findall(text)]
        return _NOT_SET if _NOT_SET in items else items
    if text[0] == "{":
        m = _FLOW_MAP.match(text)
        if m is None:
            return _NOT_SET
        out: dict[str, object] = {}
        for key, raw in _PAIRS.findall(m.group(1) or ""):
            value = _scalar(raw)
            if value is _NOT_SET or not _is_text(key) or key in out:
                return _NOT_SET
            out[key] = value
        return out
    return _scalar(text) if _SCALAR.match(text) else _NOT_SET
