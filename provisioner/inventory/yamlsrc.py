"""YAML loading that remembers the line of every key, so errors can name file:line."""

from __future__ import annotations

import os
import stat
import string
from pathlib import Path
from typing import Any

import yaml

from provisioner.exceptions import InventoryError

Path_ = tuple[str | int, ...]

# Aliases let a few lines stand for billions of values ("billion laughs"); a real site file
# repeats a block a few dozen times. Past this many values added by aliases the file is refused.
ALIAS_EXPANSION_LIMIT = 1_000_000
# A 10,000-host site with per-host overrides is a few MiB; parsing 16 MiB takes ~300 MB.
MAX_FILE_BYTES = 16 * 1024 * 1024


class LineMap:
    """Maps a path of keys/indices inside a YAML document to its 1-based line number."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._lines: dict[Path_, int] = {}
        self._texts: dict[Path_, str] = {}

    def set(self, path: Path_, line: int) -> None:
        self._lines[path] = line

    def set_text(self, path: Path_, text: str) -> None:
        self._texts[path] = text

    def text(self, path: Path_) -> str | None:
        """A plain scalar as written, where YAML read it as something other than text
        (``On`` is a boolean to YAML 1.1, an enumeration value to a BIOS)."""
        return self._texts.get(tuple(path))

    def line(self, path: Path_) -> int | None:
        """Line of ``path`` or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self._lines:
                return self._lines[p]
            p = p[:-1]
        return self._lines.get((), None)

    def error(self, path: Path_, message: str, *, hint: str | None = None) -> InventoryError:
        """Build an InventoryError pointing at ``path``."""
        return InventoryError(
            message, file=str(self.file), line=self.line(path), key=dotted(path), hint=hint
        )


def dotted(path: Path_) -> str:
    """Render a key path as ``racks[0].hosts[3].bmc.address``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load_yaml(file: Path) -> tuple[Any, LineMap]:
    """Parse ``file``; return the data and a LineMap. Syntax errors and duplicate keys raise."""
    text = read_text(file)
    lines = LineMap(file)
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # checks every character first
        node = loader.get_single_node()
        if node is None:
            raise InventoryError("the file is empty", file=str(file), line=1)
        if alias_expansion(node) > ALIAS_EXPANSION_LIMIT:
            raise InventoryError(
                f"its aliases (*name) expand to more than {ALIAS_EXPANSION_LIMIT:,} values",
                file=str(file), line=1,
                hint="write the repeated blocks out, or use fewer levels of aliases within aliases",
            )
        data = _build(loader, node, (), lines)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise InventoryError(
            f"YAML syntax error: {problem}",
            file=str(file),
            line=(mark.line + 1) if mark else None,
            hint="check indentation, colons and quoting on this line and the one before",
        ) from None
    except yaml.reader.ReaderError as exc:
        raise InventoryError(
            f"character {_char(exc.character)} is not allowed in YAML",
            file=str(file),
            line=text.count("\n", 0, exc.position) + 1,
            hint="remove control characters; YAML allows printable text, tabs and newlines",
        ) from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"YAML error: {str(exc)[:200]}", file=str(file)) from None
    except RecursionError:
        raise InventoryError(
            "nested too deeply to be a site file", file=str(file), hint="check the brackets"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def alias_expansion(node: yaml.Node) -> int:
    """How many values aliases add to a composed document once expanded (0 without aliases).

    Each node is sized once (an alias is the same node object again), so this is linear in the
    text however large the expansion; counting stops a little past ALIAS_EXPANSION_LIMIT."""
    cap = ALIAS_EXPANSION_LIMIT + 1
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        known = sizes.get(id(n))
        if known is not None:
            return known
        sizes[id(n)] = 1  # a node inside itself (a recursive alias) counts once
        total = 1
        if isinstance(n, yaml.SequenceNode):
            total += sum(size(child) for child in n.value)
        elif isinstance(n, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in n.value)
        sizes[id(n)] = total = min(total, cap + len(sizes))
        return total

    return max(0, size(node) - len(sizes))


def safe_load_bounded(text: str) -> Any:
    """``yaml.safe_load`` that refuses alias bombs (ValueError) before building anything."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if alias_expansion(node) > ALIAS_EXPANSION_LIMIT:
            raise ValueError(f"aliases expand to more than {ALIAS_EXPANSION_LIMIT:,} values")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: Path_, lines: LineMap) -> Any:
    lines.set(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # honours YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _construct(loader, key_node, path, lines, keep_text=False)
            if not isinstance(key, str | int):
                raise InventoryError(
                    f"a key must be text, not {key!r:.40}",
                    file=str(lines.file),
                    line=key_node.start_mark.line + 1,
                    key=dotted(path) or None,
                    hint="write the key as a word; quote it if it starts with [, { or ?",
                )
            if key in result:
                raise InventoryError(
                    f"duplicate key {key!r}",
                    file=str(lines.file),
                    line=key_node.start_mark.line + 1,
                    key=dotted((*path, key)),
                    hint="YAML keeps only the last one; remove or rename one of them",
                )
            result[key] = _build(loader, value_node, (*path, key), lines)
            lines.set((*path, key), key_node.start_mark.line + 1)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, (*path, i), lines) for i, item in enumerate(node.value)]
    return _construct(loader, node, path, lines)


def _construct(loader: yaml.SafeLoader, node: yaml.Node, path: Path_, lines: LineMap, *,
               keep_text: bool = True) -> Any:
    """One scalar (or an aliased/complex node); a value no type can hold is an error at its line."""
    _refuse_long_number(node, path, lines)
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, TypeError, OverflowError) as exc:
        # e.g. a 4,400-digit integer, `!!timestamp 2020-99-99`, an unhashable key inside a tag
        raise InventoryError(
            f"value cannot be read: {str(exc)[:120]}",
            file=str(lines.file),
            line=node.start_mark.line + 1,
            key=dotted(path) or None,
            hint="quote it to keep it as text, or fix the number/date",
        ) from None
    if keep_text and isinstance(node, yaml.ScalarNode) and node.style is None \
            and not isinstance(value, str):
        lines.set_text(path, node.value)
    return value


# No setting, count, port or BIOS value a site file holds runs past this many digits (a 64-bit
# integer has 20); Python itself refuses 4,300 in its own words, naming no line.
MAX_NUMBER_DIGITS = 40
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _refuse_long_number(node: yaml.Node, path: Path_, lines: LineMap) -> None:
    if not isinstance(node, yaml.ScalarNode) or node.tag not in _NUMBER_TAGS:
        return
    digits = sum(c in string.hexdigits for c in str(node.value).lower().lstrip("+-0x"))
    if digits > MAX_NUMBER_DIGITS:
        raise InventoryError(
            f"a number of {digits:,} digits is too large for any value in a site file (at "
            f"most {MAX_NUMBER_DIGITS})",
            file=str(lines.file), line=node.start_mark.line + 1, key=dotted(path) or None,
            hint="fix the number, or quote it if it is text")


def _char(character: object) -> str:
    return f"U+{character:04X}" if isinstance(character, int) else repr(character)


class FileRefused(Exception):
    """A path :func:`read_regular` would not read: no regular file, or over its limit."""

    def __init__(self, too_large: bool) -> None:
        super().__init__("over the limit" if too_large else "not a regular file")
        self.too_large = too_large


def read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit`` of them: a path to /dev/zero, a FIFO or a
    huge file raises :class:`FileRefused` rather than being read until memory or patience
    runs out. Callers say which of their files it was."""
    # O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused(too_large=False)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileRefused(too_large=True)
    return data


def _read_bounded(file: Path) -> bytes:
    """An inventory file, refused (named) when it is no regular file or over MAX_FILE_BYTES."""
    try:
        return read_regular(file, MAX_FILE_BYTES)
    except FileRefused as refused:
        if refused.too_large:
            raise InventoryError(
                f"over {MAX_FILE_BYTES // (1024 * 1024)} MiB: not an inventory file",
                file=str(file), hint="split the site, or check the path") from None
        raise InventoryError("not a regular file", file=str(file),
                             hint="point at the YAML file itself") from None


def read_text(file: Path) -> str:
    """The text of an inventory file; unreadable or non-UTF-8 files are an InventoryError."""
    try:
        raw = _read_bounded(file)
    except FileNotFoundError:
        raise InventoryError(
            "file not found", file=str(file), hint="create it or check the site name/path"
        ) from None
    except OSError as exc:
        raise InventoryError(f"cannot read: {exc.strerror or exc}", file=str(file)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InventoryError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {column}",
            file=str(file),
            line=line,
            hint="save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE)",
        ) from None
