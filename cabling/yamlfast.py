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

_LINKS_KEY = re.compile(r"^links:[ \t]*(?:#.*)?$", re.MULTILINE)
# One link: "- {key: value, ...}" whose values are quoted without escapes, or plain and string-typed.
_VALUE = r"""(?:'[^']*'(?!')|"[^"\\]*"|[A-Za-z0-9_][A-Za-z0-9_./+-]*)"""
_PAIR = rf"[ \t]*[A-Za-z_][A-Za-z0-9_]*:[ \t]+{_VALUE}[ \t]*"
_ITEM = re.compile(rf"^( *)- \{{((?:{_PAIR})(?:,{_PAIR})*,?[ \t]*)?\}}[ \t]*$")
_PAIRS = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*):[ \t]+({_VALUE})")
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
        if not _is_text(key):
            return None
        out[key] = value
    return out
