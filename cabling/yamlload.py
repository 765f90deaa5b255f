"""The YAML loader every cabling input goes through: safe, and a key repeated in one mapping is an
error (two ``links:`` blocks from two concatenated manifests, a device with ``name`` twice) rather
than YAML's silent last-wins."""

from __future__ import annotations

from typing import Any

import yaml

from cabling.limits import MAX_INT_DIGITS

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A key given twice in one mapping; ``problem_mark`` is the second, ``context_mark`` the first."""

    def __init__(self, key: object, first: yaml.Mark, second: yaml.Mark) -> None:
        super().__init__(None, first, f"key {key!r} appears twice in one mapping", second)
        self.key = key
        self.first_line = first.line + 1
        self.second_line = second.line + 1
        self.column = second.column + 1
        self.path = ""

    def describe(self) -> str:
        """``key 'name' appears twice in devices[1] (column 40; first at line 3)``."""
        where = f" in {self.path}" if self.path else " at the top level"
        first = "on the same line" if self.first_line == self.second_line else f"first at line {self.first_line}"
        return f"key {self.key!r} appears twice{where} (column {self.column}; {first})"


class StrictLoader(_Base):
    """The C (or pure) safe loader, refusing repeated mapping keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Mark] = {}
            for key_node, _value in node.value:
                if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:
                    continue
                if first is not key_node.start_mark:
                    raise DuplicateKeyError(key, first, key_node.start_mark)
        result: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return result

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        """An integer, unless its digits run past any count or GUID a file holds: Python refuses
        to convert 4,300 digits with a message that names no line, and nothing real is that long."""
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"a number of {digits} digits is too large for any value in this file "
                "(counts and GUIDs have at most 20)", node.start_mark)
        value: int = self.construct_yaml_int(node)
        return value


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_bounded_int)


def duplicate_key_line(text: str) -> DuplicateKeyError | None:
    """The first repeated key of ``text`` (YAML, or JSON, which YAML reads), or None."""
    loader = StrictLoader(text)
    try:
        loader.get_single_data()
    except DuplicateKeyError as exc:
        exc.path = _path_to(text, exc.problem_mark)
        return exc
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        return None
    finally:
        loader.dispose()
    return None


def _path_to(text: str, mark: yaml.Mark | None) -> str:
    """The ``devices[1]`` path of the mapping holding the key at ``mark`` ("" at the top level)."""
    if mark is None:
        return ""
    loader = _Base(text)
    try:
        root = loader.get_single_node()
    except (yaml.YAMLError, RecursionError):
        return ""
    finally:
        loader.dispose()
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                if key_node.start_mark.index == mark.index:
                    return path
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                stack.append((value, f"{path}.{name}" if path else str(name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return ""
