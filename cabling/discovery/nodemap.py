"""GUID-to-name maps: infiniband-diags ``--node-name-map`` files and ``H-<guid> name`` lists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from cabling.errors import CablingInputError
from cabling.limits import NODE_NAME_MAP
from cabling.model import normalize_guid
from cabling.textio import read_text

# rdma-core util/node_name_map.c: strtoull reads the GUID, then the name is the first token of the
# rest split on '"' or '#' (strtok): '0x.. "name"  # comment' and '0x.. name' both give "name".
_NNM = re.compile(r"^(0x[0-9a-fA-F]+)(?:\s+(.*))?$")
_NAME_END = re.compile(r'["#]')
_PLAIN = re.compile(r"^(?:([SHR])-)?((?:0x)?[0-9a-fA-F]{1,16})\s+(\S.*?)\s*$")


def load_node_name_map(path: str | Path, warnings: list[str] | None = None) -> dict[str, str]:
    """Read a node-name-map (``0x<guid> "name"``; also ``H-<guid> name``); GUID -> name."""
    p = Path(path)
    return parse_node_name_map(read_text(p, "node-name-map", cap=NODE_NAME_MAP, strict=False), str(p), warnings)


def parse_node_name_map(text: str, source: str = "<node-name-map>",
                        warnings: list[str] | None = None) -> dict[str, str]:
    """Parse node-name-map text as rdma-core does; a line that is neither form is an error naming
    its line. A GUID listed again keeps its first name (as OpenSM and the diags do), with a warning."""
    out: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        guid, name = _entry(line, source, lineno)
        if guid in out:
            if warnings is not None and name != out[guid]:
                warnings.append(f"{source}:{lineno}: GUID 0x{guid} is named again ({name!r}); its first name "
                                f"{out[guid]!r} (line {first_line[guid]}) is kept, as rdma-core and OpenSM keep it")
            continue
        out[guid] = name
        first_line[guid] = lineno
    return out


def _entry(line: str, source: str, lineno: int) -> tuple[str, str]:
    """(GUID, name) of one map line."""
    m = _NNM.match(line)
    if m:
        name = next((t for t in _NAME_END.split(m.group(2) or "") if t), "").strip()
        if not name:
            # rdma-core skips such a line; here it is more likely a GUID list given as a map.
            raise CablingInputError(f"no name after GUID {m.group(1)}", file=source, line=lineno,
                                    hint='each line is 0x<16 hex digit GUID> "name"')
        return _guid(m.group(1), source, lineno), name
    return _plain_entry(line, source, lineno)


def _plain_entry(line: str, source: str, lineno: int) -> tuple[str, str]:
    """``H-<guid> name`` (ibnetdiscover node ids, as sites write their own lists)."""
    m = _PLAIN.match(line)
    if not m or not m.group(1):
        raise CablingInputError(
            f"cannot read node-name-map line {line[:60]!r}", file=source, line=lineno,
            hint='each line is 0x<16 hex digit GUID> "name" (or H-<guid> name)',
        )
    name = m.group(3)
    if name.startswith('"'):
        try:
            name = " ".join(shlex.split(name))
        except ValueError:  # an unclosed quote
            raise CablingInputError(
                f"unbalanced quotes in name {name[:60]!r}", file=source, line=lineno,
                hint='close the quote: H-<guid> "name"',
            ) from None
    return _guid(m.group(2), source, lineno), name


def _guid(text: str, source: str, lineno: int) -> str:
    try:
        return normalize_guid(text)
    except ValueError as exc:
        raise CablingInputError(str(exc)[:120], file=source, line=lineno) from None


def format_node_name_map(names: dict[str, str], header: str = "") -> str:
    """Text of a node-name-map for ibnetdiscover, OpenSM and UFM (``0x<guid> "name"``)."""
    lines = [f"# {h}" for h in header.splitlines()] if header else []
    lines += [f'0x{guid} "{name}"' for guid, name in sorted(names.items(), key=lambda kv: kv[1])]
    return "\n".join(lines) + "\n"


def parse_guid_list(text: str, source: str = "<guid list>") -> list[str]:
    """A list of GUIDs, one per line (``S-<guid>``, ``H-<guid>`` or ``0x<guid>``; ``#`` comments)."""
    out: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out.append(normalize_guid(line))
        except ValueError:
            raise CablingInputError(f"not a GUID: {line[:40]!r}", file=source, line=lineno,
                                    hint="one GUID per line, e.g. S-0008f10500108098 or 0x0008f10500108098") from None
    return out
