"""YAML loading that remembers the line of every key, so errors can name file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from provisioner.exceptions import InventoryError

Path_ = tuple[str | int, ...]


class LineMap:
    """Maps a path of keys/indices inside a YAML document to its 1-based line number."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._lines: dict[Path_, int] = {}

    def set(self, path: Path_, line: int) -> None:
        self._lines[path] = line

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
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(
            "file not found", file=str(file), hint="create it or check the site name/path"
        ) from None
    except OSError as exc:
        raise InventoryError(f"cannot read: {exc.strerror}", file=str(file)) from None
    loader = yaml.SafeLoader(text)
    lines = LineMap(file)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InventoryError("the file is empty", file=str(file), line=1)
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
    finally:
        loader.dispose()
    return data, lines


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: Path_, lines: LineMap) -> Any:
    lines.set(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # honours YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
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
    return loader.construct_object(node, deep=True)
