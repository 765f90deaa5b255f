"""Read and write manifests: YAML with file:line errors, and the published JSON schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cabling.errors import CablingInputError
from cabling.formats import MANIFEST_FORMATS
from cabling.keys import unknown_key
from cabling.limits import JSON_LINE_SEARCH_BYTES, MANIFEST
from cabling.model import Manifest
from cabling.textio import read_text
from cabling.yamlfast import split_devices, split_links
from cabling.yamlload import DuplicateKeyError, StrictLoader, duplicate_key_line

_Loader = StrictLoader
_DUPLICATE_HINT = ("keep one: a repeated key is not merged, the last one would silently replace the first "
                   "(two manifests pasted together?)")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _RepeatedJSONKey(key)
            seen.add(key)
    return out


class _RepeatedJSONKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


# Python refuses to convert more digits than this (sys.get_int_max_str_digits) with its own words.
_JSON_LONG_NUMBER = re.compile(r"-?\d{4300,}")


def load_manifest(path: str | Path) -> Manifest:
    """Load a YAML (or JSON) manifest; errors name the file, line and key and say how to fix it."""
    p = Path(path)
    text = read_text(p, "manifest", cap=MANIFEST)
    if p.suffix.lower() == ".json":
        return _load_json(text, str(p))
    return parse_manifest(text, str(p))


def _load_json(text: str, source: str) -> Manifest:
    """A JSON manifest without the YAML parser (the slow part on 10^4 links). On an error a small
    file is parsed again as YAML (which reads JSON) to name the line; a large one is named by the
    JSON path alone, as locating the line would cost a YAML parse of all of it."""
    small = len(text) <= JSON_LINE_SEARCH_BYTES
    try:
        # json.loads refuses nothing that is repeated: a hook does, so that two "links" (or a device
        # with "name" twice) are an error instead of last-wins.
        data = json.loads(text, object_pairs_hook=_unique_pairs)
    except _RepeatedJSONKey as exc:
        dup = duplicate_key_line(text) if small else None
        if dup is None:
            raise CablingInputError(f"key {exc.key!r} appears twice in one JSON object", file=source,
                                    hint=_DUPLICATE_HINT) from None
        raise CablingInputError(dup.describe(), file=source, line=dup.second_line, hint=_DUPLICATE_HINT) from None
    except json.JSONDecodeError as exc:
        if small:
            return parse_manifest(text, source)
        raise CablingInputError(f"not JSON: {exc.msg}", file=source, line=exc.lineno) from None
    except ValueError:  # a number past Python's digit limit
        m = _JSON_LONG_NUMBER.search(text)
        line = text.count("\n", 0, m.start()) + 1 if m else None
        raise CablingInputError(
            f"a number of {len(m.group().lstrip('-')) if m else 'over 4300'} digits is too large for any value "
            "in this file (counts and GUIDs have at most 20)", file=source, line=line) from None
    except RecursionError:
        raise CablingInputError("nested too deeply to be a manifest", file=source) from None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        if small:
            return parse_manifest(text, source)
        raise _validation_error(exc, data, None, source) from None
    manifest.set_origin(source, {}, [])
    return manifest


def parse_manifest(text: str, source: str = "<manifest>") -> Manifest:
    """Parse manifest text; ``source`` names it in error messages."""
    fast = _parse_fast(text, source)
    if fast is not None:
        return fast
    loader = _Loader(text)
    try:
        # One parse gives both the data and the node marks that error messages point at.
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    except RecursionError:
        raise CablingInputError("nested too deeply to be a manifest", file=source) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a tagged scalar (!!int, !!timestamp) out of range
        raise CablingInputError(f"not valid YAML: {str(exc)[:120]}", file=source) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise CablingInputError(
            "a manifest is a mapping with 'devices' and 'links'", file=source, line=1,
            hint="supported: " + "; ".join(MANIFEST_FORMATS) + " (docs/cabling.md; 'provision cabling plan' "
            "writes an example)",
        )
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, data, root, source) from None
    manifest.set_origin(source, _item_lines(root, "devices", "name"), _list_lines(root, "links"))
    return manifest


def _validation_error(exc: ValidationError, data: Any, root: yaml.Node | None, source: str) -> CablingInputError:
    """The first validation error, naming the key path and, with the YAML ``root``, its line."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    line = _line_of(root, loc) if root is not None else None
    key = ".".join(str(x) for x in loc)
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    if err["type"] == "extra_forbidden":
        return CablingInputError(unknown_key(Manifest, loc, data) + more, file=source, line=line)
    return CablingInputError(f"[{key}] {err['msg']}{more}", file=source, line=line)


def _parse_fast(text: str, source: str) -> Manifest | None:
    """The manifest read with its links block taken line by line (see cabling.yamlfast), or None
    when that does not apply or anything is wrong: the full parse then finds and reports it."""
    split = split_links(text)
    if split is None:
        return None
    rest, links, link_lines = split
    devices = split_devices(rest)
    if devices is not None:
        rest = devices[0]
    loader = _Loader(rest)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        return None
    finally:
        loader.dispose()
    if not isinstance(data, dict) or data.get("links") != [] or (devices is not None and data.get("devices") != []):
        return None
    data["links"] = links
    if devices is not None:
        data["devices"] = devices[1]
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError:
        return None
    device_lines = devices[2] if devices is not None else _item_lines(root, "devices", "name")
    manifest.set_origin(source, device_lines, link_lines)
    return manifest
def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> CablingInputError:
    """A typed error naming the line of any YAML error (marked ones and the reader's bad characters)."""
    if isinstance(exc, DuplicateKeyError):
        found = duplicate_key_line(text) or exc
        return CablingInputError(found.describe(), file=source, line=found.second_line, hint=_DUPLICATE_HINT)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        return CablingInputError(f"not valid YAML: {problem}", file=source,
                                 line=mark.line + 1 if mark else None)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else None
        return CablingInputError(
            f"not valid YAML: character {_char(exc.character)} is not allowed", file=source, line=line,
            hint="remove control characters; YAML allows only printable text, tabs and newlines",
        )
    return CablingInputError(f"not valid YAML: {str(exc)[:120]}", file=source)


def _char(character: object) -> str:
    return f"U+{character:04X}" if isinstance(character, int) else repr(character)


def dump_manifest(manifest: Manifest) -> str:
    """YAML text of a manifest, leaving out empty and unset fields so files stay readable."""
    data = _prune(manifest.model_dump(mode="json", exclude_none=True))
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=None, width=120)


def manifest_schema() -> dict[str, Any]:
    """The JSON schema of the manifest format (published as docs/cabling-manifest.schema.json)."""
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "provisioner cabling wiring manifest"
    # The serializer turns endpoints into 'device:port' text; the schema must accept both forms.
    schema.setdefault("$defs", {})["Endpoint"] = {
        "description": "A device and port: 'device:port' text (port after the last colon) or an object.",
        "anyOf": [
            {"type": "string", "pattern": "^.+:[^:]+$"},
            {
                "type": "object",
                "properties": {"device": {"type": "string"}, "port": {"type": ["string", "integer"]}},
                "required": ["device", "port"],
                "additionalProperties": False,
            },
        ],
    }
    return schema


def schema_text() -> str:
    """The schema as stable, pretty JSON text."""
    return json.dumps(manifest_schema(), indent=2, sort_keys=True) + "\n"


def _prune(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _prune(v) for k, v in obj.items() if v not in ({}, [], None)}
    if isinstance(obj, list):
        return [_prune(v) for v in obj]
    return obj


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    node = root
    line = root.start_mark.line + 1 if root is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
        line = node.start_mark.line + 1
    return line


def _list_lines(root: yaml.Node | None, key: str) -> list[int | None]:
    if not isinstance(root, yaml.MappingNode):
        return []
    seq = next((v for k, v in root.value if k.value == key), None)
    if not isinstance(seq, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in seq.value]


def _item_lines(root: yaml.Node | None, key: str, name_key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    if not isinstance(root, yaml.MappingNode):
        return out
    seq = next((v for k, v in root.value if k.value == key), None)
    if not isinstance(seq, yaml.SequenceNode):
        return out
    for item in seq.value:
        if isinstance(item, yaml.MappingNode):
            name = next((v.value for k, v in item.value if k.value == name_key), None)
            if isinstance(name, str):
                out[name.casefold()] = item.start_mark.line + 1
    return out
